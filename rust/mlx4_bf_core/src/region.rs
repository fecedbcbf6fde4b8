// SPDX-License-Identifier: GPL-2.0

//! Memory regions: the rules a process's keys and addresses must pass before
//! a WQE naming them reaches the adapter, and the mlx4 formats that register
//! a region with it (an MPT entry through SW2HW_MPT, its page list through
//! WRITE_MTT; `drivers/net/ethernet/mellanox/mlx4/mr.c`).
//!
//! A key is mlx4's: the MPT "hardware index" rotated left by 8 bits. The
//! index carries the MPT slot in its low bits and a tag in its top byte, so
//! a key is `slot << 8 | tag` and goes stale when the slot is reused with
//! the next tag. lkey and rkey are the same key.

use crate::reject::Reject;

/// The access flags [`perm`] takes: `enum ib_access_flags`' low bits.
pub const ACCESS_LOCAL_WRITE: u32 = 1 << 0;
pub const ACCESS_REMOTE_WRITE: u32 = 1 << 1;
pub const ACCESS_REMOTE_READ: u32 = 1 << 2;
pub const ACCESS_ALL: u32 = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ;
use crate::wqe::{self, WqeInfo};

pub const PAGE_SHIFT: u32 = 12;
pub const PAGE_SIZE: u64 = 1 << PAGE_SHIFT;
/// Bytes of one MPT entry (`struct mlx4_mpt_entry`).
pub const MPT_ENTRY_LEN: usize = 64;
/// Bytes of one MTT entry.
pub const MTT_ENTRY_LEN: u64 = 8;

/// `MLX4_MPT_FLAG_*` and `MLX4_PERM_*` (`mlx4.h`, `device.h`).
const MPT_FLAG_SW_OWNS: u32 = 0xf << 28;
const MPT_FLAG_MIO: u32 = 1 << 17;
const MPT_FLAG_REGION: u32 = 1 << 8;
const MPT_FLAG_PHYSICAL: u32 = 1 << 9;
const PERM_LOCAL_READ: u32 = 1 << 10;
const PERM_LOCAL_WRITE: u32 = 1 << 11;
const PERM_REMOTE_READ: u32 = 1 << 12;
const PERM_REMOTE_WRITE: u32 = 1 << 13;
const PERM_ATOMIC: u32 = 1 << 14;
const PERM_BIND_MW: u32 = 1 << 15;
/// `MLX4_MPT_PD_FLAG_EN_INV`
const MPT_PD_FLAG_EN_INV: u32 = 3 << 24;
/// `MLX4_MTT_FLAG_PRESENT`
const MTT_FLAG_PRESENT: u64 = 1;

/// mlx4's `key_to_hw_index()`.
pub const fn key_to_hw_index(key: u32) -> u32 {
    key.rotate_left(24)
}

/// mlx4's `hw_index_to_key()`.
pub const fn hw_index_to_key(index: u32) -> u32 {
    index.rotate_left(8)
}

/// The key of MPT `slot` (< 2^24) used for the `tag`-th time.
pub const fn key(slot: u32, tag: u8) -> u32 {
    hw_index_to_key((tag as u32) << 24 | slot)
}

/// The tag a key carries: `key()`'s `tag`, its low byte.
pub const fn key_tag(key: u32) -> u8 {
    key as u8
}

/// The MPT slot a key names.
pub const fn key_slot(key: u32) -> u32 {
    key >> 8
}

/// Pages of `PAGE_SIZE` that `[start, start + len)` touches; `None` for an
/// empty or wrapping range.
pub fn pages_spanned(start: u64, len: u64) -> Option<u64> {
    let last = start.checked_add(len.checked_sub(1)?)?;
    Some((last >> PAGE_SHIFT) - (start >> PAGE_SHIFT) + 1)
}

/// Does `[addr, addr + len)` lie inside `[start, start + size)`? Neither
/// may wrap; an empty range must start inside or at the end.
pub fn contains(start: u64, size: u64, addr: u64, len: u64) -> bool {
    let (Some(end), Some(last)) = (start.checked_add(size), addr.checked_add(len)) else {
        return false;
    };
    addr >= start && last <= end
}

