// SPDX-License-Identifier: GPL-2.0

//! `poll()` and `epoll` on the device file.
//!
//! The 7.2 kernel crate's `MiscDevice` has no `poll` hook, so the file
//! operations the crate builds for `Context` are copied, at compile time,
//! into a table that adds one, and `open()` installs it on the file as
//! `misc_open()` itself installs the misc device's table (`replace_fops()`).
//! The crate's table has no `owner` either, so no reference on this module
//! is held for an open file; ours names this module (as Rust binder's
//! table does), and the reference is taken as the table is installed and
//! dropped by the VFS after `release()` has returned. A `poll` and an
//! `owner` in `MiscDevice` would make this file go away.
//!
//! Wake-ups: completion events of every receive CQ of the adapter arrive on
//! its one EQ; the interrupt handler wakes the adapter's wait queue, and each
//! poller looks at its own CQs (DMA memory) to decide whether it is ready.

use kernel::{
    bindings, ffi::c_uint, fs::File, miscdevice::MiscDeviceOptions, prelude::*,
    sync::poll::PollTable, types::ForeignOwnable,
};

use crate::context::{Context, Readiness};

/// The file operations of a context: the misc device's, plus `poll`.
#[repr(transparent)]
struct Fops(bindings::file_operations);

// SAFETY: A table of function pointers and this module's address that is
// never written after it is built at compile time.
unsafe impl Sync for Fops {}

static FOPS: Fops = Fops({
    let misc = MiscDeviceOptions { name: c"mlx4_bf" }.into_raw::<Context>();
    // SAFETY: `fops` points to the static table the kernel crate builds for
    // `Context`; it is read, not written.
    let mut fops = unsafe { *misc.fops };
    fops.poll = Some(poll);
    fops.owner = crate::THIS_MODULE.as_ptr();
    fops
});

/// Gives `file`, being opened, the table with `poll` and this module as its
/// owner; `-ENODEV` if the module is going away.
pub(super) fn install_fops(file: &File) -> Result {
    // SAFETY: `THIS_MODULE` is this module, live while its code runs.
    if !unsafe { bindings::try_module_get(crate::THIS_MODULE.as_ptr()) } {
        return Err(ENODEV);
    }
    // SAFETY: `file` is being opened by misc_open(), which has just set
    // `f_op` to the crate's table for `Context` (no owner: it holds no
    // module reference to drop) and called our open(); the file is in no
    // file table yet. The new table has the same entries plus `poll`; the
    // reference on its owner, taken above, is what `__fput()` drops with
    // `fops_put()` after release(), as for `replace_fops()`.
    unsafe { (*file.as_ptr()).f_op = &FOPS.0 };
    Ok(())
}

/// `f_op->poll`.
///
/// # Safety
///
/// Called by the VFS on a file opened with `FOPS` installed, between open()
/// and release(); `table` is null or a valid poll table.
unsafe extern "C" fn poll(
    file: *mut bindings::file,
    table: *mut bindings::poll_table_struct,
) -> bindings::__poll_t {
    // SAFETY: The file is valid for this call (function contract).
    let private = unsafe { (*file).private_data };
    // SAFETY: `private_data` is what the kernel crate's open() stored with
    // `into_foreign()` for `Pin<KBox<Context>>`; release() has not run yet.
    let ctx = unsafe { <Pin<KBox<Context>> as ForeignOwnable>::borrow(private.cast()) };
    // SAFETY: The file is valid for this call and no fdget_pos region is
    // active on it here.
    let file = unsafe { File::from_raw_file(file) };
    // SAFETY: `table` is null or valid for this call (function contract).
    let table = unsafe { PollTable::from_raw(table) };
    match ctx.poll(file, &table) {
        Readiness::Idle => 0,
        Readiness::Readable => READABLE,
        Readiness::Gone => GONE,
    }
}

/// `POLLIN | POLLRDNORM`: a receive CQ has a completion.
const READABLE: c_uint = bindings::POLLIN | bindings::POLLRDNORM;
/// `POLLERR | POLLHUP`: the adapter is gone.
const GONE: c_uint = bindings::POLLERR | bindings::POLLHUP;
