//! Sorted-set commands through the redis crate (and raw sockets for exact
//! error lines and RESP3 reply shapes) against a spawned Rostrum: every
//! command and option, model checks of ranges and set algebra in both
//! encodings, the leaderboard scenarios, and the blocking pops.
mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::net::TcpStream;
use std::thread;
use std::time::Duration;

use common::{read_at_least, TestServer};
use redis::{Connection, Value};

fn cmd(args: &[&str]) -> redis::Cmd {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c
}

fn q<T: redis::FromRedisValue>(c: &mut Connection, args: &[&str]) -> T {
    cmd(args)
        .query(c)
        .unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
}

fn encode(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{}\r\n", a.len(), a).as_bytes());
    }
    out
}

/// Sends one command on a raw connection and checks the exact reply bytes.
fn expect_raw(s: &mut TcpStream, args: &[&str], want: &str) {
    s.write_all(&encode(args)).expect("write");
    let got = read_at_least(s, want.len());
    assert_eq!(String::from_utf8_lossy(&got), want, "{args:?}");
}

/// Member / score pairs of a WITHSCORES reply (flat in RESP2).
fn pairs(c: &mut Connection, args: &[&str]) -> Vec<(String, f64)> {
    let flat: Vec<String> = q(c, args);
    assert_eq!(flat.len() % 2, 0, "{args:?}");
    flat.chunks(2)
        .map(|p| (p[0].clone(), p[1].parse().expect("score")))
        .collect()
}

/// A small deterministic generator for model tests.
struct Rng(u64);

impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }

    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.next((hi - lo + 1) as u64) as i64
    }
}

/// The model of a sorted set: member to score, and the set's order.
fn ordered(model: &HashMap<String, f64>) -> Vec<(String, f64)> {
    let mut v: Vec<(String, f64)> = model.iter().map(|(m, s)| (m.clone(), *s)).collect();
    v.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap().then_with(|| a.0.cmp(&b.0)));
    v
}

#[test]
fn zadd_options_replies_and_errors() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    assert_eq!(q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b"]), 2);
    assert_eq!(q::<i64>(&mut c, &["ZADD", "z", "10", "a", "3", "c"]), 1);
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "CH", "11", "a", "3", "c", "4", "d"]),
        2
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "NX", "99", "a", "5", "e"]),
        1
    );
    assert_eq!(q::<f64>(&mut c, &["ZSCORE", "z", "a"]), 11.0);
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "XX", "CH", "12", "a", "5", "new"]),
        1
    );
    assert_eq!(q::<Option<f64>>(&mut c, &["ZSCORE", "z", "new"]), None);
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "GT", "CH", "5", "a", "13", "b"]),
        1
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "LT", "CH", "20", "a", "1", "b"]),
        1
    );
    assert_eq!(q::<f64>(&mut c, &["ZSCORE", "z", "a"]), 12.0);
    assert_eq!(q::<f64>(&mut c, &["ZSCORE", "z", "b"]), 1.0);
    // INCR: the new score, or nil when a flag skips it.
    assert_eq!(
        q::<Option<f64>>(&mut c, &["ZADD", "z", "INCR", "2.5", "a"]),
        Some(14.5)
    );
    assert_eq!(
        q::<Option<f64>>(&mut c, &["ZADD", "z", "INCR", "NX", "1", "a"]),
        None
    );
    assert_eq!(
        q::<Option<f64>>(&mut c, &["ZADD", "z", "INCR", "GT", "-1", "a"]),
        None
    );
    assert_eq!(
        q::<Option<f64>>(&mut c, &["ZADD", "z", "INCR", "XX", "1", "zz"]),
        None
    );
    assert_eq!(q::<f64>(&mut c, &["ZINCRBY", "z", "-4.5", "a"]), 10.0);
    assert_eq!(q::<f64>(&mut c, &["ZINCRBY", "z", "7", "fresh"]), 7.0);
    // XX on a missing key creates nothing.
    assert_eq!(q::<i64>(&mut c, &["ZADD", "nokey", "XX", "1", "a"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "nokey"]), 0);
    assert_eq!(q::<String>(&mut c, &["TYPE", "z"]), "zset");

    let mut s = srv.raw();
    let cases: &[(&[&str], &str)] = &[
        (
            &["ZADD", "z", "XX", "NX", "1", "a"],
            "-ERR XX and NX options at the same time are not compatible\r\n",
        ),
        (
            &["ZADD", "z", "GT", "LT", "1", "a"],
            "-ERR GT, LT, and/or NX options at the same time are not compatible\r\n",
        ),
        (
            &["ZADD", "z", "NX", "GT", "1", "a"],
            "-ERR GT, LT, and/or NX options at the same time are not compatible\r\n",
        ),
        (
            &["ZADD", "z", "INCR", "1", "a", "2", "b"],
            "-ERR INCR option supports a single increment-element pair\r\n",
        ),
        (&["ZADD", "z", "1", "a", "2"], "-ERR syntax error\r\n"),
        (
            &["ZADD", "z", "nan", "a"],
            "-ERR value is not a valid float\r\n",
        ),
        (
            &["ZADD", "z", "1", "a", "x", "b"],
            "-ERR value is not a valid float\r\n",
        ),
        (
            &["ZADD", "z"],
            "-ERR wrong number of arguments for 'zadd' command\r\n",
        ),
        (&["ZINCRBY", "z", "NX", "a"], "-ERR syntax error\r\n"),
        (
            &["ZINCRBY", "z", "abc", "a"],
            "-ERR value is not a valid float\r\n",
        ),
        (&["ZADD", "inf", "inf", "a"], ":1\r\n"),
        (
            &["ZINCRBY", "inf", "-inf", "a"],
            "-ERR resulting score is not a number (NaN)\r\n",
        ),
        (
            &["ZADD", "inf", "INCR", "-inf", "a"],
            "-ERR resulting score is not a number (NaN)\r\n",
        ),
        (&["SET", "str", "x"], "+OK\r\n"),
        (
            &["ZADD", "str", "1", "a"],
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        ),
        // Scores are checked before the key's type, as in Redis.
        (
            &["ZADD", "str", "x", "a"],
            "-ERR value is not a valid float\r\n",
        ),
        (
            &["ZRANK", "z", "a", "WITHSCORE"],
            "-ERR wrong number of arguments for 'zrank' command\r\n",
        ),
    ];
    for (args, want) in cases {
        expect_raw(&mut s, args, want);
    }
}

