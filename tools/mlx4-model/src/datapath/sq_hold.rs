//! A send queue that cannot run now (`qp::SqHold`): the QP in SQD (or
//! draining into it), or its SQ behind an RNR retry (`rnr`). A send
//! doorbell or BlueFlame burst then is held: counted (`sq_held`),
//! recorded, and settled when the SQ runs again (SQD2RTS, the retry
//! done), in order, as IB's SQD takes posts and runs them after SQD2RTS
//! (IB 10.3.1) and RC's SQ is ordered. And the state a send WQE's error
//! leaves (SQE or ERR).

use super::engine::Engine;
use crate::cq::syndrome;
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::protocol::Code;
use crate::qp::{service, QpState};
use serde_json::json;

/// The state a send WQE completing in error with `syn` leaves its QP in:
/// a UD, UC or MLX QP goes to SQE, its RQ still receiving (IB 10.3.1; the
/// MAD layer counts on it: `core/mad.c` moves QP1 from SQE back to RTS
/// after a failed send); RC to ERR; a flush leaves the state as it is; a
/// local QP operation error (a WQE the QP cannot execute) takes any QP to
/// ERR.
pub(crate) fn after_send_error(state: QpState, st: u8, syn: u8) -> QpState {
    let datagram_like = matches!(st, service::UD | service::UC | service::MLX);
    match syn {
        syndrome::WR_FLUSH_ERR if state.flushes() => state,
        syndrome::LOCAL_QP_OP_ERR => QpState::Err,
        _ if datagram_like && state != QpState::Err => QpState::Sqe,
        _ => QpState::Err,
    }
}

impl<M: GuestMemory, I: Irq> Engine<'_, M, I> {
    /// A send doorbell or BF burst (`by`) on UAR `page` for QP `qpn`,
    /// whose SQ may be held. True: taken care of here (held, or run with
    /// the ones held before it); false: the caller goes on as usual.
    pub(crate) fn hold_post(&mut self, qpn: u32, page: u32, by: &'static str) -> bool {
        let Some((usr_page, state)) = self.qps.get(qpn).map(|qp| (qp.usr_page, qp.state)) else {
            return false;
        };
        if usr_page != page {
            return false;
        }
        let stopped = matches!(state, QpState::Sqd | QpState::SqDraining);
        let rnr = self.qps.rnr_pending(qpn);
        let held = self.qps.hold(qpn).map_or(0, |h| h.held);
        if !stopped && !rnr && (held == 0 || state != QpState::Rts) {
            return false;
        }
        self.qps.hold_mut(qpn).held += 1;
        if stopped || rnr {
            self.env.counters.global.sq_held += 1;
            let state = state.as_str();
            self.env.trace.record(
                "sq_held",
                || json!({"qpn": qpn, "by": by, "state": state, "rnr": rnr, "held": held + 1}),
            );
            return true;
        }
        self.env.post_start_ns = self.env.mmio_start_ns;
        self.resume_sq(qpn);
        true
    }

    /// Runs QP `qpn`'s SQ for the announcements held while it could not,
    /// settling each against a WQE the scan took (or one an earlier scan
    /// ran ahead to); a scan stopped by a new RNR NAK leaves the rest held.
    pub(crate) fn resume_sq(&mut self, qpn: u32) {
        let Some((page, state)) = self.qps.get(qpn).map(|qp| (qp.usr_page, qp.state)) else {
            return;
        };
        let held = std::mem::take(&mut self.qps.hold_mut(qpn).held);
        self.qps.hold_mut(qpn).resume = false;
        if held == 0 || state != QpState::Rts || self.qps.rnr_pending(qpn) {
            self.qps.hold_mut(qpn).held = held;
            self.qps.tidy_hold(qpn);
            return;
        }
        let taken = self.run_sq(qpn, page);
        self.env.trace.record(
            "sq_resumed",
            || json!({"qpn": qpn, "held": held, "taken": taken}),
        );
        let matched = taken.min(held);
        if self.qps.rnr_pending(qpn) {
            // Those it did not reach wait for the retry.
            self.qps.hold_mut(qpn).held = held - matched;
            if let Some(qp) = self.qps.get_mut(qpn) {
                qp.sq_ahead += taken - matched;
            }
            return;
        }
        if let Some(qp) = self.qps.get_mut(qpn) {
            qp.sq_ahead += taken - matched;
        }
        for _ in matched..held {
            if !self.settle_announcement(qpn, 0, "held") {
                self.env.protocol_error(
                    Code::DoorbellNothingToFetch,
                    format!(
                        "held send doorbell for qp {qpn:#x}: no valid WQE at the consumer index"
                    ),
                );
            }
        }
        self.qps.tidy_hold(qpn);
    }

    /// SQD2RTS (or SQERR2RTS) left announcements held: run them now,
    /// right after the command.
    pub(crate) fn resume_flagged(&mut self) {
        for qpn in self.qps.held_qpns() {
            if self.qps.hold(qpn).is_some_and(|h| h.resume) {
                self.env.post_start_ns = self.env.clock.now();
                self.resume_sq(qpn);
            }
        }
    }
}
