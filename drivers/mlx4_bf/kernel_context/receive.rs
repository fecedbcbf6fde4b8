// SPDX-License-Identifier: GPL-2.0

//! The receive half of a QP: its receive queue (each WQE naming one kernel
//! receive buffer) and its receive CQ in the kernel context's area
//! (`hw/memory/recv_area.rs`), consumed by the kernel ping.
//!
//! The kernel has to know two things the receive CQ says: how many
//! receive WQEs the device consumed (so the RQ never holds more than
//! `RQ_ENTRIES`) and whether the QP went to ERR (so no send reaches a QP
//! the device stopped). It reads the receive CQEs without consuming them
//! before each post. The device writes CQE `n + RCQ_ENTRIES` over CQE `n` only
//! for a receive WQE posted after the kernel saw CQE `n` (at most
//! `RQ_ENTRIES` are outstanding), so a CQE is never overwritten unseen.
//! The consumer index the kernel ping publishes bounds the posts too: no
//! more CQEs are outstanding than the CQ holds.
//!
//! The kernel context's side of it: posting receives, the scan of a receive CQ
//! before a post, arming the CQ.

use core::mem::offset_of;
use kernel::{
    dma::Coherent,
    io::{Io, Mmio},
    prelude::*,
};

use crate::{
    cqe::{Cqe, CQE_OPCODE_ERROR, CQE_OPCODE_MASK, CQE_OWNER},
    geometry::{
        CQE_SIZE, QP_BUF_BYTES, RCQ_ENTRIES, RECV_BUF_SIZE, RQ_DB_OFFSET, RQ_ENTRIES, RQ_OFFSET,
        RQ_STRIDE,
    },
    hw::cmd::be_mmio::BeMmio,
    hw::memory::recv_area::{Area, CQ_DB_OFFSET, CQ_OFFSET, QP_AREA_BYTES, RECV_OFFSET},
    ring,
};

use super::{KernelContext, State};

/// UAR +0x20: the CQ doorbell (arm), 8 bytes.
const UAR_CQ_DOORBELL: usize = 0x20;
const ARM_SOLICITED: u32 = 1 << 24;
const ARM_NEXT: u32 = 2 << 24;

/// The receive state of one QP.
pub(crate) struct Recv {
    /// Its receive CQ, and the `Live::cqs` bit recording it.
    pub(crate) cqn: u32,
    pub(crate) live_bit: usize,
    /// Its index in the kernel context: where its memory lies in the area.
    qp_index: usize,
    /// Receive WQEs posted, counted like CQEs (not wrapped).
    posted: u32,
    /// Receive CQEs the kernel has seen (not wrapped).
    seen: u32,
    /// `posted` when the RQ last started from index 0.
    rq_base: u32,
    /// `sn` of the next arm (2 bits).
    arm_sn: u32,
}

impl Recv {
    pub(crate) fn new(cqn: u32, live_bit: usize, qp_index: usize) -> Self {
        Recv {
            cqn,
            live_bit,
            qp_index,
            posted: 0,
            seen: 0,
            rq_base: 0,
            arm_sn: 0,
        }
    }

    fn area_off(&self, off: usize) -> usize {
        self.qp_index * QP_AREA_BYTES + off
    }

    /// Reads the receive CQEs the device wrote since the last look; returns
    /// whether one of them is an error CQE (the QP is then in ERR).
    pub(crate) fn scan(&mut self, area: &Area<'_>) -> Result<bool> {
        let mut error = false;
        while self.seen != self.posted {
            let at = self.area_off(CQ_OFFSET) + (self.seen % RCQ_ENTRIES) as usize * CQE_SIZE;
            let op_own = area.read8(at + offset_of!(Cqe, owner_sr_opcode))?;
            if !ring::sw_owned(op_own & CQE_OWNER != 0, self.seen, RCQ_ENTRIES) {
                break;
            }
            error |= op_own & CQE_OPCODE_MASK == CQE_OPCODE_ERROR;
            self.seen = self.seen.wrapping_add(1);
        }
        Ok(error)
    }

    /// The consumer index user space published (24 bits), as a count no
    /// larger than what the kernel has seen; a value that cannot be right
    /// counts as a whole CQ behind.
    fn user_ci(&self, area: &Area<'_>) -> Result<u32> {
        let published = area.read_be32(self.area_off(CQ_DB_OFFSET))? & 0xff_ffff;
        let behind = self.seen.wrapping_sub(published) & 0xff_ffff;
        Ok(self.seen.wrapping_sub(behind.min(RCQ_ENTRIES)))
    }

