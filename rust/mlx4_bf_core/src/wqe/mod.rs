// SPDX-License-Identifier: GPL-2.0

//! mlx4 send WQEs: validation of what user space hands in, the BlueFlame
//! decision, the stamps only the kernel may set, and a builder that lays out
//! WQEs the way libmlx4 does (used by the tools and the tests).
//!
//! A WQE is big-endian and made of 16-byte units:
//!
//! ```text
//! ctrl     owner_opcode | bf_qpn (vlan_tag, ins_vlan, fence_size) | srcrb_flags | imm
//! raddr    raddr (64) | rkey | reserved                  RDMA and atomics
//! atomic   swap_add (64) | compare (64)                  atomics only
//! inline   byte_count | 1 << 31, then data; never crosses 64 bytes (repeats)
//! gather   byte_count | lkey | addr (64)                 doorbell path only
//! ```
//!
//! An atomic (compare-and-swap, fetch-and-add; RC only) is all four: its one
//! 8-byte data segment is where the remote's old value lands.
//!
//! A UD QP's SEND has the datagram segment after its control segment: the
//! address vector (its first dword `port << 24 | pd`), the destination QPN
//! and Q_Key, 48 bytes; then the data as any SEND's.

use crate::abi::{POST_F_FORCE_DOORBELL, POST_F_REQUIRE_BF};
use crate::reject::Reject;

pub const OPCODE_NOP: u32 = 0x00;
pub const OPCODE_RDMA_WRITE: u32 = 0x08;
pub const OPCODE_RDMA_WRITE_IMM: u32 = 0x09;
pub const OPCODE_SEND: u32 = 0x0a;
pub const OPCODE_SEND_IMM: u32 = 0x0b;
pub const OPCODE_RDMA_READ: u32 = 0x10;
pub const OPCODE_ATOMIC_CS: u32 = 0x11;
pub const OPCODE_ATOMIC_FA: u32 = 0x12;
const OPCODE_MASK: u32 = 0x1f;

/// Owner bit of `owner_opcode`: flips each time the send queue wraps.
pub const CTRL_OWNER: u32 = 1 << 31;
/// `fence_size`: WQE size in 16-byte units in the low 6 bits, fence in bit 6.
const CTRL_SIZE_MASK: u32 = 0x3f;
pub const CTRL_FENCE: u32 = 1 << 6;

pub const INLINE_SEG: u32 = 1 << 31;
/// An inline segment never crosses this boundary (`MLX4_INLINE_ALIGN`).
pub const INLINE_ALIGN: usize = 64;
pub const CTRL_LEN: usize = 16;
pub const RADDR_LEN: usize = 16;
pub const ATOMIC_LEN: usize = 16;
/// What an atomic reads and returns: one 64-bit operand.
pub const ATOMIC_OPERAND_LEN: u32 = 8;
pub const GATHER_LEN: usize = 16;
/// `struct mlx4_wqe_datagram_seg`: the address vector (32 bytes), the
/// destination QPN and Q_Key, the VLAN and MAC (RoCE).
pub const DATAGRAM_LEN: usize = 48;
/// The 6-bit size field caps a WQE at 63 units.
pub const MAX_WQE_LEN: usize = 63 * 16;

/// BlueFlame bursts are whole 64-byte chunks.
pub const BF_CHUNK: usize = 64;

// Inlined, and byte by byte rather than through `copy_from_slice`, which
// the kernel build turns into a call of memcpy: validation and stamping use
// them on every post.
#[inline(always)]
pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    let w = &b[at..at + 4];
    u32::from_be_bytes([w[0], w[1], w[2], w[3]])
}

/// Are the bytes of `b` from `from` on zero? For a WQE's inline padding
/// (`from` in the last 16 of at least 16 bytes) one 128-bit load, not a
/// loop over up to 15 bytes; a byte loop otherwise.
#[inline(always)]
fn zero_from(b: &[u8], from: usize) -> bool {
    // Bytes of the last 16 before `from`: 16 means nothing to check.
    let skip = 16usize.checked_sub(b.len().saturating_sub(from));
    match (b.last_chunk::<16>(), skip) {
        (Some(tail), Some(skip)) => skip >= 16 || u128::from_le_bytes(*tail) >> (8 * skip) == 0,
        _ => b
            .get(from..)
            .is_none_or(|rest| rest.iter().all(|&x| x == 0)),
    }
}

