//! Pipelined commands share their shard locks (`commands::LockCache`):
//! these tests run long pipelines on a hot key while other connections run
//! what takes locks differently (multi-key commands, EXEC, scripts,
//! keyspace-wide commands, blocking pops woken by the pipeline) and check
//! that nothing deadlocks and no update is lost.

mod common;

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use common::{info, TestServer};

/// Pipelines sent by the writer, and commands in each.
const BATCHES: usize = 40;
const PER_BATCH: usize = 100;
/// Transactions, scripts and other commands run by the other connections.
const OTHERS: usize = 200;

fn run_bounded(jobs: Vec<Box<dyn FnOnce() + Send>>) {
    let (tx, rx) = mpsc::channel();
    let n = jobs.len();
    for job in jobs {
        let tx = tx.clone();
        thread::spawn(move || {
            job();
            let _ = tx.send(());
        });
    }
    for _ in 0..n {
        rx.recv_timeout(Duration::from_secs(60))
            .expect("a connection did not finish: deadlock or lost reply");
    }
}

#[test]
fn pipelines_on_a_hot_key_alongside_transactions_scripts_and_blocking_pops() {
    let server = TestServer::start(&[]);
    let mut jobs: Vec<Box<dyn FnOnce() + Send>> = Vec::new();

    // The writer: pipelines of ZINCRBY on one board and INCR on a counter,
    // with a multi-key MSET (other shards) and a ZADD to the queue a
    // blocked client waits on, in every batch.
    let mut c = server.conn();
    jobs.push(Box::new(move || {
        for b in 0..BATCHES {
            let mut p = redis::pipe();
            for i in 0..PER_BATCH {
                match i % 10 {
                    3 => p.cmd("MSET").arg("a").arg(b).arg("b").arg(i).ignore(),
                    7 => p
                        .cmd("ZADD")
                        .arg("queue")
                        .arg(i)
                        .arg(format!("{b}:{i}"))
                        .ignore(),
                    _ => p.cmd("ZINCRBY").arg("board").arg(1).arg("m:1").ignore(),
                };
                p.cmd("INCR").arg("hits").ignore();
            }
            let () = p.query(&mut c).unwrap();
        }
    }));

    // Transactions and scripts on the same keys.
    let mut c = server.conn();
    jobs.push(Box::new(move || {
        for _ in 0..OTHERS {
            let (): () = redis::pipe()
                .atomic()
                .cmd("ZINCRBY")
                .arg("board")
                .arg(1)
                .arg("m:1")
                .ignore()
                .cmd("INCR")
                .arg("hits")
                .ignore()
                .query(&mut c)
                .unwrap();
            let _: i64 = redis::cmd("EVAL")
                .arg("redis.call('ZINCRBY', KEYS[1], 1, 'm:1') return redis.call('INCR', KEYS[2])")
                .arg(2)
                .arg("board")
                .arg("hits")
                .query(&mut c)
                .unwrap();
            let _: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut c).unwrap();
        }
    }));

    // A client blocked on the queue, woken by the writer's ZADDs.
    let mut c = server.conn();
    jobs.push(Box::new(move || {
        let mut popped = 0;
        while popped < 50 {
            let r: Option<(String, String, String)> = redis::cmd("BZPOPMIN")
                .arg("queue")
                .arg(5)
                .query(&mut c)
                .unwrap();
            assert!(r.is_some(), "BZPOPMIN timed out although the writer adds");
            popped += 1;
        }
    }));

    // Readers pipelining on the hot key.
    let mut c = server.conn();
    jobs.push(Box::new(move || {
        for _ in 0..BATCHES {
            let mut p = redis::pipe();
            for _ in 0..PER_BATCH {
                p.cmd("ZSCORE").arg("board").arg("m:1");
            }
            let scores: Vec<Option<f64>> = p.query(&mut c).unwrap();
            assert!(scores.windows(2).all(|w| w[0] <= w[1]), "a score went back");
        }
    }));

    run_bounded(jobs);

    let mut c = server.conn();
    let writer_incrs = BATCHES * PER_BATCH;
    let writer_zincr = BATCHES * PER_BATCH * 8 / 10;
    let hits: usize = redis::cmd("GET").arg("hits").query(&mut c).unwrap();
    assert_eq!(hits, writer_incrs + 2 * OTHERS);
    let score: f64 = redis::cmd("ZSCORE")
        .arg("board")
        .arg("m:1")
        .query(&mut c)
        .unwrap();
    assert_eq!(score as usize, writer_zincr + 2 * OTHERS);
    let queued: usize = redis::cmd("ZCARD").arg("queue").query(&mut c).unwrap();
    assert_eq!(queued, BATCHES * PER_BATCH / 10 - 50);
}

/// Pipelined ZRANK / ZREVRANK calls on one board are answered together
/// (`commands::run`): the replies, the command statistics and the keyspace
/// hits must be those of the same calls sent one at a time.
#[test]
fn pipelined_ranks_match_single_calls_and_count_alike() {
    let server = TestServer::start(&[]);
    let mut c = server.conn();
    let mut p = redis::pipe();
    for i in 0..1000 {
        p.cmd("ZADD")
            .arg("board")
            .arg(i % 37)
            .arg(format!("m{i}"))
            .ignore();
    }
    p.query::<()>(&mut c).expect("load");

    // Calls in runs of 1 to 20, with absent members, a second key and a
    // command between runs.
    let mut calls: Vec<(&str, &str, String)> = Vec::new();
    let mut i = 0;
    for run in 1..=20 {
        let name = if run % 2 == 0 { "ZRANK" } else { "ZREVRANK" };
        let key = if run % 7 == 0 { "other" } else { "board" };
        for _ in 0..run {
            i += 1;
            let member = if i % 9 == 0 {
                format!("x{i}")
            } else {
                format!("m{}", i * 13 % 1000)
            };
            calls.push((name, key, member));
        }
    }
    let single: Vec<Option<i64>> = calls
        .iter()
        .map(|(n, k, m)| redis::cmd(n).arg(k).arg(m).query(&mut c).expect("single"))
        .collect();

    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut c)
        .expect("RESETSTAT");
    let mut p = redis::pipe();
    let mut previous = "";
    for (n, k, m) in &calls {
        if *n != previous {
            p.cmd("PING").ignore();
            previous = n;
        }
        p.cmd(n).arg(k).arg(m);
    }
    let piped: Vec<Option<i64>> = p.query(&mut c).expect("pipeline");
    assert_eq!(piped, single);

    let ranks = calls.iter().filter(|(n, _, _)| *n == "ZRANK").count() as u64;
    let revranks = calls.len() as u64 - ranks;
    let commands = info(&mut c, "commandstats");
    let stat = |cmd: &str| -> u64 {
        commands[&format!("cmdstat_{cmd}")]
            .strip_prefix("calls=")
            .and_then(|v| v.split(',').next()?.parse().ok())
            .expect("calls=N")
    };
    assert_eq!(stat("zrank"), ranks);
    assert_eq!(stat("zrevrank"), revranks);
    let on_board = calls.iter().filter(|(_, k, _)| *k == "board").count() as u64;
    let stats = info(&mut c, "stats");
    let number = |field: &str| -> u64 { stats[field].parse().expect("a number") };
    assert_eq!(number("keyspace_hits"), on_board);
    assert_eq!(number("keyspace_misses"), calls.len() as u64 - on_board);
}
