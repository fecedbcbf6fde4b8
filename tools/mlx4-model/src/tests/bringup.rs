//! The firmware bring-up as mainline mlx4_core drives it
//! (`core/main.c:mlx4_init_fw`, `mlx4_init_hca`): QUERY_FW, MAP_FA,
//! RUN_FW, QUERY_DEV_CAP, SET_ICM_SIZE, MAP_ICM_AUX, MAP_ICM, INIT_HCA;
//! and the MTT entries in ICM that describe the queues' buffers. The
//! firmware tests take it step by step; `Harness::new` and `setup` take it
//! whole.

use super::harness::*;
use crate::bytes::{be16, put_be32, put_be64};
use crate::command::{op, status};
use crate::firmware::caps;
use crate::layout::*;
use crate::trace::TraceLevel;
use crate::Config;

impl Harness {
    /// The HCA up ([`hca_up`]: every table in ICM, the fake memory's pages
    /// in the MTT), no queues yet.
    pub fn new() -> Self {
        Self::up_at(Config::default(), TraceLevel::All)
    }

    /// `new` with `cfg`.
    pub fn up(cfg: Config) -> Self {
        Self::up_at(cfg, TraceLevel::All)
    }

    /// `new` with `cfg`, the trace at `level`.
    pub fn up_at(cfg: Config, level: TraceLevel) -> Self {
        let mut h = Self::fresh_at(cfg, level);
        hca_up(&mut h);
        h
    }
}

/// Where the tests' firmware area, auxiliary ICM and ICM pages "are": the
/// model never touches them, so they need not be in the fake memory; but
/// for the dMPT table's, where HW2SW_MPT writes the entry back
/// (`DMPT_DMA`, `mr::rereg`).
pub(crate) const FA_DMA: u64 = 0x4000_0000;
pub(crate) const AUX_DMA: u64 = 0x5000_0000;
pub(crate) const ICM_DMA: u64 = 0x6000_0000;

/// The test profile: each table at its own 16 MiB of ICM; 2^10 QPs,
/// 2^12 CQs, 2^3 EQs, 2^10 MPTs, 2^6 SRQs.
pub(crate) const QPC_BASE: u64 = 0x0100_0000;
pub(crate) const CQC_BASE: u64 = 0x0200_0000;
pub(crate) const EQC_BASE: u64 = 0x0300_0000;
pub(crate) const DMPT_BASE: u64 = 0x0400_0000;
pub(crate) const MTT_BASE: u64 = 0x0500_0000;
pub(crate) const ICM_SIZE: u64 = 0x0600_0000;
/// 2^6 SRQs (one ICM page of contexts), which no test profile maps: the
/// SRQ tests map it (`strict_srq`).
pub(crate) const SRQC_BASE: u64 = 0x0580_0000;
pub(crate) const LOG_SRQS: u64 = 6;

/// Host memory for the MTT table's first two ICM pages (entries 0..1023).
pub(crate) const MTT_PAGE: u64 = 0x20_0000;

/// A page-list command of (virt, dma, order) entries; the status.
pub(crate) fn map(h: &mut Harness, opcode: u16, entries: &[(u64, u64, u32)]) -> u8 {
    let mut b = vec![0u8; 16 * entries.len()];
    for (i, &(virt, dma, order)) in entries.iter().enumerate() {
        put_be64(&mut b, 16 * i, virt);
        put_be64(&mut b, 16 * i + 8, dma | u64::from(order));
    }
    h.poke(IN_MB, &b);
    h.cmd(opcode, 0, entries.len() as u32)
}

/// The immediate out_param of the last command.
pub(crate) fn out_param(h: &mut Harness) -> u64 {
    (u64::from(h.read32(0, HCR_BASE + 0x0c)) << 32) | u64::from(h.read32(0, HCR_BASE + 0x10))
}

/// mlx4_init_fw: QUERY_FW, MAP_FA of the whole area (one 2 MiB run),
/// RUN_FW, MOD_STAT_CFG with 4 KiB pages.
pub(crate) fn run_fw(h: &mut Harness) {
    assert_eq!(h.cmd(op::QUERY_FW, 0, 0), status::OK);
    assert_eq!(be16(&h.mem(OUT_MB, 2), 0), caps::FW_PAGES);
    assert_eq!(map(h, op::MAP_FA, &[(0, FA_DMA, 9)]), status::OK);
    assert_eq!(h.cmd(op::RUN_FW, 0, 0), status::OK);
    h.poke(IN_MB, &[0, 0, 1, 0]);
    assert_eq!(h.cmd(op::MOD_STAT_CFG, 0, 0), status::OK);
}

/// An INIT_HCA mailbox of the test profile.
pub(crate) fn init_hca_mailbox() -> Vec<u8> {
    let mut b = vec![0u8; 0x200];
    b[0] = 2;
    put_be64(&mut b, 0x30, QPC_BASE | 10);
    put_be64(&mut b, 0x48, SRQC_BASE | LOG_SRQS);
    put_be64(&mut b, 0x50, CQC_BASE | 12);
    put_be64(&mut b, 0x80, EQC_BASE | 3);
    put_be64(&mut b, 0xf0, DMPT_BASE);
    b[0xfb] = LOG_MPTS as u8;
    put_be64(&mut b, 0x100, MTT_BASE);
    b[0x12a] = 10;
    b
}

