//! Strict firmware (`--firmware=strict`): the life cycle mainline
//! mlx4_core drives, step by step (QUERY_FW, MAP_FA, RUN_FW, capabilities,
//! ICM, INIT_HCA, CLOSE_HCA, UNMAP_FA), what it refuses, and that `ready`
//! mode stays as it was.

use super::harness::*;
use crate::bytes::{be16, be32, be64, put_be32, put_be64};
use crate::command::{op, status};
use crate::config::FirmwareMode;
use crate::firmware::{caps, Phase};
use crate::layout::*;
use crate::Config;

/// Where the tests' firmware area, auxiliary ICM and ICM pages "are": the
/// model never touches them, so they need not be in the fake memory.
pub(super) const FA_DMA: u64 = 0x4000_0000;
pub(super) const AUX_DMA: u64 = 0x5000_0000;
pub(super) const ICM_DMA: u64 = 0x6000_0000;

/// The test profile: each table at its own 16 MiB of ICM.
pub(super) const QPC_BASE: u64 = 0x0100_0000;
pub(super) const CQC_BASE: u64 = 0x0200_0000;
pub(super) const EQC_BASE: u64 = 0x0300_0000;
pub(super) const DMPT_BASE: u64 = 0x0400_0000;
pub(super) const MTT_BASE: u64 = 0x0500_0000;
pub(super) const ICM_SIZE: u64 = 0x0600_0000;

pub(super) fn strict() -> Harness {
    Harness::with_config(Config {
        firmware: FirmwareMode::Strict,
        ..Config::default()
    })
}

/// A page-list command of (virt, dma, order) entries; the status.
pub(super) fn map(h: &mut Harness, opcode: u16, entries: &[(u64, u64, u32)]) -> u8 {
    let mut b = vec![0u8; 16 * entries.len()];
    for (i, &(virt, dma, order)) in entries.iter().enumerate() {
        put_be64(&mut b, 16 * i, virt);
        put_be64(&mut b, 16 * i + 8, dma | u64::from(order));
    }
    h.poke(IN_MB, &b);
    h.cmd(opcode, 0, entries.len() as u32)
}

/// The immediate out_param of the last command.
pub(super) fn out_param(h: &mut Harness) -> u64 {
    (u64::from(h.read32(0, HCR_BASE + 0x0c)) << 32) | u64::from(h.read32(0, HCR_BASE + 0x10))
}

/// mlx4_init_fw: QUERY_FW, MAP_FA of the whole area (one 2 MiB run),
/// RUN_FW, MOD_STAT_CFG with 4 KiB pages.
pub(super) fn run_fw(h: &mut Harness) {
    assert_eq!(h.cmd(op::QUERY_FW, 0, 0), status::OK);
    assert_eq!(be16(&h.mem(OUT_MB, 2), 0), caps::FW_PAGES);
    assert_eq!(map(h, op::MAP_FA, &[(0, FA_DMA, 9)]), status::OK);
    assert_eq!(h.cmd(op::RUN_FW, 0, 0), status::OK);
    h.poke(IN_MB, &[0, 0, 1, 0]);
    assert_eq!(h.cmd(op::MOD_STAT_CFG, 0, 0), status::OK);
}

/// An INIT_HCA mailbox of the test profile.
pub(super) fn init_hca_mailbox() -> Vec<u8> {
    let mut b = vec![0u8; 0x200];
    b[0] = 2;
    put_be64(&mut b, 0x30, QPC_BASE | 10);
    put_be64(&mut b, 0x50, CQC_BASE | 12);
    put_be64(&mut b, 0x80, EQC_BASE | 3);
    put_be64(&mut b, 0xf0, DMPT_BASE);
    b[0xfb] = 10;
    put_be64(&mut b, 0x100, MTT_BASE);
    b[0x12a] = 10;
    b
}

/// mlx4_init_hca up to INIT_HCA: SET_ICM_SIZE, MAP_ICM_AUX, the first
/// page of the EQC, CQC and QPC tables, INIT_HCA.
pub(super) fn init_hca(h: &mut Harness) {
    init_hca_with(h, &init_hca_mailbox());
}

