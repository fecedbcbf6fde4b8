//! Shared receive queues (`srq`, `datapath::srq_recv`): the SRQ commands'
//! round trip, two RC QPs receiving from one SRQ along its next_wqe_index
//! chain, WQEs taken only when the doorbell record counts them, the limit
//! event, and the refusals.

use super::bringup::{map, ICM_DMA, LOG_SRQS, SRQC_BASE};
use super::harness::*;
use crate::bytes::{be16, be32, be64, put_be16, put_be32, put_be64};
use crate::command::{op, status};
use crate::diag::{SRQ_LIMIT_EVENTS, SRQ_REFUSED, SRQ_WQES};

const SRQN: u32 = 1;
/// 2^4 WQEs of 32 bytes (next segment, one data segment).
const SRQ_LOG: u8 = 4;
const SRQ_BUF: u64 = 0x11_8000;
const SRQ_DATA: u64 = 0x11_9000;
const SRQ_DB: u64 = CQ_DB + 0x240;
const SRQ_PD: u32 = 0;

/// A `struct mlx4_srq_context` as `core/srq.c:mlx4_srq_alloc` fills it.
fn srq_ctx(srqn: u32, log: u8, mtt: u64, db: u64) -> [u8; 0x30] {
    let mut c = [0u8; 0x30];
    put_be32(&mut c, 0x00, (u32::from(log) << 24) | srqn);
    c[0x04] = 1; // 32-byte stride
    c[0x13] = (mtt >> 32) as u8;
    put_be32(&mut c, 0x14, mtt as u32);
    put_be32(&mut c, 0x18, SRQ_PD);
    put_be64(&mut c, 0x28, db);
    c
}

fn sw2hw_srq(h: &mut Harness, srqn: u32, ctx: &[u8]) -> u8 {
    h.poke(IN_MB, ctx);
    h.cmd(op::SW2HW_SRQ, 0, srqn)
}

/// The SRQC page in ICM (`core/srq.c:__mlx4_srq_alloc_icm` maps it).
fn map_srqc(h: &mut Harness) {
    let page = (SRQC_BASE, ICM_DMA + 0x100_0000, 0);
    assert_eq!(map(h, op::MAP_ICM, &[page]), status::OK);
}

/// Software's SRQ buffer as `mlx4_ib_create_srq` (libmlx4
/// `mlx4_alloc_srq_buf`) leaves it: WQE i links to i + 1, the list ends
/// with an invalid lkey.
fn init_srq_buf(h: &mut Harness) {
    for i in 0..1u16 << SRQ_LOG {
        let mut w = [0u8; 32];
        put_be16(&mut w, 2, (i + 1) & ((1 << SRQ_LOG) - 1));
        put_be32(&mut w, 16 + 4, 0x100);
        h.poke(SRQ_BUF + u64::from(i) * 32, &w);
    }
}

/// Posts SRQ WQE `index`: one 256-byte buffer at SRQ_DATA + 256 * index.
fn post_srq(h: &mut Harness, index: u16) {
    let mut seg = [0u8; 16];
    put_be32(&mut seg, 0, RECV_LEN);
    put_be32(&mut seg, 4, RESERVED_LKEY);
    put_be64(
        &mut seg,
        8,
        SRQ_DATA + u64::from(index) * u64::from(RECV_LEN),
    );
    h.poke(SRQ_BUF + u64::from(index) * 32 + 16, &seg);
}

fn link(h: &mut Harness, from: u16, to: u16) {
    h.poke(SRQ_BUF + u64::from(from) * 32 + 2, &to.to_be_bytes());
}

fn set_counter(h: &mut Harness, counter: u32) {
    h.poke(SRQ_DB, &counter.to_be_bytes());
}

/// A QP mailbox whose receives come from SRQ `srqn` (`ib/qp.c`: srqn bit
/// 24, no RQ, no RQ doorbell record), rlkey, receive CQ `rcqn`.
fn on_srq(mut mb: Vec<u8>, srqn: u32, rcqn: u32) -> Vec<u8> {
    let c = &mut mb[8..];
    put_be32(c, 0xac, (1 << 24) | srqn);
    c[0x09] = 0;
    c[0x0b] |= 0x10;
    put_be64(c, 0xa0, 0);
    put_be32(c, 0x9c, rcqn);
    mb
}

