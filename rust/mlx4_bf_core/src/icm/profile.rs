// SPDX-License-Identifier: GPL-2.0

//! The ICM layout: where each context table lives in the adapter's context
//! memory, computed the way `core/profile.c:mlx4_make_profile()` does it, but
//! from the driver's own (small) counts instead of mlx4_core's
//! `default_profile`.
//!
//! Rules taken from `mlx4_make_profile()`:
//! - every table is `entries x entry size` with the entry count a power of two
//!   (`roundup_pow_of_two`), and at least one page (`max(size, PAGE_SIZE)`);
//! - the eleven tables are bubble-sorted by size, largest first, ties keeping
//!   the `MLX4_RES_*` order, so each starts at a multiple of its own size;
//! - bases are assigned consecutively from ICM address 0, and the sum is the
//!   ICM size given to SET_ICM_SIZE; it must not exceed QUERY_DEV_CAP's
//!   `max_icm_sz`.

use super::ICM_PAGE_SIZE;

/// The context tables, in mainline's `MLX4_RES_*` order (which breaks ties
/// in the size sort). mlx4_core always lays out all eleven.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Table {
    Qpc,
    Rdmarc,
    Altc,
    Auxc,
    Srqc,
    Cqc,
    Eqc,
    Dmpt,
    Cmpt,
    Mtt,
    Mcg,
}

/// Number of context tables (`MLX4_RES_NUM`).
pub const NUM_TABLES: usize = 11;

/// All tables in `MLX4_RES_*` order.
pub const TABLES: [Table; NUM_TABLES] = [
    Table::Qpc,
    Table::Rdmarc,
    Table::Altc,
    Table::Auxc,
    Table::Srqc,
    Table::Cqc,
    Table::Eqc,
    Table::Dmpt,
    Table::Cmpt,
    Table::Mtt,
    Table::Mcg,
];

/// log2 of the cMPT entry count: four object types (QP, SRQ, CQ, EQ) of
/// 2^24 entries each (`MLX4_NUM_CMPTS = MLX4_CMPT_NUM_TYPE << MLX4_CMPT_SHIFT`).
/// Fixed, not sized by the driver: the firmware finds type t's entries at
/// `cmpt_base + (t * entry size << 24)` (`core/main.c:mlx4_init_cmpt_table`),
/// so the table is 4 GiB of ICM *address space* with 64-byte entries; only
/// the chunks in use are ever mapped.
pub const LOG_NUM_CMPTS: u8 = 26;
/// log2 of the entries of one cMPT type (`MLX4_CMPT_SHIFT`).
pub const CMPT_SHIFT: u8 = 24;

/// Entry sizes in bytes, as QUERY_DEV_CAP reports them (mbox+0x80..0x92,
/// `core/fw.c:mlx4_QUERY_DEV_CAP`), plus the multicast group entry size the
/// driver chooses (`mlx4_get_mgm_entry_size()`, 1 << log_num_mgm_entry_size).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntrySizes {
    pub qpc: u32,
    pub rdmarc: u32,
    pub altc: u32,
    pub auxc: u32,
    pub srqc: u32,
    pub cqc: u32,
    pub eqc: u32,
    pub dmpt: u32,
    pub cmpt: u32,
    pub mtt: u32,
    pub mcg: u32,
}

impl EntrySizes {
    /// The entry size of `table` (for RDMARC: one responder resource, not
    /// the per-QP block).
    pub fn of(&self, table: Table) -> u32 {
        match table {
            Table::Qpc => self.qpc,
            Table::Rdmarc => self.rdmarc,
            Table::Altc => self.altc,
            Table::Auxc => self.auxc,
            Table::Srqc => self.srqc,
            Table::Cqc => self.cqc,
            Table::Eqc => self.eqc,
            Table::Dmpt => self.dmpt,
            Table::Cmpt => self.cmpt,
            Table::Mtt => self.mtt,
            Table::Mcg => self.mcg,
        }
    }
}

/// What the driver asks for, as log2 entry counts (mainline's
/// `struct mlx4_profile`, already rounded to powers of two).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProfileRequest {
    pub log_num_qps: u8,
    /// Responder resources (RDMARC entries) per QP; mainline: 4 (16).
    pub log_rdmarc_per_qp: u8,
    pub log_num_srqs: u8,
    pub log_num_cqs: u8,
    /// Mainline: `roundup_pow_of_two(min(max_eqs, MAX_MSIX))`; must cover
    /// the reserved EQs plus the driver's own.
    pub log_num_eqs: u8,
    pub log_num_mpts: u8,
    /// MTT entries (mainline: segments << log_mtts_per_seg).
    pub log_num_mtts: u8,
    /// Multicast group entries (hash part plus AMGM part).
    pub log_num_mcgs: u8,
}

