//! UD QPs (`datapath::ud`, `datapath::ud_recv`, `qp::ud`): QP 0x40 and QP
//! 0x41 of PD 0, Q_Key `QKEY`, made by the transitions mainline mlx4_ib
//! posts for UD, exchange datagrams as libmlx4 `mlx4_post_send` writes them
//! (control segment, datagram segment, inline or data segments), by
//! BlueFlame and by doorbell. What lands, and the CQEs libmlx4 decodes.
//! The rules broken one by one are in `strict_ud_rules`.

use super::harness::*;
use crate::bytes::{be16, be32, put_be16, put_be32};
use crate::command::{op, status};
use crate::cq::CQE_IS_SEND;
use crate::datapath::ud::port_gid;
use crate::diag::{UD_DELIVERED, UD_DROPPED, UD_RECV_ERRORS, UD_REFUSED, UD_SENDS};
use crate::firmware::mad::LID;
use crate::wqe::opcode;

pub(super) const QKEY: u32 = 0x1111_1111;
/// RST2INIT's optpar for UD: PKEY_INDEX | Q_KEY.
pub(super) const OPTPAR_RST2INIT: u32 = 0x30;
/// optpar Q_KEY alone.
pub(super) const OPTPAR_Q_KEY: u32 = 0x20;
/// Where a receive larger than RECV_LEN lands (two pages).
pub(super) const BIG_RECV: u64 = 0x11_1000;

/// RST2INIT's mailbox for UD QP `qpn` as mainline fills it: service type
/// 3, the Q_Key at 0xa8 and the P_Key index at path +0x03 with their optpar
/// bits; no destination, no path, no access enables; an RQ (RQ_LOG x 16 B)
/// completing to `rcqn` with its record at `rq_db`, rlkey; PD 0.
pub(super) fn rst2init(qpn: u32, buf: u64, rcqn: u32, rq_db: u64, pkey: u8, qkey: u32) -> Vec<u8> {
    let mb = Harness::qp_mailbox(qpn, UAR, CQN, mtt_of(buf), SQ_LOG);
    let mut mb = Harness::with_rq(mb, rcqn, rq_db);
    put_be32(&mut mb, 0, OPTPAR_RST2INIT);
    let c = &mut mb[8..];
    put_be32(c, 0x00, 3 << 16);
    put_be32(c, 0x14, 0);
    put_be16(c, 0x18 + 0x06, 0);
    c[0x18 + 0x03] = pkey;
    put_be32(c, 0x90, 0);
    put_be32(c, 0xa8, qkey);
    mb
}

/// INIT2RTR's mailbox as mainline sends it for UD: no optpar; the state,
/// mtu_msgmax `(IB_MTU_4096 << 5) | 13` and the path's scheduling queue
/// `((port - 1) << 6) | 0x83`; the P_Key index and Q_Key fields 0.
pub(super) fn init2rtr(qpn: u32) -> Vec<u8> {
    let mut mb = vec![0u8; 0x100];
    let c = &mut mb[8..];
    put_be32(c, 0x00, (2 << 28) | (3 << 16));
    c[0x08] = (5 << 5) | 13;
    put_be32(c, 0x10, qpn);
    c[0x18 + 0x20] = 0x83;
    mb
}

/// RTR2RTS's: the state and the send PSN.
pub(super) fn rtr2rts(qpn: u32) -> Vec<u8> {
    let mut mb = vec![0u8; 0x100];
    let c = &mut mb[8..];
    put_be32(c, 0x00, (3 << 28) | (3 << 16));
    put_be32(c, 0x10, qpn);
    put_be32(c, 0x78, 0x12_3456);
    mb
}

/// A QP command of `qpn` with mailbox `mb`: its status.
pub(super) fn modify(h: &mut Harness, opcode: u16, qpn: u32, mb: &[u8]) -> u8 {
    h.poke(IN_MB, mb);
    h.cmd(opcode, 0, qpn)
}

/// UD QP `qpn` to RTS from RST2INIT's mailbox `mb`, its SQ initialised.
pub(super) fn make_ud_with(h: &mut Harness, qpn: u32, buf: u64, mb: &[u8]) {
    h.init_sq(buf, SQ_LOG);
    assert_eq!(modify(h, op::RST2INIT_QP, qpn, mb), status::OK);
    assert_eq!(modify(h, op::INIT2RTR_QP, qpn, &init2rtr(qpn)), status::OK);
    assert_eq!(modify(h, op::RTR2RTS_QP, qpn, &rtr2rts(qpn)), status::OK);
}

