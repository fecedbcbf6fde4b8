// SPDX-License-Identifier: GPL-2.0

//! The kernel as a kernel context's user: what the kernel ping (`kping/`) needs
//! beyond posting (`post_send()`): it consumes its receive CQ, learns when
//! its sends completed, and registers its own memory.

use super::KernelContext;
use crate::hw::memory::mr::{CtxMr, MappedRegion};
use kernel::prelude::*;

impl KernelContext {
    /// The next message received on QP `handle`, copied into `out`, its
    /// receive buffer posted again; `None` if none arrived. `-EIO` once the
    /// QP is in error.
    pub(crate) fn take_message(&self, handle: u32, out: &mut [u8]) -> Result<Option<usize>> {
        let mut guard = self.state.lock();
        let state = &mut *guard;
        let index = self.find_qp(state, handle)?;
        let hw = self.hw()?;
        let area = self.recv_area(&hw, state)?;
        let Some(qp) = state.qps[index].as_mut() else {
            return Err(ENOENT);
        };
        let taken = qp.recv.take(&area, out)?;
        drop(hw);
        let Some(len) = taken else {
            // Nothing yet: unbound, nothing will come.
            self.adapter.posting()?;
            return Ok(None);
        };
        self.post_recv_locked(state, index, 1)?;
        Ok(Some(len))
    }

    /// Has every WQE posted on QP `handle` completed? Reaps the send CQ;
    /// `-EIO` once the QP is in error, `-ENODEV` once unbound.
    pub(crate) fn sends_done(&self, handle: u32) -> Result<bool> {
        let fw = self.firmware();
        let mut guard = self.state.lock();
        let state = &mut *guard;
        let index = self.find_qp(state, handle)?;
        self.reap(fw, state)?;
        match &state.qps[index] {
            Some(q) if q.failed => Err(EIO),
            Some(q) if q.head == q.tail => Ok(true),
            Some(_) => self.adapter.posting().map(|()| false),
            None => Err(ENOENT),
        }
    }

    /// Registers the kernel's memory `r` as a region of this kernel context;
    /// returns its key (lkey and rkey). The memory must stay mapped until
    /// the kernel context closes, which deregisters it.
    pub(crate) fn reg_kernel_mr(&self, r: &MappedRegion<'_>) -> Result<u32> {
        let mut state = self.state.lock();
        if state.mrs.is_full() {
            return Err(ENOSPC);
        }
        let mpt = self.adapter.register_mapped_mr(self.uar_index, r)?;
        state.mrs.push(CtxMr {
            key: mpt.key,
            start: mpt.start,
            len: mpt.len,
            pages: 0,
            perm: mpt.perm,
        });
        Ok(mpt.key)
    }
}
