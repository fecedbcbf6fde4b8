//! Receive queues and delivery (issue 10): the reserved lkey, the RQ
//! doorbell record and receive WQEs, and the delivery rules a–e.

use super::harness::*;
use crate::bytes::{be16, be32, put_be32, put_be64};
use crate::command::{op, status};

/// A SEND of `qpn` at SQ `index` whose body is the given data segments
/// (len, lkey, addr), after `inline` bytes in one inline segment if any.
fn data_send(qpn: u32, index: u32, inline: &[u8], segs: &[(u32, u32, u64)], op: u8) -> Vec<u8> {
    data_wqe(qpn, index, op, None, inline, segs)
}

fn post(h: &mut Harness, qpn: u32, buf: u64, index: u32, wqe: &[u8]) {
    h.write_wqe(buf, index, wqe);
    h.doorbell(UAR, qpn);
}

fn recv2_cqe(h: &Harness, index: u32) -> Vec<u8> {
    h.mem(RCQ2_BUF + u64::from(index) * 32, 32)
}

/// (my_qpn, wqe_index, syndrome, byte 0x1f) of an error CQE.
fn err(cqe: &[u8]) -> (u32, u16, u8, u8) {
    (be32(cqe, 0), be16(cqe, 0x18), cqe[0x1b], cqe[0x1f])
}

#[test]
fn query_dev_cap_reports_the_reserved_lkey_and_rq_limits() {
    let mut h = Harness::new();
    assert_eq!(h.cmd(op::QUERY_DEV_CAP, 0, 0), 0);
    let b = h.mem(OUT_MB, 0x100);
    assert_eq!(be32(&b, 0x98), 0x0000_0008);
    assert_eq!((b[0x55], be16(&b, 0x56)), (32, 512));
}

#[test]
fn rst2init_checks_the_rq() {
    let mut h = Harness::setup();
    let base = Harness::qp_mailbox(QPN2, UAR, CQN, mtt_of(QP2_BUF), SQ_LOG);
    for (db, stride_code, want) in [
        (0, 0, status::BAD_PARAM),
        (RQ2_DB + 2, 0, status::BAD_PARAM),
        (RQ2_DB, 6, status::BAD_SIZE), // 1024-byte receive WQEs
        (RQ2_DB, 5, status::OK),       // 512
    ] {
        let mut mb = Harness::with_rq(base.clone(), RCQN, db);
        mb[8 + 0x09] = (RQ_LOG << 3) | stride_code;
        h.poke(IN_MB, &mb);
        assert_eq!(h.cmd(op::RST2INIT_QP, 0, QPN2), want, "db {db:#x}");
    }
    // A later transition carries only what it changes: it does not move
    // the doorbell record or drop rlkey.
    let mut mb = Harness::with_rq(base, RCQN, RQ2_DB + 4);
    mb[8 + 0x09] = (RQ_LOG << 3) | 5;
    mb[8 + 0x0b] &= !0x10;
    h.poke(IN_MB, &mb);
    assert_eq!(h.cmd(op::INIT2RTR_QP, 0, QPN2), 0);
    assert!(h.error_codes().is_empty());
    let qp = h.dev.qps().get(QPN2).unwrap();
    assert_eq!((qp.rq_db, qp.rlkey), (RQ2_DB, true));
}

