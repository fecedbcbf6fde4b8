// SPDX-License-Identifier: GPL-2.0

//! What the 7.2 kernel crate does not offer yet, each gap in one file with
//! the `// SAFETY:` contract of its `kernel::bindings` calls: the
//! architecture's MMIO stores, the last-resort PCI reset, errnos, waiting
//! for a work item. Nothing here knows mlx4.

pub(crate) mod barrier;
pub(crate) mod copy;
pub(crate) mod errno;
pub(crate) mod mmio;
pub(crate) mod reset;
pub(crate) mod work;
