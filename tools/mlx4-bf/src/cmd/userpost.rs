// SPDX-License-Identifier: GPL-2.0

//! `userpost`: what a post costs through the ioctl (the kernel copies,
//! checks and writes the WQE) against rdma-core's way (user space writes the
//! WQE to its send queue and to the BlueFlame page; on s390 through the
//! `s390_pci_mmio_write` system call), per payload size, interleaved; and
//! the in-kernel post of the same WQE (the kernel ping's RDMA WRITE, timed
//! in the kernel): the ioctl without its system call.

use std::{fmt::Write as _, fs, io, path::Path, path::PathBuf, time::Instant};

use anyhow::{anyhow, Context, Result};
use mlx4_bf_core::{abi, wqe};

use crate::{
    back_pressure::post_staged_timed,
    cmd::writelat,
    device::open,
    errors::ioerr,
    kping,
    report::writer_name,
    stats::summarize,
    sweep::{Sweep, WARMUP},
    userqp::{self, UserPath, UserQp},
    write_scratch::WriteScratch,
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

pub fn run(path: &Path, args: &Args) -> Result<()> {
    if args.pingpong {
        return pingpong(path, args);
    }
    let (sweep, out_dir) = (&args.sweep, args.out_dir.as_path());
    let (scale, unit) = if args.icount {
        (1000.0, "guest instructions (QEMU -icount shift=0)")
    } else {
        (1.0, "microseconds (wall clock)")
    };
    // The ioctl's context, and one whose QP's send queue is user space's:
    // a context posts one way only.
    let kdev = open(path)?;
    let udev = open(path)?;
    let info = kdev.query_device().map_err(ioerr("QUERY_DEVICE"))?;
    let kqp = kdev.create_qp().map_err(ioerr("CREATE_QP"))?;
    let mut uqp = UserQp::create(&udev)?;
    let (sizes, _) = sweep.bf_sizes(&info)?;
    fs::create_dir_all(out_dir).with_context(|| format!("cannot create {}", out_dir.display()))?;
    let largest = sizes.iter().copied().max().unwrap_or(0);
    let kscratch = WriteScratch::new(&kdev, &info, largest)?;
    let uscratch = WriteScratch::new(&udev, &info, largest)?;
    let page = kdev
        .map(kqp.wqe_offset, 4096, true)
        .map_err(ioerr("mmap of the WQE page"))?;
    let kping_file = kping::command_file(path)?;
    let mut txt = format!(
        "# mlx4-bf userpost: {} writer, {} interleaved rounds per size\n\
         # medians in {unit}; ioctl = POST_SEND of a staged WQE, user = rdma-core's\n\
         # way (WQE into the mapped send queue, then {} the mapped BlueFlame page or doorbell), completions reaped in both;\n\
         # kernel_bf = the same RDMA WRITE posted by the kernel ping (post_send() timed in the kernel, {} round trips)\n\
         #bytes   {:<8} {:<8} {:<8} {:<8} {:<8} {:<9} user_bf/ioctl_bf user_db/ioctl_db kernel_bf/ioctl_bf\n",
        writer_name(info.writer),
        sweep.iters,
        userqp::BAR_WRITES,
        sweep.iters,
        PATHS[0],
        PATHS[1],
        PATHS[2],
        PATHS[3],
        PATHS[4],
        "kernel_bf",
    );
    let (mut kbuf, mut ubuf) = ([0u8; wqe::MAX_WQE_LEN], [0u8; wqe::MAX_WQE_LEN]);
    for &size in &sizes {
        let no_fit = || anyhow!("a {size}-byte payload does not fit a WQE");
        let (klen, _) = kscratch.build(&mut kbuf, size, false).ok_or_else(no_fit)?;
        let (ulen, _) = uscratch.build(&mut ubuf, size, false).ok_or_else(no_fit)?;
        let (kwqe, uwqe) = (&kbuf[..klen], &ubuf[..ulen]);
        let mut samples: [Vec<f64>; 5] = Default::default();
        for round in 0..(sweep.iters + WARMUP) {
            for k in 0..PATHS.len() {
                // Rotate the order so no path always runs first.
                let which = (round as usize + k) % PATHS.len();
                let t = Instant::now();
                match which {
                    0 => kdev.noop(),
                    1 => post_staged_timed(&kdev, &kqp, &page, kwqe, abi::POST_F_REQUIRE_BF),
                    2 => post_staged_timed(&kdev, &kqp, &page, kwqe, abi::POST_F_FORCE_DOORBELL),
                    3 => uqp
                        .post_waiting(uwqe, UserPath::BlueFlame)
                        .map_err(io::Error::other),
                    _ => uqp
                        .post_waiting(uwqe, UserPath::Doorbell)
                        .map_err(io::Error::other),
                }
                .map_err(ioerr("userpost"))?;
                let us = t.elapsed().as_secs_f64() * 1e6 * scale;
                if round >= WARMUP {
                    samples[which].push(us);
                }
            }
        }
        let med: Vec<f64> = samples
            .iter()
            .map(|s| {
                summarize(s)
                    .map(|s| s.typical)
                    .ok_or_else(|| anyhow!("no samples"))
            })
            .collect::<Result<_>>()?;
        // ns in the kernel: instructions under -icount shift=0, else to us.
        let command = format!("loop,count={},size={size},path=bf", sweep.iters);
        let kernel = kping::write_post_ns(&kping_file, &command)? * scale / 1000.0;
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
    }
    while uqp.outstanding() != 0 {
        uqp.reap()?;
    }
    print!("{txt}");
    let p = out_dir.join("userpost.txt");
    fs::write(&p, &txt).with_context(|| format!("cannot write {}", p.display()))?;
    kscratch.close()?;
    uscratch.close()?;
    println!("wrote userpost.txt to {}", out_dir.display());
    Ok(())
}

/// The two ways of posting in an ib_write_lat ping-pong, per size.
fn pingpong(path: &Path, args: &Args) -> Result<()> {
    let (sweep, out_dir) = (&args.sweep, args.out_dir.as_path());
    let info = open(path)?.query_device().map_err(ioerr("QUERY_DEVICE"))?;
    let (sizes, _) = sweep.bf_sizes(&info)?;
    let sizes: Vec<usize> = sizes.into_iter().map(|s| s.next_multiple_of(4)).collect();
    fs::create_dir_all(out_dir).with_context(|| format!("cannot create {}", out_dir.display()))?;
    let ioctl = writelat::one_way_us(path, &info, false, &sizes, sweep.iters, WARMUP)?;
    let user = writelat::one_way_us(path, &info, true, &sizes, sweep.iters, WARMUP)?;
    let mut txt = format!(
        "# mlx4-bf userpost --pingpong: ib_write_lat-style RDMA-write ping-pong between two contexts,\n\
         # BlueFlame, {} writer, {} iterations per size; t_typical = median round trip / 2, microseconds\n\
         # (wall clock under emulation); ioctl = POST_SEND, user = {} the mapped BlueFlame page\n\
         #bytes   ioctl[usec]  user[usec]   user/ioctl\n",
        writer_name(info.writer),
        sweep.iters,
        userqp::BAR_WRITES,
    );
    for ((size, k), u) in sizes.iter().zip(&ioctl).zip(&user) {
        let _ = writeln!(txt, "{size:<8} {k:<12.2} {u:<12.2} {:.2}", u / k);
    }
    print!("{txt}");
    let p = out_dir.join("userpost-pingpong.txt");
    fs::write(&p, &txt).with_context(|| format!("cannot write {}", p.display()))?;
    println!("wrote userpost-pingpong.txt to {}", out_dir.display());
    Ok(())
}
