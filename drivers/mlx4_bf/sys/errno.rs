// SPDX-License-Identifier: GPL-2.0

//! Errnos the 7.2 kernel crate's `error::code` does not name.

use kernel::prelude::*;

/// `-EOPNOTSUPP`: a mandatory attribute this kernel does not know, or an
/// adapter without memory regions to spare.
pub(crate) fn eopnotsupp() -> Error {
    Error::from_errno(-(kernel::bindings::EOPNOTSUPP as i32))
}

/// `-EADDRINUSE`: a kernel ping server on a port one already listens on.
pub(crate) fn eaddrinuse() -> Error {
    Error::from_errno(-(kernel::bindings::EADDRINUSE as i32))
}

/// `-ECONNRESET`: the kernel ping's peer ended in the middle of a round trip.
pub(crate) fn econnreset() -> Error {
    Error::from_errno(-(kernel::bindings::ECONNRESET as i32))
}

/// `-EPROTO`: a kernel ping message that is not one the protocol has.
pub(crate) fn eproto() -> Error {
    Error::from_errno(-(kernel::bindings::EPROTO as i32))
}
