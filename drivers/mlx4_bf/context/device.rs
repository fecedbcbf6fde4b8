// SPDX-License-Identifier: GPL-2.0

//! QUERY_DEVICE, QUERY_STATS and QUERY_CONTEXT.

use super::Context;
use crate::{
    abi,
    geometry::{MAX_QPS_PER_CONTEXT, SQ_ENTRIES},
    mr::{MAX_CONTEXT_PAGES, MAX_MRS_PER_CONTEXT, MAX_MR_SIZE},
    uverbs::Bundle,
    wqe,
};
use kernel::prelude::*;

impl Context {
    pub(super) fn query_device(&self, b: &mut Bundle<'_>) -> Result {
        let out = b.output(abi::ATTR_DEVICE_INFO).ok_or(EINVAL)?;
        b.check_unused()?;
        let caps = &self.adapter.caps;
        let info = abi::DeviceInfo {
            abi_version: abi::ABI_VERSION,
            num_uars: caps.num_uars,
            bf_reg_size: caps.bf_reg_size,
            bf_buf_size: caps.bf_buf_size(),
            max_bf_wqe_size: caps.bf_buf_size(),
            max_db_wqe_size: wqe::MAX_WQE_LEN as u32,
            writer: self.adapter.writer.abi(),
            store_block_max: crate::store_block::MAX_BLOCK as u32,
            max_qps_per_context: MAX_QPS_PER_CONTEXT as u32,
            sq_entries: SQ_ENTRIES,
            bar2_len: caps.bar2_len,
            max_mrs_per_context: MAX_MRS_PER_CONTEXT as u32,
            max_mr_pages: MAX_CONTEXT_PAGES,
            max_mr_size: MAX_MR_SIZE,
        };
        b.write(out, &info)
    }

    pub(super) fn query_stats(&self, b: &mut Bundle<'_>) -> Result {
        let dev = b.output(abi::ATTR_DEVICE_STATS);
        let ctx = b.output(abi::ATTR_CONTEXT_STATS);
        b.check_unused()?;
        if dev.is_none() && ctx.is_none() {
            return Err(EINVAL);
        }
        if let Some(i) = dev {
            b.write(i, &self.adapter.stats.snapshot())?;
        }
        if let Some(i) = ctx {
            b.write(i, &self.stats.snapshot())?;
        }
        Ok(())
    }

    pub(super) fn query_context(&self, b: &mut Bundle<'_>) -> Result {
        let out = b.output(abi::ATTR_CONTEXT_INFO);
        b.check_unused()?;
        // Also the benchmarks' no-op round trip: without an output it does nothing.
        let Some(out) = out else { return Ok(()) };
        let caps = &self.adapter.caps;
        let info = abi::ContextInfo {
            uar_index: self.uar_index,
            reserved: 0,
            uar_offset: caps.uar_offset(self.uar_index),
            bf_offset: caps.bf_page_offset(self.uar_index),
        };
        b.write(out, &info)
    }
}
