// SPDX-License-Identifier: GPL-2.0

//! A kernel context's QPs: create, destroy and connect, and what each has in the
//! device (as mlx4_ib's qp.c): its send-queue slot, its receive CQ and its
//! part of the kernel context's area.

use super::{receive::Recv, KernelContext, Qp, State, SQ_BYTES};
use crate::{
    adapter::Resources,
    geometry::{QP_BUF_BYTES, RQ_DB_OFFSET},
    hw::memory::mtt::Pool,
    hw::memory::recv_area::{self, Area, QP_AREA_BYTES},
    hw::queues::qp,
};
use kernel::prelude::*;

impl KernelContext {
    /// A QP in RTS with its receive queue and CQ, connected to itself;
    /// returns its QPN.
    pub(crate) fn create_qp(&self) -> Result<u32> {
        let mut state = self.state.lock();
        let index = state.qps.iter().position(Option::is_none).ok_or(ENOSPC)?;
        let area = self.area(&mut state)?;
        let (slot, qpn) = self.adapter.alloc_qp(self.uar_index).ok_or(ENOSPC)?;
        let qp = match self.create_hw_qp(&mut state, area, index, slot, qpn) {
            Ok(qp) => qp,
            Err(e) => {
                self.free_slot(slot);
                return Err(e);
            }
        };
        state.qps[index] = Some(qp);
        Ok(qpn)
    }

    /// The kernel context's area of shared memory, taken with its first QP and
    /// cleared whole then: it may hold the bytes of the kernel context that had
    /// it before (its receive buffers and CQs).
    pub(super) fn area(&self, state: &mut State) -> Result<usize> {
        if let Some(area) = state.area {
            return Ok(area);
        }
        let area = self.adapter.take_area()?;
        state.area = Some(area);
        Ok(area)
    }

