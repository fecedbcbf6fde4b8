// SPDX-License-Identifier: GPL-2.0

//! The WQEs of the RDMA writes the subcommands post, and how large a
//! payload fits: inline in a WQE (else gathered from registered memory), or
//! in a BlueFlame buffer (a SEND's too).

use mlx4_bf_core::{wqe, wqe_build};

/// How a payload travels in a WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Carry {
    /// In the WQE: BlueFlame-capable while the WQE fits a BlueFlame buffer.
    Inline,
    /// DMA-read by the adapter from a registered buffer named by a gather
    /// segment (lkey, address, length): doorbell path only.
    Gather,
}

/// How a `payload`-byte message goes: inline if its WQE (with a remote
/// address segment for an RDMA write: `raddr`) fits `max_wqe` bytes, else
/// gathered, as libmlx4 does.
pub fn carry(payload: usize, raddr: bool, max_wqe: usize) -> Carry {
    if wqe_build::inline_size16(payload, raddr) * 16 <= max_wqe {
        Carry::Inline
    } else {
        Carry::Gather
    }
}

/// The largest payload that still goes inline (see [`carry`]).
pub fn inline_max(raddr: bool, max_wqe: usize) -> usize {
    (0..=max_wqe)
        .take_while(|&p| carry(p, raddr, max_wqe) == Carry::Inline)
        .last()
        .unwrap_or(0)
}

/// Builds the WQE of an RDMA write (`opcode`: RDMA_WRITE or
/// RDMA_WRITE_IMM) of `payload` to `dst` = `(raddr, rkey)`: inline if it
/// fits `max_wqe` and `gather` is not asked for, else one gather segment
/// naming `src` = `(addr, lkey)`, where the same bytes must be. Returns the
/// WQE's length and how the payload went.
pub fn build_rdma_write(
    buf: &mut [u8; wqe::MAX_WQE_LEN],
    opcode: u32,
    payload: &[u8],
    src: (u64, u32),
    dst: (u64, u32),
    gather: bool,
    max_wqe: usize,
) -> Option<(usize, Carry)> {
    let raddr = Some(dst);
    if !gather && carry(payload.len(), true, max_wqe) == Carry::Inline {
        let len = wqe_build::build_inline(buf, opcode, raddr, payload)?;
        return Some((len, Carry::Inline));
    }
    let seg = (src.0, src.1, u32::try_from(payload.len()).ok()?);
    let len = wqe_build::build_gather(buf, opcode, raddr, seg)?;
    Some((len, Carry::Gather))
}

/// The bytes a write of `len` carries: `i as u8` at byte `i`.
pub fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| i as u8).collect()
}

/// Asks for a CQE when the WQE completes: `MLX4_WQE_CTRL_CQ_UPDATE` in the
/// control segment's `srcrb_flags` (be32 at +0x08), what libmlx4 sets for
/// `IBV_SEND_SIGNALED`.
pub fn set_signaled(wqe: &mut [u8]) {
    const CQ_UPDATE: u32 = 3 << 2;
    let flags = u32::from_be_bytes([wqe[8], wqe[9], wqe[10], wqe[11]]) | CQ_UPDATE;
    wqe[8..12].copy_from_slice(&flags.to_be_bytes());
}

/// Sets the immediate of a WQE's control segment (be32 at +0x0c), which an
/// RDMA_WRITE_IMM or SEND_IMM hands to the receiver's CQE.
pub fn set_imm(wqe: &mut [u8], imm: u32) {
    wqe[12..16].copy_from_slice(&imm.to_be_bytes());
}

/// The sizes of `sizes` that a write gathers, as a list for the report
/// (`None` if all go inline).
pub fn gathered_sizes(sizes: &[usize], carry_of: impl Fn(usize) -> Carry) -> Option<String> {
    let g: Vec<String> = sizes
        .iter()
        .filter(|&&s| carry_of(s) == Carry::Gather)
        .map(|s| s.to_string())
        .collect();
    (!g.is_empty()).then(|| g.join(" "))
}

