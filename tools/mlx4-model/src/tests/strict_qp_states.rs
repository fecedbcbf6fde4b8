//! The QP transitions past RTS and those that keep a state (`qp::transition`):
//! INIT2INIT, RTS2RTS, RTS2SQD, SQD2SQD, SQD2RTS, SQERR2RTS, each from its
//! state only (BAD_QP_STATE otherwise), with only the optpar bits IB
//! allows (BAD_PARAM otherwise); SQD holding posts until SQD2RTS; SQE on a
//! UD send error and back.

use super::harness::*;
use super::strict_ud;
use crate::bytes::{be32, put_be32};
use crate::command::{op, status};
use crate::cq::{syndrome, CQE_IS_SEND};
use crate::qp::QpState;
use crate::wqe::opcode;

/// The optpar bits these tests send (`enum mlx4_qp_optpar`).
const ACCESS: u32 = (1 << 1) | (1 << 2) | (1 << 3);
const QKEY_BIT: u32 = 1 << 5;
const RNR_TIMEOUT: u32 = 1 << 6;
const RETRY_COUNT: u32 = 1 << 12;
const RNR_RETRY: u32 = 1 << 13;

/// A transition's mailbox: `optpar`, then the context `ctx` sets.
pub(super) fn mailbox(optpar: u32, ctx: impl FnOnce(&mut [u8])) -> Vec<u8> {
    let mut mb = vec![0u8; 0x100];
    put_be32(&mut mb, 0, optpar);
    ctx(&mut mb[8..]);
    mb
}

/// Runs transition `opcode` on `qpn` (in_mod bits 31..24 `high`).
pub(super) fn modify(h: &mut Harness, opcode: u16, in_mod: u32, mb: &[u8]) -> u8 {
    h.poke(IN_MB, mb);
    h.cmd(opcode, 0, in_mod)
}

fn state(h: &Harness, qpn: u32) -> QpState {
    h.dev.qps().get(qpn).unwrap().state
}

/// Every transition succeeds from its own state and is BAD_QP_STATE from
/// any other, RESET included; QUERY_QP reports the mlx4 encoding.
#[test]
fn each_transition_from_its_state_only() {
    let mut h = Harness::pair();
    let none = mailbox(0, |_| {});
    for o in [
        op::INIT2INIT_QP,
        op::SQD2SQD_QP,
        op::SQD2RTS_QP,
        op::SQERR2RTS_QP,
    ] {
        assert_eq!(
            modify(&mut h, o, QPN, &none),
            status::BAD_QP_STATE,
            "{o:#x} in RTS"
        );
    }
    assert_eq!(modify(&mut h, op::RTS2RTS_QP, QPN, &none), status::OK);
    assert_eq!(h.qp_state_from_query(QPN).0, 3);
    assert_eq!(modify(&mut h, op::RTS2SQD_QP, QPN, &none), status::OK);
    assert_eq!(h.qp_state_from_query(QPN).0, 5);
    for o in [
        op::RTS2RTS_QP,
        op::RTS2SQD_QP,
        op::INIT2INIT_QP,
        op::SQERR2RTS_QP,
    ] {
        assert_eq!(
            modify(&mut h, o, QPN, &none),
            status::BAD_QP_STATE,
            "{o:#x} in SQD"
        );
    }
    assert_eq!(modify(&mut h, op::SQD2SQD_QP, QPN, &none), status::OK);
    assert_eq!(modify(&mut h, op::SQD2RTS_QP, QPN, &none), status::OK);
    assert_eq!(h.qp_state_from_query(QPN).0, 3);
    // A QP in RESET (none made) and one in ERR.
    for o in [
        op::INIT2INIT_QP,
        op::RTS2RTS_QP,
        op::RTS2SQD_QP,
        op::SQD2RTS_QP,
    ] {
        assert_eq!(modify(&mut h, o, 0x42, &none), status::BAD_QP_STATE);
    }
    assert_eq!(h.cmd(op::TO_ERR_QP, 0, QPN2), status::OK);
    assert_eq!(
        modify(&mut h, op::RTS2RTS_QP, QPN2, &none),
        status::BAD_QP_STATE
    );
    // INIT2INIT, then the rest of the way up.
    h.init_sq(QP2_BUF, SQ_LOG);
    let mb = Harness::qp_mailbox(0x42, UAR, CQN, mtt_of(QP2_BUF), SQ_LOG);
    assert_eq!(modify(&mut h, op::RST2INIT_QP, 0x42, &mb), status::OK);
    assert_eq!(modify(&mut h, op::INIT2INIT_QP, 0x42, &none), status::OK);
    assert_eq!(h.qp_state_from_query(0x42).0, 1);
    assert_eq!(
        modify(&mut h, op::RTR2RTS_QP, 0x42, &mb),
        status::BAD_QP_STATE
    );
    assert_eq!(modify(&mut h, op::INIT2RTR_QP, 0x42, &mb), status::OK);
    assert!(h.error_codes().is_empty());
}