/// The EQs and CQs of `Harness::pair()`, no QP.
pub(super) fn queues() -> Harness {
    let mut h = Harness::new();
    assert_eq!(h.sw2hw_eq(0, EQ_LOG, 0, EQ0_BUF), 0);
    assert_eq!(h.sw2hw_eq(1, EQ_LOG, 1, EQ1_BUF), 0);
    assert_eq!(h.sw2hw_cq(CQN, CQ_LOG, UAR, 1, CQ_BUF, CQ_DB), 0);
    assert_eq!(h.sw2hw_cq(RCQN, RCQ_LOG, UAR, 1, RCQ_BUF, RCQ_DB), 0);
    assert_eq!(h.sw2hw_cq(RCQN2, RCQ_LOG, UAR, 1, RCQ2_BUF, RCQ2_DB), 0);
    h
}

/// QP 0x40 with Q_Key `qkey` and QP 0x41 with `qkey2` at P_Key index
/// `pkey2`, their RQs filled (RECV_LEN bytes per receive, from RECV_BUF
/// and RECV2_BUF).
pub(super) fn pair_with(qkey: u32, qkey2: u32, pkey2: u8) -> Harness {
    let mut h = queues();
    let mb = rst2init(QPN, QP_BUF, RCQN, RQ_DB, 0, qkey);
    make_ud_with(&mut h, QPN, QP_BUF, &mb);
    h.fill_rq(QP_BUF, RQ_DB, RECV_BUF);
    let mb = rst2init(QPN2, QP2_BUF, RCQN2, RQ2_DB, pkey2, qkey2);
    make_ud_with(&mut h, QPN2, QP2_BUF, &mb);
    h.fill_rq(QP2_BUF, RQ2_DB, RECV2_BUF);
    h
}

pub(super) fn pair() -> Harness {
    pair_with(QKEY, QKEY, 0)
}

/// A datagram segment's fields (`struct mlx4_av`, dqpn, qkey) as
/// libmlx4's `mlx4_create_ah` and `set_datagram_seg` fill them.
#[derive(Debug, Clone)]
pub(super) struct Av {
    pub port_pd: u32,
    pub g_slid: u8,
    pub dlid: u16,
    pub gid_index: u8,
    pub hop_limit: u8,
    pub sl_tclass_flowlabel: u32,
    pub dgid: [u8; 16],
    pub dqpn: u32,
    pub qkey: u32,
}

/// To `dqpn` on port 1 with PD 0, the port's LID, SL 0, no GRH, `QKEY`.
pub(super) fn av(dqpn: u32) -> Av {
    Av {
        port_pd: 1 << 24,
        g_slid: 0,
        dlid: LID,
        gid_index: 0,
        hop_limit: 0,
        sl_tclass_flowlabel: 0,
        dgid: [0; 16],
        dqpn,
        qkey: QKEY,
    }
}

impl Av {
    fn bytes(&self) -> [u8; 48] {
        let mut b = [0u8; 48];
        put_be32(&mut b, 0, self.port_pd);
        b[5] = self.g_slid;
        put_be16(&mut b, 6, self.dlid);
        b[9] = self.gid_index;
        b[11] = self.hop_limit;
        put_be32(&mut b, 12, self.sl_tclass_flowlabel);
        b[16..32].copy_from_slice(&self.dgid);
        put_be32(&mut b, 32, self.dqpn);
        put_be32(&mut b, 36, self.qkey);
        b
    }
}

/// A signalled UD WQE of `qpn` at SQ `index`: ctrl with `op`, the datagram
/// segment of `a`, `inline` bytes in one inline segment (at most 60: it
/// starts at 64), then the data segments.
pub(super) fn ud_wqe(
    qpn: u32,
    index: u32,
    op: u8,
    a: &Av,
    inline: &[u8],
    segs: &[(u32, u32, u64)],
) -> Vec<u8> {
    let mut w = data_wqe(qpn, index, op, None, inline, segs);
    w.splice(16..16, a.bytes());
    w[7] += 3;
    w
}

pub(super) fn post_db(h: &mut Harness, qpn: u32, buf: u64, index: u32, w: &[u8]) {
    h.write_wqe(buf, index, w);
    h.doorbell(UAR, qpn);
}

