//! Per-command latency histograms (INFO latencystats): how long each call
//! took, in nanoseconds, in log-linear buckets (16 per power of two, so a
//! reported percentile is within about 6% of the true one; Redis keeps an
//! HdrHistogram of 2 significant digits for the same figures), up to
//! 2^36 ns (69 s; longer calls count in the last bucket). A command's
//! buckets are allocated as its calls need them. Each thread records in
//! its own histograms (`Server::command_stats`); readers add them up
//! ([`Counts`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Bits of sub-bucket precision: 16 buckets per power of two.
const SUB_BITS: u32 = 4;
const SUB: usize = 1 << SUB_BITS;
/// Durations from 2^MAX_BITS ns up share the last bucket.
const MAX_BITS: u32 = 36;
/// Buckets up to 2^MAX_BITS ns.
const BUCKETS: usize = (MAX_BITS - SUB_BITS + 1) as usize * SUB;

/// The bucket of a duration of `ns` nanoseconds.
pub fn bucket_of(ns: u64) -> usize {
    if ns >= 1 << MAX_BITS {
        return BUCKETS - 1;
    }
    if ns < SUB as u64 {
        return ns as usize;
    }
    let msb = 63 - ns.leading_zeros();
    let shift = msb - SUB_BITS;
    let sub = (ns >> shift) as usize & (SUB - 1);
    ((shift as usize + 1) << SUB_BITS) + sub
}

/// The highest duration bucket `b` holds (what a percentile reports).
pub fn bucket_high(b: usize) -> u64 {
    let group = b >> SUB_BITS;
    let sub = (b & (SUB - 1)) as u64;
    if group == 0 {
        return sub;
    }
    let shift = group as u32 - 1;
    (((SUB as u64) + sub) << shift) + ((1u64 << shift) - 1)
}

/// Buckets per group (one power of two), and groups.
const GROUPS: usize = BUCKETS / SUB;

/// One group of buckets, allocated on its first call.
type Group = OnceLock<Box<[AtomicU64; SUB]>>;

/// One command's histogram: its groups of buckets are allocated on first
/// use, so a command costs 16 bytes a group (33) plus 128 bytes for each
/// power of two its calls' durations fall in.
#[derive(Debug)]
pub struct Histogram {
    groups: [Group; GROUPS],
    total: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            groups: std::array::from_fn(|_| OnceLock::new()),
            total: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    /// Counts one call that fell in bucket `b`.
    pub fn record(&self, b: usize) {
        let Some(group) = self.groups.get(b / SUB) else {
            return;
        };
        let counts = group.get_or_init(|| Box::new(std::array::from_fn(|_| AtomicU64::new(0))));
        counts[b % SUB].fetch_add(1, Ordering::Relaxed);
        self.total.fetch_add(1, Ordering::Relaxed);
    }

    /// Forgets every call (CONFIG RESETSTAT).
    pub fn reset(&self) {
        for counts in self.groups.iter().filter_map(|g| g.get()) {
            for c in counts.iter() {
                c.store(0, Ordering::Relaxed);
            }
        }
        self.total.store(0, Ordering::Relaxed);
    }
}

/// Histograms added up (each thread keeps its own; INFO and /metrics read
/// their sum).
#[derive(Debug, Default)]
pub struct Counts {
    /// Calls per bucket; empty until a histogram with calls is added.
    buckets: Vec<u64>,
    total: u64,
}

impl Counts {
    /// Adds `h`'s calls.
    pub fn add(&mut self, h: &Histogram) {
        let total = h.total.load(Ordering::Relaxed);
        if total == 0 {
            return;
        }
        self.total += total;
        self.buckets.resize(BUCKETS, 0);
        for (g, counts) in h.groups.iter().enumerate() {
            let Some(counts) = counts.get() else {
                continue;
            };
            for (i, c) in counts.iter().enumerate() {
                if let Some(b) = self.buckets.get_mut(g * SUB + i) {
                    *b += c.load(Ordering::Relaxed);
                }
            }
        }
    }

    /// Calls recorded.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The count of bucket `b`.
    fn count(&self, b: usize) -> u64 {
        self.buckets.get(b).copied().unwrap_or(0)
    }

    /// Calls that took less than 2^`k` ns (`k` from 4 to 35: the
    /// histogram's groups end on powers of two, so the count is exact; the
    /// cumulative buckets of /metrics).
    pub fn below_pow2(&self, k: u32) -> u64 {
        let k = k.clamp(SUB_BITS, MAX_BITS - 1);
        // Group g (g >= 1) holds [2^(g+3), 2^(g+4)); group 0 holds [0, 16).
        let end = (k - SUB_BITS + 1) as usize * SUB;
        self.buckets.iter().take(end).sum()
    }

    /// LATENCY HISTOGRAM's cumulative distribution: at each power of two
    /// from 2^10 ns (1 us) up, the calls that took less, where that count
    /// grew, until it holds every call. Each level is keyed by the
    /// microseconds Redis names it by: the highest value of its 2-digit
    /// histogram's bucket there, 2^n + 2^(n-7) - 1 ns (1, 2, 4, 8, 16, 33,
    /// 66, ...). As Redis's histograms end at 1 s, slower calls count at
    /// the 2^30 ns level.
    pub fn cdf(&self) -> Vec<(u64, u64)> {
        const FIRST: u32 = 10;
        const LAST: u32 = 30;
        let mut out = Vec::new();
        let mut seen = 0;
        for n in FIRST..=LAST {
            if seen == self.total {
                break;
            }
            let below = if n == LAST {
                self.total
            } else {
                self.below_pow2(n)
            };
            if below > seen {
                out.push((((1u64 << n) + (1 << (n - 7)) - 1) / 1000, below));
                seen = below;
            }
        }
        out
    }

