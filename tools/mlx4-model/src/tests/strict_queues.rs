//! Queues as the firmware finds them: buffers on the pages MTT entries in ICM name,
//! as mainline mlx4_core writes them (`core/mr.c:mlx4_write_mtt_chunk`)
//! and describes them in the contexts (`core/eq.c:mlx4_create_eq`).

use super::bringup::*;
use super::harness::*;
use crate::bytes::{be16, put_be64};
use crate::command::{op, status};

/// Two EQ pages, out of order as mlx4's separate dma_alloc_coherent
/// pages may be.
const EQ_PAGE0: u64 = 0x21_0000;
const EQ_PAGE1: u64 = 0x20_8000;
/// The EQ's MTT entries: from entry 8 (mlx4 reserves the first ones).
const EQ_MTT: u64 = 8 * 8;
const EQN: u32 = 4;

/// INIT_HCA done, the MTT table's first page mapped and in memory.
fn with_mtt() -> Harness {
    let mut h = Harness::fresh();
    init_hca(&mut h);
    map_mtt(&mut h);
    h.dev.mem_mut().add_range(EQ_PAGE1, 0x1000);
    h.dev.mem_mut().add_range(EQ_PAGE0, 0x1000);
    h
}

#[test]
fn eq_on_mtt_pages_takes_command_events() {
    let mut h = with_mtt();
    write_mtt(&mut h, EQ_MTT, &[EQ_PAGE0, EQ_PAGE1]);
    // 256 EQEs of 32 bytes: two pages, every owner bit set by SW2HW_EQ.
    h.poke(IN_MB, &eq_ctx(8, 1, EQ_MTT));
    assert_eq!(h.cmd(op::SW2HW_EQ, 0, EQN), status::OK);
    assert_eq!(h.mem(EQ_PAGE0 + 31, 1), [0x80]);
    assert_eq!(h.mem(EQ_PAGE1 + 0xfff, 1), [0x80]);
    // mlx4_init_eq_table: CMD to the async EQ; the NOP test's EQE raises
    // the EQ's vector at once, the context having armed it.
    assert_eq!(h.cmd_full(op::MAP_EQ, 0, 1 << 0x0a, EQN, 0, None), 0);
    for token in 0..129u16 {
        assert_eq!(h.cmd_full(op::NOP, 0, 0, 0x1f, 0, Some(token)), status::OK);
    }
    let first = h.mem(EQ_PAGE0, 32);
    assert_eq!((first[1], be16(&first, 6)), (0x0a, 0));
    // EQE 128 is the first of the second page.
    let eqe = h.mem(EQ_PAGE1, 32);
    assert_eq!((eqe[1], be16(&eqe, 6), eqe[31]), (0x0a, 128, 0));
    assert_eq!(h.dev.irq().raised, [1]);
    assert!(h.error_codes().is_empty());
}

#[test]
fn eq_mtt_refusals() {
    let mut h = with_mtt();
    // An entry without PRESENT, a page not aligned to the page size.
    write_mtt(&mut h, EQ_MTT, &[EQ_PAGE0]);
    h.poke(MTT_PAGE + EQ_MTT + 8, &[0; 8]);
    h.poke(IN_MB, &eq_ctx(8, 1, EQ_MTT));
    assert_eq!(h.cmd(op::SW2HW_EQ, 0, EQN), status::BAD_PARAM);
    write_mtt(&mut h, EQ_MTT, &[EQ_PAGE1 + 0x1000]);
    let mut c = eq_ctx(7, 1, EQ_MTT);
    c[0x18] = 1; // 8 KiB pages: 0x20_9000 is not aligned to them
    h.poke(IN_MB, &c);
    assert_eq!(h.cmd(op::SW2HW_EQ, 0, EQN), status::BAD_PARAM);
    // Entries whose ICM page is not mapped; an MTT address not 8-aligned.
    h.poke(IN_MB, &eq_ctx(8, 1, 0x1000));
    assert_eq!(h.cmd(op::SW2HW_EQ, 0, EQN), status::ICM_ERROR);
    h.poke(IN_MB, &eq_ctx(8, 1, EQ_MTT + 4));
    assert_eq!(h.cmd(op::SW2HW_EQ, 0, EQN), status::BAD_PARAM);
    // A page offset, too many EQEs.
    let mut c = eq_ctx(7, 1, EQ_MTT);
    c[0x0b] = 0x40;
    h.poke(IN_MB, &c);
    assert_eq!(h.cmd(op::SW2HW_EQ, 0, EQN), status::BAD_PARAM);
    h.poke(IN_MB, &eq_ctx(23, 1, EQ_MTT));
    assert_eq!(h.cmd(op::SW2HW_EQ, 0, EQN), status::BAD_SIZE);
    assert_eq!(h.dev.eqs().live(), 0);
    assert_eq!(h.dev.counters().global.icm_errors, 1);
    assert!(h.error_codes().is_empty());
}