/// An optpar bit IB does not allow at the transition is BAD_PARAM,
/// counted, and changes nothing: RTS2RTS takes no retry count, RNR retry
/// or Q_Key on RC; SQD2SQD takes the retry counts.
#[test]
fn optpar_bits_the_transition_does_not_allow_are_bad_param() {
    let mut h = Harness::pair();
    let st = |h: &mut Harness, o, bits| modify(h, o, QPN, &mailbox(bits, |_| {}));
    for bits in [RETRY_COUNT, RNR_RETRY, QKEY_BIT, 1 << 7, 1 << 8] {
        assert_eq!(
            st(&mut h, op::RTS2RTS_QP, bits),
            status::BAD_PARAM,
            "{bits:#x}"
        );
    }
    assert_eq!(h.dev.counters().global.qp_optpar_refused, 5);
    assert_eq!(st(&mut h, op::RTS2SQD_QP, ACCESS), status::BAD_PARAM);
    assert_eq!(state(&h, QPN), QpState::Rts, "refused: nothing changed");
    assert_eq!(st(&mut h, op::RTS2SQD_QP, 0), status::OK);
    let mb = mailbox(RETRY_COUNT | RNR_RETRY, |c| {
        put_be32(c, 0x70, (5 << 16) | (7 << 13))
    });
    assert_eq!(modify(&mut h, op::SQD2SQD_QP, QPN, &mb), status::OK);
    assert_eq!(h.dev.qps().get(QPN).unwrap().rnr_retry(), 7);
    assert_eq!(st(&mut h, op::SQD2RTS_QP, QKEY_BIT), status::BAD_PARAM);
    assert_eq!(st(&mut h, op::SQD2RTS_QP, RNR_TIMEOUT), status::OK);
}

/// RTS2RTS with the access flags: a responder whose RWE it clears refuses
/// the RDMA write it took before (REMOTE_ACCESS_ERR); its min RNR timer,
/// which RTS2RTS may change, reads back from QUERY_QP.
#[test]
fn rts2rts_changes_the_access_flags_and_the_rnr_timer() {
    let mut h = Harness::pair();
    let w = data_wqe(QPN, 0, opcode::RDMA_WRITE, Some((0x1000, 0x100)), b"", &[]);
    h.write_wqe(QP_BUF, 0, &w);
    h.doorbell(UAR, QPN);
    assert_eq!(h.cqe(0)[0x1f], CQE_IS_SEND | opcode::RDMA_WRITE);
    // Reads and atomics stay, writes go; the timer 14 (1.28 ms).
    let mb = mailbox(ACCESS | RNR_TIMEOUT, |c| {
        put_be32(c, 0x90, (1 << 15) | (1 << 13));
        put_be32(c, 0x94, 14 << 24);
    });
    assert_eq!(modify(&mut h, op::RTS2RTS_QP, QPN2, &mb), status::OK);
    let qp = h.dev.qps().get(QPN2).unwrap();
    assert_eq!(
        (qp.rwe, qp.rre, qp.rae, qp.min_rnr_timer()),
        (false, true, true, 14)
    );
    assert_eq!(h.qp_state_from_query(QPN2).0, 3);
    let q = h.mem(OUT_MB + 8, 0xf8);
    assert_eq!(be32(&q, 0x90) & (7 << 13), (1 << 15) | (1 << 13));
    assert_eq!(be32(&q, 0x94) >> 24, 14);
    let w = data_wqe(QPN, 1, opcode::RDMA_WRITE, Some((0x1000, 0x100)), b"", &[]);
    h.write_wqe(QP_BUF, 1, &w);
    h.doorbell(UAR, QPN);
    let c = h.cqe(1);
    assert_eq!((c[0x1b], c[0x1f]), (syndrome::REMOTE_ACCESS_ERR, 0x5e));
}