#[test]
fn send_is_delivered_to_the_peer() {
    let mut h = Harness::pair();
    let wqe = Harness::inline_send(QPN, 0, b"hello", true);
    post(&mut h, QPN, QP_BUF, 0, &wqe);
    // The payload in B's first receive buffer, the receive CQE on B's CQ.
    assert_eq!(h.mem(RECV2_BUF, 6), b"hello\0");
    let mut want = [0u8; 32];
    put_be32(&mut want, 0x00, QPN2);
    put_be32(&mut want, 0x08, QPN);
    put_be32(&mut want, 0x14, 5);
    want[0x1f] = 0x01;
    assert_eq!(recv2_cqe(&h, 0), want);
    // Then A's send CQE.
    assert_eq!((h.cqe(0)[0x1f], be32(&h.cqe(0), 0x14)), (0x4a, 5));
    let cqes: Vec<_> = h
        .records_of("cqe")
        .iter()
        .map(|r| r["cqn"].clone())
        .collect();
    assert_eq!(cqes, [RCQN2, CQN]);
    // The receive side's reads and writes, as the analyzer saw them.
    let reads = h.records_of("dma_read");
    let rq_reads: Vec<_> = reads
        .iter()
        .filter(|r| r["addr"] == RQ2_DB || r["what"] == "rwqe")
        .collect();
    assert_eq!(rq_reads[0]["what"], "db_rec");
    assert_eq!(rq_reads[0]["len"], 4);
    assert_eq!(rq_reads[1]["addr"], QP2_BUF + RQ_OFF);
    assert_eq!(rq_reads[1]["len"], 16);
    let w = &h.records_of("dma_write")[..];
    let payload: Vec<_> = w.iter().filter(|r| r["what"] == "payload").collect();
    assert_eq!(
        (payload[0]["addr"].as_u64(), payload[0]["len"].as_u64()),
        (Some(RECV2_BUF), Some(5))
    );
    let d = &h.records_of("deliver")[0];
    assert_eq!(
        (d["from"].as_u64(), d["to"].as_u64()),
        (Some(QPN.into()), Some(QPN2.into()))
    );
    assert_eq!(
        (d["len"].as_u64(), d["rq_index"].as_u64()),
        (Some(5), Some(0))
    );
    // The consumer index, in the model and in QUERY_QP.
    assert_eq!((h.rq_ci(QPN2), h.rq_ci(QPN)), (1, 0));
    assert_eq!(h.rq_counter_from_query(QPN2), 1);
    // Counters.
    assert_eq!((h.diag_read(0x500), h.diag_read(0x508)), (1, 1));
    assert_eq!((h.diag_read(0x528), h.diag_read(0x530)), (1, 5));
    h.select(QPN2);
    assert_eq!((h.diag_read(0x580), h.diag_read(0x588)), (1, 5));
    h.select(QPN);
    assert_eq!((h.diag_read(0x580), h.diag_read(0x588)), (0, 0));
    // And back, by BlueFlame: into A's first buffer.
    let wqe = Harness::inline_send(QPN2, 0, b"world!", true);
    h.write_wqe(QP2_BUF, 0, &wqe);
    h.bf_copy(UAR, 0, &wqe, 8);
    assert_eq!(h.dev.counters().global.wqes_bf, 1);
    assert_eq!(h.mem(RECV_BUF, 6), b"world!");
    assert_eq!(be32(&h.recv_cqe(0), 0x08), QPN2);
    assert_eq!(h.dev.counters().global.deliveries, 2);
    assert!(h.error_codes().is_empty());
    h.check_invariants(false);
}

#[test]
fn send_imm_and_the_solicited_event() {
    let mut h = Harness::pair();
    h.arm_cq(UAR, RCQN2, 1, 0);
    let mut wqe = Harness::inline_send(QPN, 0, b"x", true);
    wqe[3] = 0x0b; // SEND_IMM
    wqe[12..16].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    post(&mut h, QPN, QP_BUF, 0, &wqe);
    let cqe = recv2_cqe(&h, 0);
    assert_eq!(
        (&cqe[4..8], cqe[0x1f]),
        (&[0xde, 0xad, 0xbe, 0xef][..], 0x02)
    );
    assert_eq!(h.cqe(0)[0x1f], 0x4b);
    // Not solicited: the CQ armed for solicited events stays quiet.
    assert_eq!(h.dev.counters().global.eqes, 0);
    // The SE bit (srcrb bit 1) makes the receive CQE solicited.
    let mut wqe = Harness::inline_send(QPN, 1, b"y", true);
    wqe[11] |= 0x02;
    post(&mut h, QPN, QP_BUF, 1, &wqe);
    let eqe = h.eqe(EQ1_BUF, 0);
    assert_eq!((eqe[1], be32(&eqe, 4)), (0x00, RCQN2));
    assert_eq!(h.dev.counters().global.eqes, 1);
    assert!(h.error_codes().is_empty());
}

