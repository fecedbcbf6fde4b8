//! Memory regions (contract "Memory regions"): the commands that fill the
//! MTT and the MPTs, WRITE_MTT, SW2HW_MPT and HW2SW_MPT, as mainline
//! mlx4_core drives them (`core/mr.c:mlx4_mr_enable`,
//! `mlx4_write_mtt_chunk`). The MTT is INIT_HCA's table in ICM: mlx4
//! writes its entries there itself, or with WRITE_MTT
//! (`Firmware::write_mtt`). SW2HW_MPT in_mod is `key_to_hw_index(key) &
//! (num_mpts - 1)` with num_mpts = 2^INIT_HCA log_mpt_sz; indices below the
//! 2^LOG_RSVD_MPT reserved ones are the firmware's; the pages come from the
//! MTT entries in ICM, each 2^entity_size bytes (12..=31: mlx4_ib picks up
//! to 2 GiB for contiguous user memory, `ib/mr.c:mlx4_ib_reg_user_mr`); a
//! PHYSICAL MPT (no MTT, `ib/mr.c:mlx4_ib_get_dma_mr`: start 0, length ~0)
//! translates every address to itself. The MPTs live in the model. Which
//! key reaches which region is `keys`' question.
//!
//! An MPT takes a snapshot of its pages at SW2HW_MPT, like a cache the
//! driver must not change under the adapter; WRITE_MTT refuses to touch an
//! entry an MPT in hardware ownership uses, so the snapshot always equals
//! the table as far as WRITE_MTT goes.
//!
//! HW2SW_MPT writes the entry back into its dMPT slot in ICM with the
//! status byte SW, where mainline's re-registration edits it and hands it
//! back with SYNC_TPT (`rereg`).

use crate::bytes::{be32, be64};
use crate::command::{read_mailbox, write_mailbox, CmdError, CmdResult, CommandRequest};
use crate::env::Env;
use crate::firmware::Firmware;
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::layout::{
    LOG_MAX_MR_SIZE, LOG_RSVD_MPT, MAX_WRITE_MTT, MR_PAGE_SHIFT, MTT_ENTRY_SIZE, NUM_MTTS,
};
use crate::protocol::Code;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};

mod rereg;

/// struct mlx4_mpt_entry, 64 bytes.
pub const MPT_ENTRY_SIZE: usize = 0x40;
/// WRITE_MTT's mailbox: be64 first index, be64 reserved, then the entries.
const WRITE_MTT_HEADER: usize = 16;
/// MLX4_MTT_FLAG_PRESENT.
pub const MTT_PRESENT: u64 = 1;
/// MLX4_MPT_PD_MASK.
pub const PD_MASK: u32 = 0x1_ffff;

/// MPT pd_flags (+0x0c) above the PD: MLX4_MPT_PD_FLAG_FAST_REG.
pub const PD_FLAG_FAST_REG: u32 = 1 << 27;

/// The region page sizes (entity_size) SW2HW_MPT takes,
/// 4 KiB (MLX4_ICM_PAGE_SHIFT) to 2 GiB (mlx4_ib's MLX4_MAX_MTT_SHIFT 31).
pub const STRICT_MIN_SHIFT: u32 = 12;
pub const STRICT_MAX_SHIFT: u32 = 31;

/// MPT flags (+0x00).
pub mod flag {
    pub const REGION: u32 = 1 << 8;
    pub const PHYSICAL: u32 = 1 << 9;
    pub const MIO: u32 = 1 << 17;
    pub const SW_OWNS: u32 = 0xf << 28;
}

/// MLX4_PERM_*: access rights in the MPT flags.
pub mod perm {
    pub const LOCAL_READ: u32 = 1 << 10;
    pub const LOCAL_WRITE: u32 = 1 << 11;
    pub const REMOTE_READ: u32 = 1 << 12;
    pub const REMOTE_WRITE: u32 = 1 << 13;
    pub const ATOMIC: u32 = 1 << 14;
}

/// A memory region in hardware ownership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mpt {
    /// The key field: `key_to_hw_index(lkey)`.
    pub key: u32,
    pub pd: u32,
    pub flags: u32,
    /// The region's first virtual address and its length (> 0; the end
    /// does not overflow).
    pub start: u64,
    pub length: u64,
    /// The first MTT entry (`mtt_addr / 8`).
    pub first_mtt: u32,
    /// log2 of the region's page size (entity_size).
    pub shift: u32,
    /// The DMA address of each page, from the MTT at SW2HW_MPT; none for a
    /// PHYSICAL MPT.
    pub pages: Vec<u64>,
    raw: [u8; MPT_ENTRY_SIZE],
}

