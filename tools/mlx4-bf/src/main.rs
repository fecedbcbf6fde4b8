// SPDX-License-Identifier: GPL-2.0

//! `mlx4-bf`: exercise and measure the mlx4_bf BlueFlame driver.
//!
//! - `info`: device and context facts (QUERY_DEVICE, QUERY_CONTEXT, QUERY_STATS)
//! - `post`: build one WQE the way libmlx4 does and post it
//! - `lat`: the classic latency sweep over payload sizes
//! - `bench`: BlueFlame, doorbell and a no-op ioctl interleaved, as ratios
//! - `stress`: several contexts posting at once
//! - `pingpong`: perftest ib_send_lat between two contexts
//!
//! Each subcommand lives in `cmd/`; this file is the command line.

mod analyzer;
mod cmd;
mod common;
mod cq;
mod device;
mod report;
mod stats;

use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};

use cmd::{bench, info, lat, pingpong, post, stress};
use common::open;

#[derive(Parser)]
#[command(version, about = "Exercise and measure the mlx4_bf BlueFlame driver")]
struct Cli {
    /// The device node of the adapter.
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
    Post(post::Args),
    /// Latency sweep: one POST_SEND round trip per iteration, per payload size.
    Lat(lat::Args),
    /// BlueFlame, doorbell and no-op ioctl interleaved per size: ratios to the no-op.
    Bench(bench::Args),
    /// Several contexts (threads with their own fd) posting for a while.
    Stress(stress::Args),
    /// perftest ib_send_lat: SEND ping-pong between two contexts, per payload size.
    Pingpong(pingpong::Args),
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match &cli.command {
        Command::Info(a) => info::run(&open(&cli.device)?, a),
        Command::Post(a) => post::run(&open(&cli.device)?, a),
        Command::Lat(a) => lat::run(&open(&cli.device)?, a),
        Command::Bench(a) => bench::run(&open(&cli.device)?, a),
        Command::Stress(a) => stress::run(&cli.device, a),
        Command::Pingpong(a) => pingpong::run(&cli.device, a),
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
            "mlx4-bf lat --min 4 --max 260 --step 32 --iters 200",
            "mlx4-bf bench --icount --out-dir /tmp/results --min 4 --max 208 --step 12 --iters 2000",
            "mlx4-bf stress --threads 1,2 --seconds 2",
            "mlx4-bf pingpong --size 4 --iters 50",
            "mlx4-bf pingpong --all --min 4 --max 208 --step 68 --iters 300 --out-dir /tmp/results",
            "mlx4-bf pingpong --path db --wait event --procs",
        ] {
            let words: Vec<&str> = line.split_whitespace().collect();
            assert!(Cli::try_parse_from(&words).is_ok(), "{line}");
        }
        for bad in [
            "mlx4-bf pingpong --size 4 --min 8",
            "mlx4-bf pingpong --all --path bf",
            "mlx4-bf pingpong --iters 3",
        ] {
            let words: Vec<&str> = bad.split_whitespace().collect();
            assert!(Cli::try_parse_from(&words).is_err(), "{bad}");
        }
    }
}
