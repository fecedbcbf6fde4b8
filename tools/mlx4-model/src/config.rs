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

/// `--firmware`, kept for old callers: the model's firmware is always the
/// life cycle mainline mlx4_core drives (`firmware`), so `strict` is
/// accepted and changes nothing; `ready`, the shortcut that once let every
/// command work after reset, is gone.
pub fn firmware_arg(s: &str) -> Result<String, String> {
    match s {
        "strict" => Ok(s.to_string()),
        "ready" => Err(
            "ready mode was removed: the firmware always needs QUERY_FW, \
             MAP_FA, RUN_FW, ICM and INIT_HCA first (drop --firmware, or pass strict)"
                .to_string(),
        ),
        _ => Err(format!(
            "unknown firmware mode {s:?} (only strict, which is what the model always is)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn firmware_strict_is_a_no_op_and_ready_is_refused() {
        assert_eq!(firmware_arg("strict").as_deref(), Ok("strict"));
        assert!(firmware_arg("ready").unwrap_err().contains("removed"));
        assert!(firmware_arg("fast").is_err());
    }
}