/// Rule a: the destination must exist, be in RTR or RTS, have an RQ, and
/// name the sender back. Else TRANSPORT_RETRY_EXC_ERR at once.
#[test]
fn peer_errors() {
    type Break = fn(&mut Harness);
    // No QP is without a receive queue: its own or an SRQ in hardware
    // ownership (`strict_srq`).
    let cases: [(&str, Break); 4] = [
        ("gone", |h| assert_eq!(h.cmd(op::TO_RST_QP, 2, QPN2), 0)),
        ("in ERR", |h| assert_eq!(h.cmd(op::TO_ERR_QP, 0, QPN2), 0)),
        ("in INIT", |h| {
            assert_eq!(h.cmd(op::TO_RST_QP, 2, QPN2), 0);
            let mb = Harness::qp_mailbox(QPN2, UAR, CQN, mtt_of(QP2_BUF), SQ_LOG);
            let mb = Harness::connect_to(Harness::with_rq(mb, RCQN2, RQ2_DB), QPN);
            h.poke(IN_MB, &mb);
            assert_eq!(h.cmd(op::RST2INIT_QP, 0, QPN2), 0);
        }),
        ("names another", |h| {
            assert_eq!(h.cmd(op::TO_RST_QP, 2, QPN2), 0);
            let mb = Harness::qp_mailbox(QPN2, UAR, CQN, mtt_of(QP2_BUF), SQ_LOG);
            let mb = Harness::connect_to(Harness::with_rq(mb, RCQN2, RQ2_DB), 0x55);
            h.create_qp_with(QPN2, &mb);
        }),
    ];
    for (name, breaker) in cases {
        let mut h = Harness::pair();
        breaker(&mut h);
        let wqe = Harness::inline_send(QPN, 0, b"p", false);
        post(&mut h, QPN, QP_BUF, 0, &wqe);
        assert_eq!(err(&h.cqe(0)), (QPN, 0, 0x15, 0x5e), "{name}");
        assert_eq!(h.qp_state_from_query(QPN).0, 6, "{name}: sender in ERR");
        assert_eq!(h.diag_read(0x518), 1, "{name}");
        assert_eq!(h.dev.counters().global.deliveries, 0);
        assert_eq!(h.records_of("deliver_error")[0]["syndrome"], 0x15);
        assert!(h.error_codes().is_empty(), "{name}");
        h.check_invariants(false);
    }
}

/// Rule c: an empty RQ draws an RNR NAK; with the harness's rnr_retry 0
/// the first NAK completes the SEND with RNR_RETRY_EXC_ERR (retries with a
/// larger rnr_retry: `strict_rnr`); the receiver is untouched.
#[test]
fn rnr_when_the_rq_is_empty() {
    let mut h = Harness::pair();
    h.set_rq_head(RQ2_DB, 0);
    let wqe = Harness::inline_send(QPN, 0, b"r", true);
    post(&mut h, QPN, QP_BUF, 0, &wqe);
    assert_eq!(err(&h.cqe(0)), (QPN, 0, 0x16, 0x5e));
    assert_eq!(h.qp_state_from_query(QPN).0, 6);
    assert_eq!(h.qp_state_from_query(QPN2).0, 3, "receiver untouched");
    assert_eq!(h.rq_ci(QPN2), 0);
    assert_eq!(h.dev.counters().global.recv_cqes, 0);
    assert_eq!(h.diag_read(0x510), 1);
    assert!(h.error_codes().is_empty());
}

/// The driver learns of the error from its CQ after the fact: WQEs it
/// posted meanwhile, by doorbell or BlueFlame, are flushed (WR_FLUSH_ERR),
/// not protocol errors.
#[test]
fn wqes_posted_to_a_qp_in_err_are_flushed() {
    let mut h = Harness::pair();
    h.set_rq_head(RQ2_DB, 0);
    post(
        &mut h,
        QPN,
        QP_BUF,
        0,
        &Harness::inline_send(QPN, 0, b"r", true),
    );
    assert_eq!(err(&h.cqe(0)), (QPN, 0, 0x16, 0x5e));
    post(
        &mut h,
        QPN,
        QP_BUF,
        1,
        &Harness::inline_send(QPN, 1, b"s", false),
    );
    assert_eq!(
        err(&h.cqe(1)),
        (QPN, 1, 0x05, 0x5e),
        "flushed, signalled or not"
    );
    let wqe = Harness::inline_send(QPN, 2, b"t", true);
    h.write_wqe(QP_BUF, 2, &wqe);
    h.bf_copy(UAR, 0, &wqe, 8);
    assert_eq!(err(&h.cqe(2)), (QPN, 2, 0x05, 0x5e));
    assert_eq!(h.dev.counters().global.flushed, 2);
    assert!(h.error_codes().is_empty(), "{:?}", h.error_codes());
}

