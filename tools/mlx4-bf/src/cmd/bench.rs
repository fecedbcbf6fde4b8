// SPDX-License-Identifier: GPL-2.0

//! `bench`: BlueFlame, doorbell and a no-op ioctl interleaved per size, as
//! ratios to the no-op; beside them, what the analyzer saw per post.

use std::{fmt::Write as _, fs, io, path::PathBuf, time::Instant};

use anyhow::{anyhow, Context, Result};
use mlx4_bf_core::{abi, wqe};

use crate::{
    analyzer::{self, Analyzer, PerPost},
    back_pressure::{post_staged_timed, post_timed},
    device::Device,
    errors::ioerr,
    progress::Progress,
    report::{self, writer_name},
    stats::{self, summarize, Summary},
    sweep::{Sweep, WARMUP},
    write_scratch::WriteScratch,
};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    sweep: Sweep,
    /// Where bench.txt, bench.dat, the plots and summary.md go.
    #[arg(long, default_value = "results")]
    out_dir: PathBuf,
    /// The guest runs under QEMU's `-icount shift=0`: its clock advances
    /// one nanosecond per instruction, so report instructions.
    #[arg(long)]
    icount: bool,
}

/// What the benchmark's times are, and how they are printed.
#[derive(Clone, Copy)]
struct Unit {
    /// Multiplies a wall-clock time in microseconds.
    per_us: f64,
    name: &'static str,
    short: &'static str,
    decimals: usize,
}

impl Unit {
    const MICROSECONDS: Unit = Unit {
        per_us: 1.0,
        name: "microseconds (wall clock)",
        short: "us",
        decimals: 2,
    };
    /// Under `-icount shift=0` one guest nanosecond is one instruction:
    /// deterministic, whatever the host does.
    const INSTRUCTIONS: Unit = Unit {
        per_us: 1000.0,
        name: "guest instructions (QEMU -icount shift=0: 1 guest ns per instruction)",
        short: "insns",
        decimals: 0,
    };
}

/// One size of the benchmark.
struct BenchRow {
    size: usize,
    noop: Summary,
    bf: Summary,
    db: Summary,
    /// Per-round ratios: median, 10th and 90th percentile.
    bf_ratio: [f64; 3],
    db_ratio: [f64; 3],
    /// What the analyzer saw per post, BlueFlame then doorbell.
    seen: [PerPost; 2],
}

fn ratio_spread(num: &[f64], den: &[f64]) -> [f64; 3] {
    let r: Vec<f64> = num.iter().zip(den).map(|(n, d)| n / d).collect();
    [
        stats::quantile_of(&r, 0.5),
        stats::quantile_of(&r, 0.1),
        stats::quantile_of(&r, 0.9),
    ]
}

/// Posts per path of the analyzer's pass: enough for a steady average,
/// few enough to stay short under TCG.
const ANALYZER_POSTS: u32 = 200;

/// The analyzer's view of one path: `posts` untimed posts between two
/// snapshots (trapped MMIO reads: never inside the timed rounds).
fn analyzer_pass(
    a: Option<&Analyzer>,
    dev: &Device,
    qp: &abi::QpInfo,
    wqe: &[u8],
    flags: u32,
    posts: u32,
) -> Result<PerPost> {
    let Some(a) = a else {
        return Ok(PerPost::default());
    };
    let before = a.snapshot();
    for _ in 0..posts {
        post_timed(dev, qp, wqe, flags).map_err(ioerr("POST_SEND"))?;
    }
    Ok(PerPost::between(&before, &a.snapshot(), u64::from(posts)))
}