/// RTS2SQD (in_mod bit 31: notify) drains an idle SQ at once: SQD and the
/// SQ_DRAINED EQE (type 0x03, the QPN at byte 4). A doorbell in SQD is
/// held, counted, not executed, no protocol error; SQD2RTS runs it.
#[test]
fn sqd_drains_holds_posts_and_sqd2rts_runs_them() {
    let mut h = Harness::pair();
    assert_eq!(h.cmd_full(op::MAP_EQ, 0, 1 << 3, 0, 0, None), 0);
    let none = mailbox(0, |_| {});
    assert_eq!(
        modify(&mut h, op::RTS2SQD_QP, QPN | (1 << 31), &none),
        status::OK
    );
    assert_eq!(state(&h, QPN), QpState::Sqd);
    let e = h.eqe(EQ0_BUF, 0);
    assert_eq!((e[1], be32(&e, 4)), (0x03, QPN));
    assert_eq!(h.dev.counters().global.sq_drained_events, 1);
    for i in 0..2 {
        h.write_wqe(QP_BUF, i, &Harness::inline_send(QPN, i, b"sqd", true));
        h.doorbell(UAR, QPN);
    }
    assert_eq!((h.sq_ci(QPN), h.dev.counters().global.cqes), (0, 0));
    assert_eq!(h.dev.counters().global.sq_held, 2);
    // SQD still receives.
    h.write_wqe(QP2_BUF, 0, &Harness::inline_send(QPN2, 0, b"in", true));
    h.doorbell(UAR, QPN2);
    assert_eq!(h.rq_ci(QPN), 1);
    // Without the notify bit: no event.
    assert_eq!(modify(&mut h, op::SQD2RTS_QP, QPN, &none), status::OK);
    assert_eq!(h.sq_ci(QPN), 2, "both held WQEs ran after SQD2RTS");
    assert_eq!(h.rq_ci(QPN2), 2);
    assert_eq!(h.cqe(1)[0x1f], CQE_IS_SEND | opcode::SEND);
    assert_eq!(modify(&mut h, op::RTS2SQD_QP, QPN, &none), status::OK);
    assert_eq!(h.dev.counters().global.sq_drained_events, 1);
    assert!(h.error_codes().is_empty(), "{:?}", h.error_codes());
    h.check_invariants(false);
}

/// A UD send error takes the QP to SQE (RC's to ERR): its posts are
/// flushed, it still receives, and SQERR2RTS (with a new Q_Key) brings it
/// back; SQERR2RTS of an RC QP, never in SQE, is BAD_QP_STATE.
#[test]
fn sqe_for_a_ud_send_error_and_sqerr2rts() {
    let mut h = strict_ud::pair();
    let too_long = [(4097, RESERVED_LKEY, GATHER_BUF)];
    let w = strict_ud::ud_wqe(QPN, 0, opcode::SEND, &strict_ud::av(QPN2), b"", &too_long);
    strict_ud::post_db(&mut h, QPN, QP_BUF, 0, &w);
    assert_eq!(h.cqe(0)[0x1b], syndrome::LOCAL_LENGTH_ERR);
    assert_eq!(h.qp_state_from_query(QPN).0, 4);
    assert_eq!(h.dev.counters().global.sq_errors, 1);
    // A UD WQE with a data segment takes two 64-byte strides.
    let w = strict_ud::ud_wqe(QPN, 2, opcode::SEND, &strict_ud::av(QPN2), b"x", &[]);
    strict_ud::post_db(&mut h, QPN, QP_BUF, 2, &w);
    assert_eq!(h.cqe(1)[0x1b], syndrome::WR_FLUSH_ERR);
    assert_eq!(state(&h, QPN), QpState::Sqe, "a flush keeps SQE");
    let w = strict_ud::ud_wqe(QPN2, 0, opcode::SEND, &strict_ud::av(QPN), b"in", &[]);
    strict_ud::post_db(&mut h, QPN2, QP2_BUF, 0, &w);
    assert_eq!(h.rq_ci(QPN), 1, "SQE receives");
    let mb = mailbox(QKEY_BIT | ACCESS, |_| {});
    assert_eq!(
        modify(&mut h, op::SQERR2RTS_QP, QPN, &mb),
        status::BAD_PARAM
    );
    let mb = mailbox(QKEY_BIT, |c| put_be32(c, 0xa8, 0x1234));
    assert_eq!(modify(&mut h, op::SQERR2RTS_QP, QPN, &mb), status::OK);
    assert_eq!(h.dev.qps().get(QPN).unwrap().qkey(), 0x1234);
    let w = strict_ud::ud_wqe(QPN, 4, opcode::SEND, &strict_ud::av(QPN2), b"ok", &[]);
    strict_ud::post_db(&mut h, QPN, QP_BUF, 4, &w);
    // CQE 2 is QP 0x41's (the send CQ is shared).
    strict_ud::assert_sent_at(&h, 3, 4, opcode::SEND, 2);
    assert!(h.error_codes().is_empty(), "{:?}", h.error_codes());
    let mut rc = Harness::pair();
    let none = mailbox(0, |_| {});
    assert_eq!(
        modify(&mut rc, op::SQERR2RTS_QP, QPN, &none),
        status::BAD_QP_STATE
    );
}
