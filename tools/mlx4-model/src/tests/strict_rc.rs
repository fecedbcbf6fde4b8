//! User RC QPs as mainline mlx4_ib creates them for
//! libmlx4 (`ib/qp.c:create_qp_common`, `__mlx4_ib_modify_qp`; rdma-core
//! `providers/mlx4/verbs.c:create_qp_ex`): buffers on MTT pages, the
//! context's UAR, user memory regions (`ib/mr.c:mlx4_ib_reg_user_mr`), the
//! destination in INIT2RTR (remote QPN, primary path to LID 1) and
//! loopback delivery between two QPs of port 1.

use super::bringup::*;
use super::harness::*;
use crate::bytes::{be16, be32, put_be16, put_be32, put_be64};
use crate::command::{op, status};
use crate::cq::{syndrome, CQE_IS_SEND, CQE_OPCODE_ERROR};
use crate::datapath::deliver::recv_opcode;
use crate::mr::{flag, perm};
use crate::wqe::opcode;

const EQN: u32 = 4;
const CQ: u32 = 1;
const CQ_PAGE: u64 = 0x31_0000 + 0x1000 * CQ as u64;
/// The first QPNs mlx4 gives users (base_sqpn 0x200 + 8).
const QA: u32 = 0x208;
const QB: u32 = 0x209;
const PAGE_A: u64 = 0x26_0000;
const PAGE_B: u64 = 0x27_0000;
/// rq_size_stride of a 32 x 16 B RQ (stride field 16 >> 4 = 0).
const RQ32: u8 = RQ_LOG << 3;
/// A user context's UAR (mlx4_ib: 130 and up).
const UUAR: u32 = 130;
const PD: u32 = 7;
/// MPTs 0x100 (A's send buffer) and 0x101 (B's receive buffer), 4 KiB
/// pages at user virtual addresses.
const VA_A: u64 = 0x7f00_0000_1000;
const VA_B: u64 = 0x7f00_0040_0000;

/// `core/mr.c:hw_index_to_key`.
fn key(index: u32) -> u32 {
    index.rotate_left(8)
}

/// MAP_ICM of the QPC page holding QP `QA` (and `QB`) and of the dMPT page
/// of the user MRs (indices 0x100..).
fn map_qpc_and_dmpt_pages(h: &mut Harness) {
    let qpc_page = QPC_BASE + u64::from(QA) * 256 / 0x1000 * 0x1000;
    let dmpt_page = DMPT_BASE + 0x100 * 64;
    let pages = [
        (qpc_page, ICM_DMA + 0xb000, 0),
        (dmpt_page, ICM_DMA + 0xc000, 0),
    ];
    assert_eq!(map(h, op::MAP_ICM, &pages), status::OK);
}

/// HCA up, an EQ, one CQ for everything, QPC and dMPT pages mapped, the
/// two user MRs registered.
fn hca() -> Harness {
    let mut h = Harness::fresh();
    init_hca(&mut h);
    assert_eq!(create_eq(&mut h, EQN), status::OK);
    assert_eq!(create_cq(&mut h, CQ, EQN as u8), status::OK);
    map_qpc_and_dmpt_pages(&mut h);
    for (index, va, dma, mtt) in [
        (0x100, VA_A, GATHER_BUF, 0x600),
        (0x101, VA_B, RECV2_BUF, 0x608),
    ] {
        write_mtt(&mut h, mtt, &[dma]);
        let mut e = [0u8; 64];
        let access = perm::LOCAL_READ | perm::LOCAL_WRITE | perm::REMOTE_WRITE | perm::REMOTE_READ;
        put_be32(
            &mut e,
            0x00,
            flag::MIO | flag::REGION | access | flag::SW_OWNS,
        );
        put_be32(&mut e, 0x08, index);
        put_be32(&mut e, 0x0c, PD | (3 << 24));
        put_be64(&mut e, 0x10, va);
        put_be64(&mut e, 0x18, 0x1000);
        put_be64(&mut e, 0x2c, mtt);
        put_be32(&mut e, 0x38, 12);
        h.poke(IN_MB, &e);
        assert_eq!(h.cmd(op::SW2HW_MPT, 0, index), status::OK);
    }
    h
}

/// params2 MLX4_QP_BIT_RWE (`ib/qp.c:to_mlx4_access_flags`).
const RWE: u32 = 1 << 14;

