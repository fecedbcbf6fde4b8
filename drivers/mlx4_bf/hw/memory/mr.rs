// SPDX-License-Identifier: GPL-2.0

//! Memory regions: memory its owner mapped (the kernel ping's buffers, the
//! RDMA provider's `ib_umem`s), its page list written to the adapter's MTT and an MPT entry naming it
//! handed to the adapter (SW2HW_MPT), as `mlx4_mr_enable()` does; the
//! table, one per adapter, that every key a WQE names is checked against;
//! and the MTT ranges of the provider's queues (`mlx4_mtt_init()`), from
//! the same allocator.
//!
//! Keys (`region`): MPT slot << 8 | tag; slot 0 is the firmware's (the
//! reserved lkey 0x8 names it) and never handed out. An MPT's protection
//! domain is its owner's: a PD of the RDMA provider, or a kernel context's
//! UAR index (the provider's PDs are numbered above every UAR index). QPs
//! carry theirs too, so the adapter refuses a key of another PD on its own.
//! A kernel context keeps its own regions (`CtxMrs`, at most
//! `MAX_MRS_PER_CONTEXT`) to check its posts without this table's lock.
//!
//! Lifetime: a region is taken out of the adapter (HW2SW_MPT) before its
//! owner unmaps its pages: at deregistration, and at unbind, when
//! `Firmware::shutdown()` returns every MPT still in hardware and
//! [`MrTable::close`] refuses new ones. The table's lock is taken before the
//! command lock.

use kernel::prelude::*;

use crate::{
    geometry::MAX_MPTS,
    hw::cmd::{CmdIf, CmdState, Command, Input, Op, HW2SW_NO_OUTPUT},
    hw::firmware::dev_cap::DevCap,
    hw::firmware::icm::Profile,
    hw::memory::mtt::QueueMtt,
    region::{self, Mpt, RangeAlloc},
};

/// MTT entries (4 KiB pages) this driver uses at most: 256 MiB registered.
const MTT_WORDS: usize = 1024;
/// Per open file.
pub(crate) const MAX_MRS_PER_CONTEXT: usize = 16;

/// One region in the adapter.
struct Entry {
    mpt: Mpt,
    /// The owning context (its UAR index, also its PD).
    owner: u32,
    /// Its MTT entries (0 for a PHYSICAL region).
    pages: usize,
}

/// Memory its owner mapped for DMA, to register
/// (`MrTable::register_mapped`).
pub(crate) struct MappedRegion<'a> {
    /// The DMA addresses of its pages, the MTT entries; none: a PHYSICAL
    /// region of every DMA address (`region::Mpt::physical`).
    pub(crate) pages: &'a [u64],
    /// Bytes of each page as a shift, 12 (4 KiB) or more: each address of
    /// `pages` is aligned to it (`mlx4_mr_alloc()`'s `page_shift`).
    pub(crate) page_shift: u32,
    /// The address WQEs name its first byte by (its DMA address), and its
    /// length; a PHYSICAL region's are 0 and all of them, whatever these say.
    pub(crate) start: u64,
    pub(crate) len: u64,
    pub(crate) perm: u32,
}

/// What a re-registration changes of a region
/// (`MrTable::reregister`).
pub(crate) struct Rereg<'a> {
    /// Its protection domain from now on (its own, or a new one).
    pub(crate) pd: u32,
    /// Its `region::perm()` bits from now on.
    pub(crate) perm: u32,
    /// New memory, if the translation changes (never a PHYSICAL region).
    pub(crate) translation: Option<MappedRegion<'a>>,
}

/// Why a re-registration failed, and whether the region is still in the
/// adapter as it was (`false`: out of it, its MTT given back, its key to
/// be forgotten; the owner may unmap its pages).
pub(crate) struct ReregError {
    pub(crate) err: Error,
    pub(crate) registered: bool,
}

/// What a context keeps of its region, to check its posts without the
/// adapter's table.
#[derive(Clone, Copy)]
pub(crate) struct CtxMr {
    pub(crate) key: u32,
    pub(crate) start: u64,
    pub(crate) len: u64,
    pub(crate) pages: u32,
    /// `region::perm()` bits: what the adapter may do with it.
    pub(crate) perm: u32,
}

/// A context's regions, packed at the front: a post searches only those
/// that exist (usually one or two).
pub(crate) struct CtxMrs {
    list: [CtxMr; MAX_MRS_PER_CONTEXT],
    len: usize,
    /// Pages they name.
    pub(crate) pages: u32,
}