/// The largest inline payload whose WQE (with a remote-address segment for
/// an RDMA write: `raddr`) fits `bf_len` bytes, a BlueFlame buffer.
pub fn bf_cutoff_within(bf_len: usize, raddr: bool) -> usize {
    (1..4096)
        .take_while(|&p| wqe_build::inline_size16(p, raddr) * 16 <= bf_len)
        .last()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signaled_wqe_asks_for_a_cqe_and_keeps_its_other_flags() {
        let mut w = [0u8; 16];
        w[8..12].copy_from_slice(&0x8000_0002u32.to_be_bytes());
        set_signaled(&mut w);
        assert_eq!(&w[8..12], &0x8000_000eu32.to_be_bytes());
        assert_eq!(&w[..8], &[0; 8]);
    }

    #[test]
    fn rdma_writes_go_inline_up_to_912_bytes_and_are_gathered_above() {
        // ctrl 16 + raddr 16, then inline segments of 28 and 60 bytes per
        // 64-byte block: 912 bytes make a 1008-byte WQE, the largest.
        assert_eq!(inline_max(true, wqe::MAX_WQE_LEN), 912);
        assert_eq!(carry(912, true, wqe::MAX_WQE_LEN), Carry::Inline);
        assert_eq!(carry(913, true, wqe::MAX_WQE_LEN), Carry::Gather);
        // A SEND has no remote address segment: 16 bytes more.
        assert_eq!(inline_max(false, wqe::MAX_WQE_LEN), 928);
        // A device with smaller WQEs gathers sooner.
        assert_eq!(inline_max(true, 256), 208);
    }

    #[test]
    fn an_rdma_write_names_the_target_and_gathers_from_the_source() {
        let mut buf = [0u8; wqe::MAX_WQE_LEN];
        let data: Vec<u8> = (0..2000).map(|i| i as u8).collect();
        let (src, dst) = ((0x7f00_0000_0000, 0x1234), (0x7f00_0000_1000, 0x1234));
        let m = wqe::MAX_WQE_LEN;
        let (len, how) = build_rdma_write(
            &mut buf,
            wqe::OPCODE_RDMA_WRITE,
            &data[..100],
            src,
            dst,
            false,
            m,
        )
        .unwrap();
        assert_eq!((len, how), (144, Carry::Inline));
        let info = wqe::validate(&buf[..len], m).unwrap();
        assert_eq!((info.inline_bytes, info.gather_segs), (100, 0));
        assert_eq!(buf[16..24], 0x7f00_0000_1000u64.to_be_bytes());
        assert_eq!(buf[24..28], 0x1234u32.to_be_bytes());

        let (len, how) = build_rdma_write(
            &mut buf,
            wqe::OPCODE_RDMA_WRITE_IMM,
            &data,
            src,
            dst,
            false,
            m,
        )
        .unwrap();
        assert_eq!((len, how), (48, Carry::Gather));
        let info = wqe::validate(&buf[..len], m).unwrap();
        assert_eq!(
            (info.opcode, info.gather_segs),
            (wqe::OPCODE_RDMA_WRITE_IMM, 1)
        );
        // byte_count, lkey, address of the source.
        assert_eq!(buf[32..36], 2000u32.to_be_bytes());
        assert_eq!(buf[36..40], 0x1234u32.to_be_bytes());
        assert_eq!(buf[40..48], 0x7f00_0000_0000u64.to_be_bytes());
        assert!(wqe_build::gathers_with_lkey(&buf[..len], &info, 0x1234));

        // Asked for, a small payload is gathered too.
        let (_, how) = build_rdma_write(
            &mut buf,
            wqe::OPCODE_RDMA_WRITE,
            &data[..4],
            src,
            dst,
            true,
            m,
        )
        .unwrap();
        assert_eq!(how, Carry::Gather);
    }

    #[test]
    fn the_immediate_is_big_endian_at_0x0c_and_passes_validation() {
        let mut buf = [0u8; wqe::MAX_WQE_LEN];
        let (len, _) = build_rdma_write(
            &mut buf,
            wqe::OPCODE_RDMA_WRITE_IMM,
            &[1, 2, 3],
            (0, 1),
            (0x1000, 1),
            false,
            wqe::MAX_WQE_LEN,
        )
        .unwrap();
        set_imm(&mut buf[..len], 0x0102_0304);
        assert_eq!(buf[12..16], [1, 2, 3, 4]);
        assert!(wqe::validate(&buf[..len], wqe::MAX_WQE_LEN).is_ok());
    }

    #[test]
    fn gathered_sizes_are_listed() {
        let c = |s| carry(s, true, wqe::MAX_WQE_LEN);
        assert_eq!(gathered_sizes(&[4, 912, 913, 1024], c).unwrap(), "913 1024");
        assert_eq!(gathered_sizes(&[4, 208], c), None);
    }

    #[test]
    fn bf_cutoff_is_208_for_256_byte_buffers() {
        assert_eq!(bf_cutoff_within(256, true), 208);
        // A SEND has no remote-address segment: 16 more bytes.
        assert_eq!(bf_cutoff_within(256, false), 224);
    }
}
