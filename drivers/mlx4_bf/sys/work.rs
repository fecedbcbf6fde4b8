// SPDX-License-Identifier: GPL-2.0

//! Waiting for a work item to finish (`flush_work()`), which the 7.2
//! kernel crate's `workqueue` does not offer: a driver that queues work
//! from its interrupt handler must know, before its device goes, that no
//! run of it is left.

use kernel::{bindings, workqueue::Work};

/// Waits until `work`, if queued or running, has run to its end
/// (`flush_work()`). Sleeps: process context only. Whether it is queued
/// again afterwards is the caller's to prevent.
pub(crate) fn flush<T: ?Sized, const ID: u64>(work: &Work<T, ID>) {
    let raw: *const Work<T, ID> = work;
    // SAFETY: `raw` comes from a reference, so it is aligned and not
    // dangling (`Work::raw_get`'s contract); `Work::new` initialised the
    // `work_struct` it points to, and the borrow keeps it alive for the
    // call. `flush_work()` only reads and waits on it.
    unsafe { bindings::flush_work(Work::raw_get(raw)) };
}