#[test]
fn reads_counts_ranks_and_removals() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    q::<i64>(
        &mut c,
        &[
            "ZADD", "z", "1", "a", "2", "b", "2", "c", "3", "d", "-inf", "lo", "+inf", "hi",
        ],
    );
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "z"]), 6);
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "nokey"]), 0);
    let got: Vec<Option<f64>> = q(&mut c, &["ZMSCORE", "z", "b", "x", "hi"]);
    assert_eq!(got, vec![Some(2.0), None, Some(f64::INFINITY)]);
    assert_eq!(q::<i64>(&mut c, &["ZCOUNT", "z", "(1", "3"]), 3);
    assert_eq!(q::<i64>(&mut c, &["ZCOUNT", "z", "-inf", "+inf"]), 6);
    assert_eq!(q::<i64>(&mut c, &["ZCOUNT", "z", "(-inf", "(+inf"]), 4);
    assert_eq!(q::<i64>(&mut c, &["ZRANK", "z", "lo"]), 0);
    assert_eq!(q::<i64>(&mut c, &["ZRANK", "z", "c"]), 3);
    assert_eq!(q::<i64>(&mut c, &["ZREVRANK", "z", "hi"]), 0);
    assert_eq!(q::<Option<i64>>(&mut c, &["ZRANK", "z", "nosuch"]), None);
    q::<i64>(
        &mut c,
        &["ZADD", "lex", "0", "a", "0", "b", "0", "c", "0", "d"],
    );
    assert_eq!(q::<i64>(&mut c, &["ZLEXCOUNT", "lex", "[b", "+"]), 3);
    assert_eq!(q::<i64>(&mut c, &["ZLEXCOUNT", "lex", "(a", "(d"]), 2);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANGEBYLEX", "lex", "-", "[b"]),
        vec!["a", "b"]
    );
    assert_eq!(
        q::<Vec<String>>(
            &mut c,
            &["ZREVRANGEBYLEX", "lex", "+", "(b", "LIMIT", "1", "1"]
        ),
        vec!["c"]
    );
    assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYLEX", "lex", "[b", "[c"]), 2);
    assert_eq!(q::<i64>(&mut c, &["ZREM", "z", "a", "a", "nosuch"]), 1);
    assert_eq!(
        q::<i64>(&mut c, &["ZREMRANGEBYSCORE", "z", "-inf", "(2"]),
        1
    );
    assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYRANK", "z", "-1", "-1"]), 1);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANGE", "z", "0", "-1"]),
        vec!["b", "c", "d"]
    );
    // Emptied sets are deleted.
    assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYRANK", "z", "0", "-1"]), 3);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "z"]), 0);
    assert_eq!(q::<i64>(&mut c, &["ZREM", "lex", "a", "d"]), 2);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "lex"]), 0);

    let mut s = srv.raw();
    let cases: &[(&[&str], &str)] = &[
        (
            &["ZCOUNT", "z", "x", "1"],
            "-ERR min or max is not a float\r\n",
        ),
        (
            &["ZLEXCOUNT", "z", "a", "+"],
            "-ERR min or max not valid string range item\r\n",
        ),
        (
            &["ZREMRANGEBYRANK", "z", "a", "1"],
            "-ERR value is not an integer or out of range\r\n",
        ),
        (
            &["ZREMRANGEBYSCORE", "z", "1", "(x"],
            "-ERR min or max is not a float\r\n",
        ),
        (&["ZSCORE", "nokey", "a"], "$-1\r\n"),
        (&["ZRANK", "nokey", "a"], "$-1\r\n"),
    ];
    for (args, want) in cases {
        expect_raw(&mut s, args, want);
    }
}

