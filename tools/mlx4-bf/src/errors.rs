// SPDX-License-Identifier: GPL-2.0

//! What the helper says when a call fails: errnos by name, and what an
//! ioctl's errno means for this driver.

use std::io;

use anyhow::{anyhow, Error};
use mlx4_bf_core::abi;

/// `EINVAL (Invalid argument)`: an errno by its name, with its text.
pub fn errno_text(e: &io::Error) -> String {
    let text = e.to_string();
    let text = match text.rfind(" (os error ") {
        Some(i) => text[..i].to_owned(),
        None => text,
    };
    match e.raw_os_error().and_then(errno_name) {
        Some(name) => format!("{name} ({text})"),
        None => text,
    }
}

/// The errnos an ioctl of this driver or an mmap() gives.
pub fn errno_name(errno: i32) -> Option<&'static str> {
    Some(match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::E2BIG => "E2BIG",
        libc::EBADF => "EBADF",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::EMFILE => "EMFILE",
        libc::ENOTTY => "ENOTTY",
        libc::ENOSPC => "ENOSPC",
        libc::ERANGE => "ERANGE",
        libc::EOVERFLOW => "EOVERFLOW",
        libc::EMSGSIZE => "EMSGSIZE",
        libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EDQUOT => "EDQUOT",
        libc::ETIMEDOUT => "ETIMEDOUT",
        _ => return None,
    })
}

/// An ioctl's error, named after the method, with what the common errnos
/// mean for this driver.
pub fn ioerr(what: &'static str) -> impl Fn(io::Error) -> Error {
    move |e| match e.raw_os_error() {
        Some(libc::EPROTONOSUPPORT) => anyhow!(
            "{what}: the driver does not know this method (EPROTONOSUPPORT): \
             it speaks an older ABI than this helper (version {})",
            abi::ABI_VERSION
        ),
        Some(libc::ENODEV) => anyhow!("{what}: the adapter is gone (ENODEV)"),
        Some(libc::EACCES) => anyhow!(
            "{what}: a gather segment or an RDMA write names memory this context may not use \
             (EACCES): not a registered region of this context (lkey), or of the connected \
             peer's with REMOTE_WRITE (rkey), or the message is not inside it"
        ),
        _ => anyhow!("{what}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos_are_named() {
        let e = io::Error::from_raw_os_error(libc::EBUSY);
        assert_eq!(errno_text(&e), "EBUSY (Device or resource busy)");
        assert_eq!(errno_name(libc::EACCES), Some("EACCES"));
        assert_eq!(errno_name(4095), None);
        let odd = io::Error::from_raw_os_error(4095);
        assert!(!errno_text(&odd).contains("os error"));
    }
}
