// SPDX-License-Identifier: GPL-2.0

//! The adapter the helper speaks: its RDMA device, `mlx4_bf<N>`, named by
//! `--device` and opened through libibverbs. The misc device
//! (`/dev/mlx4_bf<N>`) is gone: a path is refused at the command line.

use std::io;

use anyhow::{anyhow, Result};

use crate::verbs::Context;

/// The RDMA device the helper opens unless `--device` names another.
pub const DEFAULT: &str = "mlx4_bf0";

/// `--device`'s parser: an RDMA device's name, never a path (one line).
pub fn parse_name(s: &str) -> Result<String, String> {
    if s.contains('/') {
        return Err(format!(
            "{s} is a path: the misc device /dev/mlx4_bf<N> is gone; name the RDMA device \
             instead (--device mlx4_bf<N>, as /sys/class/infiniband lists it)"
        ));
    }
    if s.is_empty() {
        return Err("an empty name: name the RDMA device (--device mlx4_bf<N>)".into());
    }
    Ok(s.to_owned())
}

/// Opens the RDMA device `name` (a context of its own), saying what to do
/// about the usual failures.
pub fn open(name: &str) -> Result<Context> {
    Context::open(name).map_err(|e| match e.raw_os_error() {
        Some(libc::ENODEV) => anyhow!(
            "{name}: no such RDMA device: is mlx4_bf loaded and an adapter bound? \
             (/sys/class/infiniband lists the devices)"
        ),
        Some(libc::EACCES | libc::EPERM) => {
            anyhow!("cannot open {name}: permission denied (its /dev/infiniband/uverbs<N>)")
        }
        _ if e.kind() == io::ErrorKind::InvalidInput => anyhow!("{name}: not a device name"),
        _ => anyhow!("ibv_open_device {name}: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_refused_in_one_line_naming_the_rdma_device() {
        let e = parse_name("/dev/mlx4_bf0").unwrap_err();
        assert!(e.contains("misc device /dev/mlx4_bf<N> is gone"), "{e}");
        assert!(e.contains("--device mlx4_bf<N>"), "{e}");
        assert_eq!(e.lines().count(), 1);
        assert!(parse_name("").is_err());
        assert_eq!(parse_name("mlx4_bf1").unwrap(), "mlx4_bf1");
    }
}
