//! RNR retry on RC (IB 9.7.5.2.8, 9.7.6.1.5). A SEND or RDMA_WRITE_IMM
//! that finds the responder's RQ empty draws an RNR NAK (counted in
//! `rnr_errors`); the requester keeps the WQE (not consumed, no CQE) and
//! retries it after the responder's min RNR timer (its ctx 0x94 bits
//! 28..24, `ib/qp.c`: `attr->min_rnr_timer << 24`), up to its own
//! rnr_retry times (params1 bits 15..13, `attr->rnr_retry << 13`; 7:
//! forever). Only when a NAK finds them spent does the WQE complete with
//! RNR_RETRY_EXC_ERR (`rnr_retry_exceeded`): rnr_retry n allows n + 1
//! attempts. Meanwhile the QP's later WQEs wait behind it (`sq_hold`).
//!
//! The clock. The modelled PCIe clock (`timing`) moves only with
//! transactions, and a receive is posted by a write to host memory the
//! model does not see, so the retry runs on the caller's timer clock:
//! `Device::tick(now_ns)`, which the server calls from a thread of its
//! own (a wall clock, at most every `TICK_NS`), the tests with the times
//! they choose. A NAK is scheduled by the first tick after it, due
//! `delay_ns` later, and retried by the first tick at or past that; the
//! delay is the timer's value, but at least `MIN_RETRY_NS`, so that a QP
//! retries at most 4 times a millisecond (the doorbell record is read
//! once per retry, never polled). The retry's own transactions move the
//! modelled clock as a first attempt's would; the RNR wait does not.
//!
//! UC has no RNR NAK in IB (the responder drops the message); the model
//! still completes a UC SEND to an empty RQ with RNR_RETRY_EXC_ERR, as
//! before, at once.

use super::engine::Engine;
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::qp::{service, QpState, RnrWait};
use crate::wqe::{self, opcode};
use serde_json::json;

/// The least time between two attempts of one WQE (ns).
pub const MIN_RETRY_NS: u64 = 250_000;
/// How often the server's timer thread ticks at most (ns).
pub const TICK_NS: u64 = 1_000_000;

/// IB's RNR NAK timer encoding (IB 9.7.5.2.8, `ib_verbs.h`
/// IB_RNR_TIMER_*), in units of 10 µs: 0 is 655.36 ms.
const RNR_TIMER_10US: [u32; 32] = [
    65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536,
    2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
];

/// The RNR timer `t`'s delay in ns, at least MIN_RETRY_NS.
pub fn rnr_delay_ns(t: u8) -> u64 {
    let ns = u64::from(RNR_TIMER_10US[usize::from(t & 0x1f)]) * 10_000;
    ns.max(MIN_RETRY_NS)
}

