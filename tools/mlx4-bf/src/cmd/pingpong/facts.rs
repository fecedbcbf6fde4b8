// SPDX-License-Identifier: GPL-2.0

//! What the plan and the tables need to know of an endpoint: the kernel's
//! writer, the WQE limits, the QPs and the receive side, and the
//! registered regions of an RDMA-write run.

use super::options::Op;

/// One endpoint as the plan and the tables see it.
pub(super) struct Facts {
    /// The kernel's BlueFlame writer.
    pub(super) writer: &'static str,
    /// The largest WQE the QP takes (on the doorbell path).
    pub(super) max_wqe: usize,
    /// The largest WQE that goes by BlueFlame.
    pub(super) max_bf_wqe: usize,
    pub(super) qpn: u32,
    pub(super) peer_qpn: u32,
    pub(super) rq_entries: u32,
    /// Bytes of each receive buffer: a SEND's payload at most.
    pub(super) recv_buf_size: u32,
    pub(super) cq_entries: u32,
    /// `--op rdma-write-imm` only.
    pub(super) regions: Option<Regions>,
}

/// The registered regions of an RDMA-write run, as the tables name them.
#[derive(Clone, Copy)]
pub(super) struct Regions {
    /// Where the peer writes: this side's receive region.
    pub(super) recv_len: u64,
    pub(super) recv_rkey: u32,
    /// Where a gathered payload is read from.
    pub(super) send_lkey: u32,
    /// The peer's receive region.
    pub(super) peer_len: u64,
    pub(super) peer_rkey: u32,
}

impl Facts {
    pub(super) fn op(&self) -> Op {
        if self.regions.is_some() {
            Op::RdmaWriteImm
        } else {
            Op::Send
        }
    }

    /// The size of the peer's receive region, the largest RDMA write.
    pub(super) fn peer_len(&self) -> Option<u64> {
        self.regions.map(|r| r.peer_len)
    }
}
