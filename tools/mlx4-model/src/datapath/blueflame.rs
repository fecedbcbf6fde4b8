//! BlueFlame (§4.6, §4.7): writes to a BF page are collected per (page,
//! half); a complete WQE runs from its bytes or falls back to the doorbell
//! path, by the contract's rule.

use super::engine::Engine;
use super::send::Origin;
use crate::bytes::be32;
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::layout::{BF_HALF, BF_REG_SIZE};
use crate::protocol::{Code, FallbackReason};
use crate::qp::QpState;
use crate::wqe::{Ctrl, CTRL_SIZE};
use serde_json::json;
use std::collections::BTreeMap;

/// Bytes of one burst so far, and the size of its first write (every later
/// write must have the same size).
#[derive(Debug, Clone)]
pub struct Burst {
    pub bytes: Vec<u8>,
    pub write_size: usize,
    /// The modelled clock at its first write: the post's start.
    pub t0: u64,
}

#[derive(Debug, Default, Clone)]
pub struct BfCollector {
    /// (BF page = its UAR index, half) -> pending burst.
    bursts: BTreeMap<(u32, u8), Burst>,
}

impl BfCollector {
    /// The bursts still pending, in (page, half) order; none is left.
    pub(crate) fn take_pending(&mut self) -> BTreeMap<(u32, u8), Burst> {
        std::mem::take(&mut self.bursts)
    }

    /// A write to BF page `page` at `in_page`.
    pub(crate) fn write<M: GuestMemory, I: Irq>(
        &mut self,
        eng: &mut Engine<'_, M, I>,
        page: u32,
        in_page: u64,
        data: &[u8],
    ) {
        if in_page >= BF_REG_SIZE {
            eng.env.protocol_error(
                Code::BfBadRegister,
                format!(
                    "BF page {page}: write to register {} (only register 0 is accepted)",
                    in_page / BF_REG_SIZE
                ),
            );
            return;
        }
        let half = (in_page / BF_HALF) as u8;
        let off = (in_page % BF_HALF) as usize;
        let key = (page, half);
        if off + data.len() > BF_HALF as usize {
            if let Some(b) = self.bursts.remove(&key) {
                Self::abort(eng, page, half, b, FallbackReason::OutOfOrder);
            }
            eng.env.protocol_error(
                Code::BfCrossesHalf,
                format!(
                    "BF page {page}: {}-byte write at +{in_page:#x} crosses into the other half",
                    data.len()
                ),
            );
            return;
        }
        match self.bursts.remove(&key) {
            None if off == 0 => {}
            None => {
                eng.env.protocol_error(
                    Code::BfStrayWrite,
                    format!("BF page {page} half {half}: write at +{off:#x} with no burst started"),
                );
                return;
            }
            Some(b) if off == 0 => Self::abort(eng, page, half, b, FallbackReason::Incomplete),
            Some(mut b) if off == b.bytes.len() && data.len() == b.write_size => {
                b.bytes.extend_from_slice(data);
                self.progress(eng, page, half, b);
                return;
            }
            Some(b) => {
                // A gap, a step back or a size change ends the burst; this
                // write belongs to nothing.
                Self::abort(eng, page, half, b, FallbackReason::OutOfOrder);
                return;
            }
        }
        let b = Burst {
            bytes: data.to_vec(),
            write_size: data.len(),
            t0: eng.env.mmio_start_ns,
        };
        self.progress(eng, page, half, b);
    }

    /// Keeps collecting, or judges the burst once its WQE is complete.
    fn progress<M: GuestMemory, I: Irq>(
        &mut self,
        eng: &mut Engine<'_, M, I>,
        page: u32,
        half: u8,
        b: Burst,
    ) {
        if b.bytes.len() < CTRL_SIZE {
            self.bursts.insert((page, half), b);
            return;
        }
        let c = Ctrl::decode(&b.bytes);
        let need = c.wqe_bytes().div_ceil(64) * 64;
        if c.ds == 0 || need > BF_HALF as usize {
            Self::abort(eng, page, half, b, FallbackReason::Malformed);
            return;
        }
        if b.bytes.len() < need {
            self.bursts.insert((page, half), b);
            return;
        }
        if b.bytes.len() > need {
            eng.env.protocol_error(
                Code::BfStrayWrite,
                format!(
                    "BF page {page} half {half}: {} bytes written for a {need}-byte WQE",
                    b.bytes.len()
                ),
            );
        }
        eng.env.post_start_ns = b.t0;
        eng.bf_complete(page, half, &b.bytes[..need], c.wqe_bytes());
    }