pub fn run(dev: &Device, args: &Args) -> Result<()> {
    let (sweep, out_dir) = (&args.sweep, args.out_dir.as_path());
    let unit = if args.icount {
        Unit::INSTRUCTIONS
    } else {
        Unit::MICROSECONDS
    };
    let info = dev.query_device().map_err(ioerr("QUERY_DEVICE"))?;
    let qp = dev.create_qp().map_err(ioerr("CREATE_QP"))?;
    let (sizes, cutoff) = sweep.bf_sizes(&info)?;
    fs::create_dir_all(out_dir).with_context(|| format!("cannot create {}", out_dir.display()))?;
    // Every post is an RDMA write into a region of this context (the QP is
    // connected to itself), registered before the timed rounds.
    let largest = sizes.iter().copied().max().unwrap_or(0);
    let scratch = WriteScratch::new(dev, &info, largest)?;
    let analyzer = Analyzer::open();
    // The timed posts stage their WQE in the QP's WQE page and ask for no
    // result: the post as a verbs user would make it.
    let page = dev
        .map(qp.wqe_offset, 4096, true)
        .map_err(ioerr("mmap of the WQE page"))?;
    let mut buf = [0u8; wqe::MAX_WQE_LEN];
    let mut rows = Vec::new();
    let mut progress = Progress::new(sizes.len(), "bench");
    for (i, &size) in sizes.iter().enumerate() {
        let (len, _) = scratch
            .build(&mut buf, size, false)
            .ok_or_else(|| anyhow!("a {size}-byte payload does not fit a WQE"))?;
        let wqe = &buf[..len];
        let (mut noop, mut bf, mut db) = (Vec::new(), Vec::new(), Vec::new());
        let timed = |f: &mut dyn FnMut() -> io::Result<()>| -> io::Result<f64> {
            let t = Instant::now();
            f()?;
            Ok(t.elapsed().as_secs_f64() * 1e6 * unit.per_us)
        };
        for round in 0..(sweep.iters + WARMUP) {
            let mut t = [0.0; 3];
            // Rotate the order so no path always runs first (cache, TLB).
            for k in 0..3 {
                let which = (round as usize + k) % 3;
                t[which] = match which {
                    0 => timed(&mut || dev.noop()),
                    1 => timed(&mut || {
                        post_staged_timed(dev, &qp, &page, wqe, abi::POST_F_REQUIRE_BF)
                    }),
                    _ => timed(&mut || {
                        post_staged_timed(dev, &qp, &page, wqe, abi::POST_F_FORCE_DOORBELL)
                    }),
                }
                .map_err(ioerr("bench ioctl"))?;
            }
            if round >= WARMUP {
                noop.push(t[0]);
                bf.push(t[1]);
                db.push(t[2]);
            }
        }
        let posts = sweep.iters.min(ANALYZER_POSTS);
        let a = analyzer.as_ref();
        let seen = [
            analyzer_pass(a, dev, &qp, wqe, abi::POST_F_REQUIRE_BF, posts)?,
            analyzer_pass(a, dev, &qp, wqe, abi::POST_F_FORCE_DOORBELL, posts)?,
        ];
        let no_samples = || anyhow!("no samples");
        rows.push(BenchRow {
            size,
            noop: summarize(&noop).ok_or_else(no_samples)?,
            bf: summarize(&bf).ok_or_else(no_samples)?,
            db: summarize(&db).ok_or_else(no_samples)?,
            bf_ratio: ratio_spread(&bf, &noop),
            db_ratio: ratio_spread(&db, &noop),
            seen,
        });
        progress.step(i + 1, &format!("{size} B"));
    }
    drop(progress);
    let b = Bench {
        out_dir,
        info: &info,
        sweep,
        rows: &rows,
        cutoff,
        unit,
    };
    b.write()?;
    b.write_analyzer(analyzer.as_ref())?;
    scratch.close()?;
    println!(
        "wrote bench.txt, bench.dat, bench-ratio.svg, bench-latency.svg, summary.md, \
         bench-analyzer.txt to {}",
        out_dir.display()
    );
    Ok(())
}

struct Bench<'a> {
    out_dir: &'a std::path::Path,
    info: &'a abi::DeviceInfo,
    sweep: &'a Sweep,
    rows: &'a [BenchRow],
    cutoff: usize,
    unit: Unit,
}

