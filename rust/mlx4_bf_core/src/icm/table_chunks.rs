// SPDX-License-Identifier: GPL-2.0

//! Which parts of each ICM table get host pages, mainline's way
//! (`core/icm.c`) and whole-table, so the driver can compare.
//!
//! mainline (`mlx4_init_icm_table()`, `mlx4_table_get()`):
//! - a table is cut into `MLX4_TABLE_CHUNK_SIZE` (256 KiB) chunks of
//!   `256 KiB / obj_size` objects; object `obj` lives in chunk
//!   `(obj & (num_obj - 1)) / objs_per_chunk`;
//! - at init it maps every chunk holding a reserved (firmware) object, the
//!   last one trimmed to the page-aligned end of the table, and never frees
//!   them;
//! - later, the first object of another chunk maps a full 256 KiB chunk
//!   (even past the end of a table smaller than that), and the last one
//!   released unmaps 64 pages.

use super::profile::{EntrySizes, Layout, Reserved, Table, CMPT_SHIFT};
use super::ICM_PAGE_SIZE;

/// Granule of on-demand mapping (`MLX4_TABLE_CHUNK_SIZE`).
pub const TABLE_CHUNK_SIZE: u64 = 1 << 18;

/// The ICM tables mlx4_core maps, in `core/main.c:mlx4_init_icm()` order
/// (the cMPT table is four tables, one per object type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IcmTable {
    CmptQp,
    CmptSrq,
    CmptCq,
    CmptEq,
    Eqc,
    Mtt,
    Dmpt,
    Qpc,
    Auxc,
    Altc,
    Rdmarc,
    Cqc,
    Srqc,
    Mcg,
}

/// Number of [`IcmTable`]s.
pub const NUM_ICM_TABLES: usize = 14;

/// Reserved MTT entries rounded up so that they fill whole cache lines:
/// the firmware writes them and the driver all others
/// (`core/main.c:mlx4_init_icm`, `dma_get_cache_alignment()`).
pub fn reserved_mtts_aligned(reserved_mtts: u32, mtt_entry_size: u32, dma_cache_align: u32) -> u32 {
    let bytes = u64::from(reserved_mtts) * u64::from(mtt_entry_size);
    let align = u64::from(dma_cache_align.max(1));
    (bytes.div_ceil(align) * align / u64::from(mtt_entry_size)) as u32
}

/// One ICM table: `num_obj` objects of `obj_size` bytes from ICM address
/// `virt`, the first `reserved` of them the firmware's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IcmTableSpec {
    pub table: IcmTable,
    pub virt: u64,
    pub obj_size: u32,
    pub num_obj: u32,
    pub reserved: u32,
}

fn page_align(bytes: u64) -> u64 {
    bytes.div_ceil(ICM_PAGE_SIZE) * ICM_PAGE_SIZE
}

impl IcmTableSpec {
    /// Bytes of the table.
    pub fn bytes(&self) -> u64 {
        u64::from(self.num_obj) * u64::from(self.obj_size)
    }

    /// Objects per chunk (`MLX4_TABLE_CHUNK_SIZE / obj_size`; 0 makes
    /// `mlx4_init_icm_table()` fail with -EINVAL).
    pub fn objs_per_chunk(&self) -> u32 {
        (TABLE_CHUNK_SIZE / u64::from(self.obj_size.max(1))) as u32
    }

    /// Chunks the table spans (`num_icm`).
    pub fn num_chunks(&self) -> u32 {
        self.num_obj.div_ceil(self.objs_per_chunk().max(1))
    }

    /// The chunk of object `obj` (`mlx4_table_get()`): the index wraps at
    /// `num_obj`, a power of two.
    pub fn chunk_of(&self, obj: u32) -> u32 {
        (obj & self.num_obj.wrapping_sub(1)) / self.objs_per_chunk().max(1)
    }

    /// Chunks mapped at init: those with `i * 256 KiB < reserved bytes`.
    pub fn reserved_chunks(&self) -> u32 {
        let reserved_bytes = u64::from(self.reserved) * u64::from(self.obj_size);
        reserved_bytes.div_ceil(TABLE_CHUNK_SIZE) as u32
    }