/// The MPT permission bits of the ABI's access flags: local read always,
/// remote write only with local write (as `ib_check_mr_access()`); remote
/// read needs nothing else.
pub fn perm(access: u32) -> Option<u32> {
    if access & !ACCESS_ALL != 0 {
        return None;
    }
    if access & ACCESS_REMOTE_WRITE != 0 && access & ACCESS_LOCAL_WRITE == 0 {
        return None;
    }
    let mut perm = PERM_LOCAL_READ;
    if access & ACCESS_LOCAL_WRITE != 0 {
        perm |= PERM_LOCAL_WRITE;
    }
    if access & ACCESS_REMOTE_WRITE != 0 {
        perm |= PERM_REMOTE_WRITE;
    }
    if access & ACCESS_REMOTE_READ != 0 {
        perm |= PERM_REMOTE_READ;
    }
    Some(perm)
}

/// The MPT permission bits of IB access flags (`enum ib_access_flags`),
/// as mlx4_ib's `convert_access()` (drivers/infiniband/hw/mlx4/mr.c) makes
/// them for `mlx4_ib_reg_user_mr()`: local read always, each flag its bit,
/// the rest ignored. Refusing a combination (remote write without local
/// write, `ib_check_mr_access()`) is the RDMA core's, before the driver.
pub const fn ib_access_perm(access: u32) -> u32 {
    let mut perm = PERM_LOCAL_READ;
    if access & crate::verbs::access::REMOTE_ATOMIC != 0 {
        perm |= PERM_ATOMIC;
    }
    if access & crate::verbs::access::REMOTE_WRITE != 0 {
        perm |= PERM_REMOTE_WRITE;
    }
    if access & crate::verbs::access::REMOTE_READ != 0 {
        perm |= PERM_REMOTE_READ;
    }
    if access & crate::verbs::access::LOCAL_WRITE != 0 {
        perm |= PERM_LOCAL_WRITE;
    }
    if access & crate::verbs::access::MW_BIND != 0 {
        perm |= PERM_BIND_MW;
    }
    perm
}

/// What the reserved lkey allows the kernel's own WQEs: DMA addresses it
/// mapped, read and written locally.
pub const KERNEL_DMA_PERM: u32 = PERM_LOCAL_READ | PERM_LOCAL_WRITE;

/// Does an MPT with `perm()` bits let the adapter write into it for its
/// owner (a receive, an RDMA read's data)?
pub const fn local_writable(perm: u32) -> bool {
    perm & PERM_LOCAL_WRITE != 0
}

/// The permission the remote region of a WQE with `opcode` needs (none for
/// one without a remote address).
pub const fn remote_perm_needed(opcode: u32) -> u32 {
    match opcode {
        wqe::OPCODE_RDMA_WRITE | wqe::OPCODE_RDMA_WRITE_IMM => PERM_REMOTE_WRITE,
        wqe::OPCODE_RDMA_READ => PERM_REMOTE_READ,
        wqe::OPCODE_ATOMIC_CS | wqe::OPCODE_ATOMIC_FA => PERM_ATOMIC,
        _ => 0,
    }
}

/// One region as the MPT describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mpt {
    pub key: u32,
    pub pd: u32,
    /// User virtual address of the first byte.
    pub start: u64,
    pub len: u64,
    /// `perm()` bits.
    pub perm: u32,
    /// Index of its first MTT entry.
    pub mtt: u32,
    /// Bytes of each page its MTT entries name, as a shift (`entity_size`;
    /// 12 for a PHYSICAL region, as `mlx4_mtt_init()` sets for no pages).
    pub page_shift: u32,
    /// No MTT: addresses are DMA addresses, `start` 0 and `len` all of
    /// them (`mlx4_ib_get_dma_mr()`, the kernel ping's `mem_mode=dma`).
    pub physical: bool,
}

