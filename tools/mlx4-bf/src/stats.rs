// SPDX-License-Identifier: GPL-2.0

//! Latency summaries as perftest reports them.

/// One size's latencies, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Summary {
    pub iters: usize,
    pub min: f64,
    pub max: f64,
    /// The median: perftest's and the classic study's "typical".
    pub typical: f64,
    pub avg: f64,
    pub stdev: f64,
    pub p99: f64,
    pub p999: f64,
}

/// The value at quantile `q` (nearest rank) of sorted `v`.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Summarises `samples` (any order); `None` when empty.
pub fn summarize(samples: &[f64]) -> Option<Summary> {
    if samples.is_empty() {
        return None;
    }
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len() as f64;
    let avg = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - avg) * (x - avg)).sum::<f64>() / n;
    Some(Summary {
        iters: v.len(),
        min: v[0],
        max: v[v.len() - 1],
        typical: quantile(&v, 0.5),
        avg,
        stdev: var.sqrt(),
        p99: quantile(&v, 0.99),
        p999: quantile(&v, 0.999),
    })
}

/// perftest's `LAT_MEASURE_TAIL`: the largest round trips it drops.
pub const LAT_MEASURE_TAIL: usize = 2;

/// perftest's `get_median()` of the first `n` sorted values.
fn perftest_median(n: usize, sorted: &[f64]) -> f64 {
    // perftest: `if ((n - 1) % 2)`, i.e. n even.
    if !(n - 1).is_multiple_of(2) {
        (sorted[n / 2] + sorted[n / 2 - 1]) / 2.0
    } else {
        sorted[n / 2]
    }
}

/// `ib_send_lat`'s report (perftest `print_report_lat()`) from the client's
/// `iters` post stamps, in microseconds: the `iters - 1` deltas between
/// consecutive stamps are round trips; sorted, the two largest dropped,
/// every figure divided by `rtt_factor` (2 for SEND: one way). As perftest
/// does, t_max is `delta[cnt]` and the percentiles are `delta[ceil(cnt *
/// 0.99)]` and `delta[ceil(cnt * 0.999)]` with `cnt` the kept deltas (so
/// they may reach one past the kept ones). `None` below 4 stamps.
pub fn perftest_lat(stamps_us: &[f64], rtt_factor: f64) -> Option<Summary> {
    if stamps_us.len() < LAT_MEASURE_TAIL + 2 {
        return None;
    }
    let mut delta: Vec<f64> = stamps_us.windows(2).map(|w| w[1] - w[0]).collect();
    delta.sort_by(f64::total_cmp);
    let cnt = delta.len() - LAT_MEASURE_TAIL;
    let avg = delta[..cnt].iter().sum::<f64>() / cnt as f64;
    let var = delta[..cnt]
        .iter()
        .map(|d| (avg - d) * (avg - d))
        .sum::<f64>()
        / cnt as f64;
    let i99 = (cnt as f64 * 0.99).ceil() as usize;
    let i999 = (cnt as f64 * 0.999).ceil() as usize;
    Some(Summary {
        iters: stamps_us.len(),
        min: delta[0] / rtt_factor,
        max: delta[cnt] / rtt_factor,
        typical: perftest_median(cnt, &delta) / rtt_factor,
        avg: avg / rtt_factor,
        stdev: var.sqrt() / rtt_factor,
        p99: delta[i99] / rtt_factor,
        p999: delta[i999] / rtt_factor,
    })
}

/// Quantile `q` of unsorted samples.
pub fn quantile_of(samples: &[f64], q: f64) -> f64 {
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    quantile(&v, q)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_a_known_series() {
        let s = summarize(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!((s.min, s.max, s.typical, s.avg), (1.0, 5.0, 3.0, 3.0));
        assert!((s.stdev - 2f64.sqrt()).abs() < 1e-12);
        assert_eq!(s.p99, 5.0);
        assert!(summarize(&[]).is_none());
    }

    /// Stamps whose round trips are `rtts`, in order.
    fn stamps(rtts: &[f64]) -> Vec<f64> {
        let mut t = vec![100.0];
        for r in rtts {
            t.push(t[t.len() - 1] + r);
        }
        t
    }

    #[test]
    fn perftest_drops_the_two_largest_and_halves_the_median() {
        // 6 stamps, 5 round trips; 90 and 50 dropped; median of 2, 4, 6 is 4.
        let s = perftest_lat(&stamps(&[6.0, 90.0, 2.0, 50.0, 4.0]), 2.0).unwrap();
        assert_eq!(s.iters, 6);
        assert_eq!((s.min, s.typical, s.avg), (1.0, 2.0, 2.0));
        // perftest's t_max is delta[cnt]: the smaller of the dropped two.
        assert_eq!(s.max, 25.0);
        // ceil(3 * 0.99) = 3 = cnt as well.
        assert_eq!((s.p99, s.p999), (25.0, 25.0));
        let sd = ((4.0f64 + 0.0 + 4.0) / 3.0).sqrt() / 2.0;
        assert!((s.stdev - sd).abs() < 1e-12);
    }

    #[test]
    fn perftest_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        // 7 stamps, 6 round trips, 4 kept: 1 2 3 4 -> (2 + 3) / 2.
        let s = perftest_lat(&stamps(&[4.0, 1.0, 100.0, 3.0, 2.0, 100.0]), 1.0).unwrap();
        assert_eq!(s.typical, 2.5);
        assert_eq!((s.min, s.max), (1.0, 100.0));
    }

    #[test]
    fn perftest_percentiles_of_the_default_1000_iterations() {
        // 1000 stamps, 999 round trips 1..=999 (shuffled): 997 kept.
        let mut rtts: Vec<f64> = (1..=999).map(f64::from).collect();
        rtts.reverse();
        rtts.swap(3, 700);
        let s = perftest_lat(&stamps(&rtts), 2.0).unwrap();
        assert_eq!(s.iters, 1000);
        // median of 1..=997 is 499; ceil(997 * .99) = 988 -> 989;
        // ceil(997 * .999) = 997 -> 998; t_max delta[997] = 998.
        assert_eq!((s.min, s.typical, s.max), (0.5, 249.5, 499.0));
        assert_eq!((s.p99, s.p999), (494.5, 499.0));
        assert!((s.avg - 249.5).abs() < 1e-9);
        assert!(perftest_lat(&[1.0, 2.0, 3.0], 2.0).is_none());
    }

    #[test]
    fn percentiles_use_nearest_rank() {
        let v: Vec<f64> = (1..=1000).map(f64::from).collect();
        let s = summarize(&v).unwrap();
        assert_eq!((s.typical, s.p99, s.p999), (500.0, 990.0, 999.0));
        assert_eq!(quantile_of(&v, 0.1), 100.0);
    }
}
