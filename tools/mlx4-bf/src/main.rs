// SPDX-License-Identifier: GPL-2.0

//! `mlx4-bf`: exercise and measure the mlx4_bf BlueFlame driver through its
//! RDMA device, `mlx4_bf<N>` (`--device`; `mlx4_bf0` by default): verbs
//! objects through the project's static libibverbs and libmlx4, each WQE
//! built and stamped in its QP's own send queue as libmlx4 does and posted
//! through the driver's `QP_POST` method (`qp_post`). The misc device
//! (`/dev/mlx4_bf<N>`) is gone: `--device` refuses a path.
//!
//! - `info`: the device's and port's facts, its post counters (sysfs)
//! - `post`: build one WQE the way libmlx4 does and post it
//! - `lat`: the classic latency sweep over payload sizes
//! - `bench`: BlueFlame, doorbell and the uverbs floor interleaved, as ratios
//! - `stress`: several contexts posting at once
//! - `pingpong`: perftest ib_send_lat between two contexts, SENDs or RDMA
//!   writes with immediate
//! - `userpost`: `QP_POST` against libmlx4's own stores
//! - `counters`: the device model's analyzer counters (no device needed)
//!
//! `post`, `lat`, `bench` and `stress` post RDMA writes into a memory
//! region of their own context: a new QP is connected to itself
//! (`verbs_post`). Each subcommand lives in `cmd/`; what they share sits
//! beside this file, one concern a module (`device`, `verbs`, `qp_post`,
//! `verbs_post`, `errors`, `sweep`, `rdma_write`, `progress`, `report`,
//! ...); this file is the command line.

mod analyzer;
mod cmd;
mod device;
mod errors;
mod kping;
mod mapping;
mod progress;
mod qp_post;
mod rdma_write;
mod report;
mod stats;
mod sweep;
mod verbs;
mod verbs_post;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use cmd::{bench, counters, info, lat, pingpong, post, stress, userpost};

#[derive(Parser)]
#[command(version, about = "Exercise and measure the mlx4_bf BlueFlame driver")]
struct Cli {
    /// The adapter's RDMA device (mlx4_bf<N>, as /sys/class/infiniband
    /// lists it), through libibverbs and the QP_POST method. The misc
    /// device /dev/mlx4_bf<N> is gone: a path is refused.
    #[arg(long, short, global = true, default_value = device::DEFAULT,
          value_parser = device::parse_name)]
    device: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show the device's and port 1's facts and the device's post counters.
    Info(info::Args),
    /// Post one RDMA-write WQE through QP_POST and show what the driver did.
    ///
    /// The write goes into a memory region of the same context (a new QP is
    /// connected to itself), registered with REMOTE_WRITE; a gathered
    /// payload (--gather, or too large for an inline WQE) is read from it.
    /// The WQE is stamped in the QP's send queue as libmlx4 stamps it; the
    /// bytes are checked where the write put them.
    Post(post::Args),
    /// Latency sweep: one QP_POST call per iteration, per payload size.
    ///
    /// Each post is an RDMA write into a memory region of the same context,
    /// registered with REMOTE_WRITE before the sweep, its completion reaped
    /// off the clock. Payloads too large for an inline WQE (above 912 bytes
    /// with 1008-byte WQEs) are gathered from that registered buffer by a
    /// data segment naming its lkey: doorbell path only, so the bf path
    /// skips them. A "# gathered" line before the tables lists those sizes.
    Lat(lat::Args),
    /// BlueFlame, doorbell and the uverbs floor interleaved per size: ratios to the floor.
    Bench(bench::Args),
    /// Several contexts (threads with their own context) posting for a while.
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
    /// The post's cost through QP_POST against libmlx4's own, per payload size.
    ///
    /// A second context posts with libmlx4's ibv_post_send() and its own
    /// stores to the BlueFlame page (or the doorbell), by stores on x86 and
    /// by the s390_pci_mmio_write system call on s390. Interleaved with
    /// QP_POST's BlueFlame and doorbell posts and the uverbs floor; beside
    /// them the kernel ping's post of the same write (debugfs).
    /// --pingpong: ib_write_lat-style RDMA-write ping-pong both ways instead.
    Userpost(userpost::Args),
    /// The device model's analyzer counters, whichever driver owns the
    /// adapter (no RDMA device needed): one `name value` line each.
    Counters(counters::Args),
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let name = cli.device.as_str();
    match &cli.command {
        Command::Info(a) => info::run(name, a),
        Command::Post(a) => post::run(name, a),
        Command::Lat(a) => lat::run(name, a),
        Command::Bench(a) => bench::run(name, a),
        Command::Stress(a) => stress::run(name, a),
        Command::Pingpong(a) => pingpong::run(name, a),
        Command::Userpost(a) => userpost::run(name, a),
        Command::Counters(a) => counters::run(a),
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
    fn the_device_is_the_rdma_device_mlx4_bf0_unless_named() {
        let cli = Cli::try_parse_from(["mlx4-bf", "info"]).unwrap();
        assert_eq!(cli.device, "mlx4_bf0");
        let e = Cli::try_parse_from(["mlx4-bf", "--device", "/dev/mlx4_bf0", "post"])
            .err()
            .unwrap()
            .to_string();
        assert!(e.lines().next().unwrap().contains("misc device"), "{e}");
    }

    #[test]
    fn the_documented_command_lines_parse() {
        for line in [
            "mlx4-bf info",
            "mlx4-bf --device mlx4_bf9 info",
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
            "mlx4-bf --device /dev/mlx4_bf0 info",
            "mlx4-bf --device /dev/mlx4_bf0 counters",
        ] {
            let words: Vec<&str> = bad.split_whitespace().collect();
            assert!(Cli::try_parse_from(&words).is_err(), "{bad}");
        }
    }
}