/// `init_hca` with another INIT_HCA mailbox.
pub(super) fn init_hca_with(h: &mut Harness, mb: &[u8]) {
    run_fw(h);
    assert_eq!(
        h.cmd_full(op::SET_ICM_SIZE, 0, ICM_SIZE, 0, 0, None),
        status::OK
    );
    let aux = out_param(h);
    assert_eq!(aux, crate::firmware::aux_pages_for(ICM_SIZE));
    assert_eq!(map(h, op::MAP_ICM_AUX, &[(0, AUX_DMA, 0)]), status::OK);
    let pages = [
        (EQC_BASE, ICM_DMA, 0),
        (CQC_BASE, ICM_DMA + 0x1000, 0),
        (QPC_BASE, ICM_DMA + 0x2000, 0),
    ];
    assert_eq!(map(h, op::MAP_ICM, &pages), status::OK);
    h.poke(IN_MB, mb);
    assert_eq!(h.cmd(op::INIT_HCA, 0, 0), status::OK);
}

/// Host memory for the MTT table's first ICM page.
pub(super) const MTT_PAGE: u64 = 0x20_0000;

/// The MTT table's first ICM page mapped (once) and in memory.
pub(super) fn map_mtt(h: &mut Harness) {
    if h.dev.fw().icm().translate(MTT_BASE).is_none() {
        h.dev.mem_mut().add_range(MTT_PAGE, 0x1000);
        assert_eq!(map(h, op::MAP_ICM, &[(MTT_BASE, MTT_PAGE, 0)]), status::OK);
    }
}

/// MTT entries for `pages` from byte `at` of the MTT table, as
/// `core/mr.c:mlx4_write_mtt_chunk` writes them (PRESENT set).
pub(super) fn write_mtt(h: &mut Harness, at: u64, pages: &[u64]) {
    for (i, p) in pages.iter().enumerate() {
        let mut e = [0u8; 8];
        put_be64(&mut e, 0, p | 1);
        h.poke(MTT_PAGE + at + 8 * i as u64, &e);
    }
}

/// An EQ context as mlx4_create_eq fills it: OK and ARMED, 2^log EQEs,
/// MSI-X `intr`, 4 KiB pages, MTT entries from byte `mtt`.
pub(super) fn eq_ctx(log: u8, intr: u8, mtt: u64) -> [u8; 0x40] {
    let mut c = [0u8; 0x40];
    put_be32(&mut c, 0x00, 9 << 8);
    c[0x0c] = log;
    c[0x17] = intr;
    c[0x1b] = (mtt >> 32) as u8;
    put_be32(&mut c, 0x1c, mtt as u32);
    c
}

/// SW2HW_EQ of a one-page EQ (128 EQEs, MSI-X 0) on its own page, its MTT
/// entry at entry 16 + eqn; the status.
pub(super) fn create_eq(h: &mut Harness, eqn: u32) -> u8 {
    map_mtt(h);
    let page = 0x30_0000 + 0x1000 * u64::from(eqn);
    h.dev.mem_mut().add_range(page, 0x1000);
    let at = 8 * (16 + u64::from(eqn));
    write_mtt(h, at, &[page]);
    h.poke(IN_MB, &eq_ctx(7, 0, at));
    h.cmd(op::SW2HW_EQ, 0, eqn)
}

/// SW2HW_CQ of a one-page CQ (2^CQ_LOG CQEs on UAR, completing to EQ
/// `eqn`, doorbell record CQ_DB) as `core/cq.c:mlx4_cq_alloc` describes it:
/// its MTT entry at entry 32 + cqn; the status.
pub(super) fn create_cq(h: &mut Harness, cqn: u32, eqn: u8) -> u8 {
    map_mtt(h);
    let page = 0x31_0000 + 0x1000 * u64::from(cqn);
    h.dev.mem_mut().add_range(page, 0x1000);
    let at = 8 * (32 + u64::from(cqn));
    write_mtt(h, at, &[page]);
    h.poke(IN_MB, &Harness::cq_ctx(CQ_LOG, UAR, eqn, at, CQ_DB));
    h.cmd(op::SW2HW_CQ, 0, cqn)
}

