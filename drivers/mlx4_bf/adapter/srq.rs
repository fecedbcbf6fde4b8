// SPDX-License-Identifier: GPL-2.0

//! The RDMA provider's shared receive queues, with plain values: an SRQN
//! above the firmware's reserved ones (`mlx4_srq_alloc_icm()`'s bitmap),
//! SW2HW_SRQ of a queue in user memory as `mlx4_ib_create_srq()` calls
//! `mlx4_srq_alloc()`, ARM_SRQ and QUERY_SRQ's limit, HW2SW_SRQ.
//!
//! An SRQ whose HW2SW_SRQ failed keeps its number, and the caller must
//! keep its memory (pinned, mapped) until unbind has reset the device.

use kernel::prelude::*;

use super::{Adapter, MttRange};
use crate::{
    hw::queues::srq::{self, SrqParams},
    srq_size::{SrqGeometry, SrqLimits},
};

/// An SRQ in user memory as the provider describes it.
pub(crate) struct SrqSpec<'a> {
    pub(crate) geometry: SrqGeometry,
    pub(crate) pd: u32,
    pub(crate) mtt: &'a MttRange,
    /// DMA address of its doorbell record.
    pub(crate) db_rec: u64,
}

/// An SRQ in the device, by its number.
pub(crate) struct SrqHandle {
    srqn: u32,
}

impl SrqHandle {
    pub(crate) fn srqn(&self) -> u32 {
        self.srqn
    }
}

impl Adapter {
    /// The limits an SRQ is sized against (`caps.max_srq_wqes`,
    /// `caps.max_srq_sge`: the receive gathers less the next segment).
    pub(crate) fn srq_limits(&self) -> SrqLimits {
        let c = &self.firmware.dev_cap;
        SrqLimits {
            max_srq_wqes: 1u32.checked_shl(c.log_max_srq_sz.into()).unwrap_or(0),
            max_srq_sge: u32::from(c.rdma.max_rq_sg).saturating_sub(1),
        }
    }

    /// SRQs the provider may have.
    pub(crate) fn srq_quota(&self) -> u32 {
        self.srqns.lock().count()
    }

    /// SW2HW_SRQ of `spec` under a free SRQN (`mlx4_srq_alloc()`);
    /// `-ENOSPC` when all are taken.
    pub(crate) fn create_srq(&self, spec: &SrqSpec<'_>) -> Result<SrqHandle> {
        let g = &spec.geometry;
        if g.buf_size() > spec.mtt.bytes() {
            return Err(EINVAL);
        }
        let srqn = self.srqns.lock().alloc().ok_or(ENOSPC)?;
        let p = SrqParams {
            srqn,
            log_size: g.log_size(),
            logstride: g.logstride(),
            pd: spec.pd,
            // No XRC on this adapter: `caps.reserved_xrcds` is 0.
            xrcd: 0,
            mtt_addr: spec.mtt.addr(),
            log_page_size: spec.mtt.log_page_size(),
            db_rec: spec.db_rec,
        };
        let fw = &*self.firmware;
        let made = srq::create(&fw.cmd, &mut fw.cmd.lock(), &p);
        if let Err(e) = made {
            self.srqns.lock().free(srqn);
            return Err(e);
        }
        Ok(SrqHandle { srqn })
    }

    /// ARM_SRQ: the limit event once fewer than `limit` WQEs are posted.
    pub(crate) fn arm_srq(&self, srq: &SrqHandle, limit: u16) -> Result {
        let fw = &*self.firmware;
        srq::arm(&fw.cmd, &mut fw.cmd.lock(), srq.srqn, limit)
    }

    /// QUERY_SRQ's limit watermark.
    pub(crate) fn srq_limit(&self, srq: &SrqHandle) -> Result<u16> {
        let fw = &*self.firmware;
        srq::query_limit(&fw.cmd, &mut fw.cmd.lock(), srq.srqn)
    }

    /// HW2SW_SRQ (`mlx4_srq_free()`) and its number back. `-EBUSY` if the
    /// device still has it: the number stays taken, and the caller keeps
    /// its memory.
    pub(crate) fn destroy_srq(&self, srq: SrqHandle) -> Result {
        {
            let fw = &*self.firmware;
            // A failure is logged by the command path.
            let _ = srq::destroy(&fw.cmd, &mut fw.cmd.lock(), srq.srqn);
        }
        if self.firmware.srq_in_hw(srq.srqn) {
            return Err(EBUSY);
        }
        self.srqns.lock().free(srq.srqn);
        Ok(())
    }
}