/// A head more than the RQ size ahead is the kernel's error; the model
/// uses at most the RQ size.
#[test]
fn rq_head_too_far_ahead() {
    let mut h = Harness::pair();
    h.set_rq_head(RQ2_DB, 33);
    let wqe = Harness::inline_send(QPN, 0, b"h", true);
    post(&mut h, QPN, QP_BUF, 0, &wqe);
    assert_eq!(h.error_codes(), ["rq_head_ahead"]);
    assert_eq!(h.dev.counters().global.deliveries, 1);
    // The head wraps at 2^16: 0 after 0xffff posted is 1 ahead of 0xffff.
    h.dev.qps_mut().get_mut(QPN2).unwrap().rq_ci = 0xffff;
    h.set_rq_head(RQ2_DB, 0);
    let wqe = Harness::inline_send(QPN, 1, b"w", true);
    post(&mut h, QPN, QP_BUF, 1, &wqe);
    assert_eq!(h.dev.counters().global.deliveries, 2);
    assert_eq!(h.rq_ci(QPN2), 0x1_0000);
    assert_eq!(h.error_codes().len(), 1);
}

/// Rule d: longer than the receive buffers: LOCAL_LENGTH_ERR on the
/// receiver (its WQE consumed), REMOTE_INVAL_REQ_ERR on the sender.
#[test]
fn receive_length_error() {
    let mut h = Harness::pair();
    h.post_recv(QP2_BUF, 0, 4, RESERVED_LKEY, RECV2_BUF);
    let wqe = Harness::inline_send(QPN, 0, b"12345", true);
    post(&mut h, QPN, QP_BUF, 0, &wqe);
    assert_eq!(err(&recv2_cqe(&h, 0)), (QPN2, 0, 0x01, 0x1e));
    assert_eq!(err(&h.cqe(0)), (QPN, 0, 0x12, 0x5e));
    assert_eq!(h.qp_state_from_query(QPN).0, 6);
    assert_eq!(h.qp_state_from_query(QPN2).0, 6);
    assert_eq!(h.rq_counter_from_query(QPN2), 1);
    assert_eq!(h.mem(RECV2_BUF, 1), [0], "nothing written");
    assert_eq!((h.diag_read(0x520), h.diag_read(0x508)), (1, 1));
    assert_eq!(h.diag_read(0x500), 0);
    assert!(h.error_codes().is_empty());
    h.check_invariants(false);
}

/// Rule d: a receive segment with an lkey the model refuses:
/// LOCAL_PROT_ERR on the receiver, REMOTE_OP_ERR on the sender (the
/// responder's local error, not an rkey's REMOTE_ACCESS_ERR).
#[test]
fn refused_scatter_lkey() {
    let mut h = Harness::pair();
    h.post_recv(QP2_BUF, 0, 256, 0x1234, RECV2_BUF);
    let wqe = Harness::inline_send(QPN, 0, b"k", true);
    post(&mut h, QPN, QP_BUF, 0, &wqe);
    assert_eq!(err(&recv2_cqe(&h, 0)), (QPN2, 0, 0x04, 0x1e));
    assert_eq!(err(&h.cqe(0)), (QPN, 0, 0x14, 0x5e));
    assert_eq!(h.diag_read(0x548), 1);
    assert_eq!(h.mem(RECV2_BUF, 1), [0]);
    assert!(h.error_codes().is_empty());
    // A receive buffer the model cannot reach: the same answer, and a
    // dma_unmapped.
    let mut h = Harness::pair();
    h.post_recv(QP2_BUF, 0, 256, RESERVED_LKEY, 0x8000_0000);
    let wqe = Harness::inline_send(QPN, 0, b"u", true);
    post(&mut h, QPN, QP_BUF, 0, &wqe);
    assert_eq!(err(&h.cqe(0)), (QPN, 0, 0x14, 0x5e));
    assert_eq!(err(&recv2_cqe(&h, 0)), (QPN2, 0, 0x04, 0x1e));
    assert_eq!(h.error_codes(), ["dma_unmapped"]);
    h.check_invariants(false);
}