#[test]
fn before_run_fw_only_the_firmware_commands() {
    let mut h = strict();
    assert_eq!(h.dev.fw().phase(), Phase::Off);
    for opcode in [
        op::QUERY_DEV_CAP,
        op::NOP,
        op::SW2HW_EQ,
        op::SET_ICM_SIZE,
        op::INIT_HCA,
    ] {
        assert_eq!(h.cmd(opcode, 0, 0), status::BAD_SYS_STATE, "{opcode:#x}");
    }
    // RUN_FW needs the whole firmware area: half of it is not enough.
    assert_eq!(h.cmd(op::RUN_FW, 0, 0), status::ICM_ERROR);
    assert_eq!(map(&mut h, op::MAP_FA, &[(0, FA_DMA, 8)]), status::OK);
    assert_eq!(h.cmd(op::RUN_FW, 0, 0), status::ICM_ERROR);
    assert_eq!(
        map(&mut h, op::MAP_FA, &[(0, FA_DMA + 0x10_0000, 8)]),
        status::OK
    );
    assert_eq!(h.cmd(op::RUN_FW, 0, 0), status::OK);
    assert_eq!(h.dev.fw().phase(), Phase::Running);
    // Once running: no second RUN_FW or MAP_FA; the context commands wait
    // for INIT_HCA.
    assert_eq!(h.cmd(op::RUN_FW, 0, 0), status::BAD_SYS_STATE);
    assert_eq!(
        map(&mut h, op::MAP_FA, &[(0, FA_DMA, 0)]),
        status::BAD_SYS_STATE
    );
    assert_eq!(h.cmd(op::NOP, 0, 0x1f), status::BAD_SYS_STATE);
    assert_eq!(h.cmd(op::QUERY_DEV_CAP, 0, 0), status::OK);
    // A misaligned run, and an empty or oversized list.
    h.cmd(op::UNMAP_FA, 0, 0);
    assert_eq!(
        map(&mut h, op::MAP_FA, &[(0, FA_DMA + 0x1000, 1)]),
        status::BAD_PARAM
    );
    assert_eq!(h.cmd(op::MAP_FA, 0, 0), status::BAD_PARAM);
    assert_eq!(h.cmd(op::MAP_FA, 0, 257), status::BAD_PARAM);
    let g = &h.dev.counters().global;
    assert_eq!((g.fw_refused, g.icm_errors), (8, 2));
    let refused = h.records_of("fw_refused");
    assert_eq!(refused.len(), 10);
    assert_eq!(refused[0]["name"], "QUERY_DEV_CAP");
    assert_eq!(refused[0]["phase"], "off");
    assert_eq!(refused[5]["status"], status::ICM_ERROR);
    assert!(h.error_codes().is_empty());
}

#[test]
fn ready_mode_is_unchanged() {
    let mut h = Harness::new();
    for opcode in [
        op::RUN_FW,
        op::MAP_FA,
        op::SET_ICM_SIZE,
        op::INIT_HCA,
        op::QUERY_PORT,
    ] {
        assert_eq!(h.cmd(opcode, 0, 1), status::BAD_OP, "{opcode:#x}");
    }
    assert_eq!(h.cmd(op::QUERY_FW, 0, 0), status::OK);
    let b = h.mem(OUT_MB, 0x40);
    assert_eq!((be16(&b, 0), be64(&b, 0x30), be32(&b, 0x38)), (0, 0, 0));
    assert_eq!(h.cmd(op::NOP, 0, 0x1f), status::OK);
    assert_eq!(h.sw2hw_eq(0, EQ_LOG, 0, EQ0_BUF), status::OK);
    assert_eq!(h.dev.counters().global.fw_refused, 0);
    // The strict firmware's registers do not exist.
    h.read32(0, CATAS_OFF);
    h.write32(0, CLR_INT_OFF, 1);
    assert_eq!(h.error_codes(), ["undefined_offset", "undefined_offset"]);
    // Reset frees ownership, as before.
    assert_eq!(h.read32(0, OWNER_OFF), 0);
    h.reset_adapter();
    assert_eq!(h.read32(0, OWNER_OFF), 0);
}

