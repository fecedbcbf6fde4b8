// SPDX-License-Identifier: GPL-2.0

//! `mlx4-bf`: exercise and measure the mlx4_bf BlueFlame driver.
//!
//! - `info`: device and context facts (QUERY_DEVICE, QUERY_CONTEXT, QUERY_STATS)
//! - `post`: build one WQE the way libmlx4 does and post it
//! - `lat`: the classic latency sweep over payload sizes
//! - `bench`: BlueFlame, doorbell and a no-op ioctl interleaved, as ratios
//! - `stress`: several contexts posting at once
//! - `pingpong`: perftest ib_send_lat between two contexts, SENDs or RDMA
//!   writes with immediate
//!
//! `post`, `lat`, `bench` and `stress` post RDMA writes into a memory
//! region of their own context (`mr.rs`; ABI 3), registered for remote
//! writes: a new QP is connected to itself. Each subcommand lives in
//! `cmd/`; what they share sits beside this file, one concern a module
//! (`device`, `errors`, `sweep`, `rdma_write`, `write_scratch`,
//! `back_pressure`, `progress`, `report`, ...); this file is the command
//! line.

mod analyzer;
mod back_pressure;
mod cmd;
mod cq;
mod device;
mod errors;
mod kping;
mod mr;
mod progress;
mod qp_post;
mod rdma_write;
mod report;
mod stats;
mod sweep;
mod userqp;
mod verbs;
mod verbs_post;
mod write_scratch;

use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};

use cmd::{bench, counters, info, lat, pingpong, post, stress, userpost};
use device::open;

#[derive(Parser)]
#[command(version, about = "Exercise and measure the mlx4_bf BlueFlame driver")]
struct Cli {
    /// The adapter: its misc device node (/dev/mlx4_bf<N>), or its RDMA
    /// device's name (mlx4_bf<N>, through libibverbs and the QP_POST
    /// method).
    #[arg(long, short, global = true, default_value = "/dev/mlx4_bf0")]
    device: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show device and context facts and counters.
    Info(info::Args),
    /// Post one RDMA-write WQE and show what the driver did.
    ///
    /// The write goes into a memory region of the same context (a new QP is
    /// connected to itself), registered with REMOTE_WRITE; a gathered
    /// payload (--gather, or too large for an inline WQE) is read from it.
    Post(post::Args),
    /// Latency sweep: one POST_SEND round trip per iteration, per payload size.
    ///
    /// Each post is an RDMA write into a memory region of the same context,
    /// registered with REMOTE_WRITE before the sweep. Payloads too large
    /// for an inline WQE (above 912 bytes with 1008-byte WQEs) are gathered
    /// from that registered buffer by a data segment naming its lkey:
    /// doorbell path only, so the bf path skips them. A "# gathered" line
    /// before the tables lists those sizes.
    Lat(lat::Args),
    /// BlueFlame, doorbell and no-op ioctl interleaved per size: ratios to the no-op.
    Bench(bench::Args),
    /// Several contexts (threads with their own fd) posting for a while.
    Stress(stress::Args),
    /// perftest ib_send_lat: SEND ping-pong between two contexts, per payload size.
    ///
    /// --op rdma-write-imm makes every message an RDMA_WRITE_IMM into the
    /// peer's registered region instead (inline when the WQE allows, else
    /// gathered from a registered send region); the receiver waits for the
    /// receive CQE, checks its immediate and the bytes that landed, and
    /// reposts one receive WQE, as for a SEND. Tables and files are headed
    /// and named with the op.
    Pingpong(pingpong::Args),
    /// The post's cost by ioctl against rdma-core's way, per payload size.
    ///
    /// A second context posts to a QP whose send queue it owns
    /// (MLX4_BF_QP_F_USER_SEND): the WQE into the mapped send queue, then
    /// to the mapped BlueFlame page (or the doorbell), by stores on x86 and
    /// by the s390_pci_mmio_write system call on s390. Interleaved with the
    /// ioctl's staged BlueFlame and doorbell posts and the no-op ioctl.
    /// --pingpong: ib_write_lat-style RDMA-write ping-pong both ways instead.
    Userpost(userpost::Args),
    /// The device model's analyzer counters, whichever driver owns the
    /// adapter (no /dev/mlx4_bf0 needed): one `name value` line each.
    Counters(counters::Args),
}

/// The RDMA device `--device` names, if it names one (not a path).
fn rdma_device(cli: &Cli) -> Option<&str> {
    let name = cli.device.to_str()?;
    (!name.contains('/')).then_some(name)
}

