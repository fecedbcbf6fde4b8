// SPDX-License-Identifier: GPL-2.0

//! The last two phases every post shares, whoever checked and stamped the
//! WQE: the kernel ping's sends (`kernel_context/post.rs`) and the RDMA
//! provider's QP_POST method. Place: where the WQE goes in BAR2,
//! worked out and checked before the device sees anything. Write: the send
//! queue's slot (when the kernel owns the queue), then the burst to the
//! BlueFlame slot or the doorbell, in one RCU read-side section with the
//! posting gate.

use kernel::prelude::*;

use super::{Adapter, Resources};
use crate::{
    abi,
    hw::bf::bar2::{BfSlot, Doorbell},
    wqe::{self, Path},
};

/// Where a stamped WQE goes, worked out and checked once: the BlueFlame
/// slot if it takes that path, and the doorbell, rung for the doorbell
/// path and for a BlueFlame write that failed.
#[derive(Clone, Copy)]
pub(crate) struct Placement {
    blueflame: Option<BfSlot>,
    doorbell: Doorbell,
}

impl Placement {
    pub(crate) fn blueflame(&self) -> Option<BfSlot> {
        self.blueflame
    }
}

/// How the adapter learnt of the WQE.
pub(crate) enum Posted {
    /// The burst of this many bytes, in this many store blocks.
    BlueFlame {
        bytes: usize,
        blocks: u32,
    },
    Doorbell,
}

impl Adapter {
    /// Place: the WQE of `len` bytes at the start of `buf` (8-byte aligned)
    /// goes to buffer `bf_half` of UAR `uar_index`'s BlueFlame page or to
    /// its doorbell, as `path` says; returns where, and what a post
    /// reports (but the store blocks, counted only for a report that asks:
    /// [`Adapter::store_blocks`]). A BlueFlame burst is padded with zeroes
    /// to whole 64-byte chunks.
    #[inline(always)]
    pub(crate) fn place(
        &self,
        (uar_index, bf_half): (u32, u32),
        path: Path,
        buf: &mut [u8],
        len: usize,
    ) -> Result<(Placement, abi::PostResult)> {
        let caps = self.caps();
        let doorbell = Doorbell::new(caps, uar_index)?;
        let mut result = abi::PostResult::default();
        let blueflame = match path {
            Path::BlueFlame => {
                let burst = wqe::bf_burst_len(len);
                crate::sys::copy::zero_words(buf.get_mut(len..burst).ok_or(EINVAL)?);
                let slot = BfSlot::new(caps, uar_index, bf_half, burst)?;
                result.path = abi::PATH_BLUEFLAME;
                result.bf_offset = caps.bf_area().0 + slot.offset() as u64;
                result.bytes_written = burst as u32;
                Some(slot)
            }
            Path::Doorbell => {
                result.path = abi::PATH_DOORBELL;
                result.bf_offset = doorbell.offset() as u64;
                result.bytes_written = 4;
                None
            }
        };
        Ok((
            Placement {
                blueflame,
                doorbell,
            },
            result,
        ))
    }

    /// The store blocks writing `buf` to `place` issues (0 for the doorbell
    /// and for write combining).
    pub(crate) fn store_blocks(&self, buf: &[u8], place: &Placement) -> u32 {
        place
            .blueflame
            .map_or(0, |slot| self.writer().blocks(buf, slot))
    }

    /// Write: in one RCU read-side section, while the adapter is bound and
    /// posting, `queue` (the kernel's copy into the send queue, if the
    /// kernel owns it), then the burst of `buf` to the BlueFlame slot or
    /// the send doorbell for QP `qpn`. Nothing fails once `queue` ran: a
    /// failed BlueFlame write (s390: PCISTB status) rings the doorbell, and
    /// the adapter executes a WQE once, whichever way it learns of it.
    #[inline(always)]
    pub(crate) fn write_wqe(
        &self,
        place: &Placement,
        qpn: u32,
        buf: &[u8],
        queue: impl FnOnce(&Resources),
    ) -> Result<Posted> {
        let rcu = kernel::sync::rcu::read_lock();
        let hw = self.resources_in(&rcu)?;
        self.posting_in(&rcu)?;
        queue(hw);
        if let Some(slot) = place.blueflame {
            if let Ok(blocks) = self.writer().write(hw.bar2.bf(), slot, buf) {
                return Ok(Posted::BlueFlame {
                    bytes: slot.len(),
                    blocks,
                });
            }
        }
        place.doorbell.ring(hw.bar2.uar(), qpn)?;
        Ok(Posted::Doorbell)
    }
}
