//! The guarantees that must hold while several worker threads write to one
//! hot board at once (issue 20): replies in each connection's order, MULTI /
//! EXEC and scripts atomic against the board, and an AOF that replays to
//! exactly the live data. The servers run with `--worker-threads 4` (more
//! workers than this machine may have cores, so threads are preempted while
//! holding or waiting for the board's shard).
mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::TestServer;

const WORKERS: &[&str] = &["--worker-threads", "4"];

/// A connection whose reads give up after 30 s, so that a server that
/// stopped answering fails the test instead of hanging it.
fn conn(srv: &TestServer) -> redis::Connection {
    let c = srv.conn();
    c.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("read timeout");
    c
}

/// Background clients flooding the board `hot` with pipelined ZINCRBYs
/// until `stop` is set, so that the connections under test contend for
/// its shard.
fn flood(srv: &TestServer, n: usize, stop: &Arc<AtomicBool>) -> Vec<thread::JoinHandle<()>> {
    (0..n)
        .map(|t| {
            let mut c = conn(srv);
            let stop = stop.clone();
            thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let mut p = redis::pipe();
                    for j in 0..16 {
                        p.cmd("ZINCRBY")
                            .arg("hot")
                            .arg(1)
                            .arg(format!("f:{t}:{}", (i + j) % 500))
                            .ignore();
                    }
                    let _: () = p.query(&mut c).expect("flood pipeline");
                    i += 16;
                }
            })
        })
        .collect()
}

fn stop_all(stop: &AtomicBool, handles: Vec<thread::JoinHandle<()>>) {
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().expect("flood thread");
    }
}

/// Each connection pipelines, per step, an INCR of its own counter, a
/// ZINCRBY of its own member on the hot board and a `ZADD GT CH` of a
/// second member with an increasing score: every reply must be the one
/// running the connection's commands in its order gives (a ZADD GT run out
/// of order would answer 0, an INCR or ZINCRBY a wrong count).
#[test]
fn replies_keep_each_connections_order_on_a_hot_board() {
    order_case(WORKERS);
}

/// The same with two workers, as on a 2-core machine: each connection is
/// served by one of the two runtimes (`server::workers`), both writing the
/// board.
#[test]
fn replies_keep_each_connections_order_with_two_workers() {
    order_case(&["--worker-threads", "2"]);
}

fn order_case(workers: &[&str]) {
    let srv = TestServer::start(workers);
    let stop = Arc::new(AtomicBool::new(false));
    let flooders = flood(&srv, 2, &stop);
    const CONNS: usize = 8;
    const STEPS: i64 = 400;
    const DEPTH: i64 = 20;
    let writers: Vec<_> = (0..CONNS)
        .map(|t| {
            let mut c = conn(&srv);
            thread::spawn(move || {
                let mut step = 0i64;
                while step < STEPS {
                    let mut p = redis::pipe();
                    for k in 0..DEPTH {
                        let s = step + k;
                        p.cmd("INCR").arg(format!("ctr:{t}"));
                        p.cmd("ZINCRBY").arg("hot").arg(1).arg(format!("own:{t}"));
                        p.cmd("ZADD")
                            .arg("hot")
                            .arg("GT")
                            .arg("CH")
                            .arg(s + 1)
                            .arg(format!("gt:{t}"));
                    }
                    let got: Vec<(i64, f64, i64)> = p.query(&mut c).expect("pipeline");
                    for (k, (incr, score, changed)) in got.into_iter().enumerate() {
                        let n = step + k as i64 + 1;
                        assert_eq!(incr, n, "INCR ctr:{t} at step {n}");
                        assert_eq!(score, n as f64, "ZINCRBY own:{t} at step {n}");
                        assert_eq!(changed, 1, "ZADD GT gt:{t} at step {n}");
                    }
                    step += DEPTH;
                }
            })
        })
        .collect();
    for w in writers {
        w.join().expect("a connection saw a reply out of order");
    }
    stop_all(&stop, flooders);
    let mut c = conn(&srv);
    for t in 0..CONNS {
        let s: f64 = redis::cmd("ZSCORE")
            .arg("hot")
            .arg(format!("gt:{t}"))
            .query(&mut c)
            .unwrap();
        assert_eq!(s, STEPS as f64);
    }
}

