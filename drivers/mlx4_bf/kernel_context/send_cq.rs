// SPDX-License-Identifier: GPL-2.0

//! The send CQ: completions reaped so that a send-queue slot is reused only
//! after its CQE arrived (as mlx4_ib's cq.c).

use super::{KernelContext, State, SQ_FULL_WAIT_US};
use crate::{geometry::SQ_ENTRIES, hw::firmware::Firmware};
use kernel::{io::poll::read_poll_timeout, prelude::*, time::Delta};

impl KernelContext {
    /// Consumes the kernel context's CQEs (DMA memory only) and moves
    /// each QP's tail past the WQEs they complete.
    pub(super) fn reap(&self, fw: &Firmware, state: &mut State) -> Result {
        let State { qps, cq, .. } = state;
        let Some(cq) = cq.as_mut() else {
            return Ok(());
        };
        let hw = self.hw()?;
        let mut errors = 0;
        let n = cq.poll(&hw.queues, |c| {
            errors += u32::from(c.error.is_some());
            let Some(qp) = qps.iter_mut().flatten().find(|q| q.qpn == c.qpn) else {
                return;
            };
            // libmlx4: tail += (u16)(wqe_index - (u16)tail), then past it.
            // An index beyond what was posted is ignored.
            let done = u32::from(c.wqe_index.wrapping_sub(qp.tail as u16)) + 1;
            if done <= qp.head.wrapping_sub(qp.tail) {
                qp.tail = qp.tail.wrapping_add(done);
            }
            if c.error.is_some() {
                qp.failed = true;
            }
        })?;
        fw.stats.cqes(n, errors);
        Ok(())
    }

    /// Makes sure QP `index` has a free send-queue slot, waiting briefly
    /// for the device if it has none. The CQ is reaped only when the send
    /// queue is full: one reap then takes up to a queue of CQEs, whatever
    /// the adapter finished, and most posts read none. An error CQE is
    /// found there too, so a failed QP's posts fail with -EIO at the
    /// latest a queue later (the adapter flushes those in between, as a
    /// verbs QP the hardware moved to ERR).
    #[inline(always)]
    pub(super) fn make_room(&self, fw: &Firmware, state: &mut State, index: usize) -> Result {
        match &state.qps[index] {
            Some(q) if !q.failed && q.head.wrapping_sub(q.tail) < SQ_ENTRIES => Ok(()),
            _ => self.reap_for_room(fw, state, index),
        }
    }

    #[inline(never)]
    pub(super) fn reap_for_room(&self, fw: &Firmware, state: &mut State, index: usize) -> Result {
        // Slots in use; a QP in error never frees one again: -EIO at once,
        // not -EAGAIN after the wait.
        let in_use = |s: &State| match &s.qps[index] {
            Some(q) if q.failed => Err(EIO),
            Some(q) => Ok(q.head.wrapping_sub(q.tail)),
            None => Err(ENOENT),
        };
        // `make_room()` sends only a full queue, a failed or a missing QP
        // here: the last two fail before any reap.
        in_use(state)?;
        self.reap(fw, state)?;
        if in_use(state)? < SQ_ENTRIES {
            return Ok(());
        }
        // Polls DMA memory, sleeping in between (outside the RCU section).
        let waited = read_poll_timeout(
            || {
                self.reap(fw, state)?;
                in_use(state)
            },
            |n| *n < SQ_ENTRIES,
            Delta::from_micros(20),
            Delta::from_micros(SQ_FULL_WAIT_US),
        );
        fw.stats.sq_full(waited.is_err());
        match waited {
            Err(e) if e == ETIMEDOUT => Err(EAGAIN),
            Err(e) => Err(e),
            Ok(_) => Ok(()),
        }
    }
}
