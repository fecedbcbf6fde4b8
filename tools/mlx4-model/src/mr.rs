//! Memory regions (contract "Memory regions"): the MTT, the MPT table and
//! the commands that fill them, WRITE_MTT, SW2HW_MPT and HW2SW_MPT. The
//! model has no ICM: the MTT is a table of `NUM_MTTS` entries inside the
//! model (MTT base 0, so an MPT's `mtt_addr` is its first entry * 8), and
//! the MPTs live in the model as well. Which key reaches which region is
//! `keys`' question.
//!
//! An MPT takes a snapshot of its pages at SW2HW_MPT, like a cache the
//! driver must not change under the adapter; WRITE_MTT refuses to touch an
//! entry an MPT in hardware ownership uses, so the snapshot always equals
//! the table.

use crate::bytes::{be32, be64};
use crate::command::{read_mailbox, write_mailbox, CmdError, CmdResult, CommandRequest};
use crate::env::Env;
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::layout::{
    LOG_MAX_MR_SIZE, MAX_WRITE_MTT, MR_PAGE_SHIFT, MTT_ENTRY_SIZE, NUM_MPTS, NUM_MTTS,
};
use crate::protocol::Code;
use serde_json::json;
use std::collections::BTreeMap;

/// struct mlx4_mpt_entry, 64 bytes.
pub const MPT_ENTRY_SIZE: usize = 0x40;
/// WRITE_MTT's mailbox: be64 first index, be64 reserved, then the entries.
const WRITE_MTT_HEADER: usize = 16;
/// MLX4_MTT_FLAG_PRESENT.
pub const MTT_PRESENT: u64 = 1;
/// MLX4_MPT_PD_MASK.
pub const PD_MASK: u32 = 0x1_ffff;

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
    /// The DMA address of each page, from the MTT at SW2HW_MPT.
    pub pages: Vec<u64>,
    raw: [u8; MPT_ENTRY_SIZE],
}

/// One DMA access of a resolved segment: (address, bytes), never across a
/// 4 KiB page of a region.
pub type Chunk = (u64, usize);

/// Bytes of a 4 KiB page from `va` to its end.
pub fn page_rest(va: u64) -> u64 {
    let page = 1u64 << MR_PAGE_SHIFT;
    page - (va & (page - 1))
}

/// Pages a region of `length` bytes from `start` spans (`length` > 0).
pub fn pages_spanned(start: u64, length: u64) -> u64 {
    ((start + length - 1) >> MR_PAGE_SHIFT) - (start >> MR_PAGE_SHIFT) + 1
}

impl Mpt {
    /// The DMA accesses of `len` (> 0) bytes at `va`, inside the region.
    pub fn translate(&self, va: u64, len: u64) -> Vec<Chunk> {
        let mut out = Vec::new();
        let (mut va, mut left) = (va, len);
        while left > 0 {
            let i = ((va >> MR_PAGE_SHIFT) - (self.start >> MR_PAGE_SHIFT)) as usize;
            let n = left.min(page_rest(va));
            out.push((
                self.pages[i] | (va & ((1 << MR_PAGE_SHIFT) - 1)),
                n as usize,
            ));
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
            pages: pages.to_vec(),
            raw: [0; MPT_ENTRY_SIZE],
        }
    }
}

/// The model's MTT and MPT tables.
#[derive(Debug, Clone, Default)]
pub struct MrTable {
    /// Written MTT entries, as written (address | PRESENT).
    mtt: BTreeMap<u32, u64>,
    /// MPTs in hardware ownership, by index.
    mpts: BTreeMap<u32, Mpt>,
}

impl MrTable {
    /// The MPT at `index`, if it is in hardware ownership.
    pub fn mpt(&self, index: u32) -> Option<&Mpt> {
        self.mpts.get(&index)
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

    #[cfg(test)]
    pub fn insert_for_test(&mut self, index: u32, mpt: Mpt) {
        self.mpts.insert(index, mpt);
    }
}

/// Parses a SW2HW_MPT mailbox for MPT `index` against the MTT.
fn parse_mpt(index: u32, b: &[u8], mtt: &BTreeMap<u32, u64>) -> Result<Mpt, CmdError> {
    let flags = be32(b, 0x00);
    let key = be32(b, 0x08);
    let start = be64(b, 0x10);
    let length = be64(b, 0x18);
    let mtt_addr = be64(b, 0x2c);
    if flags & flag::REGION == 0 || flags & flag::PHYSICAL != 0 {
        return Err(CmdError::BadParam);
    }
    if key & (NUM_MPTS - 1) != index {
        return Err(CmdError::BadParam);
    }
    if length == 0 || length > 1 << LOG_MAX_MR_SIZE || start.checked_add(length).is_none() {
        return Err(CmdError::BadParam);
    }
    if be32(b, 0x38) != MR_PAGE_SHIFT {
        return Err(CmdError::BadParam);
    }
    if !mtt_addr.is_multiple_of(u64::from(MTT_ENTRY_SIZE)) {
        return Err(CmdError::BadParam);
    }
    let first = mtt_addr / u64::from(MTT_ENTRY_SIZE);
    let n = pages_spanned(start, length);
    if first == 0 || first + n > u64::from(NUM_MTTS) {
        return Err(CmdError::BadParam);
    }
    let pages = (first..first + n)
        .map(|i| mtt.get(&(i as u32)).map(|e| e & !0xfff))
        .collect::<Option<Vec<u64>>>()
        .ok_or(CmdError::BadParam)?;
    let mut raw = [0u8; MPT_ENTRY_SIZE];
    raw.copy_from_slice(&b[..MPT_ENTRY_SIZE]);
    Ok(Mpt {
        key,
        pd: be32(b, 0x0c) & PD_MASK,
        flags,
        start,
        length,
        first_mtt: first as u32,
        pages,
        raw,
    })
}

/// WRITE_MTT, SW2HW_MPT, HW2SW_MPT.
impl MrTable {
    fn mpt_index(in_mod: u32) -> Result<u32, CmdError> {
        if in_mod == 0 || in_mod >= NUM_MPTS {
            return Err(CmdError::BadIndex);
        }
        Ok(in_mod)
    }

