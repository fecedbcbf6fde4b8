//! What the firmware reports: QUERY_FW, QUERY_DEV_CAP, QUERY_PORT,
//! MOD_STAT_CFG's port query and QUERY_ADAPTER, as a ConnectX-3 (MT4099)
//! with firmware 2.42.5000 answers them where mainline mlx4_core checks or
//! uses a value, and the model's own limits where its tables enforce them
//! (Documentation/mlx4-model.rst, "Firmware"). Offsets are those
//! `core/fw.c` reads.

use crate::bytes::{put_be16, put_be32, put_be64};
use crate::layout::*;

/// Firmware area the firmware asks for in QUERY_FW (4 KiB pages): the
/// model's choice (2 MiB), nonzero so that mlx4_core maps one.
pub const FW_PAGES: u16 = 0x200;
/// Catastrophic error buffer in BAR0: where and how large (dwords) a
/// ConnectX-3 reports it (mlx4_core's "Catastrophic error buffer at
/// 0x1f020, size 0x10, BAR 0").
pub const CATAS_SIZE_DW: u32 = 0x10;

/// Context entry sizes (QUERY_DEV_CAP 0x80..0x92): powers of two, as
/// `core/icm.c:mlx4_init_icm_table` divides by them; MTT entries are 8
/// bytes (`core/mr.c:mlx4_write_mtt_chunk`).
pub const RDMARC_ENTRY: u16 = 32;
pub const QPC_ENTRY: u16 = 256;
pub const AUXC_ENTRY: u16 = 64;
pub const ALTC_ENTRY: u16 = 64;
pub const EQC_ENTRY: u16 = 64;
pub const CQC_ENTRY: u16 = 64;
pub const SRQC_ENTRY: u16 = 64;
pub const CMPT_ENTRY: u16 = 64;
pub const DMPT_ENTRY: u16 = 64;
/// ICM the firmware can address (QUERY_DEV_CAP 0xa0): mlx4's default
/// profile needs about 4.3 GiB (cMPT alone 4 GiB).
pub const MAX_ICM: u64 = 1 << 36;
/// Reserved CQs (log): 128, as a ConnectX-3 (max_cq 65408 of 2^16).
pub const LOG_RSVD_CQ: u8 = 7;
/// BMME flags: RESERVED_LKEY (bit 10), so kernel PDs use the reserved
/// lkey instead of a PHYSICAL MPT each (`ib/main.c:mlx4_ib_query_device`).
pub const BMME_RESERVED_LKEY: u32 = 1 << 10;
/// Device flags (0x44): RC, UC, UD (bits 0..2) and ATOMIC (bit 18,
/// MLX4_DEV_CAP_FLAG_ATOMIC: mlx4_ib reports atomic_cap IB_ATOMIC_HCA,
/// `ib/main.c:mlx4_ib_query_device`, and the model executes CMP_SWAP and
/// FETCH_ADD, `datapath::atomic`); nothing mlx4 would switch on beyond
/// them (64-byte EQEs/CQEs, XRC, counters, IBoE, port sensing).
pub const DEV_FLAGS: u32 = 0x7 | FLAG_ATOMIC;
/// MLX4_DEV_CAP_FLAG_ATOMIC.
pub const FLAG_ATOMIC: u32 = 1 << 18;

/// The node and port GUIDs (Mellanox OUI 00:02:c9).
pub const NODE_GUID: u64 = 0x0002_c903_00b1_0000;
pub const PORT1_GUID: u64 = NODE_GUID + 1;
/// The board id QUERY_ADAPTER gives (a ConnectX-3 VPI adapter's PSID).
pub const BOARD_ID: &[u8; 16] = b"MT_1090120019\0\0\0";

