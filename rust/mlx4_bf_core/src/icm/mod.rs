// SPDX-License-Identifier: GPL-2.0

//! ICM (InfiniHost context memory) rules for bringing the adapter up the
//! way mainline mlx4_core does: the table layout and SET_ICM_SIZE total
//! ([`profile`]), the INIT_HCA mailbox ([`init_hca`]), the page lists of
//! MAP_FA / MAP_ICM_AUX / MAP_ICM ([`map_cmd`]) and how many pages each
//! table needs ([`table_chunks`]). The driver shell allocates the DMA
//! memory and posts the commands; everything it must compute is here.
//!
//! Recommendation: map every table *whole*, once, after MAP_ICM_AUX and
//! before INIT_HCA, and never map or unmap ICM while the HCA runs. With the
//! driver's counts (a few hundred QPs, CQs and MPTs, up to 128 EQs, 2^14 MTT
//! entries) every table is smaller than one 256 KiB `MLX4_TABLE_CHUNK_SIZE`
//! chunk and holds firmware-reserved objects, so mainline's own rules
//! (`mlx4_init_icm_table()` maps each chunk holding reserved objects,
//! trimmed to the table's end) would map each of them whole at init anyway
//! and on-demand `mlx4_table_get()` would only count references: the
//! chunk machinery (refcounts, MAP_ICM on the QP/CQ/MPT creation paths,
//! UNMAP_ICM on release) buys nothing below 256 KiB per table. The total is
//! under 1 MiB (see the `driver_profile_*` tests). The cMPT table is the
//! exception to "whole": it spans 4 GiB of ICM addresses by hardware
//! definition, so map only its per-type sub-tables sized to the profile's
//! QP/SRQ/CQ/EQ counts ([`table_chunks::icm_tables`]), which is again what
//! mainline maps for such counts. The shell keeps one list of
//! (ICM address, length) to UNMAP_ICM at teardown with the page count it
//! mapped (mainline unmaps 64 pages per chunk even where it mapped fewer).

pub mod init_hca;
pub mod map_cmd;
pub mod profile;
pub mod table_chunks;

/// ICM is mapped in 4 KiB pages whatever the CPU page size
/// (`MLX4_ICM_PAGE_SHIFT`, `core/icm.h`). Mainline also uses `PAGE_SIZE`
/// as the smallest table (`mlx4_make_profile`): the same 4 KiB on x86.
pub const ICM_PAGE_SHIFT: u8 = 12;
/// Bytes of an ICM page (`MLX4_ICM_PAGE_SIZE`).
pub const ICM_PAGE_SIZE: u64 = 1 << ICM_PAGE_SHIFT;