    /// The duration (ns) under which `p` percent of the calls fell, for
    /// each `p` (0 when nothing was recorded).
    pub fn percentiles(&self, ps: &[f64]) -> Vec<u64> {
        let total = self.total();
        if total == 0 {
            return vec![0; ps.len()];
        }
        ps.iter()
            .map(|p| {
                let want = ((p / 100.0) * total as f64).ceil().max(1.0) as u64;
                let mut seen = 0;
                for b in 0..BUCKETS {
                    seen += self.count(b);
                    if seen >= want {
                        return bucket_high(b);
                    }
                }
                bucket_high(BUCKETS - 1)
            })
            .collect()
    }
}

/// Parses `latency-tracking-info-percentiles` (space-separated numbers
/// between 0 and 100) into its canonical text.
pub fn parse_percentiles(value: &str) -> Result<Vec<f64>, String> {
    value
        .split_whitespace()
        .map(|w| {
            let p: f64 = w
                .parse()
                .ok()
                .filter(|p: &f64| p.is_finite())
                .ok_or_else(|| {
                    "Invalid latency-tracking-info-percentiles parameters".to_string()
                })?;
            if (0.0..=100.0).contains(&p) {
                Ok(p)
            } else {
                Err(
                    "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"
                        .to_string(),
                )
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_hold_their_values() {
        for ns in [
            0,
            1,
            31,
            32,
            33,
            63,
            64,
            65,
            1000,
            1003,
            123_456,
            (1 << 36) - 1,
        ] {
            let b = bucket_of(ns);
            assert!(b < BUCKETS, "{ns}");
            assert!(bucket_high(b) >= ns, "{ns}");
            // Within 1/16 above the value.
            assert!(
                bucket_high(b) - ns <= ns / 16 + 1,
                "{ns} -> {}",
                bucket_high(b)
            );
            if b > 0 {
                assert!(bucket_high(b - 1) < ns, "{ns}");
            }
        }
    }

    #[test]
    fn percentiles_of_a_known_distribution() {
        let (one, two) = (Histogram::default(), Histogram::default());
        let sum = |hs: &[&Histogram]| {
            let mut c = Counts::default();
            for h in hs {
                c.add(h);
            }
            c
        };
        assert_eq!(sum(&[&one, &two]).percentiles(&[50.0]), [0]);
        // Two threads' histograms: the odd and the even calls.
        for ns in 1..=1000u64 {
            let h = if ns % 2 == 1 { &one } else { &two };
            h.record(bucket_of(ns * 1000));
        }
        let h = sum(&[&one, &two]);
        assert_eq!(h.total(), 1000);
        let p = h.percentiles(&[0.0, 50.0, 99.0, 99.9, 100.0]);
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        let near = |got: u64, want: u64| got >= want && got <= want + want / 16 + 1;
        assert!(near(p[0], 1000), "{p:?}");
        assert!(near(p[1], 500_000), "{p:?}");
        assert!(near(p[2], 990_000), "{p:?}");
        assert!(near(p[3], 999_000), "{p:?}");
        assert!(near(p[4], 1_000_000), "{p:?}");
        // 1..=1000 us: one under 2^10 ns (1,000 ns), all under 2^20 ns
        // (1.05 ms).
        assert_eq!(h.below_pow2(10), 1);
        assert_eq!(h.below_pow2(20), 1000);
        // Under 2^19 ns (524,288 ns): 1..=524 us.
        assert_eq!(h.below_pow2(19), 524);
        // 1..=1000 us: 1 us took under 1,024 ns; then each power of two
        // up to 2^20 ns holds them all.
        assert_eq!(
            h.cdf(),
            [
                (1, 1),
                (2, 2),
                (4, 4),
                (8, 8),
                (16, 16),
                (33, 32),
                (66, 65),
                (132, 131),
                (264, 262),
                (528, 524),
                (1056, 1000)
            ]
        );
        one.reset();
        assert_eq!(sum(&[&one, &two]).total(), 500);
        // Past a second: the last level.
        let slow = Histogram::default();
        slow.record(bucket_of(5_000_000_000));
        assert_eq!(sum(&[&slow]).cdf(), [(1082130, 1)]);
        assert!(sum(&[]).cdf().is_empty());
        assert_eq!(sum(&[&one]).below_pow2(30), 0);
    }

    #[test]
    fn percentile_settings() {
        assert_eq!(parse_percentiles("50 99 99.9"), Ok(vec![50.0, 99.0, 99.9]));
        assert_eq!(parse_percentiles(""), Ok(vec![]));
        assert!(parse_percentiles("101")
            .unwrap_err()
            .contains("[0.0,100.0]"));
        assert!(parse_percentiles("abc").unwrap_err().contains("Invalid"));
    }
}