#[inline(always)]
pub(crate) fn put_be32(b: &mut [u8], at: usize, v: u32) {
    let [b0, b1, b2, b3] = v.to_be_bytes();
    let w = &mut b[at..at + 4];
    w[0] = b0;
    w[1] = b1;
    w[2] = b2;
    w[3] = b3;
}

fn has_raddr(opcode: u32) -> bool {
    matches!(
        opcode,
        OPCODE_RDMA_WRITE | OPCODE_RDMA_WRITE_IMM | OPCODE_RDMA_READ
    ) || is_atomic(opcode)
}

#[inline]
pub const fn is_atomic(opcode: u32) -> bool {
    matches!(opcode, OPCODE_ATOMIC_CS | OPCODE_ATOMIC_FA)
}

/// Do the WQE's data segments say where data lands (an RDMA read's
/// scatter list, an atomic's old value) rather than what is sent?
#[inline]
pub const fn lands(opcode: u32) -> bool {
    opcode == OPCODE_RDMA_READ || is_atomic(opcode)
}

/// The QP a WQE is for, as far as its layout goes: a connected one (RC, UC)
/// or a UD QP of PD `pd`, whose WQEs carry a datagram segment whose
/// address vector must name that PD (as the adapter's check of an address
/// handle against its QP's PD).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Connected,
    Datagram { pd: u32 },
}

/// What validation learnt about a well-formed WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WqeInfo {
    /// Size in 16-byte units (equals the ctrl segment's size field).
    pub size16: u32,
    pub opcode: u32,
    /// Inline payload bytes, summed over all inline segments.
    pub inline_bytes: u32,
    /// Number of gather segments (0: inline-only, BlueFlame-capable).
    pub gather_segs: u32,
}

/// Checks a WQE handed in by user space. `max_len` is the device's largest
/// doorbell WQE. Bits the kernel stamps (owner, WQE counter, QPN) must be 0,
/// and so must the padding after inline data.
#[inline(always)]
pub fn validate(wqe: &[u8], max_len: usize) -> Result<WqeInfo, Reject> {
    let (info, padding) = check(wqe, max_len, Transport::Connected)?;
    match padding {
        Some(from) if !zero_from(wqe, from) => Err(Reject::Inline),
        _ => Ok(info),
    }
}

/// Owner bit and WQE counter (`head & 0xffff` in bits 8..23): a send queue's
/// owner stamps them.
const CTRL_QUEUE_BITS: u32 = CTRL_OWNER | 0xffff << 8;

/// The QP a queued WQE names: the number in bits 31..8 of its control
/// segment's second dword, where libmlx4 stamps it for BlueFlame
/// (`bf_qpn`). `Reject::Length` if there is no control segment,
/// `Reject::Ctrl` if it names none.
pub fn named_qpn(wqe: &[u8]) -> Result<u32, Reject> {
    if wqe.len() < CTRL_LEN {
        return Err(Reject::Length);
    }
    match be32(wqe, 4) >> 8 {
        0 => Err(Reject::Ctrl),
        qpn => Ok(qpn),
    }
}

/// Checks a WQE that user space built in a send queue of its own (a QP of
/// the RDMA provider, as libmlx4's BlueFlame branch hands it to the QP_POST
/// method) and makes it the one to write to QP `qpn`'s BlueFlame register:
/// the owner bit and WQE counter are user space's and stay; the QPN is the
/// kernel's (`bf_qpn`: none yet, or `qpn` already, as libmlx4 stamps it);
/// the padding after inline data, stale bytes of the queue that the adapter
/// ignores, is zeroed. Otherwise the rules of [`validate`], for the
/// QP's `transport`.
pub fn validate_queued(
    wqe: &mut [u8],
    qpn: u32,
    max_len: usize,
    transport: Transport,
) -> Result<WqeInfo, Reject> {
    if wqe.len() < CTRL_LEN {
        return Err(Reject::Length);
    }
    let owner_opcode = be32(wqe, 0);
    let fence_size = be32(wqe, 4);
    let named = fence_size >> 8;
    if named != 0 && named != qpn {
        return Err(Reject::Ctrl);
    }
    put_be32(wqe, 0, owner_opcode & !CTRL_QUEUE_BITS);
    put_be32(wqe, 4, fence_size & 0xff);
    let checked = check(wqe, max_len, transport);
    put_be32(wqe, 0, owner_opcode);
    let (info, padding) = checked.inspect_err(|_| put_be32(wqe, 4, fence_size))?;
    if let Some(from) = padding {
        wqe[from..].fill(0);
    }
    put_be32(wqe, 4, (fence_size & 0xff) | (qpn << 8));
    Ok(info)
}