pub(super) fn post_bf(h: &mut Harness, buf: u64, index: u32, w: &[u8]) {
    h.write_wqe(buf, index, w);
    h.bf_copy(UAR, 0, w, 64);
}

pub(super) fn recv2_cqe(h: &Harness, index: u32) -> Vec<u8> {
    h.mem(RCQ2_BUF + u64::from(index) * 32, 32)
}

/// (my_qpn, wqe_index, syndrome, opcode byte) of an error CQE.
pub(super) fn err(cqe: &[u8]) -> (u32, u16, u8, u8) {
    (be32(cqe, 0), be16(cqe, 0x18), cqe[0x1b], cqe[0x1f])
}

/// The UD counters: sends, delivered, dropped, refused, receive errors.
pub(super) fn counted(h: &mut Harness) -> [u64; 5] {
    [
        UD_SENDS,
        UD_DELIVERED,
        UD_DROPPED,
        UD_REFUSED,
        UD_RECV_ERRORS,
    ]
    .map(|o| h.diag_read(o))
}

/// QP 0x40's send CQE `n`: a success of `op` with byte_cnt `len`, of the
/// WQE at SQ index `n` (`wqe_at` for another).
pub(super) fn assert_sent(h: &Harness, n: u32, op: u8, len: u32) {
    assert_sent_at(h, n, n, op, len);
}

pub(super) fn assert_sent_at(h: &Harness, n: u32, wqe_at: u32, op: u8, len: u32) {
    let c = h.cqe(n);
    assert_eq!(be32(&c, 0), QPN);
    assert_eq!(c[0x1f] & 0x7f, CQE_IS_SEND | op, "a success");
    assert_eq!((be32(&c, 0x14), be16(&c, 0x18)), (len, wqe_at as u16));
}

#[test]
fn an_inline_send_by_blueflame_lands_after_the_grh_slot() {
    let mut h = pair();
    h.poke(RECV2_BUF, &[0xee; 40]);
    let msg = b"hello, datagram";
    post_bf(
        &mut h,
        QP_BUF,
        0,
        &ud_wqe(QPN, 0, opcode::SEND, &av(QPN2), msg, &[]),
    );
    assert_eq!(h.diag_read(0xc0) >> 32, 1, "run from the BlueFlame bytes");
    assert_eq!(
        h.mem(RECV2_BUF, 40),
        [0xee; 40],
        "no GRH: the slot untouched"
    );
    assert_eq!(h.mem(RECV2_BUF + 40, msg.len()), msg);
    let r = recv2_cqe(&h, 0);
    assert_eq!(be32(&r, 0x00), QPN2);
    assert_eq!(be32(&r, 0x04), 0, "the P_Key index");
    assert_eq!(be32(&r, 0x08), QPN, "no GRH, no path bits, the source QP");
    assert_eq!((be16(&r, 0x0c), be16(&r, 0x0e)), (0, LID), "SL 0, SLID");
    assert_eq!(be32(&r, 0x14), msg.len() as u32 + 40, "the GRH slot counts");
    assert_eq!((be16(&r, 0x18), r[0x1f]), (0, 0x01));
    assert_sent(&h, 0, opcode::SEND, msg.len() as u32);
    assert_eq!(counted(&mut h), [1, 1, 0, 0, 0]);
    assert_eq!((h.rq_ci(QPN2), h.rq_ci(QPN)), (1, 0));
    assert_eq!(h.diag_read(0x500), 1, "a delivery");
    let d = &h.records_of("deliver")[0];
    assert_eq!(
        (d["from"].as_u64(), d["to"].as_u64()),
        (Some(0x40), Some(0x41))
    );
    assert_eq!(d["len"].as_u64(), Some(msg.len() as u64));
    assert!(h.error_codes().is_empty());
    h.check_invariants(false);
}

