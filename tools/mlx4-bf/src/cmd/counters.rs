// SPDX-License-Identifier: GPL-2.0

//! `counters`: the device model's analyzer counters, one `name value` line
//! each, read through sysfs `resource0` whichever driver owns the adapter
//! (mainline mlx4_core in the upstream boot): a script takes two readings
//! around what it runs and compares them. `--mark` first puts a `mark`
//! record in the model's trace, so that the same window can be found there
//! (`tools/vm/side_by_side.py`).

use anyhow::{bail, Result};

use crate::analyzer::Analyzer;

#[derive(clap::Args)]
pub struct Args {
    /// The adapter's PCI function (default: the one mlx4_bf drives, else
    /// the first ConnectX-3).
    #[arg(long)]
    bdf: Option<String>,
    /// Write this value to the diagnostic block's MARK register first.
    #[arg(long)]
    mark: Option<u32>,
}

/// The global counters, by their diagnostic block offset
/// (`Documentation/mlx4-model.rst`, "Diagnostic block").
const COUNTERS: &[(&str, usize)] = &[
    ("protocol_errors", 0x20),
    ("wqes_bf", 0x30),
    ("wqes_dma", 0x38),
    ("bf_fallbacks", 0x40),
    ("send_doorbells", 0x48),
    ("cqes", 0x50),
    ("eqes", 0x58),
    ("irqs", 0x60),
    ("commands", 0x68),
    ("sq_dma_reads", 0x70),
    ("bar2_writes", 0x78),
    ("deliveries", 0x500),
    ("recv_cqes", 0x508),
    ("rnr_errors", 0x510),
    ("peer_errors", 0x518),
    ("recv_length_errors", 0x520),
    ("payload_dma_writes", 0x528),
    ("bar2_bytes", 0x540),
    ("cq_overruns", 0x550),
    ("local_prot_faults", 0x5a0),
    ("remote_access_faults", 0x5a8),
    ("rdma_writes", 0x5b0),
    ("fw_refused", 0x5e8),
    ("icm_errors", 0x5f0),
];

/// Version 6 has every counter above.
const MIN_VERSION: u32 = 6;

pub fn run(args: &Args) -> Result<()> {
    let a = match &args.bdf {
        Some(bdf) => Analyzer::open_bdf(bdf),
        None => Analyzer::open(),
    };
    let Some(a) = a else {
        bail!("no device model's diagnostic block (real hardware, or no ConnectX-3)");
    };
    if a.version < MIN_VERSION {
        bail!(
            "diagnostic block version {} (counters need {MIN_VERSION})",
            a.version
        );
    }
    if let Some(v) = args.mark {
        a.mark(v);
    }
    for &(name, off) in COUNTERS {
        println!("{name} {}", a.read(off));
    }
    Ok(())
}
