//! RNR retry on the timer clock (`datapath::rnr`): an RC SEND to an empty
//! RQ is NAKed and retried after the responder's min RNR timer, up to the
//! requester's rnr_retry (7: forever); later WQEs wait behind it.

use super::harness::*;
use super::strict_qp_states::{mailbox, modify};
use crate::bytes::{be32, put_be32};
use crate::command::{op, status};
use crate::cq::{syndrome, CQE_IS_SEND};
use crate::datapath::rnr::rnr_delay_ns;
use crate::qp::QpState;
use crate::wqe::opcode;

/// The responder's min RNR timer: 14, 1.28 ms.
const TIMER: u8 = 14;

/// `Harness::pair()` with QP 0x40's rnr_retry `retry` (params1 bits
/// 15..13 at RTR2RTS) and QP 0x41's min RNR timer TIMER (ctx 0x94 bits
/// 28..24 at INIT2RTR), QP 0x41's RQ empty.
fn rnr_pair(retry: u32) -> Harness {
    let mut h = Harness::new();
    assert_eq!(h.sw2hw_eq(0, EQ_LOG, 0, EQ0_BUF), 0);
    assert_eq!(h.sw2hw_eq(1, EQ_LOG, 1, EQ1_BUF), 0);
    assert_eq!(h.sw2hw_cq(CQN, CQ_LOG, UAR, 1, CQ_BUF, CQ_DB), 0);
    assert_eq!(h.sw2hw_cq(RCQN, RCQ_LOG, UAR, 1, RCQ_BUF, RCQ_DB), 0);
    assert_eq!(h.sw2hw_cq(RCQN2, RCQ_LOG, UAR, 1, RCQ2_BUF, RCQ2_DB), 0);
    for (qpn, peer, buf, rcqn, db) in [
        (QPN, QPN2, QP_BUF, RCQN, RQ_DB),
        (QPN2, QPN, QP2_BUF, RCQN2, RQ2_DB),
    ] {
        h.init_sq(buf, SQ_LOG);
        let mb = Harness::qp_mailbox(qpn, UAR, CQN, mtt_of(buf), SQ_LOG);
        let mut mb = Harness::connect_to(Harness::with_rq(mb, rcqn, db), peer);
        put_be32(&mut mb[8..], 0x70, retry << 13);
        put_be32(&mut mb[8..], 0x94, u32::from(TIMER) << 24);
        h.create_qp_with(qpn, &mb);
    }
    h.fill_rq(QP_BUF, RQ_DB, RECV_BUF);
    h.set_rq_head(RQ2_DB, 0);
    h
}

fn send(h: &mut Harness, index: u32, payload: &[u8]) {
    h.write_wqe(
        QP_BUF,
        index,
        &Harness::inline_send(QPN, index, payload, true),
    );
    h.doorbell(UAR, QPN);
}

/// [RNR NAKs, retries, retries exceeded, held posts].
fn counted(h: &Harness) -> [u64; 4] {
    let g = &h.dev.counters().global;
    [g.rnr_errors, g.rnr_retries, g.rnr_retry_exceeded, g.sq_held]
}

/// Ticks at `t` (scheduling what waits unscheduled), then at its due time.
/// Returns the time of the second tick.
fn retry_round(h: &mut Harness, t: u64) -> u64 {
    let due = h.dev.tick(t).expect("a retry waits");
    assert_eq!(due, t + rnr_delay_ns(TIMER));
    assert_eq!(h.dev.tick(due - 1), Some(due), "not before the timer");
    h.dev.tick(due);
    due
}

/// rnr_retry 7: the SEND waits however often it is NAKed, the next one
/// waits behind it, and a receive posted late is taken by the retry;
/// then the one behind it runs too. No CQE before, no error after.
#[test]
fn rnr_retry_7_takes_a_receive_posted_late() {
    let mut h = rnr_pair(7);
    send(&mut h, 0, b"late");
    assert_eq!((h.sq_ci(QPN), h.dev.counters().global.cqes), (0, 0));
    assert_eq!(h.dev.qps().get(QPN).unwrap().state, QpState::Rts);
    send(&mut h, 1, b"next");
    assert_eq!(counted(&h), [1, 0, 0, 1]);
    let mut t = 0;
    for round in 1..=10u64 {
        t = retry_round(&mut h, t);
        assert_eq!(counted(&h), [1 + round, round, 0, 1]);
    }
    assert_eq!(h.dev.counters().global.cqes, 0, "still waiting");
    h.post_recv(QP2_BUF, 0, RECV_LEN, RESERVED_LKEY, RECV2_BUF);
    h.post_recv(QP2_BUF, 1, RECV_LEN, RESERVED_LKEY, RECV2_BUF + 0x100);
    h.set_rq_head(RQ2_DB, 2);
    retry_round(&mut h, t);
    assert_eq!(counted(&h), [11, 11, 0, 1]);
    assert_eq!(h.mem(RECV2_BUF, 4), b"late");
    assert_eq!(h.mem(RECV2_BUF + 0x100, 4), b"next", "in order, after it");
    assert_eq!((h.sq_ci(QPN), h.rq_ci(QPN2)), (2, 2));
    for i in 0..2 {
        let c = h.cqe(i);
        assert_eq!((be32(&c, 0), c[0x1f]), (QPN, CQE_IS_SEND | opcode::SEND));
    }
    assert_eq!(h.dev.tick(t + 1), None, "nothing waits");
    assert!(h.error_codes().is_empty(), "{:?}", h.error_codes());
    h.check_invariants(false);
}