#[test]
fn a_gathered_send_imm_by_doorbell_carries_the_sl_and_immediate() {
    let mut h = pair();
    let data: Vec<u8> = (0..200u32).map(|i| (i * 7) as u8).collect();
    h.poke(GATHER_BUF, &data);
    let mut a = av(QPN2);
    a.sl_tclass_flowlabel = 7 << 28;
    let segs = [
        (150, RESERVED_LKEY, GATHER_BUF),
        (50, RESERVED_LKEY, GATHER_BUF + 150),
    ];
    let mut w = ud_wqe(QPN, 0, opcode::SEND_IMM, &a, b"", &segs);
    w[12..16].copy_from_slice(&[0xca, 0xfe, 0xf0, 0x0d]);
    w[11] |= 0x2; // solicited
    post_db(&mut h, QPN, QP_BUF, 0, &w);
    assert_eq!(h.diag_read(0xc0) >> 32, 2, "fetched by DMA");
    assert_eq!(h.mem(RECV2_BUF + 40, 200), data);
    let r = recv2_cqe(&h, 0);
    assert_eq!(&r[0x04..0x08], [0xca, 0xfe, 0xf0, 0x0d], "the immediate");
    assert_eq!(be32(&r, 0x08), QPN);
    assert_eq!(be16(&r, 0x0c) >> 12, 7, "SL");
    assert_eq!((be32(&r, 0x14), r[0x1f]), (240, 0x02));
    assert_sent(&h, 0, opcode::SEND_IMM, 200);
    // The WQE took two 64-byte SQ entries (DS 6). The next one lands in
    // the next receive WQE.
    assert_eq!(h.sq_ci(QPN), 2);
    let w = ud_wqe(QPN, 2, opcode::SEND, &av(QPN2), b"two", &[]);
    post_db(&mut h, QPN, QP_BUF, 2, &w);
    assert_eq!(h.mem(RECV2_BUF + u64::from(RECV_LEN) + 40, 3), b"two");
    assert_eq!(be16(&recv2_cqe(&h, 1), 0x18), 1);
    assert_sent_at(&h, 1, 2, opcode::SEND, 3);
    assert_eq!(counted(&mut h), [2, 2, 0, 0, 0]);
    assert!(h.error_codes().is_empty());
    h.check_invariants(false);
}

#[test]
fn a_grh_is_written_into_the_slot_when_the_vector_asks() {
    let mut h = pair();
    let mut a = av(QPN2);
    a.g_slid = 0x80;
    a.hop_limit = 64;
    a.sl_tclass_flowlabel = (3 << 28) | (0x12 << 20) | 0x3_4567;
    a.dgid = port_gid();
    post_bf(
        &mut h,
        QP_BUF,
        0,
        &ud_wqe(QPN, 0, opcode::SEND, &a, b"grh!", &[]),
    );
    let g = h.mem(RECV2_BUF, 40);
    assert_eq!(be32(&g, 0), 0x6123_4567, "version 6, class, flow label");
    assert_eq!(be16(&g, 4), 12 + 8 + 4 + 4, "PayLen: BTH, DETH, data, ICRC");
    assert_eq!((g[6], g[7]), (0x1b, 64), "next header BTH, hop limit");
    assert_eq!(g[8..24], port_gid(), "SGID: the port's GID 0");
    assert_eq!(g[24..40], port_gid(), "DGID");
    assert_eq!(h.mem(RECV2_BUF + 40, 4), b"grh!");
    let r = recv2_cqe(&h, 0);
    assert_eq!(be32(&r, 0x08), 0x8000_0000 | QPN, "GRH present");
    assert_eq!((be16(&r, 0x0c) >> 12, be32(&r, 0x14)), (3, 44));
    let grh: Vec<_> = h
        .records_of("dma_write")
        .into_iter()
        .filter(|r| r["what"] == "grh")
        .collect();
    assert_eq!(grh.len(), 1);
    assert_eq!(grh[0]["addr"].as_u64(), Some(RECV2_BUF));
    assert_eq!(counted(&mut h), [1, 1, 0, 0, 0]);
    h.check_invariants(false);
}

