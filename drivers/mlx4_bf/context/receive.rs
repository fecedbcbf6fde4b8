// SPDX-License-Identifier: GPL-2.0

//! The receive side: POST_RECV, the scan of a receive CQ the process
//! polls, ARM_CQ and `poll()`.

use super::{fops, Context, State};
use crate::{
    abi,
    geometry::{QP_BUF_BYTES, RQ_ENTRIES},
    uverbs::Bundle,
};
use kernel::{fs::File, prelude::*, sync::poll::PollTable};

impl Context {
    /// Looks at the receive CQ of QP `index`: an error CQE there means the
    /// QP is in ERR, and sends must not reach it any more.
    #[inline(always)]
    pub(super) fn scan_recv(&self, state: &mut State, index: usize) -> Result {
        // No receive WQE outstanding, no CQE to read: a sender's case.
        if state.qps[index].as_ref().is_some_and(|q| q.recv.idle()) {
            return Ok(());
        }
        self.scan_recv_cq(state, index)
    }

    #[inline(never)]
    pub(super) fn scan_recv_cq(&self, state: &mut State, index: usize) -> Result {
        let area = self.user_area(state)?;
        let Some(qp) = state.qps[index].as_mut() else {
            return Err(ENOENT);
        };
        if qp.recv.scan(&area)? {
            qp.failed = true;
        }
        Ok(())
    }

    pub(super) fn post_recv(&self, b: &mut Bundle<'_>) -> Result {
        let handle = b.inline_u32(abi::ATTR_QP_HANDLE)?.ok_or(EINVAL)?;
        let count = b.inline_u32(abi::ATTR_RECV_COUNT)?.unwrap_or(1);
        b.check_unused()?;
        if count == 0 || count > RQ_ENTRIES {
            return Err(EINVAL);
        }
        let mut guard = self.state.lock();
        let state = &mut *guard;
        let index = self.find_qp(state, handle)?;
        self.scan_recv(state, index)?;
        let area = self.user_area(state)?;
        let lkey = self.hca().dev_cap.reserved_lkey;
        let Some(qp) = state.qps[index].as_mut() else {
            return Err(ENOENT);
        };
        if self.user_posted() {
            // Its buffer holds no receive buffers (`umem.rs`).
            return Err(crate::uverbs::eopnotsupp());
        }
        if qp.failed {
            return Err(EIO);
        }
        if !qp.recv.has_room(&area, count)? {
            // Like ibv_post_recv()'s ENOMEM: consume completions first.
            return Err(ENOSPC);
        }
        let hw = self.hw()?;
        let _posting = self.hca().posting.try_access().ok_or(ENODEV)?;
        qp.recv
            .post(&hw.qp_pool, qp.slot * QP_BUF_BYTES, &area, lkey, count)?;
        self.hca().stats.receives(count);
        Ok(())
    }

    pub(super) fn arm_cq(&self, b: &mut Bundle<'_>) -> Result {
        let handle = b.inline_u32(abi::ATTR_QP_HANDLE)?.ok_or(EINVAL)?;
        let flags = b.inline_u32(abi::ATTR_ARM_FLAGS)?.unwrap_or(0);
        b.check_unused()?;
        if flags & !abi::ARM_F_SOLICITED != 0 {
            return Err(EINVAL);
        }
        let mut guard = self.state.lock();
        let state = &mut *guard;
        let index = self.find_qp(state, handle)?;
        let area = self.user_area(state)?;
        let Some(qp) = state.qps[index].as_mut() else {
            return Err(ENOENT);
        };
        let hw = self.hw()?;
        // A doorbell like a post's: none after unbind has reset the CQs.
        let _posting = self.hca().posting.try_access().ok_or(ENODEV)?;
        let uar = self.adapter.caps.uar_offset(self.uar_index) as usize;
        qp.recv
            .arm(&area, hw.bar2.uar(), uar, flags & abi::ARM_F_SOLICITED != 0)
    }

    /// `poll()`: readable when a receive CQ has a CQE at the consumer index
    /// its process published; an error once the adapter is gone.
    pub(crate) fn poll(&self, file: &File, table: &PollTable<'_>) -> kernel::ffi::c_uint {
        table.register_wait(file, &self.adapter.events);
        if self.hw().is_err() {
            return fops::GONE;
        }
        let state = self.state.lock();
        let Ok(area) = self.user_area(&state) else {
            return 0;
        };
        let ready = state
            .qps
            .iter()
            .flatten()
            .any(|q| q.recv.readable(&area).unwrap_or(false));
        if ready {
            fops::READABLE
        } else {
            0
        }
    }
}
