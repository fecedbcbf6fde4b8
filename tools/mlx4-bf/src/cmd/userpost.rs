// SPDX-License-Identifier: GPL-2.0

//! `userpost`: what a post costs through the QP_POST method (the kernel
//! copies, checks and writes the WQE) against rdma-core's way (libmlx4
//! writes the WQE to its send queue and to the BlueFlame page itself; on
//! s390 through the `s390_pci_mmio_write` system call), per payload size,
//! interleaved; and the in-kernel post of the same WQE (the kernel ping's
//! RDMA WRITE, timed in the kernel): the ioctl without its system call.

use std::{fmt::Write as _, fs, path::Path, path::PathBuf, time::Instant};

use anyhow::{anyhow, Context, Result};
use mlx4_bf_core::{abi, wqe};

use crate::{
    cmd::writelat,
    errors::ioerr,
    kping,
    qp_post::uverbs_floor,
    stats::summarize,
    sweep::{Sweep, WARMUP},
    verbs_post::with_self_qp,
};

/// How this process writes the BAR pages (libmlx4's own posts), for the
/// tables.
const BAR_WRITES: &str = if cfg!(target_arch = "s390x") {
    "s390_pci_mmio_write() to"
} else {
    "stores to"
};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    sweep: Sweep,
    /// Where userpost.txt goes.
    #[arg(long, default_value = "results")]
    out_dir: PathBuf,
    /// The guest runs under QEMU's `-icount shift=0`: report instructions.
    #[arg(long, conflicts_with = "pingpong")]
    icount: bool,
    /// Instead of the cost per post: ib_write_lat-style RDMA-write ping-pong
    /// between two contexts, by ioctl and from user space, in wall-clock
    /// time (never under -icount: the model answers in real time).
    #[arg(long)]
    pingpong: bool,
}

/// The paths, in the table's order.
const PATHS: [&str; 5] = ["noop", "ioctl_bf", "ioctl_db", "user_bf", "user_db"];

/// The table's last caption line and its column names.
fn columns(iters: u32) -> String {
    format!(
        "# kernel_bf = the same RDMA WRITE posted by the kernel ping (post_send() timed in the kernel, \
         {iters} round trips)\n\
         #bytes   {:<8} {:<8} {:<8} {:<8} {:<8} {:<9} user_bf/ioctl_bf user_db/ioctl_db kernel_bf/ioctl_bf\n",
        PATHS[0], PATHS[1], PATHS[2], PATHS[3], PATHS[4], "kernel_bf",
    )
}

/// One step of a round: path `which`'s call (timed), or what follows it
/// off the clock (reaping its completion).
#[derive(Clone, Copy)]
enum Step {
    Call(usize),
    Settle(usize),
}

/// Rounds of the five paths (`which` indexing [`PATHS`]), each round in a
/// rotated order so no path always runs first; the times of the calls
/// after the warm-up, per path, in `scale`d microseconds.
fn time_rounds(
    iters: u32,
    scale: f64,
    mut step: impl FnMut(Step) -> Result<()>,
) -> Result<[Vec<f64>; 5]> {
    let mut samples: [Vec<f64>; 5] = Default::default();
    for round in 0..(iters + WARMUP) {
        for k in 0..PATHS.len() {
            let which = (round as usize + k) % PATHS.len();
            let t = Instant::now();
            step(Step::Call(which))?;
            let us = t.elapsed().as_secs_f64() * 1e6 * scale;
            step(Step::Settle(which))?;
            if round >= WARMUP {
                samples[which].push(us);
            }
        }
    }
    Ok(samples)
}

/// The table's row of `size`: each path's median, the kernel ping's post
/// of the same write (`iters` of them), and the ratios.
fn write_row(
    txt: &mut String,
    size: usize,
    samples: &[Vec<f64>; 5],
    kping_file: &Path,
    iters: u32,
    scale: f64,
) -> Result<()> {
    let med: Vec<f64> = samples
        .iter()
        .map(|s| {
            summarize(s)
                .map(|s| s.typical)
                .ok_or_else(|| anyhow!("no samples"))
        })
        .collect::<Result<_>>()?;
    // ns in the kernel: instructions under -icount shift=0, else to us.
    let command = format!("loop,count={iters},size={size},path=bf");
    let kernel = kping::write_post_ns(kping_file, &command)? * scale / 1000.0;
    let _ = writeln!(
        txt,
        "{size:<8} {:<8.0} {:<8.0} {:<8.0} {:<8.0} {:<8.0} {:<9.0} {:<16.2} {:<16.2} {:.2}",
        med[0],
        med[1],
        med[2],
        med[3],
        med[4],
        kernel,
        med[3] / med[1],
        med[4] / med[2],
        kernel / med[1]
    );
    Ok(())
}