/// Random range queries against a model, on a listpack (40 members) and a
/// skiplist (300 members) with many tied scores.
#[test]
fn ranges_match_a_model_in_both_encodings() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for (key, size, encoding) in [("small", 40, "listpack"), ("big", 300, "skiplist")] {
        let mut model = HashMap::new();
        let mut args = vec!["ZADD".to_string(), key.to_string()];
        for _ in 0..size {
            let score = rng.range(-20, 20) as f64 / 2.0;
            let member = format!("m{:03}", rng.next(1000));
            args.push(score.to_string());
            args.push(member.clone());
            model.insert(member, score);
        }
        let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        q::<i64>(&mut c, &refs);
        assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", key]), encoding);
        let order = ordered(&model);
        let n = order.len() as i64;
        assert_eq!(q::<i64>(&mut c, &["ZCARD", key]), n);
        for _ in 0..150 {
            let (start, stop) = (rng.range(-n - 3, n + 3), rng.range(-n - 3, n + 3));
            let norm = |i: i64| if i < 0 { (n + i).max(0) } else { i };
            let (s0, e0) = (norm(start), norm(stop).min(n - 1));
            let want: Vec<(String, f64)> = if start >= n || s0 > e0 {
                vec![]
            } else {
                order[s0 as usize..=e0 as usize].to_vec()
            };
            let (st, sp) = (start.to_string(), stop.to_string());
            assert_eq!(
                pairs(&mut c, &["ZRANGE", key, &st, &sp, "WITHSCORES"]),
                want
            );
            let rev: Vec<(String, f64)> = order.iter().rev().cloned().collect();
            let want_rev: Vec<(String, f64)> = if start >= n || s0 > e0 {
                vec![]
            } else {
                rev[s0 as usize..=e0 as usize].to_vec()
            };
            assert_eq!(
                pairs(&mut c, &["ZREVRANGE", key, &st, &sp, "WITHSCORES"]),
                want_rev
            );

            let lo = rng.range(-12, 12) as f64 / 2.0;
            let hi = lo + rng.range(0, 12) as f64 / 2.0;
            let (lo_ex, hi_ex) = (rng.next(2) == 1, rng.next(2) == 1);
            let inside = |s: f64| {
                (if lo_ex { s > lo } else { s >= lo }) && (if hi_ex { s < hi } else { s <= hi })
            };
            let in_range: Vec<(String, f64)> =
                order.iter().filter(|(_, s)| inside(*s)).cloned().collect();
            let bound = |v: f64, ex: bool| format!("{}{}", if ex { "(" } else { "" }, v);
            let (min, max) = (bound(lo, lo_ex), bound(hi, hi_ex));
            assert_eq!(
                q::<usize>(&mut c, &["ZCOUNT", key, &min, &max]),
                in_range.len()
            );
            let (off, cnt) = (rng.range(0, 5), rng.range(-1, 6));
            let take = if cnt < 0 { usize::MAX } else { cnt as usize };
            let want: Vec<(String, f64)> = in_range
                .iter()
                .skip(off as usize)
                .take(take)
                .cloned()
                .collect();
            let (o, k) = (off.to_string(), cnt.to_string());
            assert_eq!(
                pairs(
                    &mut c,
                    &[
                        "ZRANGEBYSCORE",
                        key,
                        &min,
                        &max,
                        "WITHSCORES",
                        "LIMIT",
                        &o,
                        &k
                    ]
                ),
                want
            );
            let want_rev: Vec<(String, f64)> = in_range
                .iter()
                .rev()
                .skip(off as usize)
                .take(take)
                .cloned()
                .collect();
            assert_eq!(
                pairs(
                    &mut c,
                    &[
                        "ZRANGE",
                        key,
                        &max,
                        &min,
                        "BYSCORE",
                        "REV",
                        "LIMIT",
                        &o,
                        &k,
                        "WITHSCORES"
                    ]
                ),
                want_rev
            );
            let (m, _) = &order[rng.next(n as u64) as usize];
            let rank = order.iter().position(|(x, _)| x == m).unwrap() as i64;
            assert_eq!(q::<i64>(&mut c, &["ZRANK", key, m]), rank);
            assert_eq!(q::<i64>(&mut c, &["ZREVRANK", key, m]), n - 1 - rank);
        }
        // ZRANGESTORE copies a slice, keeping scores.
        assert_eq!(
            q::<i64>(&mut c, &["ZRANGESTORE", "dst", key, "5", "14"]),
            10
        );
        assert_eq!(
            pairs(&mut c, &["ZRANGE", "dst", "0", "-1", "WITHSCORES"]),
            order[5..15].to_vec()
        );
    }
}

#[test]
fn range_option_errors() {
    let srv = TestServer::start(&[]);
    let mut s = srv.raw();
    expect_raw(&mut s, &["ZADD", "z", "1", "a", "2", "b"], ":2\r\n");
    let cases: &[(&[&str], &str)] = &[
        (
            &["ZRANGE", "z", "0", "1", "LIMIT", "0", "1"],
            "-ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX\r\n",
        ),
        (
            &["ZRANGE", "z", "-", "+", "BYLEX", "WITHSCORES"],
            "-ERR syntax error, WITHSCORES not supported in combination with BYLEX\r\n",
        ),
        (
            &["ZRANGEBYLEX", "z", "-", "+", "WITHSCORES"],
            "-ERR syntax error, WITHSCORES not supported in combination with BYLEX\r\n",
        ),
        (
            &["ZRANGE", "z", "0", "1", "REV", "REV"],
            "-ERR syntax error\r\n",
        ),
        (
            &["ZRANGE", "z", "0", "1", "BYSCORE", "BYLEX"],
            "-ERR syntax error\r\n",
        ),
        (
            &["ZRANGEBYSCORE", "z", "0", "1", "REV"],
            "-ERR syntax error\r\n",
        ),
        (
            &["ZRANGE", "z", "0", "1", "LIMIT", "0"],
            "-ERR syntax error\r\n",
        ),
        (
            &["ZRANGE", "z", "x", "1"],
            "-ERR value is not an integer or out of range\r\n",
        ),
        (
            &["ZRANGE", "z", "x", "1", "BYSCORE"],
            "-ERR min or max is not a float\r\n",
        ),
        (
            &["ZRANGE", "z", "x", "1", "BYLEX"],
            "-ERR min or max not valid string range item\r\n",
        ),
        (
            &["ZRANGESTORE", "d", "z", "0", "-1", "WITHSCORES"],
            "-ERR syntax error\r\n",
        ),
        (
            &["ZRANGE", "z", "0", "1", "LIMIT", "0", "-1"],
            "*2\r\n$1\r\na\r\n$1\r\nb\r\n",
        ),
        (
            &[
                "ZRANGE",
                "z",
                "+inf",
                "-inf",
                "BYSCORE",
                "REV",
                "LIMIT",
                "1",
                "5",
                "WITHSCORES",
            ],
            "*2\r\n$1\r\na\r\n$1\r\n1\r\n",
        ),
        (
            &["ZRANGE", "z", "-inf", "+inf", "BYSCORE", "LIMIT", "-1", "5"],
            "*0\r\n",
        ),
        (&["ZRANGE", "nokey", "0", "-1"], "*0\r\n"),
    ];
    for (args, want) in cases {
        expect_raw(&mut s, args, want);
    }
}

