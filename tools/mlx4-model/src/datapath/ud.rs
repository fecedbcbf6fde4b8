//! A SEND or SEND_IMM on a UD QP (service type 3): a datagram to the QP
//! its datagram segment names (`wqe::Datagram`: libmlx4
//! `set_datagram_seg`, the address handle of `mlx4_create_ah`), on this
//! adapter's one port. UD is unreliable: the sender completes in success
//! whatever becomes of the datagram, and nothing answers it. By rules, in
//! order.
//!
//! The sender (a refusal completes the WQE with its syndrome, `s` to ERR,
//! counted in `ud_refused` (0x6a0) and recorded `deliver_error`):
//!
//! a. the address vector's PD (port_pd bits 23..0) is `s`'s (ctx 0x04);
//!    else LOCAL_QP_OP_ERR. IB keeps an address handle in a PD and a QP
//!    may use only those of its own; rxe answers so (`rxe_get_av`: "PDs
//!    don't match for AH and QP", IB_WC_LOC_QP_OP_ERR): the work request
//!    is one this QP cannot carry, not a memory access (LOCAL_PROT_ERR is
//!    for the keys of data segments);
//! b. its port (port_pd bits 31..24) is 1, the adapter's one port; else
//!    LOCAL_QP_OP_ERR (the model's choice, by rule a's reasoning);
//! c. the message fits one packet: at most the QP's path MTU (mtu_msgmax
//!    bits 7..5, what INIT2RTR set; mainline sets 4096 for UD); else
//!    LOCAL_LENGTH_ERR;
//! d. the gather as any SEND's (`gather`: keys, LOCAL_PROT_ERR).
//!
//! Then the datagram leaves (the wire's cost), counted in `ud_sends`
//! (0x688). Where it goes (`ud_route`), each miss a silent drop: no CQE on
//! either side but the sender's success, counted in `ud_dropped` (0x698)
//! and by reason (summary `ud_drop_reasons`), recorded `ud_drop` with the
//! reason:
//!
//! e. `dlid`: the DLID is the port's LID (LMC 0: exactly it); anything
//!    else leaves the port, and there is no fabric;
//! f. `dgid`: with a GRH (g_slid bit 7), the DGID is the port's GID
//!    (`GID_PREFIX`, the port GUID); IB drops a packet whose DGID is none
//!    of the port's;
//! g. `special_qp`: a dqpn of 0 or 1 (QP0, QP1): the model routes no
//!    datagram to the special QPs (nothing receives on them, "Sends on the
//!    special QPs");
//! h. `no_qp`, `not_ud`, `not_ready`, `no_rq`: the QP numbered dqpn
//!    exists, is a UD QP, is in RTR or RTS, and has an RQ (not an SRQ,
//!    which the model does not run);
//! i. `pkey`: the sender's and the receiver's P_Keys (the port's table at
//!    each QP's P_Key index: 0xffff at 0, invalid elsewhere) match: the
//!    same low 15 bits, not 0, one of them a full member;
//! j. `qkey`: the Q_Key, the WQE's, or the sender's own (ctx 0xa8) when
//!    the WQE's has bit 31 set (IB's controlled Q_Key), is the receiver's;
//! k. `rq_empty`: a receive WQE is posted (UD has no RNR: the datagram is
//!    dropped, nothing retries).
//!
//! The receiver's part is `ud_recv`. Then the sender's send CQE if
//! signalled (opcode SEND / SEND_IMM, byte_cnt the message's length),
//! after the receiver's CQE if there is one.

use super::engine::Engine;
use super::send::send_cqe;
use crate::cq::syndrome;
use crate::firmware::mad::{guid, pkey, GID_PREFIX, LID};
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::port_counters::Message;
use crate::qp::{service, ud_max_message};
use crate::wqe::{opcode, Datagram, Wqe};
use serde_json::json;

/// The adapter's one port.
pub const PORT: u8 = 1;
/// A P_Key's membership bit (full member).
const FULL_MEMBER: u16 = 0x8000;

/// Why a datagram was dropped (`ud_drop`'s `reason`).
pub mod drop {
    pub const DLID: &str = "dlid";
    pub const DGID: &str = "dgid";
    pub const SPECIAL_QP: &str = "special_qp";
    pub const NO_QP: &str = "no_qp";
    pub const NOT_UD: &str = "not_ud";
    pub const NOT_READY: &str = "not_ready";
    pub const NO_RQ: &str = "no_rq";
    pub const PKEY: &str = "pkey";
    pub const QKEY: &str = "qkey";
    pub const RQ_EMPTY: &str = "rq_empty";
}

/// The port's GID at index 0: what a DGID must name.
pub fn port_gid() -> [u8; 16] {
    let mut g = [0u8; 16];
    g[..8].copy_from_slice(&GID_PREFIX.to_be_bytes());
    g[8..].copy_from_slice(&guid(0).to_be_bytes());
    g
}

/// IB's P_Key match: the same partition (low 15 bits, 0 is invalid), at
/// least one side a full member.
pub fn pkey_match(a: u16, b: u16) -> bool {
    let (pa, pb) = (a & !FULL_MEMBER, b & !FULL_MEMBER);
    pa == pb && pa != 0 && (a | b) & FULL_MEMBER != 0
}

