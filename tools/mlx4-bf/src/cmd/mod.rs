// SPDX-License-Identifier: GPL-2.0

//! One module per subcommand (`pingpong` a folder of its own); `writelat`
//! (a folder) is `userpost --pingpong`'s ping-pong.

pub mod bench;
pub mod counters;
pub mod info;
pub mod lat;
pub mod pingpong;
pub mod post;
pub mod stress;
pub mod userpost;
pub mod writelat;
