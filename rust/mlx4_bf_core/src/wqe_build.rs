// SPDX-License-Identifier: GPL-2.0

//! WQEs as user space builds them (libmlx4's way): what the helper posts,
//! what the tests feed `wqe::validate()`, and what the kernel ping posts
//! (the module's one builder of WQEs; QP_POST only checks and stamps them,
//! `wqe.rs`).

use crate::wqe::{
    be32, put_be32, WqeInfo, ATOMIC_LEN, ATOMIC_OPERAND_LEN, CTRL_LEN, DATAGRAM_LEN, GATHER_LEN,
    INLINE_ALIGN, INLINE_SEG, MAX_WQE_LEN, RADDR_LEN,
};

/// The send doorbell for `qpn` as the bytes the adapter must see, in order
/// (user space stores them as they are).
pub fn doorbell_bytes(qpn: u32) -> [u8; 4] {
    crate::wqe::doorbell_value(qpn).to_be_bytes()
}

/// Does one of the gather segments of a validated WQE carry `lkey`? They
/// are the last `info.gather_segs` 16-byte units; the lkey is at +4.
pub fn gathers_with_lkey(wqe: &[u8], info: &WqeInfo, lkey: u32) -> bool {
    let first = wqe.len() - info.gather_segs as usize * GATHER_LEN;
    wqe[first..]
        .chunks_exact(GATHER_LEN)
        .any(|seg| be32(seg, 4) == lkey)
}

/// WQE size, in 16-byte units, of an inline post of `payload` bytes
/// (with an RDMA-write remote-address segment if `raddr`).
pub fn inline_size16(payload: usize, raddr: bool) -> usize {
    inline_end(CTRL_LEN + if raddr { RADDR_LEN } else { 0 }, payload).div_ceil(16)
}

/// Where inline segments of `payload` bytes starting at `pos` end.
fn inline_end(mut pos: usize, payload: usize) -> usize {
    let mut left = payload;
    while left > 0 {
        let chunk = left.min(INLINE_ALIGN - pos % INLINE_ALIGN - 4);
        pos += 4 + chunk;
        left -= chunk;
    }
    pos
}

/// Writes `payload` as inline segments from `pos`, each ending before the
/// next 64-byte boundary (`set_data_inl()`).
fn put_inline(buf: &mut [u8], mut pos: usize, payload: &[u8]) {
    let mut rest = payload;
    while !rest.is_empty() {
        let chunk = rest.len().min(INLINE_ALIGN - pos % INLINE_ALIGN - 4);
        put_be32(buf, pos, INLINE_SEG | chunk as u32);
        buf[pos + 4..pos + 4 + chunk].copy_from_slice(&rest[..chunk]);
        pos += 4 + chunk;
        rest = &rest[chunk..];
    }
}

/// Clears the `len` bytes of a WQE in `buf` and writes its control segment
/// (`opcode`, size) and, for an RDMA write, the remote-address segment;
/// returns where the data segments start.
fn put_header(buf: &mut [u8], opcode: u32, len: usize, raddr: Option<(u64, u32)>) -> usize {
    buf[..len].fill(0);
    put_be32(buf, 0, opcode);
    put_be32(buf, 4, (len / 16) as u32);
    let mut pos = CTRL_LEN;
    if let Some((addr, rkey)) = raddr {
        buf[pos..pos + 8].copy_from_slice(&addr.to_be_bytes());
        put_be32(buf, pos + 8, rkey);
        pos += RADDR_LEN;
    }
    pos
}

/// Builds an inline WQE like libmlx4's `set_data_inl()`: segments are split at
/// every 64-byte boundary. `raddr` is `(remote address, rkey)` for RDMA write.
/// Returns the WQE length, or `None` if `buf` is too small.
pub fn build_inline(
    buf: &mut [u8],
    opcode: u32,
    raddr: Option<(u64, u32)>,
    payload: &[u8],
) -> Option<usize> {
    let len = inline_size16(payload.len(), raddr.is_some()) * 16;
    if buf.len() < len || len > MAX_WQE_LEN {
        return None;
    }
    let pos = put_header(buf, opcode, len, raddr);
    put_inline(buf, pos, payload);
    Some(len)
}

