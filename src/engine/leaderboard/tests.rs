//! Unit tests on hand-made boards: rank styles, time tiebreaks, policies,
//! capacity, metadata, windows, subsets, long members.

use super::*;

fn board(f: impl FnOnce(&mut Options)) -> Leaderboard {
    let mut o = Options::default();
    f(&mut o);
    Leaderboard::new(o)
}

/// a 100, b 90, c 90, d 80 (b before c: it got there first).
fn sample(ranking: Ranking) -> Leaderboard {
    let mut b = board(|o| o.ranking = ranking);
    for (m, s, t) in [("c", 90, 20), ("a", 100, 5), ("d", 80, 1), ("b", 90, 10)] {
        b.submit(m.as_bytes(), s, 0, t, None).unwrap();
    }
    b.check();
    b
}

fn ranks(b: &Leaderboard) -> Vec<(u64, String)> {
    b.iter()
        .map(|(r, e)| (r, String::from_utf8_lossy(e.member).into_owned()))
        .collect()
}

fn ranked(v: &[(u64, &str)]) -> Vec<(u64, String)> {
    v.iter().map(|&(r, m)| (r, m.to_string())).collect()
}

#[test]
fn rank_styles() {
    let ordinal = sample(Ranking::Ordinal);
    assert_eq!(
        ranks(&ordinal),
        ranked(&[(1, "a"), (2, "b"), (3, "c"), (4, "d")])
    );
    let comp = sample(Ranking::Competition);
    assert_eq!(
        ranks(&comp),
        ranked(&[(1, "a"), (2, "b"), (2, "c"), (4, "d")])
    );
    assert_eq!(comp.rank(b"c"), Some(2));
    assert_eq!(comp.rank(b"d"), Some(4));
    let dense = sample(Ranking::Dense);
    assert_eq!(
        ranks(&dense),
        ranked(&[(1, "a"), (2, "b"), (2, "c"), (3, "d")])
    );
    assert_eq!(dense.rank(b"d"), Some(3));
    // A range starting inside a tie knows the tie's rank.
    let r: Vec<u64> = comp.range(3, 4).map(|(r, _)| r).collect();
    assert_eq!(r, [2, 4]);
    let r: Vec<u64> = dense.range(3, 4).map(|(r, _)| r).collect();
    assert_eq!(r, [2, 3]);
    assert_eq!(dense.rank(b"zz"), None);
}

#[test]
fn subscore_breaks_score_ties() {
    let mut b = board(|o| o.ranking = Ranking::Dense);
    b.submit(b"x", 10, 1, 1, None).unwrap();
    b.submit(b"y", 10, 5, 2, None).unwrap();
    b.submit(b"z", 10, 1, 3, None).unwrap();
    assert_eq!(ranks(&b), ranked(&[(1, "y"), (2, "x"), (2, "z")]));
    let mut asc = board(|o| o.order = Order::Asc);
    asc.submit(b"x", 10, 1, 1, None).unwrap();
    asc.submit(b"y", 10, 5, 2, None).unwrap();
    asc.submit(b"w", 3, 9, 2, None).unwrap();
    assert_eq!(ranks(&asc), ranked(&[(1, "w"), (2, "x"), (3, "y")]));
}

#[test]
fn time_tiebreaks() {
    for (tb, want) in [
        (Tiebreak::Earliest, ["early", "late"]),
        (Tiebreak::Latest, ["late", "early"]),
    ] {
        let mut b = board(|o| o.tiebreak = tb);
        b.submit(b"late", 5, 0, 200, None).unwrap();
        b.submit(b"early", 5, 0, 100, None).unwrap();
        let got: Vec<&[u8]> = b.iter().map(|(_, e)| e.member).collect();
        assert_eq!(got, [want[0].as_bytes(), want[1].as_bytes()]);
    }
    // Same time: member bytes decide.
    let mut b = board(|_| {});
    b.submit(b"bb", 5, 0, 1, None).unwrap();
    b.submit(b"ab", 5, 0, 1, None).unwrap();
    assert_eq!(b.rank(b"ab"), Some(1));
}