    /// The kernel context's receive area, in `hw`.
    pub(super) fn recv_area<'a>(&self, hw: &'a Resources, state: &State) -> Result<Area<'a>> {
        hw.recv_area(state.area.ok_or(EINVAL)?)
    }

    /// The QP context of the QP in buffer `slot` as QP `qpn`.
    pub(super) fn qp_params(
        &self,
        state: &State,
        slot: usize,
        qpn: u32,
        remote_qpn: u32,
        cqn_recv: u32,
    ) -> Result<qp::QpParams> {
        let hw = self.hw()?;
        let base = slot * QP_BUF_BYTES;
        if base + QP_BUF_BYTES > hw.qp_pool.size() {
            return Err(EINVAL);
        }
        Ok(qp::QpParams {
            qpn,
            remote_qpn,
            uar: self.uar_index,
            pd: self.uar_index,
            cqn_send: state.cq.as_ref().ok_or(EINVAL)?.cqn,
            cqn_recv,
            buf_mtt: self
                .firmware()
                .profile
                .queue_mtt
                .addr(Pool::KernelQps, base)?,
            rq_db_dma: hw.qp_pool.dma_handle() + (base + RQ_DB_OFFSET) as u64,
            rlid: self.firmware().lid(),
            rlkey: true,
        })
    }

    /// Sets the send queue of the QP buffer in `slot` to its initial
    /// ownership and clears its RQ doorbell record.
    pub(super) fn init_qp_buffer(&self, slot: usize) -> Result {
        let hw = self.hw()?;
        let base = slot * QP_BUF_BYTES;
        if base + QP_BUF_BYTES > hw.qp_pool.size() {
            return Err(EINVAL);
        }
        // SAFETY: The range is inside the pool (checked above) and is the
        // buffer of `slot`, this kernel context's QP, which is not in the device
        // (new, or reset); a slot whose previous QP the device could not
        // reset is never handed out again (`free_slot`): nobody else reads
        // or writes it.
        let buf = unsafe {
            core::slice::from_raw_parts_mut(
                hw.qp_pool.as_mut_ptr().cast::<u8>().add(base),
                QP_BUF_BYTES,
            )
        };
        qp::init_sq_ownership(&mut buf[..SQ_BYTES]);
        buf[SQ_BYTES..].fill(0);
        Ok(())
    }

    /// The kernel context's send CQ (with its first QP), the QP's receive CQ in
    /// the kernel context's area at `index`, and the QP taken to RTS, connected to
    /// itself.
    pub(super) fn create_hw_qp(
        &self,
        state: &mut State,
        area: usize,
        index: usize,
        slot: usize,
        qpn: u32,
    ) -> Result<Qp> {
        let fw = self.firmware();
        if state.cq.is_none() {
            let clear = |slot, st: &_| crate::hw::queues::cq::clear(&self.hw()?.queues, slot, st);
            state.cq = Some(fw.open_cq(self.uar_index, clear)?);
        }
        let qp_off = index * QP_AREA_BYTES;
        let cq_db = self.hw().and_then(|hw| {
            let mem = hw.recv_area(area)?;
            mem.clear_qp(index)?;
            Ok(mem.dma(qp_off + recv_area::CQ_DB_OFFSET))
        });
        let opened = cq_db.and_then(|cq_db| {
            fw.open_recv_cq(
                slot,
                self.uar_index,
                (Pool::Area(area), qp_off + recv_area::CQ_OFFSET),
                cq_db,
            )
        });
        let (cqn, live_bit) = match opened {
            Ok(cq) => cq,
            Err(e) => {
                self.release_cq_if_idle(state);
                return Err(e);
            }
        };
        let qp = Qp {
            qpn,
            slot,
            remote_qpn: qpn,
            peer_local: true,
            recv: Recv::new(cqn, live_bit, index),
            head: 0,
            tail: 0,
            failed: false,
        };
        let created = self
            .init_qp_buffer(slot)
            .and_then(|()| self.qp_params(state, slot, qpn, qpn, cqn))
            .and_then(|p| fw.create_qp(&p, slot));
        if let Err(e) = created {
            fw.close_recv_cq(cqn, live_bit);
            self.release_cq_if_idle(state);
            return Err(e);
        }
        Ok(qp)
    }

    /// 2RST_QP (nothing if unbind did it already), HW2SW_CQ of its receive
    /// CQ, and its buffer given back. Returns whether the device let go of
    /// both: if not, it may still write the QP's part of the area.
    pub(super) fn destroy_hw_qp(&self, qp: &Qp) -> bool {
        let fw = self.firmware();
        fw.destroy_qp(qp.slot);
        fw.close_recv_cq(qp.recv.cqn, qp.recv.live_bit);
        self.free_slot(qp.slot) && !fw.recv_cq_in_hw(qp.recv.live_bit)
    }

    /// Gives QP buffer `slot` back, unless a QP the device could not reset
    /// still uses it: the device may then read that buffer, so it is never
    /// handed out (nor cleared) again. Returns whether it was given back.
    pub(super) fn free_slot(&self, slot: usize) -> bool {
        let in_hw = self.firmware().qp_in_hw(slot);
        if !in_hw {
            self.adapter.free_qp(slot);
        }
        !in_hw
    }

    /// HW2SW_CQ once the kernel context has no QP left.
    pub(super) fn release_cq_if_idle(&self, state: &mut State) {
        if state.qps.iter().any(Option::is_some) {
            return;
        }
        if let Some(cq) = state.cq.take() {
            self.firmware().close_cq(&cq);
        }
    }

    /// The index in `State::qps` of the QP with handle `handle`.
    pub(super) fn find_qp(&self, state: &State, handle: u32) -> Result<usize> {
        state
            .qps
            .iter()
            .position(|q| q.as_ref().is_some_and(|q| q.qpn == handle))
            .ok_or(ENOENT)
    }

    /// Takes QP `handle` through RESET to RTS again, connected to QPN
    /// `remote` (24 bits).
    pub(crate) fn connect_qp(&self, handle: u32, remote: u32) -> Result {
        let fw = self.firmware();
        let mut guard = self.state.lock();
        let state = &mut *guard;
        let index = self.find_qp(state, handle)?;
        self.reap(fw, state)?;
        self.scan_recv(state, index)?;
        let (slot, qpn, cqn_recv, busy) = match &state.qps[index] {
            Some(q) => (
                q.slot,
                q.qpn,
                q.recv.cqn,
                q.head != q.tail || !q.recv.idle(),
            ),
            None => return Err(ENOENT),
        };
        if busy {
            // Sends or receives outstanding: RESET would drop them.
            return Err(EBUSY);
        }
        let params = self.qp_params(state, slot, qpn, remote, cqn_recv)?;
        self.init_qp_buffer(slot)?;
        let reconnected = fw.reconnect_qp(&params, slot);
        let local = state.qps.iter().flatten().any(|q| q.qpn == remote);
        let hw = self.hw()?;
        let Some(qp) = state.qps[index].as_mut() else {
            return Err(ENOENT);
        };
        // Whatever happened, the QP went through RESET: its queues start over.
        qp.head = 0;
        qp.tail = 0;
        qp.recv.restart(&hw.qp_pool, slot * QP_BUF_BYTES)?;
        match reconnected {
            Ok(()) => {
                qp.failed = false;
                qp.remote_qpn = remote;
                qp.peer_local = local;
                Ok(())
            }
            Err(e) => {
                // Not in the device any more (or in ERR): posts fail with -EIO.
                qp.failed = true;
                Err(e)
            }
        }
    }
}
