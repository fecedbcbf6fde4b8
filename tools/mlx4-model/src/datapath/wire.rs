//! The port's wire: a message the data path puts on it is charged (the
//! modelled wire time, `timing`) and counted in the port's counters
//! (`port_counters`, what the PMA reports), here and nowhere else. A
//! response (RDMA read data, an atomic acknowledge) travels within its
//! request's wire time and is only counted.

use super::engine::Engine;
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::port_counters::Message;
use crate::timing::Tx;

impl<M: GuestMemory, I: Irq> Engine<'_, M, I> {
    /// QP `s` transmits `m`; the port receives it back if `looped` (its
    /// destination is the port's own LID).
    pub(crate) fn on_wire(&mut self, s: u32, m: Message, looped: bool) {
        self.env.charge(Tx::Wire);
        self.count_on_wire(s, m, looped);
    }

    /// `m` of QP `s`'s exchange counted, not charged (a response).
    pub(crate) fn count_on_wire(&mut self, s: u32, m: Message, looped: bool) {
        let mtu = self.qps.get(s).map_or(0, |qp| qp.mtu());
        self.env.port.count(m, mtu, looped);
    }
}
