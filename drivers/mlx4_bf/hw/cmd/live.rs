// SPDX-License-Identifier: GPL-2.0

//! What exists in the device, so that unbind can take it down: the EQ,
//! the port, and every CQ, QP, SRQ and MPT from the command that put it there
//! until the one that took it out. The sets of numbers are bitmaps as
//! long as the profile INIT_HCA set up ([`Live::size`]).

use core::ops::Range;

use kernel::{bitmap::BitmapVec, prelude::*};

use crate::geometry::{KERNEL_QPS, MAX_EQS};

const _: () = assert!(MAX_EQS <= u32::BITS as usize);

/// A set of the numbers `0..len()`.
pub(crate) struct Numbers(BitmapVec);

impl Numbers {
    fn new(len: usize) -> Result<Self> {
        Ok(Numbers(BitmapVec::new(len, GFP_KERNEL)?))
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// The first member at or after `start`.
    pub(crate) fn next(&self, start: usize) -> Option<usize> {
        (start < self.len())
            .then(|| self.0.next_bit(start))
            .flatten()
    }

    pub(crate) fn contains(&self, n: usize) -> bool {
        self.next(n) == Some(n)
    }

    /// Adds or removes `n`; `false` if it is not below `len()`.
    pub(crate) fn set(&mut self, n: usize, member: bool) -> bool {
        if n >= self.len() {
            return false;
        }
        if member {
            self.0.set_bit(n);
        } else {
            self.0.clear_bit(n);
        }
        true
    }

    /// The first number of `range` that is not a member.
    pub(crate) fn first_free(&self, range: Range<usize>) -> Option<usize> {
        let end = range.end.min(self.len());
        (range.start < end)
            .then(|| self.0.next_zero_bit(range.start))
            .flatten()
            .filter(|&n| n < end)
    }

    fn is_empty(&self) -> bool {
        self.next(0).is_none()
    }

    fn clear(&mut self) {
        while let Some(n) = self.next(0) {
            self.0.clear_bit(n);
        }
    }
}

pub(crate) struct Live {
    /// EQs in hardware, a bit per `Eq::index`.
    eqs: u32,
    /// Port 1 is up (INIT_PORT); not a context, so not in [`Live::any`].
    pub(crate) port: bool,
    /// CQ slots with a CQ in hardware (slot `i` is CQN `first_cqn + i`):
    /// the contexts' send CQs, the receive CQs, then the provider's up to
    /// the profile's last CQ (`geometry::FIRST_PROVIDER_CQ`).
    pub(crate) cqs: Numbers,
    /// QPN of the kernel's QP in hardware per send-queue slot (0: none).
    pub(crate) qps: [u32; KERNEL_QPS],
    /// The provider's QPs in hardware, by QPN.
    pub(crate) user_qps: Numbers,
    /// The provider's SRQs in hardware, by SRQN.
    pub(crate) srqs: Numbers,
    /// MPTs in hardware ownership, by MPT index.
    pub(crate) mpts: Numbers,
}

impl Live {
    /// Nothing in the device, and no room for anything until [`Live::size`].
    pub(crate) fn new() -> Result<Self> {
        Ok(Live {
            eqs: 0,
            port: false,
            cqs: Numbers::new(0)?,
            qps: [0; KERNEL_QPS],
            user_qps: Numbers::new(0)?,
            srqs: Numbers::new(0)?,
            mpts: Numbers::new(0)?,
        })
    }

    /// Room for `cq_slots` CQs, QPNs below `num_qps`, SRQNs below
    /// `num_srqs` and `num_mpts` MPTs: the profile's. Before anything is
    /// created.
    pub(crate) fn size(
        &mut self,
        cq_slots: u32,
        (num_qps, num_srqs): (u32, u32),
        num_mpts: u32,
    ) -> Result {
        if self.any() {
            return Err(EBUSY);
        }
        self.cqs = Numbers::new(cq_slots as usize)?;
        self.user_qps = Numbers::new(num_qps as usize)?;
        self.srqs = Numbers::new(num_srqs as usize)?;
        self.mpts = Numbers::new(num_mpts as usize)?;
        Ok(())
    }

    /// Whether anything is (still) in the adapter.
    pub(crate) fn any(&self) -> bool {
        self.eqs != 0
            || !self.cqs.is_empty()
            || self.qps.iter().any(|&q| q != 0)
            || !self.user_qps.is_empty()
            || !self.srqs.is_empty()
            || !self.mpts.is_empty()
    }

    /// After a reset: nothing is in the adapter any more.
    pub(crate) fn forget_all(&mut self) {
        self.eqs = 0;
        self.port = false;
        self.cqs.clear();
        self.qps = [0; KERNEL_QPS];
        self.user_qps.clear();
        self.srqs.clear();
        self.mpts.clear();
    }

    /// Whether EQ `index` (`Eq::index`, below `geometry::MAX_EQS`) is in hardware.
    pub(crate) fn eq(&self, index: usize) -> bool {
        index < MAX_EQS && self.eqs & (1 << index) != 0
    }

    /// Records EQ `index` in hardware or not; an index beyond
    /// `geometry::MAX_EQS` is none.
    pub(crate) fn set_eq(&mut self, index: usize, live: bool) {
        if index < MAX_EQS {
            self.eqs = (self.eqs & !(1 << index)) | (u32::from(live) << index);
        }
    }

    /// Whether a CQ is in hardware under CQ slot `slot`.
    pub(crate) fn cq(&self, slot: usize) -> bool {
        self.cqs.contains(slot)
    }

    /// Records CQ slot `slot` as in hardware, or not.
    pub(crate) fn set_cq(&mut self, slot: usize, live: bool) {
        self.cqs.set(slot, live);
    }

    /// The first CQ slot of `slots` with no CQ in hardware.
    pub(crate) fn free_cq(&self, slots: Range<usize>) -> Option<usize> {
        self.cqs.first_free(slots)
    }
}
