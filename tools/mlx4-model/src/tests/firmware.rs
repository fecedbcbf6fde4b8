//! The firmware: the life cycle mainline mlx4_core drives, step by step
//! (QUERY_FW, MAP_FA, RUN_FW, capabilities, ICM, INIT_HCA, CLOSE_HCA,
//! UNMAP_FA), and what it refuses out of order.

use super::bringup::*;
use super::harness::*;
use crate::bytes::{be16, be32, be64, put_be32};
use crate::command::{op, status};
use crate::firmware::{caps, Phase};
use crate::layout::*;

#[test]
fn before_run_fw_only_the_firmware_commands() {
    let mut h = Harness::fresh();
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

/// What a driver that skips the bring-up (as drivers/mlx4_bf once did)
/// gets: every command on contexts refused with BAD_SYS_STATE, before
/// RUN_FW and between RUN_FW and INIT_HCA alike, counted in `fw_refused`
/// (diag 0x5e8) and recorded; no table changes.
#[test]
fn context_commands_before_init_hca_are_refused() {
    let mut h = Harness::fresh();
    let ops = [
        op::SW2HW_EQ,
        op::MAP_EQ,
        op::SW2HW_CQ,
        op::RST2INIT_QP,
        op::QUERY_QP,
        op::WRITE_MTT,
        op::SW2HW_MPT,
        op::NOP,
    ];
    let refuse_all = |h: &mut Harness, phase: &str| {
        for opcode in ops {
            assert_eq!(h.cmd(opcode, 0, 1), status::BAD_SYS_STATE, "{opcode:#x}");
            let r = h.records_of("fw_refused").pop().unwrap();
            assert_eq!(
                (r["opcode"].as_u64(), r["phase"].as_str()),
                (Some(opcode.into()), Some(phase))
            );
        }
    };
    assert_eq!(h.sw2hw_eq(0, EQ_LOG, 0, EQ0_BUF), status::BAD_SYS_STATE);
    refuse_all(&mut h, "off");
    run_fw(&mut h);
    refuse_all(&mut h, "running");
    let n = 1 + 2 * ops.len() as u64;
    assert_eq!(h.dev.counters().global.fw_refused, n);
    assert_eq!(h.diag_read(crate::diag::FW_REFUSED), n);
    assert_eq!(
        h.dev.eqs().live() + h.dev.cqs().len() + h.dev.qps().len(),
        0
    );
    assert_eq!(h.diag_read(crate::diag::LIVE), 0);
    assert!(h.error_codes().is_empty());
}

#[test]
fn capabilities_as_mlx4_core_reads_them() {
    let mut h = Harness::fresh();
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
        (caps::LOG_RSVD_CQ, LOG_RSVD_MPT, 1)
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
    let mut h = Harness::fresh();
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
    let mut h = Harness::fresh();
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
    let mut h = Harness::fresh();
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
    assert_eq!(h.diag_read(crate::diag::ICM_PAGES), 0);
    assert!(h.diag_read(crate::diag::FW_PAGES) > 0);
    assert_eq!(h.cmd(op::UNMAP_ICM_AUX, 0, 0), status::OK);
    assert_eq!(h.cmd(op::UNMAP_FA, 0, 0), status::OK);
    assert_eq!(h.dev.fw().phase(), Phase::Off);
    // The diag gauges of a firmware given back whole.
    for gauge in [crate::diag::FW_PHASE, crate::diag::FW_PAGES] {
        assert_eq!(h.diag_read(gauge), 0, "{gauge:#x}");
    }
    assert!(h.error_codes().is_empty());
    assert_eq!(h.cmd(op::QUERY_DEV_CAP, 0, 0), status::BAD_SYS_STATE);
    // Up again, then UNMAP_FA straight away also ends the HCA, and drops
    // the ICM a driver left mapped: recorded.
    init_hca(&mut h);
    assert_eq!(h.diag_read(crate::diag::FW_PHASE), 2);
    assert!(h.diag_read(crate::diag::ICM_PAGES) > 0);
    assert_eq!(create_eq(&mut h, 0), status::OK);
    assert_eq!(h.cmd(op::UNMAP_FA, 0, 0), status::OK);
    assert_eq!(h.dev.eqs().live(), 0);
    assert_eq!(h.error_codes(), ["unmap_fa_with_icm"]);
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
    assert_eq!(h.error_codes(), ["unmap_fa_with_icm"]);
}

#[test]
fn catas_buffer_and_clear_interrupt_register() {
    let mut h = Harness::fresh();
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
    let mut h = Harness::fresh();
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
    let mut h = Harness::fresh();
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
    let mut h = Harness::fresh();
    init_hca(&mut h);
    h.poke(OUT_MB, &[0xff; 0x100]);
    assert_eq!(h.cmd(op::DIAG_RPRT, 2, 0), status::OK);
    assert_eq!(h.mem(OUT_MB, 0x100), [0; 0x100]);
    assert_eq!(h.cmd(op::DIAG_RPRT, 2, 1), status::OK);
    assert_eq!(h.cmd(op::DIAG_RPRT, 2, 2), status::BAD_PARAM);
    assert_eq!(h.cmd(op::DIAG_RPRT, 0, 0), status::BAD_OP);
}
