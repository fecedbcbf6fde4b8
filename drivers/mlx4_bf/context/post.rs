// SPDX-License-Identifier: GPL-2.0

//! POST_SEND: the WQE copied in from user space, checked, stamped, and
//! written to the BlueFlame page or to the send queue with a doorbell.

use super::{Context, Qp, State};
use crate::{
    abi::{self, Reject},
    adapter::Hw,
    hw::be_io::BeMmio,
    hw::geometry::{QP_BUF_BYTES, SEND_BUFS_BYTES, SQ_ENTRIES, SQ_STRIDE},
    hw::qp,
    hw::umem::{self, QP_AREA_BYTES},
    hw::writer::Writer,
    layout, region, wqe,
};
use kernel::{io::Io, prelude::*, uaccess::UserSliceReader};

/// Where a post's WQE comes from.
pub(crate) enum WqeSource<'a> {
    /// Copied in from user memory, all of it.
    User(UserSliceReader),
    /// This many bytes staged in the QP's WQE page of the area.
    Staged(usize),
    /// Built by the kernel (the kernel ping): its gathers may name the
    /// reserved lkey, DMA addresses of the kernel's own memory.
    Kernel(&'a [u8]),
}

/// One POST_SEND, its attributes read.
pub(crate) struct SendRequest<'a> {
    pub(crate) handle: u32,
    /// `MLX4_BF_POST_F_*`, at most one of them.
    pub(crate) flags: u32,
    pub(crate) wqe: WqeSource<'a>,
    /// A message for the kernel's send buffer of the WQE's slot.
    pub(crate) payload: Option<UserSliceReader>,
}