#[test]
fn best_keeps_the_better_result_and_its_time() {
    let mut b = board(|_| {});
    let o = b.submit(b"p", 50, 0, 10, Some(b"first")).unwrap();
    assert_eq!((o.score, o.rank, o.changed), (50, Some(1), true));
    let o = b.submit(b"p", 40, 0, 20, Some(b"worse")).unwrap();
    assert_eq!((o.score, o.changed), (50, false));
    let o = b.submit(b"p", 50, 0, 30, Some(b"equal")).unwrap();
    assert!(!o.changed);
    let e = b.get(b"p").unwrap();
    assert_eq!((e.time, e.meta), (10, Some(&b"first"[..])));
    let o = b.submit(b"p", 50, 1, 40, None).unwrap();
    assert!(o.changed);
    let e = b.get(b"p").unwrap();
    assert_eq!((e.score, e.subscore, e.time), (50, 1, 40));
    assert_eq!(e.meta, Some(&b"first"[..]));
    let mut asc = board(|o| o.order = Order::Asc);
    asc.submit(b"p", 50, 0, 1, None).unwrap();
    asc.submit(b"p", 60, 0, 2, None).unwrap();
    asc.submit(b"p", 30, 0, 3, None).unwrap();
    assert_eq!(asc.score(b"p"), Some(30));
}

#[test]
fn set_and_incr_policies() {
    let mut b = board(|o| o.policy = Policy::Set);
    b.submit(b"p", 50, 0, 1, None).unwrap();
    let o = b.submit(b"p", 10, 0, 2, None).unwrap();
    assert_eq!((o.score, o.changed), (10, true));
    let o = b.submit(b"p", 10, 0, 3, None).unwrap();
    assert!(!o.changed);
    assert_eq!(b.get(b"p").unwrap().time, 2);

    let mut b = board(|o| o.policy = Policy::Incr);
    b.submit(b"p", 5, 0, 1, None).unwrap();
    let o = b.submit(b"p", 7, 3, 2, None).unwrap();
    assert_eq!(o.score, 12);
    assert_eq!(b.get(b"p").unwrap().subscore, 3);
    assert_eq!(b.submit(b"p", i64::MAX, 0, 3, None), Err(LbError::Overflow));
    assert_eq!(b.score(b"p"), Some(12));
    // incr ignores the policy and keeps the subscore.
    let mut b = board(|_| {});
    b.submit(b"p", 5, 9, 1, None).unwrap();
    let o = b.incr(b"p", -8, 2, None).unwrap();
    assert_eq!((o.score, o.changed), (-3, true));
    assert_eq!(b.get(b"p").unwrap().subscore, 9);
    assert_eq!(b.incr(b"p", i64::MIN, 3, None), Err(LbError::Overflow));
    let e = b.get(b"p").unwrap();
    assert_eq!((e.score, e.time), (-3, 2));
    assert_eq!(b.incr(b"q", 4, 5, None).unwrap().score, 4);
    assert_eq!(b.get(b"q").unwrap().subscore, 0);
}

#[test]
fn extreme_scores_are_exact() {
    let mut b = board(|o| o.order = Order::Asc);
    b.submit(b"max", i64::MAX, i64::MIN, 0, None).unwrap();
    b.submit(b"max-1", i64::MAX - 1, 0, 0, None).unwrap();
    b.submit(b"min", i64::MIN, i64::MAX, 0, None).unwrap();
    assert_eq!(ranks(&b), ranked(&[(1, "min"), (2, "max-1"), (3, "max")]));
    assert_eq!(b.count_between(i64::MIN, i64::MAX), 3);
    assert_eq!(b.count_between(i64::MAX - 1, i64::MAX), 2);
    assert_eq!(b.count_between(5, 4), 0);
}

#[test]
fn capacity_keeps_the_best() {
    let mut b = board(|o| o.capacity = 3);
    for (i, s) in [10, 20, 30].into_iter().enumerate() {
        b.submit(format!("m{i}").as_bytes(), s, 0, i as u64, None)
            .unwrap();
    }
    // Below the last: answered, not stored.
    let o = b.submit(b"low", 5, 0, 9, None).unwrap();
    assert_eq!(
        (o.score, o.rank, o.changed, o.evicted),
        (5, None, false, None)
    );
    assert_eq!(b.get(b"low"), None);
    // Equal to the last but later: ranks below it (EARLIEST).
    let o = b.submit(b"tie", 10, 0, 9, None).unwrap();
    assert_eq!(o.rank, None);
    // Above: stored, the last goes.
    let o = b.submit(b"high", 25, 0, 9, Some(b"x")).unwrap();
    assert_eq!(o.rank, Some(2));
    assert_eq!(o.evicted.as_deref(), Some(&b"m0"[..]));
    assert_eq!(b.len(), 3);
    assert_eq!(b.get(b"m0"), None);
    b.check();
}