#[test]
fn capabilities_as_mlx4_core_reads_them() {
    let mut h = strict();
    assert_eq!(h.cmd(op::QUERY_FW, 0, 0), status::OK);
    let b = h.mem(OUT_MB, 0x40);
    assert_eq!((be16(&b, 2), be16(&b, 6), be16(&b, 4)), (2, 42, 5000));
    assert_eq!(be16(&b, 0x0a), 3);
    assert_eq!((be64(&b, 0x20), be64(&b, 0x30)), (CLR_INT_OFF, CATAS_OFF));
    assert_eq!((be32(&b, 0x38), b[0x3c]), (caps::CATAS_SIZE_DW, 0));
    run_fw(&mut h);
    assert_eq!(h.cmd(op::QUERY_DEV_CAP, 0, 0), status::OK);
    let b = h.mem(OUT_MB, 0x100);
    assert_eq!(
        (b[0x1a], b[0x22], b[0x37]),
        (caps::LOG_RSVD_CQ, caps::LOG_RSVD_MPT, 1)
    );
    assert_eq!((be16(&b, 0x82), be16(&b, 0x90)), (256, 8));
    assert_eq!((be32(&b, 0x94), be64(&b, 0xa0)), (1 << 10, 1 << 36));
    assert_eq!(h.cmd(op::QUERY_PORT, 0, 1), status::OK);
    assert_eq!(h.mem(OUT_MB, 0x0c)[..2], [0x01, 5]);
    assert_eq!(h.cmd(op::QUERY_PORT, 0, 2), status::BAD_PARAM);
    // MOD_STAT_CFG: 8 KiB pages refused; the port GUID; no opmod 1.
    h.poke(IN_MB, &[0, 0, 1, 1]);
    assert_eq!(h.cmd(op::MOD_STAT_CFG, 0, 0), status::BAD_PARAM);
    assert_eq!(h.cmd(op::MOD_STAT_CFG, 2, 1 << 8), status::OK);
    let b = h.mem(OUT_MB, 0x20);
    let guid = (u64::from(be32(&b, 0x14)) << 32) | u64::from(be32(&b, 0x1c));
    assert_eq!(guid, caps::PORT1_GUID);
    assert_eq!(h.cmd(op::MOD_STAT_CFG, 2, 2 << 8), status::BAD_PARAM);
    assert_eq!(h.cmd(op::MOD_STAT_CFG, 1, 0), status::BAD_OP);
    assert_eq!(h.cmd(op::QUERY_ADAPTER, 0, 0), status::OK);
    assert_eq!(h.mem(OUT_MB + 0xf0, 4), b"1_TM");
    assert!(h.error_codes().is_empty());
}