impl Context {
    /// Posts one send WQE. `report`, if given, tells the process what was
    /// done; it runs before the device sees the WQE, so a failed report
    /// posted nothing.
    #[inline(always)]
    pub(crate) fn post_send(
        &self,
        req: SendRequest<'_>,
        report: Option<impl FnOnce(&abi::PostResult) -> Result>,
    ) -> Result {
        let SendRequest {
            handle,
            flags,
            wqe,
            payload,
        } = req;
        let (len, whole) = match &wqe {
            WqeSource::User(r) => (r.len(), false),
            WqeSource::Staged(n) => (*n, true),
            WqeSource::Kernel(b) => (b.len(), true),
        };
        let kernel = matches!(wqe, WqeSource::Kernel(_));
        if len == 0 || len > wqe::MAX_WQE_LEN || (whole && len % 16 != 0) {
            return Err(self.reject(Reject::Length, EINVAL));
        }
        if payload
            .as_ref()
            .is_some_and(|p| p.is_empty() || p.len() > abi::MAX_PAYLOAD)
        {
            return Err(self.reject(Reject::Length, EINVAL));
        }

        let mut guard = self.state.lock();
        let state = &mut *guard;
        let qp_index = self
            .find_qp(state, handle)
            .map_err(|e| self.reject(Reject::Qp, e))?;
        if self.user_posted() {
            // User space owns the send queues of this context's QPs.
            return Err(self.reject(Reject::Qp, EINVAL));
        }
        match wqe {
            WqeSource::User(mut w) => w
                .read_slice(&mut state.wqe.0[..len])
                .map_err(|e| self.reject(Reject::Fault, e))?,
            WqeSource::Staged(_) => self.user_area(state)?.read_qwords(
                qp_index * QP_AREA_BYTES + umem::WQE_OFFSET,
                &mut state.wqe.0[..len],
            )?,
            WqeSource::Kernel(b) => crate::sys::copy::words(&mut state.wqe.0[..len], b),
        }
        let State { wqe, mrs, .. } = &mut *state;
        let buf = &mut wqe.0;
        let mut info =
            wqe::validate(&buf[..len], wqe::MAX_WQE_LEN).map_err(|r| self.reject(r, EINVAL))?;
        // Every gather names one of this context's regions and stays inside
        // it; an RDMA read's segments, where its data lands, name regions
        // registered with LOCAL_WRITE. The reserved lkey, which makes an
        // address a DMA address (the kernel's receive and send buffers),
        // names none of them; only the kernel's own WQEs may use it.
        let hca = self.hca();
        let lkey = hca.dev_cap.reserved_lkey;
        if info.gather_segs != 0 {
            region::check_gathers(&buf[..len], &info, |k| match mrs.find(k) {
                Some(m) => Some((m.start, m.len, m.perm)),
                None if kernel && k == lkey => Some((0, u64::MAX, region::KERNEL_DMA_PERM)),
                None => None,
            })
            .map_err(|r| self.reject(r, EACCES))?;
        }

        self.scan_recv(state, qp_index)?;
        self.make_room(hca, state, qp_index)?;
        let State {
            qps,
            bf_half,
            wqe,
            payload: kbuf,
            mrs,
            ..
        } = state;
        let buf = &mut wqe.0;
        let Some(qp) = qps[qp_index].as_mut() else {
            return Err(ENOENT);
        };
        let head = qp.head;
        let mut len = len;
        let payload_len = match payload {
            Some(mut p) => {
                // The message into the kernel's buffer of this send-queue
                // slot (free: its last WQE completed), named by a data
                // segment the kernel appends.
                let n = p.len();
                p.read_slice(&mut kbuf[..n])
                    .map_err(|e| self.reject(Reject::Fault, e))?;
                let dma = self.hw()?.send_pool.dma_handle() + send_buf_offset(qp) as u64;
                len = wqe::append_kernel_gather(buf, len, &info, (dma, lkey, n as u32))
                    .map_err(|r| self.reject(r, EINVAL))?;
                info = wqe::validate(&buf[..len], wqe::MAX_WQE_LEN)
                    .map_err(|r| self.reject(r, EINVAL))?;
                n
            }
            None => 0,
        };
        // An RDMA write lands in a region of the peer's context that takes
        // remote writes, all of it; an RDMA read reads one that allows remote
        // reads. A peer in this context (a QP connected to itself, say) is
        // checked without the adapter's locks.
        if region::is_rdma(info.opcode) {
            let checked = if qp.peer_local {
                region::check_rdma(&buf[..len], &info, |rkey| {
                    mrs.find(rkey).map(|m| (m.start, m.len, m.perm))
                })
            } else {
                let peer = self.adapter.qps.lock().pd(qp.remote_qpn);
                region::check_rdma(&buf[..len], &info, |rkey| {
                    self.adapter.mrs.lock().remote(rkey, peer?)
                })
            };
            checked.map_err(|r| self.reject(r, EACCES))?;
        }
        let caps = &self.adapter.caps;
        let path = wqe::choose_path(&info, flags, caps.bf_buf_size())
            .map_err(|r| self.reject(r, EINVAL))?;
        qp::stamp_cq_update(&mut buf[..len])?;
        match path {
            wqe::Path::BlueFlame => wqe::stamp_blueflame(&mut buf[..len], qp.qpn, head, SQ_ENTRIES),
            wqe::Path::Doorbell => wqe::stamp_doorbell(&mut buf[..len], head, SQ_ENTRIES),
        }

        // Where the WQE goes and what the post reports, all decided and
        // checked before the device sees anything.
        let mut result = abi::PostResult {
            wqe_index: head & (SQ_ENTRIES - 1),
            ..Default::default()
        };
        let (offset, burst) = match path {
            wqe::Path::BlueFlame => {
                let burst = wqe::bf_burst_len(len);
                zero_qwords(&mut buf[len..burst]);
                let offset = (caps.bf_page_offset(self.uar_index) - caps.bf_area().0) as usize
                    + *bf_half as usize;
                result.path = abi::PATH_BLUEFLAME;
                result.bf_offset = caps.bf_area().0 + offset as u64;
                result.bytes_written = burst as u32;
                (offset, burst)
            }
            wqe::Path::Doorbell => {
                let doorbell = caps.doorbell_offset(self.uar_index) as usize;
                result.path = abi::PATH_DOORBELL;
                result.bf_offset = doorbell as u64;
                result.bytes_written = 4;
                (doorbell, 4)
            }
        };
        // The offsets against the mapped BAR: nothing fails after them.
        let check = |hw: &Hw| match path {
            wqe::Path::BlueFlame => Writer::check(hw.bar2.bf(), offset, burst),
            wqe::Path::Doorbell => hw.bar2.uar().io_addr::<u32>(offset).map(|_| ()),
        };
        // Copying the result out is the one step that could fail after the
        // device saw the WQE: it goes first, so a failed call posted nothing.
        if let Some(report) = report {
            {
                let hw = self.hw()?;
                check(&hw)?;
                if path == wqe::Path::BlueFlame {
                    result.store_blocks =
                        self.adapter
                            .writer
                            .blocks(hw.bar2.bf(), offset, &buf[..burst]);
                }
            }
            report(&result)?;
        }

        // One RCU read-side section for the hardware and the posting gate.
        let rcu = kernel::sync::rcu::read_lock();
        let hw = self.adapter.hw.try_access_with_guard(&rcu).ok_or(ENODEV)?;
        check(hw)?;
        hca.posting.try_access_with_guard(&rcu).ok_or(ENODEV)?;
        // From here on nothing fails: the offsets were checked above.
        if payload_len != 0 {
            write_send_buf(hw, qp, &kbuf[..payload_len]);
        }
        write_sq_slot(hw, qp, &buf[..len]);
        match path {
            wqe::Path::BlueFlame => {
                let written = self
                    .adapter
                    .writer
                    .write(hw.bar2.bf(), offset, &buf[..burst]);
                *bf_half = layout::next_bf_half(*bf_half, caps.bf_buf_size());
                match written {
                    Ok(blocks) => self.stats.blueflame(burst, blocks),
                    // A store block failed (s390: PCISTB status) after the
                    // WQE went into its send-queue slot, owned by the
                    // adapter: past the commit point. Ring the doorbell for
                    // it, as for a WQE that does not fit; the adapter
                    // executes a WQE once, whichever way it learns of it.
                    Err(_) => {
                        let doorbell = caps.doorbell_offset(self.uar_index) as usize;
                        BeMmio::new(hw.bar2.uar())
                            .try_write32(wqe::doorbell_value(qp.qpn), doorbell)?;
                        self.stats.doorbell(len);
                    }
                }
            }
            wqe::Path::Doorbell => {
                // writel() orders the send-queue stores above before the doorbell.
                BeMmio::new(hw.bar2.uar()).try_write32(wqe::doorbell_value(qp.qpn), offset)?;
                self.stats.doorbell(len);
            }
        }
        qp.head = head.wrapping_add(1);
        Ok(())
    }
}