/// A self-connected QP with 32-byte receive WQEs (two segments): the
/// MLX4_INVALID_LKEY segment ends the list.
#[test]
fn invalid_lkey_ends_the_scatter_list() {
    let mut h = Harness::setup();
    assert_eq!(h.cmd(op::TO_RST_QP, 2, QPN), 0);
    let mb = Harness::qp_mailbox(QPN, UAR, CQN, mtt_of(QP_BUF), SQ_LOG);
    let mut mb = Harness::with_rq(mb, RCQN, RQ_DB);
    mb[8 + 0x09] = (RQ_LOG << 3) | 1;
    h.create_qp_with(QPN, &mb);
    for i in 0..2u64 {
        let mut w = [0u8; 32];
        put_be32(&mut w, 0, 8);
        put_be32(&mut w, 4, RESERVED_LKEY);
        put_be64(&mut w, 8, RECV_BUF + 256 * i);
        put_be32(&mut w, 20, 0x100); // terminator; byte_count 0
        h.poke(QP_BUF + RQ_OFF + 32 * i, &w);
    }
    h.set_rq_head(RQ_DB, 2);
    post(
        &mut h,
        QPN,
        QP_BUF,
        0,
        &Harness::inline_send(QPN, 0, b"8 bytes!", true),
    );
    assert_eq!(h.mem(RECV_BUF, 8), b"8 bytes!");
    assert_eq!(h.dev.counters().global.deliveries, 1);
    post(
        &mut h,
        QPN,
        QP_BUF,
        1,
        &Harness::inline_send(QPN, 1, b"9 bytes!!", true),
    );
    assert_eq!(err(&h.recv_cqe(1)), (QPN, 1, 0x01, 0x1e));
    let rwqe = h.records_of("dma_read");
    assert!(rwqe
        .iter()
        .any(|r| r["what"] == "rwqe" && r["addr"] == QP_BUF + RQ_OFF + 32));
    assert!(h.error_codes().is_empty());
}

/// RQ stride 128 > SQ stride 64: the RQ is at offset 0, the SQ after it.
#[test]
fn rq_with_the_larger_stride_comes_first() {
    let mut h = Harness::setup();
    assert_eq!(h.cmd(op::TO_RST_QP, 2, QPN), 0);
    let mb = Harness::qp_mailbox(QPN, UAR, CQN, mtt_of(QP_BUF), SQ_LOG);
    let mut mb = Harness::with_rq(mb, RCQN, RQ_DB);
    mb[8 + 0x09] = (RQ_LOG << 3) | 3;
    let sq = QP_BUF + (1 << RQ_LOG) * 128;
    h.init_sq(sq, SQ_LOG);
    h.create_qp_with(QPN, &mb);
    // One segment, then the terminator: the rest of the stride is stale.
    let mut w = [0u8; 32];
    put_be32(&mut w, 0, 64);
    put_be32(&mut w, 4, RESERVED_LKEY);
    put_be64(&mut w, 8, RECV_BUF);
    put_be32(&mut w, 20, 0x100);
    h.poke(QP_BUF, &w);
    h.set_rq_head(RQ_DB, 1);
    post(
        &mut h,
        QPN,
        sq,
        0,
        &Harness::inline_send(QPN, 0, b"first", true),
    );
    let reads = h.records_of("dma_read");
    assert!(reads.iter().any(|r| r["what"] == "wqe" && r["addr"] == sq));
    assert!(reads
        .iter()
        .any(|r| r["what"] == "rwqe" && r["addr"] == QP_BUF && r["len"] == 128));
    assert_eq!(h.mem(RECV_BUF, 5), b"first");
    assert!(h.error_codes().is_empty());
}