/// EQs, CQs, SRQ 1 (16 WQEs, linked, none posted), and RC QPs 0x40 and
/// 0x41 connected to each other, both receiving from SRQ 1 (receive CQs
/// 2 and 3); SRQ_LIMIT mapped to EQ 0.
fn srq_pair() -> Harness {
    let mut h = Harness::new();
    assert_eq!(h.sw2hw_eq(0, EQ_LOG, 0, EQ0_BUF), 0);
    assert_eq!(h.sw2hw_eq(1, EQ_LOG, 1, EQ1_BUF), 0);
    assert_eq!(h.cmd_full(op::MAP_EQ, 0, 1 << 0x14, 0, 0, None), 0);
    assert_eq!(h.sw2hw_cq(CQN, CQ_LOG, UAR, 1, CQ_BUF, CQ_DB), 0);
    assert_eq!(h.sw2hw_cq(RCQN, RCQ_LOG, UAR, 1, RCQ_BUF, RCQ_DB), 0);
    assert_eq!(h.sw2hw_cq(RCQN2, RCQ_LOG, UAR, 1, RCQ2_BUF, RCQ2_DB), 0);
    map_srqc(&mut h);
    init_srq_buf(&mut h);
    let ctx = srq_ctx(SRQN, SRQ_LOG, mtt_of(SRQ_BUF), SRQ_DB);
    assert_eq!(sw2hw_srq(&mut h, SRQN, &ctx), status::OK);
    for (qpn, peer, buf, rcqn) in [(QPN, QPN2, QP_BUF, RCQN), (QPN2, QPN, QP2_BUF, RCQN2)] {
        h.init_sq(buf, SQ_LOG);
        let mb = Harness::qp_mailbox(qpn, UAR, CQN, mtt_of(buf), SQ_LOG);
        let mb = on_srq(Harness::connect_to(mb, peer), SRQN, rcqn);
        h.create_qp_with(qpn, &mb);
    }
    h
}

/// SENDs `payload` from `s` (at its SQ index `idx`) to its peer.
fn send(h: &mut Harness, s: u32, idx: u32, payload: &[u8]) {
    let buf = if s == QPN { QP_BUF } else { QP2_BUF };
    h.write_wqe(buf, idx, &Harness::inline_send(s, idx, payload, false));
    h.doorbell(UAR, s);
}

/// (my_qpn, wqe_index, opcode byte) of receive CQE `i` on CQ `rcq_buf`.
fn recv_cqe(h: &Harness, rcq_buf: u64, i: u64) -> (u32, u16, u8) {
    let c = h.mem(rcq_buf + 32 * i, 32);
    (be32(&c, 0) & 0xff_ffff, be16(&c, 0x18), c[0x1f])
}

fn srq_data(h: &Harness, index: u16, len: usize) -> Vec<u8> {
    h.mem(SRQ_DATA + u64::from(index) * u64::from(RECV_LEN), len)
}

fn query_limit(h: &mut Harness) -> u16 {
    assert_eq!(h.cmd(op::QUERY_SRQ, 0, SRQN), status::OK);
    be16(&h.mem(OUT_MB, 0x30), 0x1c)
}

#[test]
fn sw2hw_query_arm_hw2sw_round_trip() {
    let mut h = srq_pair();
    let ctx = srq_ctx(SRQN, SRQ_LOG, mtt_of(SRQ_BUF), SRQ_DB);
    assert_eq!(sw2hw_srq(&mut h, SRQN, &ctx), status::BAD_RES_STATE);
    assert_eq!(h.cmd(op::QUERY_SRQ, 0, SRQN), status::OK);
    let q = h.mem(OUT_MB, 0x30);
    assert_eq!(be32(&q, 0), (4 << 24) | SRQN);
    assert_eq!((be64(&q, 0x28), be16(&q, 0x1c)), (SRQ_DB, 0));
    assert_eq!(h.cmd_full(op::ARM_SRQ, 0, 5, SRQN, 0, None), status::OK);
    assert_eq!(query_limit(&mut h), 5);
    // mlx4_ib refuses a limit of the SRQ's size or more; so does the model.
    assert_eq!(
        h.cmd_full(op::ARM_SRQ, 0, 16, SRQN, 0, None),
        status::BAD_PARAM
    );
    assert_eq!(query_limit(&mut h), 5);
    // Two QPs take their receives from it: it stays (mainline destroys
    // them first).
    assert_eq!(h.cmd(op::HW2SW_SRQ, 1, SRQN), status::RESOURCE_BUSY);
    assert_eq!(h.cmd(op::TO_RST_QP, 2, QPN), 0);
    assert_eq!(h.cmd(op::HW2SW_SRQ, 1, SRQN), status::RESOURCE_BUSY);
    assert_eq!(h.cmd(op::TO_RST_QP, 2, QPN2), 0);
    h.poke(OUT_MB, &[0xff; 0x30]);
    assert_eq!(h.cmd(op::HW2SW_SRQ, 0, SRQN), status::OK);
    let q = h.mem(OUT_MB, 0x30);
    assert_eq!((be32(&q, 0), be16(&q, 0x1c)), ((4 << 24) | SRQN, 5));
    for opcode in [op::QUERY_SRQ, op::HW2SW_SRQ, op::ARM_SRQ] {
        assert_eq!(h.cmd(opcode, 1, SRQN), status::BAD_RES_STATE);
    }
    // In software ownership again: SW2HW takes it back.
    assert_eq!(sw2hw_srq(&mut h, SRQN, &ctx), status::OK);
    assert_eq!(query_limit(&mut h), 0);
    assert_eq!(h.diag_read(SRQ_REFUSED), 7);
    assert_eq!(h.records_of("srq_refused").len(), 7);
    assert!(h.error_codes().is_empty());
}

