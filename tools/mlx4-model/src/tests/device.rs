use super::bringup::hca_up;
use super::harness::*;
use crate::bytes::{be16, be32, hex, put_be32};
use crate::command::{op, status};
use crate::diag;
use crate::layout::*;
use crate::Config;

#[test]
fn query_dev_cap_fw_adapter() {
    let mut h = Harness::new();
    assert_eq!(h.cmd(op::QUERY_DEV_CAP, 0, 0), 0);
    let b = h.mem(OUT_MB, 0x100);
    assert_eq!(
        (b[0x11], b[0x12], b[0x13], b[0x19], b[0x1b], b[0x1f]),
        (12, 6, 16, 12, 12, 3)
    );
    assert_eq!((b[0x37], b[0x48], b[0x49], b[0x4b]), (1, 0x10, 2, 12)); // 4 MiB of UARs
    assert_eq!((b[0x4c], b[0x4d], b[0x4e], b[0x51]), (0x80, 9, 3, 16));
    assert_eq!(be16(&b, 0x52), 1008);
    assert_eq!(be32(&b, 0x40) | be32(&b, 0x70), 0);
    assert_eq!(be32(&b, 0x44), 0x4_0007, "RC, UC, UD, ATOMIC");
    assert_eq!(h.cmd(op::QUERY_FW, 0, 0), 0);
    let b = h.mem(OUT_MB, 0x40);
    assert_eq!(
        (be16(&b, 2), be16(&b, 6), be16(&b, 4), be16(&b, 0x0a)),
        (2, 42, 5000, 3)
    );
    h.poke(OUT_MB + 0x10, &[0xff]);
    assert_eq!(h.cmd(op::QUERY_ADAPTER, 0, 0), 0);
    assert_eq!(h.mem(OUT_MB + 0x10, 1), [0]);
    // num_uars 256: 1 MiB of UARs, log 0.
    let mut h = Harness::up(Config {
        num_uars: 256,
        fallback_every: 0,
    });
    let before = h.dev.counters().global.commands;
    h.cmd(op::QUERY_DEV_CAP, 0, 0);
    assert_eq!(h.mem(OUT_MB + 0x49, 1), [0]);
    assert!(h.error_codes().is_empty());
    assert_eq!(h.dev.counters().global.commands, before + 1);
}

#[test]
fn hcr_toggle_status_and_bad_commands() {
    let mut h = Harness::fresh();
    // After reset: idle, T=0.
    assert_eq!(h.read32(0, HCR_BASE + 0x18), 0);
    hca_up(&mut h);
    let first = h.records_of("command").len();
    assert_eq!(h.cmd(0x7ff, 0, 0), status::BAD_OP);
    assert_eq!(h.cmd(op::NOP, 0, 0x1f), status::OK);
    // Mailbox not 4 KiB aligned, and one the model cannot reach.
    assert_eq!(
        h.cmd_full(op::QUERY_FW, 0, 0, 0, OUT_MB + 8, None),
        status::BAD_PARAM
    );
    assert_eq!(
        h.cmd_full(op::QUERY_FW, 0, 0, 0, 0x8000_0000, None),
        status::INTERNAL_ERR
    );
    assert_eq!(h.error_codes(), ["dma_unmapped"]);
    // A narrow HCR write is refused; a write of GO with a repeated T is
    // executed but flagged.
    h.dev.mmio_write(0, HCR_BASE + 0x18, &[0x80]);
    let st = h.read32(0, HCR_BASE + 0x18);
    h.write32(0, HCR_BASE + 0x18, GO_NOP | (st & crate::hcr::TOGGLE));
    assert_eq!(
        h.error_codes(),
        ["dma_unmapped", "hcr_narrow_write", "hcr_toggle_repeated"]
    );
    let cmds = &h.records_of("command")[first..];
    assert_eq!(cmds[0]["name"], "unknown");
    assert_eq!(cmds[0]["status"], 2);
    assert_eq!(cmds[1]["name"], "NOP");
}

const GO_NOP: u32 = crate::hcr::GO | op::NOP as u32;