#[test]
fn icm_and_init_hca() {
    let mut h = strict();
    run_fw(&mut h);
    assert_eq!(h.cmd(op::INIT_HCA, 0, 0), status::BAD_SYS_STATE);
    assert_eq!(
        map(&mut h, op::MAP_ICM_AUX, &[(0, AUX_DMA, 0)]),
        status::BAD_SYS_STATE
    );
    assert_eq!(
        h.cmd_full(op::SET_ICM_SIZE, 0, 1 << 30, 0, 0, None),
        status::OK
    );
    assert_eq!(out_param(&mut h), 8);
    // The auxiliary pages SET_ICM_SIZE asked for come first.
    h.poke(IN_MB, &init_hca_mailbox());
    assert_eq!(h.cmd(op::INIT_HCA, 0, 0), status::ICM_ERROR);
    assert_eq!(map(&mut h, op::MAP_ICM_AUX, &[(0, AUX_DMA, 3)]), status::OK);
    // MAP_ICM: a page mapped twice fails the whole command; ICM beyond
    // what QUERY_DEV_CAP advertises is refused.
    assert_eq!(
        map(&mut h, op::MAP_ICM, &[(EQC_BASE, ICM_DMA, 1)]),
        status::OK
    );
    let twice = [
        (CQC_BASE, ICM_DMA + 0x2000, 0),
        (EQC_BASE + 0x1000, ICM_DMA, 0),
    ];
    assert_eq!(map(&mut h, op::MAP_ICM, &twice), status::ICM_ERROR);
    assert_eq!(h.dev.fw().icm().pages(), 2);
    assert_eq!(
        map(&mut h, op::MAP_ICM, &[(1 << 36, ICM_DMA, 0)]),
        status::BAD_PARAM
    );
    assert_eq!(
        map(&mut h, op::MAP_ICM, &[(EQC_BASE + 8, ICM_DMA, 0)]),
        status::BAD_PARAM
    );
    assert_eq!(
        h.dev.fw().icm().translate(EQC_BASE + 0x1040),
        Some(ICM_DMA + 0x1040)
    );
    // INIT_HCA: what was not advertised is refused, then the profile.
    let mut bad = init_hca_mailbox();
    bad[0x5b] = 0x11; // CQE/EQE strides
    h.poke(IN_MB, &bad);
    assert_eq!(h.cmd(op::INIT_HCA, 0, 0), status::BAD_PARAM);
    h.poke(IN_MB, &init_hca_mailbox());
    assert_eq!(h.cmd(op::INIT_HCA, 0, 0), status::OK);
    assert_eq!(h.dev.fw().phase(), Phase::HcaUp);
    let p = h.dev.fw().hca().unwrap();
    assert_eq!((p.cqc.base, p.cqc.log_num, p.mtt), (CQC_BASE, 12, MTT_BASE));
    let rec = &h.records_of("init_hca")[0];
    assert_eq!(rec["eqc"]["base"], EQC_BASE);
    assert_eq!(rec["log_mpt_sz"], 10);
    // QUERY_HCA gives the profile back; no second INIT_HCA or more aux.
    h.poke(OUT_MB, &[0xff; 0x200]);
    assert_eq!(h.cmd(op::QUERY_HCA, 0, 0), status::OK);
    assert_eq!(be64(&h.mem(OUT_MB + 0x50, 8), 0), CQC_BASE | 12);
    assert_eq!(h.cmd(op::INIT_HCA, 0, 0), status::BAD_SYS_STATE);
    assert_eq!(
        map(&mut h, op::MAP_ICM_AUX, &[(0, AUX_DMA, 0)]),
        status::BAD_SYS_STATE
    );
    // ICM comes and goes while the HCA is up (mlx4_table_get / _put).
    assert_eq!(
        map(&mut h, op::MAP_ICM, &[(DMPT_BASE, ICM_DMA + 0x8000, 0)]),
        status::OK
    );
    assert_eq!(
        h.cmd_full(op::UNMAP_ICM, 0, DMPT_BASE, 1, 0, None),
        status::OK
    );
    assert_eq!(h.dev.fw().icm().pages(), 2);
    assert!(h.error_codes().is_empty());
}