#[test]
fn cq_on_mtt_pages() {
    let mut h = with_mtt();
    write_mtt(&mut h, EQ_MTT, &[EQ_PAGE0]);
    h.poke(IN_MB, &eq_ctx(7, 0, EQ_MTT));
    assert_eq!(h.cmd(op::SW2HW_EQ, 0, EQN), status::OK);
    // core/cq.c:mlx4_cq_alloc for ib_mad's CQ: CQN 128 (the first after
    // the reserved ones), 256 CQEs on two separate 4 KiB pages.
    let (cqn, cq0, cq1) = (128, 0x22_0000, 0x22_2000);
    h.dev.mem_mut().add_range(cq0, 0x1000);
    h.dev.mem_mut().add_range(cq1, 0x1000);
    let at = 8 * 64;
    write_mtt(&mut h, at, &[cq0, cq1]);
    assert_eq!(
        map(
            &mut h,
            op::MAP_ICM,
            &[(CQC_BASE + 0x2000, ICM_DMA + 0x9000, 0)]
        ),
        0
    );
    h.poke(IN_MB, &Harness::cq_ctx(8, UAR, EQN as u8, at, CQ_DB));
    assert_eq!(h.cmd(op::SW2HW_CQ, 0, cqn), status::OK);
    assert_eq!(h.mem(cq0 + 31, 1), [0x80]);
    assert_eq!(h.mem(cq1 + 0xfff, 1), [0x80]);
    let cq = h.dev.cqs().get(cqn).unwrap();
    assert_eq!(cq.buf.addr(0x1020), cq1 + 0x20);
    // A page offset, an entry without PRESENT.
    let mut c = Harness::cq_ctx(8, UAR, EQN as u8, at, CQ_DB);
    c[0x0b] = 0x20;
    h.poke(IN_MB, &c);
    assert_eq!(h.cmd(op::SW2HW_CQ, 0, cqn + 1), status::BAD_PARAM);
    h.poke(MTT_PAGE + at + 8, &[0; 8]);
    h.poke(IN_MB, &Harness::cq_ctx(8, UAR, EQN as u8, at, CQ_DB));
    assert_eq!(h.cmd(op::SW2HW_CQ, 0, cqn + 1), status::BAD_PARAM);
    assert!(h.error_codes().is_empty());
}