/// Builds a WQE whose payload is gathered by DMA (doorbell path only):
/// one data segment of `(addr, lkey, byte_count)`.
pub fn build_gather(
    buf: &mut [u8],
    opcode: u32,
    raddr: Option<(u64, u32)>,
    seg: (u64, u32, u32),
) -> Option<usize> {
    let len = CTRL_LEN + if raddr.is_some() { RADDR_LEN } else { 0 } + GATHER_LEN;
    if buf.len() < len {
        return None;
    }
    let pos = put_header(buf, opcode, len, raddr);
    put_be32(buf, pos, seg.2);
    put_be32(buf, pos + 4, seg.1);
    buf[pos + 8..pos + 16].copy_from_slice(&seg.0.to_be_bytes());
    Some(len)
}

/// An atomic's operands: what libmlx4's `set_atomic_seg()` writes.
#[derive(Clone, Copy, Debug)]
pub enum AtomicOp {
    /// Swap in `swap` where the remote operand equals `compare`.
    CompareSwap { compare: u64, swap: u64 },
    /// Add `add` to the remote operand.
    FetchAdd { add: u64 },
}

/// Builds an atomic WQE as libmlx4 does: control, remote address
/// `(raddr, rkey)`, atomic segment, and the one data segment `(addr, lkey)`
/// where the old value lands. Returns the WQE length (64), or `None` if
/// `buf` is too small.
pub fn build_atomic(
    buf: &mut [u8],
    op: AtomicOp,
    raddr: (u64, u32),
    result: (u64, u32),
) -> Option<usize> {
    let len = CTRL_LEN + RADDR_LEN + ATOMIC_LEN + GATHER_LEN;
    if buf.len() < len {
        return None;
    }
    let (opcode, swap_add, compare) = match op {
        AtomicOp::CompareSwap { compare, swap } => (crate::wqe::OPCODE_ATOMIC_CS, swap, compare),
        AtomicOp::FetchAdd { add } => (crate::wqe::OPCODE_ATOMIC_FA, add, 0),
    };
    let mut pos = put_header(buf, opcode, len, Some(raddr));
    buf[pos..pos + 8].copy_from_slice(&swap_add.to_be_bytes());
    buf[pos + 8..pos + 16].copy_from_slice(&compare.to_be_bytes());
    pos += ATOMIC_LEN;
    put_be32(buf, pos, ATOMIC_OPERAND_LEN);
    put_be32(buf, pos + 4, result.1);
    buf[pos + 8..pos + 16].copy_from_slice(&result.0.to_be_bytes());
    Some(len)
}

/// Where a UD SEND goes: what libmlx4's address handle holds (`struct
/// mlx4_av`: port and PD, the destination LID) and the work request's
/// destination QPN and Q_Key.
#[derive(Clone, Copy, Debug)]
pub struct Datagram {
    pub port: u8,
    pub pd: u32,
    pub dlid: u16,
    pub dqpn: u32,
    pub qkey: u32,
}

/// Builds a UD SEND with `payload` inline as libmlx4's `mlx4_post_send()`
/// does: control, the datagram segment (`set_datagram_seg()`), then the
/// inline segments from byte 64. Returns the WQE length, or `None` if `buf`
/// is too small.
pub fn build_datagram_inline(buf: &mut [u8], to: &Datagram, payload: &[u8]) -> Option<usize> {
    let data = CTRL_LEN + DATAGRAM_LEN;
    let len = inline_end(data, payload.len()).next_multiple_of(16);
    if buf.len() < len || len > MAX_WQE_LEN {
        return None;
    }
    put_header(buf, crate::wqe::OPCODE_SEND, len, None);
    put_be32(buf, CTRL_LEN, u32::from(to.port) << 24 | to.pd);
    buf[CTRL_LEN + 6..CTRL_LEN + 8].copy_from_slice(&to.dlid.to_be_bytes());
    put_be32(buf, CTRL_LEN + 32, to.dqpn);
    put_be32(buf, CTRL_LEN + 36, to.qkey);
    put_inline(buf, data, payload);
    Some(len)
}