    /// Bytes `mlx4_init_icm_table()` maps for chunk `i`: a full chunk, or
    /// the page-aligned rest of a table that ends inside it.
    pub fn init_chunk_len(&self, i: u32) -> u64 {
        let start = u64::from(i) * TABLE_CHUNK_SIZE;
        if start + TABLE_CHUNK_SIZE > self.bytes() {
            page_align(self.bytes().saturating_sub(start))
        } else {
            TABLE_CHUNK_SIZE
        }
    }

    /// ICM address of chunk `i`.
    pub fn chunk_virt(&self, i: u32) -> u64 {
        self.virt + u64::from(i) * TABLE_CHUNK_SIZE
    }

    /// 4 KiB pages mainline maps at init.
    pub fn init_pages(&self) -> u64 {
        (0..self.reserved_chunks())
            .map(|i| self.init_chunk_len(i))
            .sum::<u64>()
            / ICM_PAGE_SIZE
    }

    /// Pages mapped on demand with `live` objects numbered
    /// `reserved..reserved + live` (a fresh allocator; mainline's bitmaps
    /// are round-robin, so later numbers spread, see
    /// [`Self::on_demand_pages_worst`]). Chunks holding reserved objects
    /// keep their init length; others are full 256 KiB (`mlx4_table_get`).
    pub fn on_demand_pages_dense(&self, live: u32) -> u64 {
        let reserved_chunks = self.reserved_chunks();
        let last_obj = u64::from(self.reserved) + u64::from(live);
        let touched = if live == 0 {
            0
        } else {
            let last = (last_obj - 1).min(u64::from(self.num_obj) - 1) as u32;
            self.chunk_of(last) + 1
        };
        let extra = touched.saturating_sub(reserved_chunks);
        self.init_pages() + u64::from(extra) * (TABLE_CHUNK_SIZE / ICM_PAGE_SIZE)
    }

    /// Pages mapped on demand when each of `live` objects sits in its own
    /// chunk outside the reserved ones.
    pub fn on_demand_pages_worst(&self, live: u32) -> u64 {
        let free_chunks = self.num_chunks().saturating_sub(self.reserved_chunks());
        self.init_pages() + u64::from(live.min(free_chunks)) * (TABLE_CHUNK_SIZE / ICM_PAGE_SIZE)
    }

    /// Pages of the whole table mapped once (page-aligned table bytes).
    pub fn whole_table_pages(&self) -> u64 {
        page_align(self.bytes()) / ICM_PAGE_SIZE
    }
}

