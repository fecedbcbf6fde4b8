// SPDX-License-Identifier: GPL-2.0

//! A fixed-size latency histogram for one ping thread: no allocation, no
//! floating point, constant time to record, so it can sit in the hot loop
//! and be read (or merged with the other threads') when the test ends.
//!
//! The buckets are log-linear, as HdrHistogram's: values below 16 ns each
//! have their own bucket; above, every power of two `[2^e, 2^(e+1))` is cut
//! into 8 equal buckets of `2^(e-3)` ns. That covers the whole `u64` range
//! in [`BUCKETS`] buckets (3968 bytes of counts), so no value is clamped.
//!
//! Error bound: a quantile is reported as the middle of the bucket holding
//! the sample of that rank, clamped to `[min, max]`; it differs from that
//! sample by at most 1/16 (6.25 %) of the sample's value, and is exact below
//! 16 ns and at the first and last rank. `min()`, `max()` and `count()` are
//! exact.

/// Buckets per power of two (3 bits after the leading one).
const SUB_BITS: u32 = 3;
const SUB: u64 = 1 << SUB_BITS;
/// Buckets of the whole `u64` range: 16 one-ns buckets, then 8 for each
/// power of two from 2^4 to 2^63.
pub const BUCKETS: usize = ((64 - SUB_BITS - 1) * SUB as u32) as usize + 2 * SUB as usize;

/// The bucket of `v`.
fn index(v: u64) -> usize {
    if v < 2 * SUB {
        return v as usize;
    }
    // e >= SUB_BITS + 1: v's leading one; m: the 3 bits after it.
    let e = 63 - v.leading_zeros();
    let m = (v >> (e - SUB_BITS)) & (SUB - 1);
    (u64::from(e - SUB_BITS + 1) * SUB + m) as usize
}