/// The first page of the EQC, CQC and QPC tables: what the firmware tests
/// map before INIT_HCA.
const FIRST_PAGES: [(u64, u64, u32); 3] = [
    (EQC_BASE, ICM_DMA, 0),
    (CQC_BASE, ICM_DMA + 0x1000, 0),
    (QPC_BASE, ICM_DMA + 0x2000, 0),
];

/// Host memory of `Harness::new`'s dMPT table (64 KiB, in the fake
/// memory).
pub(crate) const DMPT_DMA: u64 = ICM_DMA + 0xc0_0000;

/// Every table of the test profile whole (CQC and QPC 256 KiB, dMPT 64
/// KiB), and the MTT's first two pages in memory: `Harness::new`'s ICM.
const ALL_TABLES: [(u64, u64, u32); 5] = [
    (EQC_BASE, ICM_DMA, 0),
    (CQC_BASE, ICM_DMA + 0x40_0000, 6),
    (QPC_BASE, ICM_DMA + 0x80_0000, 6),
    (DMPT_BASE, DMPT_DMA, 4),
    (MTT_BASE, MTT_PAGE, 1),
];

/// mlx4_init_hca up to INIT_HCA: SET_ICM_SIZE, MAP_ICM_AUX, the first
/// page of the EQC, CQC and QPC tables, INIT_HCA.
pub(crate) fn init_hca(h: &mut Harness) {
    init_hca_with(h, &init_hca_mailbox());
}

/// `init_hca` with another INIT_HCA mailbox.
pub(crate) fn init_hca_with(h: &mut Harness, mb: &[u8]) {
    init_hca_mapping(h, mb, &FIRST_PAGES);
}

/// `init_hca_with`, MAP_ICM of `pages` before INIT_HCA.
fn init_hca_mapping(h: &mut Harness, mb: &[u8], pages: &[(u64, u64, u32)]) {
    run_fw(h);
    assert_eq!(h.cmd(op::QUERY_DEV_CAP, 0, 0), status::OK);
    assert_eq!(
        h.cmd_full(op::SET_ICM_SIZE, 0, ICM_SIZE, 0, 0, None),
        status::OK
    );
    let aux = out_param(h);
    assert_eq!(aux, crate::firmware::aux_pages_for(ICM_SIZE));
    assert_eq!(map(h, op::MAP_ICM_AUX, &[(0, AUX_DMA, 0)]), status::OK);
    assert_eq!(map(h, op::MAP_ICM, pages), status::OK);
    h.poke(IN_MB, mb);
    assert_eq!(h.cmd(op::INIT_HCA, 0, 0), status::OK);
}

/// The HCA up with every table of the test profile in ICM, and the MTT
/// entries of every page of the fake memory from `MTT_WINDOW` on.
pub(crate) fn hca_up(h: &mut Harness) {
    h.dev.mem_mut().add_range(MTT_PAGE, 0x2000);
    h.dev.mem_mut().add_range(DMPT_DMA, 0x1_0000);
    let mut mb = init_hca_mailbox();
    mb[0x12a] = h.dev.config().num_uars.trailing_zeros() as u8; // log_uar_sz
    init_hca_mapping(h, &mb, &ALL_TABLES);
    let pages: Vec<u64> = (0..MEM_LEN as u64 / PAGE_SIZE)
        .map(|i| MEM_BASE + i * PAGE_SIZE)
        .collect();
    write_mtt(h, 8 * MTT_WINDOW, &pages);
}

/// The MTT table's first ICM page mapped (once) and in memory.
pub(crate) fn map_mtt(h: &mut Harness) {
    if h.dev.fw().icm().translate(MTT_BASE).is_none() {
        h.dev.mem_mut().add_range(MTT_PAGE, 0x1000);
        assert_eq!(map(h, op::MAP_ICM, &[(MTT_BASE, MTT_PAGE, 0)]), status::OK);
    }
}

/// MTT entries for `pages` from byte `at` of the MTT table, as
/// `core/mr.c:mlx4_write_mtt_chunk` writes them (PRESENT set).
pub(crate) fn write_mtt(h: &mut Harness, at: u64, pages: &[u64]) {
    for (i, p) in pages.iter().enumerate() {
        let mut e = [0u8; 8];
        put_be64(&mut e, 0, p | 1);
        h.poke(MTT_PAGE + at + 8 * i as u64, &e);
    }
}

/// An EQ context as mlx4_create_eq fills it: OK and ARMED, 2^log EQEs,
/// MSI-X `intr`, 4 KiB pages, MTT entries from byte `mtt`.
pub(crate) fn eq_ctx(log: u8, intr: u8, mtt: u64) -> [u8; 0x40] {
    let mut c = Harness::eq_ctx(log, intr, mtt);
    put_be32(&mut c, 0x00, 9 << 8);
    c
}

/// SW2HW_EQ of a one-page EQ (128 EQEs, MSI-X 0) on its own page, its MTT
/// entry at entry 16 + eqn; the status.
pub(crate) fn create_eq(h: &mut Harness, eqn: u32) -> u8 {
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
pub(crate) fn create_cq(h: &mut Harness, cqn: u32, eqn: u8) -> u8 {
    map_mtt(h);
    let page = 0x31_0000 + 0x1000 * u64::from(cqn);
    h.dev.mem_mut().add_range(page, 0x1000);
    let at = 8 * (32 + u64::from(cqn));
    write_mtt(h, at, &[page]);
    h.poke(IN_MB, &Harness::cq_ctx(CQ_LOG, UAR, eqn, at, CQ_DB));
    h.cmd(op::SW2HW_CQ, 0, cqn)
}