/// RST2INIT as mlx4_ib sends it for a libmlx4 QP: RC, the PD, the
/// context's UAR, no rlkey, remote QPN 0, a 16 x 64 B SQ then the RQ
/// (`rq_size_stride`), its doorbell record, one MTT page, remote writes
/// enabled (perftest's IBV_ACCESS_REMOTE_WRITE).
fn rst2init(h: &mut Harness, qpn: u32, page: u64, mtt: u64, rq_size_stride: u8, db: u64) {
    rst2init_with(h, qpn, page, mtt, rq_size_stride, db, RWE);
}

fn rst2init_with(
    h: &mut Harness,
    qpn: u32,
    page: u64,
    mtt: u64,
    rq_size_stride: u8,
    db: u64,
    params2: u32,
) {
    h.dev.mem_mut().add_range(page, 0x1000);
    write_mtt(h, mtt, &[page]);
    h.init_sq(page, SQ_LOG);
    let mb = Harness::with_rq(Harness::qp_mailbox(qpn, UUAR, CQ, mtt, SQ_LOG), CQ, db);
    let mut mb = Harness::with_pd(mb, PD);
    mb[8 + 0x09] = rq_size_stride;
    mb[8 + 0x0b] = 0;
    put_be32(&mut mb[8..], 0x14, 0);
    put_be32(&mut mb[8..], 0x90, params2);
    h.poke(IN_MB, &mb);
    assert_eq!(h.cmd(op::RST2INIT_QP, 0, qpn), status::OK);
}

/// INIT2RTR (`mlx4_set_path`: rlid, port 1 in sched_queue) and RTR2RTS
/// (no path, no remote QPN) of `qpn` to `dest` at `dlid`.
fn connect(h: &mut Harness, qpn: u32, dest: u32, dlid: u16) {
    let mut mb = vec![0u8; 0x100];
    put_be32(&mut mb, 0, (1 << 7) | (1 << 16)); // PRIMARY_ADDR_PATH, SCHED_QUEUE
    put_be32(&mut mb[8..], 0x14, dest);
    put_be16(&mut mb[8..], 0x18 + 0x06, dlid);
    mb[8 + 0x18 + 0x20] = 0x83; // MLX4_IB_DEFAULT_SCHED_QUEUE, port 1
    h.poke(IN_MB, &mb);
    assert_eq!(h.cmd(op::INIT2RTR_QP, 0, qpn), status::OK);
    h.poke(IN_MB, &[0u8; 0x100]);
    assert_eq!(h.cmd(op::RTR2RTS_QP, 0, qpn), status::OK);
}

/// A and B (RQ of 32 x 16 B) connected to each other through LID `dlid`.
fn pair(dlid: u16) -> Harness {
    let mut h = hca();
    rst2init(&mut h, QA, PAGE_A, 0x700, RQ32, RQ_DB);
    rst2init(&mut h, QB, PAGE_B, 0x708, RQ32, RQ2_DB);
    connect(&mut h, QA, QB, dlid);
    connect(&mut h, QB, QA, dlid);
    h
}

/// A SEND of `len` bytes from A's region: ctrl + one data segment (DS 2),
/// signalled, as libmlx4 `mlx4_post_send` writes it.
fn send_wqe(index: u32, op: u8, len: u32, imm: u32) -> Vec<u8> {
    let mut b = vec![0u8; 32];
    let owner = if index & (1 << SQ_LOG) != 0 {
        1 << 31
    } else {
        0
    };
    put_be32(&mut b, 0, owner | u32::from(op));
    b[7] = 2;
    put_be32(&mut b, 8, 0xc);
    put_be32(&mut b, 12, imm);
    put_be32(&mut b, 16, len);
    put_be32(&mut b, 20, key(0x100));
    put_be64(&mut b, 24, VA_A);
    b
}

#[test]
fn send_between_two_user_qps_through_their_regions() {
    let mut h = pair(1);
    let msg: Vec<u8> = (0..100u8).collect();
    h.poke(GATHER_BUF, &msg);
    h.post_recv(PAGE_B, 0, 256, key(0x101), VA_B + 0x10);
    h.set_rq_head(RQ2_DB, 1);
    h.write_wqe(PAGE_A, 0, &send_wqe(0, opcode::SEND, 100, 0));
    h.doorbell(UUAR, QA);
    assert_eq!(h.mem(RECV2_BUF + 0x10, 100), msg);
    // The receive CQE (B, SEND, 100 bytes, from A), then A's send CQE.
    let r = h.mem(CQ_PAGE, 32);
    assert_eq!((be32(&r, 0), be32(&r, 8) & 0xff_ffff), (QB, QA));
    assert_eq!((r[0x1f] & 0x7f, be32(&r, 0x14)), (recv_opcode::SEND, 100));
    let s = h.mem(CQ_PAGE + 32, 32);
    assert_eq!(be32(&s, 0), QA);
    assert_eq!(s[0x1f] & 0x7f, CQE_IS_SEND | opcode::SEND);
    assert_eq!(be16(&s, 0x18), 0);
    assert!(h.error_codes().is_empty());
}