impl CtxMrs {
    pub(crate) const fn new() -> Self {
        const NONE: CtxMr = CtxMr {
            key: 0,
            start: 0,
            len: 0,
            pages: 0,
            perm: 0,
        };
        CtxMrs {
            list: [NONE; MAX_MRS_PER_CONTEXT],
            len: 0,
            pages: 0,
        }
    }

    pub(crate) fn is_full(&self) -> bool {
        self.len == MAX_MRS_PER_CONTEXT
    }

    #[inline]
    pub(crate) fn find(&self, key: u32) -> Option<&CtxMr> {
        self.list[..self.len].iter().find(|m| m.key == key)
    }

    pub(crate) fn push(&mut self, m: CtxMr) {
        if let Some(slot) = self.list.get_mut(self.len) {
            *slot = m;
            self.len += 1;
            self.pages += m.pages;
        }
    }

    pub(crate) fn remove(&mut self, key: u32) -> Option<CtxMr> {
        let i = self.list[..self.len].iter().position(|m| m.key == key)?;
        let m = self.list[i];
        self.len -= 1;
        self.list[i] = self.list[self.len];
        self.pages -= m.pages;
        Some(m)
    }

    /// The last region, taken out.
    pub(crate) fn pop(&mut self) -> Option<CtxMr> {
        let key = self.list[..self.len].last()?.key;
        self.remove(key)
    }
}

pub(crate) struct MrTable {
    /// Set at unbind: nothing is mapped any more, nothing may be.
    closed: bool,
    entries: KVVec<Option<Entry>>,
    /// The tag of each slot's last key.
    tags: KVVec<u8>,
    first_slot: usize,
    mtt: KBox<RangeAlloc<MTT_WORDS>>,
}

impl MrTable {
    /// The table for a device with capabilities `cap` and the MPTs and
    /// MTT entries of `profile`: those after the firmware's and the queues'.
    /// Registering fails with `-EOPNOTSUPP` without MPTs to spare.
    pub(crate) fn new(cap: &DevCap, profile: &Profile) -> Result<Self> {
        let slots = (profile.num_mpts as usize).min(MAX_MPTS);
        let mut entries = KVVec::with_capacity(slots, GFP_KERNEL)?;
        let mut tags = KVVec::with_capacity(slots, GFP_KERNEL)?;
        for _ in 0..slots {
            entries.push(None, GFP_KERNEL)?;
            tags.push(0, GFP_KERNEL)?;
        }
        Ok(MrTable {
            closed: false,
            entries,
            tags,
            first_slot: (cap.reserved_mrws as usize).max(1),
            mtt: KBox::new(
                RangeAlloc::new(
                    (profile.queue_mtt.base + QueueMtt::ENTRIES) as usize,
                    profile.num_mtts as usize,
                ),
                GFP_KERNEL,
            )?,
        })
    }

    fn regions(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().flatten()
    }

    /// Regions the table can hold.
    pub(crate) fn capacity(&self) -> usize {
        self.entries.len().saturating_sub(self.first_slot)
    }

    /// Regions registered (debugfs).
    pub(crate) fn count(&self) -> usize {
        self.regions().count()
    }

    /// An MPT slot for a new region: `-ENODEV` once closed, `-EOPNOTSUPP`
    /// on an adapter without MPTs to spare, `-ENOSPC` when all are used.
    fn free_slot(&self) -> Result<usize> {
        if self.closed {
            return Err(ENODEV);
        }
        if self.entries.len() <= self.first_slot {
            return Err(crate::sys::errno::eopnotsupp());
        }
        (self.first_slot..self.entries.len())
            .find(|&s| self.entries[s].is_none())
            .ok_or(ENOSPC)
    }

    /// The key slot `slot`'s next region gets: its tag one on.
    fn next_key(&self, slot: usize) -> u32 {
        region::key(slot as u32, self.tags[slot].wrapping_add(1))
    }

    /// Region `e` is in the adapter in `slot`: recorded, its key's tag
    /// remembered for the slot's next key. Returns its key.
    fn record(&mut self, slot: usize, e: Entry) -> u32 {
        let key = e.mpt.key;
        self.tags[slot] = region::key_tag(key);
        self.entries[slot] = Some(e);
        key
    }

