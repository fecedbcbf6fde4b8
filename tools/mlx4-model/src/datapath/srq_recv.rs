//! The receiving side of a QP that uses an SRQ (`srq`, `qp::srq`): every
//! receive path (`recv`: RC/UC SEND and RDMA_WRITE_IMM, UD) asks here
//! where the receive WQE is and consumes it here, from the QP's RQ or its
//! SRQ:
//!
//! - available: the SRQ's doorbell record (software's count of posted
//!   WQEs, low 16 bits) less the WQEs consumed, mod 2^16; a count more
//!   than the SRQ holds is protocol error `rq_head_ahead` (and an SRQ
//!   refusal); none is an empty RQ, as the RQ's own;
//! - the WQE: at the SRQ's head, its data segments after the 16-byte next
//!   segment, key-checked with the SRQ's PD (its WQEs are the SRQ's,
//!   `core/srq.c:mlx4_srq_alloc` gives the SRQ a PD of its own) and the
//!   receiving QP's rlkey;
//! - consuming it: the head follows the WQE's next_wqe_index, read when
//!   the WQE is (or, for an RDMA_WRITE_IMM, which reads no WQE, when it is
//!   consumed); then, if the SRQ is armed and fewer WQEs than its
//!   watermark are left, the SRQ_LIMIT event (type 0x14, the SRQN at
//!   EQE+0x04 as `core/eq.c:mlx4_eq_int` reads `event.srq.srqn`) on the EQ
//!   the type is mapped to, and the SRQ disarmed (watermark 0): the limit
//!   fires once per arm, software arms it again (`ib_modify_srq` with
//!   IB_SRQ_LIMIT, `ib/srq.c:mlx4_ib_modify_srq`); QUERY_SRQ then reads 0.
//!   Arming fires nothing by itself, however few WQEs are left: the event
//!   comes with a consume.

use super::engine::Engine;
use crate::bytes::{be16, put_be32};
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::protocol::Code;
use crate::rq::RQ_DB_LEN;
use crate::srq::{EVENT_SRQ_LIMIT, NEXT_SEG_SIZE};
use crate::timing::Read;
use serde_json::json;

/// Where QP `d`'s next receive WQE is (`Engine::recv_wqe_at`).
pub(crate) struct WqeAt {
    pub addr: u64,
    pub stride: usize,
    /// Bytes before its data segments: SRQ_NEXT_SEG_SIZE for an SRQ WQE.
    pub skip: usize,
    /// The PD its lkeys must match: the QP's, or its SRQ's.
    pub pd: u32,
    /// The SRQ it is on, if any.
    pub srqn: Option<u32>,
}