/// One DMA access of a resolved segment: (address, bytes), never across a
/// 4 KiB page of a region.
pub type Chunk = (u64, usize);

/// Bytes of a 4 KiB page from `va` to its end.
pub fn page_rest(va: u64) -> u64 {
    page_rest_of(va, MR_PAGE_SHIFT)
}

/// Bytes of a 2^`shift` byte page from `va` to its end.
pub fn page_rest_of(va: u64, shift: u32) -> u64 {
    let page = 1u64 << shift;
    page - (va & (page - 1))
}

/// 4 KiB pages a region of `length` bytes from `start` spans (`length` > 0).
pub fn pages_spanned(start: u64, length: u64) -> u64 {
    pages_spanned_of(start, length, MR_PAGE_SHIFT)
}

/// 2^`shift` byte pages a region of `length` bytes from `start` spans
/// (`length` > 0, the end not overflowing).
pub fn pages_spanned_of(start: u64, length: u64, shift: u32) -> u64 {
    ((start + (length - 1)) >> shift) - (start >> shift) + 1
}

impl Mpt {
    pub fn physical(&self) -> bool {
        self.flags & flag::PHYSICAL != 0
    }

    /// The DMA accesses of `len` (> 0) bytes at `va`, inside the region:
    /// page `(va >> shift) - (start >> shift)` at offset `va % 2^shift` (the
    /// MTT's first entry holds the page containing `start`), split at page
    /// boundaries; a PHYSICAL region's address is the DMA address.
    pub fn translate(&self, va: u64, len: u64) -> Vec<Chunk> {
        if self.physical() {
            return vec![(va, len as usize)];
        }
        let s = self.shift;
        let mut out = Vec::new();
        let (mut va, mut left) = (va, len);
        while left > 0 {
            let i = ((va >> s) - (self.start >> s)) as usize;
            let n = left.min(page_rest_of(va, s));
            out.push((self.pages[i] | (va & ((1 << s) - 1)), n as usize));
            va += n;
            left -= n;
        }
        out
    }

    #[cfg(test)]
    pub fn for_test(key: u32, pd: u32, flags: u32, start: u64, length: u64, pages: &[u64]) -> Mpt {
        Mpt {
            key,
            pd,
            flags,
            start,
            length,
            first_mtt: 1,
            shift: MR_PAGE_SHIFT,
            pages: pages.to_vec(),
            raw: [0; MPT_ENTRY_SIZE],
        }
    }
}

/// The MPTs in hardware ownership.
#[derive(Debug, Clone, Default)]
pub struct MrTable {
    /// MPTs in hardware ownership, by index.
    mpts: BTreeMap<u32, Mpt>,
    /// log2 of INIT_HCA's MPT count (the index mask), from the first MPT
    /// command on; before it there is no MPT to name.
    log_mpts: u8,
    /// MPTs HW2SW_MPT handed to software through their dMPT slot in ICM
    /// (status SW), until SW2HW_MPT or SYNC_TPT takes them back or their
    /// ICM page is unmapped (`rereg`).
    parked: BTreeSet<u32>,
}

impl MrTable {
    /// The MPT at `index`, if it is in hardware ownership.
    pub fn mpt(&self, index: u32) -> Option<&Mpt> {
        self.mpts.get(&index)
    }

    /// The MPT index a key names: `key_to_hw_index(key) & (num_mpts - 1)`
    /// (`core/mr.c:mlx4_mr_enable`), num_mpts INIT_HCA's.
    pub fn index_of(&self, key: u32) -> u32 {
        let hw = key.rotate_right(8);
        match self.log_mpts {
            log if log < 32 => hw & ((1u32 << log) - 1),
            _ => hw,
        }
    }

    /// MPTs in hardware ownership (diag 0x590).
    pub fn hw_mpts(&self) -> u64 {
        self.mpts.len() as u64
    }

    /// Pages those MPTs translate (diag 0x598).
    pub fn hw_pages(&self) -> u64 {
        self.mpts.values().map(|m| m.pages.len() as u64).sum()
    }

    /// The MPT in hardware ownership that uses an MTT entry in
    /// `[first, first + n)`, if any.
    fn user_of(&self, first: u32, n: u32) -> Option<u32> {
        let end = u64::from(first) + u64::from(n);
        self.mpts
            .iter()
            .find(|(_, m)| {
                u64::from(m.first_mtt) < end
                    && u64::from(first) < u64::from(m.first_mtt) + m.pages.len() as u64
            })
            .map(|(&i, _)| i)
    }

    /// MPT `index` in a table of 2^10 (the tests' INIT_HCA log_mpt_sz).
    #[cfg(test)]
    pub fn insert_for_test(&mut self, index: u32, mpt: Mpt) {
        self.log_mpts = 10;
        self.mpts.insert(index, mpt);
    }
}