    /// Registers memory for protection domain `owner` (a context's, or
    /// the provider's): its pages, already mapped for DMA by its owner,
    /// which keeps them until the region is deregistered; or, with no
    /// pages, a PHYSICAL region. Returns its MPT as the adapter has it.
    pub(crate) fn register_mapped(
        &mut self,
        (cmd, write_mtt): (&CmdIf, impl Fn(u32, &[u64]) -> Result),
        owner: u32,
        r: &MappedRegion<'_>,
    ) -> Result<Mpt> {
        let slot = self.free_slot()?;
        let key = self.next_key(slot);
        let pages = r.pages.len();
        let mpt = if pages == 0 {
            Mpt::physical(key, owner, r.perm)
        } else {
            check_pages(r.pages, r.page_shift)?;
            let mtt = self.mtt.alloc(pages).ok_or(ENOSPC)?;
            let mpt = Mpt {
                key,
                pd: owner,
                start: r.start,
                len: r.len,
                perm: r.perm,
                mtt: mtt as u32,
                page_shift: r.page_shift,
                physical: false,
            };
            if let Err(e) = write_mtt(mtt as u32, r.pages) {
                self.mtt.free(mtt, pages);
                return Err(e);
            }
            mpt
        };
        if let Err(e) = mpt_create(cmd, &mut cmd.lock(), slot, &mpt) {
            if pages != 0 {
                self.mtt.free(mpt.mtt as usize, pages);
            }
            return Err(e);
        }
        self.record(slot, Entry { mpt, owner, pages });
        Ok(mpt)
    }

    /// Protection domain `owner`'s region `key`, and its slot.
    fn find(&self, owner: u32, key: u32) -> Option<(usize, &Entry)> {
        let slot = region::key_slot(key) as usize;
        let e = self.entries.get(slot)?.as_ref()?;
        (e.mpt.key == key && e.owner == owner).then_some((slot, e))
    }

    /// Takes protection domain `owner`'s region `key` out of the adapter;
    /// its owner may unmap its pages once this returned `Ok`.
    pub(crate) fn deregister(&mut self, cmd: &CmdIf, owner: u32, key: u32) -> Result {
        let (slot, _) = self.find(owner, key).ok_or(ENOENT)?;
        // A failed HW2SW_MPT leaves the region to the adapter: its slot is
        // never reused (as a QP that would not reset).
        mpt_destroy(cmd, &mut cmd.lock(), slot)?;
        let e = self.entries[slot].take().ok_or(ENOENT)?;
        if e.pages != 0 {
            self.mtt.free(e.mpt.mtt as usize, e.pages);
        }
        Ok(())
    }

    /// Re-registers protection domain `owner`'s region `key` in place, its
    /// key kept (`mlx4_ib_rereg_user_mr()`): the new MTT written first, then
    /// HW2SW_MPT and SW2HW_MPT of the same slot with the new entry (the old
    /// one again if that fails), then the old MTT given back. The owner may
    /// unmap the old pages once this returned `Ok` (a new translation), or
    /// unmap none.
    pub(crate) fn reregister(
        &mut self,
        (cmd, write_mtt): (&CmdIf, impl Fn(u32, &[u64]) -> Result),
        (owner, key): (u32, u32),
        change: &Rereg<'_>,
    ) -> Result<Mpt, ReregError> {
        let kept = |err| ReregError {
            err,
            registered: true,
        };
        let (slot, old, mut pages) = match self.find(owner, key) {
            Some((slot, e)) if e.pages != 0 => (slot, e.mpt, e.pages),
            _ => return Err(kept(ENOENT)),
        };
        let mut mpt = Mpt {
            pd: change.pd,
            perm: change.perm,
            ..old
        };
        if let Some(r) = &change.translation {
            check_pages(r.pages, r.page_shift).map_err(kept)?;
            let first = self.mtt.alloc(r.pages.len()).ok_or(kept(ENOSPC))?;
            if let Err(e) = write_mtt(first as u32, r.pages) {
                self.mtt.free(first, r.pages.len());
                return Err(kept(e));
            }
            (mpt.start, mpt.len, mpt.mtt, mpt.page_shift) =
                (r.start, r.len, first as u32, r.page_shift);
            pages = r.pages.len();
        }
        let new_mtt = change.translation.is_some().then_some((mpt.mtt, pages));
        let give_back = |table: &mut Self| {
            if let Some((first, n)) = new_mtt {
                table.mtt.free(first as usize, n);
            }
        };
        let mut st = cmd.lock();
        if let Err(e) = mpt_destroy(cmd, &mut st, slot) {
            drop(st);
            give_back(self);
            return Err(kept(e));
        }
        if let Err(err) = mpt_create(cmd, &mut st, slot, &mpt) {
            // The old entry back (its MTT and pages are still the owner's),
            // so that nothing is lost; where that fails too, the region is
            // out of the adapter, as mlx4_ib leaves its MR in software
            // ownership, which its deregistration does not take back.
            let restored = mpt_create(cmd, &mut st, slot, &old);
            drop(st);
            give_back(self);
            if restored.is_ok() {
                return Err(kept(err));
            }
            if let Some(e) = self.entries[slot].take() {
                self.mtt.free(e.mpt.mtt as usize, e.pages);
            }
            return Err(ReregError {
                err,
                registered: false,
            });
        }
        drop(st);
        if let Some(e) = self.entries[slot].take() {
            if new_mtt.is_some() {
                self.mtt.free(e.mpt.mtt as usize, e.pages);
            }
        }
        self.record(
            slot,
            Entry {
                mpt,
                owner: change.pd,
                pages,
            },
        );
        Ok(mpt)
    }

