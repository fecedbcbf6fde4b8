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

    #[test]
    fn percentiles_use_nearest_rank() {
        let v: Vec<f64> = (1..=1000).map(f64::from).collect();
        let s = summarize(&v).unwrap();
        assert_eq!((s.typical, s.p99, s.p999), (500.0, 990.0, 999.0));
        assert_eq!(quantile_of(&v, 0.1), 100.0);
    }
}
