//! Criterion benches of the sorted-set engine alone (no server, no RESP):
//! insert, update, rank (one, and 16 together), and ranges of 10 and 100
//! members, on sets of 10^3 to 10^6 `m:<id>` members with integer scores, to
//! show the O(log n) growth.
//!
//! Run with `cargo bench --bench zset_engine` (on an idle machine).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use rostrum::engine::zset::{ZSet, ZSetLimits};

const SIZES: [usize; 4] = [1_000, 10_000, 100_000, 1_000_000];

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as usize % n
    }
}

fn board(n: usize) -> (ZSet, Vec<Vec<u8>>) {
    let limits = ZSetLimits::default();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let members: Vec<Vec<u8>> = (0..n).map(|i| format!("m:{i}").into_bytes()).collect();
    let mut z = ZSet::new();
    for m in &members {
        z.insert(m, rng.below(1_000_000) as f64, limits);
    }
    (z, members)
}

fn engine(c: &mut Criterion) {
    let limits = ZSetLimits::default();
    for n in SIZES {
        let (mut z, members) = board(n);
        let mut rng = Rng(42);
        let mut group = c.benchmark_group("zset_engine");

        group.bench_with_input(BenchmarkId::new("insert_remove", n), &n, |b, _| {
            b.iter(|| {
                let score = rng.below(1_000_000) as f64;
                z.insert(black_box(b"m:new-member"), score, limits);
                z.remove(black_box(b"m:new-member"))
            })
        });

        group.bench_with_input(BenchmarkId::new("update", n), &n, |b, _| {
            b.iter(|| {
                let m = &members[rng.below(n)];
                z.insert(black_box(m), rng.below(1_000_000) as f64, limits)
            })
        });

        group.bench_with_input(BenchmarkId::new("score", n), &n, |b, _| {
            b.iter(|| z.score(black_box(&members[rng.below(n)])))
        });

        group.bench_with_input(BenchmarkId::new("rank", n), &n, |b, _| {
            b.iter(|| z.rank(black_box(&members[rng.below(n)]), true))
        });

        // 16 ranks found together (a pipeline's run, `ZSet::ranks`): the
        // time is for all 16, to set against 16 times `rank`.
        group.bench_with_input(BenchmarkId::new("ranks_16", n), &n, |b, _| {
            let mut out = Vec::with_capacity(16);
            b.iter(|| {
                let some: Vec<&[u8]> = (0..16).map(|_| members[rng.below(n)].as_slice()).collect();
                out.clear();
                z.ranks(black_box(&some), true, &mut out);
                out.len()
            })
        });

        for len in [10usize, 100] {
            group.bench_with_input(BenchmarkId::new(format!("range_{len}"), n), &n, |b, _| {
                b.iter(|| {
                    let start = rng.below(n - len);
                    z.range_by_rank(start, start + len - 1, true)
                        .map(|(m, s)| m.len() as f64 + s)
                        .sum::<f64>()
                })
            });
        }

        group.bench_with_input(BenchmarkId::new("top_100", n), &n, |b, _| {
            b.iter(|| {
                z.range_by_rank(0, 99, true)
                    .map(|(m, s)| m.len() as f64 + s)
                    .sum::<f64>()
            })
        });
        group.finish();
    }
}

criterion_group!(benches, engine);
criterion_main!(benches);