#[test]
fn rdma_write_with_immediate_consumes_a_receive() {
    let mut h = pair(1);
    h.poke(GATHER_BUF, &[0xab; 8]);
    h.post_recv(PAGE_B, 0, 0, 0x100, 0);
    h.set_rq_head(RQ2_DB, 1);
    // ctrl, raddr segment (B's region, its rkey), one data segment: DS 3.
    let mut w = send_wqe(0, opcode::RDMA_WRITE_IMM, 8, 0x1234_5678);
    w.splice(16..16, [0u8; 16]);
    w[7] = 3;
    put_be64(&mut w, 16, VA_B + 0x800);
    put_be32(&mut w, 24, key(0x101));
    h.write_wqe(PAGE_A, 0, &w);
    h.doorbell(UUAR, QA);
    assert_eq!(h.mem(RECV2_BUF + 0x800, 8), [0xab; 8]);
    let r = h.mem(CQ_PAGE, 32);
    assert_eq!(be32(&r, 0), QB);
    assert_eq!(r[0x1f] & 0x7f, recv_opcode::RDMA_WRITE_IMM);
    assert_eq!((be32(&r, 4), be32(&r, 0x14)), (0x1234_5678, 8));
    assert_eq!(h.rq_ci(QB), 1);
    assert!(h.error_codes().is_empty());
}

#[test]
fn a_one_entry_receive_queue_is_a_receive_queue() {
    // libmlx4 with max_recv_wr 0 (perftest's RDMA write QPs): one 16-byte
    // receive WQE, rq_size_stride 0.
    let mut h = hca();
    rst2init(&mut h, QA, PAGE_A, 0x700, RQ32, RQ_DB);
    rst2init(&mut h, QB, PAGE_B, 0x708, 0, RQ2_DB);
    assert_eq!(h.dev.qps().get(QB).unwrap().rq, Some((0, 4)));
    connect(&mut h, QA, QB, 1);
    connect(&mut h, QB, QA, 1);
    h.poke(GATHER_BUF, &[7; 4]);
    h.post_recv(PAGE_B, 0, 16, key(0x101), VA_B);
    h.set_rq_head(RQ2_DB, 1);
    h.write_wqe(PAGE_A, 0, &send_wqe(0, opcode::SEND, 4, 0));
    h.doorbell(UUAR, QA);
    assert_eq!(h.mem(RECV2_BUF, 4), [7; 4]);
    assert_eq!(h.rq_ci(QB), 1);
    assert!(h.error_codes().is_empty());
}

#[test]
fn a_path_to_another_lid_delivers_nothing() {
    let mut h = pair(2);
    h.poke(GATHER_BUF, &[1; 4]);
    h.post_recv(PAGE_B, 0, 16, key(0x101), VA_B);
    h.set_rq_head(RQ2_DB, 1);
    h.write_wqe(PAGE_A, 0, &send_wqe(0, opcode::SEND, 4, 0));
    h.doorbell(UUAR, QA);
    let s = h.mem(CQ_PAGE, 32);
    assert_eq!(
        (be32(&s, 0), s[0x1f] & 0x7f),
        (QA, CQE_IS_SEND | CQE_OPCODE_ERROR)
    );
    assert_eq!(s[0x1b], syndrome::TRANSPORT_RETRY_EXC_ERR);
    assert_eq!(h.rq_ci(QB), 0);
    assert_eq!(h.dev.counters().global.peer_errors, 1);
}

