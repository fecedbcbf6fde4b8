// SPDX-License-Identifier: GPL-2.0

//! The adapter's QP buffers (send-queue slots) and QP numbers: which slot
//! and QPN each QP has, and its protection domain (its kernel context's UAR
//! index), by which an RDMA's rkey is checked against the peer's regions.

use crate::{
    geometry::{FIRST_QPN, KERNEL_QPS},
    wqe,
};

/// Send-queue slots and QP numbers of one adapter.
pub(crate) struct QpTable {
    used_slots: u64,
    next_qpn: u32,
    /// QPNs handed out lie in `FIRST_QPN..qpn_limit` (`KERNEL_QPN_END`).
    qpn_limit: u32,
    /// The QPN of each slot in use (0: free).
    qpns: [u32; KERNEL_QPS],
    /// Protection domain of each slot's QP: its kernel context's UAR index.
    pds: [u32; KERNEL_QPS],
}

impl QpTable {
    pub(super) fn new(qpn_limit: u32) -> Self {
        QpTable {
            used_slots: 0,
            next_qpn: FIRST_QPN,
            qpn_limit,
            qpns: [0; KERNEL_QPS],
            pds: [0; KERNEL_QPS],
        }
    }

    /// A free send-queue slot and a BlueFlame-safe QPN no QP uses; QPNs
    /// wrap back to `FIRST_QPN` at the limit.
    pub(crate) fn alloc(&mut self, pd: u32) -> Option<(usize, u32)> {
        let slot = (!self.used_slots).trailing_zeros() as usize;
        if slot >= KERNEL_QPS {
            return None;
        }
        let mut qpn = wqe::next_bf_safe_qpn(self.next_qpn);
        // At most KERNEL_QPS - 1 others are in use: this ends on a free QPN.
        for _ in 0..=KERNEL_QPS {
            if !(FIRST_QPN..self.qpn_limit).contains(&qpn) {
                qpn = wqe::next_bf_safe_qpn(FIRST_QPN);
            }
            if !self.qpns.contains(&qpn) {
                break;
            }
            qpn = wqe::next_bf_safe_qpn(qpn + 1);
        }
        self.next_qpn = wqe::next_bf_safe_qpn(qpn + 1);
        self.used_slots |= 1 << slot;
        self.qpns[slot] = qpn;
        self.pds[slot] = pd;
        Some((slot, qpn))
    }

    pub(crate) fn free(&mut self, slot: usize) {
        if slot < KERNEL_QPS {
            self.used_slots &= !(1 << slot);
            self.qpns[slot] = 0;
            self.pds[slot] = 0;
        }
    }

    /// The protection domain of QP `qpn`, if it exists.
    pub(crate) fn pd(&self, qpn: u32) -> Option<u32> {
        let slot = self.qpns.iter().position(|&q| q == qpn && q != 0)?;
        Some(self.pds[slot])
    }
}