/// Every table mlx4_core maps, with its ICM address, object size, count
/// and reserved objects (`core/main.c:mlx4_init_icm`,
/// `mlx4_init_cmpt_table`). `reserved.mtts` should already be cache-line
/// aligned ([`reserved_mtts_aligned`]); `reserved.eqs` is not used: the EQ
/// tables are wholly reserved.
///
/// Unlike mainline, the EQ tables (EQC, cMPT EQ) use the profile's EQ
/// count rather than `MLX4_MAX_EQ_NUM` (1024), so they stay inside the EQC
/// region; all of them are reserved, i.e. mapped at init, as in mainline.
/// MCG is wholly mapped at init as in mainline.
pub fn icm_tables(
    layout: &Layout,
    sizes: &EntrySizes,
    reserved: &Reserved,
) -> [IcmTableSpec; NUM_ICM_TABLES] {
    let num = |t: Table| 1u32 << layout.region(t).log_num;
    let base = |t: Table| layout.region(t).start;
    let cmpt = |table, kind: u64, num_obj, reserved| IcmTableSpec {
        table,
        virt: base(Table::Cmpt) + ((kind * u64::from(sizes.cmpt)) << CMPT_SHIFT),
        obj_size: sizes.cmpt,
        num_obj,
        reserved,
    };
    let plain = |table, t: Table, obj_size, reserved| IcmTableSpec {
        table,
        virt: base(t),
        obj_size,
        num_obj: num(t),
        reserved,
    };
    let (qps, srqs, cqs, eqs) = (
        num(Table::Qpc),
        num(Table::Srqc),
        num(Table::Cqc),
        num(Table::Eqc),
    );
    let log_rd_per_qp = layout.region(Table::Rdmarc).log_num - layout.region(Table::Qpc).log_num;
    [
        cmpt(IcmTable::CmptQp, 0, qps, reserved.qps),
        cmpt(IcmTable::CmptSrq, 1, srqs, reserved.srqs),
        cmpt(IcmTable::CmptCq, 2, cqs, reserved.cqs),
        cmpt(IcmTable::CmptEq, 3, eqs, eqs),
        plain(IcmTable::Eqc, Table::Eqc, sizes.eqc, eqs),
        plain(IcmTable::Mtt, Table::Mtt, sizes.mtt, reserved.mtts),
        plain(IcmTable::Dmpt, Table::Dmpt, sizes.dmpt, reserved.mpts),
        plain(IcmTable::Qpc, Table::Qpc, sizes.qpc, reserved.qps),
        plain(IcmTable::Auxc, Table::Auxc, sizes.auxc, reserved.qps),
        plain(IcmTable::Altc, Table::Altc, sizes.altc, reserved.qps),
        IcmTableSpec {
            // One object per QP: its block of 2^log_rd_per_qp entries.
            obj_size: sizes.rdmarc << log_rd_per_qp,
            num_obj: qps,
            ..plain(IcmTable::Rdmarc, Table::Rdmarc, 0, reserved.qps)
        },
        plain(IcmTable::Cqc, Table::Cqc, sizes.cqc, reserved.cqs),
        plain(IcmTable::Srqc, Table::Srqc, sizes.srqc, reserved.srqs),
        plain(IcmTable::Mcg, Table::Mcg, sizes.mcg, num(Table::Mcg)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::icm::profile::tests::{
        entry_sizes, requests, CX3_RESERVED, CX3_SIZES, DRIVER_PROFILE,
    };
    use crate::icm::profile::{check_request, make_layout};
    use proptest::prelude::*;

    fn driver_tables() -> [IcmTableSpec; NUM_ICM_TABLES] {
        let sizes = EntrySizes {
            mcg: 128,
            ..CX3_SIZES
        };
        let layout = make_layout(&sizes, &DRIVER_PROFILE, 1 << 36).unwrap();
        icm_tables(&layout, &sizes, &CX3_RESERVED)
    }

    #[test]
    fn driver_profile_passes_its_own_check() {
        assert_eq!(check_request(&DRIVER_PROFILE, &CX3_RESERVED, 7), Ok(()));
    }

    #[test]
    fn reserved_mtts_fill_cache_lines() {
        assert_eq!(reserved_mtts_aligned(1, 8, 64), 8);
        assert_eq!(reserved_mtts_aligned(8, 8, 64), 8);
        assert_eq!(reserved_mtts_aligned(9, 8, 64), 16);
        assert_eq!(reserved_mtts_aligned(1, 8, 1), 1);
    }

    #[test]
    fn mainline_eq_table_is_one_trimmed_chunk() {
        // mlx4_init_icm: 1024 EQs x 64 B, all reserved: 64 KiB at init.
        let eqc = IcmTableSpec {
            table: IcmTable::Eqc,
            virt: 0,
            obj_size: 64,
            num_obj: 1024,
            reserved: 1024,
        };
        assert_eq!((eqc.num_chunks(), eqc.reserved_chunks()), (1, 1));
        assert_eq!(eqc.init_pages(), 16);
        assert_eq!(eqc.on_demand_pages_dense(5), 16);
    }

    #[test]
    fn mainline_qpc_maps_chunks_of_1024_qps() {
        // 2^18 QPs x 256 B; 64 reserved QPs sit in chunk 0.
        let qpc = IcmTableSpec {
            table: IcmTable::Qpc,
            virt: 1 << 32,
            obj_size: 256,
            num_obj: 1 << 18,
            reserved: 64,
        };
        assert_eq!(qpc.objs_per_chunk(), 1024);
        assert_eq!((qpc.num_chunks(), qpc.reserved_chunks()), (256, 1));
        assert_eq!(qpc.chunk_of(1023), 0);
        assert_eq!(qpc.chunk_of(1024), 1);
        assert_eq!(qpc.chunk_of((1 << 18) + 1024), 1);
        assert_eq!(qpc.chunk_virt(3), (1 << 32) + 3 * TABLE_CHUNK_SIZE);
        assert_eq!(qpc.init_pages(), 64);
        assert_eq!(qpc.on_demand_pages_dense(960), 64);
        assert_eq!(qpc.on_demand_pages_dense(961), 128);
        assert_eq!(qpc.on_demand_pages_worst(3), 4 * 64);
    }

    #[test]
    fn driver_profile_tables_are_each_below_one_chunk_and_mapped_whole_by_mainline_rules() {
        for t in driver_tables() {
            assert!(t.bytes() <= TABLE_CHUNK_SIZE, "{t:?}");
            assert!(t.reserved >= 1);
            assert_eq!(t.init_pages(), t.whole_table_pages(), "{t:?}");
            assert_eq!(
                t.on_demand_pages_worst(u32::MAX),
                t.whole_table_pages(),
                "{t:?}"
            );
        }
    }

    #[test]
    fn driver_profile_needs_under_one_mib() {
        let pages: u64 = driver_tables().iter().map(|t| t.whole_table_pages()).sum();
        assert!(pages * ICM_PAGE_SIZE < 1 << 20, "{pages} pages");
        // QPC 16, AUXC 4, ALTC 4, RDMARC 2, CQC 4, SRQC 1, EQC 2, dMPT 16, MTT 32,
        // MCG 1, cMPT QP 4, SRQ 1, CQ 4, EQ 2: 372 KiB.
        assert_eq!(pages, 93);
    }

    #[test]
    fn cmpt_sub_tables_sit_at_type_strides() {
        let t = driver_tables();
        let base = t[0].virt;
        for (kind, spec) in t[..4].iter().enumerate() {
            assert_eq!(spec.virt, base + (kind as u64) * (64 << 24));
        }
    }

    proptest! {
        #[test]
        fn tables_stay_inside_their_regions(
            sizes in entry_sizes(),
            request in requests(),
        ) {
            let layout = make_layout(&sizes, &request, u64::MAX).unwrap();
            let reserved = Reserved { qps: 1, srqs: 1, cqs: 1, eqs: 1, mpts: 1, mtts: 1 };
            for t in icm_tables(&layout, &sizes, &reserved) {
                let region = layout.regions.iter().find(|r| r.start <= t.virt && t.virt < r.end());
                let region = region.unwrap();
                prop_assert!(t.virt + t.whole_table_pages() * ICM_PAGE_SIZE <= region.end(), "{:?}", t);
            }
        }

        #[test]
        fn page_counts_are_ordered(
            log_obj in 0u32..=12,
            log_num in 0u32..=22,
            reserved_frac in 0u32..=100,
            live in 0u32..100_000,
        ) {
            let num_obj = 1u32 << log_num;
            let t = IcmTableSpec {
                table: IcmTable::Qpc,
                virt: 0,
                obj_size: 1 << log_obj,
                num_obj,
                reserved: ((u64::from(num_obj) * u64::from(reserved_frac)) / 100) as u32,
            };
            let init = t.init_pages();
            let dense = t.on_demand_pages_dense(live);
            let worst = t.on_demand_pages_worst(live);
            prop_assert_eq!(t.on_demand_pages_dense(0), init);
            prop_assert!(init <= t.whole_table_pages());
            prop_assert!(init <= dense && dense <= worst);
            prop_assert!(t.chunk_of(live) < t.num_chunks());
            // Whole chunks except possibly a trimmed last one.
            prop_assert!(worst <= t.whole_table_pages() || t.bytes() < TABLE_CHUNK_SIZE);
        }
    }
}