/// The rules both validations share; returns where the padding after
/// inline data starts, if the WQE carries inline data.
#[inline(always)]
fn check(
    wqe: &[u8],
    max_len: usize,
    transport: Transport,
) -> Result<(WqeInfo, Option<usize>), Reject> {
    let len = wqe.len();
    if len == 0 || !len.is_multiple_of(16) || len > max_len.min(MAX_WQE_LEN) {
        return Err(Reject::Length);
    }
    let owner_opcode = be32(wqe, 0);
    if owner_opcode & !OPCODE_MASK != 0 {
        return Err(Reject::Ctrl);
    }
    let opcode = owner_opcode & OPCODE_MASK;
    if !matches!(
        opcode,
        OPCODE_NOP
            | OPCODE_RDMA_WRITE
            | OPCODE_RDMA_WRITE_IMM
            | OPCODE_SEND
            | OPCODE_SEND_IMM
            | OPCODE_RDMA_READ
            | OPCODE_ATOMIC_CS
            | OPCODE_ATOMIC_FA
    ) {
        return Err(Reject::Opcode);
    }
    let fence_size = be32(wqe, 4);
    if (fence_size & CTRL_SIZE_MASK) as usize * 16 != len {
        return Err(Reject::SizeField);
    }
    // The upper 24 bits carry the QPN on the BlueFlame path (the kernel's) or
    // the VLAN fields, which this driver does not offer.
    if fence_size & !(CTRL_SIZE_MASK | CTRL_FENCE) != 0 {
        return Err(Reject::Ctrl);
    }

    let mut pos = CTRL_LEN;
    if let Transport::Datagram { pd } = transport {
        // A datagram is a SEND (UD has no RDMA, no atomics).
        if !matches!(opcode, OPCODE_NOP | OPCODE_SEND | OPCODE_SEND_IMM) {
            return Err(Reject::Opcode);
        }
        if len < CTRL_LEN + DATAGRAM_LEN {
            return Err(Reject::Length);
        }
        if be32(wqe, pos) & 0xff_ffff != pd {
            return Err(Reject::Address);
        }
        pos += DATAGRAM_LEN;
    }
    if has_raddr(opcode) {
        if len < CTRL_LEN + RADDR_LEN {
            return Err(Reject::Length);
        }
        if be32(wqe, pos + 12) != 0 {
            return Err(Reject::Ctrl);
        }
        pos += RADDR_LEN;
    }
    if is_atomic(opcode) {
        // The atomic segment's operands are any values; then exactly one
        // data segment of the operand's size.
        pos += ATOMIC_LEN;
        if len < pos + GATHER_LEN {
            return Err(Reject::Length);
        }
        if be32(wqe, pos) & INLINE_SEG != 0 {
            return Err(Reject::Inline);
        }
        if len != pos + GATHER_LEN || be32(wqe, pos) != ATOMIC_OPERAND_LEN {
            return Err(Reject::Gather);
        }
    }

    let mut info = WqeInfo {
        size16: (len / 16) as u32,
        opcode,
        inline_bytes: 0,
        gather_segs: 0,
    };
    let mut padding = None;
    if pos < len && be32(wqe, pos) & INLINE_SEG != 0 {
        // An RDMA read's data segments say where the data lands: nothing to
        // carry inline.
        if lands(opcode) {
            return Err(Reject::Inline);
        }
        // A run of inline segments, back to back, each but the last ending
        // on a 16-byte boundary (libmlx4 starts a segment only at a 64-byte
        // one; the adapter reads each segment padded to 16 bytes), then the
        // last one's padding to the WQE's end.
        loop {
            if pos + 4 > len || be32(wqe, pos) & INLINE_SEG == 0 {
                return Err(Reject::Inline);
            }
            let count = (be32(wqe, pos) & !INLINE_SEG) as usize;
            let end = pos + 4 + count;
            if count == 0 || pos % INLINE_ALIGN + 4 + count > INLINE_ALIGN || end > len {
                return Err(Reject::Inline);
            }
            info.inline_bytes += count as u32;
            if end.next_multiple_of(16) == len {
                padding = Some(end);
                break;
            }
            if !end.is_multiple_of(16) {
                return Err(Reject::Inline);
            }
            pos = end;
        }
    } else {
        // Gather segments only, each 16 bytes.
        while pos < len {
            if be32(wqe, pos) & INLINE_SEG != 0 {
                return Err(Reject::Inline);
            }
            info.gather_segs += 1;
            pos += GATHER_LEN;
        }
    }
    Ok((info, padding))
}