/// What one connection does to another reaches it whichever worker each
/// runs on (with two workers, consecutive connections are placed on
/// different runtimes): a push wakes a blocked BLPOP, a PUBLISH reaches
/// every subscriber, CLIENT KILL closes a connection, CLIENT PAUSE holds
/// writers until CLIENT UNPAUSE.
#[test]
fn connections_on_different_workers_reach_each_other() {
    let srv = TestServer::start(&["--worker-threads", "2"]);
    const N: usize = 4;
    // Blocking pops, each woken by a push from every other connection.
    let blocked: Vec<_> = (0..N)
        .map(|i| {
            let mut c = conn(&srv);
            thread::spawn(move || {
                let got: (String, String) = redis::cmd("BLPOP")
                    .arg(format!("q:{i}"))
                    .arg(20)
                    .query(&mut c)
                    .expect("BLPOP");
                got
            })
        })
        .collect();
    let mut pushers: Vec<_> = (0..N).map(|_| conn(&srv)).collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let n: i64 = redis::cmd("INFO")
            .arg("clients")
            .query::<String>(&mut pushers[0])
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("blocked_clients:"))
                    .and_then(|v| v.trim().parse().ok())
            })
            .unwrap_or(0);
        if n == N as i64 {
            break;
        }
        assert!(Instant::now() < deadline, "{n} blocked, not {N}");
        thread::sleep(Duration::from_millis(10));
    }
    for (i, c) in pushers.iter_mut().enumerate() {
        let _: i64 = redis::cmd("RPUSH")
            .arg(format!("q:{}", (i + 1) % N))
            .arg(format!("from:{i}"))
            .query(c)
            .expect("RPUSH");
    }
    for (i, b) in blocked.into_iter().enumerate() {
        let got = b.join().expect("BLPOP thread");
        assert_eq!(got, (format!("q:{i}"), format!("from:{}", (i + N - 1) % N)));
    }
    // Subscribers on both workers.
    const SUBSCRIBED: &[u8] = b"*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n";
    const MESSAGE: &[u8] = b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n";
    let mut subs: Vec<_> = (0..N)
        .map(|_| {
            let mut s = srv.raw();
            s.set_read_timeout(Some(Duration::from_secs(10)))
                .expect("read timeout");
            assert_eq!(
                common::roundtrip(&mut s, b"SUBSCRIBE news\r\n", SUBSCRIBED.len()),
                SUBSCRIBED
            );
            s
        })
        .collect();
    let n: i64 = redis::cmd("PUBLISH")
        .arg("news")
        .arg("hello")
        .query(&mut pushers[1])
        .expect("PUBLISH");
    assert_eq!(n, N as i64);
    for s in &mut subs {
        assert_eq!(common::read_at_least(s, MESSAGE.len()), MESSAGE);
    }
    // CLIENT KILL of connections on either worker.
    let mut victims: Vec<_> = (0..2).map(|_| conn(&srv)).collect();
    for v in &mut victims {
        let id: i64 = redis::cmd("CLIENT").arg("ID").query(v).expect("CLIENT ID");
        let killed: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("ID")
            .arg(id)
            .query(&mut pushers[0])
            .expect("CLIENT KILL");
        assert_eq!(killed, 1);
        assert!(
            redis::cmd("PING").query::<String>(v).is_err(),
            "killed client answered"
        );
    }
    // CLIENT PAUSE WRITE from one worker holds writers on both.
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(20000)
        .arg("WRITE")
        .query(&mut pushers[0])
        .expect("CLIENT PAUSE");
    let held: Vec<_> = pushers
        .drain(2..)
        .map(|mut c| {
            thread::spawn(move || {
                let t = Instant::now();
                let _: i64 = redis::cmd("INCR")
                    .arg("paused")
                    .query(&mut c)
                    .expect("INCR");
                t.elapsed()
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(300));
    let _: () = redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query(&mut pushers[1])
        .expect("CLIENT UNPAUSE");
    for h in held {
        let waited = h.join().expect("paused writer");
        assert!(waited >= Duration::from_millis(250), "not held: {waited:?}");
    }
    let n: i64 = redis::cmd("GET")
        .arg("paused")
        .query(&mut pushers[0])
        .expect("GET");
    assert_eq!(n, 2);
}

/// Writers move two members of the hot board together, in MULTI / EXEC
/// and in EVAL, while others flood it; a watcher reading both scores in one
/// command never sees them apart.
#[test]
fn transactions_and_scripts_are_atomic_against_a_hot_board() {
    let srv = TestServer::start(WORKERS);
    let stop = Arc::new(AtomicBool::new(false));
    let flooders = flood(&srv, 2, &stop);
    let script = "redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2]) \
                  redis.call('ZADD', KEYS[1], ARGV[1], ARGV[3]) return 1";
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let mut c = conn(&srv);
            thread::spawn(move || {
                let (a, b) = (format!("pair:{w}:a"), format!("pair:{w}:b"));
                for i in 1..=300i64 {
                    if w % 2 == 0 {
                        let _: () = redis::pipe()
                            .atomic()
                            .cmd("ZADD")
                            .arg("hot")
                            .arg(i)
                            .arg(&a)
                            .ignore()
                            .cmd("ZADD")
                            .arg("hot")
                            .arg(i)
                            .arg(&b)
                            .ignore()
                            .query(&mut c)
                            .expect("MULTI/EXEC");
                    } else {
                        let _: i64 = redis::cmd("EVAL")
                            .arg(script)
                            .arg(1)
                            .arg("hot")
                            .arg(i)
                            .arg(&a)
                            .arg(&b)
                            .query(&mut c)
                            .expect("EVAL");
                    }
                }
            })
        })
        .collect();
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let mut c = conn(&srv);
        let done = done.clone();
        thread::spawn(move || {
            let mut looks = 0u64;
            while !done.load(Ordering::Relaxed) || looks < 100 {
                for w in 0..4 {
                    let got = pair_scores(&mut c, w);
                    assert_eq!(got[0], got[1], "pair {w} seen half-moved");
                }
                looks += 1;
            }
        })
    };
    for w in writers {
        w.join().expect("writer");
    }
    done.store(true, Ordering::Relaxed);
    watcher.join().expect("the watcher saw half a transaction");
    stop_all(&stop, flooders);
    let mut c = conn(&srv);
    for w in 0..4 {
        assert_eq!(pair_scores(&mut c, w), vec![Some(300.0), Some(300.0)]);
    }
}

