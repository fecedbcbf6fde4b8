// SPDX-License-Identifier: GPL-2.0

//! Memory regions: REG_MR and DEREG_MR against the adapter's table.

use super::Context;
use crate::{
    abi,
    hw::memory::mr::{CtxMr, MAX_CONTEXT_PAGES, MAX_MR_SIZE},
    region,
    sys::pin::Pinned,
};
use kernel::prelude::*;

impl Context {
    /// REG_MR: pins `[addr, addr + len)` of the calling process, maps it
    /// and registers it with the adapter as a region of this context.
    /// `report` tells the process the keys; if it fails, the region is
    /// taken out again and the call fails.
    pub(crate) fn reg_mr(
        &self,
        addr: u64,
        len: u64,
        access: u32,
        report: impl FnOnce(&abi::MrInfo) -> Result,
    ) -> Result {
        let perm = region::perm(access).ok_or(EINVAL)?;
        if len > MAX_MR_SIZE {
            return Err(EINVAL);
        }
        let pages = region::pages_spanned(addr, len).ok_or(EINVAL)? as u32;
        let mut state = self.state.lock();
        if state.mrs.is_full() || state.mrs.pages + pages > MAX_CONTEXT_PAGES {
            return Err(ENOSPC);
        }
        let first_page = addr & !(region::PAGE_SIZE - 1);
        let writable = access & abi::ACCESS_LOCAL_WRITE != 0;
        let pinned = Pinned::pin(first_page, pages as usize, writable)?;
        let key = self
            .adapter
            .register_mr(pinned, self.uar_index, (addr, len), perm)?;
        let info = abi::MrInfo {
            mr_handle: key,
            lkey: key,
            rkey: key,
            reserved: 0,
        };
        if let Err(e) = report(&info) {
            let pinned = self.adapter.deregister_mr(self.uar_index, key);
            drop(pinned);
            return Err(e);
        }
        state.mrs.push(CtxMr {
            key,
            start: addr,
            len,
            pages,
            perm,
        });
        Ok(())
    }

    /// DEREG_MR: takes the region out of the adapter and unpins it. Refused
    /// while a send of this context is outstanding: the adapter may still
    /// gather from it.
    pub(crate) fn dereg_mr(&self, handle: u32) -> Result {
        let fw = self.firmware();
        let mut guard = self.state.lock();
        let state = &mut *guard;
        if state.mrs.find(handle).is_none() {
            return Err(ENOENT);
        }
        self.reap(fw, state)?;
        // A QP in ERR touches no memory again: its WQEs are flushed.
        if state
            .qps
            .iter()
            .flatten()
            .any(|q| q.head != q.tail && !q.failed)
        {
            return Err(EBUSY);
        }
        let pinned = self.adapter.deregister_mr(self.uar_index, handle)?;
        state.mrs.remove(handle);
        drop(pinned);
        Ok(())
    }
}