    /// Room for `n` more receive WQEs: in the RQ, and in the CQ for their
    /// completions next to those user space has not consumed yet.
    pub(crate) fn has_room(&self, area: &Area<'_>, n: u32) -> Result<bool> {
        let in_rq = self.posted.wrapping_sub(self.seen);
        let in_cq = self.posted.wrapping_sub(self.user_ci(area)?);
        Ok(in_rq + n <= RQ_ENTRIES && in_cq + n <= RCQ_ENTRIES)
    }

    /// Writes `n` receive WQEs into the RQ of the QP whose buffer is at
    /// `qp_off` in `pool`, then the RQ doorbell record: the device may take
    /// them from then on. The caller checked `has_room()`.
    pub(crate) fn post(
        &mut self,
        pool: &Coherent<[u8]>,
        qp_off: usize,
        area: &Area<'_>,
        lkey: u32,
        n: u32,
    ) -> Result {
        if qp_off + QP_BUF_BYTES > pool.size() {
            return Err(EINVAL);
        }
        let base = pool.as_mut_ptr().cast::<u8>();
        for _ in 0..n {
            let index = self.posted.wrapping_sub(self.rq_base) % RQ_ENTRIES;
            let buf = area.dma(self.area_off(RECV_OFFSET) + index as usize * RECV_BUF_SIZE);
            let mut wqe = [0u8; RQ_STRIDE];
            wqe[0..4].copy_from_slice(&(RECV_BUF_SIZE as u32).to_be_bytes());
            wqe[4..8].copy_from_slice(&lkey.to_be_bytes());
            wqe[8..16].copy_from_slice(&buf.to_be_bytes());
            // SAFETY: `qp_off + QP_BUF_BYTES` lies inside the pool (checked
            // above) and the RQ slot is inside the QP's buffer; the QP is this
            // context's (its lock is held) and the slot is free: the device
            // consumed its last WQE (`has_room()`).
            unsafe {
                core::ptr::copy_nonoverlapping(
                    wqe.as_ptr(),
                    base.add(qp_off + RQ_OFFSET + index as usize * RQ_STRIDE),
                    RQ_STRIDE,
                )
            };
            self.posted = self.posted.wrapping_add(1);
        }
        // The WQEs before the producer count that makes them valid.
        crate::sys::barrier::dma_wmb();
        self.write_doorbell_record(pool, qp_off)
    }

    fn write_doorbell_record(&self, pool: &Coherent<[u8]>, qp_off: usize) -> Result {
        let head = self.posted.wrapping_sub(self.rq_base) & 0xffff;
        if qp_off + QP_BUF_BYTES > pool.size() {
            return Err(EINVAL);
        }
        // SAFETY: Inside the pool (checked above), 4-byte aligned, and the
        // QP's own RQ doorbell record, which only this kernel context writes.
        unsafe {
            core::ptr::write_volatile(
                pool.as_mut_ptr()
                    .cast::<u8>()
                    .add(qp_off + RQ_DB_OFFSET)
                    .cast::<u32>(),
                head.to_be(),
            )
        };
        Ok(())
    }

    /// No receive WQE is outstanding: the RQ may be reset.
    pub(crate) fn idle(&self) -> bool {
        self.posted == self.seen
    }

    /// After the QP went through RESET (its RQ starts from index 0 again).
    pub(crate) fn restart(&mut self, pool: &Coherent<[u8]>, qp_off: usize) -> Result {
        self.rq_base = self.posted;
        self.write_doorbell_record(pool, qp_off)
    }

    /// The kernel as the CQ's consumer (a kernel ping's QP: no process
    /// maps it): the CQE at the consumer index, if the device wrote it,
    /// consumed; its message (`len` bytes, at most `out.len()`, a multiple
    /// of 8) copied into `out`. Returns the message's length; `-EIO` for an
    /// error CQE.
    pub(crate) fn take(&mut self, area: &Area<'_>, out: &mut [u8]) -> Result<Option<usize>> {
        let ci = area.read_be32(self.area_off(CQ_DB_OFFSET))? & 0xff_ffff;
        let at = self.area_off(CQ_OFFSET) + (ci % RCQ_ENTRIES) as usize * CQE_SIZE;
        let op_own = area.read8(at + offset_of!(Cqe, owner_sr_opcode))?;
        if !ring::sw_owned(op_own & CQE_OWNER != 0, ci, RCQ_ENTRIES) {
            return Ok(None);
        }
        // The CQE's other words after its owner bit.
        crate::sys::barrier::dma_rmb();
        if op_own & CQE_OPCODE_MASK == CQE_OPCODE_ERROR {
            return Err(EIO);
        }
        let len = area.read_be32(at + offset_of!(Cqe, byte_cnt))? as usize;
        // wqe_index, big-endian, is the high half of its word.
        let index = (area.read_be32(at + offset_of!(Cqe, wqe_index))? >> 16) % RQ_ENTRIES;
        if len > out.len() || len > RECV_BUF_SIZE {
            return Err(EMSGSIZE);
        }
        let buf = self.area_off(RECV_OFFSET) + index as usize * RECV_BUF_SIZE;
        area.read_qwords(buf, &mut out[..len.next_multiple_of(8)])?;
        area.write_be32(self.area_off(CQ_DB_OFFSET), (ci + 1) & 0xff_ffff)?;
        Ok(Some(len))
    }