/// The way a WQE reaches the adapter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    BlueFlame,
    Doorbell,
}

/// Does a WQE fit one BlueFlame buffer? The whole buffer is usable:
/// `size <= bf_buf_size / 16` (the classic `<` lost 241..256-byte WQEs,
/// i.e. RDMA-write payloads of 193..208 bytes).
#[inline]
pub fn fits_blueflame(info: &WqeInfo, bf_buf_size: u32) -> bool {
    info.gather_segs == 0 && info.size16 <= bf_buf_size / 16
}

/// Chooses the path for a valid WQE under the caller's `flags`.
#[inline]
pub fn choose_path(info: &WqeInfo, flags: u32, bf_buf_size: u32) -> Result<Path, Reject> {
    let fits = fits_blueflame(info, bf_buf_size);
    if flags & POST_F_FORCE_DOORBELL != 0 {
        Ok(Path::Doorbell)
    } else if fits {
        Ok(Path::BlueFlame)
    } else if flags & POST_F_REQUIRE_BF != 0 {
        Err(if info.gather_segs != 0 {
            Reject::Gather
        } else {
            Reject::Length
        })
    } else {
        Ok(Path::Doorbell)
    }
}

/// Bytes a BlueFlame post writes: the WQE padded to 64 bytes.
#[inline]
pub fn bf_burst_len(wqe_len: usize) -> usize {
    wqe_len.next_multiple_of(BF_CHUNK)
}

/// Owner bit for send-queue index `head` of a queue of `entries` (a power of
/// two): set on every other pass (`ring.rs`).
#[inline]
pub fn owner_bit(head: u32, entries: u32) -> u32 {
    if crate::ring::odd_pass(head, entries) {
        CTRL_OWNER
    } else {
        0
    }
}

/// Stamps what only the kernel may set before a BlueFlame post: owner bit,
/// WQE counter (`head & 0xffff` in bits 8..23 of `owner_opcode`) and
/// `bf_qpn` (`qpn << 8`), as libmlx4's BlueFlame path does.
#[inline]
pub fn stamp_blueflame(wqe: &mut [u8], qpn: u32, head: u32, entries: u32) {
    let owner_opcode = be32(wqe, 0) | owner_bit(head, entries) | ((head & 0xffff) << 8);
    put_be32(wqe, 0, owner_opcode);
    put_be32(wqe, 4, be32(wqe, 4) | (qpn << 8));
}

/// Stamps the owner bit before a doorbell post.
#[inline]
pub fn stamp_doorbell(wqe: &mut [u8], head: u32, entries: u32) {
    put_be32(wqe, 0, be32(wqe, 0) | owner_bit(head, entries));
}

/// The WQE counter a stamped WQE carries (bits 8..23 of `owner_opcode`).
#[inline]
pub fn counter(wqe: &[u8]) -> u32 {
    (be32(wqe, 0) >> 8) & 0xffff
}

/// The value of the send doorbell register (a big-endian dword) for `qpn`.
#[inline]
pub fn doorbell_value(qpn: u32) -> u32 {
    qpn << 8
}

/// QPNs with bit 6 or 7 set collide with the ctrl segment's VLAN-insert flags
/// once shifted into `bf_qpn`; mlx4 reserves them for BlueFlame QPs.
pub fn qpn_is_bf_safe(qpn: u32) -> bool {
    qpn & 0xc0 == 0 && qpn < (1 << 24)
}

/// The first BlueFlame-safe QPN at or after `qpn` (wrapping in 24 bits).
pub fn next_bf_safe_qpn(qpn: u32) -> u32 {
    let mut q = qpn & 0xff_ffff;
    while !qpn_is_bf_safe(q) {
        q = (q + 1) & 0xff_ffff;
    }
    q
}

/// BlueFlame-safe QPNs per 256: those with bits 6 and 7 clear.
pub const BF_SAFE_PER_256: u32 = 64;