#[test]
fn the_grh_slot_and_the_message_span_the_scatter_lists_segments() {
    // QP 0x41 with 32-byte receive WQEs: a 24-byte segment, then 100 bytes.
    let mut h = queues();
    let mb = rst2init(QPN, QP_BUF, RCQN, RQ_DB, 0, QKEY);
    make_ud_with(&mut h, QPN, QP_BUF, &mb);
    let mut mb = rst2init(QPN2, QP2_BUF, RCQN2, RQ2_DB, 0, QKEY);
    mb[8 + 0x09] = (RQ_LOG << 3) | 1;
    make_ud_with(&mut h, QPN2, QP2_BUF, &mb);
    let mut rwqe = [0u8; 32];
    put_be32(&mut rwqe, 0, 24);
    put_be32(&mut rwqe, 4, RESERVED_LKEY);
    rwqe[8..16].copy_from_slice(&RECV2_BUF.to_be_bytes());
    put_be32(&mut rwqe, 16, 100);
    put_be32(&mut rwqe, 20, RESERVED_LKEY);
    rwqe[24..32].copy_from_slice(&(RECV2_BUF + 0x100).to_be_bytes());
    h.poke(QP2_BUF + RQ_OFF, &rwqe);
    h.set_rq_head(RQ2_DB, 1);
    let mut a = av(QPN2);
    a.g_slid = 0x80;
    a.dgid = port_gid();
    let msg = b"spans two segments";
    post_db(
        &mut h,
        QPN,
        QP_BUF,
        0,
        &ud_wqe(QPN, 0, opcode::SEND, &a, msg, &[]),
    );
    let expected = crate::datapath::ud_recv::grh(
        &crate::wqe::Datagram::decode(&a.bytes()),
        msg.len() as u64,
        false,
    );
    assert_eq!(h.mem(RECV2_BUF, 24), expected[..24]);
    assert_eq!(h.mem(RECV2_BUF + 0x100, 16), expected[24..]);
    assert_eq!(h.mem(RECV2_BUF + 0x110, msg.len()), msg);
    assert_eq!(be32(&recv2_cqe(&h, 0), 0x14), 40 + msg.len() as u32);
    assert!(h.error_codes().is_empty());
    h.check_invariants(false);
}

#[test]
fn a_message_of_the_mtu_lands_whole() {
    let mut h = pair();
    let data: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
    h.poke(GATHER_BUF, &data);
    h.post_recv(QP2_BUF, 0, 8192, RESERVED_LKEY, BIG_RECV);
    let w = ud_wqe(
        QPN,
        0,
        opcode::SEND,
        &av(QPN2),
        b"",
        &[(4096, RESERVED_LKEY, GATHER_BUF)],
    );
    post_db(&mut h, QPN, QP_BUF, 0, &w);
    assert_eq!(h.mem(BIG_RECV + 40, 4096), data);
    assert_eq!(be32(&recv2_cqe(&h, 0), 0x14), 4136);
    assert_sent(&h, 0, opcode::SEND, 4096);
    assert_eq!(counted(&mut h), [1, 1, 0, 0, 0]);
    h.check_invariants(false);
}

#[test]
fn query_qp_returns_the_qkey_a_later_transition_may_change() {
    let mut h = queues();
    h.init_sq(QP2_BUF, SQ_LOG);
    let mb = rst2init(QPN2, QP2_BUF, RCQN2, RQ2_DB, 5, 0x0101_0101);
    assert_eq!(modify(&mut h, op::RST2INIT_QP, QPN2, &mb), status::OK);
    let query = |h: &mut Harness| {
        assert_eq!(h.cmd(op::QUERY_QP, 0, QPN2), status::OK);
        h.mem(OUT_MB + 8, 0xf8)
    };
    assert_eq!(be32(&query(&mut h), 0xa8), 0x0101_0101);
    // INIT2RTR with optpar Q_KEY: the new one.
    let mut mb = init2rtr(QPN2);
    put_be32(&mut mb, 0, OPTPAR_Q_KEY);
    put_be32(&mut mb[8..], 0xa8, 0x0202_0202);
    assert_eq!(modify(&mut h, op::INIT2RTR_QP, QPN2, &mb), status::OK);
    // RTR2RTS without it: a Q_Key in its context changes nothing.
    let mut mb = rtr2rts(QPN2);
    put_be32(&mut mb[8..], 0xa8, 0x0303_0303);
    assert_eq!(modify(&mut h, op::RTR2RTS_QP, QPN2, &mb), status::OK);
    let c = query(&mut h);
    assert_eq!(be32(&c, 0xa8), 0x0202_0202);
    assert_eq!(be32(&c, 0x00) >> 28, 3, "RTS");
    assert_eq!((be32(&c, 0x00) >> 16) & 0xff, 3, "UD");
    assert_eq!(c[0x08], (5 << 5) | 13, "INIT2RTR's mtu_msgmax");
    assert_eq!(c[0x18 + 0x20], 0x83, "INIT2RTR's scheduling queue");
    assert_eq!(c[0x18 + 0x03], 5, "RST2INIT's P_Key index, kept");
    assert_eq!(be32(&c, 0x78), 0x12_3456, "RTR2RTS's send PSN");
    assert_eq!(h.dev.qps().get(QPN2).unwrap().qkey(), 0x0202_0202);
}
