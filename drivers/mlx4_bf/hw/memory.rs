// SPDX-License-Identifier: GPL-2.0

//! Memory the adapter reaches: the MTT (page lists of every queue and
//! region), memory regions (MPTs over pages their owners mapped: the
//! provider's `ib_umem`s, the kernel ping's buffers), and the kernel ping's
//! contexts' receive areas.

pub(crate) mod mr;
pub(crate) mod mtt;
pub(crate) mod recv_area;