/// rnr_retry 0: the first NAK completes the SEND with RNR_RETRY_EXC_ERR;
/// rnr_retry 1: the one retry's NAK does, and what waited behind it is
/// flushed with the QP in ERR.
#[test]
fn rnr_retry_0_and_1_fail_after_their_attempts() {
    let mut h = rnr_pair(0);
    send(&mut h, 0, b"r0");
    assert_eq!(h.cqe(0)[0x1b], syndrome::RNR_RETRY_EXC_ERR);
    assert_eq!(counted(&h), [1, 0, 1, 0]);
    assert_eq!(h.dev.tick(0), None);

    let mut h = rnr_pair(1);
    send(&mut h, 0, b"r1");
    send(&mut h, 1, b"behind");
    assert_eq!(counted(&h), [1, 0, 0, 1]);
    retry_round(&mut h, 0);
    assert_eq!(counted(&h), [2, 1, 1, 1]);
    let (c0, c1) = (h.cqe(0), h.cqe(1));
    assert_eq!((c0[0x1b], be32(&c0, 0)), (syndrome::RNR_RETRY_EXC_ERR, QPN));
    assert_eq!(c1[0x1b], syndrome::WR_FLUSH_ERR, "the one behind it");
    assert_eq!(h.qp_state_from_query(QPN).0, 6);
    assert_eq!(h.rq_ci(QPN2), 0, "the responder untouched");
    assert!(h.error_codes().is_empty(), "{:?}", h.error_codes());
    h.check_invariants(false);
}

/// RTS2SQD while a SEND waits for its retry: SQ_DRAINING (7) until the
/// retry delivers it, then SQD and the SQ_DRAINED event.
#[test]
fn sqd_waits_for_the_wqe_in_flight() {
    let mut h = rnr_pair(7);
    assert_eq!(h.cmd_full(op::MAP_EQ, 0, 1 << 3, 0, 0, None), 0);
    send(&mut h, 0, b"drain");
    let none = mailbox(0, |_| {});
    assert_eq!(
        modify(&mut h, op::RTS2SQD_QP, QPN | (1 << 31), &none),
        status::OK
    );
    assert_eq!(h.qp_state_from_query(QPN).0, 7);
    assert_eq!(
        modify(&mut h, op::SQD2SQD_QP, QPN, &none),
        status::BAD_QP_STATE
    );
    assert_eq!(h.dev.counters().global.sq_drained_events, 0);
    h.post_recv(QP2_BUF, 0, RECV_LEN, RESERVED_LKEY, RECV2_BUF);
    h.set_rq_head(RQ2_DB, 1);
    retry_round(&mut h, 0);
    assert_eq!(h.mem(RECV2_BUF, 5), b"drain");
    assert_eq!(h.qp_state_from_query(QPN).0, 5);
    let e = h.eqe(EQ0_BUF, 0);
    assert_eq!((e[1], be32(&e, 4)), (0x03, QPN));
    assert!(h.error_codes().is_empty(), "{:?}", h.error_codes());
}

/// 2ERR_QP while a SEND waits: the next tick flushes it.
#[test]
fn a_qp_put_in_err_flushes_the_waiting_wqe() {
    let mut h = rnr_pair(7);
    send(&mut h, 0, b"gone");
    assert_eq!(h.cmd(op::TO_ERR_QP, 0, QPN), status::OK);
    assert_eq!(h.dev.tick(0), None);
    assert_eq!(h.cqe(0)[0x1b], syndrome::WR_FLUSH_ERR);
    assert_eq!(h.sq_ci(QPN), 1);
}
