// SPDX-License-Identifier: GPL-2.0

//! The payload sizes a measuring subcommand sweeps, and its warm-up.

use anyhow::{bail, Result};

/// The size sweep of `lat`, `bench` and `pingpong`.
#[derive(clap::Args, Clone, Copy)]
pub struct Sweep {
    /// Smallest payload in bytes.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub min: u32,
    /// Largest payload in bytes.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub max: u32,
    /// Step between payload sizes.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub step: u32,
    /// Timed iterations per size (after a warm-up).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub iters: u32,
}

impl Sweep {
    /// The sweep's sizes up to `cutoff`, the largest BlueFlame payload;
    /// an error if none is.
    pub fn sizes_up_to(&self, cutoff: usize) -> Result<Vec<usize>> {
        let sizes: Vec<usize> = self.sizes()?.into_iter().filter(|&s| s <= cutoff).collect();
        if sizes.is_empty() {
            bail!("no payload size in the sweep fits BlueFlame (at most {cutoff} bytes)");
        }
        Ok(sizes)
    }

    pub fn sizes(&self) -> Result<Vec<usize>> {
        if self.min > self.max {
            bail!("--min {} is above --max {}", self.min, self.max);
        }
        Ok((self.min..=self.max)
            .step_by(self.step as usize)
            .map(|s| s as usize)
            .collect())
    }
}

/// Untimed posts before the timed ones of each size.
pub const WARMUP: u32 = 50;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_includes_both_ends_when_the_step_lands_on_them() {
        let s = Sweep {
            min: 4,
            max: 208,
            step: 68,
            iters: 1,
        };
        assert_eq!(s.sizes().unwrap(), [4, 72, 140, 208]);
        let bad = Sweep {
            min: 9,
            max: 8,
            ..s
        };
        assert_eq!(
            bad.sizes().unwrap_err().to_string(),
            "--min 9 is above --max 8"
        );
    }
}