#[test]
fn cq_and_qp_numbers_up_to_the_profiles_counts() {
    // mlx4_core's default profile: 2^16 CQs and 2^17 QPs, more than
    // QUERY_DEV_CAP's 2^12 and 2^16; the bitmaps it allocates from are
    // the profile's.
    let mut h = Harness::fresh();
    let mut mb = init_hca_mailbox();
    // 2^17 QPCs (32 MiB) do not fit below the CQC table: elsewhere.
    let qpc_base = 0x1000_0000;
    put_be64(&mut mb, 0x30, qpc_base | 17);
    put_be64(&mut mb, 0x50, CQC_BASE | 16);
    init_hca_with(&mut h, &mb);
    assert_eq!(create_eq(&mut h, EQN), status::OK);
    let (cqn, qpn) = (5000u32, 0x1_0008u32);
    let cqc_page = CQC_BASE + u64::from(cqn) * 64 / 0x1000 * 0x1000;
    let qpc_page = qpc_base + u64::from(qpn) * 256 / 0x1000 * 0x1000;
    let pages = [
        (cqc_page, ICM_DMA + 0xd000, 0),
        (qpc_page, ICM_DMA + 0xe000, 0),
    ];
    assert_eq!(map(&mut h, op::MAP_ICM, &pages), status::OK);
    h.dev.mem_mut().add_range(0x28_0000, 0x2000);
    write_mtt(&mut h, 0x800, &[0x28_0000, 0x28_1000]);
    h.poke(
        IN_MB,
        &Harness::cq_ctx(CQ_LOG, UAR, EQN as u8, 0x800, CQ_DB),
    );
    assert_eq!(h.cmd(op::SW2HW_CQ, 0, cqn), status::OK);
    let mb = Harness::with_rq(
        Harness::qp_mailbox(qpn, UAR, cqn, 0x808, SQ_LOG),
        cqn,
        RQ_DB,
    );
    h.poke(IN_MB, &mb);
    assert_eq!(h.cmd(op::RST2INIT_QP, 0, qpn), status::OK);
    assert_eq!(h.cmd(op::TO_RST_QP, 2, qpn), status::OK);
    assert_eq!(h.cmd_full(op::HW2SW_CQ, 1, 0, cqn, 0, None), status::OK);
    // Past the profile: no such context.
    assert_eq!(h.cmd(op::TO_RST_QP, 2, 1 << 17), status::BAD_INDEX);
    assert!(h.error_codes().is_empty());
}

#[test]
fn rdma_writes_need_the_responders_remote_write_enable() {
    // B created without IBV_ACCESS_REMOTE_WRITE (rc_pingpong's QPs).
    let mut h = hca();
    rst2init(&mut h, QA, PAGE_A, 0x700, RQ32, RQ_DB);
    rst2init_with(&mut h, QB, PAGE_B, 0x708, RQ32, RQ2_DB, 0);
    connect(&mut h, QA, QB, 1);
    connect(&mut h, QB, QA, 1);
    let write = |index: u32| {
        let mut w = send_wqe(index, opcode::RDMA_WRITE, 8, 0);
        w.splice(16..16, [0u8; 16]);
        w[7] = 3;
        put_be64(&mut w, 16, VA_B);
        put_be32(&mut w, 24, key(0x101));
        w
    };
    h.poke(GATHER_BUF, &[0x5a; 8]);
    h.write_wqe(PAGE_A, 0, &write(0));
    h.doorbell(UUAR, QA);
    let s = h.mem(CQ_PAGE, 32);
    assert_eq!(s[0x1f] & 0x7f, CQE_IS_SEND | CQE_OPCODE_ERROR);
    assert_eq!(s[0x1b], syndrome::REMOTE_ACCESS_ERR);
    assert_eq!(h.mem(RECV2_BUF, 8), [0; 8]);
    assert_eq!(h.dev.counters().faults.remote_access_faults, 1);
    assert_eq!(h.records_of("prot_fault")[0]["reason"], "qp_access");
}

/// libmlx4's BlueFlame post (`mlx4_post_send`, one inline WQE of at most
/// bf_buf_size / 16 units): the WQE in the ring, WQE counter in
/// owner_opcode[23:8], `qpn << 8` OR-ed into bf_qpn, copied in 8-byte
/// stores to the context UAR's BF page, halves alternating.
#[test]
fn inline_send_and_rdma_write_by_blueflame_from_a_user_context() {
    let mut h = pair(1);
    for i in 0..4 {
        h.post_recv(PAGE_B, i, 256, key(0x101), VA_B + 0x100 * u64::from(i));
    }
    h.set_rq_head(RQ2_DB, 4);
    // ib_send_lat: 2-byte inline SEND, DS 2.
    let w = Harness::inline_send(QA, 0, &[0xc3, 0x3c], true);
    h.write_wqe(PAGE_A, 0, &w);
    h.bf_copy(UUAR, 0, &w, 8);
    assert_eq!(h.mem(RECV2_BUF, 2), [0xc3, 0x3c]);
    // ib_write_lat: RDMA_WRITE, raddr segment, then 4 inline bytes (the
    // inline header at +32: 28 bytes fit before the 64-byte boundary).
    let mut w = vec![0u8; 48];
    let owner_op = (1u32 << 8) | u32::from(opcode::RDMA_WRITE);
    put_be32(&mut w, 0, owner_op);
    put_be32(&mut w, 4, (QA << 8) | 3);
    put_be32(&mut w, 8, 0xc);
    put_be64(&mut w, 16, VA_B + 0xff0);
    put_be32(&mut w, 24, key(0x101));
    put_be32(&mut w, 32, (1 << 31) | 4);
    w[36..40].copy_from_slice(&[1, 2, 3, 4]);
    h.write_wqe(PAGE_A, 1, &w);
    h.bf_copy(UUAR, 1, &w, 8);
    assert_eq!(h.mem(RECV2_BUF + 0xff0, 4), [1, 2, 3, 4]);
    let g = &h.dev.counters().global;
    assert_eq!((g.wqes_bf, g.wqes_dma, g.bf_fallbacks), (2, 0, 0));
    assert_eq!(h.sq_ci(QA), 2);
    // A's CQEs: the SEND's after B's receive, then the write's.
    let s = h.mem(CQ_PAGE + 2 * 32, 32);
    assert_eq!((be32(&s, 0), be16(&s, 0x18)), (QA, 1));
    assert_eq!(s[0x1f] & 0x7f, CQE_IS_SEND | opcode::RDMA_WRITE);
    assert!(h.error_codes().is_empty());
}

