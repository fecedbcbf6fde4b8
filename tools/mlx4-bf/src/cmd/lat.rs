// SPDX-License-Identifier: GPL-2.0

//! `lat`: the classic latency sweep, one QP_POST call per iteration, per
//! payload size.
//!
//! Each post is an RDMA write into a memory region of the same context
//! (a new QP is connected to itself), registered with REMOTE_WRITE before
//! the sweep, its completion reaped off the clock. A payload whose WQE
//! would not fit inline (above 912 bytes with the largest WQE, 1008 bytes)
//! is gathered from that region by a data segment naming its lkey:
//! doorbell path only, so `--path bf` skips those sizes. A comment line
//! before the tables lists them.
//!
//! The clock is wall time. On the device model (its diagnostic block
//! answers) every BAR2 write is a trapped MMIO write that QEMU hands to the
//! model, so the times measure the emulator: a caption line says so before
//! the tables, which keep perftest's format.

use std::{
    fs,
    path::{Path, PathBuf},
    time::Instant,
};

use anyhow::{anyhow, Context, Result};
use clap::ValueEnum;
use mlx4_bf_core::{abi, wqe};

use crate::{
    analyzer::Analyzer,
    errors::ioerr,
    rdma_write::gathered_sizes,
    report,
    stats::summarize,
    sweep::{Sweep, WARMUP},
    verbs_post::with_self_qp,
};

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PathChoice {
    /// BlueFlame only (sizes that do not fit are skipped)
    Bf,
    /// Doorbell only (forced)
    Db,
    /// Whatever the driver picks
    Auto,
    /// BlueFlame and doorbell, side by side
    Both,
}

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    sweep: Sweep,
    #[arg(long, value_enum, default_value_t = PathChoice::Both)]
    path: PathChoice,
    /// Separator of the data file columns.
    #[arg(long, default_value = ", ")]
    sep: String,
    /// Write the data file (`# PacketSize, LatTypical, LatBest, LatWorst`);
    /// with two paths, `-bf`/`-db` is added before the extension.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Write an SVG plot of typical latency against payload size.
    #[arg(long)]
    plot: Option<PathBuf>,
}

/// The comment line that says what lat's clock measures; `model` is the
/// PCI function of the device model when the adapter is one.
fn clock_caption(model: Option<&str>) -> String {
    let clock = "# clock: wall time of each QP_POST call, in microseconds".to_owned();
    match model {
        None => clock,
        Some(bdf) => format!(
            "{clock}, under emulation: the adapter is the device model at {bdf}, each BAR2 \
             write a trapped MMIO write, so the times are the emulator's cost, not the \
             adapter's (what the adapter saw: tools/vm/trace_view.py --paths on the trace)"
        ),
    }
}

/// The paths a choice sweeps, with the post flags that make each.
fn paths(choice: PathChoice) -> &'static [(&'static str, u32)] {
    match choice {
        PathChoice::Bf => &[("bf", abi::POST_F_REQUIRE_BF)],
        PathChoice::Db => &[("db", abi::POST_F_FORCE_DOORBELL)],
        PathChoice::Auto => &[("auto", 0)],
        PathChoice::Both => &[
            ("bf", abi::POST_F_REQUIRE_BF),
            ("db", abi::POST_F_FORCE_DOORBELL),
        ],
    }
}

/// Writes a path's data file at `out` (with `-path` before the extension
/// when several paths are swept); returns where.
fn write_data(
    out: &Path,
    several: bool,
    path: &str,
    rows: &[(usize, crate::stats::Summary)],
    sep: &str,
) -> Result<PathBuf> {
    let file = if several {
        suffixed(out, path)
    } else {
        out.to_path_buf()
    };
    fs::write(&file, report::data_file(rows, sep))
        .with_context(|| format!("cannot write {}", file.display()))?;
    Ok(file)
}

/// `out` with `-tag` before its extension: one data file per path.
fn suffixed(path: &Path, tag: &str) -> PathBuf {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("lat");
    let name = match path.extension().and_then(|e| e.to_str()) {
        Some(ext) => format!("{stem}-{tag}.{ext}"),
        None => format!("{stem}-{tag}"),
    };
    path.with_file_name(name)
}

/// The line naming the sizes whose data is gathered from a registered
/// buffer (`lkey`, `len` bytes) rather than carried inline.
fn gathered_caption(lkey: u32, len: usize, list: &str) -> String {
    format!(
        "# gathered (too large for an inline WQE; DMA-read from a registered send buffer, \
         lkey {lkey:#x}, {len} bytes; doorbell path only, skipped on bf): {list}"
    )
}

