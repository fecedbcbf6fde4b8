// SPDX-License-Identifier: GPL-2.0

//! One file per subcommand.

pub mod bench;
pub mod info;
pub mod lat;
pub mod pingpong;
pub mod post;
pub mod stress;
pub mod userpost;
pub mod writelat;