/// The lowest value of bucket `i` (< [`BUCKETS`]) and its width.
fn bucket(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < 2 * SUB {
        return (i, 1);
    }
    let shift = i / SUB - 1;
    ((SUB + i % SUB) << shift, 1 << shift)
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Histogram {
    counts: [u64; BUCKETS],
    count: u64,
    /// Meaningful only while `count > 0`: an all-zero histogram is empty,
    /// so zeroed memory is a valid [`Histogram::new`].
    min: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Histogram {
    /// An empty histogram (all zero bytes).
    pub const fn new() -> Self {
        Histogram {
            counts: [0; BUCKETS],
            count: 0,
            min: 0,
            max: 0,
        }
    }

    /// Forgets every sample.
    pub fn reset(&mut self) {
        *self = Self::new();
    }

    /// Counts one sample of `ns` nanoseconds.
    pub fn record(&mut self, ns: u64) {
        self.record_n(ns, 1);
    }

    /// Counts `n` samples of `ns` nanoseconds (counts saturate).
    pub fn record_n(&mut self, ns: u64, n: u64) {
        if n == 0 {
            return;
        }
        if self.count == 0 {
            (self.min, self.max) = (ns, ns);
        } else {
            self.min = self.min.min(ns);
            self.max = self.max.max(ns);
        }
        let c = &mut self.counts[index(ns)];
        *c = c.saturating_add(n);
        self.count = self.count.saturating_add(n);
    }

    /// Adds every sample of `other`, as if each had been recorded here.
    pub fn merge(&mut self, other: &Histogram) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            (self.min, self.max) = (other.min, other.max);
        } else {
            self.min = self.min.min(other.min);
            self.max = self.max.max(other.max);
        }
        for (c, o) in self.counts.iter_mut().zip(other.counts.iter()) {
            *c = c.saturating_add(*o);
        }
        self.count = self.count.saturating_add(other.count);
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The smallest sample, exactly; `None` when empty.
    pub fn min(&self) -> Option<u64> {
        (self.count > 0).then_some(self.min)
    }

    /// The largest sample, exactly; `None` when empty.
    pub fn max(&self) -> Option<u64> {
        (self.count > 0).then_some(self.max)
    }

    /// The sample of nearest rank `ceil(q * count / 1000)` (at least 1) for
    /// `q_per_mille` in 0..=1000 (larger is 1000): 500 is the median, 990
    /// p99, 0 the minimum and 1000 the maximum. Within 1/16 of that sample
    /// (see the module's docs); `None` when empty.
    pub fn quantile(&self, q_per_mille: u32) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let q = u64::from(q_per_mille.min(1000));
        // ceil(q * n / 1000) without overflow: q * (n / 1000) <= n.
        let (whole, part) = (self.count / 1000, self.count % 1000);
        let rank = (q * whole + (q * part).div_ceil(1000)).max(1);
        if rank == 1 {
            return Some(self.min);
        }
        if rank >= self.count {
            return Some(self.max);
        }
        let mut seen = 0u64;
        for (i, c) in self.counts.iter().enumerate() {
            seen = seen.saturating_add(*c);
            if seen >= rank {
                let (low, width) = bucket(i);
                let mid = low + (width - 1) / 2;
                // max/min, not clamp(): no panic even on a broken invariant.
                return Some(mid.max(self.min).min(self.max));
            }
        }
        // Only if the counts saturated.
        Some(self.max)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use proptest::prelude::*;
    use std::vec::Vec;

    #[test]
    fn buckets_tile_the_u64_range() {
        assert_eq!(BUCKETS, 496);
        assert!(core::mem::size_of::<Histogram>() <= 4000);
        let mut next = 0u64;
        for i in 0..BUCKETS {
            let (low, width) = bucket(i);
            assert_eq!(low, next, "bucket {i}");
            assert_eq!(index(low), i);
            let high = low + (width - 1);
            assert_eq!(index(high), i);
            // Width at most 1/8 of the bucket's lowest value.
            assert!(width == 1 || width * 8 <= low, "bucket {i}");
            next = high.wrapping_add(1);
        }
        assert_eq!(next, 0, "the last bucket ends at u64::MAX");
    }

    #[test]
    fn empty_reports_nothing_and_zeroed_is_empty() {
        let h = Histogram::new();
        assert_eq!(h, Histogram::default());
        assert_eq!((h.count(), h.min(), h.max()), (0, None, None));
        assert_eq!(h.quantile(500), None);
    }

    #[test]
    fn small_values_are_exact() {
        let mut h = Histogram::new();
        for v in 0..16 {
            h.record(v);
        }
        assert_eq!(h.count(), 16);
        assert_eq!((h.min(), h.max()), (Some(0), Some(15)));
        // Nearest rank: ceil(500 * 16 / 1000) = 8, the value 7.
        assert_eq!(h.quantile(500), Some(7));
        assert_eq!(h.quantile(0), Some(0));
        assert_eq!(h.quantile(1000), Some(15));
        assert_eq!(h.quantile(5000), Some(15));
    }

    #[test]
    fn median_and_p99_of_a_typical_run() {
        let mut h = Histogram::new();
        h.record_n(1_000, 989);
        h.record_n(50_000, 11);
        assert_eq!(h.quantile(500), Some(1_000));
        assert_eq!(h.quantile(989), Some(1_000));
        // Rank 990 is the first 50 us sample: the middle of its bucket
        // [49152, 53247] is 51199, clamped to the maximum.
        assert_eq!(h.quantile(990), Some(50_000));
        assert_eq!(h.max(), Some(50_000));
    }

    #[test]
    fn extremes_and_saturation_do_not_panic() {
        let mut h = Histogram::new();
        h.record(u64::MAX);
        h.record_n(u64::MAX, u64::MAX);
        h.record_n(7, 0);
        assert_eq!(h.count(), u64::MAX);
        assert_eq!(h.min(), Some(u64::MAX));
        assert_eq!(h.quantile(500), Some(u64::MAX));
        let mut g = h.clone();
        g.merge(&h);
        assert_eq!(g.count(), u64::MAX);
        g.reset();
        assert_eq!(g, Histogram::new());
    }

    /// The nearest-rank quantile of a sorted, non-empty sample.
    fn exact(sorted: &[u64], q: u32) -> u64 {
        let n = sorted.len() as u128;
        let rank = (u128::from(q.min(1000)) * n).div_ceil(1000).max(1);
        sorted[(rank - 1) as usize]
    }

    fn within_bound(reported: u64, truth: u64) -> bool {
        u128::from(reported.abs_diff(truth)) * 16 <= u128::from(truth)
    }

    /// Latencies spread over many powers of two, and some of every size.
    fn samples() -> impl Strategy<Value = Vec<u64>> {
        let one = prop_oneof![
            0u64..64,
            (0u32..64, any::<u64>()).prop_map(|(s, v)| v >> s),
            any::<u64>(),
        ];
        prop::collection::vec(one, 1..400)
    }

    proptest! {
        #[test]
        fn quantiles_are_within_the_bound(v in samples(), q in 0u32..=1100) {
            let mut h = Histogram::new();
            for x in &v {
                h.record(*x);
            }
            let mut sorted = v.clone();
            sorted.sort_unstable();
            prop_assert_eq!(h.count(), v.len() as u64);
            prop_assert_eq!(h.min(), sorted.first().copied());
            prop_assert_eq!(h.max(), sorted.last().copied());
            let truth = exact(&sorted, q);
            let got = h.quantile(q).unwrap();
            prop_assert!(within_bound(got, truth), "q {} got {} truth {}", q, got, truth);
            for q in [0, 500, 900, 990, 999, 1000] {
                let truth = exact(&sorted, q);
                let got = h.quantile(q).unwrap();
                prop_assert!(within_bound(got, truth), "q {} got {} truth {}", q, got, truth);
            }
            prop_assert_eq!(h.quantile(0), sorted.first().copied());
            prop_assert_eq!(h.quantile(1000), sorted.last().copied());
        }

        #[test]
        fn merge_is_recording_both(a in samples(), b in samples()) {
            let (mut ha, mut hb, mut both) =
                (Histogram::new(), Histogram::new(), Histogram::new());
            for x in &a {
                ha.record(*x);
                both.record(*x);
            }
            for x in &b {
                hb.record(*x);
                both.record(*x);
            }
            let mut into_empty = Histogram::new();
            into_empty.merge(&ha);
            prop_assert_eq!(&into_empty, &ha);
            ha.merge(&hb);
            prop_assert_eq!(&ha, &both);
            ha.merge(&Histogram::new());
            prop_assert_eq!(&ha, &both);
        }
    }
}
