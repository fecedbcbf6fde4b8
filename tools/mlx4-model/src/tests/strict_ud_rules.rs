//! The UD rules of `datapath::ud` and `qp::ud`, each broken once on the
//! QPs of `strict_ud::pair()`: the sender's refusals (error CQE), the
//! datagrams dropped (the sender completes, nothing else happens), the
//! receiver's errors (its CQE alone), and the transitions a UD QP takes.

use super::harness::*;
use super::strict_ud::*;
use crate::bytes::{be32, put_be32};
use crate::command::{op, status};
use crate::cq::{syndrome, CQE_OPCODE_ERROR};
use crate::datapath::ud::{drop, port_gid};
use crate::qp::QpState;
use crate::wqe::opcode;

/// Posts QP 0x40's `w` at SQ 0 by doorbell.
fn post(h: &mut Harness, w: &[u8]) {
    post_db(h, QPN, QP_BUF, 0, w);
}

fn state(h: &Harness, qpn: u32) -> QpState {
    h.dev.qps().get(qpn).unwrap().state
}

/// Asserts the datagram of QP 0x40's WQE 0 (`len` bytes) was dropped for
/// `reason`: the sender completed, QP 0x41's RQ and CQ untouched, counted
/// and recorded.
fn assert_dropped(h: &mut Harness, len: u32, reason: &str) {
    assert_sent(h, 0, opcode::SEND, len);
    assert_eq!(h.rq_ci(QPN2), 0, "{reason}: no receive consumed");
    assert_eq!(
        h.dev.counters().global.recv_cqes,
        0,
        "{reason}: no receive CQE"
    );
    assert_eq!(counted(h), [1, 0, 1, 0, 0], "{reason}");
    let r = &h.records_of("ud_drop")[0];
    assert_eq!(r["reason"], reason);
    assert_eq!(r["from"].as_u64(), Some(u64::from(QPN)));
    assert_eq!(h.dev.summary()["ud_drop_reasons"][reason], 1);
    assert_eq!(state(h, QPN), QpState::Rts, "{reason}: the sender goes on");
    assert!(h.error_codes().is_empty(), "{reason}");
    h.check_invariants(false);
}

/// What a case changes in the address vector.
type Change = fn(&mut Av);

#[test]
fn a_datagram_that_reaches_no_ready_ud_qp_is_dropped() {
    let cases: [(&str, Change); 5] = [
        (drop::DLID, |a| a.dlid = 2),
        (drop::DGID, |a| a.g_slid = 0x80),
        (drop::SPECIAL_QP, |a| a.dqpn = 1),
        (drop::NO_QP, |a| a.dqpn = 0x50),
        (drop::QKEY, |a| a.qkey = 0x2222_2222),
    ];
    for (reason, change) in cases {
        let mut h = pair();
        let mut a = av(QPN2);
        change(&mut a);
        post(&mut h, &ud_wqe(QPN, 0, opcode::SEND, &a, b"lost", &[]));
        assert_dropped(&mut h, 4, reason);
    }
}

#[test]
fn a_datagram_to_an_rc_qp_is_dropped() {
    let mut h = pair();
    let buf = 0x11_0000;
    h.init_sq(buf, SQ_LOG);
    h.create_qp_with(
        0x42,
        &Harness::qp_mailbox(0x42, UAR, CQN, mtt_of(buf), SQ_LOG),
    );
    post(
        &mut h,
        &ud_wqe(QPN, 0, opcode::SEND, &av(0x42), b"rc?", &[]),
    );
    assert_dropped(&mut h, 3, drop::NOT_UD);
}

#[test]
fn a_datagram_to_a_qp_in_err_or_of_another_partition_is_dropped() {
    let mut h = pair();
    assert_eq!(h.cmd(op::TO_ERR_QP, 0, QPN2), status::OK);
    post(
        &mut h,
        &ud_wqe(QPN, 0, opcode::SEND, &av(QPN2), b"err", &[]),
    );
    assert_dropped(&mut h, 3, drop::NOT_READY);
    // P_Key index 1 holds no valid P_Key: no partition to share.
    let mut h = pair_with(QKEY, QKEY, 1);
    post(
        &mut h,
        &ud_wqe(QPN, 0, opcode::SEND, &av(QPN2), b"pkey", &[]),
    );
    assert_dropped(&mut h, 4, drop::PKEY);
}

#[test]
fn no_receive_posted_drops_the_datagram_without_rnr() {
    let mut h = pair();
    h.set_rq_head(RQ2_DB, 0);
    post(
        &mut h,
        &ud_wqe(QPN, 0, opcode::SEND, &av(QPN2), b"rnr?", &[]),
    );
    assert_dropped(&mut h, 4, drop::RQ_EMPTY);
    assert_eq!(h.diag_read(0x510), 0, "no RNR error");
    assert_eq!(state(&h, QPN2), QpState::Rts);
}