impl<M: GuestMemory, I: Irq> Engine<'_, M, I> {
    /// The SRQ QP `d` takes its receives from, if any.
    pub(crate) fn srq_of(&self, d: u32) -> Option<u32> {
        self.qps.get(d)?.srqn()
    }

    /// Reads SRQ `srqn`'s doorbell record for QP `d`: the WQEs posted and
    /// not consumed (at most the SRQ's size); None if the record cannot be
    /// read or the SRQ is gone.
    pub(crate) fn srq_available(&mut self, d: u32, srqn: u32) -> Option<u32> {
        let db = self.qps.srqs.get(srqn)?.db;
        let mut rec = [0u8; RQ_DB_LEN];
        self.env
            .dma_read(db, &mut rec, "srq_db_rec", Read::Cached)
            .ok()?;
        let counter = crate::rq::head(&rec);
        let srq = self.qps.srqs.get_mut(srqn)?;
        srq.counter = counter;
        let (avail, ahead) = srq.available(counter);
        let (entries, consumed) = (srq.entries(), srq.consumed as u16);
        if ahead {
            self.env.counters.global.srq.srq_refused += 1;
            self.env.protocol_error(
                Code::RqHeadAhead,
                format!(
                    "qp {d:#x}: SRQ {srqn:#x} counter {counter:#x} is more than \
                     {entries} ahead of the WQEs consumed {consumed:#x}"
                ),
            );
        }
        Some(avail)
    }

    /// Where `d`'s next receive WQE is: at its RQ's consumer index, or at
    /// its SRQ's head. None if `d` or its SRQ is gone.
    pub(crate) fn recv_wqe_at(&self, d: u32) -> Option<WqeAt> {
        let dq = self.qps.get(d)?;
        let Some(srqn) = dq.srqn() else {
            return Some(WqeAt {
                addr: dq.rq_entry_addr(dq.rq_ci),
                stride: dq.rq_stride() as usize,
                skip: 0,
                pd: dq.pd,
                srqn: None,
            });
        };
        let srq = self.qps.srqs.get(srqn)?;
        Some(WqeAt {
            addr: srq.wqe_addr(srq.head),
            stride: srq.stride(),
            skip: NEXT_SEG_SIZE,
            pd: srq.pd,
            srqn: Some(srqn),
        })
    }

    /// The WQE at SRQ `srqn`'s head was read (`wqe`): its next_wqe_index
    /// is where the head goes when it is consumed.
    pub(crate) fn srq_wqe_read(&mut self, srqn: u32, wqe: &[u8]) {
        if let Some(srq) = self.qps.srqs.get_mut(srqn) {
            srq.next_of_head = Some(be16(wqe, 2));
        }
    }

    /// `d`'s receive WQE `ci` is consumed: its RQ's consumer index
    /// advances, or its SRQ's head follows the WQE's link.
    pub(crate) fn consume_recv(&mut self, d: u32, ci: u32) {
        match self.srq_of(d) {
            None => {
                if let Some(dq) = self.qps.get_mut(d) {
                    dq.rq_ci = ci.wrapping_add(1);
                }
            }
            Some(srqn) => self.srq_consume(d, srqn),
        }
    }

    fn srq_consume(&mut self, d: u32, srqn: u32) {
        let Some(srq) = self.qps.srqs.get(srqn) else {
            return;
        };
        let (head, peeked, addr) = (srq.head, srq.next_of_head, srq.wqe_addr(srq.head));
        let next = match peeked {
            Some(n) => n,
            None => {
                let mut seg = [0u8; NEXT_SEG_SIZE];
                if self
                    .env
                    .dma_read(addr, &mut seg, "srq_next", Read::Cached)
                    .is_err()
                {
                    // The head stays: the WQE is not consumed.
                    self.env.counters.global.srq.srq_refused += 1;
                    return;
                }
                be16(&seg, 2)
            }
        };
        let Some(srq) = self.qps.srqs.get_mut(srqn) else {
            return;
        };
        srq.head = next;
        srq.next_of_head = None;
        srq.consumed = srq.consumed.wrapping_add(1);
        let (left, _) = srq.available(srq.counter);
        let limit = srq.limit;
        self.env.counters.global.srq.srq_wqes += 1;
        self.env.trace.record(
            "srq_consume",
            || json!({"srqn": srqn, "qpn": d, "index": head, "next": next, "left": left}),
        );
        if limit != 0 && left < u32::from(limit) {
            srq.limit = 0;
            self.srq_limit_event(srqn, left, limit);
        }
    }

    /// SRQ_LIMIT for `srqn` (`left` WQEs under watermark `limit`).
    fn srq_limit_event(&mut self, srqn: u32, left: u32, limit: u16) {
        let mut body = [0u8; 24];
        put_be32(&mut body, 0, srqn & 0xff_ffff); // EQE+0x04
        let posted = self.eqs.post_event(self.env, EVENT_SRQ_LIMIT, &body);
        self.env.counters.global.srq.srq_limit_events += 1;
        self.env.trace.record(
            "srq_limit",
            || json!({"srqn": srqn, "left": left, "limit": limit, "posted": posted}),
        );
    }
}
