// SPDX-License-Identifier: GPL-2.0

//! The INIT_HCA input mailbox, byte for byte as `core/fw.c:mlx4_INIT_HCA()`
//! writes it (the `INIT_HCA_*` offsets; all fields big-endian, `MLX4_PUT`
//! writes as many bytes as the source field has).
//!
//! A base and its log count share a qword: the count goes in the last byte
//! (e.g. QPC base at 0x30, log QPs at 0x37). mainline writes the count after
//! the base, which is harmless because every base is page-aligned.

use super::profile::{Layout, Table};

/// Bytes of the INIT_HCA input mailbox (`INIT_HCA_IN_SIZE`).
pub const INIT_HCA_IN_SIZE: usize = 0x200;

/// `INIT_HCA_VERSION` at `INIT_HCA_VERSION_OFFSET`.
pub const VERSION: u8 = 2;

/// Field offsets (`INIT_HCA_*_OFFSET` in `core/fw.c`).
pub mod offset {
    pub const VERSION: usize = 0x000;
    pub const CACHELINE_SZ: usize = 0x0e;
    pub const FLAGS: usize = 0x014;
    pub const RECOVERABLE_ERROR_EVENT: usize = 0x018;
    const QPC: usize = 0x020;
    pub const QPC_BASE: usize = QPC + 0x10;
    pub const LOG_QP: usize = QPC + 0x17;
    pub const SRQC_BASE: usize = QPC + 0x28;
    pub const LOG_SRQ: usize = QPC + 0x2f;
    pub const CQC_BASE: usize = QPC + 0x30;
    pub const LOG_CQ: usize = QPC + 0x37;
    pub const EQE_CQE: usize = QPC + 0x38;
    pub const ALTC_BASE: usize = QPC + 0x40;
    pub const AUXC_BASE: usize = QPC + 0x50;
    pub const EQC_BASE: usize = QPC + 0x60;
    pub const LOG_EQ: usize = QPC + 0x67;
    pub const NUM_SYS_EQS: usize = QPC + 0x6a;
    pub const RDMARC_BASE: usize = QPC + 0x70;
    pub const LOG_RD: usize = QPC + 0x77;
    const MCAST: usize = 0x0c0;
    pub const MC_BASE: usize = MCAST;
    pub const LOG_MC_ENTRY_SZ: usize = MCAST + 0x13;
    pub const LOG_MC_HASH_SZ: usize = MCAST + 0x17;
    pub const UC_STEERING: usize = MCAST + 0x18;
    pub const LOG_MC_TABLE_SZ: usize = MCAST + 0x1b;
    const TPT: usize = 0x0f0;
    pub const DMPT_BASE: usize = TPT;
    pub const TPT_MW: usize = TPT + 0x08;
    pub const LOG_MPT_SZ: usize = TPT + 0x0b;
    pub const MTT_BASE: usize = TPT + 0x10;
    pub const CMPT_BASE: usize = TPT + 0x18;
    const UAR: usize = 0x120;
    pub const LOG_UAR_SZ: usize = UAR + 0x0a;
    pub const UAR_PAGE_SZ: usize = UAR + 0x0b;
}

/// Bits of the be32 flags dword at 0x14 (`mlx4_INIT_HCA()`).
pub mod flags {
    /// Always set: "Check port for UD address vector".
    pub const UD_AV_PORT_CHECK: u32 = 1 << 0;
    /// Host is big-endian (cleared on little-endian hosts).
    pub const BIG_ENDIAN_HOST: u32 = 1 << 1;
    /// Only with `enable_qos` and DEV_CAP ETS_CFG.
    pub const QOS: u32 = 1 << 2;
    /// Only with DEV_CAP IPOIB_CSUM.
    pub const IPOIB_CSUM: u32 = 1 << 3;
    /// Only with DEV_CAP COUNTERS.
    pub const COUNTERS: u32 = 1 << 4;
    /// Only with DEV_CAP RSS_IP_FRAG.
    pub const RSS_IP_FRAG: u32 = 1 << 13;
}

/// Bits of the be32 dword at 0x58.
pub const EQE_64B: u32 = 1 << 29;
pub const CQE_64B: u32 = 1 << 30;
/// `mw_enabled` byte at 0xf8 (`INIT_HCA_TPT_MW_ENABLE`, `core/mlx4.h`).
pub const TPT_MW_ENABLE: u8 = 1 << 7;
/// UC steering byte (0xd8) in B0 steering mode.
pub const UC_STEERING_B0: u8 = 1 << 3;