/// The `index`th BlueFlame-safe QPN from `base` (a multiple of 256): the
/// provider's QPNs numbered densely, for a bitmap of `index`es.
pub fn bf_safe_qpn(base: u32, index: u32) -> Option<u32> {
    let block = (index / BF_SAFE_PER_256).checked_mul(256)?;
    let qpn = base
        .checked_add(block)?
        .checked_add(index % BF_SAFE_PER_256)?;
    (base.is_multiple_of(256) && qpn < (1 << 24)).then_some(qpn)
}

/// The inverse of [`bf_safe_qpn`]: the index of `qpn` above `base`, if it
/// is a BlueFlame-safe QPN there.
pub fn bf_safe_index(base: u32, qpn: u32) -> Option<u32> {
    let off = qpn.checked_sub(base)?;
    (base.is_multiple_of(256) && qpn_is_bf_safe(qpn))
        .then_some(off / 256 * BF_SAFE_PER_256 + off % 256)
}

/// BlueFlame-safe QPNs in `base..limit` (`base` a multiple of 256).
pub fn bf_safe_count(base: u32, limit: u32) -> u32 {
    let span = limit.saturating_sub(base);
    span / 256 * BF_SAFE_PER_256 + (span % 256).min(BF_SAFE_PER_256)
}

#[cfg(test)]
mod atomic_tests;
#[cfg(test)]
mod datagram_tests;
#[cfg(test)]
mod tests {
    use super::*;
    use crate::wqe_build::{build_gather, build_inline, gathers_with_lkey, inline_size16};

    const BF_BUF: u32 = 256;

    #[test]
    fn zero_from_agrees_with_a_byte_loop() {
        for len in 0..=48usize {
            for from in 0..=len {
                for hot in 0..len {
                    let mut b = [0u8; 48];
                    b[hot] = 0x80;
                    let b = &b[..len];
                    let naive = b[from..].iter().all(|&x| x == 0);
                    assert_eq!(zero_from(b, from), naive, "len {len} from {from} hot {hot}");
                }
            }
        }
    }

    #[test]
    fn a_queued_wqe_may_name_no_other_qp() {
        let mut buf = [0u8; MAX_WQE_LEN];
        let len = build_inline(&mut buf, OPCODE_SEND, None, &[7u8; 12]).unwrap();
        let fence_size = be32(&buf, 4);
        put_be32(&mut buf, 4, fence_size | 0x41 << 8);
        let mut theirs = buf;
        assert_eq!(
            validate_queued(&mut theirs[..len], 0x40, MAX_WQE_LEN, Transport::Connected),
            Err(Reject::Ctrl)
        );
        assert_eq!(theirs, buf, "a refused WQE is left as it was");
        assert!(validate_queued(&mut buf[..len], 0x41, MAX_WQE_LEN, Transport::Connected).is_ok());
        assert_eq!(
            validate_queued(&mut buf[..8], 0x41, MAX_WQE_LEN, Transport::Connected),
            Err(Reject::Length)
        );
    }

    #[test]
    fn a_queued_wqe_names_its_qp_by_bf_qpn() {
        let mut buf = [0u8; MAX_WQE_LEN];
        let len = build_inline(&mut buf, OPCODE_SEND, None, &[7u8; 12]).unwrap();
        assert_eq!(named_qpn(&buf[..len]), Err(Reject::Ctrl), "none named");
        let fence_size = be32(&buf, 4);
        put_be32(&mut buf, 4, fence_size | 0x0a_bcde << 8);
        assert_eq!(named_qpn(&buf[..len]), Ok(0x0a_bcde));
        assert_eq!(named_qpn(&buf[..7]), Err(Reject::Length));
    }

    #[test]
    fn gather_lkeys_are_found_and_inline_wqes_have_none() {
        let mut buf = [0u8; MAX_WQE_LEN];
        let len = build_gather(&mut buf, OPCODE_SEND, None, (0x1000, 8, 64)).unwrap();
        let info = validate(&buf[..len], MAX_WQE_LEN).unwrap();
        assert!(gathers_with_lkey(&buf[..len], &info, 8));
        assert!(!gathers_with_lkey(&buf[..len], &info, 9));
        let len = build_inline(&mut buf, OPCODE_SEND, None, &[8u8; 40]).unwrap();
        let info = validate(&buf[..len], MAX_WQE_LEN).unwrap();
        assert!(!gathers_with_lkey(&buf[..len], &info, 8));
    }

