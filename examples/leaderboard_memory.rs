//! Bytes per entry of a big leaderboard, and a few timings.
//!
//! `cargo run --release --example leaderboard_memory [ENTRIES]` (default
//! 1,000,000) fills a DESC board with `player:<7 digits>` members (14
//! bytes), random scores and no metadata, then prints the board's
//! `memory_usage()` and jemalloc's `stats.allocated` growth per entry, and
//! the time of submits, rank lookups and one 5,000-member `among`; then
//! the same figures for 10,000 boards of 100 entries.

use std::time::Instant;

use rostrum::engine::leaderboard::{Leaderboard, Options, Ranking};
use tikv_jemalloc_ctl::{epoch, stats};

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn allocated() -> usize {
    // A failed stats read only spoils the figure, not the run.
    let _ = epoch::advance();
    stats::allocated::read().unwrap_or(0)
}

/// A deterministic pseudo-random sequence (splitmix64).
fn mix(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Bytes per entry of 10,000 boards of 100 entries each.
fn small_boards() {
    let base = allocated();
    let mut boards = Vec::with_capacity(10_000);
    let mut usage = 0;
    for b in 0..10_000u64 {
        let mut board = Leaderboard::new(Options::default());
        for i in 0..100 {
            let score = (mix(b * 100 + i) % 1_000) as i64;
            let _ = board.submit(
                format!("player:{:07}", b * 100 + i).as_bytes(),
                score,
                0,
                i,
                None,
            );
        }
        usage += board.memory_usage();
        boards.push(board);
    }
    let n = 1_000_000.0;
    println!(
        "10,000 boards of 100 entries: memory_usage {:.1} B/entry, jemalloc allocated {:.1} B/entry",
        usage as f64 / n,
        allocated().saturating_sub(base) as f64 / n
    );
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let member = |i: u64| format!("player:{:07}", i % 10_000_000);
    let base = allocated();
    let mut board = Leaderboard::new(Options {
        ranking: Ranking::Competition,
        ..Options::default()
    });
    let t = Instant::now();
    for i in 0..n {
        let score = (mix(i) % 1_000_000) as i64;
        if let Err(e) = board.submit(member(i).as_bytes(), score, 0, i, None) {
            eprintln!("submit failed: {e}");
            return;
        }
    }
    let fill = t.elapsed();
    let grown = allocated().saturating_sub(base);
    println!(
        "{n} entries: memory_usage {:.1} B/entry, jemalloc allocated {:.1} B/entry",
        board.memory_usage() as f64 / n as f64,
        grown as f64 / n as f64
    );
    println!("fill: {:.0} ns/submit", fill.as_nanos() as f64 / n as f64);

    let t = Instant::now();
    let mut sum = 0u64;
    let q = 200_000.min(n);
    for i in 0..q {
        sum += board.rank(member(mix(i + 7) % n).as_bytes()).unwrap_or(0);
    }
    println!(
        "rank (competition): {:.0} ns/lookup (checksum {sum})",
        t.elapsed().as_nanos() as f64 / q as f64
    );

    let t = Instant::now();
    for i in 0..q {
        let score = (mix(i + n) % 1_000_000) as i64;
        let _ = board.submit(member(mix(i + 3) % n).as_bytes(), score, 0, n + i, None);
    }
    println!(
        "resubmit (BEST): {:.0} ns/submit",
        t.elapsed().as_nanos() as f64 / q as f64
    );

    let friends: Vec<String> = (0..5_000).map(|i| member(mix(i + 11) % n)).collect();
    let t = Instant::now();
    let got = board.among(friends.iter().map(|f| f.as_bytes()), false);
    println!(
        "among 5,000: {:.2} ms ({} ranked)",
        t.elapsed().as_secs_f64() * 1e3,
        got.len()
    );
    let t = Instant::now();
    let got = board.among(friends.iter().map(|f| f.as_bytes()), true);
    println!(
        "among 5,000 with global ranks: {:.2} ms ({} ranked)",
        t.elapsed().as_secs_f64() * 1e3,
        got.len()
    );

    let t = Instant::now();
    let top: u64 = board.range(1, 100).map(|(r, _)| r).sum();
    println!(
        "range 1..100: {:.1} us (checksum {top})",
        t.elapsed().as_secs_f64() * 1e6
    );
    // Shrinking to a quarter of the arena rebuilds the board once.
    let t = Instant::now();
    let mut slowest = std::time::Duration::ZERO;
    for i in 0..n * 4 / 5 {
        let one = Instant::now();
        board.remove(member(i).as_bytes());
        slowest = slowest.max(one.elapsed());
    }
    println!(
        "remove 80%: {:.0} ns/remove, slowest {:.1} ms (the rebuild), then {:.1} B/entry",
        t.elapsed().as_nanos() as f64 / (n * 4 / 5) as f64,
        slowest.as_secs_f64() * 1e3,
        board.memory_usage() as f64 / board.len() as f64
    );
    drop(board);
    small_boards();
}
