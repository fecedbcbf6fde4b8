//! The data path's view of the device: the environment and the tables a
//! post may touch, borrowed for one MMIO write. Its methods live in the
//! sibling files, one per concern.

use crate::cq::CqTable;
use crate::diag::DiagState;
use crate::env::Env;
use crate::eq::EqTable;
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::mr::MrTable;
use crate::qp::QpTable;

pub(crate) struct Engine<'a, M, I> {
    pub env: &'a mut Env<M, I>,
    pub qps: &'a mut QpTable,
    pub cqs: &'a mut CqTable,
    /// Only through `cqs` (completion and CQ error events).
    pub eqs: &'a mut EqTable,
    /// Read only: a post checks keys, it never changes a region.
    pub mrs: &'a MrTable,
    /// The records of the last doorbell and WQE, FALLBACK_EVERY.
    pub diag: &'a mut DiagState,
}

impl<M: GuestMemory, I: Irq> Engine<'_, M, I> {
    /// Writes `cqe` to CQ `cqn` for QP `qpn` (`CqTable::post_cqe`).
    pub(crate) fn post_cqe(
        &mut self,
        cqn: u32,
        qpn: u32,
        cqe: [u8; 32],
        solicited: bool,
    ) -> Option<u64> {
        self.cqs
            .post_cqe(self.env, self.eqs, cqn, qpn, cqe, solicited)
    }
}