#[test]
fn pops_and_zmpop() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    q::<i64>(
        &mut c,
        &["ZADD", "p", "1", "a", "2", "b", "3", "c", "4", "d"],
    );
    assert_eq!(pairs(&mut c, &["ZPOPMIN", "p"]), vec![("a".into(), 1.0)]);
    assert_eq!(
        pairs(&mut c, &["ZPOPMAX", "p", "2"]),
        vec![("d".into(), 4.0), ("c".into(), 3.0)]
    );
    assert_eq!(pairs(&mut c, &["ZPOPMAX", "p", "0"]), vec![]);
    assert_eq!(
        pairs(&mut c, &["ZPOPMIN", "p", "10"]),
        vec![("b".into(), 2.0)]
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "p"]), 0);
    assert_eq!(pairs(&mut c, &["ZPOPMIN", "p"]), vec![]);

    q::<i64>(&mut c, &["ZADD", "m2", "5", "x", "6", "y", "7", "z"]);
    let v: Value = q(&mut c, &["ZMPOP", "2", "m1", "m2", "MAX", "COUNT", "2"]);
    let want = Value::Array(vec![
        Value::BulkString(b"m2".to_vec()),
        Value::Array(vec![
            Value::Array(vec![
                Value::BulkString(b"z".to_vec()),
                Value::BulkString(b"7".to_vec()),
            ]),
            Value::Array(vec![
                Value::BulkString(b"y".to_vec()),
                Value::BulkString(b"6".to_vec()),
            ]),
        ]),
    ]);
    assert_eq!(v, want);
    assert_eq!(
        q::<Value>(&mut c, &["ZMPOP", "1", "nokey", "MIN"]),
        Value::Nil
    );

    let mut s = srv.raw();
    let cases: &[(&[&str], &str)] = &[
        (
            &["ZPOPMIN", "m2", "-1"],
            "-ERR value is out of range, must be positive\r\n",
        ),
        (&["ZPOPMIN", "m2", "1", "2"], "-ERR syntax error\r\n"),
        (
            &["ZMPOP", "0", "m2", "MIN"],
            "-ERR numkeys should be greater than 0\r\n",
        ),
        (&["ZMPOP", "2", "m2", "MIN"], "-ERR syntax error\r\n"),
        (
            &["ZMPOP", "1", "m2", "MIN", "COUNT", "0"],
            "-ERR count should be greater than 0\r\n",
        ),
        (
            &["ZMPOP", "1", "m2", "MIN", "COUNT", "1", "COUNT", "1"],
            "-ERR syntax error\r\n",
        ),
        (
            &["ZMPOP", "1", "m2", "MIN"],
            "*2\r\n$2\r\nm2\r\n*1\r\n*2\r\n$1\r\nx\r\n$1\r\n5\r\n",
        ),
    ];
    for (args, want) in cases {
        expect_raw(&mut s, args, want);
    }
}

#[test]
fn blocking_pops_wake_time_out_and_do_not_block_in_multi() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    // Data present: served at once, from the first non-empty key.
    q::<i64>(&mut c, &["ZADD", "b2", "1", "a", "2", "b"]);
    let got: (String, String, f64) = q(&mut c, &["BZPOPMAX", "b1", "b2", "0"]);
    assert_eq!(got, ("b2".into(), "b".into(), 2.0));
    // Nothing there: a null after the timeout.
    let got: Option<(String, String, f64)> = q(&mut c, &["BZPOPMIN", "empty", "0.1"]);
    assert_eq!(got, None);
    let got: Value = q(&mut c, &["BZMPOP", "0.1", "1", "empty", "MIN"]);
    assert_eq!(got, Value::Nil);

    // Woken by another client's ZADD.
    let mut waiter = srv.conn();
    let handle = thread::spawn(move || {
        let got: Option<(String, String, f64)> = cmd(&["BZPOPMIN", "wake", "other", "10"])
            .query(&mut waiter)
            .expect("BZPOPMIN");
        got
    });
    // Give the waiter time to block (the result does not depend on it: if
    // the ZADD comes first, BZPOPMIN is served at once with the same pop).
    thread::sleep(Duration::from_millis(200));
    q::<i64>(&mut c, &["ZADD", "wake", "5", "m", "6", "n"]);
    assert_eq!(
        handle.join().expect("waiter"),
        Some(("wake".into(), "m".into(), 5.0))
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANGE", "wake", "0", "-1"]),
        vec!["n"]
    );

    // BZMPOP woken the same way, popping a count.
    let mut waiter = srv.conn();
    let handle = thread::spawn(move || {
        let got: Value = cmd(&["BZMPOP", "10", "2", "w1", "w2", "MAX", "COUNT", "5"])
            .query(&mut waiter)
            .expect("BZMPOP");
        got
    });
    thread::sleep(Duration::from_millis(200));
    q::<i64>(&mut c, &["ZADD", "w2", "1", "x", "2", "y"]);
    let want = Value::Array(vec![
        Value::BulkString(b"w2".to_vec()),
        Value::Array(vec![
            Value::Array(vec![
                Value::BulkString(b"y".to_vec()),
                Value::BulkString(b"2".to_vec()),
            ]),
            Value::Array(vec![
                Value::BulkString(b"x".to_vec()),
                Value::BulkString(b"1".to_vec()),
            ]),
        ]),
    ]);
    assert_eq!(handle.join().expect("waiter"), want);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "w2"]), 0);

    // Inside MULTI a blocking pop on nothing answers at once, as on timeout.
    let mut s = srv.raw();
    expect_raw(&mut s, &["MULTI"], "+OK\r\n");
    expect_raw(&mut s, &["BZPOPMIN", "empty", "0"], "+QUEUED\r\n");
    expect_raw(&mut s, &["BZMPOP", "0", "1", "empty", "MIN"], "+QUEUED\r\n");
    expect_raw(&mut s, &["EXEC"], "*2\r\n*-1\r\n*-1\r\n");

    let cases: &[(&[&str], &str)] = &[
        (
            &["BZPOPMIN", "empty", "abc"],
            "-ERR timeout is not a float or out of range\r\n",
        ),
        (&["BZPOPMIN", "empty", "-1"], "-ERR timeout is negative\r\n"),
        (
            &["BZMPOP", "abc", "0", "empty", "MIN"],
            "-ERR numkeys should be greater than 0\r\n",
        ),
        (
            &["BZMPOP", "-1", "1", "empty", "MIN"],
            "-ERR timeout is negative\r\n",
        ),
    ];
    for (args, want) in cases {
        expect_raw(&mut s, args, want);
    }
}

