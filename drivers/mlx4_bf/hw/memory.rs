// SPDX-License-Identifier: GPL-2.0

//! Memory the adapter reaches: the MTT (page lists of every queue and
//! region), memory regions (MPTs: user memory pinned, kernel memory), and
//! the areas a context shares with its process.

pub(crate) mod mr;
pub(crate) mod mtt;
pub(crate) mod user_area;
