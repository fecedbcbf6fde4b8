// SPDX-License-Identifier: GPL-2.0

//! `info`: device and context facts (QUERY_DEVICE, QUERY_CONTEXT, QUERY_STATS).

use anyhow::Result;
use mlx4_bf_core::abi;

use crate::{device::Device, errors::ioerr, report::writer_name};

#[derive(clap::Args)]
pub struct Args {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(dev: &Device, args: &Args) -> Result<()> {
    let d = dev.query_device().map_err(ioerr("QUERY_DEVICE"))?;
    let c = dev.query_context().map_err(ioerr("QUERY_CONTEXT"))?;
    let (ds, cs) = dev.query_stats().map_err(ioerr("QUERY_STATS"))?;
    if args.json {
        let v = serde_json::json!({
            "device": {
                "abi_version": d.abi_version, "num_uars": d.num_uars, "bf_reg_size": d.bf_reg_size,
                "bf_buf_size": d.bf_buf_size, "max_bf_wqe_size": d.max_bf_wqe_size,
                "max_db_wqe_size": d.max_db_wqe_size, "writer": writer_name(d.writer),
                "store_block_max": d.store_block_max, "max_qps_per_context": d.max_qps_per_context,
                "sq_entries": d.sq_entries, "bar2_len": d.bar2_len,
                "max_mrs_per_context": d.max_mrs_per_context, "max_mr_pages": d.max_mr_pages,
                "max_mr_size": d.max_mr_size,
            },
            "context": { "uar_index": c.uar_index, "uar_offset": c.uar_offset, "bf_offset": c.bf_offset },
            "device_stats": stats_json(&ds),
            "context_stats": stats_json(&cs),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!("ABI version        {}", d.abi_version);
    println!("BAR2               {} KiB", d.bar2_len / 1024);
    println!("UARs               {}", d.num_uars);
    println!(
        "BlueFlame register {} B ({} B buffers)",
        d.bf_reg_size, d.bf_buf_size
    );
    println!(
        "largest WQE        {} B BlueFlame, {} B doorbell",
        d.max_bf_wqe_size, d.max_db_wqe_size
    );
    println!(
        "writer             {} (blocks <= {} B)",
        writer_name(d.writer),
        d.store_block_max
    );
    if d.abi_version >= 3 {
        println!(
            "memory regions     {} per context, {} pages ({} KiB) in all, {} KiB each at most",
            d.max_mrs_per_context,
            d.max_mr_pages,
            u64::from(d.max_mr_pages) * 4,
            d.max_mr_size / 1024
        );
    }
    println!(
        "this context       UAR {} at {:#x}, BlueFlame page at {:#x}",
        c.uar_index, c.uar_offset, c.bf_offset
    );
    device_counters([
        ds.bf_posts,
        ds.db_posts,
        ds.bytes,
        ds.store_blocks,
        ds.rejects.iter().sum::<u64>(),
    ]);
    Ok(())
}

/// The device's post counters, one line: BlueFlame and doorbell posts,
/// bytes, store blocks, rejected posts.
fn device_counters([bf, db, bytes, store_blocks, rejected]: [u64; 5]) {
    println!(
        "device counters    {bf} BlueFlame, {db} doorbell, {bytes} bytes, {store_blocks} store blocks, \
         {rejected} rejected"
    );
}

fn stats_json(s: &abi::Stats) -> serde_json::Value {
    serde_json::json!({
        "bf_posts": s.bf_posts, "db_posts": s.db_posts, "bytes": s.bytes,
        "store_blocks": s.store_blocks, "rejects": s.rejects,
    })
}

/// The RDMA device `name`'s facts, through libibverbs
/// (`ibv_query_device()`, `ibv_query_port()` of port 1).
pub fn run_verbs(name: &str, args: &Args) -> Result<()> {
    use anyhow::Context as _;

    let ctx =
        crate::verbs::Context::open(name).with_context(|| format!("ibv_open_device {name}"))?;
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
    use anyhow::Context as _;

    let dir = std::path::Path::new("/sys/class/infiniband")
        .join(name)
        .join("hw_counters");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("{}", dir.display()))? {
        let path = entry?.path();
        let Some(key) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        // Not a counter: how long the core keeps values before asking again.
        if key == "lifespan" {
            continue;
        }
        let text = std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?;
        let value: u64 = text
            .trim()
            .parse()
            .with_context(|| format!("{}: not a count", path.display()))?;
        out.push((key.to_owned(), value));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}