/// Set algebra against a model, with plain sets as inputs (score 1).
#[test]
fn set_algebra_matches_a_model() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut models: Vec<HashMap<String, f64>> = Vec::new();
    for (i, size) in [10u64, 60, 200].into_iter().enumerate() {
        let key = format!("in{i}");
        let mut model = HashMap::new();
        for _ in 0..size {
            let m = format!("m{}", rng.next(250));
            let s = rng.range(-8, 8) as f64;
            q::<i64>(&mut c, &["ZADD", &key, &s.to_string(), &m]);
            model.insert(m, s);
        }
        models.push(model);
    }
    let mut set_model = HashMap::new();
    for _ in 0..40 {
        let m = format!("m{}", rng.next(250));
        q::<i64>(&mut c, &["SADD", "plain", &m]);
        set_model.insert(m, 1.0);
    }
    models.push(set_model);
    let names = ["in0", "in1", "in2", "plain"];
    let weights = [2.0, -1.0, 0.5, 3.0];
    for round in 0..12 {
        let a = round % 4;
        let b = (round + 1 + round / 4) % 4;
        let (ma, mb) = (&models[a], &models[b]);
        let (wa, wb) = (weights[a], weights[b]);
        let agg = ["SUM", "MIN", "MAX"][round % 3];
        let fold = |x: f64, y: f64| match agg {
            "SUM" => x + y,
            "MIN" => x.min(y),
            _ => x.max(y),
        };
        let mut union = HashMap::new();
        for (m, s) in ma {
            union.insert(m.clone(), s * wa);
        }
        for (m, s) in mb {
            let v = s * wb;
            union
                .entry(m.clone())
                .and_modify(|x| *x = fold(*x, v))
                .or_insert(v);
        }
        let inter: HashMap<String, f64> = ma
            .iter()
            .filter_map(|(m, s)| mb.get(m).map(|t| (m.clone(), fold(s * wa, t * wb))))
            .collect();
        let diff: HashMap<String, f64> = ma
            .iter()
            .filter(|(m, _)| !mb.contains_key(*m))
            .map(|(m, s)| (m.clone(), *s))
            .collect();
        let (wa_s, wb_s) = (wa.to_string(), wb.to_string());
        let opts = ["WEIGHTS", &wa_s, &wb_s, "AGGREGATE", agg];
        let mut args = vec!["ZUNION", "2", names[a], names[b]];
        args.extend(opts);
        args.push("WITHSCORES");
        assert_eq!(pairs(&mut c, &args), ordered(&union), "{args:?}");
        args[0] = "ZINTER";
        assert_eq!(pairs(&mut c, &args), ordered(&inter), "{args:?}");
        assert_eq!(
            pairs(&mut c, &["ZDIFF", "2", names[a], names[b], "WITHSCORES"]),
            ordered(&diff)
        );
        let mut store = vec!["ZUNIONSTORE", "out", "2", names[a], names[b]];
        store.extend(opts);
        assert_eq!(q::<usize>(&mut c, &store), union.len());
        assert_eq!(
            pairs(&mut c, &["ZRANGE", "out", "0", "-1", "WITHSCORES"]),
            ordered(&union)
        );
        store[0] = "ZINTERSTORE";
        assert_eq!(q::<usize>(&mut c, &store), inter.len());
        assert_eq!(q::<usize>(&mut c, &["ZCARD", "out"]), inter.len());
        assert_eq!(
            q::<usize>(&mut c, &["ZDIFFSTORE", "out", "2", names[a], names[b]]),
            diff.len()
        );
        assert_eq!(
            q::<usize>(&mut c, &["ZINTERCARD", "2", names[a], names[b]]),
            inter.len()
        );
        assert_eq!(
            q::<usize>(
                &mut c,
                &["ZINTERCARD", "2", names[a], names[b], "LIMIT", "3"]
            ),
            inter.len().min(3)
        );
        // The stored encoding follows the result's size.
        let enc: String = q(&mut c, &["OBJECT", "ENCODING", "out"]);
        if diff.is_empty() {
            assert_eq!(q::<i64>(&mut c, &["EXISTS", "out"]), 0);
        } else {
            assert_eq!(
                enc,
                if diff.len() <= 128 {
                    "listpack"
                } else {
                    "skiplist"
                }
            );
        }
    }
    // inf + -inf sums to 0, as in Redis.
    q::<i64>(&mut c, &["ZADD", "i1", "inf", "x"]);
    q::<i64>(&mut c, &["ZADD", "i2", "-inf", "x"]);
    assert_eq!(
        pairs(&mut c, &["ZUNION", "2", "i1", "i2", "WITHSCORES"]),
        vec![("x".into(), 0.0)]
    );

    let mut s = srv.raw();
    let cases: &[(&[&str], &str)] = &[
        (
            &["ZUNIONSTORE", "d", "0", "in0"],
            "-ERR at least 1 input key is needed for 'zunionstore' command\r\n",
        ),
        (
            &["ZINTER", "0", "in0"],
            "-ERR at least 1 input key is needed for 'zinter' command\r\n",
        ),
        (
            &["ZINTERCARD", "0", "in0"],
            "-ERR at least 1 input key is needed for 'zintercard' command\r\n",
        ),
        (
            &["ZUNION", "x", "in0"],
            "-ERR value is not an integer or out of range\r\n",
        ),
        (&["ZUNION", "3", "in0"], "-ERR syntax error\r\n"),
        (
            &["ZUNION", "1", "in0", "WEIGHTS", "x"],
            "-ERR weight value is not a float\r\n",
        ),
        (
            &["ZUNION", "1", "in0", "AGGREGATE", "AVG"],
            "-ERR syntax error\r\n",
        ),
        (
            &["ZDIFF", "1", "in0", "WEIGHTS", "1"],
            "-ERR syntax error\r\n",
        ),
        (
            &["ZUNIONSTORE", "d", "1", "in0", "WITHSCORES"],
            "-ERR syntax error\r\n",
        ),
        (
            &["ZINTERCARD", "1", "in0", "LIMIT", "-1"],
            "-ERR LIMIT can't be negative\r\n",
        ),
        (&["SET", "str", "v"], "+OK\r\n"),
        (
            &["ZUNION", "2", "in0", "str"],
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        ),
    ];
    for (args, want) in cases {
        expect_raw(&mut s, args, want);
    }
}