/// libmlx4 `mlx4_arm_cq`: one 64-bit big-endian write to the context's
/// UAR + 0x20 (`sn << 28 | cmd | cqn`, then ci); cmd 1 (solicited) lets
/// only a solicited completion post the COMP EQE, cmd 2 any.
#[test]
fn user_cq_armed_through_the_context_uar() {
    let mut h = Harness::fresh();
    init_hca(&mut h);
    assert_eq!(create_eq(&mut h, EQN), status::OK);
    // The CQ on the user context's UAR, as mlx4_ib_create_cq makes it.
    map_mtt(&mut h);
    h.dev.mem_mut().add_range(CQ_PAGE, 0x1000);
    write_mtt(&mut h, 8 * 33, &[CQ_PAGE]);
    h.poke(
        IN_MB,
        &Harness::cq_ctx(CQ_LOG, UUAR, EQN as u8, 8 * 33, CQ_DB),
    );
    assert_eq!(h.cmd(op::SW2HW_CQ, 0, CQ), status::OK);
    map_qpc_and_dmpt_pages(&mut h);
    rst2init(&mut h, QA, PAGE_A, 0x700, RQ32, RQ_DB);
    rst2init(&mut h, QB, PAGE_B, 0x708, RQ32, RQ2_DB);
    connect(&mut h, QA, QB, 1);
    connect(&mut h, QB, QA, 1);
    for i in 0..2 {
        h.post_recv(PAGE_B, i, 0, 0x100, 0);
    }
    h.set_rq_head(RQ2_DB, 2);
    let eq_page = 0x30_0000 + 0x1000 * u64::from(EQN);
    h.arm_cq(UUAR, CQ, 1, 0);
    // Zero-byte SEND (no data segment: DS 1), not solicited: no event.
    let send = |index: u32, se: bool| {
        let mut w = vec![0u8; 16];
        let owner = if index & (1 << SQ_LOG) != 0 {
            1 << 31
        } else {
            0
        };
        put_be32(&mut w, 0, owner | u32::from(opcode::SEND));
        w[7] = 1;
        put_be32(&mut w, 8, 0xc | if se { 2 } else { 0 });
        w
    };
    h.write_wqe(PAGE_A, 0, &send(0, false));
    h.doorbell(UUAR, QA);
    assert_eq!(h.mem(CQ_PAGE, 32)[0x1f] & 0x7f, recv_opcode::SEND);
    assert_eq!(h.mem(eq_page, 32)[0x1f] & 0x80, 0x80, "no EQE yet");
    // Solicited: B's receive CQE fires the arm once.
    h.write_wqe(PAGE_A, 1, &send(1, true));
    h.doorbell(UUAR, QA);
    let eqe = h.mem(eq_page, 32);
    assert_eq!((eqe[1], be32(&eqe, 4) & 0xff_ffff), (0x00, CQ));
    assert_eq!(h.dev.counters().global.eqes, 1);
    // Armed on another UAR than the CQ's context names: refused.
    h.arm_cq(UAR, CQ, 2, 4);
    assert_eq!(h.error_codes(), ["cq_doorbell_foreign_uar"]);
}

/// params2 MLX4_QP_BIT_RRE.
const RRE: u32 = 1 << 15;

