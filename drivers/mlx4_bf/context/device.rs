// SPDX-License-Identifier: GPL-2.0

//! What QUERY_DEVICE, QUERY_STATS and QUERY_CONTEXT report.

use super::Context;
use crate::{
    abi,
    geometry::{MAX_QPS_PER_CONTEXT, SQ_ENTRIES},
    hw::memory::mr::{MAX_CONTEXT_PAGES, MAX_MRS_PER_CONTEXT, MAX_MR_SIZE},
    wqe,
};

impl Context {
    /// The adapter's limits and this driver's, as a process sees them.
    pub(crate) fn device_info(&self) -> abi::DeviceInfo {
        let caps = &self.adapter.caps();
        abi::DeviceInfo {
            abi_version: abi::ABI_VERSION,
            num_uars: caps.num_uars,
            bf_reg_size: caps.bf_reg_size,
            bf_buf_size: caps.bf_buf_size(),
            max_bf_wqe_size: caps.bf_buf_size(),
            max_db_wqe_size: wqe::MAX_WQE_LEN as u32,
            writer: self.adapter.writer().abi(),
            store_block_max: crate::store_block::MAX_BLOCK as u32,
            max_qps_per_context: MAX_QPS_PER_CONTEXT as u32,
            sq_entries: SQ_ENTRIES,
            bar2_len: caps.bar2_len,
            max_mrs_per_context: MAX_MRS_PER_CONTEXT as u32,
            max_mr_pages: MAX_CONTEXT_PAGES,
            max_mr_size: MAX_MR_SIZE,
        }
    }

    /// The adapter's counters.
    pub(crate) fn device_stats(&self) -> abi::Stats {
        self.adapter.stats().snapshot()
    }

    /// This context's counters.
    pub(crate) fn context_stats(&self) -> abi::Stats {
        self.stats.snapshot()
    }

    /// Its UAR and where its pages are.
    pub(crate) fn context_info(&self) -> abi::ContextInfo {
        let caps = &self.adapter.caps();
        abi::ContextInfo {
            uar_index: self.uar_index,
            reserved: 0,
            uar_offset: caps.uar_offset(self.uar_index),
            bf_offset: caps.bf_page_offset(self.uar_index),
        }
    }
}
