//! Memory keys (§5.7): what memory a data segment (lkey, addr, byte_count)
//! or an RDMA's or atomic's remote address (rkey, raddr, length) names, and
//! whether the model may touch it. Pure: the regions are `mr::MrTable`.
//!
//! - A byte count of 0 names nothing and is never checked.
//! - The reserved lkey (QUERY_DEV_CAP 0x98, 0x00000008) on a QP whose
//!   context sets rlkey means "addr is a DMA address": one access, as
//!   given. Never as an rkey.
//! - Any other key names a memory region: MPT index
//!   `key_to_hw_index(key) & (num_mpts - 1)` with `key_to_hw_index(k) =
//!   (k << 24) | (k >> 8)` (mlx4), num_mpts 2^log_mpt_sz of INIT_HCA
//!   (`MrTable::index_of`). The MPT must be in hardware ownership,
//!   its key field must equal `key_to_hw_index(key)` (the tag in the
//!   key's low byte included), its PD must equal the QP's (the responder's
//!   for an rkey), the access must lie inside `[start, start + length)`,
//!   and writes need LOCAL_WRITE (a receive scatter) or REMOTE_WRITE (an
//!   RDMA write), remote reads REMOTE_READ, atomics ATOMIC
//!   (MLX4_PERM_ATOMIC, what mlx4_ib gives IB_ACCESS_REMOTE_ATOMIC,
//!   `ib/mr.c:convert_access`). Local reads are always allowed. The reserved lkey without
//!   rlkey names MPT 0, which is reserved and never in hardware ownership.
//! - A region's virtual address `va` is at DMA address `mtt[i] |
//!   (va % 2^s)`, `i = (va >> s) - (start >> s)`, s the region's page
//!   shift (entity_size), from the
//!   translation the MPT took at SW2HW_MPT; an access is split at page
//!   boundaries. A PHYSICAL region is the identity.
//!
//! A failed check touches nothing: the caller completes the WQE in error
//! and counts the fault.

use crate::layout::RESERVED_LKEY;
pub use crate::mr::{page_rest, Chunk};
use crate::mr::{perm, MrTable};

/// MLX4_INVALID_LKEY: ends a receive WQE's scatter list early.
pub const INVALID_LKEY: u32 = 0x100;

/// mlx4 `key_to_hw_index()`: the MPT key field a key must match.
pub fn hw_index(key: u32) -> u32 {
    key.rotate_right(8)
}

/// What the access does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// A send gather: the adapter reads.
    LocalRead,
    /// A receive scatter: the adapter writes (LOCAL_WRITE).
    LocalWrite,
    /// An RDMA write's destination (REMOTE_WRITE; never the reserved lkey).
    RemoteWrite,
    /// An RDMA read's source (REMOTE_READ; never the reserved lkey).
    RemoteRead,
    /// An atomic's operand (ATOMIC; never the reserved lkey).
    RemoteAtomic,
}

/// Why a key check failed (trace `prot_fault`, field `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The reserved lkey on a QP without rlkey, or as an rkey.
    ReservedKey,
    /// The MPT the key names is not in hardware ownership.
    NoRegion,
    /// The MPT's key differs (another tag: a stale key).
    KeyMismatch,
    /// The MPT belongs to another protection domain.
    PdMismatch,
    /// The region does not grant the access.
    Permission,
    /// The access does not lie inside the region.
    OutOfRange,
    /// The responder QP does not enable remote writes (RWE), reads (RRE)
    /// or atomics (RAE), whatever the key.
    QpAccess,
}

impl Fault {
    pub fn as_str(self) -> &'static str {
        match self {
            Fault::ReservedKey => "reserved_key",
            Fault::NoRegion => "no_region",
            Fault::KeyMismatch => "key_mismatch",
            Fault::PdMismatch => "pd_mismatch",
            Fault::Permission => "permission",
            Fault::OutOfRange => "out_of_range",
            Fault::QpAccess => "qp_access",
        }
    }
}

/// What a checked key names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Zero bytes: nothing.
    Nothing,
    /// The reserved lkey: the address is a DMA address.
    Dma,
    /// The region of MPT `index`.
    Region(u32),
}