/// The sweep on the RDMA device `name`: each iteration an RDMA write
/// staged in the QP's own send queue, the QP_POST call timed, its
/// completion reaped outside the clock. On `bf` a size whose WQE the
/// kernel will not take by BlueFlame (`REQUIRE_BF`: EINVAL) is skipped.
pub fn run(name: &str, args: &Args) -> Result<()> {
    let (sweep, out, plot) = (&args.sweep, args.out.as_deref(), args.plot.as_deref());
    let sizes = sweep.sizes()?;
    let largest = sizes.iter().copied().max().unwrap_or(0);
    let paths = paths(args.path);
    with_self_qp(name, largest, |s| {
        // The plot's marker: the largest payload the kernel posts by
        // BlueFlame, bisected by posts before the sweep.
        let cutoff = match plot {
            Some(_) => s.bf_cutoff()?,
            None => 0,
        };
        let mut series = Vec::new();
        let model = Analyzer::open().map(|a| a.bdf);
        println!("{}", clock_caption(model.as_deref()));
        if let Some(list) = gathered_sizes(&sizes, |size| s.carry(size)) {
            println!("{}", gathered_caption(s.lkey(), s.gather_len(), &list));
        }
        let mut template = [0u8; wqe::MAX_WQE_LEN];
        for &(path, flags) in paths {
            println!(
                "---- path: {path} ({} iterations per size, QP_POST on {name})",
                sweep.iters
            );
            println!("{}", report::PERFTEST_HEADER);
            let mut rows = Vec::new();
            for &size in &sizes {
                let Some((len, _)) = s.build(&mut template, size, false) else {
                    continue;
                };
                let mut post = || -> Result<Option<f64>> {
                    s.stage(&template[..len]);
                    let t = Instant::now();
                    match s.call(flags, None) {
                        Ok(()) => {}
                        Err(e)
                            if flags == abi::POST_F_REQUIRE_BF
                                && e.raw_os_error() == Some(libc::EINVAL) =>
                        {
                            return Ok(None);
                        }
                        Err(e) => return Err(ioerr("QP_POST")(e)),
                    }
                    let us = t.elapsed().as_secs_f64() * 1e6;
                    s.await_completion()?;
                    Ok(Some(us))
                };
                let mut samples = Vec::with_capacity(sweep.iters as usize);
                let mut refused = false;
                for i in 0..WARMUP + sweep.iters {
                    match post()? {
                        None => {
                            refused = true;
                            break;
                        }
                        Some(us) if i >= WARMUP => samples.push(us),
                        Some(_) => {}
                    }
                }
                if refused {
                    continue;
                }
                let st = summarize(&samples).ok_or_else(|| anyhow!("no samples"))?;
                println!("{}", report::perftest_row(size, &st));
                rows.push((size, st));
            }
            if let Some(out) = out {
                let file = write_data(out, paths.len() > 1, path, &rows, &args.sep)?;
                println!("wrote {}", file.display());
            }
            series.push((path, rows));
        }
        if let Some(plot) = plot {
            plot_series(plot, &series, cutoff)?;
            println!("wrote {}", plot.display());
        }
        Ok(())
    })
}

fn plot_series(
    plot: &Path,
    series: &[(&str, Vec<(usize, crate::stats::Summary)>)],
    cutoff: usize,
) -> Result<()> {
    let lines: Vec<report::Series<'_>> = series
        .iter()
        .map(|(name, rows)| report::Series {
            label: name,
            points: rows.iter().map(|(x, s)| (*x as f64, s.typical)).collect(),
        })
        .collect();
    report::plot_svg(
        plot,
        "QP_POST latency (typical)",
        "latency [us]",
        &lines,
        Some(cutoff as f64),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_caption_says_when_the_clock_times_the_emulator() {
        assert!(clock_caption(None).starts_with("# clock: wall time of each QP_POST"));
        assert!(!clock_caption(None).contains("emulat"));
        let c = clock_caption(Some("0000:00:03.0"));
        assert!(c.starts_with("# clock: wall time"));
        assert!(c.contains("device model at 0000:00:03.0") && c.contains("not the adapter's"));
        assert_eq!(c.lines().count(), 1);
    }

    #[test]
    fn suffixed_keeps_the_extension() {
        assert_eq!(
            suffixed(Path::new("r/lat.dat"), "bf"),
            Path::new("r/lat-bf.dat")
        );
    }
}