#[test]
fn metadata() {
    let mut b = board(|o| o.max_meta_len = 4);
    assert_eq!(
        b.submit(b"p", 1, 0, 0, Some(b"12345")),
        Err(LbError::MetaTooLong)
    );
    assert!(b.is_empty());
    b.submit(b"p", 1, 0, 0, Some(b"abcd")).unwrap();
    assert_eq!(b.get(b"p").unwrap().meta, Some(&b"abcd"[..]));
    let before = b.memory_usage();
    // An applied submit replaces it; None keeps it; empty clears it.
    b.submit(b"p", 2, 0, 1, Some(b"ef")).unwrap();
    assert_eq!(b.get(b"p").unwrap().meta, Some(&b"ef"[..]));
    b.submit(b"p", 3, 0, 2, None).unwrap();
    assert_eq!(b.get(b"p").unwrap().meta, Some(&b"ef"[..]));
    b.submit(b"p", 4, 0, 3, Some(b"")).unwrap();
    assert_eq!(b.get(b"p").unwrap().meta, None);
    assert!(b.memory_usage() < before);
    b.submit(b"p", 5, 0, 4, Some(b"z")).unwrap();
    assert!(b.remove(b"p"));
    assert!(!b.remove(b"p"));
    b.submit(b"p", 5, 0, 4, None).unwrap();
    assert_eq!(b.get(b"p").unwrap().meta, None);
}

#[test]
fn around_shifts_at_the_ends() {
    let mut b = board(|_| {});
    for i in 0..10 {
        b.submit(format!("m{i}").as_bytes(), 100 - i, 0, 0, None)
            .unwrap();
    }
    let window =
        |m: &str, n: u64| -> Vec<u64> { b.around(m.as_bytes(), n).map(|(r, _)| r).collect() };
    assert_eq!(window("m5", 3), [5, 6, 7]);
    assert_eq!(window("m5", 4), [4, 5, 6, 7]);
    assert_eq!(window("m0", 3), [1, 2, 3]);
    assert_eq!(window("m9", 3), [8, 9, 10]);
    assert_eq!(window("m9", 30).len(), 10);
    assert!(window("nobody", 3).is_empty());
    assert!(window("m1", 0).is_empty());
}

#[test]
fn among_ranks_a_subset() {
    let mut b = board(|o| o.ranking = Ranking::Competition);
    for (m, s) in [("a", 9), ("b", 8), ("c", 8), ("d", 7), ("e", 6)] {
        b.submit(m.as_bytes(), s, 0, 0, None).unwrap();
    }
    let got: Vec<(u64, u64, &[u8])> = b
        .among([&b"e"[..], b"c", b"zz", b"b", b"c"], true)
        .iter()
        .map(|a| (a.rank, a.global_rank.unwrap(), a.entry.member))
        .collect();
    assert_eq!(
        got,
        [(1, 2, &b"b"[..]), (1, 2, &b"c"[..]), (3, 5, &b"e"[..])]
    );
    // Without global ranks: the same answer, no walk for them.
    let plain: Vec<(u64, Option<u64>, &[u8])> = b
        .among([&b"e"[..], b"c", b"zz", b"b", b"c"], false)
        .iter()
        .map(|a| (a.rank, a.global_rank, a.entry.member))
        .collect();
    assert_eq!(
        plain,
        [
            (1, None, &b"b"[..]),
            (1, None, &b"c"[..]),
            (3, None, &b"e"[..])
        ]
    );
}

#[test]
fn long_members_and_heap_compaction() {
    let mut b = board(|_| {});
    let long = |i: usize| format!("{i:0>200}").into_bytes();
    for i in 0..100 {
        b.submit(&long(i), i as i64, 0, 0, None).unwrap();
    }
    for i in 0..80 {
        assert!(b.remove(&long(i)));
    }
    b.check();
    assert_eq!(b.len(), 20);
    for i in 80..100 {
        assert_eq!(b.score(&long(i)), Some(i as i64));
    }
    assert!(b.store.memory_usage() < 20 * 200 * 4);
}