/// Rule b and rule 1: data segments are read only with the reserved lkey
/// on an rlkey QP; anything else is LOCAL_PROT_ERR with nothing read.
#[test]
fn gather_needs_the_reserved_lkey_on_an_rlkey_qp() {
    let mut h = Harness::setup();
    h.poke(GATHER_BUF, b"cdefgh");
    let wqe = data_send(
        QPN,
        0,
        b"ab",
        &[
            (2, RESERVED_LKEY, GATHER_BUF),
            (4, RESERVED_LKEY, GATHER_BUF + 2),
        ],
        0x0a,
    );
    post(&mut h, QPN, QP_BUF, 0, &wqe);
    assert_eq!(h.mem(RECV_BUF, 8), b"abcdefgh");
    assert_eq!(be32(&h.recv_cqe(0), 0x14), 8);
    let gathers: Vec<_> = h
        .records_of("dma_read")
        .into_iter()
        .filter(|r| r["what"] == "gather")
        .collect();
    assert_eq!(gathers.len(), 2);
    // Another lkey: refused, nothing read, the QP in ERR.
    let wqe = data_send(QPN, 1, b"", &[(4, 0x1234, GATHER_BUF)], 0x0a);
    post(&mut h, QPN, QP_BUF, 1, &wqe);
    assert_eq!(err(&h.cqe(1)), (QPN, 1, 0x04, 0x5e));
    assert_eq!(h.diag_read(0x548), 1);
    assert_eq!(
        h.records_of("dma_read")
            .iter()
            .filter(|r| r["what"] == "gather")
            .count(),
        2
    );
    assert_eq!(h.dev.counters().global.deliveries, 1);
    assert!(h.error_codes().is_empty());

    // The reserved lkey on a QP without rlkey: refused.
    let mut h = Harness::setup();
    assert_eq!(h.cmd(op::TO_RST_QP, 2, QPN), 0);
    let mut mb = Harness::with_rq(
        Harness::qp_mailbox(QPN, UAR, CQN, mtt_of(QP_BUF), SQ_LOG),
        RCQN,
        RQ_DB,
    );
    mb[8 + 0x0b] &= !0x10;
    h.create_qp_with(QPN, &mb);
    post(
        &mut h,
        QPN,
        QP_BUF,
        0,
        &data_send(QPN, 0, b"", &[(4, RESERVED_LKEY, GATHER_BUF)], 0x0a),
    );
    assert_eq!(err(&h.cqe(0)), (QPN, 0, 0x04, 0x5e));
    assert_eq!(h.dev.counters().global.gather_errors, 1);

    // An RDMA write's data segments are checked like a SEND's: refused,
    // nothing read.
    let mut h = Harness::setup();
    let mut wqe = data_send(QPN, 0, b"", &[(0, 0, 0), (4, 0x77, GATHER_BUF)], 0x08);
    wqe[16..32].fill(0); // the raddr segment
    post(&mut h, QPN, QP_BUF, 0, &wqe);
    assert_eq!(err(&h.cqe(0)), (QPN, 0, 0x04, 0x5e));
    assert_eq!((h.diag_read(0x548), h.diag_read(0x5a0)), (1, 1));
    assert_eq!(
        h.records_of("dma_read")
            .iter()
            .filter(|r| r["what"] == "gather")
            .count(),
        0
    );
    assert_eq!(h.dev.counters().global.deliveries, 0);

    // A gather the model cannot reach, and one longer than its largest
    // message (nothing read).
    let mut h = Harness::setup();
    post(
        &mut h,
        QPN,
        QP_BUF,
        0,
        &data_send(QPN, 0, b"", &[(4, RESERVED_LKEY, 0x8000_0000)], 0x0a),
    );
    assert_eq!(err(&h.cqe(0)), (QPN, 0, 0x04, 0x5e));
    assert_eq!(h.error_codes(), ["dma_unmapped"]);
    let mut h = Harness::setup();
    let huge = (crate::layout::MAX_MESSAGE + 1) as u32;
    post(
        &mut h,
        QPN,
        QP_BUF,
        0,
        &data_send(QPN, 0, b"", &[(huge, RESERVED_LKEY, GATHER_BUF)], 0x0a),
    );
    assert_eq!(err(&h.cqe(0)), (QPN, 0, 0x01, 0x5e));
    assert_eq!(h.dev.counters().global.messages_too_long, 1);
    assert!(h.error_codes().is_empty());
    h.check_invariants(false);
}

/// A receive side that cannot read its own doorbell record: the receiver
/// goes to ERR, the sender gets REMOTE_OP_ERR.
#[test]
fn unreadable_rq_doorbell_record() {
    let mut h = Harness::setup();
    assert_eq!(h.cmd(op::TO_RST_QP, 2, QPN), 0);
    let mb = Harness::with_rq(
        Harness::qp_mailbox(QPN, UAR, CQN, mtt_of(QP_BUF), SQ_LOG),
        RCQN,
        0x8000_0000,
    );
    h.create_qp_with(QPN, &mb);
    post(
        &mut h,
        QPN,
        QP_BUF,
        0,
        &Harness::inline_send(QPN, 0, b"d", true),
    );
    assert_eq!(err(&h.cqe(0)), (QPN, 0, 0x14, 0x5e));
    assert_eq!(h.error_codes(), ["dma_unmapped"]);
    assert_eq!(h.dev.counters().global.receive_failures, 1);
    h.check_invariants(false);
}