/// QUERY_FW (`core/fw.c:mlx4_QUERY_FW`): 2.42.5000, command interface
/// revision 3, one outstanding command, the firmware area size, the
/// clear-interrupt register and the catastrophic error buffer in BAR0.
pub fn query_fw() -> [u8; 0x100] {
    let mut b = [0u8; 0x100];
    put_be16(&mut b, 0x00, FW_PAGES);
    put_be16(&mut b, 0x02, 2);
    put_be16(&mut b, 0x04, 5000);
    put_be16(&mut b, 0x06, 42);
    put_be16(&mut b, 0x0a, 3);
    put_be64(&mut b, 0x20, CLR_INT_OFF);
    b[0x28] = 0; // BAR 0 ((x >> 6) * 2)
    put_be64(&mut b, 0x30, CATAS_OFF);
    put_be32(&mut b, 0x38, CATAS_SIZE_DW);
    b[0x3c] = 0;
    b
}

/// QUERY_DEV_CAP (`core/fw.c:mlx4_QUERY_DEV_CAP`).
pub fn query_dev_cap(num_uars: u32) -> [u8; 0x100] {
    let mut b = [0u8; 0x100];
    b[0x10] = LOG_MAX_SRQ_SZ; // max_srq_sz: mlx4_ib's max_srq_wr + 1
    b[0x11] = LOG_MAX_QP_SZ;
    b[0x12] = LOG_RSVD_QP;
    b[0x13] = LOG_MAX_QP;
    b[0x14] = 0; // reserved SRQs (log, bits 7..4)
    b[0x15] = 16; // log max SRQs (printed only)
    b[0x19] = LOG_MAX_CQ_SZ;
    b[0x1a] = LOG_RSVD_CQ;
    b[0x1b] = LOG_MAX_CQ;
    b[0x1d] = 19; // log max MPTs (printed only)
    b[0x1e] = 0; // reserved EQs: max(4 x reserved UARs, 1) = 4
    b[0x1f] = LOG_MAX_EQ;
    b[0x20] = 0; // reserved MTT entries (log, bits 7..4): 1
    b[0x21] = LOG_MAX_MR_SIZE;
    b[0x22] = LOG_RSVD_MPT;
    b[0x23] = LOG_MAX_MTT;
    b[0x29] = 4; // 16 outstanding RDMA reads per QP, requester
    b[0x2b] = 4; // and responder
    b[0x35] = 15; // local CA ack delay
    b[0x37] = 1; // ports
    b[0x38] = 31; // log max message
    put_be32(&mut b, 0x44, DEV_FLAGS);
    b[0x48] = 1 << 4; // one reserved UAR
    b[0x49] = ((u64::from(num_uars) * PAGE_SIZE).trailing_zeros() - 20) as u8;
    b[0x4b] = 12; // log min page size
    b[0x4c] = 0x80; // BlueFlame
    b[0x4d] = BF_REG_SIZE.trailing_zeros() as u8;
    b[0x4e] = 3;
    b[0x51] = MAX_SG_SQ as u8;
    put_be16(&mut b, 0x52, MAX_DESC_SZ_SQ);
    b[0x55] = MAX_SG_RQ;
    put_be16(&mut b, 0x56, MAX_DESC_SZ_RQ);
    b[0x64] = 4 << 4; // reserved PDs
    b[0x65] = 15; // log max PDs
    for (off, size) in [
        (0x80, RDMARC_ENTRY),
        (0x82, QPC_ENTRY),
        (0x84, AUXC_ENTRY),
        (0x86, ALTC_ENTRY),
        (0x88, EQC_ENTRY),
        (0x8a, CQC_ENTRY),
        (0x8c, SRQC_ENTRY),
        (0x8e, CMPT_ENTRY),
        (0x90, MTT_ENTRY_SIZE),
        (0x92, DMPT_ENTRY),
    ] {
        put_be16(&mut b, off, size);
    }
    put_be32(&mut b, 0x94, BMME_RESERVED_LKEY);
    put_be32(&mut b, 0x98, RESERVED_LKEY);
    put_be64(&mut b, 0xa0, MAX_ICM);
    b
}

