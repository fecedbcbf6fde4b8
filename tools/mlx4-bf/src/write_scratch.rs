// SPDX-License-Identifier: GPL-2.0

//! The registered region that `post`, `lat`, `bench` and `stress` write
//! into and gather from.

use anyhow::Result;
use mlx4_bf_core::{abi, wqe};

use crate::{
    device::Device,
    mr::{self, Mr},
    rdma_write::{build_rdma_write, carry, max_wqe, payload, Carry},
};

/// The registered memory behind the RDMA writes of `post`, `lat`, `bench`
/// and `stress`. A new QP is connected to itself, so the write's target
/// must be a region of this same context registered for remote writes
/// (`ACCESS_REMOTE_WRITE`, which needs `LOCAL_WRITE`); a payload that does
/// not fit a WQE inline is gathered from the region's first bytes. Source
/// and target lie apart when the driver allows a region of both.
pub struct WriteScratch {
    mr: Mr,
    /// Offset of the write's target in the region.
    dst: usize,
    /// The payload: `i as u8` at byte `i`, also in the region at 0.
    data: Vec<u8>,
    max_wqe: usize,
}

impl WriteScratch {
    /// Registers room for payloads of up to `max_payload` bytes with the
    /// context of `dev`.
    pub fn new(dev: &Device, info: &abi::DeviceInfo, max_payload: usize) -> Result<Self> {
        let half = max_payload.max(1).next_multiple_of(mr::PAGE);
        let (len, dst) = if mr::reg_refusal(info, 2 * half).is_none() {
            (2 * half, half)
        } else {
            // The write then copies the payload onto itself.
            (half, 0)
        };
        let mr = Mr::register(dev, info, len, abi::ACCESS_ALL)?;
        let data = payload(max_payload);
        mr.write(0, &data);
        Ok(WriteScratch {
            mr,
            dst,
            data,
            max_wqe: max_wqe(info),
        })
    }

    /// The WQE of an RDMA write of `payload` bytes into the region, inline
    /// when it fits (and `gather` is not asked for), else gathered from it;
    /// `None` above the size the region was made for.
    pub fn build(
        &self,
        buf: &mut [u8; wqe::MAX_WQE_LEN],
        payload: usize,
        gather: bool,
    ) -> Option<(usize, Carry)> {
        let data = self.data.get(..payload)?;
        let src = (self.mr.addr(), self.mr.lkey());
        let dst = (self.mr.addr() + self.dst as u64, self.mr.rkey());
        build_rdma_write(
            buf,
            wqe::OPCODE_RDMA_WRITE,
            data,
            src,
            dst,
            gather,
            self.max_wqe,
        )
    }

    /// How a `payload`-byte write goes.
    pub fn carry(&self, payload: usize) -> Carry {
        carry(payload, true, self.max_wqe)
    }

    pub fn lkey(&self) -> u32 {
        self.mr.lkey()
    }

    pub fn len(&self) -> usize {
        self.mr.len()
    }

    /// Deregisters the region (retried while posts are outstanding).
    pub fn close(self) -> Result<()> {
        self.mr.close()
    }
}
