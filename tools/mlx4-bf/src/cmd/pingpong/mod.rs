// SPDX-License-Identifier: GPL-2.0

//! `pingpong`: perftest `ib_send_lat` between two endpoints, each its own
//! context of the RDMA device (opened twice) with one QP, connected to
//! each other.
//!
//! The client posts a SEND with the payload inline and waits for the
//! server's answer of the same size; the server waits for the SEND, then
//! answers. Each endpoint's WQEs are built and stamped in its QP's send
//! queue as libmlx4 stamps a BlueFlame WQE and posted through QP_POST,
//! every one signaled (its completion reaped before the queue fills).
//! Receives are posted and polled through libibverbs, spinning on
//! `ibv_poll_cq()` (`--wait busy`) or with the receive CQ armed on a
//! completion channel and asleep in poll(2) (`--wait event`). Timing is
//! perftest's: the client stamps before each post, and the `iters - 1`
//! deltas are round trips (see [`crate::stats::perftest_lat`]).
//!
//! With `--op rdma-write-imm` each message is an RDMA_WRITE_IMM instead:
//! each endpoint registers a receive region with REMOTE_WRITE, and the
//! peer writes its payload there (inline when the WQE allows, else
//! gathered from its own registered send region); the immediate (the
//! message's sequence number) comes back in a receive CQE, which consumes
//! one posted receive WQE but writes nothing into the receive buffer. The
//! receiver checks the immediate and the bytes that landed in its region.
//!
//! The two endpoints talk over a socket pair for everything but the
//! measurement: the QPNs, the registered regions' addresses and rkeys, and
//! before each size a job message the server acknowledges (the barrier).
//! A closed socket means the peer ended: every wait watches it, so one
//! side's error never leaves the other spinning.
//!
//! The files, each using only those listed before it: `options` (op, path,
//! wait), `message` (payloads, immediates, buffers), `link` (the control
//! channel), `facts` (an endpoint as the plan and tables see it), `plan`
//! (the jobs and the sizes a path skips), `peer` (an endpoint as the roles
//! use it, and its waits), `verbs` (one side's verbs context: post, wait,
//! check), `output` (the tables as printed), `files` (`--out-dir`),
//! `roles` (server, client, fork); this one is the command line and the
//! run.

mod facts;
mod files;
mod link;
mod message;
mod options;
mod output;
mod peer;
mod plan;
mod roles;
mod verbs;

use std::{os::unix::net::UnixStream, path::PathBuf, thread, time::Duration};

use anyhow::{anyhow, bail, Context, Result};

use crate::sweep::Sweep;

use self::{
    files::write_files,
    options::{Op, PathMode, WaitMode},
    output::Output,
    plan::Plan,
    roles::{client, combine, run_forked, server},
};

#[derive(clap::Args)]
pub struct Args {
    /// Smallest payload in bytes.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=65536))]
    min: u32,
    /// Largest payload in bytes.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=65536))]
    max: u32,
    /// Step between payload sizes.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=65536))]
    step: u32,
    /// One payload size instead of the sweep.
    #[arg(long, conflicts_with_all = ["min", "max", "step"],
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    size: Option<u32>,
    /// Round trips per size (perftest's -n; no warm-up: the two largest are dropped).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(4..=10_000_000))]
    iters: u32,
    /// The path of every post (SEND or RDMA write).
    #[arg(long, value_enum, default_value_t = PathMode::Auto)]
    path: PathMode,
    /// How an endpoint waits for its receive.
    #[arg(long, value_enum, default_value_t = WaitMode::Busy)]
    wait: WaitMode,
    /// What each message is: a SEND (the default), or an RDMA write with
    /// immediate into the peer's registered region (its tables headed and
    /// files named with the op).
    #[arg(long, value_enum, default_value_t = Op::Send)]
    op: Op,
    /// The 2x2 matrix: BlueFlame and doorbell, each with busy and event waits.
    #[arg(long, conflicts_with_all = ["path", "wait"])]
    all: bool,
    /// Two processes (fork) instead of two threads.
    #[arg(long)]
    procs: bool,
    /// Write the tables (pingpong.txt), one data file per path and wait mode
    /// (pingpong-<path>-<wait>.dat: `# PacketSize, LatTypical, LatBest,
    /// LatWorst`) and the plots (pingpong.svg; pingpong-modelled.svg when
    /// the device model reports modelled latencies); with `--op
    /// rdma-write-imm` every name starts pingpong-rdma-write-imm instead.
    #[arg(long)]
    out_dir: Option<PathBuf>,
    /// Separator of the data file columns.
    #[arg(long, default_value = ", ")]
    sep: String,
    /// Seconds an endpoint waits for one receive before it gives up.
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
}

/// The run with both endpoints on the RDMA device `name`: sends through
/// QP_POST, receives through libibverbs (events on a completion channel).
pub fn run(name: &str, args: &Args) -> Result<()> {
    let dev = &verbs::Verbs(name);
    if !(args.timeout > 0.0 && args.timeout <= 3600.0) {
        bail!("--timeout {} is outside 0..3600", args.timeout);
    }
    let timeout = Duration::from_secs_f64(args.timeout);
    let sizes = match args.size {
        Some(s) => vec![s as usize],
        None => Sweep {
            min: args.min,
            max: args.max,
            step: args.step,
            iters: args.iters,
        }
        .sizes()?,
    };
    let configs = if args.all {
        vec![
            (PathMode::Bf, WaitMode::Busy),
            (PathMode::Db, WaitMode::Busy),
            (PathMode::Bf, WaitMode::Event),
            (PathMode::Db, WaitMode::Event),
        ]
    } else {
        vec![(args.path, args.wait)]
    };
    let plan = Plan {
        sizes,
        configs,
        iters: args.iters,
        procs: args.procs,
        op: args.op,
    };
    let mut out = Output::default();
    let results = if args.procs {
        run_forked(dev, timeout, &plan, &mut out)?
    } else {
        let (a, b) = UnixStream::pair().context("socketpair")?;
        thread::scope(|s| {
            let setup = plan.setup();
            let h = s.spawn(move || server(dev, b, timeout, setup));
            let r = client(dev, a, timeout, &plan, &mut out);
            let server = h
                .join()
                .unwrap_or_else(|_| Err(anyhow!("the server thread panicked")));
            combine(r, server)
        })?
    };
    if let Some(dir) = &args.out_dir {
        let written = write_files(dir, &out.text, &results, &args.sep, out.cutoff, args.op)?;
        println!("wrote {} to {}", written.join(", "), dir.display());
    }
    Ok(())
}