/// ib_read_lat's post: RDMA_READ (libmlx4: raddr segment, then the data
/// segments the bytes land in).
fn read_wqe(index: u32, raddr: u64, len: u32) -> Vec<u8> {
    let mut w = send_wqe(index, opcode::RDMA_READ, len, 0);
    w.splice(16..16, [0u8; 16]);
    w[7] = 3;
    put_be64(&mut w, 16, raddr);
    put_be32(&mut w, 24, key(0x101));
    w
}

#[test]
fn rdma_read_from_the_responders_region() {
    let mut h = hca();
    rst2init(&mut h, QA, PAGE_A, 0x700, RQ32, RQ_DB);
    rst2init_with(&mut h, QB, PAGE_B, 0x708, RQ32, RQ2_DB, RWE | RRE);
    connect(&mut h, QA, QB, 1);
    connect(&mut h, QB, QA, 1);
    let src: Vec<u8> = (0..64u8).rev().collect();
    h.poke(RECV2_BUF + 0x40, &src);
    h.write_wqe(PAGE_A, 0, &read_wqe(0, VA_B + 0x40, 64));
    h.doorbell(UUAR, QA);
    assert_eq!(h.mem(GATHER_BUF, 64), src);
    let s = h.mem(CQ_PAGE, 32);
    assert_eq!((be32(&s, 0), be32(&s, 0x14)), (QA, 64));
    assert_eq!(s[0x1f] & 0x7f, CQE_IS_SEND | opcode::RDMA_READ);
    assert!(h.error_codes().is_empty());
    use crate::diag::{RDMA_READS, RDMA_READ_BYTES};
    assert_eq!(
        (h.diag_read(RDMA_READS), h.diag_read(RDMA_READ_BYTES)),
        (1, 64)
    );
    // Past the responder's region: REMOTE_ACCESS_ERR, nothing written.
    h.poke(GATHER_BUF, &[0; 64]);
    h.write_wqe(PAGE_A, 1, &read_wqe(1, VA_B + 0xfc0, 65));
    h.doorbell(UUAR, QA);
    let s = h.mem(CQ_PAGE + 32, 32);
    assert_eq!(s[0x1f] & 0x7f, CQE_IS_SEND | CQE_OPCODE_ERROR);
    assert_eq!(s[0x1b], syndrome::REMOTE_ACCESS_ERR);
    assert_eq!(h.mem(GATHER_BUF, 64), [0; 64]);
    assert_eq!(h.diag_read(RDMA_READS), 1, "a refused read is not counted");
}

#[test]
fn rdma_read_needs_remote_read_enable() {
    let mut h = pair(1); // RWE only
    h.write_wqe(PAGE_A, 0, &read_wqe(0, VA_B, 8));
    h.doorbell(UUAR, QA);
    assert_eq!(h.mem(CQ_PAGE, 32)[0x1b], syndrome::REMOTE_ACCESS_ERR);
    assert_eq!(h.records_of("prot_fault")[0]["reason"], "qp_access");
    assert_eq!(h.mem(GATHER_BUF, 8), [0; 8]);
    // Not on a UC QP: an opcode it does not take.
    let mut h = Harness::pair();
    let mb = Harness::qp_mailbox(QPN, UAR, CQN, mtt_of(QP_BUF), SQ_LOG);
    let mut mb = Harness::connect_to(Harness::with_rq(mb, RCQN, RQ_DB), QPN2);
    mb[8 + 1] = crate::qp::service::UC;
    assert_eq!(h.cmd(op::TO_RST_QP, 2, QPN), status::OK);
    h.init_sq(QP_BUF, SQ_LOG);
    h.create_qp_with(QPN, &mb);
    let mut w = read_wqe(0, 0x1000, 8);
    put_be32(&mut w, 20, RESERVED_LKEY);
    h.write_wqe(QP_BUF, 0, &w);
    h.doorbell(UAR, QPN);
    assert_eq!(h.error_codes(), ["wqe_bad_opcode"]);
}

/// `fls(n - 1)`, the SRA_MAX/RRA_MAX field mlx4_ib writes for `n` reads
/// (`ib/qp.c:__mlx4_ib_modify_qp`); for 0 it writes nothing, so 0.
fn ra_field(n: u32) -> u32 {
    if n == 0 {
        0
    } else {
        32 - (n - 1).leading_zeros()
    }
}