/// QUERY_PORT of port 1 (`core/fw.c:mlx4_QUERY_PORT`, command interface
/// revision 3): IB only, MTU 4096, widths 1x/4x, 128 GIDs and P_Keys,
/// VL0-7, 128 MACs and VLANs (`core/port.c` sizes its tables by them).
pub fn query_port() -> [u8; 0x100] {
    let mut b = [0u8; 0x100];
    b[0x00] = 0x01; // supported types: IB
    b[0x01] = 5; // IB MTU cap: 4096
    b[0x06] = 3; // width cap: 1x, 4x
    b[0x07] = 0x77; // log GIDs, log P_Keys
    b[0x0a] = 0x77; // log VLANs, log MACs
    b[0x0b] = 4; // VL cap: VL0-7
    b
}

/// MOD_STAT_CFG opmod 2 (`core/fw.c:mlx4_get_phys_port_id`): the port's
/// GUID, high dword at 0x14, low at 0x1c.
pub fn port_guid_query() -> [u8; 0x100] {
    let mut b = [0u8; 0x100];
    put_be32(&mut b, 0x14, (PORT1_GUID >> 32) as u32);
    put_be32(&mut b, 0x1c, PORT1_GUID as u32);
    b
}

/// QUERY_ADAPTER (`core/fw.c:mlx4_QUERY_ADAPTER`): INTA pin 0 at 0x10; the
/// board id in the VSD (0x20) at +0xd0, each dword byte-swapped as the
/// firmware hands it over (`get_board_id` swaps it back).
pub fn query_adapter() -> [u8; 0x100] {
    let mut b = [0u8; 0x100];
    for (i, chunk) in BOARD_ID.chunks_exact(4).enumerate() {
        let off = 0x20 + 0xd0 + 4 * i;
        for (j, c) in chunk.iter().rev().enumerate() {
            b[off + j] = *c;
        }
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::{be16, be32, be64};

    #[test]
    fn dev_cap_passes_mlx4_core_checks() {
        let b = query_dev_cap(1024);
        // core/main.c:mlx4_dev_cap: min page <= 4 KiB, ports <= 2, UAR
        // space <= BAR2 (UAR pages and as many BlueFlame pages).
        assert!(1u32 << b[0x4b] <= 4096);
        assert!(b[0x37] & 0xf <= 2);
        assert!((1u64 << (b[0x49] + 20)) <= 2 * 1024 * PAGE_SIZE);
        for off in (0x80..=0x92).step_by(2) {
            let s = be16(&b, off);
            assert!(s.is_power_of_two(), "entry size at {off:#x}");
        }
        assert_eq!(be16(&b, 0x90), 8);
        // Reserved EQs (4 per reserved UAR) leave at least 2 for MSI-X.
        let rsvd_eqs = (4 * u32::from(b[0x48] >> 4)).max(1 << (b[0x1e] & 0xf));
        assert!(rsvd_eqs + 2 <= 1 << (b[0x1f] & 0xf));
        assert_ne!(be32(&b, 0x98), 0x100);
        assert!(be64(&b, 0xa0) >= 1 << 33);
        assert_eq!(be32(&b, 0x40), 0, "no 64-byte EQEs/CQEs");
    }

    #[test]
    fn fw_and_adapter() {
        let b = query_fw();
        assert_eq!(be16(&b, 0), FW_PAGES);
        // fw_ver as mlx4_QUERY_FW assembles it: 2.42.5000.
        let v = be64(&b, 0);
        let ver = (v & 0xffff_0000_0000) | ((v & 0xffff_0000) >> 16) | ((v & 0xffff) << 16);
        assert_eq!(ver, (2 << 32) | (42 << 16) | 5000);
        assert_eq!((be64(&b, 0x30), be32(&b, 0x38)), (CATAS_OFF, CATAS_SIZE_DW));
        // get_board_id: swab32 of each dword read in CPU order.
        let a = query_adapter();
        let mut id = Vec::new();
        for i in 0..4 {
            let off = 0xf0 + 4 * i;
            let v = u32::from_le_bytes(a[off..off + 4].try_into().unwrap()).swap_bytes();
            id.extend_from_slice(&v.to_le_bytes());
        }
        assert_eq!(&id[..], BOARD_ID);
    }
}