fn run(cli: Cli) -> anyhow::Result<()> {
    if let Some(name) = rdma_device(&cli) {
        return run_verbs(name, &cli);
    }
    match &cli.command {
        Command::Info(a) => info::run(&open(&cli.device)?, a),
        Command::Post(a) => post::run(&open(&cli.device)?, a),
        Command::Lat(a) => lat::run(&open(&cli.device)?, a),
        Command::Bench(a) => bench::run(&open(&cli.device)?, a),
        Command::Stress(a) => stress::run(&cli.device, a),
        Command::Pingpong(a) => pingpong::run(&cli.device, a),
        Command::Userpost(a) => userpost::run(&cli.device, a),
        Command::Counters(a) => counters::run(a),
    }
}

fn run_verbs(name: &str, cli: &Cli) -> anyhow::Result<()> {
    match &cli.command {
        Command::Info(a) => info::run_verbs(name, a),
        Command::Post(a) => post::run_verbs(name, a),
        Command::Lat(a) => lat::run_verbs(name, a),
        Command::Stress(a) => stress::run_verbs(name, a),
        Command::Bench(a) => bench::run_verbs(name, a),
        Command::Userpost(a) => userpost::run_verbs(name, a),
        Command::Pingpong(a) => pingpong::run_verbs(name, a),
        _ => anyhow::bail!(
            "{name}: this subcommand speaks only the misc device (/dev/mlx4_bf<N>) so far"
        ),
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) => {
            // One line naming the problem, like the other errors.
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("invalid arguments");
            eprintln!("mlx4-bf: {}", first.trim_start_matches("error: "));
            return ExitCode::from(2);
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // The whole chain on one line: "what: why".
            eprintln!("mlx4-bf: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn the_documented_command_lines_parse() {
        for line in [
            "mlx4-bf info",
            "mlx4-bf --device /dev/mlx4_bf9 info",
            "mlx4-bf post --size 100 --hexdump",
            "mlx4-bf post --size 100 --force-doorbell",
            "mlx4-bf --device mlx4_bf0 post --size 208 --hexdump",
            "mlx4-bf --device mlx4_bf0 bench --out-dir /tmp/b --min 4 --max 208 --step 204 --iters 20",
            "mlx4-bf --device mlx4_bf0 stress --threads 1,2 --seconds 1",
            "mlx4-bf --device mlx4_bf0 userpost --min 4 --max 208 --step 204 --iters 20",
            "mlx4-bf --device mlx4_bf0 pingpong --all --min 4 --max 208 --step 204 --iters 20",
            "mlx4-bf lat --min 4 --max 208 --step 68 --iters 200 --out /tmp/results/lat.dat",
            "mlx4-bf bench --icount --out-dir /tmp/results --min 4 --max 208 --step 12 --iters 2000",
            "mlx4-bf stress --threads 1,2 --seconds 2",
            "mlx4-bf pingpong --size 4 --iters 50",
            "mlx4-bf pingpong --all --min 4 --max 208 --step 68 --iters 300 --out-dir /tmp/results",
            "mlx4-bf pingpong --path db --wait event --procs",
            "mlx4-bf pingpong --op rdma-write-imm --size 64 --iters 50",
            "mlx4-bf pingpong --op rdma-write-imm --all --min 4 --max 1004 --step 1000 --iters 50",
            "mlx4-bf pingpong --op send --procs --path db --wait event",
            "mlx4-bf post --size 2000 --hexdump",
            "mlx4-bf stress --threads 2 --seconds 1 --size 2000",
            "mlx4-bf userpost --icount --min 4 --max 208 --step 68 --iters 300",
            "mlx4-bf userpost --pingpong --min 4 --max 208 --step 68 --iters 300",
        ] {
            let words: Vec<&str> = line.split_whitespace().collect();
            assert!(Cli::try_parse_from(&words).is_ok(), "{line}");
        }
        for bad in [
            "mlx4-bf pingpong --size 4 --min 8",
            "mlx4-bf pingpong --all --path bf",
            "mlx4-bf pingpong --iters 3",
            "mlx4-bf pingpong --op rdma-write",
            "mlx4-bf stress --size 70000",
            "mlx4-bf userpost --icount --pingpong",
        ] {
            let words: Vec<&str> = bad.split_whitespace().collect();
            assert!(Cli::try_parse_from(&words).is_err(), "{bad}");
        }
    }
}