impl Mpt {
    /// A region of every DMA address for protection domain `pd`, as
    /// `mlx4_ib_get_dma_mr()` asks for one: no MTT, start 0, length ~0.
    pub const fn physical(key: u32, pd: u32, perm: u32) -> Mpt {
        Mpt {
            key,
            pd,
            start: 0,
            len: u64::MAX,
            perm,
            mtt: 0,
            page_shift: PAGE_SHIFT,
            physical: true,
        }
    }
}

/// The SW2HW_MPT mailbox of `m`, as `mlx4_mr_enable()` fills it.
pub fn mpt_entry(m: &Mpt) -> [u8; MPT_ENTRY_LEN] {
    let mut e = [0u8; MPT_ENTRY_LEN];
    let mut put32 = |at: usize, v: u32| e[at..at + 4].copy_from_slice(&v.to_be_bytes());
    // mlx4_mr_enable(): PHYSICAL when the region has no MTT.
    let physical = if m.physical { MPT_FLAG_PHYSICAL } else { 0 };
    put32(
        0x00,
        MPT_FLAG_SW_OWNS | MPT_FLAG_MIO | MPT_FLAG_REGION | physical | m.perm,
    );
    put32(0x08, key_to_hw_index(m.key));
    put32(0x0c, m.pd | MPT_PD_FLAG_EN_INV);
    put32(0x38, m.page_shift);
    e[0x10..0x18].copy_from_slice(&m.start.to_be_bytes());
    e[0x18..0x20].copy_from_slice(&m.len.to_be_bytes());
    if !m.physical {
        e[0x2c..0x34].copy_from_slice(&(u64::from(m.mtt) * MTT_ENTRY_LEN).to_be_bytes());
    }
    e
}

/// The MTT entry of the page at DMA address `page` (4 KiB aligned), as it
/// sits in the MTT table, big-endian (`mlx4_write_mtt_chunk()`).
pub fn mtt_entry(page: u64) -> [u8; MTT_ENTRY_LEN as usize] {
    (page | MTT_FLAG_PRESENT).to_be_bytes()
}

/// The data segments of a validated WQE: `(byte_count, lkey, addr)`.
pub fn gathers<'a>(wqe: &'a [u8], info: &WqeInfo) -> impl Iterator<Item = (u32, u32, u64)> + 'a {
    let first = wqe.len() - info.gather_segs as usize * wqe::GATHER_LEN;
    wqe[first..].chunks_exact(wqe::GATHER_LEN).map(|s| {
        let be32 = |at: usize| u32::from_be_bytes([s[at], s[at + 1], s[at + 2], s[at + 3]]);
        (
            be32(0),
            be32(4),
            u64::from(be32(8)) << 32 | u64::from(be32(12)),
        )
    })
}

/// Every data segment names, by lkey, a region `lookup` knows (it returns
/// `(start, len, perm)`), and lies inside it. An RDMA read's segments, and
/// an atomic's, are where data lands: their regions must allow local
/// writes.
pub fn check_gathers(
    wqe: &[u8],
    info: &WqeInfo,
    lookup: impl Fn(u32) -> Option<(u64, u64, u32)>,
) -> Result<(), Reject> {
    let lands = wqe::lands(info.opcode);
    for (count, lkey, addr) in gathers(wqe, info) {
        let (start, len, perm) = lookup(lkey).ok_or(Reject::Lkey)?;
        if lands && !local_writable(perm) {
            return Err(Reject::Lkey);
        }
        if !contains(start, len, addr, u64::from(count)) {
            return Err(Reject::Range);
        }
    }
    Ok(())
}

/// Does a WQE with `opcode` name remote memory (RDMA write or read, an
/// atomic)?
#[inline]
pub fn is_rdma(opcode: u32) -> bool {
    remote_perm_needed(opcode) != 0
}

/// The remote address segment of an RDMA write, read or atomic:
/// `(raddr, rkey)`.
pub fn raddr(wqe: &[u8], info: &WqeInfo) -> Option<(u64, u32)> {
    if !is_rdma(info.opcode) {
        return None;
    }
    let b = wqe.get(wqe::CTRL_LEN..wqe::CTRL_LEN + 12)?;
    let hi = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    let lo = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
    let rkey = u32::from_be_bytes([b[8], b[9], b[10], b[11]]);
    Some((u64::from(hi) << 32 | u64::from(lo), rkey))
}

