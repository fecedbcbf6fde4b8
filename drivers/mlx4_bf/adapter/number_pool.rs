// SPDX-License-Identifier: GPL-2.0

//! Object numbers the provider hands out, `0..count` in a bitmap (its QPNs,
//! mapped to the device's numbers by the caller; its PDs and SRQNs, a run
//! `base..limit` of the device's: [`NumberRange`]), as
//! mlx4_core's `mlx4_bitmap_alloc()`: round-robin, so a number just freed
//! is not the next one given and a late event for the old object finds
//! nothing.

use kernel::{bitmap::BitmapVec, prelude::*};

pub(crate) struct NumberPool {
    used: BitmapVec,
    /// Where the next search starts.
    next: usize,
}

impl NumberPool {
    pub(super) fn new(count: u32) -> Result<Self> {
        Ok(NumberPool {
            used: BitmapVec::new(count as usize, GFP_KERNEL)?,
            next: 0,
        })
    }

    /// Numbers the pool has.
    pub(super) fn count(&self) -> u32 {
        self.used.len() as u32
    }

    /// A free number; `None` when all are taken.
    pub(super) fn alloc(&mut self) -> Option<u32> {
        let len = self.used.len();
        let from = |start: usize| {
            (start < len)
                .then(|| self.used.next_zero_bit(start))
                .flatten()
        };
        let n = from(self.next).or_else(|| from(0))?;
        self.used.set_bit(n);
        self.next = n + 1;
        Some(n as u32)
    }

    /// Gives `n` back; a number not below `count()` is ignored.
    pub(super) fn free(&mut self, n: u32) {
        if (n as usize) < self.used.len() {
            self.used.clear_bit(n as usize);
        }
    }
}

/// The device's numbers `base..limit`, handed out as [`NumberPool`] does.
pub(crate) struct NumberRange {
    base: u32,
    numbers: NumberPool,
}

impl NumberRange {
    pub(super) fn new(base: u32, limit: u32) -> Result<Self> {
        Ok(NumberRange {
            base,
            numbers: NumberPool::new(limit.saturating_sub(base))?,
        })
    }

    /// Numbers the range has.
    pub(super) fn count(&self) -> u32 {
        self.numbers.count()
    }

    /// A free number; `None` when all are taken.
    pub(super) fn alloc(&mut self) -> Option<u32> {
        Some(self.base + self.numbers.alloc()?)
    }

    /// Gives `n` back; a number outside the range is ignored.
    pub(super) fn free(&mut self, n: u32) {
        if let Some(i) = n.checked_sub(self.base) {
            self.numbers.free(i);
        }
    }
}
