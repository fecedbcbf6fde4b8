//! The model's configuration: what the command line sets.

use crate::layout::{MAX_UARS, MIN_UARS, PAGE_SIZE};
use std::str::FromStr;

/// How the adapter's firmware behaves after a reset (`--firmware`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FirmwareMode {
    /// Ready after reset: no firmware area, RUN_FW or INIT_HCA; every
    /// command works at once (what `drivers/mlx4_bf` relies on today).
    #[default]
    Ready,
    /// The life cycle mainline mlx4_core drives (`firmware`): QUERY_FW,
    /// MAP_FA, RUN_FW, ICM, INIT_HCA, and nothing out of order.
    Strict,
}

impl FirmwareMode {
    pub fn as_str(self) -> &'static str {
        match self {
            FirmwareMode::Ready => "ready",
            FirmwareMode::Strict => "strict",
        }
    }
}

impl FromStr for FirmwareMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ready" => Ok(FirmwareMode::Ready),
            "strict" => Ok(FirmwareMode::Strict),
            _ => Err(format!("unknown firmware mode {s:?} (ready, strict)")),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    pub num_uars: u32,
    /// Every Nth valid BlueFlame post falls back (0: never).
    pub fallback_every: u32,
    pub firmware: FirmwareMode,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            num_uars: 1024,
            fallback_every: 0,
            firmware: FirmwareMode::Ready,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("num_uars {0} must be a power of two in {MIN_UARS}..={MAX_UARS}")]
    NumUars(u32),
}

impl Config {
    pub fn validate(&self) -> Result<(), ConfigError> {
        let n = self.num_uars;
        if !n.is_power_of_two() || !(MIN_UARS..=MAX_UARS).contains(&n) {
            return Err(ConfigError::NumUars(n));
        }
        Ok(())
    }

    pub fn bar2_size(&self) -> u64 {
        2 * u64::from(self.num_uars) * PAGE_SIZE
    }
}
