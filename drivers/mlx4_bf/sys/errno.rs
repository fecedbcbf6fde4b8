// SPDX-License-Identifier: GPL-2.0

//! Errnos the 7.2 kernel crate's `error::code` does not name.

use kernel::prelude::*;

/// `-EPROTONOSUPPORT`: no such object or method (what uverbs answers).
pub(crate) fn eprotonosupport() -> Error {
    Error::from_errno(-(kernel::bindings::EPROTONOSUPPORT as i32))
}

/// `-EOPNOTSUPP`: a mandatory attribute this kernel does not know, or an
/// adapter without memory regions to spare.
pub(crate) fn eopnotsupp() -> Error {
    Error::from_errno(-(kernel::bindings::EOPNOTSUPP as i32))
}