/// Checks `len` bytes at `addr` under `key`, for a QP with `rlkey` and
/// protection domain `pd` (the responder's for an rkey): what they name,
/// or why the model may not touch them.
pub fn check(
    mrs: &MrTable,
    rlkey: bool,
    pd: u32,
    key: u32,
    addr: u64,
    len: u64,
    access: Access,
) -> Result<Target, Fault> {
    if len == 0 {
        return Ok(Target::Nothing);
    }
    if key == RESERVED_LKEY {
        let remote = matches!(
            access,
            Access::RemoteWrite | Access::RemoteRead | Access::RemoteAtomic
        );
        return if rlkey && !remote {
            Ok(Target::Dma)
        } else {
            Err(Fault::ReservedKey)
        };
    }
    let index = mrs.index_of(key);
    let Some(mpt) = mrs.mpt(index) else {
        return Err(Fault::NoRegion);
    };
    if mpt.key != hw_index(key) {
        return Err(Fault::KeyMismatch);
    }
    if mpt.pd != pd {
        return Err(Fault::PdMismatch);
    }
    let needs = match access {
        Access::LocalRead => 0,
        Access::LocalWrite => perm::LOCAL_WRITE,
        Access::RemoteWrite => perm::REMOTE_WRITE,
        Access::RemoteRead => perm::REMOTE_READ,
        Access::RemoteAtomic => perm::ATOMIC,
    };
    if mpt.flags & needs != needs {
        return Err(Fault::Permission);
    }
    let end = addr.checked_add(len).ok_or(Fault::OutOfRange)?;
    if addr < mpt.start || end > mpt.start + mpt.length {
        return Err(Fault::OutOfRange);
    }
    Ok(Target::Region(index))
}

/// The DMA accesses of the first `len` bytes at `addr` of what `check`
/// passed (for at least `len` bytes).
pub fn translate(mrs: &MrTable, target: Target, addr: u64, len: u64) -> Vec<Chunk> {
    match target {
        _ if len == 0 => Vec::new(),
        Target::Nothing => Vec::new(),
        Target::Dma => vec![(addr, len as usize)],
        Target::Region(i) => mrs.mpt(i).map_or(Vec::new(), |m| m.translate(addr, len)),
    }
}

