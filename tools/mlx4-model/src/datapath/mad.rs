//! Sends on the special QPs (QP0/QP1, service type MLX) in strict
//! firmware: executed, completed and counted, not delivered.
//!
//! mlx4_ib writes an MLX WQE (`ib/qp.c:_mlx4_ib_post_send`,
//! `build_mlx_header`): the control segment overlaid by
//! `mlx4_wqe_mlx_seg` (owner/opcode and DS as in any WQE, the CQ_UPDATE
//! bits kept in its flags at +8, VL15/SLR/SL beside them, the DLID at
//! +12), the packed LRH/GRH/BTH/DETH in one or two inline segments that do
//! not cross 64 bytes, the data segments, then a 4-byte inline segment for
//! the ICRC. `wqe::parse` reads that as any SEND (inline, data, inline);
//! the gather is the RC send's (the reserved lkey on an rlkey QP, or a
//! registered region). The packet goes nowhere: there is no fabric, no SM,
//! no SA answering over QP1; the payload (headers and data) is recorded.

use super::engine::Engine;
use super::send::send_cqe;
use crate::bytes::hex;
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::port_counters::Message;
use crate::wqe::Wqe;
use serde_json::json;

impl<M: GuestMemory, I: Irq> Engine<'_, M, I> {
    /// Executes a parsed SEND of the MLX QP `s` at SQ index `idx`: its
    /// payload gathered, counted (`mad_sends`) and recorded (`mad_send`),
    /// then the send CQE if signalled. A gather it may not read completes
    /// in error as on any QP.
    pub(crate) fn mad_send(&mut self, s: u32, idx: u32, w: &Wqe, bytes: &[u8]) {
        let c = w.ctrl;
        let Some(payload) = self.gather(s, idx, w, bytes) else {
            return;
        };
        self.wqe_ready();
        // No fabric: the packet leaves and nothing comes back.
        let m = Message::Raw {
            bytes: payload.len() as u64,
        };
        self.on_wire(s, m, false);
        self.env.counters.global.mad_sends += 1;
        self.env.trace.record("mad_send", || {
            json!({"qpn": s, "index": idx, "opcode": c.opcode, "len": payload.len(),
                   "payload": hex(&payload)})
        });
        self.advance(s, &c);
        if c.signaled() {
            let cqe = send_cqe(s, idx, c.opcode, payload.len() as u64);
            self.complete(s, cqe, false);
        }
    }
}