#[test]
fn zrandmember_properties() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    for (key, n) in [("small", 20usize), ("big", 500)] {
        let mut model = HashMap::new();
        for i in 0..n {
            let m = format!("m{i}");
            q::<i64>(&mut c, &["ZADD", key, &i.to_string(), &m]);
            model.insert(m, i as f64);
        }
        let one: String = q(&mut c, &["ZRANDMEMBER", key]);
        assert!(model.contains_key(&one));
        for count in [1usize, 5, n / 2, n - 1] {
            let got = pairs(
                &mut c,
                &["ZRANDMEMBER", key, &count.to_string(), "WITHSCORES"],
            );
            assert_eq!(got.len(), count);
            let distinct: BTreeSet<&String> = got.iter().map(|(m, _)| m).collect();
            assert_eq!(distinct.len(), count, "distinct members");
            for (m, s) in &got {
                assert_eq!(model.get(m), Some(s));
            }
        }
        // More than the set: all of it, highest first.
        let all = pairs(&mut c, &["ZRANDMEMBER", key, "100000", "WITHSCORES"]);
        let mut want = ordered(&model);
        want.reverse();
        assert_eq!(all, want);
        // Negative: that many picks, repeats allowed.
        let picks: Vec<String> = q(&mut c, &["ZRANDMEMBER", key, "-1000"]);
        assert_eq!(picks.len(), 1000);
        assert!(picks.iter().all(|m| model.contains_key(m)));
        let seen: BTreeSet<&String> = picks.iter().collect();
        assert!(seen.len() < 1000, "1000 picks from {n} repeat some");
    }
}

#[test]
fn zscan_visits_every_member_once_with_its_score() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    for (key, n) in [("small", 50usize), ("big", 1000)] {
        let mut want = BTreeMap::new();
        for i in 0..n {
            q::<i64>(&mut c, &["ZADD", key, &format!("{i}.5"), &format!("m{i}")]);
            want.insert(format!("m{i}"), format!("{i}.5"));
        }
        let mut got = BTreeMap::new();
        let mut cursor = "0".to_string();
        let mut steps = 0;
        loop {
            let (next, items): (String, Vec<String>) =
                q(&mut c, &["ZSCAN", key, &cursor, "COUNT", "50"]);
            for p in items.chunks(2) {
                got.insert(p[0].clone(), p[1].clone());
            }
            steps += 1;
            assert!(steps < 10_000, "ZSCAN does not end");
            if next == "0" {
                break;
            }
            cursor = next;
        }
        assert_eq!(got, want, "{key}");
        let (next, items): (String, Vec<String>) =
            q(&mut c, &["ZSCAN", "small", "0", "MATCH", "m1*"]);
        assert_eq!(next, "0");
        assert_eq!(items.len(), 2 * 11);
    }
}

#[test]
fn encoding_conversion_points() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let enc = |c: &mut Connection, k: &str| q::<String>(c, &["OBJECT", "ENCODING", k]);
    for i in 0..128 {
        q::<i64>(&mut c, &["ZADD", "z", &i.to_string(), &format!("m{i}")]);
    }
    assert_eq!(enc(&mut c, "z"), "listpack");
    q::<i64>(&mut c, &["ZADD", "z", "128", "m128"]);
    assert_eq!(enc(&mut c, "z"), "skiplist");
    q::<i64>(&mut c, &["ZADD", "long", "1", &"x".repeat(64)]);
    assert_eq!(enc(&mut c, "long"), "listpack");
    q::<i64>(&mut c, &["ZADD", "long", "1", &"y".repeat(65)]);
    assert_eq!(enc(&mut c, "long"), "skiplist");
    q::<()>(&mut c, &["CONFIG", "SET", "zset-max-listpack-entries", "3"]);
    q::<i64>(&mut c, &["ZADD", "c", "1", "a", "2", "b", "3", "c"]);
    assert_eq!(enc(&mut c, "c"), "listpack");
    q::<i64>(&mut c, &["ZADD", "c", "4", "d"]);
    assert_eq!(enc(&mut c, "c"), "skiplist");
    q::<i64>(&mut c, &["ZRANGESTORE", "c2", "c", "0", "1"]);
    assert_eq!(enc(&mut c, "c2"), "listpack");
    q::<i64>(&mut c, &["ZUNIONSTORE", "c3", "1", "c"]);
    assert_eq!(enc(&mut c, "c3"), "skiplist");
}