/// The ICM part of INIT_HCA, as `mlx4_make_profile()` fills
/// `struct mlx4_init_hca_param`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct IcmParams {
    pub qpc_base: u64,
    pub log_num_qps: u8,
    pub rdmarc_base: u64,
    /// `qp_table.rdmarc_shift`: log2 of RDMARC entries per QP.
    pub log_rd_per_qp: u8,
    pub altc_base: u64,
    pub auxc_base: u64,
    pub srqc_base: u64,
    pub log_num_srqs: u8,
    pub cqc_base: u64,
    pub log_num_cqs: u8,
    pub eqc_base: u64,
    pub log_num_eqs: u8,
    pub dmpt_base: u64,
    pub log_mpt_sz: u8,
    pub mtt_base: u64,
    pub cmpt_base: u64,
    pub mc_base: u64,
    pub log_mc_entry_sz: u8,
    /// Hash part: half the MCG table (A0/B0 steering).
    pub log_mc_hash_sz: u8,
    pub log_mc_table_sz: u8,
}

impl IcmParams {
    /// The INIT_HCA ICM fields of `layout` (`mlx4_make_profile()`'s final
    /// switch). `log_mcg_entry_size` is ilog2 of the MCG entry size; the
    /// MCG table must have at least two entries (hash = half of it).
    pub fn from_layout(layout: &Layout, log_mcg_entry_size: u8) -> Self {
        let qp = layout.region(Table::Qpc);
        let rdmarc = layout.region(Table::Rdmarc);
        let mcg = layout.region(Table::Mcg);
        let dmpt = layout.region(Table::Dmpt);
        IcmParams {
            qpc_base: qp.start,
            log_num_qps: qp.log_num,
            rdmarc_base: rdmarc.start,
            // The smallest shift with num_qp << shift >= RDMARC entries.
            log_rd_per_qp: rdmarc.log_num.saturating_sub(qp.log_num),
            altc_base: layout.region(Table::Altc).start,
            auxc_base: layout.region(Table::Auxc).start,
            srqc_base: layout.region(Table::Srqc).start,
            log_num_srqs: layout.region(Table::Srqc).log_num,
            cqc_base: layout.region(Table::Cqc).start,
            log_num_cqs: layout.region(Table::Cqc).log_num,
            eqc_base: layout.region(Table::Eqc).start,
            log_num_eqs: layout.region(Table::Eqc).log_num,
            dmpt_base: dmpt.start,
            log_mpt_sz: dmpt.log_num,
            mtt_base: layout.region(Table::Mtt).start,
            cmpt_base: layout.region(Table::Cmpt).start,
            mc_base: mcg.start,
            log_mc_entry_sz: log_mcg_entry_size,
            log_mc_hash_sz: mcg.log_num.saturating_sub(1),
            log_mc_table_sz: mcg.log_num,
        }
    }
}

/// Multicast steering mode (`core/main.c:choose_steering_mode`). Device
/// managed flow steering uses other offsets and is not supported here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Steering {
    /// Neither VEP_UC_STEER nor VEP_MC_STEER (or only one of them).
    #[default]
    A0,
    /// Both VEP_UC_STEER and VEP_MC_STEER advertised.
    B0,
}

/// The non-ICM settings. `Default` is what mlx4_core sends on a
/// little-endian host for a device without the optional capabilities.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InitHcaOptions {
    /// ilog2 of the CPU cache line (`cache_line_size()`), at least 4.
    pub log_cache_line: u8,
    pub big_endian_host: bool,
    pub ipoib_csum: bool,
    pub qos: bool,
    pub counters: bool,
    pub rss_ip_frag: bool,
    pub eqe_64b: bool,
    pub cqe_64b: bool,
    pub recoverable_error_event: bool,
    /// DEV_CAP MEM_WINDOW or BMME TYPE_2_WIN (`core/main.c:mlx4_init_hca`).
    pub mem_windows: bool,
    pub steering: Steering,
    /// log2 of the UAR area in 4 KiB pages: `ilog2(num_uars) + PAGE_SHIFT
    /// - 12` (`mlx4_init_hca`, native PF with 4 KiB UAR pages).
    pub log_uar_sz: u8,
}