    /// At unbind, after `Firmware::shutdown()` returned every MPT: no region
    /// is registered any more.
    pub(crate) fn close(&mut self) {
        self.closed = true;
    }

    /// An MTT range for `pages` (DMA addresses of pages of `1 <<
    /// page_shift` bytes, each aligned to it), its entries written:
    /// `mlx4_mtt_init()` and `mlx4_write_mtt()`. `-ENOSPC` when no run of
    /// entries is free; `-ENODEV` after unbind.
    pub(crate) fn alloc_mtt(
        &mut self,
        write_mtt: impl Fn(u32, &[u64]) -> Result,
        pages: &[u64],
        page_shift: u32,
    ) -> Result<u32> {
        if self.closed {
            return Err(ENODEV);
        }
        check_pages(pages, page_shift)?;
        let first = self.mtt.alloc(pages.len()).ok_or(ENOSPC)?;
        if let Err(e) = write_mtt(first as u32, pages) {
            self.mtt.free(first, pages.len());
            return Err(e);
        }
        Ok(first as u32)
    }

    /// Gives back a range [`MrTable::alloc_mtt`] returned, of `count`
    /// entries from `first`; nothing in the device may use it any more.
    pub(crate) fn free_mtt(&mut self, first: u32, count: u32) {
        self.mtt.free(first as usize, count as usize);
    }

    /// `(start, len, region::perm() bits)` of the region `rkey` names, if
    /// it belongs to the context whose PD is `pd`.
    pub(crate) fn remote(&self, rkey: u32, pd: u32) -> Option<(u64, u64, u32)> {
        let e = self
            .entries
            .get(region::key_slot(rkey) as usize)?
            .as_ref()?;
        (e.mpt.key == rkey && e.mpt.pd == pd).then_some((e.mpt.start, e.mpt.len, e.mpt.perm))
    }
}

/// Page addresses for MTT entries: at least one, at most the MTT, pages of
/// 4 KiB to 2 GiB (`MLX4_PAGE_SIZE_SUPPORTED`), each aligned to its size.
fn check_pages(pages: &[u64], page_shift: u32) -> Result {
    let mask = 1u64.checked_shl(page_shift).ok_or(EINVAL)? - 1;
    if pages.is_empty()
        || pages.len() > MTT_WORDS * 64
        || !(region::PAGE_SHIFT..=31).contains(&page_shift)
        || pages.iter().any(|&p| p & mask != 0)
    {
        return Err(EINVAL);
    }
    Ok(())
}

/// SW2HW_MPT of `m` into `slot`, recorded in `st.live.mpts`.
fn mpt_create(cmd: &CmdIf, st: &mut CmdState, slot: usize, m: &Mpt) -> Result {
    if st.dead {
        return Err(ENODEV);
    }
    // Recorded below, or it would outlive unbind in the device.
    if slot >= st.live.mpts.len() {
        return Err(EINVAL);
    }
    let entry = region::mpt_entry(m);
    cmd.exec(
        st,
        Command::new(Op::Sw2HwMpt, slot as u32).input(Input::Mailbox(&entry)),
    )?;
    st.live.mpts.set(slot, true);
    Ok(())
}

/// HW2SW_MPT of `slot`, unless unbind already did it.
pub(crate) fn mpt_destroy(cmd: &CmdIf, st: &mut CmdState, slot: usize) -> Result {
    if slot >= st.live.mpts.len() {
        return Err(EINVAL);
    }
    if !st.live.mpts.contains(slot) {
        return Ok(());
    }
    cmd.exec(
        st,
        Command::new(Op::Hw2SwMpt, slot as u32).op_mod(HW2SW_NO_OUTPUT),
    )?;
    st.live.mpts.set(slot, false);
    Ok(())
}