#[test]
fn contexts_need_their_icm_page() {
    let mut h = strict();
    init_hca(&mut h);
    // One page of CQC holds CQs 0..63; CQ 64's page is not mapped.
    assert_eq!(create_eq(&mut h, 0), status::OK);
    assert_eq!(create_cq(&mut h, CQN, 0), status::OK);
    assert_eq!(
        h.sw2hw_cq(64, CQ_LOG, UAR, 0, CQ_BUF, CQ_DB),
        status::ICM_ERROR
    );
    // Beyond INIT_HCA's 2^12 CQs.
    assert_eq!(
        h.sw2hw_cq(1 << 12, CQ_LOG, UAR, 0, CQ_BUF, CQ_DB),
        status::BAD_INDEX
    );
    // QPC pages hold 16 contexts: QP 0x40's is on the fifth page, which
    // is not mapped until mlx4_qp_alloc_icm would map it; no dMPT is.
    // The QP's one SQ page through the MTT, as for the queues.
    h.init_sq(QP_BUF, SQ_LOG);
    write_mtt(&mut h, 8 * 48, &[QP_BUF]);
    let mb = Harness::with_rq(
        Harness::qp_mailbox(QPN, UAR, CQN, 8 * 48, SQ_LOG),
        CQN,
        RQ_DB,
    );
    h.poke(IN_MB, &mb);
    assert_eq!(h.cmd(op::RST2INIT_QP, 0, QPN), status::ICM_ERROR);
    assert_eq!(
        map(
            &mut h,
            op::MAP_ICM,
            &[(QPC_BASE + 0x4000, ICM_DMA + 0x4000, 0)]
        ),
        0
    );
    h.poke(IN_MB, &mb);
    assert_eq!(h.cmd(op::RST2INIT_QP, 0, QPN), status::OK);
    let e = Harness::mpt_entry(0x1_0000, 0, 0, 0x1000, 0x1000, 0);
    assert_eq!(h.sw2hw_mpt(&e), status::ICM_ERROR);
    assert_eq!(h.dev.counters().global.icm_errors, 3);
    assert_eq!(h.records_of("fw_refused").len(), 3);
    assert!(h.error_codes().is_empty());
}

#[test]
fn close_hca_unmap_fa_and_reset() {
    let mut h = strict();
    init_hca(&mut h);
    assert_eq!(create_eq(&mut h, 0), status::OK);
    assert_eq!(create_cq(&mut h, CQN, 0), status::OK);
    // mlx4_close_hca: CLOSE_HCA takes the contexts with it; then the ICM,
    // the auxiliary pages and the firmware area go.
    assert_eq!(h.cmd(op::CLOSE_HCA, 0, 0), status::OK);
    assert_eq!(h.dev.fw().phase(), Phase::Running);
    assert!(h.dev.cqs().is_empty() && h.dev.eqs().live() == 0);
    assert_eq!(h.sw2hw_eq(0, EQ_LOG, 0, EQ0_BUF), status::BAD_SYS_STATE);
    assert_eq!(h.cmd(op::CLOSE_HCA, 0, 0), status::BAD_SYS_STATE);
    assert_eq!(h.cmd(op::QUERY_HCA, 0, 0), status::BAD_SYS_STATE);
    for base in [EQC_BASE, CQC_BASE, QPC_BASE, MTT_BASE] {
        assert_eq!(h.cmd_full(op::UNMAP_ICM, 0, base, 64, 0, None), status::OK);
    }
    assert_eq!(h.dev.fw().icm().pages(), 0);
    assert_eq!(h.cmd(op::UNMAP_ICM_AUX, 0, 0), status::OK);
    assert_eq!(h.cmd(op::UNMAP_FA, 0, 0), status::OK);
    assert_eq!(h.dev.fw().phase(), Phase::Off);
    assert_eq!(h.cmd(op::QUERY_DEV_CAP, 0, 0), status::BAD_SYS_STATE);
    // Up again, then UNMAP_FA straight away also ends the HCA.
    init_hca(&mut h);
    assert_eq!(create_eq(&mut h, 0), status::OK);
    assert_eq!(h.cmd(op::UNMAP_FA, 0, 0), status::OK);
    assert_eq!(h.dev.eqs().live(), 0);
    // Reset stops the firmware but keeps ownership until it is freed.
    init_hca(&mut h);
    assert_eq!(h.read32(0, OWNER_OFF), 0);
    h.reset_adapter();
    assert_eq!(h.dev.fw().phase(), Phase::Off);
    assert_eq!(h.dev.fw().icm().pages(), 0);
    assert_eq!(h.read32(0, OWNER_OFF), 1, "still owned after reset");
    h.write32(0, OWNER_OFF, 0);
    assert_eq!(h.read32(0, OWNER_OFF), 0);
    assert_eq!(h.cmd(op::NOP, 0, 0x1f), status::BAD_SYS_STATE);
    assert!(h.error_codes().is_empty());
}

