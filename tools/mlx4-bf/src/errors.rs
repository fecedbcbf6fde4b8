// SPDX-License-Identifier: GPL-2.0

//! What the helper says when a call fails: what a call's errno means for
//! this driver.

use std::io;

use anyhow::{anyhow, Error};

/// A call's error, named after the call (a verb, or the QP_POST method),
/// with what the common errnos mean for this driver.
pub fn ioerr(what: &'static str) -> impl Fn(io::Error) -> Error {
    move |e| match e.raw_os_error() {
        Some(libc::EPROTONOSUPPORT) => anyhow!(
            "{what}: the device does not know this method (EPROTONOSUPPORT): \
             not mlx4_bf's RDMA device, or a driver without QP_POST"
        ),
        Some(libc::ENODEV) => anyhow!("{what}: the adapter is gone (ENODEV)"),
        Some(libc::EACCES) if what == "QP_POST" => anyhow!(
            "{what}: a gather segment names memory this QP may not read (EACCES): \
             its lkey is no registered region of the QP's PD, or the data is not inside it"
        ),
        _ => anyhow!("{what}: {e}"),
    }
}