/// Why the firmware refused an MPT (trace `fw_refused`, `mpt`).
fn strict_refusal<M: GuestMemory, I: Irq>(
    env: &mut Env<M, I>,
    index: u32,
    reason: &'static str,
    e: CmdError,
) -> CmdError {
    env.counters.global.fw_unmodelled += 1;
    env.trace
        .record("fw_refused", || json!({"mpt": index, "reason": reason}));
    e
}

/// A refused MPT entry: the status, and why when the model refuses what
/// a real adapter's behaviour is unknown for (counted as `fw_unmodelled`).
type Refused = (CmdError, Option<&'static str>);

/// Parses a SW2HW_MPT mailbox for MPT `index` as
/// `core/mr.c:mlx4_mr_enable` fills it, its pages from the MTT in ICM.
fn parse_mpt<M: GuestMemory, I: Irq>(
    env: &mut Env<M, I>,
    fw: &Firmware,
    index: u32,
    b: &[u8],
) -> Result<Mpt, CmdError> {
    decode_mpt(env, fw, index, b).map_err(|(e, why)| match why {
        Some(reason) => strict_refusal(env, index, reason, e),
        None => e,
    })
}

/// `parse_mpt`, the reason not yet counted: SW2HW_MPT's mailbox or
/// (`rereg`) an entry SYNC_TPT takes from ICM.
fn decode_mpt<M: GuestMemory, I: Irq>(
    env: &mut Env<M, I>,
    fw: &Firmware,
    index: u32,
    b: &[u8],
) -> Result<Mpt, Refused> {
    let hca = fw.hca().ok_or((CmdError::BadSysState, None))?;
    let flags = be32(b, 0x00);
    let key = be32(b, 0x08);
    let pd_flags = be32(b, 0x0c);
    let start = be64(b, 0x10);
    let length = be64(b, 0x18);
    let mtt_addr = be64(b, 0x2c);
    let shift = be32(b, 0x38);
    // Firmware-reserved MPTs: mlx4's bitmap starts above them
    // (`core/mr.c:mlx4_init_mr_table`).
    if index >> LOG_RSVD_MPT == 0 {
        return Err((CmdError::BadIndex, None));
    }
    let mask = if hca.log_mpt_sz >= 32 {
        u32::MAX
    } else {
        (1u32 << hca.log_mpt_sz) - 1
    };
    if flags & flag::REGION == 0 || key & mask != index {
        return Err((CmdError::BadParam, None));
    }
    // Why refused: a fast-register MPT (`ib/mr.c:mlx4_ib_alloc_mr`, kernel
    // ULPs only) is filled by FMR WQEs the model does not execute.
    if pd_flags & PD_FLAG_FAST_REG != 0 {
        return Err((CmdError::BadParam, Some("fast_reg")));
    }
    let mut raw = [0u8; MPT_ENTRY_SIZE];
    raw.copy_from_slice(&b[..MPT_ENTRY_SIZE]);
    let pd = pd_flags & PD_MASK;
    if flags & flag::PHYSICAL != 0 {
        // mlx4_mr_enable with no MTT (order < 0): mtt_addr 0.
        if mtt_addr != 0 || length == 0 || start.checked_add(length - 1).is_none() {
            return Err((CmdError::BadParam, None));
        }
        return Ok(Mpt {
            key,
            pd,
            flags,
            start,
            length,
            first_mtt: 0,
            shift: STRICT_MIN_SHIFT,
            pages: Vec::new(),
            raw,
        });
    }
    if length == 0 || length > 1 << LOG_MAX_MR_SIZE || start.checked_add(length).is_none() {
        return Err((CmdError::BadParam, None));
    }
    if !(STRICT_MIN_SHIFT..=STRICT_MAX_SHIFT).contains(&shift) {
        return Err((CmdError::BadParam, None));
    }
    let n = pages_spanned_of(start, length, shift);
    if n > crate::firmware::mtt::MAX_ENTRIES {
        return Err((CmdError::BadParam, None));
    }
    let pages = fw
        .mr_pages(env, mtt_addr, shift, n)
        .map_err(|e| (e, None))?;
    Ok(Mpt {
        key,
        pd,
        flags,
        start,
        length,
        first_mtt: (mtt_addr / u64::from(MTT_ENTRY_SIZE)) as u32,
        shift,
        pages,
        raw,
    })
}

/// WRITE_MTT, SW2HW_MPT, HW2SW_MPT.
impl MrTable {
    /// The MPT count INIT_HCA set (the HCA is up for every MPT command,
    /// `Firmware::command`).
    fn follow(&mut self, fw: &Firmware) -> Result<(), CmdError> {
        self.log_mpts = fw.hca().ok_or(CmdError::BadSysState)?.log_mpt_sz;
        Ok(())
    }

    /// The MPT in_mod names: the firmware checked it against INIT_HCA's
    /// count (`Firmware::context_in_icm` for SW2HW_MPT), and an index past
    /// it is in no MPT.
    fn mpt_index(&self, in_mod: u32) -> Result<u32, CmdError> {
        let bound = 1u64 << self.log_mpts.min(32);
        if in_mod == 0 || u64::from(in_mod) >= bound {
            return Err(CmdError::BadIndex);
        }
        Ok(in_mod)
    }

    /// WRITE_MTT: in_mod entries from the mailbox's first index on, into
    /// the MTT table in ICM.
    pub(crate) fn write_mtt<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        r: &CommandRequest,
        fw: &Firmware,
    ) -> CmdResult {
        let n = r.in_mod;
        if r.op_mod != 0 || n == 0 || n > MAX_WRITE_MTT {
            return Err(CmdError::BadParam);
        }
        let len = WRITE_MTT_HEADER + 8 * n as usize;
        let mb = read_mailbox(env, r.in_param, len)?;
        let first = be64(&mb, 0);
        let end = first.saturating_add(u64::from(n));
        if first == 0 || end > u64::from(NUM_MTTS) || be64(&mb, 8) != 0 {
            return Err(CmdError::BadParam);
        }
        let first = first as u32;
        let entries: Vec<u64> = (0..n as usize)
            .map(|i| be64(&mb, WRITE_MTT_HEADER + 8 * i))
            .collect();
        if entries
            .iter()
            .any(|e| e & MTT_PRESENT == 0 || e & 0xffe != 0)
        {
            return Err(CmdError::BadParam);
        }
        if let Some(user) = self.user_of(first, n) {
            env.protocol_error(
                Code::MttBusy,
                format!(
                    "WRITE_MTT of entries {first}..{} while MPT {user} in hardware \
                     ownership uses them",
                    first + n
                ),
            );
            return Err(CmdError::ResourceBusy);
        }
        fw.write_mtt(env, u64::from(first), &entries)?;
        env.counters.global.mtt_entries_written += u64::from(n);
        env.trace
            .record("mtt", || json!({"first": first, "count": n}));
        Ok(None)
    }

    /// SW2HW_MPT: the region in the mailbox becomes MPT in_mod.
    pub(crate) fn sw2hw_mpt<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        r: &CommandRequest,
        fw: &Firmware,
    ) -> CmdResult {
        self.follow(fw)?;
        let index = self.mpt_index(r.in_mod)?;
        if self.mpts.contains_key(&index) {
            return Err(CmdError::BadResState);
        }
        if r.op_mod != 0 {
            return Err(CmdError::BadParam);
        }
        let mb = read_mailbox(env, r.in_param, MPT_ENTRY_SIZE)?;
        let mpt = parse_mpt(env, fw, index, &mb)?;
        self.parked.remove(&index);
        env.trace.record("mpt", || {
            json!({"op": "sw2hw", "index": index, "key": mpt.key, "pd": mpt.pd,
                   "flags": mpt.flags, "start": mpt.start, "length": mpt.length,
                   "mtt": mpt.first_mtt, "shift": mpt.shift,
                   "pages": mpt.pages.len()})
        });
        self.mpts.insert(index, mpt);
        Ok(None)
    }

    /// HW2SW_MPT: MPT in_mod back to software, its entry written into its
    /// dMPT slot in ICM with the status byte SW (`rereg`); opmod 0 also
    /// returns the entry in the out mailbox, opmod 1 has none.
    pub(crate) fn hw2sw_mpt<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        r: &CommandRequest,
        fw: &Firmware,
    ) -> CmdResult {
        self.follow(fw)?;
        let index = self.mpt_index(r.in_mod)?;
        let Some(mpt) = self.mpts.get(&index) else {
            return Err(CmdError::BadResState);
        };
        let raw = mpt.raw;
        if r.op_mod > 1 {
            return Err(CmdError::BadParam);
        }
        let in_icm = rereg::write_back(env, fw, index, &raw)?;
        if r.op_mod == 0 {
            write_mailbox(env, r.out_param, &raw)?;
        }
        self.mpts.remove(&index);
        if in_icm {
            self.parked.insert(index);
        }
        env.trace.record(
            "mpt",
            || json!({"op": "hw2sw", "index": index, "icm": in_icm}),
        );
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_spanned_counts_partial_pages() {
        assert_eq!(pages_spanned(0x1000, 0x1000), 1);
        assert_eq!(pages_spanned(0x1fff, 2), 2);
        assert_eq!(pages_spanned(0x1800, 0x2000), 3);
    }
}