    /// WRITE_MTT: in_mod entries from the mailbox's first index on.
    pub(crate) fn write_mtt<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        r: &CommandRequest,
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
        for (i, e) in entries.into_iter().enumerate() {
            self.mtt.insert(first + i as u32, e);
        }
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
    ) -> CmdResult {
        let index = Self::mpt_index(r.in_mod)?;
        if self.mpts.contains_key(&index) {
            return Err(CmdError::BadResState);
        }
        if r.op_mod != 0 {
            return Err(CmdError::BadParam);
        }
        let mb = read_mailbox(env, r.in_param, MPT_ENTRY_SIZE)?;
        let mpt = parse_mpt(index, &mb, &self.mtt)?;
        env.trace.record("mpt", || {
            json!({"op": "sw2hw", "index": index, "key": mpt.key, "pd": mpt.pd,
                   "flags": mpt.flags, "start": mpt.start, "length": mpt.length,
                   "mtt": mpt.first_mtt, "pages": mpt.pages.len()})
        });
        self.mpts.insert(index, mpt);
        Ok(None)
    }

    /// HW2SW_MPT: MPT in_mod back to software; opmod 0 returns the entry
    /// in the out mailbox, opmod 1 has none.
    pub(crate) fn hw2sw_mpt<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        r: &CommandRequest,
    ) -> CmdResult {
        let index = Self::mpt_index(r.in_mod)?;
        let Some(mpt) = self.mpts.get(&index) else {
            return Err(CmdError::BadResState);
        };
        let raw = mpt.raw;
        match r.op_mod {
            0 => write_mailbox(env, r.out_param, &raw)?,
            1 => {}
            _ => return Err(CmdError::BadParam),
        }
        self.mpts.remove(&index);
        env.trace
            .record("mpt", || json!({"op": "hw2sw", "index": index}));
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::{put_be32, put_be64};

    fn entry(flags: u32, key: u32, start: u64, length: u64, mtt_addr: u64) -> [u8; 64] {
        let mut b = [0u8; 64];
        put_be32(&mut b, 0x00, flags);
        put_be32(&mut b, 0x08, key);
        put_be32(&mut b, 0x0c, 0x3_0005); // pd 0x10005 and a flag above the mask
        put_be64(&mut b, 0x10, start);
        put_be64(&mut b, 0x18, length);
        put_be64(&mut b, 0x2c, mtt_addr);
        put_be32(&mut b, 0x38, 12);
        b
    }

    #[test]
    fn parse_takes_the_pages_and_refuses_what_it_cannot_translate() {
        let mtt: BTreeMap<u32, u64> = [(4, 0x5000 | 1), (5, 0x3000 | 1)].into();
        let ok = entry(flag::REGION | flag::SW_OWNS, 0x0100_0007, 0x10ff0, 0x20, 32);
        let m = parse_mpt(7, &ok, &mtt).unwrap();
        assert_eq!(
            (m.pd, m.first_mtt, m.pages.clone()),
            (0x1_0005, 4, vec![0x5000, 0x3000])
        );
        assert_eq!(m.translate(0x10ffc, 8), vec![(0x5ffc, 4), (0x3000, 4)]);
        let bad = [
            entry(0, 0x0100_0007, 0x10ff0, 0x20, 32),
            entry(
                flag::REGION | flag::PHYSICAL,
                0x0100_0007,
                0x10ff0,
                0x20,
                32,
            ),
            entry(flag::REGION, 0x0100_0008, 0x10ff0, 0x20, 32),
            entry(flag::REGION, 0x0100_0007, 0x10ff0, 0, 32),
            entry(flag::REGION, 0x0100_0007, u64::MAX - 4, 0x20, 32),
            entry(flag::REGION, 0x0100_0007, 0, (1 << 32) + 1, 32),
            entry(flag::REGION, 0x0100_0007, 0x10ff0, 0x20, 33),
            entry(flag::REGION, 0x0100_0007, 0x10ff0, 0x20, 40), // entry 6 unwritten
            entry(flag::REGION, 0x0100_0007, 0x10ff0, 0x20, 0),
        ];
        for (i, b) in bad.iter().enumerate() {
            assert_eq!(parse_mpt(7, b, &mtt), Err(CmdError::BadParam), "case {i}");
        }
        let mut big_pages = ok;
        put_be32(&mut big_pages, 0x38, 21);
        assert_eq!(parse_mpt(7, &big_pages, &mtt), Err(CmdError::BadParam));
    }

    #[test]
    fn pages_spanned_counts_partial_pages() {
        assert_eq!(pages_spanned(0x1000, 0x1000), 1);
        assert_eq!(pages_spanned(0x1fff, 2), 2);
        assert_eq!(pages_spanned(0x1800, 0x2000), 3);
    }
}
