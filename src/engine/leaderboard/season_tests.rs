//! Seasons against a plain model: every increment lands in the period its
//! time falls in, boundaries passed while nothing happened are archived
//! empty, HISTORY keeps the most recent, and what a read sees before the
//! roll (`periods_at`) is what the board holds after it.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

fn board(history: u64, every: u64) -> Leaderboard {
    let mut b = Leaderboard::new(Options::default());
    b.set_season(
        SeasonOptions {
            schedule: Schedule::Every(every),
            zone: Zone::default(),
            history,
            ..SeasonOptions::default()
        },
        None,
        Some(0),
        0,
    );
    b
}

/// (number, start, end, size, sum of scores) of each period, current first.
fn shown(b: &Leaderboard, now: u64) -> Vec<(u64, u64, Option<u64>, u64, i64)> {
    b.periods_at(now)
        .iter()
        .map(|p| {
            let sum = match p.source {
                Source::Board(x) => x.iter().map(|(_, e)| e.score).sum(),
                Source::Disk(d) => {
                    let mut sum = 0;
                    d.for_each(|e| sum += e.score).unwrap();
                    sum
                }
                Source::Empty | Source::Unavailable(_) => 0,
            };
            (p.number, p.start, p.end, p.size(), sum)
        })
        .collect()
}

#[test]
fn a_roll_archives_and_numbers_periods() {
    let mut b = board(2, 1000);
    b.incr(b"a", 5, 10, None).ok();
    assert_eq!(b.roll_until(999), 0);
    assert_eq!(b.roll_until(1000), 1);
    b.incr(b"a", 7, 1500, None).ok();
    // Two boundaries passed with nothing written: 2 (with 7) and 3 (empty)
    // are archived, 1 falls out of HISTORY 2.
    assert_eq!(b.roll_until(3500), 2);
    assert_eq!(
        shown(&b, 3500),
        vec![
            (4, 3000, Some(4000), 0, 0),
            (3, 2000, Some(3000), 0, 0),
            (2, 1000, Some(2000), 1, 7)
        ]
    );
    assert_eq!(b.score(b"a"), None);
}

#[test]
fn a_reset_ends_the_period_now() {
    let mut b = Leaderboard::new(Options::default());
    b.incr(b"a", 1, 10, None).ok();
    assert!(b.reset_at(50));
    assert_eq!(
        shown(&b, 60),
        vec![(2, 50, None, 0, 0), (1, 0, Some(50), 1, 1)]
    );
    assert!(!b.reset_at(40), "before the current start");
    // An EVERY board reset between boundaries: the next boundary is still
    // the schedule's.
    let mut e = board(1, 1000);
    assert!(e.reset_at(400));
    assert_eq!(e.season().and_then(|s| s.end()), Some(1000));
    // A reset at a boundary not yet applied applies it first: no extra
    // empty period.
    let mut e = board(3, 1000);
    assert!(e.reset_at(1000));
    assert_eq!(shown(&e, 1000).len(), 2);
}

#[test]
fn a_long_gap_on_an_every_board_jumps() {
    let mut b = board(2, 10);
    b.incr(b"a", 1, 1, None).ok();
    let k = b.roll_until(10_000_000_000);
    assert_eq!(k, 1_000_000_000);
    let s = shown(&b, 10_000_000_000);
    assert_eq!(s[0].0, 1_000_000_001);
    assert_eq!(s.len(), 3);
    assert!(s.iter().all(|p| p.3 == 0));
}

#[derive(Debug, Clone)]
enum Op {
    Incr(u8, i64, u64),
    Read(u64),
    Reset(u64),
    Config(u64, u64),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![
            6 => (0u8..5, -5i64..10, 0u64..400).prop_map(|(m, d, dt)| Op::Incr(m, d, dt)),
            2 => (0u64..1500).prop_map(Op::Read),
            1 => (0u64..300).prop_map(Op::Reset),
            1 => (0u64..4, 50u64..700).prop_map(|(h, e)| Op::Config(h, e)),
        ],
        1..60,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn seasons_match_a_model(history in 0u64..4, every in 50u64..600, ops in ops()) {
        let mut b = board(history, every);
        let (mut h, mut ev) = (history, every);
        // The model: per period number, its start, end and sums.
        let mut starts: BTreeMap<u64, (u64, Option<u64>)> = BTreeMap::new();
        let mut sums: BTreeMap<u64, i64> = BTreeMap::new();
        let (mut number, mut start, mut now, mut kept) = (1u64, 0u64, 0u64, 0u64);
        let next = |t: u64, ev: u64| (t / ev + 1) * ev;
        let mut end = Some(next(0, ev));
        for op in ops {
            let t = match &op {
                Op::Incr(_, _, dt) | Op::Reset(dt) => now + dt,
                Op::Read(dt) => now + dt,
                Op::Config(..) => now,
            };
            // What a read sees before the roll equals the state after it.
            let before = shown(&b, t);
            let mut after = b.clone();
            after.roll_until(t);
            prop_assert_eq!(&before, &shown(&after, t));
            match op {
                Op::Read(_) => continue,
                Op::Incr(m, d, _) => {
                    b.roll_until(t);
                    while let Some(e) = end.filter(|&e| e <= t) {
                        starts.insert(number, (start, Some(e)));
                        kept = (kept + 1).min(h);
                        number += 1;
                        start = e;
                        end = Some(next(e, ev));
                    }
                    b.incr(&[b'm', m], d, t, None).ok();
                    *sums.entry(number).or_default() += d;
                }
                Op::Reset(_) => {
                    prop_assert!(b.reset_at(t));
                    while let Some(e) = end.filter(|&e| e < t) {
                        starts.insert(number, (start, Some(e)));
                        kept = (kept + 1).min(h);
                        number += 1;
                        start = e;
                        end = Some(next(e, ev));
                    }
                    starts.insert(number, (start, Some(t)));
                    kept = (kept + 1).min(h);
                    number += 1;
                    start = t;
                    end = Some(next(t, ev));
                }
                Op::Config(nh, ne) => {
                    h = nh;
                    kept = kept.min(h);
                    ev = ne;
                    b.set_season(
                        SeasonOptions { schedule: Schedule::Every(ev), zone: Zone::default(), history: h, ..SeasonOptions::default() },
                        None,
                        None,
                        now,
                    );
                    end = Some(next(now.max(start), ev));
                }
            }
            now = t;
            let s = shown(&b, now);
            prop_assert_eq!(s[0].0, number);
            prop_assert_eq!(s[0].1, start);
            prop_assert_eq!(s.len() as u64, 1 + kept);
            for p in &s[1..] {
                prop_assert_eq!(starts.get(&p.0).copied(), Some((p.1, p.2)));
                prop_assert_eq!(p.4, sums.get(&p.0).copied().unwrap_or(0));
            }
            prop_assert_eq!(s[0].4, sums.get(&number).copied().unwrap_or(0));
        }
    }
}