impl Bench<'_> {
    fn put(&self, name: &str, text: &str) -> Result<()> {
        let p = self.out_dir.join(name);
        fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))
    }

    fn write(&self) -> Result<()> {
        let (info, sweep, rows, unit) = (self.info, self.sweep, self.rows, self.unit);
        let mut txt = format!(
            "# mlx4-bf bench: {} writer, {} interleaved rounds per size (no-op, BlueFlame, doorbell)\n\
             # medians in {}; ratios are per-round medians [p10..p90]\n\
             #bytes   noop     bf       db       bf/noop                db/noop                bf/db\n",
            writer_name(info.writer),
            sweep.iters,
            unit.name
        );
        let u = unit.short;
        let mut dat = format!(
            "# bytes noop_{u} bf_{u} db_{u} bf_noop bf_noop_p10 bf_noop_p90 db_noop db_noop_p10 db_noop_p90\n"
        );
        let p = unit.decimals;
        for r in rows {
            let (n, b, d) = (r.noop.typical, r.bf.typical, r.db.typical);
            let ([bm, bl, bh], [dm, dl, dh]) = (r.bf_ratio, r.db_ratio);
            let _ = writeln!(
                txt,
                "{:<8} {n:<8.p$} {b:<8.p$} {d:<8.p$} {bm:.2} [{bl:.2}..{bh:.2}]   {dm:.2} [{dl:.2}..{dh:.2}]   {:.2}",
                r.size,
                b / d
            );
            let _ = writeln!(
                dat,
                "{} {n:.3} {b:.3} {d:.3} {bm:.4} {bl:.4} {bh:.4} {dm:.4} {dl:.4} {dh:.4}",
                r.size
            );
        }
        print!("{txt}");
        self.put("bench.txt", &txt)?;
        self.put("bench.dat", &dat)?;
        let series = |f: fn(&BenchRow) -> f64, label| report::Series {
            label,
            points: rows.iter().map(|r| (r.size as f64, f(r))).collect(),
        };
        report::plot_svg(
            &self.out_dir.join("bench-ratio.svg"),
            "POST_SEND cost relative to a no-op ioctl (median per-round ratio)",
            "ratio to no-op",
            &[
                series(|r| r.bf_ratio[0], "BlueFlame / no-op"),
                series(|r| r.db_ratio[0], "doorbell / no-op"),
            ],
            Some(self.cutoff as f64),
        )?;
        report::plot_svg(
            &self.out_dir.join("bench-latency.svg"),
            "POST_SEND round trip (median)",
            &format!("cost [{}]", unit.short),
            &[
                series(|r| r.noop.typical, "no-op"),
                series(|r| r.bf.typical, "BlueFlame"),
                series(|r| r.db.typical, "doorbell"),
            ],
            Some(self.cutoff as f64),
        )?;
        let med = |v: Vec<f64>| stats::quantile_of(&v, 0.5);
        let bf = med(rows.iter().map(|r| r.bf_ratio[0]).collect());
        let db = med(rows.iter().map(|r| r.db_ratio[0]).collect());
        let bfdb = med(rows.iter().map(|r| r.bf.typical / r.db.typical).collect());
        let md = format!(
            "# mlx4-bf benchmark\n\n\
             - writer: {}; {} sizes from {} to {} bytes; {} interleaved rounds each\n\
             - median over sizes of the per-size median ratio: BlueFlame/no-op **{bf:.2}**, doorbell/no-op **{db:.2}**, \
             BlueFlame/doorbell **{bfdb:.2}**\n\
             - files: bench.txt (table), bench.dat (data), bench-ratio.svg, bench-latency.svg, \
             bench-analyzer.txt (what the device model saw per post)\n\n\
             Under QEMU with the device model every BAR2 write is trapped and forwarded to the model, so a \
             BlueFlame burst (one trapped write per few bytes) costs more than the doorbell's single write: these \
             ratios show the emulation's and the driver's cost per path, not the PCIe round trip BlueFlame saves \
             on real hardware.\n",
            writer_name(info.writer),
            rows.len(),
            rows[0].size,
            rows[rows.len() - 1].size,
            sweep.iters
        );
        self.put("summary.md", &md)
    }

    /// The analyzer's table: per post of each path, beside the guest's
    /// median time of that path.
    fn write_analyzer(&self, a: Option<&Analyzer>) -> Result<()> {
        let unit = self.unit;
        let mut txt = format!(
            "# mlx4-bf bench: what the analyzer saw, per post ({} untimed posts per path and size, \
             after the timed rounds)\n# {}\n# guest time: median {} of the timed rounds; \
             modelled_*: the device model's PCIe clock, not a measurement\n{}\n",
            self.sweep.iters.min(ANALYZER_POSTS),
            Analyzer::describe(a),
            unit.name,
            analyzer::header(&format!("guest[{}]", unit.short))
        );
        for r in self.rows {
            for (name, t, seen) in [
                ("bf", r.bf.typical, &r.seen[0]),
                ("db", r.db.typical, &r.seen[1]),
            ] {
                let _ = writeln!(
                    txt,
                    "{}",
                    analyzer::row(r.size, name, t, unit.decimals, seen)
                );
            }
        }
        print!("{txt}");
        self.put("bench-analyzer.txt", &txt)
    }
}