/// Bytes the WQE sends: its inline data plus what its segments gather.
pub fn message_len(wqe: &[u8], info: &WqeInfo) -> u64 {
    let inline = u64::from(info.inline_bytes);
    if info.gather_segs == 0 {
        return inline;
    }
    gathers(wqe, info).fold(inline, |n, (c, _, _)| n + u64::from(c))
}

/// An RDMA write's target, or an RDMA read's source, lies inside a region
/// `lookup` finds by rkey (`(start, len, perm)`) that allows remote writes,
/// or reads. A zero-length one checks no key (IB: no R_Key validation
/// without data).
pub fn check_rdma(
    wqe: &[u8],
    info: &WqeInfo,
    lookup: impl FnOnce(u32) -> Option<(u64, u64, u32)>,
) -> Result<(), Reject> {
    let Some((addr, rkey)) = raddr(wqe, info) else {
        return Ok(());
    };
    let n = message_len(wqe, info);
    if n == 0 {
        return Ok(());
    }
    let needed = remote_perm_needed(info.opcode);
    match lookup(rkey) {
        Some((start, len, perm)) if perm & needed != 0 && contains(start, len, addr, n) => Ok(()),
        _ => Err(Reject::Rkey),
    }
}

/// A first-fit allocator of contiguous index ranges (MTT entries) over a
/// bitmap of `WORDS * 64` indices.
pub struct RangeAlloc<const WORDS: usize> {
    used: [u64; WORDS],
    /// Indices below it are never handed out (reserved by the device).
    first: usize,
    limit: usize,
}

impl<const WORDS: usize> RangeAlloc<WORDS> {
    /// Indices `first..limit` (limit capped to the bitmap) are free.
    pub const fn new(first: usize, limit: usize) -> Self {
        let cap = WORDS * 64;
        RangeAlloc {
            used: [0; WORDS],
            first,
            limit: if limit < cap { limit } else { cap },
        }
    }

    fn is_used(&self, i: usize) -> bool {
        self.used[i / 64] & (1 << (i % 64)) != 0
    }

    fn set(&mut self, start: usize, n: usize, used: bool) {
        for i in start..start + n {
            if used {
                self.used[i / 64] |= 1 << (i % 64);
            } else {
                self.used[i / 64] &= !(1 << (i % 64));
            }
        }
    }

    /// The first free run of `n` (> 0) indices, now used.
    pub fn alloc(&mut self, n: usize) -> Option<usize> {
        if n == 0 {
            return None;
        }
        let mut start = self.first;
        while start.checked_add(n)? <= self.limit {
            match (start..start + n).rev().find(|&i| self.is_used(i)) {
                Some(used) => start = used + 1,
                None => {
                    self.set(start, n, true);
                    return Some(start);
                }
            }
        }
        None
    }

    /// Gives back a run `alloc()` returned.
    pub fn free(&mut self, start: usize, n: usize) {
        if start >= self.first && start.saturating_add(n) <= self.limit {
            self.set(start, n, false);
        }
    }

