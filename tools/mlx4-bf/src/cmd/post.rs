// SPDX-License-Identifier: GPL-2.0

//! `post`: build one WQE the way libmlx4 does and post it through
//! QP_POST.
//!
//! The WQE is an RDMA write into a memory region of the same context (a
//! new QP is connected to itself), registered with REMOTE_WRITE; a
//! gathered payload is read from the same region.

use anyhow::{bail, Result};
use mlx4_bf_core::{abi, wqe};

use crate::{rdma_write::Carry, report::path_name, verbs_post::with_self_qp};

#[derive(clap::Args)]
pub struct Args {
    /// Payload in bytes (inline when the WQE allows, else DMA-gathered from
    /// a registered buffer).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(0..=65536))]
    size: u32,
    /// Gather the payload by DMA from a registered buffer instead of
    /// inlining it (doorbell path).
    #[arg(long)]
    gather: bool,
    /// Take the doorbell path even when BlueFlame fits.
    #[arg(long)]
    force_doorbell: bool,
    /// Show the WQE bytes.
    #[arg(long)]
    hexdump: bool,
}

/// The post through the RDMA device `name`'s QP_POST method: the WQE
/// stamped in the QP's own send queue, as libmlx4 would; the write's bytes
/// checked where they landed.
pub fn run(name: &str, args: &Args) -> Result<()> {
    let size = args.size as usize;
    with_self_qp(name, size, |s| {
        let mut buf = [0u8; wqe::MAX_WQE_LEN];
        let Some((len, how)) = s.build(&mut buf, size, args.gather) else {
            bail!("a {size}-byte payload does not fit a WQE");
        };
        let r = s.post(&buf[..len], flags(args))?;
        if args.hexdump {
            hexdump(s.staged(), how, s.lkey(), "as stamped in the send queue");
        }
        report(s.qpn(), &r);
        if !s.landed(size) {
            bail!("the write completed, but its {size} bytes are not where it wrote them");
        }
        Ok(())
    })
}

fn flags(args: &Args) -> u32 {
    if args.force_doorbell {
        abi::POST_F_FORCE_DOORBELL
    } else {
        0
    }
}

fn hexdump(wqe: &[u8], how: Carry, lkey: u32, when: &str) {
    println!(
        "WQE, {} bytes ({} units), {when}{}:",
        wqe.len(),
        wqe.len() / 16,
        if how == Carry::Gather {
            format!(", payload gathered from the registered buffer (lkey {lkey:#x})")
        } else {
            String::new()
        }
    );
    for (i, row) in wqe.chunks(16).enumerate() {
        let hex: Vec<String> = row.iter().map(|b| format!("{b:02x}")).collect();
        println!("  {:04x}: {}", i * 16, hex.join(" "));
    }
}

fn report(qpn: u32, r: &abi::PostResult) {
    println!(
        "QPN {:#x}: {} path, {} bytes at BAR2 {:#x}, {} store blocks, send-queue slot {}",
        qpn,
        path_name(r.path),
        r.bytes_written,
        r.bf_offset,
        r.store_blocks,
        r.wqe_index
    );
}