/// `check`, then `translate` of all `len` bytes.
pub fn resolve(
    mrs: &MrTable,
    rlkey: bool,
    pd: u32,
    key: u32,
    addr: u64,
    len: u64,
    access: Access,
) -> Result<Vec<Chunk>, Fault> {
    let t = check(mrs, rlkey, pd, key, addr, len, access)?;
    Ok(translate(mrs, t, addr, len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mr::{perm, Mpt};

    fn mrs_with(index: u32, tag: u8, pd: u32, flags: u32, start: u64, pages: &[u64]) -> MrTable {
        let mut m = MrTable::default();
        let key = (index << 8) | u32::from(tag);
        // From start to the end of the last page.
        let length = 4096 * pages.len() as u64 - (start & 0xfff);
        m.insert_for_test(
            index,
            Mpt::for_test(hw_index(key), pd, flags, start, length, pages),
        );
        m
    }

    #[test]
    fn hw_index_is_mlx4s_rotation() {
        assert_eq!(hw_index(0x0000_0108), 0x0800_0001);
        assert_eq!(hw_index(0x1234_5678), 0x7812_3456);
    }

    #[test]
    fn the_reserved_lkey_only_on_an_rlkey_qp_and_never_as_rkey() {
        let m = MrTable::default();
        let r = |rlkey, access| resolve(&m, rlkey, 0, RESERVED_LKEY, 0x1000, 8, access);
        assert_eq!(r(true, Access::LocalRead), Ok(vec![(0x1000, 8)]));
        assert_eq!(r(true, Access::LocalWrite), Ok(vec![(0x1000, 8)]));
        assert_eq!(r(false, Access::LocalRead), Err(Fault::ReservedKey));
        assert_eq!(r(true, Access::RemoteWrite), Err(Fault::ReservedKey));
        // Zero bytes: nothing to check, whatever the key.
        assert_eq!(
            resolve(&m, false, 0, 0x77, 0, 0, Access::LocalWrite),
            Ok(vec![])
        );
        assert_eq!(
            resolve(&m, true, 0, INVALID_LKEY, 0, 4, Access::LocalRead),
            Err(Fault::NoRegion)
        );
    }

    #[test]
    fn a_region_translates_page_by_page() {
        let flags = perm::LOCAL_WRITE | perm::REMOTE_WRITE;
        let m = mrs_with(5, 0x42, 7, flags, 0x7000_0f00, &[0x20_000, 0x10_000]);
        let key = (5 << 8) | 0x42;
        // 0x100 bytes left in the first page, then the second page.
        let r = resolve(&m, false, 7, key, 0x7000_0f80, 0x100, Access::LocalWrite);
        assert_eq!(r, Ok(vec![(0x20_f80, 0x80), (0x10_000, 0x80)]));
        let r = |key, pd, addr, len, a| resolve(&m, false, pd, key, addr, len, a);
        assert_eq!(
            r(key ^ 1, 7, 0x7000_0f00, 4, Access::LocalRead),
            Err(Fault::KeyMismatch)
        );
        assert_eq!(
            r(key, 6, 0x7000_0f00, 4, Access::LocalRead),
            Err(Fault::PdMismatch)
        );
        assert_eq!(
            r(key, 7, 0x7000_0eff, 4, Access::LocalRead),
            Err(Fault::OutOfRange)
        );
        // The region runs from 0x70000f00 to 0x70002000.
        assert!(r(key, 7, 0x7000_1ffc, 4, Access::RemoteWrite).is_ok());
        assert_eq!(
            r(key, 7, 0x7000_1ffd, 4, Access::RemoteWrite),
            Err(Fault::OutOfRange)
        );
        assert_eq!(
            r(key, 7, u64::MAX, 2, Access::LocalRead),
            Err(Fault::OutOfRange)
        );
        let ro = mrs_with(5, 0x42, 7, 0, 0x7000_0000, &[0x20_000]);
        assert_eq!(
            resolve(&ro, false, 7, key, 0x7000_0000, 4, Access::LocalWrite),
            Err(Fault::Permission)
        );
        assert_eq!(
            resolve(&ro, false, 7, key, 0x7000_0000, 4, Access::RemoteWrite),
            Err(Fault::Permission)
        );
        assert!(resolve(&ro, false, 7, key, 0x7000_0000, 4, Access::LocalRead).is_ok());
        // Atomics need ATOMIC, and nothing else grants it.
        let rw = mrs_with(
            5,
            0x42,
            7,
            flags | perm::REMOTE_READ,
            0x7000_0000,
            &[0x20_000],
        );
        assert_eq!(
            resolve(&rw, false, 7, key, 0x7000_0008, 8, Access::RemoteAtomic),
            Err(Fault::Permission)
        );
        let at = mrs_with(5, 0x42, 7, perm::ATOMIC, 0x7000_0000, &[0x20_000]);
        assert_eq!(
            resolve(&at, false, 7, key, 0x7000_0008, 8, Access::RemoteAtomic),
            Ok(vec![(0x20_008, 8)])
        );
        assert_eq!(
            resolve(&at, true, 7, RESERVED_LKEY, 0x1000, 8, Access::RemoteAtomic),
            Err(Fault::ReservedKey)
        );
    }

    #[test]
    fn translate_takes_only_what_is_asked() {
        let m = mrs_with(9, 1, 0, 0, 0x4000, &[0x9000, 0x2000, 0x6000]);
        let key = (9 << 8) | 1;
        let t = check(&m, false, 0, key, 0x4ffc, 0x2000, Access::LocalRead).unwrap();
        assert_eq!(t, Target::Region(9));
        assert_eq!(translate(&m, t, 0x4ffc, 6), vec![(0x9ffc, 4), (0x2000, 2)]);
        assert_eq!(translate(&m, t, 0x4ffc, 0), vec![]);
        assert_eq!(page_rest(0x1ffc), 4);
        assert_eq!(page_rest(0x2000), 4096);
    }
}