    /// `mlx4_cq_arm()`: the arm word into the doorbell record, then the CQ
    /// doorbell in UAR page at `uar_off`, for the next (or next solicited)
    /// completion after the consumer index user space published.
    pub(crate) fn arm(
        &mut self,
        area: &Area<'_>,
        uar: &Mmio,
        uar_off: usize,
        solicited: bool,
    ) -> Result {
        let ci = area.read_be32(self.area_off(CQ_DB_OFFSET))? & 0xff_ffff;
        let cmd = if solicited { ARM_SOLICITED } else { ARM_NEXT };
        let sn = (self.arm_sn & 3) << 28;
        area.write_be32(self.area_off(CQ_DB_OFFSET) + 4, sn | cmd | ci)?;
        // Two big-endian dwords in one store (`mlx4_write64()`): the
        // command and CQN, then the consumer index. writeq() orders the
        // doorbell record store above before the doorbell.
        let doorbell = (u64::from(sn | cmd | self.cqn) << 32) | u64::from(ci);
        BeMmio::new(uar).try_write64(doorbell, uar_off + UAR_CQ_DOORBELL)?;
        self.arm_sn = self.arm_sn.wrapping_add(1);
        Ok(())
    }
}

impl KernelContext {
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
        let hw = self.hw()?;
        let area = self.recv_area(&hw, state)?;
        let Some(qp) = state.qps[index].as_mut() else {
            return Err(ENOENT);
        };
        if qp.recv.scan(&area)? {
            qp.failed = true;
        }
        Ok(())
    }

    /// Posts `count` of the kernel's receive buffers on QP `handle`.
    pub(crate) fn post_recv(&self, handle: u32, count: u32) -> Result {
        if count == 0 || count > RQ_ENTRIES {
            return Err(EINVAL);
        }
        let mut guard = self.state.lock();
        let state = &mut *guard;
        let index = self.find_qp(state, handle)?;
        self.post_recv_locked(state, index, count)
    }

    /// POST_RECV on QP `index`, the kernel context's lock held.
    pub(super) fn post_recv_locked(&self, state: &mut State, index: usize, count: u32) -> Result {
        self.scan_recv(state, index)?;
        let lkey = self.firmware().dev_cap.reserved_lkey;
        let rcu = kernel::sync::rcu::read_lock();
        let hw = self.adapter.resources_in(&rcu)?;
        let area = self.recv_area(hw, state)?;
        let Some(qp) = state.qps[index].as_mut() else {
            return Err(ENOENT);
        };
        if qp.failed {
            return Err(EIO);
        }
        if !qp.recv.has_room(&area, count)? {
            // Like ibv_post_recv()'s ENOMEM: consume completions first.
            return Err(ENOSPC);
        }
        self.adapter.posting_in(&rcu)?;
        qp.recv
            .post(&hw.qp_pool, qp.slot * QP_BUF_BYTES, &area, lkey, count)?;
        self.firmware().stats.receives(count);
        Ok(())
    }

    /// Arms QP `handle`'s receive CQ for its next (solicited) completion.
    pub(crate) fn arm_cq(&self, handle: u32, solicited: bool) -> Result {
        let mut guard = self.state.lock();
        let state = &mut *guard;
        let index = self.find_qp(state, handle)?;
        let rcu = kernel::sync::rcu::read_lock();
        let hw = self.adapter.resources_in(&rcu)?;
        let area = self.recv_area(hw, state)?;
        let Some(qp) = state.qps[index].as_mut() else {
            return Err(ENOENT);
        };
        // A doorbell like a post's: none after unbind has reset the CQs.
        self.adapter.posting_in(&rcu)?;
        let uar = self.adapter.caps().uar_offset(self.uar_index) as usize;
        qp.recv.arm(&area, hw.bar2.uar(), uar, solicited)
    }
}