#[test]
fn two_qps_receive_along_the_next_wqe_index_chain() {
    let mut h = srq_pair();
    // Software's list: 0 -> 5 -> 2 -> 9 (as frees relink it).
    link(&mut h, 0, 5);
    link(&mut h, 5, 2);
    link(&mut h, 2, 9);
    for i in [0, 5, 2] {
        post_srq(&mut h, i);
    }
    set_counter(&mut h, 3);
    send(&mut h, QPN, 0, b"first"); // to 0x41
    send(&mut h, QPN2, 0, b"second"); // to 0x40
    send(&mut h, QPN, 1, b"third"); // to 0x41
    assert_eq!(recv_cqe(&h, RCQ2_BUF, 0), (QPN2, 0, 0x01));
    assert_eq!(recv_cqe(&h, RCQ_BUF, 0), (QPN, 5, 0x01));
    assert_eq!(recv_cqe(&h, RCQ2_BUF, 1), (QPN2, 2, 0x01));
    assert_eq!(srq_data(&h, 0, 5), b"first");
    assert_eq!(srq_data(&h, 5, 6), b"second");
    assert_eq!(srq_data(&h, 2, 5), b"third");
    assert_eq!(h.dev.qps().srqs.get(SRQN).unwrap().head, 9);
    assert_eq!(h.diag_read(SRQ_WQES), 3);
    assert_eq!(h.dev.counters().global.deliveries, 3);
    assert_eq!(h.diag_read(0x510), 0, "no RNR");
    // QUERY_SRQ's wqe_counter: the WQEs consumed.
    assert_eq!(h.cmd(op::QUERY_SRQ, 0, SRQN), status::OK);
    assert_eq!(be16(&h.mem(OUT_MB, 0x30), 0x22), 3);
    assert!(h.error_codes().is_empty());
    h.check_invariants(false);
}

#[test]
fn a_wqe_is_taken_only_when_the_record_counts_it() {
    let mut h = srq_pair();
    post_srq(&mut h, 0);
    post_srq(&mut h, 1);
    set_counter(&mut h, 1); // WQE 1 written, not yet posted
    send(&mut h, QPN, 0, b"one");
    assert_eq!(recv_cqe(&h, RCQ2_BUF, 0), (QPN2, 0, 0x01));
    send(&mut h, QPN, 1, b"two");
    assert_eq!(srq_data(&h, 1, 3), [0, 0, 0], "WQE 1 untouched");
    assert_eq!(h.diag_read(SRQ_WQES), 1);
    assert!(h.diag_read(0x510) >= 1, "the SRQ was empty: RNR");
    assert_eq!(h.dev.qps().srqs.get(SRQN).unwrap().head, 1);
    // The counter wraps at 2^16 (only its low 16 bits count).
    let mut h = srq_pair();
    post_srq(&mut h, 0);
    set_counter(&mut h, 0xabcd_0001);
    send(&mut h, QPN, 0, b"wrap");
    assert_eq!(srq_data(&h, 0, 4), b"wrap");
    assert!(h.error_codes().is_empty());
    // A counter more than the SRQ holds ahead: a protocol error, refused.
    let mut h = srq_pair();
    set_counter(&mut h, 17);
    send(&mut h, QPN, 0, b"x");
    assert_eq!(h.error_codes(), ["rq_head_ahead"]);
    assert_eq!(h.diag_read(SRQ_REFUSED), 1);
}