#[test]
fn eq_cq_qp_lifecycle_and_status_codes() {
    let mut h = Harness::new();
    assert_eq!(h.sw2hw_eq(8, EQ_LOG, 0, EQ0_BUF), status::BAD_INDEX);
    assert_eq!(h.sw2hw_eq(0, 23, 0, EQ0_BUF), status::BAD_SIZE);
    assert_eq!(h.sw2hw_eq(0, EQ_LOG, 8, EQ0_BUF), status::BAD_PARAM);
    let mut c = Harness::eq_ctx(EQ_LOG, 0, mtt_of(EQ0_BUF));
    c[0x0b] = 0x40; // a page offset
    h.poke(IN_MB, &c);
    assert_eq!(h.cmd(op::SW2HW_EQ, 0, 0), status::BAD_PARAM);
    assert_eq!(h.sw2hw_eq(0, EQ_LOG, 0, EQ0_BUF), status::OK);
    // Owner bits initialised.
    assert!(h.mem(EQ0_BUF, 256).chunks(32).all(|e| e[31] == 0x80));
    assert_eq!(h.sw2hw_eq(0, EQ_LOG, 0, EQ0_BUF), status::BAD_RES_STATE);
    // CQ on a missing EQ, then on EQ 0.
    assert_eq!(
        h.sw2hw_cq(CQN, CQ_LOG, UAR, 1, CQ_BUF, CQ_DB),
        status::BAD_RESOURCE
    );
    // An EQ number beyond the model's EQs (it panicked once).
    assert_eq!(
        h.sw2hw_cq(CQN, CQ_LOG, UAR, 0xff, CQ_BUF, CQ_DB),
        status::BAD_RESOURCE
    );
    assert_eq!(
        h.sw2hw_cq(4096, CQ_LOG, UAR, 0, CQ_BUF, CQ_DB),
        status::BAD_INDEX
    );
    assert_eq!(
        h.sw2hw_cq(CQN, CQ_LOG, 1024, 0, CQ_BUF, CQ_DB),
        status::BAD_PARAM
    );
    assert_eq!(
        h.sw2hw_cq(CQN, CQ_LOG, UAR, 0, CQ_BUF, CQ_DB + 4),
        status::BAD_PARAM
    );
    assert_eq!(h.sw2hw_cq(CQN, CQ_LOG, UAR, 0, CQ_BUF, CQ_DB), status::OK);
    assert!(h.mem(CQ_BUF, 512).chunks(32).all(|e| e[31] == 0x80));
    // SW2HW_CQ opmod 1: software initialised the buffer; the model keeps it.
    h.poke(QP2_BUF, &[0xcc; 32]);
    let c = Harness::cq_ctx(0, UAR, 0, mtt_of(QP2_BUF), CQ_DB + 8);
    h.poke(IN_MB, &c);
    assert_eq!(h.cmd(op::SW2HW_CQ, 1, 7), status::OK);
    assert_eq!(h.mem(QP2_BUF, 1), [0xcc]);
    assert_eq!(h.cmd(op::HW2SW_CQ, 1, 7), status::OK);
    // QP whose CQ does not exist; bad qpn; wrong local_qpn.
    let mb = Harness::qp_mailbox(QPN, UAR, 9, mtt_of(QP_BUF), SQ_LOG);
    h.poke(IN_MB, &mb);
    assert_eq!(h.cmd(op::RST2INIT_QP, 0, QPN), status::BAD_RESOURCE);
    let mb = Harness::qp_mailbox(QPN, UAR, CQN, mtt_of(QP_BUF), SQ_LOG);
    h.poke(IN_MB, &mb);
    assert_eq!(h.cmd(op::RST2INIT_QP, 0, 3), status::BAD_INDEX);
    assert_eq!(h.cmd(op::RST2INIT_QP, 0, QPN2), status::BAD_PARAM);
    // State machine.
    assert_eq!(h.cmd(op::INIT2RTR_QP, 0, QPN), status::BAD_QP_STATE);
    assert_eq!(h.cmd(op::RST2INIT_QP, 0, QPN), status::OK);
    assert_eq!(h.cmd(op::RST2INIT_QP, 0, QPN), status::BAD_QP_STATE);
    assert_eq!(h.cmd(op::RTR2RTS_QP, 0, QPN), status::BAD_QP_STATE);
    assert_eq!(h.qp_state_from_query(QPN), (1, 0));
    assert_eq!(h.cmd(op::INIT2RTR_QP, 0, QPN), status::OK);
    assert_eq!(h.cmd(op::RTR2RTS_QP, 0, QPN), status::OK);
    assert_eq!(h.qp_state_from_query(QPN), (3, 0));
    // The CQ is busy while the QP lives; the EQ while the CQ does.
    assert_eq!(h.cmd(op::HW2SW_CQ, 0, CQN), status::RESOURCE_BUSY);
    assert_eq!(h.cmd(op::HW2SW_EQ, 0, 0), status::RESOURCE_BUSY);
    assert_eq!(h.cmd(op::TO_ERR_QP, 0, QPN), status::OK);
    assert_eq!(h.qp_state_from_query(QPN), (6, 0));
    assert_eq!(h.cmd(op::TO_RST_QP, 0, QPN), status::BAD_PARAM, "opmod 2");
    assert_eq!(h.cmd(op::TO_RST_QP, 2, QPN), status::OK);
    assert_eq!(h.cmd(op::TO_RST_QP, 2, QPN), status::BAD_RES_STATE);
    assert_eq!(h.cmd(op::QUERY_QP, 0, QPN), status::BAD_RES_STATE);
    assert_eq!(h.cmd(op::TO_ERR_QP, 0, QPN), status::BAD_QP_STATE);
    assert_eq!(h.cmd(op::HW2SW_CQ, 0, CQN), status::OK);
    let ctx = h.mem(OUT_MB, 0x40);
    assert_eq!(be32(&ctx, 0x0c), (u32::from(CQ_LOG) << 24) | UAR);
    assert_eq!(h.cmd(op::HW2SW_CQ, 0, CQN), status::BAD_RES_STATE);
    assert_eq!(h.cmd(op::HW2SW_EQ, 0, 0), status::OK);
    assert_eq!(h.mem(OUT_MB + 0x0c, 1), [EQ_LOG]);
    assert_eq!(h.cmd(op::HW2SW_EQ, 1, 0), status::BAD_RES_STATE);
    assert_eq!(
        h.cmd_full(op::MAP_EQ, 0, 1 << 10, 0, 0, None),
        status::BAD_RES_STATE
    );
    assert!(h.error_codes().is_empty());
}

