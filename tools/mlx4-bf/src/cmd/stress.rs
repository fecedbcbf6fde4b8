// SPDX-License-Identifier: GPL-2.0

//! `stress`: several contexts (threads with their own context) posting at
//! once.
//!
//! Each thread opens its own context of the RDMA device, fills its QP's
//! send queue and posts through QP_POST with every WQE signaled; when as
//! many WQEs are outstanding as the queue allows, it waits for the oldest
//! completion (the column "send queue full").

use std::{
    thread,
    time::{Duration, Instant},
};

use anyhow::{anyhow, bail, Result};
use hdrhistogram::Histogram;
use mlx4_bf_core::wqe;

use crate::{errors::ioerr, verbs_post::with_self_qp};

#[derive(clap::Args)]
pub struct Args {
    /// Threads, each with its own context; several values run one after another.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    threads: Vec<usize>,
    /// Seconds per run.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Payload of each post (an RDMA write into a registered region of the
    /// thread's context).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(0..=65536))]
    size: u32,
}

/// What one thread did: posts, waits for room in a full send queue, and
/// the time of each post (ns; three significant digits).
struct Tally {
    posts: u64,
    full: u64,
    hist: Histogram<u64>,
}

/// 1 ns to an hour, three significant digits; longer posts saturate.
fn new_hist() -> Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).map_err(|e| anyhow!("histogram: {e}"))
}

/// One thread on the RDMA device `name`: its own context and QP, posting
/// through the method until `seconds` have passed; then every outstanding
/// WQE completed and the last write's bytes checked.
fn one_thread(name: &str, seconds: f64, size: u32) -> Result<Tally> {
    with_self_qp(name, size as usize, |s| {
        let mut buf = [0u8; wqe::MAX_WQE_LEN];
        let (len, _) = s
            .build(&mut buf, size as usize, false)
            .ok_or_else(|| anyhow!("a {size}-byte payload does not fit a WQE"))?;
        let window = s.window();
        let end = Instant::now() + Duration::from_secs_f64(seconds);
        let mut t = Tally {
            posts: 0,
            full: 0,
            hist: new_hist()?,
        };
        let mut outstanding = 0;
        loop {
            if outstanding == window {
                t.full += 1;
                s.await_completion()?;
                outstanding -= 1;
            }
            let start = Instant::now();
            if start >= end {
                break;
            }
            s.submit(&buf[..len], 0).map_err(ioerr("QP_POST"))?;
            t.hist.saturating_record(start.elapsed().as_nanos() as u64);
            t.posts += 1;
            outstanding += 1;
        }
        for _ in 0..outstanding {
            s.await_completion()?;
        }
        if !s.landed(size as usize) {
            bail!("the writes completed, but their {size} bytes are not where they went");
        }
        Ok(t)
    })
}

/// The runs of `args.threads`, each thread on its own context of the RDMA
/// device `name`.
pub fn run(name: &str, args: &Args) -> Result<()> {
    let (threads, seconds, size) = (&args.threads, args.seconds, args.size);
    if !(seconds > 0.0 && seconds <= 3600.0) {
        bail!("--seconds {seconds} is outside 0..3600");
    }
    if let Some(n) = threads.iter().find(|&&n| n == 0 || n > 256) {
        bail!("--threads {n} is outside 1..256");
    }
    println!(
        "#threads  total posts/s  per-thread posts/s  (send queue full: retries)  \
         post p50/p99/p99.9 [us] (all threads)"
    );
    for &n in threads {
        let results: Vec<Result<Tally>> = thread::scope(|s| {
            let handles: Vec<_> = (0..n)
                .map(|_| s.spawn(|| one_thread(name, seconds, size)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(anyhow!("thread panicked"))))
                .collect()
        });
        let counts = results.into_iter().collect::<Result<Vec<Tally>>>()?;
        let rates: Vec<String> = counts
            .iter()
            .map(|t| format!("{:.0}", t.posts as f64 / seconds))
            .collect();
        // The threads' histograms merged: percentiles over every post.
        let mut all = new_hist()?;
        for t in &counts {
            all.add(&t.hist).map_err(|e| anyhow!("histogram: {e}"))?;
        }
        let us = |q: f64| all.value_at_quantile(q) as f64 / 1000.0;
        println!(
            "{n:<9} {:<14.0} {}  ({})  {:.1}/{:.1}/{:.1}",
            counts.iter().map(|t| t.posts).sum::<u64>() as f64 / seconds,
            rates.join(" "),
            counts.iter().map(|t| t.full).sum::<u64>(),
            us(0.5),
            us(0.99),
            us(0.999)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_histograms_give_percentiles_over_every_post() {
        let (mut a, mut b) = (new_hist().unwrap(), new_hist().unwrap());
        for ns in 1..=900u64 {
            a.saturating_record(ns * 1000);
        }
        for _ in 0..100 {
            b.saturating_record(50_000_000);
        }
        a.add(&b).unwrap();
        assert_eq!(a.len(), 1000);
        let us = |q| a.value_at_quantile(q) as f64 / 1000.0;
        assert!((us(0.5) - 500.0).abs() < 1.0, "{}", us(0.5));
        assert!((us(0.99) - 50_000.0).abs() < 50.0, "{}", us(0.99));
    }
}