/// Everything the live server holds: the whole board with scores, the
/// counters, and DEBUG DIGEST over the keyspace.
fn snapshot(c: &mut redis::Connection) -> (Vec<(String, f64)>, Vec<Option<i64>>, String) {
    let board: Vec<(String, f64)> = redis::cmd("ZRANGE")
        .arg("hot")
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(c)
        .unwrap();
    let ctrs: Vec<Option<i64>> = redis::cmd("MGET")
        .arg((0..4).map(|t| format!("ctr:{t}")).collect::<Vec<_>>())
        .query(c)
        .unwrap();
    let digest: String = redis::cmd("DEBUG").arg("DIGEST").query(c).unwrap();
    (board, ctrs, digest)
}

/// Concurrent pipelined writes, transactions and scripts on one hot board
/// under `appendonly yes`: after a restart the AOF replays to the same
/// board, counters and digest as the live server held.
#[test]
fn aof_replays_to_the_live_data_after_concurrent_writes() {
    let dir = common::temp_dir("concurrency-aof");
    let d = dir.to_str().unwrap().to_string();
    let args = [
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
        "--enable-debug-command",
        "yes",
        "--dir",
        &d,
        "--worker-threads",
        "4",
    ];
    let mut srv = TestServer::start_in(dir.clone(), &args);
    let stop = Arc::new(AtomicBool::new(false));
    let flooders = flood(&srv, 2, &stop);
    let script = "local s = redis.call('ZINCRBY', KEYS[1], ARGV[1], ARGV[2]) \
                  redis.call('ZADD', KEYS[1], s, ARGV[3]) return 1";
    let deadline = Instant::now() + Duration::from_secs(2);
    let writers: Vec<_> = (0..4)
        .map(|t| {
            let mut c = conn(&srv);
            thread::spawn(move || {
                let mut i = 0i64;
                while Instant::now() < deadline || i < 50 {
                    let mut p = redis::pipe();
                    p.cmd("INCR").arg(format!("ctr:{t}")).ignore();
                    p.cmd("ZADD")
                        .arg("hot")
                        .arg(i * 7 % 101)
                        .arg(format!("w:{t}:{}", i % 37))
                        .ignore();
                    p.cmd("ZINCRBY")
                        .arg("hot")
                        .arg(0.5)
                        .arg(format!("w:{t}:{}", (i + 3) % 37))
                        .ignore();
                    if i % 5 == 0 {
                        p.cmd("ZREM")
                            .arg("hot")
                            .arg(format!("w:{t}:{}", (i + 11) % 37))
                            .ignore();
                    }
                    let _: () = p.query(&mut c).expect("pipeline");
                    let _: () = redis::pipe()
                        .atomic()
                        .cmd("ZINCRBY")
                        .arg("hot")
                        .arg(1)
                        .arg(format!("tx:{t}"))
                        .ignore()
                        .cmd("INCR")
                        .arg(format!("ctr:{t}"))
                        .ignore()
                        .query(&mut c)
                        .expect("MULTI/EXEC");
                    let _: i64 = redis::cmd("EVAL")
                        .arg(script)
                        .arg(1)
                        .arg("hot")
                        .arg(2)
                        .arg(format!("sc:{t}"))
                        .arg(format!("sc:{t}:copy"))
                        .query(&mut c)
                        .expect("EVAL");
                    i += 1;
                }
            })
        })
        .collect();
    for w in writers {
        w.join().expect("writer");
    }
    stop_all(&stop, flooders);
    let live = snapshot(&mut conn(&srv));
    assert!(
        live.0.len() > 100,
        "the board holds {} members",
        live.0.len()
    );
    srv.terminate();
    let mut again = TestServer::start_in(dir.clone(), &args);
    let replayed = snapshot(&mut conn(&again));
    assert_eq!(replayed.0, live.0, "the board after replay");
    assert_eq!(replayed.1, live.1, "the counters after replay");
    assert_eq!(replayed.2, live.2, "DEBUG DIGEST after replay");
    again.terminate();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The scores of writer `w`'s two members on the hot board, which every
/// transaction and script moves together.
fn pair_scores(c: &mut redis::Connection, w: usize) -> Vec<Option<f64>> {
    redis::cmd("ZMSCORE")
        .arg("hot")
        .arg(format!("pair:{w}:a"))
        .arg(format!("pair:{w}:b"))
        .query(c)
        .expect("ZMSCORE")
}

/// Two workers writing one member of one board in pipelined runs (16
/// ZINCRBYs on one key are handled together, `commands::run`), while
/// MULTI / EXEC and EVAL add to the same member from other connections:
/// no increment is lost (the final score is the sum of all), each
/// connection's replies come in its order (its own member counts 1, 2, 3,
/// ...; the shared one only grows), and a transaction's or script's two
/// increments are never split by another connection's.
#[test]
fn two_workers_pipelining_one_member_lose_no_increment() {
    let srv = TestServer::start(&["--worker-threads", "2"]);
    const PIPELINERS: usize = 4;
    const ROUNDS: i64 = 60;
    const DEPTH: i64 = 32;
    const ATOMIC_ROUNDS: i64 = 150;
    let pipeliners: Vec<_> = (0..PIPELINERS)
        .map(|t| {
            let mut c = conn(&srv);
            thread::spawn(move || {
                let mut last_shared = 0.0f64;
                for round in 0..ROUNDS {
                    let mut p = redis::pipe();
                    for _ in 0..DEPTH {
                        p.cmd("ZINCRBY").arg("hot").arg(1).arg("shared");
                        p.cmd("ZINCRBY").arg("hot").arg(1).arg(format!("own:{t}"));
                    }
                    let got: Vec<(f64, f64)> = p.query(&mut c).expect("pipeline");
                    for (k, (shared, own)) in got.into_iter().enumerate() {
                        let n = round * DEPTH + k as i64 + 1;
                        assert_eq!(own, n as f64, "ZINCRBY own:{t} at call {n}");
                        assert!(
                            shared > last_shared,
                            "shared went {last_shared} -> {shared}"
                        );
                        last_shared = shared;
                    }
                }
            })
        })
        .collect();
    let script = "local a = redis.call('ZINCRBY', KEYS[1], 1, 'shared') \
                  local b = redis.call('ZINCRBY', KEYS[1], 1, 'shared') return {a, b}";
    let atomics: Vec<_> = (0..2)
        .map(|w| {
            let mut c = conn(&srv);
            thread::spawn(move || {
                for _ in 0..ATOMIC_ROUNDS {
                    let (a, b): (f64, f64) = if w == 0 {
                        redis::pipe()
                            .atomic()
                            .cmd("ZINCRBY")
                            .arg("hot")
                            .arg(1)
                            .arg("shared")
                            .cmd("ZINCRBY")
                            .arg("hot")
                            .arg(1)
                            .arg("shared")
                            .query(&mut c)
                            .expect("MULTI/EXEC")
                    } else {
                        let v: Vec<String> = redis::cmd("EVAL")
                            .arg(script)
                            .arg(1)
                            .arg("hot")
                            .query(&mut c)
                            .expect("EVAL");
                        let num = |s: &str| s.parse::<f64>().expect("a score");
                        (num(&v[0]), num(&v[1]))
                    };
                    assert_eq!(b, a + 1.0, "a transaction's increments split");
                }
            })
        })
        .collect();
    for h in pipeliners.into_iter().chain(atomics) {
        h.join()
            .expect("a connection saw a lost or reordered increment");
    }
    let mut c = conn(&srv);
    let total = PIPELINERS as i64 * ROUNDS * DEPTH + 2 * 2 * ATOMIC_ROUNDS;
    let s: f64 = redis::cmd("ZSCORE")
        .arg("hot")
        .arg("shared")
        .query(&mut c)
        .unwrap();
    assert_eq!(s, total as f64);
    for t in 0..PIPELINERS {
        let own: f64 = redis::cmd("ZSCORE")
            .arg("hot")
            .arg(format!("own:{t}"))
            .query(&mut c)
            .unwrap();
        assert_eq!(own, (ROUNDS * DEPTH) as f64);
    }
}

/// INFO stats `rostrum_hot_shard_guests` and `rostrum_hot_shard_moves`.
fn hot_stat(c: &mut redis::Connection, field: &str) -> u64 {
    common::info(c, "stats")
        .get(field)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{field} in INFO stats"))
}

fn hot_guests(c: &mut redis::Connection) -> u64 {
    hot_stat(c, "rostrum_hot_shard_guests")
}

/// Connections pipelining to one board from two workers have their
/// batches run on one worker (`server::workers`: a connection that keeps
/// taking the board's shard over from the other worker sends its batches
/// to the shard's home; one placed on the home moves off it and sends
/// them back), and such a connection is the same client: its
/// id, name, database and WATCH stay, its replies keep their order, it
/// can still block and be woken. Lone commands (`-P 1`) to the same board
/// run where they are.
#[test]
fn pipelining_writers_of_one_board_run_on_one_worker_as_the_same_clients() {
    let srv = TestServer::start(&["--worker-threads", "2"]);
    let mut main = conn(&srv);
    // Lone commands: no moves, however often the board changes workers.
    let lone: Vec<_> = (0..4)
        .map(|t| {
            let mut c = conn(&srv);
            thread::spawn(move || {
                for n in 1..=400 {
                    let got: f64 = redis::cmd("ZINCRBY")
                        .arg("lone")
                        .arg(1)
                        .arg(format!("m:{t}"))
                        .query(&mut c)
                        .expect("ZINCRBY");
                    assert_eq!(got, n as f64);
                }
            })
        })
        .collect();
    for h in lone {
        h.join().expect("lone writer");
    }
    assert_eq!(hot_guests(&mut main), 0, "lone commands sent away");
    assert_eq!(hot_stat(&mut main, "rostrum_hot_shard_moves"), 0);

    const CONNS: usize = 6;
    const DEPTH: i64 = 16;
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..CONNS)
        .map(|t| {
            let mut c = conn(&srv);
            let stop = stop.clone();
            thread::spawn(move || {
                let name = format!("w{t}");
                let _: () = redis::cmd("SELECT").arg(5).query(&mut c).unwrap();
                let _: () = redis::cmd("CLIENT")
                    .arg("SETNAME")
                    .arg(&name)
                    .query(&mut c)
                    .unwrap();
                let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut c).unwrap();
                let _: () = redis::cmd("WATCH")
                    .arg(format!("watched:{t}"))
                    .query(&mut c)
                    .unwrap();
                let mut n = 0i64;
                // Bounded: 30 s at most, or until told to stop.
                let deadline = Instant::now() + Duration::from_secs(30);
                while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                    let mut p = redis::pipe();
                    for _ in 0..DEPTH {
                        p.cmd("ZINCRBY").arg("hot").arg(1).arg(format!("own:{t}"));
                    }
                    let got: Vec<f64> = p.query(&mut c).expect("pipeline");
                    assert_eq!(got.len(), DEPTH as usize);
                    for (k, score) in got.into_iter().enumerate() {
                        assert_eq!(score, (n + k as i64 + 1) as f64, "own:{t} out of order");
                    }
                    n += DEPTH;
                }
                let id_now: i64 = redis::cmd("CLIENT").arg("ID").query(&mut c).unwrap();
                assert_eq!(id_now, id, "the same client id");
                let name_now: String = redis::cmd("CLIENT").arg("GETNAME").query(&mut c).unwrap();
                assert_eq!(name_now, name);
                let score: f64 = redis::cmd("ZSCORE")
                    .arg("hot")
                    .arg(format!("own:{t}"))
                    .query(&mut c)
                    .unwrap();
                assert_eq!(score, n as f64, "its writes went to database 5");
                // The main connection has changed the watched key since.
                let exec: Option<Vec<i64>> = redis::pipe()
                    .atomic()
                    .cmd("INCR")
                    .arg(format!("ctr:{t}"))
                    .query(&mut c)
                    .unwrap();
                assert_eq!(exec, None, "WATCH kept with batches run elsewhere");
                // A transaction and a script run where the board is, whole.
                let mut p = redis::pipe();
                p.atomic();
                for _ in 0..DEPTH {
                    p.cmd("ZINCRBY").arg("hot").arg(1).arg(format!("own:{t}"));
                }
                let got: Vec<f64> = p.query(&mut c).expect("MULTI/EXEC");
                let want: Vec<f64> = (1..=DEPTH).map(|k| (n + k) as f64).collect();
                assert_eq!(got, want, "own:{t} in a transaction");
                let script = "local s for i = 1, tonumber(ARGV[2]) do \
                              s = redis.call('ZINCRBY', KEYS[1], 1, ARGV[1]) end return s";
                let got: String = redis::cmd("EVAL")
                    .arg(script)
                    .arg(1)
                    .arg("hot")
                    .arg(format!("own:{t}"))
                    .arg(DEPTH)
                    .query(&mut c)
                    .expect("EVAL");
                assert_eq!(got, (n + 2 * DEPTH).to_string(), "own:{t} in a script");
                n += 2 * DEPTH;
                // A value big enough to arrive over several reads.
                let big = format!("{t}").repeat(1 << 20);
                let _: () = redis::cmd("SET")
                    .arg(format!("big:{t}"))
                    .arg(&big)
                    .query(&mut c)
                    .unwrap();
                let back: String = redis::cmd("GET")
                    .arg(format!("big:{t}"))
                    .query(&mut c)
                    .unwrap();
                assert!(back == big, "a big value set from elsewhere");
                let popped: Option<(String, String)> = redis::cmd("BLPOP")
                    .arg(format!("q:{t}"))
                    .arg(20)
                    .query(&mut c)
                    .unwrap();
                assert_eq!(popped, Some((format!("q:{t}"), "v".to_string())));
                n
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(25);
    while hot_guests(&mut main) == 0 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
    }
    // A little longer, so that batches run on the board's worker.
    thread::sleep(Duration::from_millis(300));
    let _: () = redis::cmd("SELECT").arg(5).query(&mut main).unwrap();
    for t in 0..CONNS {
        let _: () = redis::cmd("SET")
            .arg(format!("watched:{t}"))
            .arg(1)
            .query(&mut main)
            .unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    // Every writer blocks on its list; wake them all.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let blocked: i64 = common::info(&mut main, "clients")
            .get("blocked_clients")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if blocked == CONNS as i64 || Instant::now() > deadline {
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    // Each listed once, blocked in database 5.
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut main).unwrap();
    for t in 0..CONNS {
        let line = list
            .lines()
            .filter(|l| l.contains(&format!(" name=w{t} ")))
            .collect::<Vec<_>>();
        assert_eq!(line.len(), 1, "{list}");
        assert!(
            line[0].contains(" db=5 ") && line[0].contains(" flags=b "),
            "{list}"
        );
    }
    for t in 0..CONNS {
        let _: () = redis::cmd("RPUSH")
            .arg(format!("q:{t}"))
            .arg("v")
            .query(&mut main)
            .unwrap();
    }
    let total: i64 = writers
        .into_iter()
        .map(|h| h.join().expect("a connection run elsewhere misbehaved"))
        .sum();
    let guests = hot_guests(&mut main);
    assert!(
        guests > 0,
        "no connection's batches ran on the board's worker"
    );
    assert!(guests <= CONNS as u64, "{guests} guests: each counted once");
    let moves = hot_stat(&mut main, "rostrum_hot_shard_moves");
    assert!(moves <= guests, "{moves} moves: only guests move, once");
    let _: () = redis::cmd("SELECT").arg(0).query(&mut main).unwrap();
    let in_db0: i64 = redis::cmd("EXISTS").arg("hot").query(&mut main).unwrap();
    assert_eq!(in_db0, 0);
    let _: () = redis::cmd("SELECT").arg(5).query(&mut main).unwrap();
    let card: Vec<f64> = (0..CONNS)
        .map(|t| {
            redis::cmd("ZSCORE")
                .arg("hot")
                .arg(format!("own:{t}"))
                .query(&mut main)
                .unwrap()
        })
        .collect();
    assert_eq!(card.iter().sum::<f64>(), total as f64);
}

/// Connections whose batches run on another worker can still be killed,
/// or break the protocol, mid-load: each is closed as it would be on its
/// own worker, its confirmed writes stay, and the other writers of the
/// board go on unharmed (their every increment counted).
#[test]
fn clients_whose_batches_run_elsewhere_can_be_killed_or_break_the_protocol() {
    let srv = TestServer::start(&["--worker-threads", "2"]);
    let mut main = conn(&srv);
    const CONNS: usize = 6;
    const DEPTH: i64 = 16;
    let go_on = Arc::new(AtomicBool::new(true));
    let break_now = Arc::new(AtomicBool::new(false));
    let (ids_tx, ids_rx) = std::sync::mpsc::channel();
    let writers: Vec<_> = (0..CONNS)
        .map(|t| {
            let mut c = conn(&srv);
            let (go_on, break_now, ids_tx) = (go_on.clone(), break_now.clone(), ids_tx.clone());
            thread::spawn(move || {
                let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut c).unwrap();
                ids_tx.send((t, id)).unwrap();
                let mut n = 0i64;
                let deadline = Instant::now() + Duration::from_secs(30);
                while go_on.load(Ordering::Relaxed) && Instant::now() < deadline {
                    if t % 3 == 1 && break_now.load(Ordering::Relaxed) {
                        let got =
                            redis::ConnectionLike::req_packed_command(&mut c, b"*1\r\n$abc\r\n");
                        // The error line, as an error or as an error value.
                        let line = format!("{got:?}");
                        assert!(line.contains("Protocol error"), "{line}");
                        let after: redis::RedisResult<String> = redis::cmd("PING").query(&mut c);
                        assert!(after.is_err(), "still open after a protocol error");
                        return (t, n, true);
                    }
                    let mut p = redis::pipe();
                    for _ in 0..DEPTH {
                        p.cmd("ZINCRBY").arg("hot").arg(1).arg(format!("own:{t}"));
                    }
                    match p.query::<Vec<f64>>(&mut c) {
                        Ok(got) => {
                            for (k, score) in got.into_iter().enumerate() {
                                assert_eq!(
                                    score,
                                    (n + k as i64 + 1) as f64,
                                    "own:{t} out of order"
                                );
                            }
                            n += DEPTH;
                        }
                        // Killed (the writers t % 3 == 0 only).
                        Err(_) if t % 3 == 0 => return (t, n, true),
                        Err(e) => panic!("writer {t}: {e}"),
                    }
                }
                (t, n, false)
            })
        })
        .collect();
    let ids: Vec<(usize, i64)> = (0..CONNS).map(|_| ids_rx.recv().unwrap()).collect();
    let deadline = Instant::now() + Duration::from_secs(25);
    // Every writer ends up sending its batches to the board's home (those
    // placed on it move off it first).
    while hot_guests(&mut main) < CONNS as u64 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        hot_guests(&mut main),
        CONNS as u64,
        "writers whose batches ran elsewhere"
    );
    for (t, id) in &ids {
        if t % 3 == 0 {
            let killed: i64 = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("ID")
                .arg(id)
                .query(&mut main)
                .unwrap();
            assert_eq!(killed, 1);
        }
    }
    break_now.store(true, Ordering::Relaxed);
    thread::sleep(Duration::from_millis(300));
    go_on.store(false, Ordering::Relaxed);
    for h in writers {
        let (t, n, ended) = h.join().expect("a writer misbehaved");
        assert_eq!(ended, t % 3 != 2, "writer {t} ended as it should");
        let score: f64 = redis::cmd("ZSCORE")
            .arg("hot")
            .arg(format!("own:{t}"))
            .query(&mut main)
            .unwrap();
        if t % 3 == 0 {
            // Its last batch may have run before the kill was seen.
            assert!(
                score >= n as f64 && score <= (n + DEPTH) as f64,
                "{t}: {score} {n}"
            );
        } else {
            assert_eq!(score, n as f64, "writer {t}'s confirmed increments");
        }
    }
    let pong: String = redis::cmd("PING").query(&mut main).unwrap();
    assert_eq!(pong, "PONG");
}