#[test]
fn later_transition_may_not_move_the_queues() {
    let h = Harness::setup();
    let mut h2 = Harness::new();
    h2.sw2hw_eq(0, EQ_LOG, 0, EQ0_BUF);
    h2.sw2hw_cq(CQN, CQ_LOG, UAR, 0, CQ_BUF, CQ_DB);
    let mb = Harness::qp_mailbox(QPN, UAR, CQN, mtt_of(QP_BUF), SQ_LOG);
    h2.poke(IN_MB, &mb);
    assert_eq!(h2.cmd(op::RST2INIT_QP, 0, QPN), 0);
    // A later transition carries only what it changes
    // (`ib/qp.c:__mlx4_ib_modify_qp`): another UAR or buffer in it is not
    // taken, the queues stay where RST2INIT put them.
    let mb = Harness::qp_mailbox(QPN, UAR + 1, CQN, mtt_of(QP2_BUF), SQ_LOG);
    h2.poke(IN_MB, &mb);
    assert_eq!(h2.cmd(op::INIT2RTR_QP, 0, QPN), 0);
    assert!(h2.error_codes().is_empty());
    let qp = h2.dev.qps().get(QPN).unwrap();
    assert_eq!((qp.usr_page, qp.buf.base()), (UAR, QP_BUF));
    assert!(h.error_codes().is_empty());
}

#[test]
fn doorbell_post_is_fetched_by_dma_and_completed() {
    let mut h = Harness::setup();
    let wqe = Harness::inline_send(QPN, 0, b"hi", true);
    h.write_wqe(QP_BUF, 0, &wqe);
    h.doorbell(UAR, QPN);
    let g = h.dev.counters().global.clone();
    assert_eq!(
        (g.send_doorbells, g.wqes_dma, g.sq_dma_reads, g.wqes_bf),
        (1, 1, 2, 0)
    );
    // First read: the WQE at index 0; second: index 1, not valid (owner 1).
    let reads = h.records_of("dma_read");
    let wqe_reads: Vec<_> = reads.iter().filter(|r| r["what"] == "wqe").collect();
    assert_eq!(wqe_reads[0]["addr"], QP_BUF);
    assert_eq!(wqe_reads[0]["len"], 64);
    assert_eq!(wqe_reads[1]["addr"], QP_BUF + 64);
    let w = &h.records_of("wqe")[0];
    assert_eq!(
        (w["source"].as_str(), w["ds"].as_u64(), w["opcode"].as_u64()),
        (Some("dma"), Some(2), Some(10))
    );
    assert_eq!(w["bytes"], hex(&wqe));
    // The CQE: my_qpn, byte_cnt 2, wqe_index 0, IS_SEND | SEND, owner 0.
    let mut want = [0u8; 32];
    put_be32(&mut want, 0, QPN);
    put_be32(&mut want, 0x14, 2);
    want[0x1f] = 0x4a;
    assert_eq!(h.cqe(0), want);
    assert_eq!(h.sq_ci(QPN), 1);
    assert_eq!(h.qp_state_from_query(QPN), (3, 1));
    // A doorbell with nothing new is a protocol error.
    h.doorbell(UAR, QPN);
    assert_eq!(h.error_codes(), ["doorbell_nothing_to_fetch"]);
    h.select(QPN);
    assert_eq!(h.diag_read(0xb0), 2);
    assert_eq!(h.diag_read(0xb8), 2, "its send CQE and its receive CQE");
    h.check_invariants(false);
}

#[test]
fn doorbell_checks_qp_state_and_uar() {
    let mut h = Harness::setup();
    let wqe = Harness::inline_send(QPN, 0, b"x", false);
    h.write_wqe(QP_BUF, 0, &wqe);
    h.doorbell(UAR, 0x99);
    h.doorbell(UAR + 1, QPN);
    h.dev
        .mmio_write(2, u64::from(UAR) * PAGE_SIZE + 0x14, &[0, 0]);
    h.write32(2, u64::from(UAR) * PAGE_SIZE + 0x14, (QPN << 8) | 1);
    assert_eq!(
        h.error_codes(),
        [
            "doorbell_unknown_qp",
            "doorbell_foreign_uar",
            "doorbell_bad_size",
            "doorbell_bad_value"
        ]
    );
    assert_eq!(h.dev.counters().global.wqes_dma, 0);
    // Unsignaled: executed, no send CQE (the receive CQE only).
    h.doorbell(UAR, QPN);
    assert_eq!(h.dev.counters().global.wqes_dma, 1);
    assert_eq!(h.dev.counters().global.cqes, 1);
    assert_eq!(h.dev.counters().global.recv_cqes, 1);
    // A QP in ERR flushes (here: nothing valid is left), no protocol error.
    h.cmd(op::TO_ERR_QP, 0, QPN);
    h.doorbell(UAR, QPN);
    assert_eq!(h.error_codes().last().unwrap(), "doorbell_bad_value");
    h.check_invariants(false);
}

#[test]
fn doorbell_fetches_every_valid_wqe_and_wraps() {
    let mut h = Harness::setup();
    // 20 posts on a 16-entry SQ: the second lap needs owner 1.
    for round in 0..2 {
        let first = round * 10;
        for i in first..first + 10 {
            let wqe = Harness::inline_send(QPN, i, &[i as u8; 3], true);
            h.write_wqe(QP_BUF, i, &wqe);
        }
        h.set_ci(first);
        h.doorbell(UAR, QPN);
        assert_eq!(h.sq_ci(QPN), first + 10);
    }
    assert_eq!(h.dev.counters().global.cqes, 40, "20 send + 20 receive");
    assert_eq!(h.rq_ci(QPN), 20);
    // CQE 16 (second lap of the 16-entry CQ) carries owner 1.
    assert_eq!(h.cqe(16)[0x1f], 0xca);
    assert_eq!(be16(&h.cqe(17), 0x18), 17);
    assert!(h.error_codes().is_empty());
}