/// INIT2RTR and RTR2RTS of QP `qpn` to `dest` as mlx4_ib sends them for
/// ibv_modify_qp with max_dest_rd_atomic `dest_rd` (required at RTR for
/// RC: RRA_MAX in params2 bits 23..21, and the access flags recomputed
/// with optpar RWE | RRE | RAE, RRE cleared for 0,
/// `to_mlx4_access_flags`) and max_rd_atomic `rd` (required at RTS:
/// SRA_MAX in params1 bits 23..21).
fn connect_rd_atomic(h: &mut Harness, qpn: u32, dest: u32, rd: u32, dest_rd: u32) {
    const OPTPAR_RRE_RAE_RWE: u32 = (1 << 1) | (1 << 2) | (1 << 3);
    const OPTPAR_SRA_MAX: u32 = 1 << 8;
    const OPTPAR_RRA_MAX: u32 = 1 << 9;
    // MLX4_IB_ACK_REQ_FREQ << 28 in every params1 mlx4_ib sends.
    const ACK_REQ_FREQ: u32 = 8 << 28;
    let mut mb = vec![0u8; 0x100];
    let optpar = (1 << 7) | (1 << 16) | OPTPAR_RRA_MAX | OPTPAR_RRE_RAE_RWE;
    put_be32(&mut mb, 0, optpar);
    put_be32(&mut mb[8..], 0x14, dest);
    put_be16(&mut mb[8..], 0x18 + 0x06, 1);
    mb[8 + 0x18 + 0x20] = 0x83;
    put_be32(&mut mb[8..], 0x70, ACK_REQ_FREQ);
    let access = if dest_rd == 0 { RWE } else { RWE | RRE };
    put_be32(&mut mb[8..], 0x90, (ra_field(dest_rd) << 21) | access);
    h.poke(IN_MB, &mb);
    assert_eq!(h.cmd(op::INIT2RTR_QP, 0, qpn), status::OK);
    let mut mb = vec![0u8; 0x100];
    put_be32(
        &mut mb,
        0,
        OPTPAR_SRA_MAX | (1 << 12) | (1 << 13) | (1 << 14),
    );
    let retry = (7 << 16) | (7 << 13);
    put_be32(
        &mut mb[8..],
        0x70,
        ACK_REQ_FREQ | retry | (ra_field(rd) << 21),
    );
    h.poke(IN_MB, &mb);
    assert_eq!(h.cmd(op::RTR2RTS_QP, 0, qpn), status::OK);
}

#[test]
fn the_read_limits_are_decoded_as_mlx4_ib_encodes_them() {
    // (max_rd_atomic, max_dest_rd_atomic) asked for, and what the context
    // can say: 2^field, at least 1.
    for (rd, dest_rd, want_rd, want_dest) in [
        (0, 1, 1, 1),
        (1, 0, 1, 1),
        (2, 3, 2, 4),
        (4, 16, 4, 16),
        (16, 5, 16, 8),
    ] {
        let mut h = hca();
        rst2init_with(&mut h, QA, PAGE_A, 0x700, RQ32, RQ_DB, RWE | RRE);
        rst2init_with(&mut h, QB, PAGE_B, 0x708, RQ32, RQ2_DB, RWE | RRE);
        let qp = h.dev.qps().get(QA).unwrap();
        assert_eq!((qp.max_rd_atomic(), qp.max_dest_rd_atomic()), (1, 1));
        connect_rd_atomic(&mut h, QA, QB, rd, dest_rd);
        let qp = h.dev.qps().get(QA).unwrap();
        let got = (qp.max_rd_atomic(), qp.max_dest_rd_atomic(), qp.rre);
        assert_eq!(got, (want_rd, want_dest, dest_rd != 0), "{rd} {dest_rd}");
        // Recorded at each transition: INIT2RTR set the responder's,
        // RTR2RTS the requester's.
        let r = h.records_of("qp_context");
        let fields = |r: &serde_json::Value| {
            (
                r["qpn"].as_u64().unwrap() as u32,
                r["state"].as_str().unwrap().to_string(),
                r["max_rd_atomic"].as_u64().unwrap() as u32,
                r["max_dest_rd_atomic"].as_u64().unwrap() as u32,
            )
        };
        let got: Vec<_> = r.iter().map(fields).collect();
        assert_eq!(
            got,
            [
                (QA, "init".into(), 1, 1),
                (QB, "init".into(), 1, 1),
                (QA, "rtr".into(), 1, want_dest),
                (QA, "rts".into(), want_rd, want_dest),
            ]
        );
        // QUERY_QP returns the fields where mlx4_ib_query_qp reads them
        // (`1 << ((params >> 21) & 7)`), with the access enables.
        assert_eq!(h.cmd(op::QUERY_QP, 0, QA), status::OK);
        let q = h.mem(OUT_MB + 8, 0xa0);
        let (p1, p2) = (be32(&q, 0x70), be32(&q, 0x90));
        assert_eq!(1 << ((p1 >> 21) & 7), want_rd);
        assert_eq!(1 << ((p2 >> 21) & 7), want_dest);
        assert_eq!(p2 & (RWE | RRE), if dest_rd == 0 { RWE } else { RWE | RRE });
        assert!(h.error_codes().is_empty());
    }
}

