// SPDX-License-Identifier: GPL-2.0

//! `info`: the RDMA device's facts (`ibv_query_device()`, `ibv_query_port()`
//! of port 1) and its post counters, as the RDMA core shows them in sysfs
//! (`hw_counters/`).

use std::{fs, path::Path};

use anyhow::{Context as _, Result};

use crate::{device, errors::ioerr};

#[derive(clap::Args)]
pub struct Args {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// The device's post counters, one line: BlueFlame and doorbell posts,
/// bytes, store blocks, rejected posts.
fn device_counters([bf, db, bytes, store_blocks, rejected]: [u64; 5]) {
    println!(
        "device counters    {bf} BlueFlame, {db} doorbell, {bytes} bytes, {store_blocks} store blocks, \
         {rejected} rejected"
    );
}

/// The RDMA device `name`'s facts, through libibverbs.
pub fn run(name: &str, args: &Args) -> Result<()> {
    let ctx = device::open(name)?;
    let f = ctx.facts().map_err(ioerr("ibv_query_device"))?;
    let counters = hw_counters(name)?;
    let count = |n: &str| counters.iter().find(|(k, _)| k == n).map_or(0, |(_, v)| *v);
    if args.json {
        let v = serde_json::json!({
            "device": {
                "name": name, "fw_ver": f.fw_ver(), "vendor_part_id": f.vendor_part_id,
                "hw_ver": f.hw_ver, "max_qp": f.max_qp, "max_qp_wr": f.max_qp_wr,
                "max_cq": f.max_cq, "max_cqe": f.max_cqe, "max_mr": f.max_mr,
                "max_mr_size": f.max_mr_size, "max_pd": f.max_pd,
            },
            "port": { "lid": f.lid, "state": f.port_state, "active_mtu": f.active_mtu },
            "counters": counters
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::from(*v)))
                .collect::<serde_json::Map<_, _>>(),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!(
        "device             {name}, part {} rev {}, firmware {}",
        f.vendor_part_id,
        f.hw_ver,
        f.fw_ver()
    );
    println!(
        "QPs                {} of {} send WRs each",
        f.max_qp, f.max_qp_wr
    );
    println!(
        "CQs                {} of {} entries each",
        f.max_cq, f.max_cqe
    );
    println!(
        "memory regions     {}, {} KiB each at most; {} PDs",
        f.max_mr,
        f.max_mr_size / 1024,
        f.max_pd
    );
    println!(
        "port 1             LID {}, state {}, active MTU {}",
        f.lid, f.port_state, f.active_mtu
    );
    device_counters([
        count("bf_posts"),
        count("db_posts"),
        count("bytes"),
        count("store_blocks"),
        counters
            .iter()
            .filter(|(k, _)| k.starts_with("rejects_"))
            .map(|(_, v)| v)
            .sum::<u64>(),
    ]);
    Ok(())
}

/// The RDMA device `name`'s hardware counters, as the RDMA core shows them
/// in sysfs (`hw_counters/`, the provider's `rdma_hw_stats`), by name.
fn hw_counters(name: &str) -> Result<Vec<(String, u64)>> {
    let dir = Path::new("/sys/class/infiniband")
        .join(name)
        .join("hw_counters");
    let mut out = Vec::new();
    for entry in fs::read_dir(&dir).with_context(|| format!("{}", dir.display()))? {
        let path = entry?.path();
        let Some(key) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        // Not a counter: how long the core keeps values before asking again.
        if key == "lifespan" {
            continue;
        }
        let text = fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?;
        let value: u64 = text
            .trim()
            .parse()
            .with_context(|| format!("{}: not a count", path.display()))?;
        out.push((key.to_owned(), value));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}