/// Zeroes `b` (a multiple of 8 bytes long, 8-aligned: the BlueFlame
/// padding) with 8-byte stores; volatile, so they do not become a `memset`
/// (one instruction per byte under `-icount`).
fn zero_qwords(b: &mut [u8]) {
    let p = b.as_mut_ptr().cast::<u64>();
    for i in 0..b.len() / 8 {
        // SAFETY: `p + i` lies inside `b`; `b` starts at a multiple of 16 in
        // the 64-byte aligned WQE buffer.
        unsafe { core::ptr::write_volatile(p.add(i), 0) };
    }
}

/// Offset in `Hw::send_pool` of the kernel send buffer of `qp`'s next
/// send-queue slot.
fn send_buf_offset(qp: &Qp) -> usize {
    qp.slot * SEND_BUFS_BYTES + (qp.head & (SQ_ENTRIES - 1)) as usize * abi::MAX_PAYLOAD
}

/// Copies a message into the kernel send buffer of `qp`'s next slot. The
/// `&mut Qp`, borrowed from its context's locked state, is the proof that
/// nobody else writes there.
fn write_send_buf(hw: &Hw, qp: &mut Qp, msg: &[u8]) {
    let off = send_buf_offset(qp);
    if off + abi::MAX_PAYLOAD > hw.send_pool.size() || msg.len() > abi::MAX_PAYLOAD {
        return;
    }
    // SAFETY: Inside the pool (checked above); the buffer belongs to the
    // next send-queue slot of `qp`, exclusively borrowed (so its context's
    // lock is held), whose last WQE completed, so the device does not read
    // it until the WQE naming it is posted after this copy.
    unsafe {
        core::ptr::copy_nonoverlapping(
            msg.as_ptr(),
            hw.send_pool.as_mut_ptr().cast::<u8>().add(off),
            msg.len(),
        )
    };
}

/// Copies a stamped WQE (8-byte aligned: the WQE buffer) into `qp`'s next
/// send-queue slot, the control segment's first word last, so the adapter
/// never sees a valid owner bit on a partial WQE (`copy.rs`). The `&mut
/// Qp`, borrowed from its context's locked state, is the proof that nobody
/// else writes there.
#[inline(always)]
fn write_sq_slot(hw: &Hw, qp: &mut Qp, wqe_bytes: &[u8]) {
    let base = qp.slot * QP_BUF_BYTES + (qp.head & (SQ_ENTRIES - 1)) as usize * SQ_STRIDE;
    let len = wqe_bytes.len();
    if len < 16 || len % 8 != 0 || len > SQ_STRIDE || base + SQ_STRIDE > hw.qp_pool.size() {
        return;
    }
    let src = wqe_bytes.as_ptr();
    if !(src as usize).is_multiple_of(8) {
        return;
    }
    // SAFETY: `base + SQ_STRIDE` lies inside the pool and `16 <= len <=
    // SQ_STRIDE`, a multiple of 8 (checked above); the slot is 1 KiB
    // aligned in the page-aligned pool. It belongs to `qp`, exclusively
    // borrowed, and is free (its last WQE completed):
    // the device ignores it until the first word gives it the pass's owner
    // bit. `src` has `len` bytes, 8-byte aligned (checked).
    unsafe {
        let dst = hw.qp_pool.as_mut_ptr().cast::<u8>().add(base);
        crate::sys::copy::qwords(dst.add(8).cast(), src.add(8).cast(), len / 8 - 1);
        let v = src.add(4).cast::<u32>().read_unaligned();
        core::ptr::write_volatile(dst.add(4).cast::<u32>(), v);
        crate::hw::writer::wmb();
        let v = src.cast::<u32>().read_unaligned();
        core::ptr::write_volatile(dst.cast::<u32>(), v);
    }
}
