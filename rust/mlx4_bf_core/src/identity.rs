// SPDX-License-Identifier: GPL-2.0

//! What mlx4_ib shows of the adapter in sysfs (`hca_type`, `hw_rev`,
//! `board_id` of `drivers/infiniband/hw/mlx4/main.c`): the PCI device as
//! `MT<decimal id>`, the hardware revision NodeInfo reports (hex), and the
//! board id QUERY_ADAPTER's vendor-specific data carries
//! (`core/fw.c:get_board_id()`).

/// `MLX4_BOARD_ID_LEN`.
pub const BOARD_ID_LEN: usize = 64;
/// QUERY_ADAPTER's out mailbox: the VSD at 0x20 (`QUERY_ADAPTER_VSD_OFFSET`).
pub const QUERY_ADAPTER_VSD: usize = 0x20;
/// The VSD's two signature words and the two places a board id may be.
const VSD_SIG1: usize = 0x00;
const VSD_SIG2: usize = 0xde;
const VSD_MLX_BOARD_ID: usize = 0xd0;
const VSD_TS_BOARD_ID: usize = 0x20;
const VSD_SIGNATURE_TOPSPIN: u16 = 0x5ad;

/// The board id of QUERY_ADAPTER's out mailbox `out` (at least 0x100
/// bytes; a shorter one has none): a Topspin VSD's string, else the 16
/// bytes at 0xd0 with each 4-byte word byte-swapped back, as
/// `get_board_id()` reads them. NUL-padded.
pub fn board_id(out: &[u8]) -> [u8; BOARD_ID_LEN] {
    let mut id = [0u8; BOARD_ID_LEN];
    let Some(vsd) = out.get(QUERY_ADAPTER_VSD..) else {
        return id;
    };
    let be16 = |at: usize| {
        vsd.get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
    };
    if be16(VSD_SIG1) == Some(VSD_SIGNATURE_TOPSPIN)
        && be16(VSD_SIG2) == Some(VSD_SIGNATURE_TOPSPIN)
    {
        // strscpy(): up to the NUL, at most BOARD_ID_LEN - 1 bytes.
        let s = vsd.get(VSD_TS_BOARD_ID..).unwrap_or(&[]);
        let n = s
            .iter()
            .take(BOARD_ID_LEN - 1)
            .position(|&c| c == 0)
            .unwrap_or(s.len().min(BOARD_ID_LEN - 1));
        id[..n].copy_from_slice(&s[..n]);
        return id;
    }
    if let Some(words) = vsd.get(VSD_MLX_BOARD_ID..VSD_MLX_BOARD_ID + 16) {
        // The firmware swapped each word; swab32() of the CPU-order load
        // gives the bytes back in order on either endianness.
        for (i, d) in id[..16].iter_mut().enumerate() {
            *d = words[(i & !3) + 3 - (i & 3)];
        }
    }
    id
}

/// The board id as sysfs shows it: up to its first NUL.
pub fn board_id_str(id: &[u8; BOARD_ID_LEN]) -> &[u8] {
    let n = id.iter().position(|&c| c == 0).unwrap_or(BOARD_ID_LEN);
    &id[..n]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model's answer (tools/mlx4-model/src/firmware/caps.rs): the
    /// PSID at VSD + 0xd0, each word byte-swapped.
    fn model_mailbox(psid: &[u8; 16]) -> [u8; 0x100] {
        let mut b = [0u8; 0x100];
        for (i, w) in psid.chunks_exact(4).enumerate() {
            let at = QUERY_ADAPTER_VSD + VSD_MLX_BOARD_ID + 4 * i;
            b[at..at + 4].copy_from_slice(&[w[3], w[2], w[1], w[0]]);
        }
        b
    }

    #[test]
    fn a_mellanox_vsd_is_swapped_back() {
        let id = board_id(&model_mailbox(b"MT_1090120019\0\0\0"));
        assert_eq!(board_id_str(&id), b"MT_1090120019");
        assert!(id[16..].iter().all(|&c| c == 0));
    }

    #[test]
    fn a_topspin_vsd_is_a_string() {
        let mut b = [0u8; 0x100];
        let vsd = QUERY_ADAPTER_VSD;
        b[vsd..vsd + 2].copy_from_slice(&0x5adu16.to_be_bytes());
        // The second signature is the mailbox's last two bytes.
        b[vsd + 0xde..vsd + 0xe0].copy_from_slice(&0x5adu16.to_be_bytes());
        b[vsd + 0x20..vsd + 0x27].copy_from_slice(b"TS_1234");
        assert_eq!(board_id_str(&board_id(&b)), b"TS_1234");
    }

    #[test]
    fn a_short_mailbox_has_none() {
        assert_eq!(board_id_str(&board_id(&[0u8; 0x40])), b"");
    }
}