    /// Indices in use.
    #[cfg(test)]
    pub fn in_use(&self) -> usize {
        self.used.iter().map(|w| w.count_ones() as usize).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wqe::{validate, MAX_WQE_LEN, OPCODE_SEND};
    use crate::wqe_build::{build_gather, build_inline};

    #[test]
    fn keys_are_mlx4_keys() {
        // mr.c: key = hw_index_to_key(index); the MPT's key field holds
        // key_to_hw_index(key) and its low bits pick the slot.
        assert_eq!(key(5, 0x2a), 0x52a);
        assert_eq!(key_slot(key(5, 0x2a)), 5);
        assert_eq!(key_to_hw_index(key(5, 0x2a)), 0x2a00_0005);
        assert_eq!(hw_index_to_key(key_to_hw_index(0x1234_5678)), 0x1234_5678);
        // The reserved lkey 0x8 is slot 0: never one of ours.
        assert_eq!(key_slot(0x8), 0);
    }

    #[test]
    fn pages_spanned_counts_partial_pages() {
        assert_eq!(pages_spanned(0x1000, 0x1000), Some(1));
        assert_eq!(pages_spanned(0x1fff, 2), Some(2));
        assert_eq!(pages_spanned(0x1234, 1), Some(1));
        assert_eq!(pages_spanned(0, 0), None);
        assert_eq!(pages_spanned(u64::MAX, 2), None);
        assert_eq!(pages_spanned(u64::MAX - 0xfff, 0x1000), Some(1));
    }

    #[test]
    fn a_key_names_its_slot_and_tag() {
        for (slot, tag) in [(1, 0), (3, 1), (0xff_ffff, 0xff), (1000, 7)] {
            let k = key(slot, tag);
            assert_eq!((key_slot(k), key_tag(k)), (slot, tag));
        }
    }

    #[test]
    fn contains_is_exact_at_both_ends() {
        assert!(contains(0x1000, 0x100, 0x1000, 0x100));
        assert!(contains(0x1000, 0x100, 0x10ff, 1));
        assert!(!contains(0x1000, 0x100, 0x10ff, 2));
        assert!(!contains(0x1000, 0x100, 0xfff, 1));
        assert!(contains(0x1000, 0x100, 0x1100, 0));
        assert!(!contains(0x1000, 0x100, 0x1101, 0));
        assert!(!contains(0x1000, 0x100, u64::MAX, 2));
        assert!(!contains(u64::MAX, 2, u64::MAX, 1));
    }

    #[test]
    fn access_flags_as_verbs_allow_them() {
        assert_eq!(perm(0), Some(PERM_LOCAL_READ));
        assert_eq!(
            perm(ACCESS_LOCAL_WRITE),
            Some(PERM_LOCAL_READ | PERM_LOCAL_WRITE)
        );
        assert_eq!(
            perm(ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE),
            Some(PERM_LOCAL_READ | PERM_LOCAL_WRITE | PERM_REMOTE_WRITE)
        );
        assert_eq!(perm(ACCESS_REMOTE_WRITE), None);
        // Remote read needs no local write (ib_check_mr_access()).
        assert_eq!(
            perm(ACCESS_REMOTE_READ),
            Some(PERM_LOCAL_READ | PERM_REMOTE_READ)
        );
        assert_eq!(perm(1 << 7), None);
    }

    #[test]
    fn ib_access_as_convert_access() {
        use crate::verbs::access as ib;
        assert_eq!(ib_access_perm(0), PERM_LOCAL_READ);
        assert_eq!(
            ib_access_perm(ib::LOCAL_WRITE | ib::REMOTE_WRITE | ib::REMOTE_READ),
            0x3c00
        );
        assert_eq!(ib_access_perm(ib::REMOTE_ATOMIC | ib::MW_BIND), 0xc400);
        // Flags mlx4 has no bit for (ZERO_BASED, ON_DEMAND...) are ignored.
        assert_eq!(ib_access_perm(1 << 5 | 1 << 6), PERM_LOCAL_READ);
        // The ABI's own flags share the verbs values.
        assert_eq!(ib_access_perm(ACCESS_ALL), perm(ACCESS_ALL).unwrap());
    }

    #[test]
    fn mpt_entry_is_what_mlx4_mr_enable_writes() {
        let e = mpt_entry(&Mpt {
            key: key(3, 1),
            pd: 7,
            start: 0x7f00_1234_5000,
            len: 0x3000,
            perm: perm(ACCESS_LOCAL_WRITE).unwrap(),
            mtt: 16,
            page_shift: PAGE_SHIFT,
            physical: false,
        });
        assert_eq!(e[0..4], (0xf002_0d00u32).to_be_bytes());
        assert_eq!(e[8..12], 0x0100_0003u32.to_be_bytes());
        assert_eq!(e[12..16], 0x0300_0007u32.to_be_bytes());
        assert_eq!(e[0x10..0x18], 0x7f00_1234_5000u64.to_be_bytes());
        assert_eq!(e[0x18..0x20], 0x3000u64.to_be_bytes());
        assert_eq!(e[0x2c..0x34], 128u64.to_be_bytes());
        assert_eq!(e[0x38..0x3c], 12u32.to_be_bytes());
    }

    #[test]
    fn physical_mpt_is_what_mlx4_ib_get_dma_mr_asks_for() {
        let m = Mpt::physical(key(5, 2), 9, perm(ACCESS_ALL).unwrap());
        let e = mpt_entry(&m);
        // SW_OWNS, MIO, the four permissions, PHYSICAL and REGION.
        assert_eq!(e[0..4], 0xf002_3f00u32.to_be_bytes());
        assert_eq!(e[0x10..0x18], 0u64.to_be_bytes());
        assert_eq!(e[0x18..0x20], u64::MAX.to_be_bytes());
        assert_eq!(e[0x2c..0x34], 0u64.to_be_bytes());
        assert!(contains(m.start, m.len, 0xffff_f000, 0x1000));
    }

    #[test]
    fn mtt_entries_are_marked_present() {
        assert_eq!(mtt_entry(0x1000), 0x1001u64.to_be_bytes());
        assert_eq!(mtt_entry(0x5_0000_5000), 0x5_0000_5001u64.to_be_bytes());
    }

    fn gather_wqe(
        opcode: u32,
        raddr: Option<(u64, u32)>,
        seg: (u64, u32, u32),
    ) -> ([u8; 64], WqeInfo) {
        let mut b = [0u8; 64];
        let n = build_gather(&mut b, opcode, raddr, seg).unwrap();
        let info = validate(&b[..n], MAX_WQE_LEN).unwrap();
        (b, info)
    }

    #[test]
    fn gathers_must_name_a_known_key_and_stay_inside() {
        let rw = perm(ACCESS_LOCAL_WRITE).unwrap();
        let known = |k: u32| (k == 0x100).then_some((0x1000u64, 0x100u64, rw));
        let (b, info) = gather_wqe(OPCODE_SEND, None, (0x1000, 0x100, 0x100));
        let n = info.size16 as usize * 16;
        assert_eq!(check_gathers(&b[..n], &info, known), Ok(()));
        let (b, info) = gather_wqe(OPCODE_SEND, None, (0x1001, 0x100, 0x100));
        assert_eq!(check_gathers(&b[..n], &info, known), Err(Reject::Range));
        let (b, info) = gather_wqe(OPCODE_SEND, None, (0x1000, 0x200, 0x10));
        assert_eq!(check_gathers(&b[..n], &info, known), Err(Reject::Lkey));
    }

    #[test]
    fn rdma_reads_land_only_in_locally_writable_regions_and_read_readable_ones() {
        let ro = perm(0).unwrap();
        let rw = perm(ACCESS_LOCAL_WRITE).unwrap();
        let (b, info) = gather_wqe(
            wqe::OPCODE_RDMA_READ,
            Some((0x8000, 0x700)),
            (0x1000, 0x100, 0x40),
        );
        let n = info.size16 as usize * 16;
        assert_eq!(raddr(&b[..n], &info), Some((0x8000, 0x700)));
        assert_eq!(message_len(&b[..n], &info), 0x40);
        // Where it lands: a region of the context, writable by the adapter.
        assert_eq!(
            check_gathers(&b[..n], &info, |_| Some((0x1000, 0x100, rw))),
            Ok(())
        );
        assert_eq!(
            check_gathers(&b[..n], &info, |_| Some((0x1000, 0x100, ro))),
            Err(Reject::Lkey)
        );
        // The same segment gathers for a SEND from a read-only region.
        let (s, sinfo) = gather_wqe(OPCODE_SEND, None, (0x1000, 0x100, 0x40));
        let sn = sinfo.size16 as usize * 16;
        assert_eq!(
            check_gathers(&s[..sn], &sinfo, |_| Some((0x1000, 0x100, ro))),
            Ok(())
        );
        // What it reads: a peer's region with remote read, not remote write.
        let readable = perm(ACCESS_REMOTE_READ).unwrap();
        let writable = perm(ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE).unwrap();
        assert_eq!(
            check_rdma(&b[..n], &info, |_| Some((0x8000, 0x40, readable))),
            Ok(())
        );
        assert_eq!(
            check_rdma(&b[..n], &info, |_| Some((0x8000, 0x40, writable))),
            Err(Reject::Rkey)
        );
        assert_eq!(
            check_rdma(&b[..n], &info, |_| Some((0x8001, 0x40, readable))),
            Err(Reject::Rkey)
        );
    }

    #[test]
    fn rdma_reads_carry_nothing_inline() {
        let mut b = [0u8; 64];
        let n = build_inline(&mut b, wqe::OPCODE_RDMA_READ, Some((0x10, 1)), &[1; 8]).unwrap();
        assert_eq!(validate(&b[..n], MAX_WQE_LEN), Err(Reject::Inline));
        // No data segment at all: a READ of nothing, validated as such.
        let mut r = [0u8; 64];
        r[3] = wqe::OPCODE_RDMA_READ as u8;
        r[7] = 2;
        r[16 + 11] = 1;
        assert!(validate(&r[..32], MAX_WQE_LEN).is_ok());
    }

    #[test]
    fn rdma_writes_need_a_remote_writable_region_around_the_message() {
        let mut b = [0u8; 64];
        let n = build_inline(
            &mut b,
            wqe::OPCODE_RDMA_WRITE,
            Some((0x2000, 0x300)),
            &[7; 16],
        )
        .unwrap();
        let info = validate(&b[..n], MAX_WQE_LEN).unwrap();
        assert_eq!(raddr(&b[..n], &info), Some((0x2000, 0x300)));
        assert_eq!(message_len(&b[..n], &info), 16);
        let w = perm(ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE).unwrap();
        let ok = |k: u32| (k == 0x300).then_some((0x2000u64, 16u64, w));
        assert_eq!(check_rdma(&b[..n], &info, ok), Ok(()));
        let short = |_| Some((0x2000u64, 15u64, w));
        assert_eq!(check_rdma(&b[..n], &info, short), Err(Reject::Rkey));
        let read_only = |_| Some((0x2000u64, 16u64, perm(ACCESS_REMOTE_READ).unwrap()));
        assert_eq!(check_rdma(&b[..n], &info, read_only), Err(Reject::Rkey));
        assert_eq!(check_rdma(&b[..n], &info, |_| None), Err(Reject::Rkey));
        // A SEND has no target to check.
        let n = build_inline(&mut b, OPCODE_SEND, None, &[7; 16]).unwrap();
        let info = validate(&b[..n], MAX_WQE_LEN).unwrap();
        assert_eq!(check_rdma(&b[..n], &info, |_| None), Ok(()));
    }

    #[test]
    fn rdma_write_length_counts_gathers() {
        let (b, info) = gather_wqe(
            wqe::OPCODE_RDMA_WRITE_IMM,
            Some((0x10, 1)),
            (0x1000, 0x100, 600),
        );
        let n = info.size16 as usize * 16;
        assert_eq!(message_len(&b[..n], &info), 600);
        assert_eq!(
            check_rdma(&b[..n], &info, |_| Some((0, 599 + 0x10, PERM_REMOTE_WRITE))),
            Err(Reject::Rkey)
        );
        assert_eq!(
            check_rdma(&b[..n], &info, |_| Some((0, 600 + 0x10, PERM_REMOTE_WRITE))),
            Ok(())
        );
    }

    #[test]
    fn range_alloc_is_first_fit_and_reuses() {
        let mut a = RangeAlloc::<2>::new(1, 100);
        assert_eq!(a.alloc(10), Some(1));
        assert_eq!(a.alloc(5), Some(11));
        a.free(1, 10);
        assert_eq!(a.alloc(11), Some(16));
        assert_eq!(a.alloc(10), Some(1));
        assert_eq!(a.in_use(), 26);
        assert_eq!(a.alloc(74), None);
        assert_eq!(a.alloc(73), Some(27));
        assert_eq!(a.alloc(0), None);
        assert_eq!(a.alloc(1), None);
    }
}