/// With posted writes the driver may write WQEs 1 and 2 into the SQ before
/// the model sees the doorbell of WQE 0: that scan runs all three, and the
/// later doorbell and BF burst of 1 and 2 find them done (not an error, not
/// run twice). A doorbell with nothing behind it stays an error.
#[test]
fn announcements_of_wqes_a_scan_already_ran() {
    let mut h = Harness::setup();
    let wqes: Vec<_> = (0..3).map(|i| prepare(&mut h, i)).collect();
    h.doorbell(UAR, QPN);
    assert_eq!(h.sq_ci(QPN), 3);
    h.doorbell(UAR, QPN);
    h.bf_copy(UAR, 0, &wqes[2], 8);
    let g = h.dev.counters().global.clone();
    // Three send CQEs, three receive CQEs (the QP sends to itself).
    assert_eq!(
        (g.wqes_dma, g.wqes_bf, g.already_executed, g.cqes),
        (3, 0, 2, 6)
    );
    assert!(h.error_codes().is_empty());
    h.doorbell(UAR, QPN);
    assert_eq!(h.error_codes(), vec!["doorbell_nothing_to_fetch"]);
}

#[test]
fn bf_post_runs_without_sq_dma() {
    let mut h = Harness::setup();
    let wqe = Harness::inline_send(QPN, 0, b"hi", true);
    h.write_wqe(QP_BUF, 0, &wqe);
    h.bf_copy(UAR, 0, &wqe, 8);
    let g = h.dev.counters().global.clone();
    assert_eq!(
        (g.wqes_bf, g.wqes_dma, g.sq_dma_reads, g.bf_fallbacks),
        (1, 0, 0, 0)
    );
    assert_eq!(h.cqe(0)[0x1f], 0x4a);
    let w = &h.records_of("wqe")[0];
    assert_eq!(w["source"], "bf");
    let bf_writes: Vec<_> = h
        .records_of("mmio_write")
        .into_iter()
        .filter(|r| r["region"] == "bf")
        .collect();
    assert_eq!(bf_writes.len(), 8);
    assert_eq!(bf_writes[7]["chunk_off"], 56);
    assert_eq!(bf_writes[7]["page"], UAR);
    // The next post uses the other half, in 4-byte writes.
    let wqe = Harness::inline_send(QPN, 1, b"again", true);
    h.write_wqe(QP_BUF, 1, &wqe);
    h.bf_copy(UAR, 1, &wqe, 4);
    assert_eq!(h.dev.counters().global.wqes_bf, 2);
    assert_eq!(h.sq_ci(QPN), 2);
    h.select(QPN);
    assert_eq!(h.diag_read(0x80), 2);
    assert_eq!(h.diag_read(0x70), 0);
    assert!(h.error_codes().is_empty());
    h.check_invariants(false);
}

/// Posts WQE `index` into the SQ and returns it.
fn prepare(h: &mut Harness, index: u32) -> Vec<u8> {
    let wqe = Harness::inline_send(QPN, index, b"bf", true);
    h.write_wqe(QP_BUF, index, &wqe);
    wqe
}