    fn rdma_write(payload: usize) -> ([u8; MAX_WQE_LEN], usize) {
        let mut buf = [0u8; MAX_WQE_LEN];
        let data: [u8; 512] = core::array::from_fn(|i| i as u8 | 1);
        let len = build_inline(
            &mut buf,
            OPCODE_RDMA_WRITE,
            Some((0x1000, 7)),
            &data[..payload],
        )
        .unwrap();
        (buf, len)
    }

    /// The size table of the design notes (RDMA write, inline payload).
    #[test]
    fn inline_sizes_match_the_table() {
        for (payload, size16) in [
            (1, 3),
            (28, 4),
            (29, 5),
            (88, 8),
            (89, 9),
            (148, 12),
            (149, 13),
            (192, 15),
            (193, 16),
            (208, 16),
            (209, 17),
        ] {
            assert_eq!(inline_size16(payload, true), size16, "payload {payload}");
            let (buf, len) = rdma_write(payload);
            assert_eq!(len, size16 * 16);
            let info = validate(&buf[..len], MAX_WQE_LEN).unwrap();
            assert_eq!(info.inline_bytes as usize, payload);
            assert_eq!(info.size16 as usize, size16);
        }
    }

    #[test]
    fn blueflame_up_to_208_bytes_then_doorbell() {
        for (payload, burst, path) in [
            (1, 64, Path::BlueFlame),
            (28, 64, Path::BlueFlame),
            (29, 128, Path::BlueFlame),
            (88, 128, Path::BlueFlame),
            (89, 192, Path::BlueFlame),
            (148, 192, Path::BlueFlame),
            (149, 256, Path::BlueFlame),
            (192, 256, Path::BlueFlame),
            (193, 256, Path::BlueFlame),
            (208, 256, Path::BlueFlame),
            (209, 320, Path::Doorbell),
        ] {
            let (buf, len) = rdma_write(payload);
            let info = validate(&buf[..len], MAX_WQE_LEN).unwrap();
            assert_eq!(choose_path(&info, 0, BF_BUF), Ok(path), "payload {payload}");
            assert_eq!(bf_burst_len(len), burst, "payload {payload}");
        }
    }

    #[test]
    fn inline_segments_split_at_64_bytes() {
        let (buf, len) = rdma_write(100);
        assert_eq!(len, 144);
        assert_eq!(be32(&buf, 32), INLINE_SEG | 28);
        assert_eq!(be32(&buf, 64), INLINE_SEG | 60);
        assert_eq!(be32(&buf, 128), INLINE_SEG | 12);
        assert_eq!(&buf[36..40], &[1, 1, 3, 3]);
    }

    #[test]
    fn flags_steer_the_path() {
        let (buf, len) = rdma_write(16);
        let info = validate(&buf[..len], MAX_WQE_LEN).unwrap();
        assert_eq!(
            choose_path(&info, POST_F_FORCE_DOORBELL, BF_BUF),
            Ok(Path::Doorbell)
        );
        let (buf, len) = rdma_write(209);
        let info = validate(&buf[..len], MAX_WQE_LEN).unwrap();
        assert_eq!(
            choose_path(&info, POST_F_REQUIRE_BF, BF_BUF),
            Err(Reject::Length)
        );
        let mut g = [0u8; 64];
        let len = build_gather(&mut g, OPCODE_SEND, None, (0x2000, 5, 64)).unwrap();
        let info = validate(&g[..len], MAX_WQE_LEN).unwrap();
        assert_eq!(info.gather_segs, 1);
        assert_eq!(choose_path(&info, 0, BF_BUF), Ok(Path::Doorbell));
        assert_eq!(
            choose_path(&info, POST_F_REQUIRE_BF, BF_BUF),
            Err(Reject::Gather)
        );
    }

    #[test]
    fn rejects_bad_lengths_and_ctrl_fields() {
        let (mut buf, len) = rdma_write(20);
        assert_eq!(validate(&buf[..len - 8], MAX_WQE_LEN), Err(Reject::Length));
        assert_eq!(validate(&buf[..0], MAX_WQE_LEN), Err(Reject::Length));
        assert_eq!(validate(&buf[..len], 32), Err(Reject::Length));
        assert_eq!(
            validate(&buf[..len + 16], MAX_WQE_LEN),
            Err(Reject::SizeField)
        );
        buf[3] = 0x1f;
        assert_eq!(validate(&buf[..len], MAX_WQE_LEN), Err(Reject::Opcode));
        buf[3] = OPCODE_RDMA_WRITE as u8;
        buf[0] = 0x80; // owner bit: the kernel's
        assert_eq!(validate(&buf[..len], MAX_WQE_LEN), Err(Reject::Ctrl));
        buf[0] = 0;
        buf[5] = 0x12; // a QPN: the kernel's
        assert_eq!(validate(&buf[..len], MAX_WQE_LEN), Err(Reject::Ctrl));
    }

