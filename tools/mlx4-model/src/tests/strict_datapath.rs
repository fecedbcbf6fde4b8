//! The special QPs' data path: sends on the special QPs (MLX), completed
//! and recorded but delivered nowhere, as `ib/qp.c:build_mlx_header`
//! writes them.

use super::bringup::*;
use super::harness::*;
use crate::bytes::{be16, be32, put_be32, put_be64};
use crate::command::{op, status};
use crate::cq::CQE_IS_SEND;
use crate::wqe::opcode;

const EQN: u32 = 4;
const CQ: u32 = 1;
/// The CQ's page (`create_cq`).
const CQ_PAGE: u64 = 0x31_0000 + 0x1000 * CQ as u64;
/// QP1 of port 1 and its page (a 16 x 64 B SQ, then the RQ).
const QP1: u32 = 0x202;
const QP1_PAGE: u64 = 0x24_0000;
/// The MAD mlx4_ib's agent sends, DMA-mapped.
const MAD_BUF: u64 = 0x25_0000;

/// HCA up, the async EQ (also for commands), a CQ, the special QPs
/// configured and QP1 in RTS as mlx4_ib brings it up.
pub(super) fn qp1_in_rts() -> Harness {
    let mut h = Harness::fresh();
    init_hca(&mut h);
    assert_eq!(create_eq(&mut h, EQN), status::OK);
    assert_eq!(create_cq(&mut h, CQ, EQN as u8), status::OK);
    assert_eq!(h.cmd(op::CONF_SPECIAL_QP, 0, 0x200), status::OK);
    let at = 8 * 80;
    h.dev.mem_mut().add_range(QP1_PAGE, 0x1000);
    h.dev.mem_mut().add_range(MAD_BUF, 0x1000);
    write_mtt(&mut h, at, &[QP1_PAGE]);
    let qpc_page = QPC_BASE + u64::from(QP1) * 256 / 0x1000 * 0x1000;
    assert_eq!(
        map(&mut h, op::MAP_ICM, &[(qpc_page, ICM_DMA + 0xa000, 0)]),
        0
    );
    let mut mb = Harness::with_rq(Harness::qp_mailbox(QP1, UAR, CQ, at, SQ_LOG), CQ, RQ_DB);
    mb[8 + 1] = 7; // MLX
    h.poke(IN_MB, &mb);
    assert_eq!(h.cmd(op::RST2INIT_QP, 0, QP1), status::OK);
    let mut later = vec![0u8; 0x100];
    later[8 + 1] = 7;
    for o in [op::INIT2RTR_QP, op::RTR2RTS_QP] {
        h.poke(IN_MB, &later);
        assert_eq!(h.cmd(o, 0, QP1), status::OK);
    }
    h
}

/// An MLX WQE as build_mlx_header and _mlx4_ib_post_send write it for a
/// GSI send without GRH: ctrl/MLX segment, the 28-byte LRH+BTH+DETH
/// inline, one data segment (the reserved lkey), the ICRC inline segment.
/// 80 bytes, DS 5: two SQ entries.
fn mlx_wqe(index: u32, len: u32, signaled: bool) -> Vec<u8> {
    let mut b = vec![0u8; 80];
    let owner = if index & (1 << SQ_LOG) != 0 {
        1 << 31
    } else {
        0
    };
    put_be32(&mut b, 0, owner | u32::from(opcode::SEND));
    b[7] = 5;
    // flags: CQ_UPDATE kept, SL 0, no VL15 (QP1); rlid 1.
    put_be32(&mut b, 8, if signaled { 0xc } else { 0 });
    put_be32(&mut b, 12, 1);
    put_be32(&mut b, 16, (1 << 31) | 28);
    b[20] = 0xf0; // LRH: VL 15 ... (the bytes are only recorded)
    put_be32(&mut b, 48, len);
    put_be32(&mut b, 52, RESERVED_LKEY);
    put_be64(&mut b, 56, MAD_BUF);
    put_be32(&mut b, 64, (1 << 31) | 4);
    b
}