#[test]
fn special_qps_on_mtt_pages_and_later_transitions() {
    let mut h = with_mtt();
    write_mtt(&mut h, EQ_MTT, &[EQ_PAGE0]);
    h.poke(IN_MB, &eq_ctx(7, 0, EQ_MTT));
    assert_eq!(h.cmd(op::SW2HW_EQ, 0, EQN), status::OK);
    assert_eq!(create_cq(&mut h, 1, EQN as u8), status::OK);
    // QP1 of port 1 (base 0x200 + 2), MLX: a 16 x 64 B SQ and a 32 x 16 B
    // RQ after it, 1.5 KiB on one MTT page; its QPC page mapped as
    // mlx4_qp_alloc_icm would.
    let (qpn, at, page) = (0x202, 8 * 80, 0x24_0000);
    h.dev.mem_mut().add_range(page, 0x1000);
    write_mtt(&mut h, at, &[page]);
    let qpc_page = QPC_BASE + u64::from(qpn) * 256 / 0x1000 * 0x1000;
    assert_eq!(
        map(&mut h, op::MAP_ICM, &[(qpc_page, ICM_DMA + 0xa000, 0)]),
        0
    );
    let mut mb = Harness::with_rq(Harness::qp_mailbox(qpn, UAR, 1, at, SQ_LOG), 1, RQ_DB);
    mb[8 + 1] = 7; // service type MLX (flags bits 23..16)
    h.poke(IN_MB, &mb);
    assert_eq!(
        h.cmd(op::RST2INIT_QP, 0, qpn),
        status::BAD_PARAM,
        "no special QPs yet"
    );
    assert_eq!(h.cmd(op::CONF_SPECIAL_QP, 0, 0x200), status::OK);
    h.poke(IN_MB, &mb);
    assert_eq!(h.cmd(op::RST2INIT_QP, 0, qpn), status::OK);
    let qp = h.dev.qps().get(qpn).unwrap();
    assert_eq!(qp.rq_entry_addr(1), page + RQ_OFF + 16);
    // INIT2RTR and RTR2RTS as mainline sends them: no buffer, MTT or
    // doorbell record; nothing changes, no protocol error.
    let mut later = vec![0u8; 0x100];
    later[8 + 1] = 7;
    h.poke(IN_MB, &later);
    assert_eq!(h.cmd(op::INIT2RTR_QP, 0, qpn), status::OK);
    h.poke(IN_MB, &later);
    assert_eq!(h.cmd(op::RTR2RTS_QP, 0, qpn), status::OK);
    let qp = h.dev.qps().get(qpn).unwrap();
    assert_eq!((qp.buf.base(), qp.rq_db), (page, RQ_DB));
    // MLX is for the special QPs only.
    let mut other = Harness::qp_mailbox(0x208, UAR, 1, at, SQ_LOG);
    other[8 + 1] = 7;
    h.poke(IN_MB, &other);
    assert_eq!(h.cmd(op::RST2INIT_QP, 0, 0x208), status::BAD_PARAM);
    assert!(h.error_codes().is_empty());
}

/// A CQ or QP whose mtt_base_addr names MTT entries mlx4 never wrote
/// (not PRESENT: BAD_PARAM) or entries beyond the MTT's mapped ICM
/// (ICM_ERROR, counted in `icm_errors` and recorded): no queue, and
/// nothing written where a buffer would have been.
#[test]
fn queues_whose_mtt_entries_are_not_there_are_refused() {
    let mut h = Harness::new();
    assert_eq!(h.sw2hw_eq(0, EQ_LOG, 0, EQ0_BUF), status::OK);
    h.poke(CQ_BUF, &[0x11; 512]);
    // Entries 300.. of the MTT's first page: never written.
    h.poke(IN_MB, &Harness::cq_ctx(CQ_LOG, UAR, 0, 8 * 300, CQ_DB));
    assert_eq!(h.cmd(op::SW2HW_CQ, 0, CQN), status::BAD_PARAM);
    // Two pages from the last page of the fake memory: the second
    // page's entry was never written.
    let last = MEM_BASE + MEM_LEN as u64 - 0x1000;
    h.poke(IN_MB, &Harness::cq_ctx(8, UAR, 0, mtt_of(last), CQ_DB));
    assert_eq!(h.cmd(op::SW2HW_CQ, 0, CQN), status::BAD_PARAM);
    // Entries on an MTT ICM page nobody mapped (the harness maps two).
    let icm_errors = h.dev.counters().global.icm_errors;
    h.poke(IN_MB, &Harness::cq_ctx(CQ_LOG, UAR, 0, 8 * 4096, CQ_DB));
    assert_eq!(h.cmd(op::SW2HW_CQ, 0, CQN), status::ICM_ERROR);
    assert_eq!(h.dev.counters().global.icm_errors, icm_errors + 1);
    let r = h.records_of("fw_refused").pop().unwrap();
    assert_eq!(r["mtt_icm_unmapped"], MTT_BASE + 8 * 4096);
    assert!(h.dev.cqs().is_empty());
    assert_eq!(h.mem(CQ_BUF, 512), [0x11; 512], "no owner bits written");
    // A QP likewise, its CQ in place.
    assert_eq!(h.sw2hw_cq(CQN, CQ_LOG, UAR, 0, CQ_BUF, CQ_DB), status::OK);
    for (mtt, want) in [(8 * 300, status::BAD_PARAM), (8 * 4096, status::ICM_ERROR)] {
        let mb = Harness::with_rq(Harness::qp_mailbox(QPN, UAR, CQN, mtt, SQ_LOG), CQN, RQ_DB);
        h.poke(IN_MB, &mb);
        assert_eq!(h.cmd(op::RST2INIT_QP, 0, QPN), want, "mtt {mtt:#x}");
    }
    assert!(h.dev.qps().is_empty());
    assert_eq!(h.dev.counters().global.icm_errors, icm_errors + 2);
    assert!(h.error_codes().is_empty());
}

