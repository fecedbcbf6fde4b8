//! Where things are: BAR layout, register offsets and the limits the model
//! advertises in QUERY_DEV_CAP (Documentation/mlx4-model.rst).

/// BAR0: command interface, ownership, reset block, diagnostic block, MSI-X.
pub const BAR0_SIZE: u64 = 1 << 20;
pub const HCR_BASE: u64 = 0x80680;
pub const HCR_SIZE: u64 = 0x1c;
pub const OWNER_OFF: u64 = 0x8069c;
pub const RESET_BASE: u64 = 0xf0000;
pub const RESET_SIZE: u64 = 0x400;
pub const RESET_SEM: u64 = 0x3fc;
pub const RESET_REG: u64 = 0x10;
/// Named by QUERY_FW: the catastrophic error buffer where a
/// ConnectX-3 has it (64 bytes, reads 0 while healthy) and the
/// clear-interrupt register (8 bytes, written only with INTx), the model's
/// choice of place.
pub const CATAS_OFF: u64 = 0x1f020;
pub const CATAS_SIZE: u64 = 0x40;
pub const CLR_INT_OFF: u64 = 0x1f000;
pub const CLR_INT_SIZE: u64 = 8;
pub const DIAG_BASE: u64 = 0xe0000;
/// Registers up to 0xff, the last WQE's bytes (0x100..0x4ff), then the
/// version 3 counters (0x500..0x58f), the version 4 ones (0x590..0x5c7)
/// the version 5 ones (0x5c8..0x5e7), the version 6 ones (0x5e8..0x5ff),
/// the version 7 ones (0x600..0x617), the version 8 ones (0x618..0x627),
/// the version 9 one (0x628..0x62f), the version 10 ones (0x630..0x657),
/// the version 11 ones (0x658..0x66f), the version 13 ones
/// (0x670..0x687), the version 14 ones (0x688..0x6af) and the version 15
/// ones (0x6b0..0x6c7).
pub const DIAG_SIZE: u64 = 0x6c8;

/// MSI-X table and PBA: where a real ConnectX-3 has them (lspci: table at
/// 0x7c000, PBA at 0x7d000), clear of every contract register. QEMU emulates
/// both, so accesses there never reach the model.
pub const MSIX_TABLE_OFF: u64 = 0x7c000;
pub const MSIX_PBA_OFF: u64 = 0x7d000;
pub const MSIX_VECTORS: usize = 8;

/// BAR2: UAR pages, then their BlueFlame pages.
pub const PAGE_SIZE: u64 = 4096;
pub const UAR_SEND_DB: u64 = 0x14;
pub const UAR_CQ_DB: u64 = 0x20;
pub const UAR_CQ_DB_HI: u64 = 0x24;
pub const UAR_EQ_DB: u64 = 0x800;
pub const BF_REG_SIZE: u64 = 512;
pub const BF_HALF: u64 = 256;

/// Limits (logs as in QUERY_DEV_CAP).
pub const LOG_MAX_QP_SZ: u8 = 12;
pub const LOG_RSVD_QP: u8 = 6;
pub const LOG_MAX_QP: u8 = 16;
/// SRQ WQEs (QUERY_DEV_CAP 0x10, max_srq_sz): as many as a QP's.
pub const LOG_MAX_SRQ_SZ: u8 = 12;
pub const LOG_MAX_CQ_SZ: u8 = 12;
pub const LOG_MAX_CQ: u8 = 12;
pub const LOG_MAX_EQ: u8 = 3;
/// Not advertised by mlx4; the model's own bound on EQ size: mlx4_core's
/// completion EQs take 2^16..2^17 EQEs (`core/eq.c:mlx4_init_eq_table`).
pub const LOG_MAX_EQ_SZ: u8 = 22;
pub const MAX_SG_SQ: usize = 16;
pub const MAX_DESC_SZ_SQ: u16 = 1008;
/// Receive WQEs: at most 32 data segments, 512 bytes (the RQ stride).
pub const MAX_SG_RQ: u8 = 32;
pub const MAX_DESC_SZ_RQ: u16 = 512;
/// The longest message the model carries (2^20 bytes); a real
/// ConnectX-3 takes 2^31. A longer SEND completes with LOCAL_LENGTH_ERR.
pub const MAX_MESSAGE: u64 = 1 << 20;
pub const NUM_EQS: usize = 1 << LOG_MAX_EQ;
pub const FIRST_QPN: u32 = 1 << LOG_RSVD_QP;

/// Memory regions (`mr`): 65536 MTT entries of 8 bytes (entry 0
/// reserved), regions up to 2^32 bytes; the MPT count is INIT_HCA's.
pub const LOG_MAX_MTT: u8 = 16;
pub const NUM_MTTS: u32 = 1 << LOG_MAX_MTT;
pub const MTT_ENTRY_SIZE: u16 = 8;
pub const LOG_MAX_MR_SIZE: u8 = 32;
/// WRITE_MTT: entries per command (a 4 KiB mailbox less its 16-byte header).
pub const MAX_WRITE_MTT: u32 = 510;
/// 4 KiB: the ICM page, the smallest region page (MPT entity_size).
pub const MR_PAGE_SHIFT: u32 = 12;
/// Reserved MPTs (log): 256, as a ConnectX-3 (`ibv_devinfo` max_mr 524032
/// of 2^19); keeps MPT index 1 (key 0x100, MLX4_INVALID_LKEY) unused.
pub const LOG_RSVD_MPT: u8 = 8;
/// The reserved lkey (QUERY_DEV_CAP 0x98, be32): "addr is a DMA address"
/// on a QP whose context sets rlkey (`keys`).
pub const RESERVED_LKEY: u32 = 0x0000_0008;

/// Entry sizes (no 64-byte CQEs/EQEs are advertised).
pub const CQE_SIZE: u64 = 32;
pub const EQE_SIZE: u64 = 32;

/// Accepted `--num-uars`: BAR2 must be a power of two and QUERY_DEV_CAP's
/// UAR_SZ (`log2(num_uars * 4 KiB) - 20`) must not be negative.
pub const MIN_UARS: u32 = 256;
pub const MAX_UARS: u32 = 16384;