impl ProfileRequest {
    /// log2 of the entry count of `table`.
    pub fn log_num(&self, table: Table) -> u8 {
        match table {
            Table::Qpc | Table::Altc | Table::Auxc => self.log_num_qps,
            Table::Rdmarc => self.log_num_qps + self.log_rdmarc_per_qp,
            Table::Srqc => self.log_num_srqs,
            Table::Cqc => self.log_num_cqs,
            Table::Eqc => self.log_num_eqs,
            Table::Dmpt => self.log_num_mpts,
            Table::Cmpt => LOG_NUM_CMPTS,
            Table::Mtt => self.log_num_mtts,
            Table::Mcg => self.log_num_mcgs,
        }
    }
}

/// One table placed in ICM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub table: Table,
    pub log_num: u8,
    /// ICM address of entry 0.
    pub start: u64,
    /// Bytes, a power of two and at least one ICM page.
    pub size: u64,
}

impl Region {
    pub fn end(&self) -> u64 {
        self.start + self.size
    }
}

/// The whole layout: regions largest first, and the SET_ICM_SIZE total.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// In placement order (descending size).
    pub regions: [Region; NUM_TABLES],
    pub total_size: u64,
}

impl Layout {
    /// The region of `table`.
    pub fn region(&self, table: Table) -> Region {
        // Every table is present exactly once (see `make_layout`).
        let mut found = self.regions[0];
        for r in self.regions {
            if r.table == table {
                found = r;
            }
        }
        found
    }
}

/// Objects the firmware owns, as counts decoded from QUERY_DEV_CAP
/// (`core/fw.c:mlx4_QUERY_DEV_CAP`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reserved {
    /// `reserved_qps_cnt[MLX4_QP_REGION_FW]` = 1 << (mbox+0x12 & 0xf).
    pub qps: u32,
    /// 1 << (mbox+0x14 >> 4).
    pub srqs: u32,
    /// 1 << (mbox+0x1a & 0xf).
    pub cqs: u32,
    /// See [`reserved_eqs`].
    pub eqs: u32,
    /// 1 << (mbox+0x22 & 0xf) (`reserved_mrws`).
    pub mpts: u32,
    /// 1 << (mbox+0x20 >> 4), rounded up to whole cache lines
    /// (`table_chunks::reserved_mtts_aligned`).
    pub mtts: u32,
}

/// Reserved EQs: 1 << (mbox+0x1e & 0xf), but at least the four EQs whose
/// doorbells sit in each reserved UAR page (mbox+0x48 >> 4 UARs), when the
/// device has no SYS_EQS (`mlx4_QUERY_DEV_CAP`: "Each UAR has 4 EQ
/// doorbells").
pub fn reserved_eqs(log_reserved_eqs: u8, reserved_uars: u32) -> u32 {
    (1u32 << (log_reserved_eqs & 0xf)).max(reserved_uars.saturating_mul(4))
}

/// Why a request does not suit the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestError {
    /// The table has no entry left beyond the firmware's reserved ones
    /// (SRQs: fewer entries than reserved).
    NoneLeft(Table),
    /// More EQs than QUERY_DEV_CAP's max (mbox+0x1f & 0xf, log2).
    TooManyEqs,
    /// More than 2^31 MTT entries ("has to ... fit into 32 bits",
    /// `mlx4_make_profile`).
    TooManyMtts,
    /// The MCG table needs two entries: its hash part is half of it.
    McgTooSmall,
}