#[test]
fn a_controlled_qkey_is_the_senders_own() {
    // QP 0x40's own Q_Key is not QP 0x41's: the controlled one misses.
    let mut h = pair_with(0x3333_3333, QKEY, 0);
    let mut a = av(QPN2);
    a.qkey = 0x8000_0000;
    post(&mut h, &ud_wqe(QPN, 0, opcode::SEND, &a, b"ctl", &[]));
    assert_dropped(&mut h, 3, drop::QKEY);
    // The same WQE from a sender whose own Q_Key is QP 0x41's arrives,
    // and so does one naming QP 0x41's explicitly.
    let mut h = pair();
    post(&mut h, &ud_wqe(QPN, 0, opcode::SEND, &a, b"ctl", &[]));
    let w = ud_wqe(QPN, 2, opcode::SEND, &av(QPN2), b"key", &[]);
    post_db(&mut h, QPN, QP_BUF, 2, &w);
    assert_eq!(h.mem(RECV2_BUF + 40, 3), b"ctl");
    assert_eq!(h.mem(RECV2_BUF + u64::from(RECV_LEN) + 40, 3), b"key");
    assert_eq!(counted(&mut h), [2, 2, 0, 0, 0]);
    h.check_invariants(false);
}

/// Asserts QP 0x40's WQE 0 was refused with `syn`: its error CQE, QP 0x40
/// in SQE (ERR for LOCAL_QP_OP_ERR: `sq_hold::after_send_error`), counted,
/// QP 0x41 untouched.
fn assert_refused(h: &mut Harness, syn: u8) {
    assert_eq!(err(&h.cqe(0)), (QPN, 0, syn, 0x40 | CQE_OPCODE_ERROR));
    let to = if syn == syndrome::LOCAL_QP_OP_ERR {
        QpState::Err
    } else {
        QpState::Sqe
    };
    assert_eq!(state(h, QPN), to);
    assert_eq!(counted(h), [0, 0, 0, 1, 0]);
    assert_eq!((h.rq_ci(QPN2), state(h, QPN2)), (0, QpState::Rts));
    h.check_invariants(false);
}

#[test]
fn an_address_vector_of_another_pd_or_port_is_local_qp_op_err() {
    for port_pd in [(1 << 24) | 1, 2 << 24, 0] {
        let mut h = pair();
        let mut a = av(QPN2);
        a.port_pd = port_pd;
        post(&mut h, &ud_wqe(QPN, 0, opcode::SEND, &a, b"pd", &[]));
        assert_refused(&mut h, syndrome::LOCAL_QP_OP_ERR);
        let e = &h.records_of("deliver_error")[0];
        assert_eq!(e["syndrome"], syndrome::LOCAL_QP_OP_ERR);
        assert_eq!(e["to"].as_u64(), Some(u64::from(QPN2)));
        assert!(
            h.error_codes().is_empty(),
            "a device answer, not a protocol error"
        );
    }
}

#[test]
fn more_than_the_mtu_is_local_length_err() {
    let mut h = pair();
    h.post_recv(QP2_BUF, 0, 8192, RESERVED_LKEY, BIG_RECV);
    let w = ud_wqe(
        QPN,
        0,
        opcode::SEND,
        &av(QPN2),
        b"",
        &[(4097, RESERVED_LKEY, GATHER_BUF)],
    );
    post(&mut h, &w);
    assert_refused(&mut h, syndrome::LOCAL_LENGTH_ERR);
    assert_eq!(
        h.records_of("deliver_error")[0]["syndrome"],
        syndrome::LOCAL_LENGTH_ERR
    );
    let gathers = h.records_of("dma_read");
    assert!(
        gathers.iter().all(|r| r["what"] != "gather"),
        "nothing read"
    );
}

#[test]
fn a_gather_key_refused_is_local_prot_err() {
    let mut h = pair();
    let w = ud_wqe(
        QPN,
        0,
        opcode::SEND,
        &av(QPN2),
        b"",
        &[(4, 0x77, GATHER_BUF)],
    );
    post(&mut h, &w);
    assert_refused(&mut h, syndrome::LOCAL_PROT_ERR);
    assert_eq!(h.diag_read(0x5a0), 1);
}

#[test]
fn rdma_and_atomics_on_ud_are_local_qp_op_err() {
    for op in [opcode::RDMA_WRITE, opcode::RDMA_READ, opcode::ATOMIC_FA] {
        let mut h = pair();
        post(
            &mut h,
            &ud_wqe(
                QPN,
                0,
                op,
                &av(QPN2),
                b"",
                &[(8, RESERVED_LKEY, GATHER_BUF)],
            ),
        );
        assert_eq!(err(&h.cqe(0)), (QPN, 0, syndrome::LOCAL_QP_OP_ERR, 0x5e));
        assert_eq!(h.error_codes(), ["wqe_bad_opcode"]);
        assert_eq!(counted(&mut h), [0; 5], "not a UD SEND");
    }
}