/// The comparison on the RDMA device `name`, each way in a context of its
/// own (each alternates its BlueFlame halves by itself): `ioctl` a
/// WQE this helper stamps in its QP's send queue and hands to QP_POST;
/// `user` libmlx4's `ibv_post_send()` of the same write with its own
/// stores (`MLX4DV_QP_BF_POST_USER`: on s390x without MIO one
/// `s390_pci_mmio_write()` per copy), BlueFlame for an inline WQE, the
/// doorbell for the payload gathered (not inline: libmlx4 rings the
/// doorbell); `noop` the uverbs floor; `kernel_bf` the kernel ping's post.
/// Every completion is reaped off the clock.
pub fn run(name: &str, args: &Args) -> Result<()> {
    if args.pingpong {
        return pingpong(name, args);
    }
    let (sweep, out_dir) = (&args.sweep, args.out_dir.as_path());
    let (scale, unit) = if args.icount {
        (1000.0, "guest instructions (QEMU -icount shift=0)")
    } else {
        (1.0, "microseconds (wall clock)")
    };
    fs::create_dir_all(out_dir).with_context(|| format!("cannot create {}", out_dir.display()))?;
    let largest = sweep.sizes()?.into_iter().max().unwrap_or(0);
    let kping_file = kping::command_file(name);
    with_self_qp(name, largest, |k| {
        with_self_qp(name, largest, |u| {
            u.set_bf_post(false)
                .map_err(ioerr("mlx4dv_qp_set_bf_post"))?;
            let cutoff = k.bf_cutoff()?;
            let writer = k.writer()?;
            let sizes = sweep.sizes_up_to(cutoff)?;
            let mut txt = format!(
                "# mlx4-bf userpost on {name}: {writer} writer, {} interleaved rounds per size\n\
                 # medians in {unit}; ioctl = QP_POST of a WQE stamped in the send queue, user = libmlx4's\n\
                 # ibv_post_send() with its own BlueFlame stores (inline) or doorbell (gathered); noop = the\n\
                 # uverbs floor (QUERY_CONTEXT); completions reaped off the clock;\n\
                 {}",
                sweep.iters,
                columns(sweep.iters),
            );
            let mut template = [0u8; wqe::MAX_WQE_LEN];
            for &size in &sizes {
                let (len, _) = k
                    .build(&mut template, size, false)
                    .ok_or_else(|| anyhow!("a {size}-byte payload does not fit a WQE"))?;
                let samples = time_rounds(sweep.iters, scale, |step| {
                    let which = match step {
                        Step::Call(which) => which,
                        // Every post is signaled: its completion reaped
                        // off the clock.
                        Step::Settle(0) => return Ok(()),
                        Step::Settle(1 | 2) => return k.await_completion(),
                        Step::Settle(_) => return u.await_completion(),
                    };
                    let flags = if which == 1 {
                        abi::POST_F_REQUIRE_BF
                    } else {
                        abi::POST_F_FORCE_DOORBELL
                    };
                    match which {
                        0 => uverbs_floor(k.cmd_fd()),
                        1 | 2 => k.submit(&template[..len], flags),
                        3 => u.post_libmlx4(size, true),
                        _ => u.post_libmlx4(size, false),
                    }
                    .map_err(ioerr(PATHS[which]))
                })?;
                write_row(&mut txt, size, &samples, &kping_file, sweep.iters, scale)?;
            }
            if !u.landed(largest.min(cutoff)) || !k.landed(largest.min(cutoff)) {
                anyhow::bail!("the writes completed, but their bytes are not where they went");
            }
            print!("{txt}");
            let p = out_dir.join("userpost.txt");
            fs::write(&p, &txt).with_context(|| format!("cannot write {}", p.display()))?;
            println!("wrote userpost.txt to {}", out_dir.display());
            Ok(())
        })
    })
}

/// The two ways of posting in an ib_write_lat ping-pong on the RDMA device
/// `name`, per size, up to the largest payload the kernel posts by
/// BlueFlame.
fn pingpong(name: &str, args: &Args) -> Result<()> {
    let sweep = &args.sweep;
    let (cutoff, writer) = with_self_qp(name, 1, |s| Ok((s.bf_cutoff()?, s.writer()?)))?;
    let sizes: Vec<usize> = sweep
        .sizes_up_to(cutoff)?
        .into_iter()
        .map(|s| s.next_multiple_of(4))
        .collect();
    let ioctl = writelat::one_way_us(name, false, &sizes, sweep.iters, WARMUP)?;
    let user = writelat::one_way_us(name, true, &sizes, sweep.iters, WARMUP)?;
    let ways =
        format!("ioctl = QP_POST on {name}, user = libmlx4's ibv_post_send(), its {BAR_WRITES}");
    write_pingpong(args, writer, &ways, &sizes, &ioctl, &user)
}

/// The ping-pong's table, printed and written to userpost-pingpong.txt.
fn write_pingpong(
    args: &Args,
    writer: &str,
    ways: &str,
    sizes: &[usize],
    ioctl: &[f64],
    user: &[f64],
) -> Result<()> {
    let out_dir = args.out_dir.as_path();
    fs::create_dir_all(out_dir).with_context(|| format!("cannot create {}", out_dir.display()))?;
    let mut txt = format!(
        "# mlx4-bf userpost --pingpong: ib_write_lat-style RDMA-write ping-pong between two contexts,\n\
         # BlueFlame, {writer} writer, {} iterations per size; t_typical = median round trip / 2, microseconds\n\
         # (wall clock under emulation); {ways} the mapped BlueFlame page\n\
         #bytes   ioctl[usec]  user[usec]   user/ioctl\n",
        args.sweep.iters,
    );
    for ((size, k), u) in sizes.iter().zip(ioctl).zip(user) {
        let _ = writeln!(txt, "{size:<8} {k:<12.2} {u:<12.2} {:.2}", u / k);
    }
    print!("{txt}");
    let p = out_dir.join("userpost-pingpong.txt");
    fs::write(&p, &txt).with_context(|| format!("cannot write {}", p.display()))?;
    println!("wrote userpost-pingpong.txt to {}", out_dir.display());
    Ok(())
}