/// Checks a request against the device before laying it out. mainline's
/// own profile is large enough that it never checks these; a small one
/// must, or the driver would get no usable QP, CQ, EQ, MPT or MTT number.
pub fn check_request(
    request: &ProfileRequest,
    reserved: &Reserved,
    log_max_eqs: u8,
) -> Result<(), RequestError> {
    let count = |log: u8| 1u64 << log.min(63);
    for (table, log, rsvd) in [
        (Table::Qpc, request.log_num_qps, reserved.qps),
        (Table::Cqc, request.log_num_cqs, reserved.cqs),
        (Table::Eqc, request.log_num_eqs, reserved.eqs),
        (Table::Dmpt, request.log_num_mpts, reserved.mpts),
        (Table::Mtt, request.log_num_mtts, reserved.mtts),
    ] {
        if count(log) <= u64::from(rsvd) {
            return Err(RequestError::NoneLeft(table));
        }
    }
    if count(request.log_num_srqs) < u64::from(reserved.srqs) {
        return Err(RequestError::NoneLeft(Table::Srqc));
    }
    if request.log_num_eqs > log_max_eqs {
        return Err(RequestError::TooManyEqs);
    }
    if request.log_num_mtts > 31 {
        return Err(RequestError::TooManyMtts);
    }
    if request.log_num_mcgs == 0 {
        return Err(RequestError::McgTooSmall);
    }
    Ok(())
}

/// Why a profile cannot be laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProfileError {
    /// An entry size is zero or not a power of two: tables would no longer
    /// be powers of two and the packing would misalign them.
    EntrySize(Table),
    /// A table would not fit in 64 bits (log count + log entry size >= 63).
    TooLarge(Table),
    /// The layout needs more than QUERY_DEV_CAP's `max_icm_sz`
    /// ("Profile requires ... won't fit").
    DoesNotFit { total: u64, max_icm_size: u64 },
}