/// Asserts QP 0x41's receive 0 completed with `syn` while QP 0x40's SEND
/// completed in success.
fn assert_receiver_error(h: &mut Harness, syn: u8, len: u32) {
    assert_eq!(err(&recv2_cqe(h, 0)), (QPN2, 0, syn, CQE_OPCODE_ERROR));
    assert_eq!((h.rq_ci(QPN2), state(h, QPN2)), (1, QpState::Err));
    assert_sent(h, 0, opcode::SEND, len);
    assert_eq!(state(h, QPN), QpState::Rts);
    assert_eq!(counted(h), [1, 0, 0, 0, 1]);
    assert_eq!(h.records_of("ud_recv_error")[0]["syndrome"], syn);
    assert_eq!(h.mem(RECV2_BUF, 64), [0xee; 64], "nothing written");
    h.check_invariants(false);
}

#[test]
fn a_receive_too_short_for_the_slot_and_the_message_is_the_receivers_error() {
    let mut h = pair();
    h.poke(RECV2_BUF, &[0xee; 64]);
    // 40 + 10 bytes needed, 49 posted.
    h.post_recv(QP2_BUF, 0, 49, RESERVED_LKEY, RECV2_BUF);
    post(
        &mut h,
        &ud_wqe(QPN, 0, opcode::SEND, &av(QPN2), b"0123456789", &[]),
    );
    assert_receiver_error(&mut h, syndrome::LOCAL_LENGTH_ERR, 10);
    assert_eq!(h.diag_read(0x520), 1);
}

#[test]
fn a_receive_key_refused_is_the_receivers_error() {
    let mut h = pair();
    h.poke(RECV2_BUF, &[0xee; 64]);
    h.post_recv(QP2_BUF, 0, 256, 0x77, RECV2_BUF);
    post(
        &mut h,
        &ud_wqe(QPN, 0, opcode::SEND, &av(QPN2), b"key", &[]),
    );
    assert_receiver_error(&mut h, syndrome::LOCAL_PROT_ERR, 3);
    assert_eq!((h.diag_read(0x548), h.diag_read(0x5a0)), (1, 1));
}

#[test]
fn mainline_ud_transitions_are_taken_connected_attributes_refused() {
    let mut h = queues();
    h.init_sq(QP2_BUF, SQ_LOG);
    // RST2INIT naming remote write enable (optpar RWE): refused, no QP.
    let mut mb = rst2init(QPN2, QP2_BUF, RCQN2, RQ2_DB, 0, QKEY);
    put_be32(&mut mb, 0, OPTPAR_RST2INIT | 1 << 3);
    assert_eq!(
        modify(&mut h, op::RST2INIT_QP, QPN2, &mb),
        status::BAD_PARAM
    );
    assert!(h.dev.qps().get(QPN2).is_none());
    let mb = rst2init(QPN2, QP2_BUF, RCQN2, RQ2_DB, 0, QKEY);
    assert_eq!(modify(&mut h, op::RST2INIT_QP, QPN2, &mb), status::OK);
    // INIT2RTR: port 2's scheduling queue, no path MTU, an RNR timer.
    let mut bad = init2rtr(QPN2);
    bad[8 + 0x18 + 0x20] = 0xc3;
    assert_eq!(
        modify(&mut h, op::INIT2RTR_QP, QPN2, &bad),
        status::BAD_PARAM
    );
    let mut bad = init2rtr(QPN2);
    bad[8 + 0x08] = 13;
    assert_eq!(
        modify(&mut h, op::INIT2RTR_QP, QPN2, &bad),
        status::BAD_PARAM
    );
    let mut bad = init2rtr(QPN2);
    put_be32(&mut bad, 0, 1 << 6);
    assert_eq!(
        modify(&mut h, op::INIT2RTR_QP, QPN2, &bad),
        status::BAD_PARAM
    );
    assert_eq!(state(&h, QPN2), QpState::Init, "each refused whole");
    let good = init2rtr(QPN2);
    assert_eq!(modify(&mut h, op::INIT2RTR_QP, QPN2, &good), status::OK);
    // RTR2RTS with an ACK timeout or retry count: refused.
    for bit in [14, 12] {
        let mut bad = rtr2rts(QPN2);
        put_be32(&mut bad, 0, 1 << bit);
        assert_eq!(
            modify(&mut h, op::RTR2RTS_QP, QPN2, &bad),
            status::BAD_PARAM
        );
    }
    assert_eq!(
        modify(&mut h, op::RTR2RTS_QP, QPN2, &rtr2rts(QPN2)),
        status::OK
    );
    assert_eq!(state(&h, QPN2), QpState::Rts);
    assert_eq!(h.dev.qps().get(QPN2).unwrap().qkey(), QKEY);
    assert!(h.error_codes().is_empty());
    // The GRH's DGID the port answers to is its GID 0.
    assert_eq!(be32(&port_gid(), 0), 0xfe80_0000);
}