impl<M: GuestMemory, I: Irq> Engine<'_, M, I> {
    /// Responder `d` NAKed WQE `idx` (`bytes`) of QP `s` for RNR. True:
    /// the WQE waits for its retry; false: no retry (not RC, or rnr_retry
    /// spent) and the caller completes it with RNR_RETRY_EXC_ERR.
    pub(crate) fn rnr_nak(&mut self, s: u32, idx: u32, bytes: &[u8], d: u32) -> bool {
        let Some(qp) = self.qps.get(s) else {
            return false;
        };
        if qp.service != service::RC {
            return false;
        }
        let limit = qp.rnr_retry();
        let timer = self.qps.get(d).map_or(0, |dq| dq.min_rnr_timer());
        let before = self.qps.hold(s).and_then(|h| h.rnr.as_ref());
        let naks = before.filter(|w| w.idx == idx).map_or(0, |w| w.naks) + 1;
        if limit != 7 && naks > u32::from(limit) {
            self.qps.hold_mut(s).rnr = None;
            self.qps.tidy_hold(s);
            self.env.counters.global.rnr_retry_exceeded += 1;
            self.env.trace.record(
                "rnr_retry_exceeded",
                || json!({"qpn": s, "to": d, "index": idx, "naks": naks, "rnr_retry": limit}),
            );
            return false;
        }
        let delay_ns = rnr_delay_ns(timer);
        self.qps.hold_mut(s).rnr = Some(RnrWait {
            idx,
            bytes: bytes.to_vec(),
            naks,
            delay_ns,
            due_ns: None,
        });
        self.env.trace.record("rnr_nak", || {
            json!({"qpn": s, "to": d, "index": idx, "naks": naks, "rnr_retry": limit,
                   "min_rnr_timer": timer, "delay_ns": delay_ns})
        });
        true
    }

    /// The timer clock reads `now_ns`: schedules the NAKs since the last
    /// tick, retries those due. Returns the earliest retry still due
    /// (None: no RNR retry waits).
    pub(crate) fn run_timers(&mut self, now_ns: u64) -> Option<u64> {
        for qpn in self.qps.held_qpns() {
            let state = self.qps.get(qpn).map(|qp| qp.state);
            let Some((due_ns, delay_ns)) = self
                .qps
                .hold(qpn)
                .and_then(|h| h.rnr.as_ref())
                .map(|w| (w.due_ns, w.delay_ns))
            else {
                continue;
            };
            if !matches!(state, Some(QpState::Rts | QpState::SqDraining)) {
                // The QP left RTS meanwhile (2ERR_QP): the WQE is flushed
                // with the rest of its SQ, as a QP in ERR flushes.
                self.qps.hold_mut(qpn).rnr = None;
                self.qps.tidy_hold(qpn);
                self.flush_sq(qpn);
                continue;
            }
            match due_ns {
                None => {
                    let due = now_ns.saturating_add(delay_ns);
                    if let Some(w) = self.qps.hold_mut(qpn).rnr.as_mut() {
                        w.due_ns = Some(due);
                    }
                }
                Some(due) if now_ns >= due => self.rnr_retry(qpn),
                Some(_) => {}
            }
        }
        self.qps
            .held_qpns()
            .into_iter()
            .filter_map(|q| self.qps.hold(q).and_then(|h| h.rnr.as_ref()))
            .map(|w| w.due_ns.unwrap_or(now_ns))
            .min()
    }

    /// Attempts QP `s`'s waiting WQE again. If it no longer waits after
    /// (delivered, or failed), the SQ goes on: SQD if it was draining,
    /// else the announcements held behind it run.
    fn rnr_retry(&mut self, s: u32) {
        let Some(w) = self.qps.hold(s).and_then(|h| h.rnr.clone()) else {
            return;
        };
        let Some(qp) = self.qps.get(s) else {
            return;
        };
        let base = qp.sq_off + qp.sq_entry_off(w.idx);
        let parsed = wqe::parse(&w.bytes, qp.service, base);
        self.env.counters.global.rnr_retries += 1;
        self.env.trace.record(
            "rnr_retry",
            || json!({"qpn": s, "index": w.idx, "attempt": w.naks + 1}),
        );
        // Not a post: no post-to-wire sample; its one-way latency counts
        // from the retry.
        self.env.post_start_ns = self.env.clock.now();
        self.env.post_timed = false;
        match parsed {
            Ok(p) if p.ctrl.opcode == opcode::RDMA_WRITE_IMM => {
                self.rdma_write(s, w.idx, &p, &w.bytes)
            }
            Ok(p) => self.send_message(s, w.idx, &p, &w.bytes),
            Err(_) => {}
        }
        self.env.post_timed = true;
        let again = self.qps.hold(s).and_then(|h| h.rnr.as_ref());
        if again.is_some_and(|a| a.naks > w.naks) {
            return;
        }
        self.qps.hold_mut(s).rnr = None;
        match self.qps.get(s).map(|qp| qp.state) {
            Some(QpState::SqDraining) => self.qps.sq_drained(self.env, self.eqs, s),
            Some(QpState::Rts) => self.resume_sq(s),
            // It failed: what was held behind it is flushed with it.
            Some(state) if state.flushes() => {
                self.qps.hold_mut(s).held = 0;
                self.flush_sq(s);
            }
            _ => {}
        }
        self.qps.tidy_hold(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ib_timer_table() {
        assert_eq!(rnr_delay_ns(0), 655_360_000);
        assert_eq!(rnr_delay_ns(1), MIN_RETRY_NS);
        assert_eq!(rnr_delay_ns(12), 640_000);
        assert_eq!(rnr_delay_ns(14), 1_280_000);
        assert_eq!(rnr_delay_ns(31), 491_520_000);
    }
}