#[test]
fn a_deep_tree_stays_consistent() {
    // Test builds use 4-slot nodes: a few thousand entries make many levels.
    let mut b = board(|o| o.ranking = Ranking::Dense);
    let mut x: u64 = 7;
    for i in 0..3000u64 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let m = format!("p{}", x % 1500);
        b.submit(m.as_bytes(), (x >> 40) as i64 % 50, 0, i, None)
            .unwrap();
        if i % 3 == 0 {
            b.remove(format!("p{}", (x >> 20) % 1500).as_bytes());
        }
    }
    b.check();
    let all: Vec<(u64, EntryRef)> = b.iter().collect();
    assert_eq!(all.len(), b.len());
    for (r, e) in all.iter().step_by(37) {
        assert_eq!(b.rank(e.member), Some(*r));
    }
}

#[test]
fn small_boards_stay_small() {
    let mut b = board(|_| {});
    let empty = b.memory_usage();
    for i in 0..3 {
        b.submit(format!("player:{i:07}").as_bytes(), i, 0, 0, None)
            .unwrap();
    }
    let three = b.memory_usage();
    assert!(empty < 1024, "{empty}");
    assert!(three < empty + 400, "{three}");
}

#[test]
fn restore_copies_a_board_exactly() {
    let mut b = board(|o| {
        o.policy = Policy::Incr;
        o.ranking = Ranking::Dense;
    });
    b.submit(b"a", 5, 1, 10, Some(b"m")).unwrap();
    b.submit(b"b", 7, 0, 20, None).unwrap();
    b.submit(b"a", 2, 0, 30, None).unwrap();
    let mut copy = Leaderboard::new(*b.options());
    for (_, e) in b.iter() {
        copy.restore(e).unwrap();
    }
    assert!(b.iter().eq(copy.iter()));
    // Over an existing entry: replaced, time and metadata included.
    let e = EntryRef {
        member: b"a",
        score: 1,
        subscore: 2,
        time: 99,
        meta: None,
    };
    copy.restore(e).unwrap();
    assert_eq!(copy.get(b"a"), Some(e));
    copy.check();
}

#[test]
fn a_board_that_shrinks_gives_memory_back() {
    let mut b = board(|o| o.ranking = Ranking::Competition);
    for i in 0..6000 {
        b.submit(format!("p{i}").as_bytes(), i % 100, 0, i as u64, Some(b"m"))
            .unwrap();
    }
    let full = b.memory_usage();
    for i in 0..5900 {
        assert!(b.remove(format!("p{i}").as_bytes()));
    }
    b.check();
    assert_eq!(b.len(), 100);
    assert!(
        b.memory_usage() * 10 < full,
        "{} of {full}",
        b.memory_usage()
    );
    for i in 5900..6000 {
        let e = b.get(format!("p{i}").as_bytes()).unwrap();
        assert_eq!(
            (e.score, e.time, e.meta),
            (i % 100, i as u64, Some(&b"m"[..]))
        );
    }
    assert_eq!(b.rank(b"p5999"), Some(1));
}

#[test]
fn a_rebuilt_board_is_the_same_board() {
    for n in 0..150u64 {
        let mut b = board(|o| o.ranking = Ranking::Dense);
        for i in 0..n {
            let meta = (i % 3 == 0).then_some(&b"x"[..]);
            b.submit(format!("p{i}").as_bytes(), (i * 7 % 5) as i64, 0, i, meta)
                .unwrap();
        }
        let dump = |b: &Leaderboard| -> Vec<String> {
            b.iter().map(|(r, e)| format!("{r} {e:?}")).collect()
        };
        let before = dump(&b);
        b.compact();
        b.check();
        let after = dump(&b);
        assert_eq!(before, after, "{n}");
        // Still takes changes.
        b.submit(b"new", 3, 0, 999, None).unwrap();
        b.remove(b"p0");
        b.check();
    }
}