    /// A burst that cannot be used: a protocol error, then the fallback if
    /// the QP can be named (8 bytes seen) and is in RTS.
    fn abort<M: GuestMemory, I: Irq>(
        eng: &mut Engine<'_, M, I>,
        page: u32,
        half: u8,
        b: Burst,
        reason: FallbackReason,
    ) {
        let (code, what) = match reason {
            FallbackReason::Incomplete => (Code::BfIncomplete, "ended incomplete by a new burst"),
            FallbackReason::OutOfOrder => (Code::BfOutOfOrder, "ended by an out-of-order write"),
            _ if b.bytes.len() >= 8 && b.bytes[7] & 0x3f == 0 => (Code::BfDsZero, "has DS 0"),
            _ => (Code::BfTooLarge, "is larger than a BlueFlame half"),
        };
        eng.env.protocol_error(
            code,
            format!(
                "BF page {page} half {half}: burst of {} bytes {what}",
                b.bytes.len()
            ),
        );
        if b.bytes.len() < 8 {
            return;
        }
        let qpn = be32(&b.bytes, 4) >> 8;
        if eng.bf_qp_ready(qpn, page) {
            eng.env.post_start_ns = b.t0;
            eng.fallback(qpn, page, half, reason);
        }
    }
}

impl<M: GuestMemory, I: Irq> Engine<'_, M, I> {
    fn bf_qp_ready(&mut self, qpn: u32, page: u32) -> bool {
        match self.qps.get(qpn).map(|qp| qp.state) {
            None => {
                self.env.protocol_error(
                    Code::BfUnknownQp,
                    format!("BF page {page}: qp {qpn:#x} does not exist"),
                );
                false
            }
            Some(s) if s.flushes() && self.qps.get(qpn).is_some_and(|qp| qp.usr_page == page) => {
                // As a doorbell: the WQE is in the send queue too, and is
                // flushed with whatever else the driver posted meanwhile.
                self.flush_sq(qpn);
                false
            }
            // As a doorbell: held in SQD or behind an RNR retry, or run
            // after the ones held before it (`sq_hold`).
            Some(_) if self.hold_post(qpn, page, "bf") => false,
            Some(s) if s != QpState::Rts => {
                self.env.protocol_error(
                    Code::BfNotRts,
                    format!("BF page {page}: qp {qpn:#x} is in state {s:?}"),
                );
                false
            }
            Some(_) => true,
        }
    }

    /// The contract's rule: execute from the BF bytes only if the page is
    /// the QP's, the counter and owner match the consumer index, and the
    /// forced fallback does not apply. `burst` is what was written (the WQE
    /// padded to 64 bytes), the WQE its first `wqe_len` bytes.
    fn bf_complete(&mut self, page: u32, half: u8, burst: &[u8], wqe_len: usize) {
        let wqe = &burst[..wqe_len];
        let c = Ctrl::decode(wqe);
        let qpn = c.bf_qpn;
        if !self.bf_qp_ready(qpn, page) {
            return;
        }
        let Some(qp) = self.qps.get(qpn) else {
            return;
        };
        let ci = qp.sq_ci;
        // The burst of a WQE that a scan already ran (see `Qp::sq_ahead`).
        if qp.usr_page == page
            && qp.sq_ahead > 0
            && c.counter == ci.wrapping_sub(qp.sq_ahead) as u16
        {
            self.settle_announcement(qpn, 0, "bf");
            return;
        }
        let reason = if qp.usr_page != page {
            Some(FallbackReason::ForeignPage)
        } else if c.counter != ci as u16 {
            Some(FallbackReason::Counter)
        } else if c.owner != qp.owner_for(ci) {
            Some(FallbackReason::Owner)
        } else if self.diag.count_valid_bf_post() {
            Some(FallbackReason::Forced)
        } else {
            None
        };
        match reason {
            None => self.execute_wqe(qpn, ci, wqe, Origin::Bf { page, half, burst }),
            Some(r) => self.fallback(qpn, page, half, r),
        }
    }

    /// Runs the send doorbell for `qpn`: the WQE comes from the SQ by DMA.
    fn fallback(&mut self, qpn: u32, page: u32, half: u8, reason: FallbackReason) {
        self.env.counters.fallback(qpn, reason);
        self.env.trace.record(
            "bf_fallback",
            || json!({"qpn": qpn, "page": page, "half": half, "reason": reason.as_str()}),
        );
        let taken = self.run_sq(qpn, page);
        if !self.settle_announcement(qpn, taken, "bf_fallback") {
            self.env.protocol_error(
                Code::FallbackNothingToFetch,
                format!(
                    "BF fallback ({}) for qp {qpn:#x}: no valid WQE in the send queue",
                    reason.as_str()
                ),
            );
        }
    }
}