fn fallback_reasons(h: &Harness) -> Vec<String> {
    h.records_of("bf_fallback")
        .iter()
        .map(|r| r["reason"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn bf_fallback_foreign_page() {
    let mut h = Harness::setup();
    let wqe = prepare(&mut h, 0);
    h.bf_copy(UAR + 5, 0, &wqe, 8);
    assert_eq!(fallback_reasons(&h), ["foreign_page"]);
    let g = h.dev.counters().global.clone();
    assert_eq!((g.wqes_bf, g.wqes_dma, g.bf_fallbacks), (0, 1, 1));
    h.select(QPN);
    assert_eq!(h.diag_read(0x90), 1);
    assert!(h.error_codes().is_empty());
}

/// Version 10: the writes to each UAR's two pages (UAR_SELECT), whatever
/// they carried, and the UAR a QP's context named, kept after it is gone.
#[test]
fn writes_counted_by_uar_page_and_the_uar_of_a_qp() {
    let mut h = Harness::setup();
    h.select(QPN);
    assert_eq!(h.diag_read(0x650), (1 << 32) | u64::from(UAR));
    h.select(0x99);
    assert_eq!(h.diag_read(0x650), 0, "no such QP: no UAR");
    // A BlueFlame post in 8-byte writes, then a doorbell post.
    let wqe = prepare(&mut h, 0);
    h.bf_copy(UAR, 0, &wqe, 8);
    let wqe = prepare(&mut h, 1);
    h.doorbell(UAR, QPN);
    // A burst on another UAR's BlueFlame page falls back; it is that page's.
    let _ = prepare(&mut h, 2);
    h.bf_copy(UAR + 5, 1, &wqe, 16);
    h.diag_write(diag::UAR_SELECT, UAR);
    assert_eq!(h.diag_read(diag::UAR_SELECT), u64::from(UAR));
    assert_eq!(
        (h.diag_read(0x638), h.diag_read(0x640), h.diag_read(0x648)),
        (1, 8, 64)
    );
    h.diag_write(diag::UAR_SELECT, UAR + 5);
    assert_eq!(
        (h.diag_read(0x638), h.diag_read(0x640), h.diag_read(0x648)),
        (0, 4, 64)
    );
    assert_eq!(h.dev.counters().global.bar2_writes, 13);
    // Destroyed, the QP still names its UAR; the counter reset clears both.
    h.cmd(op::TO_RST_QP, 0, QPN);
    h.select(QPN);
    assert_eq!(h.diag_read(0x650), (1 << 32) | u64::from(UAR));
    h.diag_write(diag::RESET_COUNTERS, 1);
    assert_eq!((h.diag_read(0x650), h.diag_read(0x640)), (0, 0));
    assert!(h.error_codes().is_empty());
    h.check_invariants(false);
}

#[test]
fn bf_fallback_counter_and_owner() {
    let mut h = Harness::setup();
    // Counter: WQE 0 only in memory (no doorbell), WQE 1 by BF.
    prepare(&mut h, 0);
    let wqe1 = prepare(&mut h, 1);
    h.bf_copy(UAR, 0, &wqe1, 8);
    assert_eq!(fallback_reasons(&h), ["counter"]);
    assert_eq!(h.sq_ci(QPN), 2, "the fallback fetched both");
    // Owner: a BF copy whose owner bit is wrong for index 2.
    let mut wqe2 = prepare(&mut h, 2);
    wqe2[0] ^= 0x80;
    h.bf_copy(UAR, 1, &wqe2, 8);
    assert_eq!(fallback_reasons(&h), ["counter", "owner"]);
    assert_eq!(h.sq_ci(QPN), 3);
    h.select(QPN);
    assert_eq!(h.diag_read(0x98), 2);
    assert_eq!(h.dev.counters().global.cqes, 6, "3 send + 3 receive");
    assert!(h.error_codes().is_empty());
}

#[test]
fn bf_fallback_out_of_order_and_incomplete() {
    let mut h = Harness::setup();
    let wqe = prepare(&mut h, 0);
    let base = h.bf_addr(UAR, 0, 0);
    // 8 bytes, then a gap.
    h.dev.mmio_write(2, base, &wqe[0..8]);
    h.dev.mmio_write(2, base + 16, &wqe[16..24]);
    assert_eq!(fallback_reasons(&h), ["out_of_order"]);
    assert_eq!(h.sq_ci(QPN), 1);
    // 16 bytes then a new burst at offset 0: the first is incomplete; the
    // second completes normally.
    let wqe = prepare(&mut h, 1);
    let base = h.bf_addr(UAR, 1, 0);
    h.dev.mmio_write(2, base, &wqe[0..8]);
    h.dev.mmio_write(2, base + 8, &wqe[8..16]);
    let wqe2 = prepare(&mut h, 2);
    h.bf_copy(UAR, 1, &wqe2, 8);
    // The incomplete fallback fetched WQEs 1 and 2; the completed BF copy of
    // WQE 2 then finds it already run.
    assert_eq!(fallback_reasons(&h), ["out_of_order", "incomplete"]);
    assert_eq!(h.sq_ci(QPN), 3);
    assert_eq!(h.dev.counters().global.already_executed, 1);
    assert_eq!(h.error_codes(), ["bf_out_of_order", "bf_incomplete"]);
    // A size change after the start is out of order too.
    let wqe = prepare(&mut h, 3);
    let base = h.bf_addr(UAR, 0, 0);
    h.dev.mmio_write(2, base, &wqe[0..8]);
    h.dev.mmio_write(2, base + 8, &wqe[8..12]);
    assert_eq!(fallback_reasons(&h).last().unwrap(), "out_of_order");
    h.select(QPN);
    assert_eq!((h.diag_read(0xa0), h.diag_read(0x98)), (3, 0));
    h.check_invariants(false);
}

#[test]
fn bf_forced_fallback_every_nth() {
    let mut h = Harness::setup_with(Config {
        num_uars: 1024,
        fallback_every: 3,
    });
    for i in 0..6 {
        let wqe = prepare(&mut h, i);
        h.bf_copy(UAR, i % 2, &wqe, 8);
    }
    assert_eq!(fallback_reasons(&h), ["forced", "forced"]);
    let g = h.dev.counters().global.clone();
    assert_eq!((g.wqes_bf, g.wqes_dma), (4, 2));
    // Through the diag block: every 2nd from now on.
    h.diag_write(diag::FALLBACK_EVERY, 2);
    for i in 6..10 {
        let wqe = prepare(&mut h, i);
        h.bf_copy(UAR, i % 2, &wqe, 8);
    }
    h.select(QPN);
    assert_eq!(h.diag_read(0xa8), 4);
    assert!(h.error_codes().is_empty());
    h.check_invariants(false);
}

#[test]
fn bf_unknown_qp_not_rts_and_malformed() {
    let mut h = Harness::setup();
    let wqe = Harness::inline_send(0x77, 0, b"x", true);
    h.bf_copy(UAR, 0, &wqe, 8);
    let mut wqe = prepare(&mut h, 0);
    wqe[7] = 0; // DS 0
    h.bf_copy(UAR, 1, &wqe, 16);
    h.dev.mmio_write(2, h.bf_addr(UAR, 0, 512), &[0; 8]);
    h.dev.mmio_write(2, h.bf_addr(UAR, 0, 8), &[0; 8]);
    h.dev.mmio_write(2, h.bf_addr(UAR, 0, 0xfc), &[0; 8]);
    assert_eq!(
        h.error_codes(),
        [
            "bf_unknown_qp",
            "bf_ds_zero",
            // the rest of the DS-0 burst belongs to nothing
            "bf_stray_write",
            "bf_stray_write",
            "bf_stray_write",
            "bf_bad_register",
            "bf_stray_write",
            "bf_crosses_half"
        ]
    );
    // DS 0 still names the QP: falls back and finds WQE 0.
    assert_eq!(fallback_reasons(&h), ["malformed"]);
    // A QP in ERR flushes what is posted to it: no protocol error.
    h.cmd(op::TO_ERR_QP, 0, QPN);
    let errors = h.error_codes().len();
    let wqe = prepare(&mut h, 1);
    h.bf_copy(UAR, 0, &wqe, 8);
    assert_eq!(h.error_codes().len(), errors);
    assert_eq!(h.dev.counters().global.flushed, 1);
    h.check_invariants(false);
}

#[test]
fn bad_wqe_gives_error_cqe_and_err_state() {
    let mut h = Harness::setup();
    let mut wqe = Harness::inline_send(QPN, 0, &[7; 40], false);
    // Make the inline data cross 64 bytes: claim 45 bytes (20 + 45 > 64).
    put_be32(&mut wqe, 16, (1 << 31) | 45);
    wqe.resize(80, 0);
    wqe[7] = 5;
    h.write_wqe(QP_BUF, 0, &wqe);
    h.doorbell(UAR, QPN);
    assert_eq!(h.error_codes(), ["inline_crosses_64b"]);
    let cqe = h.cqe(0);
    assert_eq!((cqe[0x1f], cqe[0x1b], be16(&cqe, 0x18)), (0x5e, 0x02, 0));
    assert_eq!(h.qp_state_from_query(QPN).0, 6);
    h.check_invariants(false);
}

/// A CQ whose producer is nent ahead of set_ci overran. set_ci lives in
/// memory the application writes, so this is a device event, not a
/// protocol error: a CQ_ERROR EQE (cqn, syndrome 1 "overrun") on the EQ
/// async events are mapped to, and the CQ writes no more CQEs.
#[test]
fn cq_overrun_is_an_async_event() {
    let mut h = Harness::setup();
    let mask = (1u64 << 0x04) | (1 << 0x0a);
    assert_eq!(h.cmd_full(op::MAP_EQ, 0, mask, 0, 0, None), 0);
    h.eq_doorbell(0, 0, true);
    let send = |h: &mut Harness, i: u32| {
        let wqe = Harness::inline_send(QPN, i, b"o", true);
        h.write_wqe(QP_BUF, i, &wqe);
        h.doorbell(UAR, QPN);
    };
    for i in 0..17 {
        send(&mut h, i);
    }
    let g = h.dev.counters().global.clone();
    assert_eq!((g.cqes, g.recv_cqes), (16 + 17, 17));
    assert_eq!((g.cq_overruns, g.cqes_dropped), (1, 1));
    assert!(h.error_codes().is_empty());
    let eqe = h.eqe(EQ0_BUF, 0);
    assert_eq!((eqe[1], be32(&eqe, 4), eqe[0x0f]), (0x04, CQN, 0x01));
    assert_eq!(h.dev.irq().raised, [0]);
    assert_eq!(h.records_of("cq_error")[0]["cqn"], CQN);
    // The QP goes on; the CQ stays in error even with room again.
    h.set_ci(16);
    send(&mut h, 17);
    let g = h.dev.counters().global.clone();
    assert_eq!((g.cqes, g.cq_overruns, g.cqes_dropped), (16 + 18, 1, 2));
    assert_eq!(h.diag_read(0x550), 1);
    assert_eq!(h.records_of("cqe_dropped").len(), 2);
    assert_eq!(h.qp_state_from_query(QPN).0, 3);
    assert!(h.error_codes().is_empty());
    // Without an EQ for async events: the same, without the EQE.
    let mut h = Harness::setup();
    for i in 0..17 {
        send(&mut h, i);
    }
    assert_eq!(h.dev.counters().global.cq_overruns, 1);
    assert_eq!(h.dev.counters().global.eqes, 0);
    assert!(h.error_codes().is_empty());
    h.check_invariants(false);
}

#[test]
fn armed_cq_gives_eqe_and_armed_eq_gives_msix() {
    let mut h = Harness::setup();
    h.arm_cq(UAR, CQN, 2, 0);
    let wqe = Harness::inline_send(QPN, 0, b"a", true);
    h.write_wqe(QP_BUF, 0, &wqe);
    h.doorbell(UAR, QPN);
    // EQE on EQ 1 (COMP, cqn), EQ not armed: no interrupt.
    let eqe = h.eqe(EQ1_BUF, 0);
    assert_eq!((eqe[1], be32(&eqe, 4), eqe[31]), (0x00, CQN, 0));
    assert!(h.dev.irq().raised.is_empty());
    // Arming EQ 1 behind the unread EQE fires at once (vector 1).
    h.eq_doorbell(1, 0, true);
    assert_eq!(h.dev.irq().raised, [1]);
    // Consume, re-arm CQ and EQ; next completion: EQE and MSI-X.
    h.eq_doorbell(1, 1, true);
    h.set_ci(1);
    h.arm_cq(UAR, CQN, 2, 1);
    let wqe = Harness::inline_send(QPN, 1, b"b", true);
    h.write_wqe(QP_BUF, 1, &wqe);
    h.doorbell(UAR, QPN);
    assert_eq!(h.dev.irq().raised, [1, 1]);
    // Disarmed now: a third completion makes a CQE only.
    let wqe = Harness::inline_send(QPN, 2, b"c", true);
    h.write_wqe(QP_BUF, 2, &wqe);
    h.doorbell(UAR, QPN);
    let g = h.dev.counters().global.clone();
    // Three send CQEs on CQ 1 and three receive CQEs on CQ 2 (not armed).
    assert_eq!((g.cqes, g.eqes, g.msix_irqs), (6, 2, 2));
    // Arming with an unpolled CQE (ci 2 < pi 3) reports it at once.
    h.arm_cq(UAR, CQN, 2, 2);
    assert_eq!(h.dev.counters().global.eqes, 3);
    // Solicited arming ignores send CQEs.
    h.set_ci(3);
    h.arm_cq(UAR, CQN, 1, 3);
    let wqe = Harness::inline_send(QPN, 3, b"d", true);
    h.write_wqe(QP_BUF, 3, &wqe);
    h.doorbell(UAR, QPN);
    assert_eq!(h.dev.counters().global.eqes, 3);
    assert!(h.error_codes().is_empty());
    assert_eq!(h.records_of("irq")[0]["vector"], 1);
}

#[test]
fn cq_doorbell_forms_and_errors() {
    let mut h = Harness::setup();
    let page = u64::from(UAR) * PAGE_SIZE;
    // Two 32-bit writes.
    h.write32(2, page + UAR_CQ_DB, (2 << 24) | CQN);
    h.write32(2, page + UAR_CQ_DB_HI, 0);
    assert!(h.dev.cqs().get(CQN).unwrap().arm.is_some());
    h.write32(2, page + UAR_CQ_DB_HI, 0);
    h.arm_cq(UAR + 1, CQN, 2, 0);
    h.arm_cq(UAR, 5, 2, 0);
    h.arm_cq(UAR, CQN, 3, 0);
    h.write32(2, page + UAR_CQ_DB, (2 << 24) | CQN);
    h.write32(2, page + UAR_CQ_DB, (2 << 24) | CQN);
    h.dev.mmio_write(2, page + UAR_CQ_DB, &[0; 2]);
    assert_eq!(
        h.error_codes(),
        [
            "cq_doorbell_incomplete",
            "cq_doorbell_foreign_uar",
            "cq_doorbell_unknown_cq",
            "cq_doorbell_bad_cmd",
            "cq_doorbell_incomplete",
            "cq_doorbell_bad_size"
        ]
    );
    h.eq_doorbell(5, 0, true);
    assert_eq!(h.error_codes().last().unwrap(), "eq_doorbell_unknown_eq");
}

#[test]
fn event_mode_command_completion() {
    let mut h = Harness::setup();
    // E=1 without an EQ for CMD: protocol error, command still completes.
    assert_eq!(h.cmd_full(op::NOP, 0, 0, 0x1f, 0, Some(7)), 0);
    assert_eq!(h.error_codes(), ["cmd_event_without_eq"]);
    // MAP_EQ CMD (and a few async types) to EQ 0, arm it, NOP with E=1.
    let mask = (1u64 << 0x0a) | (1 << 0x09) | (1 << 0x0f);
    assert_eq!(h.cmd_full(op::MAP_EQ, 0, mask, 0, 0, None), 0);
    h.eq_doorbell(0, 0, true);
    assert_eq!(h.cmd_full(op::NOP, 0, 0, 0x1f, 0, Some(0x1234)), 0);
    let eqe = h.eqe(EQ0_BUF, 0);
    assert_eq!((eqe[1], be16(&eqe, 6), eqe[0x0f]), (0x0a, 0x1234, 0));
    assert_eq!(h.dev.irq().raised, [0]);
    // A failing command reports its status in the EQE too.
    h.eq_doorbell(0, 1, true);
    assert_eq!(h.cmd_full(0x7ff, 0, 0, 0, 0, Some(0x55)), status::BAD_OP);
    let eqe = h.eqe(EQ0_BUF, 1);
    assert_eq!((eqe[1], be16(&eqe, 6), eqe[0x0f]), (0x0a, 0x55, 2));
    // Unmap: back to "no EQ".
    assert_eq!(h.cmd_full(op::MAP_EQ, 0, mask, 1 << 31, 0, None), 0);
    h.cmd_full(op::NOP, 0, 0, 0x1f, 0, Some(1));
    assert_eq!(h.error_codes().last().unwrap(), "cmd_event_without_eq");
}

#[test]
fn eq_overflow_and_unset_vector() {
    let mut h = Harness::setup();
    h.cmd_full(op::MAP_EQ, 0, 1 << 0x0a, 0, 0, None);
    for t in 0..9 {
        h.cmd_full(op::NOP, 0, 0, 0x1f, 0, Some(t));
    }
    assert_eq!(h.dev.counters().global.eqes, 8);
    assert_eq!(h.error_codes(), ["eq_overflow"]);
    h.dev.irq_mut().disabled.push(0);
    h.eq_doorbell(0, 0, true);
    assert_eq!(h.error_codes().last().unwrap(), "msix_not_enabled");
}

#[test]
fn diag_block_counters_expect_mark_reset() {
    let mut h = Harness::setup();
    assert_eq!(h.diag_read(0x00), 0xf_4d4c_584d);
    let mut b = [0u8; 4];
    h.dev.mmio_read(0, DIAG_BASE + 4, &mut b);
    assert_eq!(u32::from_le_bytes(b), 15);
    let commands = h.records_of("command").len() as u64;
    assert_eq!(h.diag_read(0x68), commands, "commands so far");
    // Outside a window: unexpected.
    h.doorbell(UAR, 0x99);
    h.diag_write(diag::EXPECT, 1);
    h.doorbell(UAR, 0x99);
    h.doorbell(UAR, 0x98);
    h.diag_write(diag::EXPECT, 0);
    assert_eq!((h.diag_read(0x20), h.diag_read(0x28)), (3, 1));
    let errs = h.records_of("protocol_error");
    assert_eq!(errs[0]["expected"], false);
    assert_eq!(errs[1]["expected"], true);
    assert_eq!(h.diag_read(0x48), 3);
    h.diag_write(diag::MARK, 0xabcd);
    assert_eq!(h.records_of("mark")[0]["value"], 0xabcd);
    // 4-byte read of a counter's low half.
    h.dev.mmio_read(0, DIAG_BASE + 0x20, &mut b);
    assert_eq!(u32::from_le_bytes(b), 3);
    h.diag_write(diag::RESET_COUNTERS, 1);
    assert_eq!((h.diag_read(0x20), h.diag_read(0x68)), (0, 0));
    // Bad accesses.
    h.dev.mmio_read(0, DIAG_BASE + 0x22, &mut [0u8; 2]);
    h.diag_read(0xe0);
    h.dev.mmio_write(0, DIAG_BASE + 0x08, &[0; 8]);
    h.diag_write(0x20, 5);
    assert_eq!(h.diag_read(0x20), 4);
    let codes = h.error_codes();
    assert_eq!(
        &codes[codes.len() - 4..],
        [
            "diag_bad_access",
            "undefined_offset",
            "diag_bad_access",
            "undefined_offset"
        ]
    );
    // Summary carries the counters.
    let s = h.dev.summary();
    assert_eq!(s["protocol_errors"], 4);
    assert_eq!(s["protocol_error_codes"]["diag_bad_access"], 2);
}

#[test]
fn ownership_reset_block_and_undefined_offsets() {
    let mut h = Harness::setup();
    assert_eq!(h.read32(0, OWNER_OFF), 0);
    assert_eq!(h.read32(0, OWNER_OFF), 1);
    h.write32(0, OWNER_OFF, 0);
    assert_eq!(h.read32(0, OWNER_OFF), 0);
    assert_eq!(h.read32(0, RESET_BASE + RESET_SEM), 0);
    assert!(h.error_codes().is_empty());
    h.write32(0, RESET_BASE + RESET_REG, 1);
    assert!(h.dev.qps().is_empty() && h.dev.cqs().is_empty());
    assert!(h.dev.eqs().live() == 0);
    assert_eq!(h.read32(0, HCR_BASE + 0x18), 0, "HCR idle, T=0");
    assert_eq!(h.read32(0, OWNER_OFF), 1, "still taken: mlx4_core frees it");
    h.write32(0, RESET_BASE + RESET_REG, 2);
    h.read32(0, 0x1000);
    h.write32(0, 0x80600, 1);
    h.read32(2, (2048 + 5) * PAGE_SIZE);
    h.read32(2, PAGE_SIZE + 0x100);
    assert_eq!(h.read32(2, PAGE_SIZE + 0x14), 0);
    h.write32(1, 0, 0);
    h.write32(0, OWNER_OFF, 1);
    assert_eq!(
        h.error_codes(),
        [
            "reset_bad_write",
            "undefined_offset",
            "undefined_offset",
            "undefined_offset",
            "undefined_offset",
            "undefined_region",
            "ownership_bad_write"
        ]
    );
}

#[test]
fn finish_reports_a_pending_burst() {
    let mut h = Harness::setup();
    let wqe = prepare(&mut h, 0);
    h.dev.mmio_write(2, h.bf_addr(UAR, 0, 0), &wqe[..8]);
    h.dev.finish();
    assert_eq!(h.error_codes(), ["bf_incomplete"]);
    assert_eq!(h.records().last().unwrap()["kind"], "exit");
}

#[test]
fn every_record_has_seq_and_kind() {
    let mut h = Harness::setup();
    let wqe = prepare(&mut h, 0);
    h.bf_copy(UAR, 0, &wqe, 8);
    for (i, r) in h.records().iter().enumerate() {
        assert_eq!(r["seq"], i as u64 + 1);
        assert!(r["kind"].is_string());
    }
}

/// The two posts of the design document, as the analyzer records them.
/// `MLX4_MODEL_EXCERPTS=1 cargo test -p mlx4-model excerpts -- --nocapture`.
#[test]
fn excerpts() {
    let mut h = Harness::setup();
    h.arm_cq(UAR, CQN, 2, 0);
    h.eq_doorbell(1, 0, true);
    h.diag_write(diag::MARK, 1);
    let wqe = Harness::inline_send(QPN, 0, b"hi", true);
    h.write_wqe(QP_BUF, 0, &wqe);
    h.doorbell(UAR, QPN);
    h.diag_write(diag::MARK, 2);
    let wqe = Harness::inline_send(QPN, 1, b"hi", true);
    h.write_wqe(QP_BUF, 1, &wqe);
    h.bf_copy(UAR, 0, &wqe, 8);
    h.diag_write(diag::MARK, 3);
    let lines = h.dev.tracer().lines();
    let start = lines
        .iter()
        .position(|l| l.contains(r#""kind":"mark""#))
        .unwrap();
    if std::env::var_os("MLX4_MODEL_EXCERPTS").is_some() {
        for l in &lines[start..] {
            println!("{l}");
        }
    }
    assert!(h.error_codes().is_empty());
}