/// Lays out all eleven tables as `mlx4_make_profile()` does.
pub fn make_layout(
    sizes: &EntrySizes,
    request: &ProfileRequest,
    max_icm_size: u64,
) -> Result<Layout, ProfileError> {
    let mut regions = [Region {
        table: Table::Qpc,
        log_num: 0,
        start: 0,
        size: 0,
    }; NUM_TABLES];
    for (region, table) in regions.iter_mut().zip(TABLES) {
        let entry = sizes.of(table);
        if !entry.is_power_of_two() {
            return Err(ProfileError::EntrySize(table));
        }
        let log_num = request.log_num(table);
        let log_size = u32::from(log_num) + entry.trailing_zeros();
        if log_size >= 63 {
            return Err(ProfileError::TooLarge(table));
        }
        *region = Region {
            table,
            log_num,
            start: 0,
            size: (1u64 << log_size).max(ICM_PAGE_SIZE),
        };
    }

    // The same stable bubble sort as mainline, so equal sizes keep the
    // MLX4_RES_* order and the bases match mlx4_core's bit for bit.
    for i in (1..=NUM_TABLES).rev() {
        for j in 1..i {
            if regions[j].size > regions[j - 1].size {
                regions.swap(j, j - 1);
            }
        }
    }

    let mut total_size = 0u64;
    for region in regions.iter_mut() {
        region.start = total_size;
        // Saturates instead of wrapping: an absurd total then fails the
        // max_icm_size check below.
        total_size = total_size.saturating_add(region.size);
    }
    if total_size > max_icm_size {
        return Err(ProfileError::DoesNotFit {
            total: total_size,
            max_icm_size,
        });
    }
    Ok(Layout {
        regions,
        total_size,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Reserved counts of a real ConnectX-3 (mlx4-core-bringup.md §2.2):
    /// 64 FW QPs, 128 CQs, 256 MPTs, 1 MTT (8 after cache-line rounding).
    pub(crate) const CX3_RESERVED: Reserved = Reserved {
        qps: 64,
        srqs: 64,
        cqs: 128,
        eqs: 64,
        mpts: 256,
        mtts: 8,
    };

    /// What this driver needs, with headroom: 256 QPs and CQs, 128 EQs
    /// (reserved EQs can be 4 x reserved UARs), 1024 MPTs, 2^14 MTT
    /// entries, a two-entry MCG table of 128-byte entries.
    pub(crate) const DRIVER_PROFILE: ProfileRequest = ProfileRequest {
        log_num_qps: 8,
        log_rdmarc_per_qp: 0,
        log_num_srqs: 6,
        log_num_cqs: 8,
        log_num_eqs: 7,
        log_num_mpts: 10,
        log_num_mtts: 14,
        log_num_mcgs: 1,
    };

    /// ConnectX-3 entry sizes (mlx4-core-bringup.md §2.2) with the default
    /// 1 KiB MCG entry (`MLX4_DEFAULT_MGM_LOG_ENTRY_SIZE`).
    pub(crate) const CX3_SIZES: EntrySizes = EntrySizes {
        qpc: 256,
        rdmarc: 32,
        altc: 64,
        auxc: 64,
        srqc: 64,
        cqc: 64,
        eqc: 64,
        dmpt: 64,
        cmpt: 64,
        mtt: 8,
        mcg: 1024,
    };

    /// mlx4_core's `default_profile` on a host whose RAM needs no more
    /// than 2^20 MTT segments, with 128 EQs.
    const MAINLINE_DEFAULT: ProfileRequest = ProfileRequest {
        log_num_qps: 18,
        log_rdmarc_per_qp: 4,
        log_num_srqs: 16,
        log_num_cqs: 16,
        log_num_eqs: 7,
        log_num_mpts: 19,
        log_num_mtts: 20,
        log_num_mcgs: 13,
    };

    #[test]
    fn mainline_default_profile_layout() {
        let layout = make_layout(&CX3_SIZES, &MAINLINE_DEFAULT, 1 << 36).unwrap();
        // Largest first; ties (ALTC/AUXC, MTT/MCG, SRQC/CQC) in MLX4_RES_* order.
        let expected = [
            (Table::Cmpt, 32),
            (Table::Rdmarc, 27),
            (Table::Qpc, 26),
            (Table::Dmpt, 25),
            (Table::Altc, 24),
            (Table::Auxc, 24),
            (Table::Mtt, 23),
            (Table::Mcg, 23),
            (Table::Srqc, 22),
            (Table::Cqc, 22),
            (Table::Eqc, 13),
        ];
        let mut start = 0;
        for (region, (table, log_size)) in layout.regions.iter().zip(expected) {
            assert_eq!(
                (region.table, region.size, region.start),
                (table, 1 << log_size, start)
            );
            start += 1u64 << log_size;
        }
        assert_eq!(layout.total_size, start);
        assert_eq!(layout.region(Table::Qpc).start, 1 << 32 | 1 << 27);
    }

    #[test]
    fn tiny_tables_take_one_page() {
        let request = ProfileRequest {
            log_num_qps: 0,
            log_rdmarc_per_qp: 0,
            log_num_srqs: 0,
            log_num_cqs: 0,
            log_num_eqs: 0,
            log_num_mpts: 0,
            log_num_mtts: 0,
            log_num_mcgs: 0,
        };
        let layout = make_layout(&CX3_SIZES, &request, u64::MAX).unwrap();
        assert_eq!(layout.regions[0].table, Table::Cmpt);
        for r in &layout.regions[1..] {
            assert_eq!(r.size, ICM_PAGE_SIZE);
        }
        assert_eq!(layout.total_size, (64u64 << 26) + 10 * ICM_PAGE_SIZE);
    }

    #[test]
    fn refuses_what_mainline_would_misplace_or_not_fit() {
        let mut sizes = CX3_SIZES;
        sizes.cqc = 48;
        assert_eq!(
            make_layout(&sizes, &MAINLINE_DEFAULT, u64::MAX),
            Err(ProfileError::EntrySize(Table::Cqc))
        );
        sizes.cqc = 0;
        assert_eq!(
            make_layout(&sizes, &MAINLINE_DEFAULT, u64::MAX),
            Err(ProfileError::EntrySize(Table::Cqc))
        );
        assert!(matches!(
            make_layout(&CX3_SIZES, &MAINLINE_DEFAULT, 1 << 32),
            Err(ProfileError::DoesNotFit { max_icm_size, .. }) if max_icm_size == 1 << 32
        ));
    }

    #[test]
    fn reserved_eqs_cover_reserved_uar_doorbells() {
        assert_eq!(reserved_eqs(0, 1), 4);
        assert_eq!(reserved_eqs(0, 0), 1);
        assert_eq!(reserved_eqs(6, 16), 64);
        assert_eq!(reserved_eqs(0x17, 0), 128);
    }

    #[test]
    fn small_requests_are_checked_against_reservations() {
        let reserved = CX3_RESERVED;
        let ok = ProfileRequest {
            log_num_qps: 7,
            log_rdmarc_per_qp: 0,
            log_num_srqs: 6,
            log_num_cqs: 8,
            log_num_eqs: 7,
            log_num_mpts: 9,
            log_num_mtts: 14,
            log_num_mcgs: 1,
        };
        assert_eq!(check_request(&ok, &reserved, 7), Ok(()));
        let cases = [
            (
                ProfileRequest {
                    log_num_qps: 6,
                    ..ok
                },
                RequestError::NoneLeft(Table::Qpc),
            ),
            (
                ProfileRequest {
                    log_num_cqs: 7,
                    ..ok
                },
                RequestError::NoneLeft(Table::Cqc),
            ),
            (
                ProfileRequest {
                    log_num_eqs: 6,
                    ..ok
                },
                RequestError::NoneLeft(Table::Eqc),
            ),
            (
                ProfileRequest {
                    log_num_mpts: 8,
                    ..ok
                },
                RequestError::NoneLeft(Table::Dmpt),
            ),
            (
                ProfileRequest {
                    log_num_mtts: 3,
                    ..ok
                },
                RequestError::NoneLeft(Table::Mtt),
            ),
            (
                ProfileRequest {
                    log_num_srqs: 5,
                    ..ok
                },
                RequestError::NoneLeft(Table::Srqc),
            ),
            (
                ProfileRequest {
                    log_num_eqs: 8,
                    ..ok
                },
                RequestError::TooManyEqs,
            ),
            (
                ProfileRequest {
                    log_num_mtts: 32,
                    ..ok
                },
                RequestError::TooManyMtts,
            ),
            (
                ProfileRequest {
                    log_num_mcgs: 0,
                    ..ok
                },
                RequestError::McgTooSmall,
            ),
        ];
        for (request, err) in cases {
            assert_eq!(check_request(&request, &reserved, 7), Err(err));
        }
    }

    pub(crate) fn entry_sizes() -> impl Strategy<Value = EntrySizes> {
        prop::array::uniform11(0u32..=12).prop_map(|l| EntrySizes {
            qpc: 1 << l[0],
            rdmarc: 1 << l[1],
            altc: 1 << l[2],
            auxc: 1 << l[3],
            srqc: 1 << l[4],
            cqc: 1 << l[5],
            eqc: 1 << l[6],
            dmpt: 1 << l[7],
            cmpt: 1 << l[8],
            mtt: 1 << l[9],
            mcg: 1 << l[10],
        })
    }

    pub(crate) fn requests() -> impl Strategy<Value = ProfileRequest> {
        prop::array::uniform8(0u8..=20).prop_map(|l| ProfileRequest {
            log_num_qps: l[0],
            log_rdmarc_per_qp: l[1] % 6,
            log_num_srqs: l[2],
            log_num_cqs: l[3],
            log_num_eqs: l[4] % 11,
            log_num_mpts: l[5],
            log_num_mtts: l[6],
            log_num_mcgs: l[7].max(1),
        })
    }

    proptest! {
        #[test]
        fn layout_packs_every_table_aligned_without_gaps(
            sizes in entry_sizes(),
            request in requests(),
        ) {
            let layout = make_layout(&sizes, &request, u64::MAX).unwrap();
            let mut seen = [false; NUM_TABLES];
            let mut next = 0;
            for (i, r) in layout.regions.iter().enumerate() {
                prop_assert!(!seen[r.table as usize]);
                seen[r.table as usize] = true;
                let bytes = u64::from(sizes.of(r.table)) << request.log_num(r.table);
                prop_assert_eq!(r.size, bytes.max(ICM_PAGE_SIZE));
                prop_assert_eq!(r.log_num, request.log_num(r.table));
                prop_assert!(r.size.is_power_of_two());
                prop_assert_eq!(r.start, next);
                prop_assert_eq!(r.start % r.size, 0);
                if i > 0 {
                    let prev = layout.regions[i - 1];
                    prop_assert!(prev.size > r.size || (prev.size == r.size && prev.table < r.table));
                }
                next = r.end();
            }
            prop_assert_eq!(layout.total_size, next);
        }

        #[test]
        fn same_layout_as_a_stable_sort(sizes in entry_sizes(), request in requests()) {
            let layout = make_layout(&sizes, &request, u64::MAX).unwrap();
            let mut by_key = TABLES.map(|t| {
                let bytes = (u64::from(sizes.of(t)) << request.log_num(t)).max(ICM_PAGE_SIZE);
                (core::cmp::Reverse(bytes), t)
            });
            by_key.sort_unstable();
            for (r, (_, t)) in layout.regions.iter().zip(by_key) {
                prop_assert_eq!(r.table, t);
            }
        }

        #[test]
        fn fits_exactly_when_total_within_max(
            sizes in entry_sizes(),
            request in requests(),
            slack in -2i64..2,
        ) {
            let total = make_layout(&sizes, &request, u64::MAX).unwrap().total_size;
            let max = total.saturating_add_signed(slack);
            prop_assert_eq!(make_layout(&sizes, &request, max).is_ok(), max >= total);
        }
    }
}