#[test]
fn the_limit_event_fires_once_below_the_watermark() {
    let mut h = srq_pair();
    for i in 0..4 {
        post_srq(&mut h, i);
    }
    set_counter(&mut h, 4);
    assert_eq!(h.cmd_full(op::ARM_SRQ, 0, 3, SRQN, 0, None), status::OK);
    send(&mut h, QPN, 0, b"a"); // 3 left: not below 3
    assert_eq!(h.diag_read(SRQ_LIMIT_EVENTS), 0);
    assert_eq!(h.eqe(EQ0_BUF, 0)[1], 0);
    send(&mut h, QPN, 1, b"b"); // 2 left: below
    assert_eq!(h.diag_read(SRQ_LIMIT_EVENTS), 1);
    let e = h.eqe(EQ0_BUF, 0);
    assert_eq!((e[1], be32(&e, 4) & 0xff_ffff), (0x14, SRQN));
    assert_eq!(query_limit(&mut h), 0, "disarmed");
    send(&mut h, QPN, 2, b"c"); // 1 left: not armed
    assert_eq!(h.diag_read(SRQ_LIMIT_EVENTS), 1);
    assert_eq!(h.eqe(EQ0_BUF, 1)[1], 0);
    assert_eq!(h.records_of("srq_limit")[0]["posted"], true);
    // Armed again above what is left: the next consume fires it.
    assert_eq!(h.cmd_full(op::ARM_SRQ, 0, 2, SRQN, 0, None), status::OK);
    assert_eq!(h.diag_read(SRQ_LIMIT_EVENTS), 1, "arming fires nothing");
    send(&mut h, QPN2, 0, b"d"); // 0 left
    assert_eq!(h.diag_read(SRQ_LIMIT_EVENTS), 2);
    assert_eq!(h.diag_read(SRQ_WQES), 4);
    assert!(h.error_codes().is_empty());
}

#[test]
fn refusals() {
    let mut h = Harness::new();
    assert_eq!(h.sw2hw_eq(0, EQ_LOG, 0, EQ0_BUF), 0);
    assert_eq!(h.sw2hw_cq(CQN, CQ_LOG, UAR, 0, CQ_BUF, CQ_DB), 0);
    let ctx = |srqn| srq_ctx(srqn, SRQ_LOG, mtt_of(SRQ_BUF), SRQ_DB);
    // The SRQC page not mapped: the firmware's ICM_ERROR.
    assert_eq!(sw2hw_srq(&mut h, SRQN, &ctx(SRQN)), status::ICM_ERROR);
    map_srqc(&mut h);
    // Outside the table, or the reserved SRQ 0.
    let beyond = 1 << LOG_SRQS;
    assert_eq!(sw2hw_srq(&mut h, beyond, &ctx(beyond)), status::BAD_INDEX);
    assert_eq!(sw2hw_srq(&mut h, 0, &ctx(0)), status::BAD_INDEX);
    // The context names another SRQ; too large; no doorbell record.
    assert_eq!(sw2hw_srq(&mut h, SRQN, &ctx(2)), status::BAD_PARAM);
    let big = srq_ctx(SRQN, 13, mtt_of(SRQ_BUF), SRQ_DB);
    assert_eq!(sw2hw_srq(&mut h, SRQN, &big), status::BAD_SIZE);
    let no_db = srq_ctx(SRQN, SRQ_LOG, mtt_of(SRQ_BUF), 0);
    assert_eq!(sw2hw_srq(&mut h, SRQN, &no_db), status::BAD_PARAM);
    assert_eq!(h.cmd(op::QUERY_SRQ, 0, beyond), status::BAD_INDEX);
    // RST2INIT of a QP naming an SRQ not in hardware ownership.
    let mb = Harness::qp_mailbox(QPN, UAR, CQN, mtt_of(QP_BUF), SQ_LOG);
    h.poke(IN_MB, &on_srq(mb.clone(), SRQN, CQN));
    assert_eq!(h.cmd(op::RST2INIT_QP, 0, QPN), status::BAD_RESOURCE);
    assert!(h.dev.qps().get(QPN).is_none());
    assert_eq!(sw2hw_srq(&mut h, SRQN, &ctx(SRQN)), status::OK);
    h.poke(IN_MB, &on_srq(mb, SRQN, CQN));
    assert_eq!(h.cmd(op::RST2INIT_QP, 0, QPN), status::OK);
    assert_eq!(h.dev.qps().get(QPN).unwrap().srqn(), Some(SRQN));
    assert_eq!(h.diag_read(SRQ_REFUSED), 8);
    assert_eq!(h.records_of("srq_refused").len(), 8);
    assert_eq!(h.dev.counters().global.icm_errors, 1);
    // CLOSE_HCA takes the SRQs with the QPs.
    assert_eq!(h.cmd(op::CLOSE_HCA, 0, 0), status::OK);
    assert!(h.dev.qps().srqs.is_empty());
    assert!(h.error_codes().is_empty());
}