/// Scenario 2: tie-break scores `power + (BASE - t) / BASE` come back as
/// the identical double.
#[test]
fn scenario_game_power_ranking() {
    const BASE: f64 = 317_242_022_400.0;
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let mut rng = Rng(77);
    let mut model = HashMap::new();
    for id in 0..300 {
        let power = (1_900_000 + rng.next(100_000)) as f64;
        let t = (1_680_000_000 + rng.next(20_000_000)) as f64;
        let score = power + (BASE - t) / BASE;
        let member = format!("player:{id}");
        // Sent in the shortest form that parses back to the same double.
        q::<i64>(
            &mut c,
            &["ZADD", "leaderboard:339", &format!("{score:?}"), &member],
        );
        model.insert(member, score);
    }
    let order = ordered(&model);
    let top: Vec<(String, f64)> = order.iter().rev().take(3).cloned().collect();
    let got = pairs(
        &mut c,
        &["ZRANGE", "leaderboard:339", "0", "2", "REV", "WITHSCORES"],
    );
    for ((gm, gs), (wm, ws)) in got.iter().zip(&top) {
        assert_eq!(gm, wm);
        assert_eq!(gs.to_bits(), ws.to_bits(), "{gm}");
    }
    assert_eq!(got.len(), 3);
    for (rank, (m, s)) in order.iter().rev().enumerate().step_by(37) {
        assert_eq!(
            q::<usize>(&mut c, &["ZREVRANK", "leaderboard:339", m]),
            rank
        );
        let text: String = q(&mut c, &["ZSCORE", "leaderboard:339", m]);
        assert_eq!(text.parse::<f64>().unwrap().to_bits(), s.to_bits());
    }
    let new: f64 = q(&mut c, &["ZINCRBY", "leaderboard:339", "1000", "player:4"]);
    assert_eq!(new, model["player:4"] + 1000.0);
}

/// Scenario 5: integer scores up to 2^53 stored, incremented, ranked and
/// printed back exactly.
#[test]
fn scenario_prize_campaign_packed_scores() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let end_a: u64 = 1_750_000_000 + 2_000_000;
    let mut model: HashMap<String, f64> = HashMap::new();
    let mut rng = Rng(5);
    for id in 0..200 {
        let points = rng.next(100_000_000) + if id == 0 { 899_999_999 } else { 0 };
        let t = 1_750_000_000 - rng.next(7_000_000);
        let score = points * 10_000_000 + (end_a - t);
        let member = format!("u{id}");
        q::<i64>(&mut c, &["ZADD", "camp", &score.to_string(), &member]);
        model.insert(member, score as f64);
    }
    q::<i64>(
        &mut c,
        &[
            "ZADD",
            "camp",
            "1000000001999999",
            "exact",
            "9007199254740992",
            "max",
        ],
    );
    model.insert("exact".into(), 1_000_000_001_999_999.0);
    model.insert("max".into(), 9_007_199_254_740_992.0);
    assert_eq!(
        q::<String>(&mut c, &["ZSCORE", "camp", "exact"]),
        "1000000001999999"
    );
    assert_eq!(
        q::<String>(&mut c, &["ZSCORE", "camp", "max"]),
        "9007199254740992"
    );
    assert_eq!(
        q::<String>(&mut c, &["ZINCRBY", "camp", "10000000", "exact"]),
        "1000000011999999"
    );
    *model.get_mut("exact").unwrap() += 10_000_000.0;
    let order = ordered(&model);
    let top: Vec<String> = q(&mut c, &["ZREVRANGE", "camp", "0", "-1", "WITHSCORES"]);
    for (pair, (m, s)) in top.chunks(2).zip(order.iter().rev()) {
        assert_eq!(&pair[0], m);
        assert_eq!(
            pair[1],
            format!("{}", *s as u64),
            "{m} prints as an integer"
        );
    }
    for (rank, (m, _)) in order.iter().rev().enumerate().step_by(13) {
        assert_eq!(q::<usize>(&mut c, &["ZREVRANK", "camp", m]), rank);
    }
}

/// Scenario 1: a daily board, a friends board in one ZINTER against a plain
/// set with WEIGHTS 1 0, and the key's expiry.
#[test]
fn scenario_daily_steps_friends_board() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let key = "step_rank:20250415";
    let mut steps = HashMap::new();
    let mut batch = vec!["ZADD".to_string(), key.to_string()];
    let mut rng = Rng(1);
    for id in 1000..3000 {
        let s = rng.next(30_000) as f64;
        batch.push(s.to_string());
        batch.push(format!("user:{id}"));
        steps.insert(format!("user:{id}"), s);
    }
    let refs: Vec<&str> = batch.iter().map(|s| s.as_str()).collect();
    assert_eq!(q::<i64>(&mut c, &refs), 2000);
    // The phone uploads an absolute total.
    q::<i64>(&mut c, &["ZADD", key, "15000", "user:1001"]);
    steps.insert("user:1001".into(), 15000.0);
    q::<i64>(&mut c, &["EXPIRE", key, "259200"]);
    let mut friends = HashMap::new();
    for _ in 0..150 {
        let id = format!("user:{}", 900 + rng.next(2200));
        q::<i64>(&mut c, &["SADD", "friends:1001", &id]);
        if let Some(s) = steps.get(&id) {
            friends.insert(id, *s);
        }
    }
    let got = pairs(
        &mut c,
        &[
            "ZINTER",
            "2",
            key,
            "friends:1001",
            "WEIGHTS",
            "1",
            "0",
            "WITHSCORES",
        ],
    );
    assert_eq!(got, ordered(&friends));
    let top = pairs(&mut c, &["ZREVRANGE", key, "0", "9", "WITHSCORES"]);
    let want: Vec<(String, f64)> = ordered(&steps).into_iter().rev().take(10).collect();
    assert_eq!(top, want);
    assert!(q::<i64>(&mut c, &["TTL", key]) > 0);
}