impl Default for InitHcaOptions {
    fn default() -> Self {
        InitHcaOptions {
            log_cache_line: 6,
            big_endian_host: cfg!(target_endian = "big"),
            ipoib_csum: false,
            qos: false,
            counters: false,
            rss_ip_frag: false,
            eqe_64b: false,
            cqe_64b: false,
            recoverable_error_event: false,
            mem_windows: false,
            steering: Steering::A0,
            log_uar_sz: 0,
        }
    }
}

fn put_u8(inbox: &mut [u8], at: usize, v: u8) {
    inbox[at] = v;
}

fn put_be16(inbox: &mut [u8], at: usize, v: u16) {
    inbox[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

fn put_be64(inbox: &mut [u8], at: usize, v: u64) {
    inbox[at..at + 8].copy_from_slice(&v.to_be_bytes());
}

fn or_be32(inbox: &mut [u8], at: usize, bits: u32) {
    let old = u32::from_be_bytes([inbox[at], inbox[at + 1], inbox[at + 2], inbox[at + 3]]);
    inbox[at..at + 4].copy_from_slice(&(old | bits).to_be_bytes());
}

/// Fills `inbox` (zeroed first) as `mlx4_INIT_HCA()` does, in its order.
/// Not written: the EQE/CQE stride byte (0x5b), the driver version string
/// (0x140), the VXLAN parser byte (0x0c, written as 0 anyway) and the
/// device-managed steering block (0x1d0).
pub fn write_init_hca(
    icm: &IcmParams,
    options: &InitHcaOptions,
    inbox: &mut [u8; INIT_HCA_IN_SIZE],
) {
    inbox.fill(0);
    put_u8(inbox, offset::VERSION, VERSION);
    put_u8(
        inbox,
        offset::CACHELINE_SZ,
        (options.log_cache_line.saturating_sub(4) << 5) | (1 << 4),
    );

    let mut flag_bits = flags::UD_AV_PORT_CHECK;
    for (on, bit) in [
        (options.big_endian_host, flags::BIG_ENDIAN_HOST),
        (options.ipoib_csum, flags::IPOIB_CSUM),
        (options.qos, flags::QOS),
        (options.counters, flags::COUNTERS),
        (options.rss_ip_frag, flags::RSS_IP_FRAG),
    ] {
        if on {
            flag_bits |= bit;
        }
    }
    or_be32(inbox, offset::FLAGS, flag_bits);
    if options.eqe_64b {
        or_be32(inbox, offset::EQE_CQE, EQE_64B);
    }
    if options.cqe_64b {
        or_be32(inbox, offset::EQE_CQE, CQE_64B);
    }
    if options.recoverable_error_event {
        or_be32(inbox, offset::RECOVERABLE_ERROR_EVENT, 1 << 31);
    }

    put_be64(inbox, offset::QPC_BASE, icm.qpc_base);
    put_u8(inbox, offset::LOG_QP, icm.log_num_qps);
    put_be64(inbox, offset::SRQC_BASE, icm.srqc_base);
    put_u8(inbox, offset::LOG_SRQ, icm.log_num_srqs);
    put_be64(inbox, offset::CQC_BASE, icm.cqc_base);
    put_u8(inbox, offset::LOG_CQ, icm.log_num_cqs);
    put_be64(inbox, offset::ALTC_BASE, icm.altc_base);
    put_be64(inbox, offset::AUXC_BASE, icm.auxc_base);
    put_be64(inbox, offset::EQC_BASE, icm.eqc_base);
    put_u8(inbox, offset::LOG_EQ, icm.log_num_eqs);
    // Without SYS_EQS the count is 0 (`mlx4_make_profile`).
    put_be16(inbox, offset::NUM_SYS_EQS, 0);
    put_be64(inbox, offset::RDMARC_BASE, icm.rdmarc_base);
    put_u8(inbox, offset::LOG_RD, icm.log_rd_per_qp);

    put_be64(inbox, offset::MC_BASE, icm.mc_base);
    put_u8(inbox, offset::LOG_MC_ENTRY_SZ, icm.log_mc_entry_sz);
    put_u8(inbox, offset::LOG_MC_HASH_SZ, icm.log_mc_hash_sz);
    put_u8(inbox, offset::LOG_MC_TABLE_SZ, icm.log_mc_table_sz);
    if options.steering == Steering::B0 {
        put_u8(inbox, offset::UC_STEERING, UC_STEERING_B0);
    }

    put_be64(inbox, offset::DMPT_BASE, icm.dmpt_base);
    put_u8(
        inbox,
        offset::TPT_MW,
        if options.mem_windows {
            TPT_MW_ENABLE
        } else {
            0
        },
    );
    put_u8(inbox, offset::LOG_MPT_SZ, icm.log_mpt_sz);
    put_be64(inbox, offset::MTT_BASE, icm.mtt_base);
    put_be64(inbox, offset::CMPT_BASE, icm.cmpt_base);

    // 4 KiB UAR pages: uar_page_sz = DEFAULT_UAR_PAGE_SHIFT - 12 = 0.
    put_u8(inbox, offset::UAR_PAGE_SZ, 0);
    put_u8(inbox, offset::LOG_UAR_SZ, options.log_uar_sz);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::icm::profile::make_layout;
    use crate::icm::profile::tests::{entry_sizes, requests, CX3_SIZES, DRIVER_PROFILE};
    use proptest::prelude::*;

    fn be64(b: &[u8], at: usize) -> u64 {
        u64::from_be_bytes(b[at..at + 8].try_into().unwrap())
    }

    fn be32(b: &[u8], at: usize) -> u32 {
        u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
    }

    /// The offsets as literal numbers (fw.c defines resolved by hand), so
    /// a slip in the `offset` module is caught.
    #[test]
    fn offsets_match_mainline_defines() {
        use offset::*;
        let got = [
            QPC_BASE,
            LOG_QP,
            SRQC_BASE,
            LOG_SRQ,
            CQC_BASE,
            LOG_CQ,
            EQE_CQE,
            ALTC_BASE,
            AUXC_BASE,
            EQC_BASE,
            LOG_EQ,
            NUM_SYS_EQS,
            RDMARC_BASE,
            LOG_RD,
            MC_BASE,
            LOG_MC_ENTRY_SZ,
            LOG_MC_HASH_SZ,
            UC_STEERING,
            LOG_MC_TABLE_SZ,
            DMPT_BASE,
            TPT_MW,
            LOG_MPT_SZ,
            MTT_BASE,
            CMPT_BASE,
            LOG_UAR_SZ,
            UAR_PAGE_SZ,
        ];
        let want = [
            0x30, 0x37, 0x48, 0x4f, 0x50, 0x57, 0x58, 0x60, 0x70, 0x80, 0x87, 0x8a, 0x90, 0x97,
            0xc0, 0xd3, 0xd7, 0xd8, 0xdb, 0xf0, 0xf8, 0xfb, 0x100, 0x108, 0x12a, 0x12b,
        ];
        assert_eq!(got, want);
        assert_eq!(
            (VERSION, CACHELINE_SZ, FLAGS, RECOVERABLE_ERROR_EVENT),
            (0, 0x0e, 0x14, 0x18)
        );
    }

    #[test]
    fn default_options_are_mlx4_core_on_little_endian() {
        let mut inbox = [0xffu8; INIT_HCA_IN_SIZE];
        let options = InitHcaOptions {
            log_uar_sz: 10,
            ..InitHcaOptions::default()
        };
        write_init_hca(&IcmParams::default(), &options, &mut inbox);
        assert_eq!(inbox[0], 2);
        // 64-byte cache line: ((6 - 4) << 5) | 1 << 4.
        assert_eq!(inbox[0x0e], 0x50);
        assert_eq!(
            be32(&inbox, 0x14),
            if cfg!(target_endian = "big") { 3 } else { 1 }
        );
        assert_eq!(inbox[0x12a], 10);
        let set = [0x00, 0x0e, 0x17, 0x12a];
        for (i, b) in inbox.iter().enumerate() {
            assert!(set.contains(&i) || *b == 0, "byte {i:#x} = {b:#x}");
        }
    }

    #[test]
    fn optional_flags_land_on_their_bits() {
        let mut inbox = [0u8; INIT_HCA_IN_SIZE];
        let options = InitHcaOptions {
            big_endian_host: true,
            ipoib_csum: true,
            qos: true,
            counters: true,
            rss_ip_frag: true,
            eqe_64b: true,
            cqe_64b: true,
            recoverable_error_event: true,
            mem_windows: true,
            steering: Steering::B0,
            ..InitHcaOptions::default()
        };
        write_init_hca(&IcmParams::default(), &options, &mut inbox);
        assert_eq!(be32(&inbox, 0x14), 0x201f);
        assert_eq!(be32(&inbox, 0x58), 0x6000_0000);
        assert_eq!(be32(&inbox, 0x18), 0x8000_0000);
        assert_eq!(inbox[0xf8], 0x80);
        assert_eq!(inbox[0xd8], 0x08);
    }

    #[test]
    fn driver_sized_profile_fields() {
        let mut sizes = CX3_SIZES;
        sizes.mcg = 128;
        let layout = make_layout(&sizes, &DRIVER_PROFILE, 1 << 36).unwrap();
        let icm = IcmParams::from_layout(&layout, 7);
        assert_eq!(icm.cmpt_base, 0);
        // cMPT (4 GiB) first, then MTT (128 KiB), then QPC and dMPT (64 KiB).
        assert_eq!(icm.mtt_base, 1 << 32);
        assert_eq!(icm.qpc_base, (1 << 32) + (128 << 10));
        assert_eq!(icm.dmpt_base, icm.qpc_base + (64 << 10));
        assert_eq!(
            (icm.log_num_qps, icm.log_rd_per_qp, icm.log_mpt_sz),
            (8, 0, 10)
        );
        assert_eq!(
            (icm.log_mc_entry_sz, icm.log_mc_hash_sz, icm.log_mc_table_sz),
            (7, 0, 1)
        );
    }

    proptest! {
        #[test]
        fn every_icm_field_reads_back(sizes in entry_sizes(), request in requests(), log_uar in 0u8..=20) {
            let layout = make_layout(&sizes, &request, u64::MAX).unwrap();
            let icm = IcmParams::from_layout(&layout, sizes.mcg.trailing_zeros() as u8);
            let options = InitHcaOptions { log_uar_sz: log_uar, ..InitHcaOptions::default() };
            let mut inbox = [0u8; INIT_HCA_IN_SIZE];
            write_init_hca(&icm, &options, &mut inbox);
            let log_mask = 0x1f;
            prop_assert_eq!(be64(&inbox, 0x30) & !log_mask, icm.qpc_base);
            prop_assert_eq!(inbox[0x37], icm.log_num_qps);
            prop_assert_eq!(be64(&inbox, 0x48) & !log_mask, icm.srqc_base);
            prop_assert_eq!(inbox[0x4f], icm.log_num_srqs);
            prop_assert_eq!(be64(&inbox, 0x50) & !log_mask, icm.cqc_base);
            prop_assert_eq!(inbox[0x57], icm.log_num_cqs);
            prop_assert_eq!(be64(&inbox, 0x60), icm.altc_base);
            prop_assert_eq!(be64(&inbox, 0x70), icm.auxc_base);
            prop_assert_eq!(be64(&inbox, 0x80) & !log_mask, icm.eqc_base);
            prop_assert_eq!(inbox[0x87], icm.log_num_eqs);
            prop_assert_eq!(be64(&inbox, 0x90) & !log_mask, icm.rdmarc_base);
            prop_assert_eq!(inbox[0x97], request.log_rdmarc_per_qp);
            prop_assert_eq!(be64(&inbox, 0xc0), icm.mc_base);
            prop_assert_eq!(inbox[0xd3], icm.log_mc_entry_sz);
            prop_assert_eq!(inbox[0xd7], request.log_num_mcgs - 1);
            prop_assert_eq!(inbox[0xdb], request.log_num_mcgs);
            prop_assert_eq!(be64(&inbox, 0xf0), icm.dmpt_base);
            prop_assert_eq!(inbox[0xfb], request.log_num_mpts);
            prop_assert_eq!(be64(&inbox, 0x100), icm.mtt_base);
            prop_assert_eq!(be64(&inbox, 0x108), icm.cmpt_base);
            prop_assert_eq!(inbox[0x12a], log_uar);
            prop_assert_eq!(inbox[0x12b], 0);
            // The log counts never clobber base bits: bases are page aligned.
            for base in [icm.qpc_base, icm.srqc_base, icm.cqc_base, icm.eqc_base, icm.rdmarc_base] {
                prop_assert_eq!(base % crate::icm::ICM_PAGE_SIZE, 0);
            }
        }
    }
}
