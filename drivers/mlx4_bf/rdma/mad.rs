// SPDX-License-Identifier: GPL-2.0

//! `process_mad`: the MADs the core hands the device itself, 256 bytes in
//! and 256 out (`struct ib_mad`). With `process_mad` the core gives each
//! port its PMA counters in sysfs (`ports/<N>/counters/`), which it reads
//! with PerfMgmt Gets (`core/sysfs.c:get_perf_mad()`); a device without a
//! MAD agent (`max_mad_size` 0) gets no MAD from the wire.

use kernel::{bindings, ffi::c_int};

/// Bytes of a MAD (`sizeof(struct ib_mad)`).
pub(crate) const MAD_SIZE: usize = core::mem::size_of::<bindings::ib_mad>();
const _: () = assert!(MAD_SIZE == 256);

/// How the MAD came (`process_mad`'s arguments besides the MADs; the
/// `IB_MAD_IGNORE_*` flags matter only for MADs from the wire).
pub(crate) struct MadIn {
    /// It arrived on a QP (`in_wc` set): a MAD agent's.
    pub(crate) from_wire: bool,
}

/// What the provider did with a MAD (`enum ib_mad_result`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MadResult {
    /// Not processed.
    Failure,
    /// Processed, no answer.
    Ignored,
    /// Answered: the out MAD is the reply.
    Reply,
}

impl MadResult {
    pub(super) fn raw(self) -> c_int {
        let bits = match self {
            MadResult::Failure => bindings::ib_mad_result_IB_MAD_RESULT_FAILURE,
            MadResult::Ignored => bindings::ib_mad_result_IB_MAD_RESULT_SUCCESS,
            MadResult::Reply => {
                bindings::ib_mad_result_IB_MAD_RESULT_SUCCESS
                    | bindings::ib_mad_result_IB_MAD_RESULT_REPLY
            }
        };
        bits as c_int
    }
}