#[test]
fn uc_delivers_like_rc_and_a_ud_datagram_nobody_takes_is_dropped() {
    for (service, delivered) in [(1u8, 1u64), (3, 0)] {
        let mut h = Harness::setup();
        assert_eq!(h.cmd(op::TO_RST_QP, 2, QPN), 0);
        let mut mb = Harness::with_rq(
            Harness::qp_mailbox(QPN, UAR, CQN, mtt_of(QP_BUF), SQ_LOG),
            RCQN,
            RQ_DB,
        );
        mb[8 + 1] = service;
        if service == 3 {
            // No remote access enables on UD; INIT2RTR's path MTU.
            mb[8 + 0x90..8 + 0x94].fill(0);
            mb[8 + 0x08] = (5 << 5) | 13;
        }
        h.create_qp_with(QPN, &mb);
        let mut wqe = Harness::inline_send(QPN, 0, b"svc", true);
        if service == 3 {
            // A UD SEND carries a 48-byte datagram segment first: port 1,
            // PD 0, the port's LID, to QP 0x41, which does not exist.
            let mut dg = [0u8; 48];
            dg[0] = 1;
            dg[7] = 1;
            dg[35] = 0x41;
            let mut w = wqe[..16].to_vec();
            w.extend_from_slice(&dg);
            w.extend_from_slice(&wqe[16..]);
            w[7] = (w.len() / 16) as u8;
            wqe = w;
        }
        post(&mut h, QPN, QP_BUF, 0, &wqe);
        let g = &h.dev.counters().global;
        assert_eq!(g.deliveries, delivered, "service {service}");
        assert_eq!(g.ud_dropped, 1 - delivered, "service {service}");
        assert_eq!(h.cqe(0)[0x1f], 0x4a, "the sender completes either way");
        assert!(h.error_codes().is_empty());
    }
}

/// The diag block's new counters: DMA writes of every kind, BAR2 bytes,
/// and a counter reset that clears them (the clock excepted).
#[test]
fn dma_and_bar2_counters_and_their_reset() {
    let mut h = Harness::setup();
    let before = h.diag_read(0x538);
    assert!(before > 0, "mailboxes and owner initialisation");
    let wqe = Harness::inline_send(QPN, 0, b"count", true);
    h.write_wqe(QP_BUF, 0, &wqe);
    h.bf_copy(UAR, 0, &wqe, 8);
    // Payload, receive CQE, send CQE.
    assert_eq!(h.diag_read(0x538), before + 3);
    assert_eq!(h.diag_read(0x540), 64);
    h.doorbell(UAR, QPN); // nothing to fetch, but 4 more bytes
    assert_eq!(h.diag_read(0x540), 68);
    let clock = h.diag_read(0x578);
    assert!(clock > 0);
    assert!(h.diag_read(0x560) > 0 && h.diag_read(0x570) > 0);
    let s = h.dev.summary();
    for k in [
        "deliveries",
        "recv_cqes",
        "rnr_errors",
        "peer_errors",
        "payload_bytes",
        "dma_writes",
        "bar2_bytes",
        "refused_segments",
        "cq_overruns",
        "sum_one_way_ns",
        "clock_ns",
    ] {
        assert!(s.get(k).is_some(), "summary has {k}");
    }
    assert_eq!(s["qps"][QPN.to_string()]["receives"], 1);
    h.diag_write(crate::diag::RESET_COUNTERS, 1);
    for off in (0x500..0x578).step_by(8) {
        assert_eq!(h.diag_read(off), 0, "{off:#x}");
    }
    assert!(h.diag_read(0x578) > clock, "the clock is not a counter");
    // Read-only, and the block ends at 0x6c8 (version 15).
    h.diag_write(0x500, 1);
    h.diag_read(0x6c8);
    let codes = h.error_codes();
    assert_eq!(
        &codes[codes.len() - 2..],
        ["undefined_offset", "undefined_offset"]
    );
}