/// QUERY_QP gives back what each transition set, where
/// `mlx4_ib_query_qp()` reads it: INIT2RTR's path MTU, primary path (the
/// peer's LID) and receive PSN with its RNR timer, RTR2RTS's send PSN,
/// retry counts and ACK timeout; a field no transition set stays 0.
#[test]
fn query_qp_reads_back_what_the_transitions_set() {
    let mut h = hca();
    rst2init_with(&mut h, QA, PAGE_A, 0x700, RQ32, RQ_DB, RWE);
    let mut mb = vec![0u8; 0x100];
    // PRIMARY_ADDR_PATH | RNR_TIMEOUT, as mlx4_ib sends them at INIT2RTR.
    put_be32(&mut mb, 0, (1 << 7) | (1 << 6));
    mb[8 + 0x08] = (3 << 5) | 31; // IB_MTU_1024, 2^31-byte messages
    put_be32(&mut mb[8..], 0x14, QB);
    put_be16(&mut mb[8..], 0x18 + 0x06, 0x1234);
    mb[8 + 0x18 + 0x20] = 0x83;
    put_be32(&mut mb[8..], 0x94, (12 << 24) | 0xabcde);
    h.poke(IN_MB, &mb);
    assert_eq!(h.cmd(op::INIT2RTR_QP, 0, QA), status::OK);
    let mut mb = vec![0u8; 0x100];
    // RETRY_COUNT | RNR_RETRY | ACK_TIMEOUT.
    put_be32(&mut mb, 0, (1 << 12) | (1 << 13) | (1 << 14));
    put_be32(&mut mb[8..], 0x70, (8 << 28) | (6 << 16) | (5 << 13));
    mb[8 + 0x18 + 0x08] = 14 << 3;
    put_be32(&mut mb[8..], 0x78, 0x12345);
    h.poke(IN_MB, &mb);
    assert_eq!(h.cmd(op::RTR2RTS_QP, 0, QA), status::OK);
    assert_eq!(h.cmd(op::QUERY_QP, 0, QA), status::OK);
    let q = h.mem(OUT_MB + 8, 0xf8);
    assert_eq!(be32(&q, 0) >> 28, 3, "RTS");
    assert_eq!(q[0x08] >> 5, 3, "path MTU");
    assert_eq!(be32(&q, 0x14) & 0xff_ffff, QB);
    assert_eq!(u16::from_be_bytes([q[0x1e], q[0x1f]]), 0x1234, "rlid");
    assert_eq!(q[0x18 + 0x08] >> 3, 14, "ACK timeout");
    assert_eq!(
        be32(&q, 0x94),
        (12 << 24) | 0xabcde,
        "RNR timer, receive PSN"
    );
    assert_eq!(be32(&q, 0x78), 0x12345, "send PSN");
    let p1 = be32(&q, 0x70);
    assert_eq!(((p1 >> 16) & 7, (p1 >> 13) & 7), (6, 5), "retry counts");
    assert_eq!(be32(&q, 0xa8), 0, "no Q_Key was set");
    assert!(h.error_codes().is_empty());
}

/// max_dest_rd_atomic 0 is the responder's "no reads": mlx4_ib clears RRE
/// for it, and a read to it is a remote access error. That is the only
/// read limit a request can reach in the model (`Qp::max_rd_atomic`).
#[test]
fn no_responder_reads_is_rre_clear() {
    let mut h = hca();
    rst2init_with(&mut h, QA, PAGE_A, 0x700, RQ32, RQ_DB, RWE | RRE);
    rst2init_with(&mut h, QB, PAGE_B, 0x708, RQ32, RQ2_DB, RWE | RRE);
    connect_rd_atomic(&mut h, QA, QB, 1, 1);
    connect_rd_atomic(&mut h, QB, QA, 1, 0);
    h.write_wqe(PAGE_A, 0, &read_wqe(0, VA_B, 8));
    h.doorbell(UUAR, QA);
    assert_eq!(h.mem(CQ_PAGE, 32)[0x1b], syndrome::REMOTE_ACCESS_ERR);
    assert_eq!(h.records_of("prot_fault")[0]["reason"], "qp_access");
}
