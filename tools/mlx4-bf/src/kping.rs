// SPDX-License-Identifier: GPL-2.0

//! The driver's kernel ping (`/sys/kernel/debug/mlx4_bf<N>/device/kping`,
//! Documentation/mlx4_bf.rst): a command written, its statistics line read
//! back. `userpost` uses it for the in-kernel post, QP_POST's work
//! without the system call.

use std::{fs, path::Path, path::PathBuf};

use anyhow::{anyhow, Context, Result};

/// The command file of the adapter whose RDMA device is `name`: its
/// debugfs directory has the same name (`mlx4_bf<N>`).
pub fn command_file(name: &str) -> PathBuf {
    PathBuf::from(format!("/sys/kernel/debug/{name}/device/kping"))
}

/// Column of the statistics line with the median in-kernel post of an RDMA
/// WRITE (after number-device, eight counters and four latencies).
const WRITE_POST: usize = 13;

/// Runs `command` (a whole write; it blocks until the test ends) and
/// returns the median in-kernel post of an RDMA WRITE it measured, in ns.
pub fn write_post_ns(file: &Path, command: &str) -> Result<f64> {
    fs::write(file, command)
        .with_context(|| format!("kping: {command} into {}", file.display()))?;
    let text =
        fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    // The newest line: the highest thread number.
    let line = text
        .lines()
        .filter_map(|l| Some((l.split('-').next()?.parse::<u64>().ok()?, l)))
        .max_by_key(|&(id, _)| id)
        .map(|(_, l)| l)
        .ok_or_else(|| anyhow!("kping: no statistics line after {command}"))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    if words.last() != Some(&"0") {
        return Err(anyhow!("kping: {command} did not end with 0: {line}"));
    }
    words
        .get(WRITE_POST)
        .and_then(|w| w.parse::<f64>().ok())
        .ok_or_else(|| anyhow!("kping: no post time in {line}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_file_is_the_adapters() {
        assert_eq!(
            command_file("mlx4_bf1"),
            PathBuf::from("/sys/kernel/debug/mlx4_bf1/device/kping")
        );
    }
}