#[test]
fn mad_sends_complete_and_go_nowhere() {
    let mut h = qp1_in_rts();
    let mad: Vec<u8> = (0..=255u8).collect();
    h.poke(MAD_BUF, &mad);
    h.poke(QP1_PAGE, &mlx_wqe(0, 256, true));
    h.doorbell(UAR, QP1);
    // The send CQE: QP1, wqe_index 0, SEND.
    let cqe = h.mem(CQ_PAGE, 32);
    assert_eq!(be32(&cqe, 0), QP1);
    assert_eq!(be16(&cqe, 0x18), 0);
    assert_eq!(cqe[0x1f] & 0x7f, CQE_IS_SEND | opcode::SEND);
    assert_eq!(h.sq_ci(QP1), 2);
    let g = &h.dev.counters().global;
    assert_eq!((g.mad_sends, g.deliveries), (1, 0));
    let r = &h.records_of("mad_send")[0];
    assert_eq!(
        (r["qpn"].as_u64(), r["len"].as_u64()),
        (Some(0x202), Some(288))
    );
    let hex = r["payload"].as_str().unwrap();
    assert!(hex.starts_with("f0"), "{hex}");
    // An unsignalled one at index 2: counted, no CQE.
    h.poke(QP1_PAGE + 2 * 64, &mlx_wqe(2, 64, false));
    h.doorbell(UAR, QP1);
    assert_eq!(h.sq_ci(QP1), 4);
    assert_eq!(h.dev.counters().global.mad_sends, 2);
    assert_eq!(h.mem(CQ_PAGE + 32, 32)[0x1f] & 0x7f, 0);
    // RDMA writes are not for MLX QPs: the error CQE, QP1 to ERR.
    let mut w = mlx_wqe(4, 64, true);
    w[3] = opcode::RDMA_WRITE;
    h.poke(QP1_PAGE + 4 * 64, &w);
    h.doorbell(UAR, QP1);
    assert_eq!(h.error_codes(), ["wqe_bad_opcode"]);
    assert_eq!(h.dev.counters().global.mad_sends, 2);
    assert_eq!(h.diag_read(crate::diag::MAD_SENDS), 2);
}

#[test]
fn init_port_posts_port_active() {
    let mut h = Harness::fresh();
    init_hca(&mut h);
    assert_eq!(create_eq(&mut h, EQN), status::OK);
    let eq_page = 0x30_0000 + 0x1000 * u64::from(EQN);
    // Before MAP_EQ: nowhere to go, recorded as not posted.
    assert_eq!(h.cmd(op::INIT_PORT, 0, 1), status::OK);
    assert_eq!(h.records_of("port_event")[0]["posted"], false);
    assert_eq!(h.cmd(op::CLOSE_PORT, 0, 1), status::OK);
    // mlx4_init_eq_table: the async events, PORT_CHANGE (bit 9) among
    // them, and CMD to the async EQ.
    let mask = (1u64 << 0x09) | (1 << 0x0a);
    assert_eq!(h.cmd_full(op::MAP_EQ, 0, mask, EQN, 0, None), status::OK);
    assert_eq!(h.cmd(op::INIT_PORT, 0, 1), status::OK);
    // mlx4_eq_int: type 0x09, subtype PORT_ACTIVE, port at 0x0c >> 28.
    let eqe = h.mem(eq_page, 32);
    assert_eq!((eqe[1], eqe[3], be32(&eqe, 0x0c) >> 28), (0x09, 0x04, 1));
    assert_eq!(h.dev.irq().raised, [0]);
    // Already up: nothing more; CLOSE_PORT posts no PORT_DOWN.
    assert_eq!(h.cmd(op::INIT_PORT, 0, 1), status::OK);
    assert_eq!(h.cmd(op::CLOSE_PORT, 0, 1), status::OK);
    assert_eq!(h.mem(eq_page + 32, 32)[1], 0);
    assert_eq!(h.records_of("port_event").len(), 2);
    assert_eq!(h.dev.counters().global.eqes, 1);
    assert!(h.error_codes().is_empty());
}

#[test]
fn sync_tpt_once_the_hca_is_up() {
    let mut h = Harness::fresh();
    run_fw(&mut h);
    assert_eq!(h.cmd(op::SYNC_TPT, 0, 0), status::BAD_SYS_STATE);
    h.cmd(op::UNMAP_FA, 0, 0);
    init_hca(&mut h);
    assert_eq!(h.cmd(op::SYNC_TPT, 0, 0), status::OK);
    // The firmware's diag counters (version 6).
    assert!(h.diag_read(0x00) >> 32 >= 6);
    assert_eq!(h.diag_read(crate::diag::FW_REFUSED), 1);
    assert_eq!(h.diag_read(crate::diag::ICM_ERRORS), 0);
}
