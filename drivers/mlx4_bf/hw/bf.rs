// SPDX-License-Identifier: GPL-2.0

//! BAR2 and the BlueFlame path: the UAR area and the BlueFlame area mapped
//! with their memory types, and the two ways a burst is written there.

pub(crate) mod bar2;
pub(crate) mod writer;