/// Scenario 3: likes go up and down by one; the top 100 stays exact.
#[test]
fn scenario_likes_board_top_100() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let mut model: HashMap<String, f64> = HashMap::new();
    let mut rng = Rng(3);
    let mut pipe = redis::pipe();
    for _ in 0..5000 {
        let article = format!("article:{}", rng.next(400));
        let delta = if rng.next(5) == 0 { -1.0 } else { 1.0 };
        pipe.cmd("ZINCRBY")
            .arg("rank:likes")
            .arg(delta)
            .arg(&article);
        *model.entry(article).or_insert(0.0) += delta;
    }
    let _: Vec<f64> = pipe.query(&mut c).expect("pipeline");
    let want: Vec<(String, f64)> = ordered(&model).into_iter().rev().take(100).collect();
    assert_eq!(
        pairs(
            &mut c,
            &["ZREVRANGE", "rank:likes", "0", "99", "WITHSCORES"]
        ),
        want
    );
}

#[test]
fn wrong_type_everywhere() {
    let srv = TestServer::start(&[]);
    let mut s = srv.raw();
    expect_raw(&mut s, &["SET", "str", "v"], "+OK\r\n");
    let wrong = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
    let commands: &[&[&str]] = &[
        &["ZINCRBY", "str", "1", "a"],
        &["ZSCORE", "str", "a"],
        &["ZMSCORE", "str", "a"],
        &["ZCARD", "str"],
        &["ZCOUNT", "str", "0", "1"],
        &["ZLEXCOUNT", "str", "-", "+"],
        &["ZRANK", "str", "a"],
        &["ZREVRANK", "str", "a"],
        &["ZRANGE", "str", "0", "1"],
        &["ZREVRANGEBYSCORE", "str", "1", "0"],
        &["ZRANGEBYLEX", "str", "-", "+"],
        &["ZRANGESTORE", "d", "str", "0", "1"],
        &["ZREM", "str", "a"],
        &["ZREMRANGEBYRANK", "str", "0", "1"],
        &["ZREMRANGEBYSCORE", "str", "0", "1"],
        &["ZREMRANGEBYLEX", "str", "-", "+"],
        &["ZPOPMIN", "str"],
        &["ZPOPMAX", "str", "2"],
        &["ZMPOP", "1", "str", "MIN"],
        &["BZPOPMIN", "str", "0"],
        &["BZMPOP", "0", "1", "str", "MAX"],
        &["ZRANDMEMBER", "str"],
        &["ZSCAN", "str", "0"],
        &["ZINTERCARD", "1", "str"],
        &["ZDIFFSTORE", "d", "1", "str"],
    ];
    for args in commands {
        expect_raw(&mut s, args, wrong);
    }
}

#[test]
fn resp3_reply_shapes() {
    let srv = TestServer::start(&[]);
    let mut s = srv.raw();
    s.write_all(&encode(&["HELLO", "3"])).unwrap();
    let hello = read_at_least(&mut s, 1);
    assert!(hello.starts_with(b"%"), "HELLO 3 answers a map");
    let cases: &[(&[&str], &str)] = &[
        (&["ZADD", "z", "1", "a", "2.5", "b", "inf", "c"], ":3\r\n"),
        (&["ZSCORE", "z", "b"], ",2.5\r\n"),
        (&["ZSCORE", "z", "nosuch"], "_\r\n"),
        (&["ZMSCORE", "z", "c", "x"], "*2\r\n,inf\r\n_\r\n"),
        (&["ZINCRBY", "z", "0.1", "a"], ",1.1000000000000001\r\n"),
        (&["ZADD", "z", "INCR", "NX", "1", "a"], "_\r\n"),
        (
            &["ZRANGE", "z", "0", "1", "WITHSCORES"],
            "*2\r\n*2\r\n$1\r\na\r\n,1.1000000000000001\r\n*2\r\n$1\r\nb\r\n,2.5\r\n",
        ),
        (&["ZRANGE", "z", "0", "1"], "*2\r\n$1\r\na\r\n$1\r\nb\r\n"),
        (
            &["ZRANGEBYSCORE", "z", "2", "+inf", "WITHSCORES"],
            "*2\r\n*2\r\n$1\r\nb\r\n,2.5\r\n*2\r\n$1\r\nc\r\n,inf\r\n",
        ),
        (
            &["ZRANDMEMBER", "z", "5", "WITHSCORES"],
            "*3\r\n*2\r\n$1\r\nc\r\n,inf\r\n*2\r\n$1\r\nb\r\n,2.5\r\n*2\r\n$1\r\na\r\n,1.1000000000000001\r\n",
        ),
        (
            &["ZSCAN", "z", "0", "MATCH", "b"],
            "*2\r\n$1\r\n0\r\n*2\r\n$1\r\nb\r\n$3\r\n2.5\r\n",
        ),
        (
            &["ZUNION", "1", "z", "WITHSCORES"],
            "*3\r\n*2\r\n$1\r\na\r\n,1.1000000000000001\r\n*2\r\n$1\r\nb\r\n,2.5\r\n*2\r\n$1\r\nc\r\n,inf\r\n",
        ),
        (&["ZPOPMAX", "z"], "*2\r\n$1\r\nc\r\n,inf\r\n"),
        (&["ZPOPMAX", "z", "1"], "*1\r\n*2\r\n$1\r\nb\r\n,2.5\r\n"),
        (&["ZADD", "z", "7", "d"], ":1\r\n"),
        (
            &["BZPOPMIN", "z", "0"],
            "*3\r\n$1\r\nz\r\n$1\r\na\r\n,1.1000000000000001\r\n",
        ),
        (
            &["ZMPOP", "1", "z", "MIN"],
            "*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\nd\r\n,7\r\n",
        ),
        (&["ZMPOP", "1", "z", "MIN"], "_\r\n"),
        (&["ZPOPMIN", "z"], "*0\r\n"),
    ];
    for (args, want) in cases {
        expect_raw(&mut s, args, want);
    }
}
