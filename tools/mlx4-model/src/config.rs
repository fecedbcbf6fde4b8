//! The model's configuration: what the command line sets.

use crate::layout::{MAX_UARS, MIN_UARS, PAGE_SIZE};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    pub num_uars: u32,
    /// Every Nth valid BlueFlame post falls back (0: never).
    pub fallback_every: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            num_uars: 1024,
            fallback_every: 0,
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