#[test]
fn compaction_keeps_the_dedup_window() {
    let mut b = board(|_| {});
    for i in 0..200u32 {
        b.submit(&i.to_be_bytes(), i as i64, 0, 1, None).unwrap();
    }
    assert!(b.ids.insert(b"event", 10));
    for i in 0..190u32 {
        assert!(b.remove(&i.to_be_bytes()));
    }
    b.compact();
    b.check();
    assert_eq!(b.len(), 10);
    assert!(b.ids.contains(b"event"));
}

/// An entry, owned: member, score, subscore, time, metadata.
type Owned = (Vec<u8>, i64, i64, u64, Option<Vec<u8>>);

/// Every entry of `b` in order, with its rank.
fn entries(b: &Leaderboard) -> Vec<(u64, Owned)> {
    b.iter()
        .map(|(r, e)| {
            let meta = e.meta.map(|m| m.to_vec());
            (r, (e.member.to_vec(), e.score, e.subscore, e.time, meta))
        })
        .collect()
}

/// The builder (a saved board loaded with one tree build) gives the board
/// that restoring each entry in turn gives: entries in the board's order,
/// shuffled, with a member repeated, past CAPACITY, with metadata, ties.
#[test]
fn builder_equals_restoring_each() {
    let mut seed = 7u64;
    let mut next = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        seed >> 33
    };
    let sample: Vec<Owned> = (0..3000)
        .map(|i| {
            let meta = (i % 7 == 0).then(|| format!("m{i}").into_bytes());
            let member = if i % 50 == 0 {
                format!("a-long-member-name-over-fifteen-bytes-{i}")
            } else {
                format!("p{i}")
            };
            (
                member.into_bytes(),
                (next() % 40) as i64,
                (next() % 3) as i64,
                next() % 5,
                meta,
            )
        })
        .collect();
    let mut sorted_order = board(|_| {});
    for (m, s, ss, t, meta) in &sample {
        sorted_order
            .restore(EntryRef {
                member: m,
                score: *s,
                subscore: *ss,
                time: *t,
                meta: meta.as_deref(),
            })
            .unwrap();
    }
    let in_order: Vec<Owned> = entries(&sorted_order).into_iter().map(|(_, e)| e).collect();
    let mut repeated = sample.clone();
    repeated.insert(1500, (b"p10".to_vec(), 99, 1, 3, Some(b"again".to_vec())));
    repeated.push((b"p20".to_vec(), -5, 0, 9, None));
    let cases: Vec<(&str, Vec<Owned>, u64)> = vec![
        ("in order", in_order.clone(), 0),
        ("shuffled", sample.clone(), 0),
        ("repeated", repeated, 0),
        ("capacity, in order", in_order, 1000),
        ("capacity, shuffled", sample.clone(), 1000),
        ("empty", Vec::new(), 0),
    ];
    for order in [Order::Desc, Order::Asc] {
        for (name, list, capacity) in &cases {
            let set = |o: &mut Options| {
                o.order = order;
                o.capacity = *capacity;
            };
            let mut one_by_one = board(set);
            let mut o = Options::default();
            set(&mut o);
            let mut build = Leaderboard::builder(o, list.len());
            for (m, s, ss, t, meta) in list {
                let e = EntryRef {
                    member: m,
                    score: *s,
                    subscore: *ss,
                    time: *t,
                    meta: meta.as_deref(),
                };
                one_by_one.restore(e).unwrap();
                build.push(e).unwrap();
            }
            let built = build.finish();
            built.check();
            assert_eq!(entries(&built), entries(&one_by_one), "{name} {order:?}");
            assert_eq!(built.len(), one_by_one.len(), "{name}");
            for (m, ..) in list.iter().take(50) {
                assert_eq!(built.rank(m), one_by_one.rank(m), "{name}");
            }
            // The built board goes on taking writes.
            let mut built = built;
            built.submit(b"late", 20, 0, 100, None).unwrap();
            built.remove(b"p3");
            built.check();
        }
    }
}

/// A metadata value over the board's limit is refused by the builder as
/// by a restore.
#[test]
fn builder_refuses_long_metadata() {
    let o = Options {
        max_meta_len: 3,
        ..Options::default()
    };
    let mut build = Leaderboard::builder(o, 1);
    let e = EntryRef {
        member: b"a",
        score: 1,
        subscore: 0,
        time: 0,
        meta: Some(b"long"),
    };
    assert!(build.push(e).is_err());
}