    #[test]
    fn rejects_malformed_inline_segments() {
        // Crossing 64 bytes: first segment claims 29 bytes from offset 32.
        let (mut buf, len) = rdma_write(40);
        put_be32(&mut buf, 32, INLINE_SEG | 29);
        assert_eq!(validate(&buf[..len], MAX_WQE_LEN), Err(Reject::Inline));
        // Byte count running past the WQE.
        let (mut buf, len) = rdma_write(10);
        put_be32(&mut buf, 32, INLINE_SEG | 28);
        assert_eq!(validate(&buf[..len], MAX_WQE_LEN), Err(Reject::Inline));
        // Zero-length segment.
        let (mut buf, len) = rdma_write(10);
        put_be32(&mut buf, 32, INLINE_SEG);
        assert_eq!(validate(&buf[..len], MAX_WQE_LEN), Err(Reject::Inline));
        // Garbage in the padding.
        let (mut buf, len) = rdma_write(10);
        buf[len - 1] = 1;
        assert_eq!(validate(&buf[..len], MAX_WQE_LEN), Err(Reject::Inline));
        // An inline segment after a gather segment.
        let mut g = [0u8; 64];
        let len = build_gather(&mut g, OPCODE_SEND, None, (0x2000, 5, 64)).unwrap();
        put_be32(&mut g, 4, 3);
        put_be32(&mut g, 32, INLINE_SEG | 4);
        assert_eq!(validate(&g[..len + 16], MAX_WQE_LEN), Err(Reject::Inline));
    }

    #[test]
    fn stamps_owner_counter_and_qpn() {
        let (mut buf, len) = rdma_write(8);
        stamp_blueflame(&mut buf[..len], 0x123, 0x10005, 64);
        assert_eq!(be32(&buf, 0), OPCODE_RDMA_WRITE | 0x0005 << 8);
        assert_eq!(be32(&buf, 4), 0x123 << 8 | 3);
        let (mut buf, len) = rdma_write(8);
        stamp_blueflame(&mut buf[..len], 0x123, 64 + 1, 64);
        assert_eq!(be32(&buf, 0), CTRL_OWNER | OPCODE_RDMA_WRITE | 65 << 8);
        let (mut buf, len) = rdma_write(8);
        stamp_doorbell(&mut buf[..len], 64, 64);
        assert_eq!(be32(&buf, 0), CTRL_OWNER | OPCODE_RDMA_WRITE);
        assert_eq!(doorbell_value(0x123).to_be_bytes(), [0, 1, 0x23, 0]);
    }

    #[test]
    fn bf_qpns_avoid_the_vlan_flag_bits() {
        assert!(qpn_is_bf_safe(0x13f));
        assert!(!qpn_is_bf_safe(0x140));
        assert!(!qpn_is_bf_safe(0x80));
        assert_eq!(next_bf_safe_qpn(0x40), 0x100);
        assert_eq!(next_bf_safe_qpn(0x3f), 0x3f);
        assert_eq!(next_bf_safe_qpn(0xff_ffc0), 0);
    }

    #[test]
    fn dense_bf_safe_numbers_are_the_safe_qpns_in_order() {
        let base = 0x400;
        let safe = (base..0x1000).filter(|&q| qpn_is_bf_safe(q));
        assert_eq!(bf_safe_count(base, 0x1000) as usize, safe.clone().count());
        for (i, q) in safe.enumerate() {
            assert_eq!(bf_safe_qpn(base, i as u32), Some(q));
            assert_eq!(bf_safe_index(base, q), Some(i as u32));
        }
        assert_eq!(bf_safe_index(base, 0x440), None);
        assert_eq!(bf_safe_index(base, 0x3ff), None);
        assert_eq!(bf_safe_qpn(0x401, 0), None);
        assert_eq!(bf_safe_qpn(base, u32::MAX), None);
        assert_eq!(bf_safe_count(base, 0x420), 0x20);
        assert_eq!(bf_safe_count(base, base), 0);
    }
}
