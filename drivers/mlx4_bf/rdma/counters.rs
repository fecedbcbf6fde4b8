// SPDX-License-Identifier: GPL-2.0

//! The device's hardware counters (`struct rdma_stat_desc`): what the core
//! shows in sysfs `hw_counters/`, one file per counter, read through the
//! provider's [`super::Driver::hw_counters`] when the last values are older
//! than the counters' lifespan.

use kernel::{bindings, prelude::*, str::as_char_ptr_in_const_context};

/// One counter's description: its name in `hw_counters/`.
///
/// A provider lists its counters in a constant
/// ([`super::Driver::HW_COUNTERS`]); the core keeps a pointer to that list
/// for as long as the device's statistics live, which a `'static` list
/// outlives.
#[repr(transparent)]
#[derive(Clone, Copy)]
pub(crate) struct HwCounter(bindings::rdma_stat_desc);

impl HwCounter {
    /// The counter `name` (shown in sysfs, so a file name).
    pub(crate) const fn new(name: &'static CStr) -> Self {
        HwCounter(bindings::rdma_stat_desc {
            name: as_char_ptr_in_const_context(name),
            flags: 0,
            priv_: core::ptr::null(),
        })
    }

    /// The list as the core takes it: `descs` and `num_counters` of
    /// `rdma_alloc_hw_stats_struct()`.
    pub(super) fn descs(list: &'static [HwCounter]) -> (*const bindings::rdma_stat_desc, usize) {
        // `HwCounter` is a transparent `rdma_stat_desc`.
        (list.as_ptr().cast(), list.len())
    }
}

// SAFETY: A description is never written after it is made; its name is a
// `'static` string and `priv_` is null, so sharing it shares nothing else.
unsafe impl Sync for HwCounter {}
// SAFETY: As above.
unsafe impl Send for HwCounter {}
