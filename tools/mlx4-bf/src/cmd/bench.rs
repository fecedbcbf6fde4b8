// SPDX-License-Identifier: GPL-2.0

//! `bench`: BlueFlame and doorbell posts through QP_POST and the uverbs
//! floor (a no-op method call) interleaved per size, as ratios to the
//! no-op; beside them, what the analyzer saw per post.

use std::{fmt::Write as _, fs, io, path::PathBuf, time::Instant};

use anyhow::{anyhow, Context, Result};
use mlx4_bf_core::{abi, wqe};

use crate::{
    analyzer::{self, Analyzer, PerPost},
    errors::ioerr,
    progress::Progress,
    qp_post::uverbs_floor,
    report,
    stats::{self, summarize, Summary},
    sweep::{Sweep, WARMUP},
    verbs_post::{with_self_qp, SelfQp},
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

/// The calls a bench round times: QP_POST of a WQE stamped in the QP's
/// own send queue, every WQE signaled and its completion reaped off the
/// clock; against the uverbs floor (QUERY_CONTEXT, which the provider
/// leaves to the core).
struct Paths<'a, 'q> {
    qp: &'a mut SelfQp<'q>,
}

impl Paths<'_, '_> {
    /// The WQE of an RDMA write of `size` bytes into the context's own
    /// region: its length, or None if it fits no WQE.
    fn build(&self, buf: &mut [u8; wqe::MAX_WQE_LEN], size: usize) -> Option<usize> {
        self.qp.build(buf, size, false).map(|(len, _)| len)
    }

    /// The call the posts are compared with: a round trip through the same
    /// dispatch that does nothing.
    fn noop(&mut self) -> io::Result<()> {
        uverbs_floor(self.qp.cmd_fd())
    }

    /// One post of `wqe` with `flags` as a verbs user makes it: staged in
    /// the send queue, then the call.
    fn post(&mut self, wqe: &[u8], flags: u32) -> io::Result<()> {
        self.qp.submit(wqe, flags)
    }

    /// After a timed call, off the clock: its completion reaped.
    fn settle(&mut self) -> Result<()> {
        self.qp.await_completion()
    }

    /// One post of the analyzer's pass.
    fn untimed(&mut self, wqe: &[u8], flags: u32) -> Result<()> {
        self.post(wqe, flags).map_err(ioerr("QP_POST"))?;
        self.settle()
    }
}

/// The analyzer's view of one path: `posts` untimed posts between two
/// snapshots (trapped MMIO reads: never inside the timed rounds).
fn analyzer_pass(
    a: Option<&Analyzer>,
    paths: &mut Paths<'_, '_>,
    wqe: &[u8],
    flags: u32,
    posts: u32,
) -> Result<PerPost> {
    let Some(a) = a else {
        return Ok(PerPost::default());
    };
    let before = a.snapshot();
    for _ in 0..posts {
        paths.untimed(wqe, flags)?;
    }
    Ok(PerPost::between(&before, &a.snapshot(), u64::from(posts)))
}

/// The timed rounds and the analyzer's pass of every size.
fn measure(
    paths: &mut Paths<'_, '_>,
    sizes: &[usize],
    args: &Args,
    analyzer: Option<&Analyzer>,
) -> Result<Vec<BenchRow>> {
    let (sweep, unit) = (&args.sweep, args.unit());
    let mut buf = [0u8; wqe::MAX_WQE_LEN];
    let mut rows = Vec::new();
    let mut progress = Progress::new(sizes.len(), "bench");
    for (i, &size) in sizes.iter().enumerate() {
        let len = paths
            .build(&mut buf, size)
            .ok_or_else(|| anyhow!("a {size}-byte payload does not fit a WQE"))?;
        let wqe = &buf[..len];
        let (mut noop, mut bf, mut db) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..(sweep.iters + WARMUP) {
            let mut t = [0.0; 3];
            // Rotate the order so no path always runs first (cache, TLB).
            for k in 0..3 {
                let which = (round as usize + k) % 3;
                let start = Instant::now();
                match which {
                    0 => paths.noop(),
                    1 => paths.post(wqe, abi::POST_F_REQUIRE_BF),
                    _ => paths.post(wqe, abi::POST_F_FORCE_DOORBELL),
                }
                .map_err(ioerr("bench ioctl"))?;
                t[which] = start.elapsed().as_secs_f64() * 1e6 * unit.per_us;
                if which != 0 {
                    paths.settle()?;
                }
            }
            if round >= WARMUP {
                noop.push(t[0]);
                bf.push(t[1]);
                db.push(t[2]);
            }
        }
        let posts = sweep.iters.min(ANALYZER_POSTS);
        let seen = [
            analyzer_pass(analyzer, paths, wqe, abi::POST_F_REQUIRE_BF, posts)?,
            analyzer_pass(analyzer, paths, wqe, abi::POST_F_FORCE_DOORBELL, posts)?,
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
    Ok(rows)
}

impl Args {
    fn unit(&self) -> Unit {
        if self.icount {
            Unit::INSTRUCTIONS
        } else {
            Unit::MICROSECONDS
        }
    }
}

/// The bench on the RDMA device `name`: each post an RDMA write stamped
/// in a QP's own send queue and handed to QP_POST, the sizes those the
/// kernel still posts by BlueFlame.
pub fn run(name: &str, args: &Args) -> Result<()> {
    let out_dir = args.out_dir.as_path();
    fs::create_dir_all(out_dir).with_context(|| format!("cannot create {}", out_dir.display()))?;
    let largest = args.sweep.sizes()?.into_iter().max().unwrap_or(0);
    with_self_qp(name, largest, |s| {
        let cutoff = s.bf_cutoff()?;
        let sizes = args.sweep.sizes_up_to(cutoff)?;
        let writer = s.writer()?;
        let analyzer = Analyzer::open();
        let mut paths = Paths { qp: s };
        let rows = measure(&mut paths, &sizes, args, analyzer.as_ref())?;
        let b = Bench {
            what: format!("QP_POST on {name}, {writer} writer"),
            call: "QP_POST",
            args,
            rows: &rows,
            cutoff,
        };
        b.write()?;
        b.write_analyzer(analyzer.as_ref())?;
        b.wrote();
        Ok(())
    })
}

/// A bench's results and how they are described.
struct Bench<'a> {
    /// The call and the kernel's writer, for the headers.
    what: String,
    /// The call's name, for the plots' titles.
    call: &'static str,
    args: &'a Args,
    rows: &'a [BenchRow],
    cutoff: usize,
}

impl Bench<'_> {
    fn put(&self, name: &str, text: &str) -> Result<()> {
        let p = self.args.out_dir.join(name);
        fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))
    }

    fn wrote(&self) {
        println!(
            "wrote bench.txt, bench.dat, bench-ratio.svg, bench-latency.svg, summary.md, \
             bench-analyzer.txt to {}",
            self.args.out_dir.display()
        );
    }

    fn write(&self) -> Result<()> {
        let (sweep, rows, unit) = (&self.args.sweep, self.rows, self.args.unit());
        let mut txt = format!(
            "# mlx4-bf bench: {}, {} interleaved rounds per size (no-op, BlueFlame, doorbell)\n\
             # medians in {}; ratios are per-round medians [p10..p90]\n\
             #bytes   noop     bf       db       bf/noop                db/noop                bf/db\n",
            self.what,
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
            &self.args.out_dir.join("bench-ratio.svg"),
            &format!(
                "{} cost relative to a no-op ioctl (median per-round ratio)",
                self.call
            ),
            "ratio to no-op",
            &[
                series(|r| r.bf_ratio[0], "BlueFlame / no-op"),
                series(|r| r.db_ratio[0], "doorbell / no-op"),
            ],
            Some(self.cutoff as f64),
        )?;
        report::plot_svg(
            &self.args.out_dir.join("bench-latency.svg"),
            &format!("{} round trip (median)", self.call),
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
             - posts: {}; {} sizes from {} to {} bytes; {} interleaved rounds each\n\
             - median over sizes of the per-size median ratio: BlueFlame/no-op **{bf:.2}**, doorbell/no-op **{db:.2}**, \
             BlueFlame/doorbell **{bfdb:.2}**\n\
             - files: bench.txt (table), bench.dat (data), bench-ratio.svg, bench-latency.svg, \
             bench-analyzer.txt (what the device model saw per post)\n\n\
             Under QEMU with the device model every BAR2 write is trapped and forwarded to the model, so a \
             BlueFlame burst (one trapped write per few bytes) costs more than the doorbell's single write: these \
             ratios show the emulation's and the driver's cost per path, not the PCIe round trip BlueFlame saves \
             on real hardware.\n",
            self.what,
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
        let unit = self.args.unit();
        let mut txt = format!(
            "# mlx4-bf bench: what the analyzer saw, per post ({} untimed posts per path and size, \
             after the timed rounds)\n# {}\n# guest time: median {} of the timed rounds; \
             modelled_*: the device model's PCIe clock, not a measurement\n{}\n",
            self.args.sweep.iters.min(ANALYZER_POSTS),
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