use proptest::collection::vec;
use proptest::prelude::*;

/// What the firmware decodes, and the context commands it checks.
const OPS: [u16; 25] = [
    op::QUERY_FW,
    op::MAP_FA,
    op::UNMAP_FA,
    op::RUN_FW,
    op::QUERY_DEV_CAP,
    op::QUERY_PORT,
    op::MOD_STAT_CFG,
    op::SET_ICM_SIZE,
    op::MAP_ICM_AUX,
    op::UNMAP_ICM_AUX,
    op::MAP_ICM,
    op::UNMAP_ICM,
    op::INIT_HCA,
    op::CLOSE_HCA,
    op::QUERY_HCA,
    op::QUERY_ADAPTER,
    op::SET_PORT,
    op::INIT_PORT,
    op::CONF_SPECIAL_QP,
    op::MAD_IFC,
    op::DIAG_RPRT,
    op::SYNC_TPT,
    op::SW2HW_EQ,
    op::SW2HW_CQ,
    op::RST2INIT_QP,
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any sequence of these commands with any parameters and mailbox
    /// bytes: every command completes (GO clears, T kept), nothing panics
    /// (no overflow on addresses near 2^64), and none is a protocol error
    /// but a DMA to nowhere or an UNMAP_FA that leaves ICM mapped.
    #[test]
    fn firmware_takes_any_command(
        up in any::<bool>(),
        cmds in vec((0..OPS.len(), 0u8..4, any::<u32>(), any::<u64>(), any::<bool>(),
                     vec(any::<u8>(), 0..0x140)), 1..24),
    ) {
        let mut h = Harness::fresh();
        if up {
            init_hca(&mut h);
        }
        for (i, op_mod, in_mod, param, mailbox, bytes) in cmds {
            h.poke(IN_MB, &bytes);
            let in_param = if mailbox { IN_MB } else { param };
            h.cmd_full(OPS[i], op_mod, in_param, in_mod % 0x400, OUT_MB, None);
        }
        prop_assert!(h
            .error_codes()
            .iter()
            .all(|c| c == "dma_unmapped" || c == "unmap_fa_with_icm"));
    }
}

/// The last 4 KiB page of the 64-bit address space.
const TOP: u64 = !0xfff;

#[test]
fn addresses_near_the_top_of_the_address_space() {
    let mut h = Harness::fresh();
    run_fw(&mut h);
    assert_eq!(
        h.cmd_full(op::SET_ICM_SIZE, 0, ICM_SIZE, 0, 0, None),
        status::OK
    );
    assert_eq!(map(&mut h, op::MAP_ICM_AUX, &[(0, AUX_DMA, 0)]), status::OK);
    assert_eq!(
        map(&mut h, op::MAP_ICM, &[(TOP, ICM_DMA, 0)]),
        status::BAD_PARAM
    );
    assert_eq!(
        h.cmd_full(op::UNMAP_ICM, 0, TOP, u32::MAX, 0, None),
        status::OK
    );
    // A profile whose CQC and MTT sit at the very top: creating a CQ there
    // finds no ICM, it does not wrap around.
    let mut mb = init_hca_mailbox();
    put_be64(&mut mb, 0x50, (TOP) | 12);
    put_be64(&mut mb, 0x100, TOP);
    h.poke(IN_MB, &mb);
    assert_eq!(h.cmd(op::INIT_HCA, 0, 0), status::OK);
    assert_eq!(create_cq(&mut h, 100, 0), status::ICM_ERROR);
    h.poke(IN_MB, &eq_ctx(7, 0, 0xff_ffff_fff8));
    assert_eq!(h.cmd(op::SW2HW_EQ, 0, EQN), status::ICM_ERROR);
}