#[test]
fn catas_buffer_and_clear_interrupt_register() {
    let mut h = strict();
    for i in 0..caps::CATAS_SIZE_DW {
        assert_eq!(h.read32(0, CATAS_OFF + 4 * u64::from(i)), 0);
    }
    h.write32(0, CLR_INT_OFF, 1);
    assert!(h.error_codes().is_empty());
    h.read32(0, CLR_INT_OFF);
    h.write32(0, CATAS_OFF, 1);
    assert_eq!(h.error_codes(), ["undefined_offset", "undefined_offset"]);
}

#[test]
fn ports_and_special_qps_after_init_hca() {
    let mut h = strict();
    run_fw(&mut h);
    assert_eq!(h.cmd(op::SET_PORT, 0, 1), status::BAD_SYS_STATE);
    assert_eq!(h.cmd(op::CONF_SPECIAL_QP, 0, 0x200), status::BAD_SYS_STATE);
    h.cmd(op::UNMAP_FA, 0, 0);
    init_hca(&mut h);
    // mlx4_setup_hca: CONF_SPECIAL_QP, then per port SET_PORT (8 VLs,
    // MTU 4096, the capability mask).
    assert_eq!(h.cmd(op::CONF_SPECIAL_QP, 0, 0x200), status::OK);
    let mut mb = [0u8; 8];
    put_be32(&mut mb, 0, (3 << 21) | (5 << 12) | (8 << 4));
    put_be32(&mut mb, 4, 0x0251_0868);
    h.poke(IN_MB, &mb);
    assert_eq!(h.cmd(op::SET_PORT, 0, 1), status::OK);
    assert_eq!(h.cmd(op::INIT_PORT, 0, 1), status::OK);
    let p = h.dev.fw().port();
    assert_eq!(
        (p.up, p.vls, p.cap_mask, p.base_sqpn),
        (true, 8, 0x0251_0868, 0x200)
    );
    assert_eq!(h.records_of("port")[0]["mtu_cap"], 5);
    assert_eq!(h.cmd(op::CLOSE_PORT, 0, 1), status::OK);
    assert_eq!(h.cmd(op::CLOSE_PORT, 0, 2), status::BAD_PARAM);
    assert!(!h.dev.fw().port().up);
    assert!(h.error_codes().is_empty());
}

#[test]
fn mad_ifc_answers_the_port_info_query() {
    let mut h = strict();
    run_fw(&mut h);
    assert_eq!(h.cmd(op::MAD_IFC, 3, 1), status::BAD_SYS_STATE);
    h.cmd(op::UNMAP_FA, 0, 0);
    init_hca(&mut h);
    // core/port.c:mlx4_get_port_ib_caps: PortInfo, opmod 3, capability
    // mask at out+84 (data +20).
    let mut mad = [0u8; 256];
    mad[..4].copy_from_slice(&[1, 0x01, 1, 0x01]);
    mad[16..18].copy_from_slice(&0x0015u16.to_be_bytes());
    h.poke(IN_MB, &mad);
    assert_eq!(h.cmd(op::MAD_IFC, 3, 1), status::OK);
    let out = h.mem(OUT_MB, 256);
    assert_eq!((out[3], be16(&out, 4)), (0x81, 0));
    assert_eq!(be32(&out, 84), crate::firmware::mad::CAP_MASK);
    assert_eq!(be16(&out, 64 + 16), crate::firmware::mad::LID);
    assert_eq!(h.cmd(op::MAD_IFC, 3, 2), status::BAD_PARAM);
    assert!(h.error_codes().is_empty());
}

#[test]
fn diag_rprt_counters_are_zero() {
    let mut h = strict();
    init_hca(&mut h);
    h.poke(OUT_MB, &[0xff; 0x100]);
    assert_eq!(h.cmd(op::DIAG_RPRT, 2, 0), status::OK);
    assert_eq!(h.mem(OUT_MB, 0x100), [0; 0x100]);
    assert_eq!(h.cmd(op::DIAG_RPRT, 2, 1), status::OK);
    assert_eq!(h.cmd(op::DIAG_RPRT, 2, 2), status::BAD_PARAM);
    assert_eq!(h.cmd(op::DIAG_RPRT, 0, 0), status::BAD_OP);
}
