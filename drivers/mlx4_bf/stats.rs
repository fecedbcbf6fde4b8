// SPDX-License-Identifier: GPL-2.0

//! Post counters, kept per device and per context without a lock.

use kernel::{
    fmt,
    sync::atomic::{Atomic, Relaxed},
};

use crate::abi::{self, Reject, REJECT_MAX};

pub(crate) struct Stats {
    bf_posts: Atomic<u64>,
    db_posts: Atomic<u64>,
    bytes: Atomic<u64>,
    store_blocks: Atomic<u64>,
    rejects: [Atomic<u64>; REJECT_MAX],
}

impl Stats {
    pub(crate) fn new() -> Self {
        Stats {
            bf_posts: Atomic::new(0),
            db_posts: Atomic::new(0),
            bytes: Atomic::new(0),
            store_blocks: Atomic::new(0),
            rejects: [const { Atomic::new(0) }; REJECT_MAX],
        }
    }

    pub(crate) fn blueflame(&self, bytes: usize, store_blocks: u32) {
        self.bf_posts.add(1u64, Relaxed);
        self.bytes.add(bytes as u64, Relaxed);
        self.store_blocks.add(u64::from(store_blocks), Relaxed);
    }

    pub(crate) fn doorbell(&self, bytes: usize) {
        self.db_posts.add(1u64, Relaxed);
        self.bytes.add(bytes as u64, Relaxed);
    }

    pub(crate) fn reject(&self, why: Reject) {
        self.rejects[why as usize].add(1u64, Relaxed);
    }

    pub(crate) fn snapshot(&self) -> abi::Stats {
        abi::Stats {
            bf_posts: self.bf_posts.load(Relaxed),
            db_posts: self.db_posts.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            store_blocks: self.store_blocks.load(Relaxed),
            rejects: core::array::from_fn(|i| self.rejects[i].load(Relaxed)),
        }
    }
}

/// The counters as debugfs shows them, one `name value` per line.
pub(crate) fn show(stats: &Stats, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    const REJECTS: [&str; REJECT_MAX] = [
        "length",
        "size_field",
        "opcode",
        "ctrl",
        "inline",
        "gather",
        "fault",
        "qp",
    ];
    let s = stats.snapshot();
    writeln!(f, "bf_posts {}", s.bf_posts)?;
    writeln!(f, "db_posts {}", s.db_posts)?;
    writeln!(f, "bytes {}", s.bytes)?;
    writeln!(f, "store_blocks {}", s.store_blocks)?;
    for (name, count) in REJECTS.iter().zip(s.rejects) {
        writeln!(f, "rejects_{name} {count}")?;
    }
    Ok(())
}
