// SPDX-License-Identifier: GPL-2.0

//! Memory regions: REG_MR and DEREG_MR against the adapter's table.

use super::Context;
use crate::{
    abi,
    mr::{CtxMr, MAX_CONTEXT_PAGES, MAX_MR_SIZE},
    pin::Pinned,
    region,
    uverbs::Bundle,
};
use kernel::prelude::*;

impl Context {
    /// REG_MR: pins `[addr, addr + len)` of the calling process, maps it
    /// and registers it with the adapter as a region of this context.
    pub(super) fn reg_mr(&self, b: &mut Bundle<'_>) -> Result {
        let addr = b.inline_u64(abi::ATTR_MR_ADDR)?.ok_or(EINVAL)?;
        let len = b.inline_u64(abi::ATTR_MR_LENGTH)?.ok_or(EINVAL)?;
        let access = b.inline_u32(abi::ATTR_MR_ACCESS)?.unwrap_or(0);
        let out = b.output(abi::ATTR_MR_INFO).ok_or(EINVAL)?;
        b.check_unused()?;
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
        let cmd = &self.hca().cmd;
        let key = self
            .adapter
            .mrs
            .lock()
            .register(cmd, pinned, self.uar_index, addr, len, perm)?;
        let info = abi::MrInfo {
            mr_handle: key,
            lkey: key,
            rkey: key,
            reserved: 0,
        };
        if let Err(e) = b.write(out, &info) {
            let pinned = self.adapter.mrs.lock().deregister(cmd, self.uar_index, key);
            drop(pinned);
            return Err(e);
        }
        state.mrs.push(CtxMr {
            key,
            start: addr,
            len,
            pages,
            remote_write: region::remote_writable(perm),
        });
        Ok(())
    }

    /// DEREG_MR: takes the region out of the adapter and unpins it. Refused
    /// while a send of this context is outstanding: the adapter may still
    /// gather from it.
    pub(super) fn dereg_mr(&self, b: &mut Bundle<'_>) -> Result {
        let handle = b.inline_u32(abi::ATTR_MR_HANDLE)?.ok_or(EINVAL)?;
        b.check_unused()?;
        let hca = self.hca();
        let mut guard = self.state.lock();
        let state = &mut *guard;
        if state.mrs.find(handle).is_none() {
            return Err(ENOENT);
        }
        self.reap(hca, state)?;
        // A QP in ERR touches no memory again: its WQEs are flushed.
        if state
            .qps
            .iter()
            .flatten()
            .any(|q| q.head != q.tail && !q.failed)
        {
            return Err(EBUSY);
        }
        let pinned = self
            .adapter
            .mrs
            .lock()
            .deregister(&hca.cmd, self.uar_index, handle)?;
        state.mrs.remove(handle);
        drop(pinned);
        Ok(())
    }
}