impl<M: GuestMemory, I: Irq> Engine<'_, M, I> {
    /// Executes a parsed SEND of the UD QP `s` at SQ index `idx` (`bytes`
    /// = the WQE).
    pub(crate) fn ud_send(&mut self, s: u32, idx: u32, w: &Wqe, bytes: &[u8]) {
        let c = w.ctrl;
        // wqe::parse gives every SEND of a UD QP its datagram segment.
        let Some(av) = w.datagram() else {
            return;
        };
        if let Err((why, syn)) = self.ud_sender(s, av, w.payload) {
            self.wqe_ready();
            self.env.counters.global.ud_refused += 1;
            self.delivery_failed(s, av.dqpn, why, syn);
            self.send_error(s, idx, &c, syn);
            return;
        }
        let Some(payload) = self.gather(s, idx, w, bytes) else {
            self.env.counters.global.ud_refused += 1;
            return;
        };
        let start = self.wqe_ready();
        let m = Message::Datagram {
            payload: payload.len() as u64,
            imm: c.opcode == opcode::SEND_IMM,
            grh: av.grh,
        };
        // To another LID it leaves the port (no fabric brings it back);
        // to ours the port receives it, whatever its QP then makes of it.
        self.on_wire(s, m, av.dlid == LID);
        self.env.counters.global.ud_sends += 1;
        match self.ud_route(s, av) {
            Ok(d) => self.ud_receive(s, d, &c, bytes, av, &payload, start),
            Err(reason) => self.ud_dropped(s, av, reason),
        }
        self.advance(s, &c);
        if c.signaled() {
            let cqe = send_cqe(s, idx, c.opcode, payload.len() as u64);
            self.complete(s, cqe, false);
        }
    }

    /// Rules a–c for a message of `len` bytes: Err(why, the syndrome).
    fn ud_sender(&self, s: u32, av: &Datagram, len: u64) -> Result<(), (&'static str, u8)> {
        let Some(q) = self.qps.get(s) else {
            return Err(("the sender is gone", syndrome::LOCAL_QP_OP_ERR));
        };
        if av.pd != q.pd {
            Err((
                "the address vector's PD is not the QP's",
                syndrome::LOCAL_QP_OP_ERR,
            ))
        } else if av.port != PORT {
            Err((
                "the address vector names no port",
                syndrome::LOCAL_QP_OP_ERR,
            ))
        } else if len > ud_max_message(q.mtu()) {
            Err(("longer than the path MTU", syndrome::LOCAL_LENGTH_ERR))
        } else {
            Ok(())
        }
    }

    /// Rules e–j: the receiving QP, or why the datagram is dropped.
    fn ud_route(&self, s: u32, av: &Datagram) -> Result<u32, &'static str> {
        let sq = self.qps.get(s).ok_or(drop::NO_QP)?;
        if av.dlid != LID {
            return Err(drop::DLID);
        }
        if av.grh && av.dgid != port_gid() {
            return Err(drop::DGID);
        }
        if av.dqpn <= 1 {
            return Err(drop::SPECIAL_QP);
        }
        let dq = self.qps.get(av.dqpn).ok_or(drop::NO_QP)?;
        if dq.service != service::UD {
            return Err(drop::NOT_UD);
        }
        if !dq.state.accepts_incoming() {
            return Err(drop::NOT_READY);
        }
        if !dq.receives() {
            return Err(drop::NO_RQ);
        }
        if !pkey_match(pkey(sq.pkey_index()), pkey(dq.pkey_index())) {
            return Err(drop::PKEY);
        }
        let qkey = if av.qkey & (1 << 31) != 0 {
            sq.qkey()
        } else {
            av.qkey
        };
        if qkey != dq.qkey() {
            return Err(drop::QKEY);
        }
        Ok(av.dqpn)
    }

    /// A datagram of `s` dropped for `reason`: counted and recorded.
    pub(crate) fn ud_dropped(&mut self, s: u32, av: &Datagram, reason: &'static str) {
        self.env.counters.ud_drop(reason);
        self.env.trace.record("ud_drop", || {
            json!({"from": s, "dqpn": av.dqpn, "dlid": av.dlid, "qkey": av.qkey,
                   "reason": reason})
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkeys_match_by_partition_with_one_full_member() {
        assert!(pkey_match(0xffff, 0xffff));
        assert!(pkey_match(0xffff, 0x7fff));
        assert!(!pkey_match(0x7fff, 0x7fff), "two limited members");
        assert!(!pkey_match(0xffff, 0x8001), "another partition");
        assert!(!pkey_match(0, 0) && !pkey_match(0x8000, 0x8000), "invalid");
    }

    #[test]
    fn the_port_gid_is_link_local_with_the_port_guid() {
        let g = port_gid();
        assert_eq!(g[..8], [0xfe, 0x80, 0, 0, 0, 0, 0, 0]);
        assert_eq!(g[8..], crate::firmware::caps::PORT1_GUID.to_be_bytes());
    }
}
