//! The `leaderboard` key type and the LB.* commands through the redis crate
//! (and a raw socket for RESP3 shapes) against a spawned Rostrum: every
//! command and option, error lines, WRONGTYPE both ways, generic key
//! commands on a board, and boards surviving an AOF restart and a rewrite.
mod common;

use std::io::Write;
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{cmd, err, q, read_at_least, temp_dir, TestServer};
use redis::Connection;

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

/// A board of four: carl 110, bob 100 (at 3), alice 100 (at 5), dan 50.
fn board(c: &mut Connection, key: &str, ranking: &str) {
    assert_eq!(q(c, &["LB.CREATE", key, "RANKING", ranking]), "OK");
    q(
        c,
        &["LB.SUBMIT", key, "alice", "100", "AT", "5", "META", "hi"],
    );
    q(c, &["LB.SUBMIT", key, "bob", "100", "AT", "3"]);
    q(c, &["LB.SUBMIT", key, "carl", "110", "AT", "7"]);
    q(
        c,
        &["LB.SUBMIT", key, "dan", "50", "SUBSCORE", "2", "AT", "9"],
    );
}

#[test]
fn submit_incr_and_policies() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    // A first submit creates a default board: DESC, BEST.
    assert_eq!(q(&mut c, &["LB.SUBMIT", "b", "a", "10"]), "[10 1 1]");
    assert_eq!(q(&mut c, &["LB.SUBMIT", "b", "a", "5"]), "[10 1 0]");
    assert_eq!(q(&mut c, &["LB.SUBMIT", "b", "a", "20"]), "[20 1 1]");
    assert_eq!(q(&mut c, &["LB.SUBMIT", "b", "z", "30"]), "[30 1 1]");
    assert_eq!(q(&mut c, &["LB.INCR", "b", "a", "15"]), "[35 1 1]");
    assert_eq!(q(&mut c, &["LB.INCR", "b", "a", "-10"]), "[25 2 1]");
    assert_eq!(q(&mut c, &["TYPE", "b"]), "leaderboard");
    // POLICY SET replaces, INCR adds; ORDER ASC ranks low scores first.
    q(&mut c, &["LB.CREATE", "s", "POLICY", "SET", "ORDER", "ASC"]);
    q(&mut c, &["LB.SUBMIT", "s", "a", "10"]);
    assert_eq!(q(&mut c, &["LB.SUBMIT", "s", "a", "50"]), "[50 1 1]");
    assert_eq!(q(&mut c, &["LB.SUBMIT", "s", "b", "20"]), "[20 1 1]");
    q(&mut c, &["LB.CREATE", "i", "POLICY", "INCR"]);
    q(&mut c, &["LB.SUBMIT", "i", "a", "10"]);
    assert_eq!(q(&mut c, &["LB.SUBMIT", "i", "a", "5"]), "[15 1 1]");
    // Overflow changes nothing.
    let max = i64::MAX.to_string();
    assert!(err(&mut c, &["LB.INCR", "i", "a", &max]).contains("overflow"));
    assert_eq!(q(&mut c, &["LB.SCORE", "i", "a"]), "15");
    // TIEBREAK LATEST: who reached the score last ranks higher.
    q(&mut c, &["LB.CREATE", "t", "TIEBREAK", "LATEST"]);
    q(&mut c, &["LB.SUBMIT", "t", "a", "1", "AT", "1"]);
    q(&mut c, &["LB.SUBMIT", "t", "b", "1", "AT", "2"]);
    assert_eq!(q(&mut c, &["LB.TOP", "t", "2"]), "[[1 b 1] [2 a 1]]");
    // CAPACITY: a submit below the kept entries is answered, not stored.
    q(&mut c, &["LB.CREATE", "cap", "CAPACITY", "2"]);
    q(&mut c, &["LB.SUBMIT", "cap", "a", "10"]);
    q(&mut c, &["LB.SUBMIT", "cap", "b", "20"]);
    assert_eq!(q(&mut c, &["LB.SUBMIT", "cap", "c", "5"]), "[5 nil 0]");
    assert_eq!(q(&mut c, &["LB.SUBMIT", "cap", "d", "30"]), "[30 1 1]");
    assert_eq!(q(&mut c, &["LB.TOP", "cap", "5"]), "[[1 d 30] [2 b 20]]");
    // Metadata and subscores.
    q(
        &mut c,
        &["LB.SUBMIT", "m", "a", "1", "SUBSCORE", "5", "META", "x"],
    );
    assert_eq!(
        q(&mut c, &["LB.SUBMIT", "m", "b", "1", "SUBSCORE", "6"]),
        "[1 1 1]"
    );
    let long = "x".repeat(4097);
    assert!(err(&mut c, &["LB.SUBMIT", "m", "c", "1", "META", &long]).contains("too long"));
    assert_eq!(q(&mut c, &["LB.GET", "m", "c"]), "nil");
    // lb-max-meta-bytes applies at once, to every board.
    assert_eq!(
        q(&mut c, &["CONFIG", "SET", "lb-max-meta-bytes", "2"]),
        "OK"
    );
    assert_eq!(
        q(&mut c, &["CONFIG", "GET", "lb-max-meta-bytes"]),
        "[lb-max-meta-bytes 2]"
    );
    assert!(err(&mut c, &["LB.INCR", "m", "a", "1", "META", "xyz"]).contains("too long"));
    assert_eq!(
        q(&mut c, &["LB.INCR", "m", "a", "1", "META", "xy"]),
        "[2 1 1]"
    );
}

#[test]
fn create_and_errors() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let opts = [
        "LB.CREATE",
        "b",
        "order",
        "asc",
        "POLICY",
        "BEST",
        "TIEBREAK",
        "EARLIEST",
        "RANKING",
        "DENSE",
        "CAPACITY",
        "10",
    ];
    assert_eq!(q(&mut c, &opts), "OK");
    assert!(err(&mut c, &["LB.CREATE", "b"]).contains("'b' already exists"));
    q(&mut c, &["SET", "str", "x"]);
    assert!(err(&mut c, &["LB.CREATE", "str"]).contains("'str' already exists"));
    assert!(err(&mut c, &["LB.CREATE", "n", "FOO", "1"]).contains("unknown option 'FOO'"));
    assert!(err(&mut c, &["LB.CREATE", "n", "ORDER", "UP"]).contains("invalid value 'UP'"));
    assert!(err(&mut c, &["LB.CREATE", "n", "ORDER"]).contains("syntax error"));
    assert!(err(&mut c, &["LB.SUBMIT", "b", "a", "1.5"]).contains("score is not a 64-bit integer"));
    assert!(err(&mut c, &["LB.SUBMIT", "b", "a", "1", "FOO", "2"]).contains("unknown option 'FOO'"));
    assert!(err(&mut c, &["LB.INCR", "b", "a", "1", "SUBSCORE", "2"]).contains("unknown option"));
    assert!(err(&mut c, &["LB.SUBMIT", "b", "a"]).contains("wrong number of arguments"));
    assert!(err(&mut c, &["LB.MSUBMIT", "b", "a", "1", "c"]).contains("wrong number of arguments"));
    assert!(err(&mut c, &["LB.TOP", "b", "x"]).contains("not an integer"));
    assert!(err(&mut c, &["LB.TOP", "b", "1", "WITHFOO"]).contains("unknown option 'WITHFOO'"));
    assert!(err(&mut c, &["LB.COUNT", "b", "1"]).contains("syntax error"));
    // WRONGTYPE both ways.
    for args in [
        &["LB.SUBMIT", "str", "a", "1"][..],
        &["LB.TOP", "str", "1"],
        &["LB.GET", "str", "a"],
        &["LB.REM", "str", "a"],
        &["LB.INFO", "str"],
        &["LB.FRIENDS", "b", "str"],
        &["ZADD", "b", "1", "a"],
        &["ZSCORE", "b", "a"],
        &["SADD", "b", "a"],
        &["GET", "b"],
        &["SORT", "b"],
        &["LPUSH", "b", "x"],
        &["HSET", "b", "f", "v"],
        &["ZRANGE", "b", "0", "-1"],
    ] {
        assert!(err(&mut c, args).contains("WRONGTYPE"), "{args:?}");
    }
    // Nothing changed: no board was created by a failed write.
    assert_eq!(q(&mut c, &["EXISTS", "n"]), "0");
    assert_eq!(q(&mut c, &["LB.COUNT", "b"]), "0");
}

#[test]
fn reads_and_ranges() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    board(&mut c, "b", "ORDINAL");
    let top = "[[1 carl 110] [2 bob 100] [3 alice 100] [4 dan 50]]";
    assert_eq!(q(&mut c, &["LB.TOP", "b", "10"]), top);
    assert_eq!(
        q(
            &mut c,
            &[
                "LB.TOP",
                "b",
                "1",
                "OFFSET",
                "2",
                "WITHSUBSCORE",
                "WITHTIME",
                "WITHMETA"
            ]
        ),
        "[[3 alice 100 0 5 hi]]"
    );
    assert_eq!(
        q(&mut c, &["LB.TOP", "b", "1", "WITHMETA"]),
        "[[1 carl 110 nil]]"
    );
    assert_eq!(
        q(&mut c, &["LB.TOP", "b", "PERCENT", "50"]),
        "[[1 carl 110] [2 bob 100]]"
    );
    assert_eq!(
        q(&mut c, &["LB.TOP", "b", "PERCENT", "1"]),
        "[[1 carl 110]]"
    );
    assert_eq!(q(&mut c, &["LB.TOP", "nokey", "3"]), "[]");
    assert_eq!(
        q(&mut c, &["LB.RANGE", "b", "2", "3"]),
        "[[2 bob 100] [3 alice 100]]"
    );
    assert_eq!(
        q(&mut c, &["LB.RANGE", "b", "-1", "-1", "WITHSUBSCORE"]),
        "[[4 dan 50 2]]"
    );
    assert_eq!(q(&mut c, &["LB.RANGE", "b", "3", "2"]), "[]");
    assert_eq!(
        q(&mut c, &["LB.AROUND", "b", "bob", "3"]),
        "[[1 carl 110] [2 bob 100] [3 alice 100]]"
    );
    assert_eq!(
        q(&mut c, &["LB.AROUND", "b", "dan", "2"]),
        "[[3 alice 100] [4 dan 50]]"
    );
    assert_eq!(q(&mut c, &["LB.AROUND", "b", "nobody", "2"]), "[]");
    assert_eq!(q(&mut c, &["LB.GET", "b", "alice"]), "[3 alice 100 0 5 hi]");
    assert_eq!(q(&mut c, &["LB.GET", "b", "dan"]), "[4 dan 50 2 9 nil]");
    assert_eq!(q(&mut c, &["LB.GET", "b", "nobody"]), "nil");
    assert_eq!(q(&mut c, &["LB.SCORE", "b", "carl"]), "110");
    assert_eq!(q(&mut c, &["LB.SCORE", "b", "nobody"]), "nil");
    assert_eq!(q(&mut c, &["LB.RANK", "b", "alice"]), "3");
    assert_eq!(q(&mut c, &["LB.RANK", "nokey", "alice"]), "nil");
    assert_eq!(
        q(&mut c, &["LB.MRANK", "b", "alice", "x", "carl"]),
        "[3 nil 1]"
    );
    assert_eq!(q(&mut c, &["LB.PERCENT", "b", "carl"]), "25");
    assert_eq!(q(&mut c, &["LB.PERCENT", "b", "x"]), "nil");
    assert_eq!(q(&mut c, &["LB.COUNT", "b"]), "4");
    assert_eq!(q(&mut c, &["LB.COUNT", "b", "60", "110"]), "3");
    assert_eq!(q(&mut c, &["LB.COUNT", "nokey"]), "0");
    let info = q(&mut c, &["LB.INFO", "b"]);
    let want =
        "[order DESC policy BEST tiebreak EARLIEST ranking ORDINAL capacity 0 size 4 memory ";
    assert!(info.starts_with(want), "{info}");
    let mem: i64 = cmd(&["MEMORY", "USAGE", "b"])
        .query(&mut c)
        .expect("MEMORY USAGE");
    assert!(mem > 0, "{mem}");
    assert_eq!(q(&mut c, &["LB.INFO", "nokey"]), "nil");
    assert_eq!(q(&mut c, &["LB.REM", "b", "dan", "carl", "nobody"]), "2");
    assert_eq!(q(&mut c, &["LB.REM", "b", "bob", "alice"]), "2");
    // An emptied board stays, with its options.
    assert_eq!(q(&mut c, &["TYPE", "b"]), "leaderboard");
    assert_eq!(q(&mut c, &["LB.COUNT", "b"]), "0");
    assert_eq!(q(&mut c, &["LB.REM", "nokey", "a"]), "0");
}

#[test]
fn rank_styles_among_and_friends() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    board(&mut c, "comp", "COMPETITION");
    board(&mut c, "dense", "DENSE");
    q(&mut c, &["LB.SUBMIT", "comp", "eve", "40"]);
    q(&mut c, &["LB.SUBMIT", "dense", "eve", "40"]);
    assert_eq!(
        q(&mut c, &["LB.TOP", "comp", "10"]),
        "[[1 carl 110] [2 bob 100] [2 alice 100] [4 dan 50] [5 eve 40]]"
    );
    assert_eq!(
        q(&mut c, &["LB.TOP", "dense", "10"]),
        "[[1 carl 110] [2 bob 100] [2 alice 100] [3 dan 50] [4 eve 40]]"
    );
    assert_eq!(q(&mut c, &["LB.RANK", "comp", "dan"]), "4");
    assert_eq!(q(&mut c, &["LB.RANK", "dense", "dan"]), "3");
    assert_eq!(
        q(
            &mut c,
            &[
                "LB.AMONG",
                "comp",
                "eve",
                "alice",
                "bob",
                "nobody",
                "WITHGLOBAL"
            ]
        ),
        "[[1 bob 100 2] [1 alice 100 2] [3 eve 40 5]]"
    );
    let among = q(
        &mut c,
        &["LB.AMONG", "comp", "eve", "dan", "WITHTIME", "WITHGLOBAL"],
    );
    assert!(
        among.starts_with("[[1 dan 50 9 4] [2 eve 40 ") && among.ends_with(" 5]]"),
        "{among}"
    );
    q(&mut c, &["SADD", "friends", "alice", "dan", "stranger"]);
    assert_eq!(
        q(
            &mut c,
            &[
                "LB.FRIENDS",
                "comp",
                "friends",
                "INCLUDE",
                "eve",
                "WITHGLOBAL"
            ]
        ),
        "[[1 alice 100 2] [2 dan 50 4] [3 eve 40 5]]"
    );
    assert_eq!(
        q(&mut c, &["LB.FRIENDS", "comp", "friends", "WITHMETA"]),
        "[[1 alice 100 hi] [2 dan 50 nil]]"
    );
    assert_eq!(
        q(&mut c, &["LB.FRIENDS", "comp", "nokey", "INCLUDE", "eve"]),
        "[[1 eve 40]]"
    );
    assert_eq!(q(&mut c, &["LB.FRIENDS", "nokey", "friends"]), "[]");
    assert!(err(&mut c, &["LB.FRIENDS", "comp", "friends", "BOGUS"]).contains("unknown option"));
}

/// Pipelined LB.RANK calls on one key are answered together
/// (`commands::run`): the same replies as one at a time, for every
/// ranking, an absent member, an absent key, a board whose period ended
/// (its new period is empty) and a key of another type.
#[test]
fn pipelined_ranks_answer_as_single_calls() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    board(&mut c, "ord", "ORDINAL");
    board(&mut c, "comp", "COMPETITION");
    board(&mut c, "dense", "DENSE");
    q(&mut c, &["SET", "str", "x"]);
    q(&mut c, &["LB.CREATE", "ended", "RESET", "EVERY", "50"]);
    q(&mut c, &["LB.SUBMIT", "ended", "dan", "1"]);
    std::thread::sleep(Duration::from_millis(120));
    let members = ["dan", "alice", "nobody", "carl", "bob", "dan"];
    let mut s = srv.raw();
    for key in ["ord", "comp", "dense", "missing", "ended", "str"] {
        let want: String = members
            .iter()
            .map(|m| match key {
                "str" => {
                    assert!(err(&mut c, &["LB.RANK", key, m]).contains("WRONGTYPE"));
                    "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
                        .to_string()
                }
                _ => match q(&mut c, &["LB.RANK", key, m]).as_str() {
                    "nil" => "$-1\r\n".to_string(),
                    n => format!(":{n}\r\n"),
                },
            })
            .collect();
        let mut batch = Vec::new();
        for m in members {
            batch.extend(encode(&["LB.RANK", key, m]));
        }
        s.write_all(&batch).expect("write");
        let got = read_at_least(&mut s, want.len());
        assert_eq!(String::from_utf8_lossy(&got), want, "{key}");
    }
}

/// The reply that ends [`send_all`]'s commands.
const END: &str = "$5\r\n__end\r\n";

/// Writes `bytes` (commands) and an `ECHO __end` to `s` at once, and
/// returns the replies before the echo's.
fn send_all(s: &mut TcpStream, mut bytes: Vec<u8>) -> Vec<u8> {
    bytes.extend(encode(&["ECHO", "__end"]));
    s.write_all(&bytes).expect("write");
    let mut got = read_until(s, END.as_bytes());
    got.truncate(got.len().saturating_sub(END.len()));
    got
}

/// Reads from `s` until what arrived ends with `suffix` (or 5 s pass).
fn read_until(s: &mut TcpStream, suffix: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    while !out.ends_with(suffix) {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(k) => out.extend_from_slice(&buf[..k]),
        }
    }
    out
}

/// The LB.SUBMIT calls of `pipelined_submits_apply_as_single_calls` for
/// one board (its key left out): members from a small pool (so each comes
/// back), scores distinct (a tie is broken by the time of the call, and a
/// run's calls share one),
/// and mixed in: scores that are not integers, huge ones (an INCR board
/// overflows), and SUBSCORE, META and ID options (ids repeat).
fn submit_calls(seed: u64, n: usize) -> Vec<Vec<String>> {
    let mut x = seed;
    (0..n)
        .map(|i| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = x >> 33;
            let member = format!("m{}", r % 11);
            let score = match i % 23 {
                5 => "12x".to_string(),
                17 => (9_223_372_036_854_775_000 + i as i64).to_string(),
                _ => ((r % 100_000) as i64 * 1000 + i as i64 - 50_000_000).to_string(),
            };
            let mut call = vec![member, score];
            match i % 19 {
                3 => call.extend(["SUBSCORE".into(), (r % 7).to_string()]),
                7 => call.extend(["META".into(), format!("lvl{}", r % 3)]),
                11 => call.extend(["ID".into(), format!("e{}", r % 4)]),
                _ => {}
            }
            call
        })
        .collect()
}

/// Pipelined LB.SUBMITs on one board are applied in runs
/// (`commands::run`): replies, the final board, the counts of changes,
/// calls and errors, and WATCH are those of the same calls sent one at a
/// time, on boards of every policy and a CAPACITY board, with errors
/// (bad scores, an overflow, a key of another type) and calls with
/// options among them; and with the AOF on the calls log and replay to
/// the same board.
#[test]
fn pipelined_submits_apply_as_single_calls() {
    pipelined_writes_apply_as_single_calls("LB.SUBMIT");
}

/// `pipelined_submits_apply_as_single_calls` for LB.INCR.
#[test]
fn pipelined_incrs_apply_as_single_calls() {
    pipelined_writes_apply_as_single_calls("LB.INCR");
}

/// The calls of `submit_calls` as `command`, pipelined and one at a time.
fn pipelined_writes_apply_as_single_calls(command: &str) {
    let boards: [(&str, &[&str]); 5] = [
        ("best", &[]),
        ("set", &["POLICY", "SET", "ORDER", "ASC"]),
        ("incr", &["POLICY", "INCR", "RANKING", "DENSE"]),
        ("cap", &["CAPACITY", "5", "RANKING", "COMPETITION"]),
        ("str", &[]),
    ];
    let calls: Vec<Vec<Vec<String>>> = (0..boards.len())
        .map(|b| submit_calls(b as u64 + 1, 150))
        .collect();
    // Changes, calls, failed calls and errors counted (not times).
    let stats = |c: &mut Connection| {
        let i = common::info(c, "all");
        let get = |k: &str| i.get(k).cloned().unwrap_or_default();
        let calls: Vec<String> = get(&format!("cmdstat_{}", command.to_lowercase()))
            .split(',')
            .filter(|f| !f.starts_with("usec"))
            .map(String::from)
            .collect();
        [
            get("rdb_changes_since_last_save"),
            calls.join(","),
            get("errorstat_ERR"),
            get("errorstat_WRONGTYPE"),
        ]
    };
    let dir = DataDir(temp_dir("lb-run-aof"));
    let srv = TestServer::start(&[]);
    let mut aof_srv = TestServer::start_with_aof(&dir.0);
    let mut c = srv.conn();
    let mut ac = aof_srv.conn();
    for (prefix, aof) in [("one", false), ("run", false), ("aof", true)] {
        let conn = if aof { &mut ac } else { &mut c };
        for (name, opts) in boards {
            let key = format!("{prefix}-{name}");
            match name {
                "best" => {} // made by its first submit
                "str" => assert_eq!(q(conn, &["SET", &key, "x"]), "OK"),
                _ => {
                    let mut args = vec!["LB.CREATE", &key];
                    args.extend_from_slice(opts);
                    assert_eq!(q(conn, &args), "OK");
                }
            }
        }
    }
    let submit = |key: &str, call: &[String]| {
        let mut args = vec![command, key];
        args.extend(call.iter().map(|a| a.as_str()));
        encode(&args)
    };
    let zero = |c: &mut Connection| {
        assert_eq!(q(c, &["CONFIG", "RESETSTAT"]), "OK");
        let _: String = cmd(&["SAVE"]).query(c).expect("SAVE");
    };

    // One at a time: each call waits for its reply.
    zero(&mut c);
    let mut s = srv.raw();
    let mut want: Vec<Vec<u8>> = Vec::new();
    for (b, (name, _)) in boards.iter().enumerate() {
        let key = format!("one-{name}");
        let mut replies = Vec::new();
        for call in &calls[b] {
            replies.extend(send_all(&mut s, submit(&key, call)));
        }
        want.push(replies);
    }
    let one_stats = stats(&mut c);

    // Pipelined: each board's calls in one write, so that they run in
    // runs of 16 (broken where a call has options).
    zero(&mut c);
    let (mut watcher, mut unchanged) = (srv.conn(), srv.conn());
    assert_eq!(q(&mut watcher, &["WATCH", "run-best"]), "OK");
    assert_eq!(q(&mut watcher, &["MULTI"]), "OK");
    for (b, (name, _)) in boards.iter().enumerate() {
        let key = format!("run-{name}");
        let got = send_all(
            &mut s,
            calls[b].iter().flat_map(|c| submit(&key, c)).collect(),
        );
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want[b]),
            "{name}"
        );
    }
    assert_eq!(stats(&mut c), one_stats);
    assert_eq!(q(&mut watcher, &["PING"]), "QUEUED");
    assert_eq!(
        q(&mut watcher, &["EXEC"]),
        "nil",
        "the runs touched the key"
    );
    // A run that changes nothing (lower scores on a BEST board, or
    // increments of 0) does not.
    assert_eq!(q(&mut unchanged, &["WATCH", "run-best"]), "OK");
    let none = if command == "LB.INCR" {
        "0"
    } else {
        "-99999999999"
    };
    let got = send_all(
        &mut s,
        (0..11)
            .flat_map(|m| encode(&[command, "run-best", &format!("m{m}"), none]))
            .collect(),
    );
    assert!(got.ends_with(b":0\r\n"), "{got:?}");
    assert_eq!(q(&mut unchanged, &["MULTI"]), "OK");
    assert_eq!(q(&mut unchanged, &["PING"]), "QUEUED");
    assert_eq!(q(&mut unchanged, &["EXEC"]), "[PONG]");

    let top = |c: &mut Connection, key: &str, time: bool| {
        let mut args = vec!["LB.TOP", key, "100", "WITHSUBSCORE", "WITHMETA"];
        if time {
            args.push("WITHTIME");
        }
        q(c, &args)
    };
    for (name, _) in boards.iter().filter(|(n, _)| *n != "str") {
        let one = top(&mut c, &format!("one-{name}"), false);
        assert_eq!(top(&mut c, &format!("run-{name}"), false), one, "{name}");
    }

    // With the AOF on, the same pipelines give the same replies and
    // boards, and a restart replays them to the same boards, times and all.
    let mut s = aof_srv.raw();
    for (b, (name, _)) in boards.iter().enumerate() {
        let key = format!("aof-{name}");
        let got = send_all(
            &mut s,
            calls[b].iter().flat_map(|c| submit(&key, c)).collect(),
        );
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want[b]),
            "aof {name}"
        );
    }
    let names: Vec<&str> = boards
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| *n != "str")
        .collect();
    let before: Vec<String> = names
        .iter()
        .map(|n| top(&mut ac, &format!("aof-{n}"), true))
        .collect();
    for (n, b) in names.iter().zip(&before) {
        let one = top(&mut c, &format!("one-{n}"), false);
        assert_eq!(top(&mut ac, &format!("aof-{n}"), false), one, "{n}");
        assert!(!b.is_empty());
    }
    drop((s, ac));
    aof_srv.terminate();
    let aof_srv = TestServer::start_with_aof(&dir.0);
    let mut ac = aof_srv.conn();
    let after: Vec<String> = names
        .iter()
        .map(|n| top(&mut ac, &format!("aof-{n}"), true))
        .collect();
    assert_eq!(after, before);
}

#[test]
fn event_ids_apply_a_write_once() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    assert_eq!(
        q(&mut c, &["LB.INCR", "votes", "a", "1", "ID", "e1"]),
        "[1 1 1]"
    );
    assert_eq!(
        q(&mut c, &["LB.INCR", "votes", "a", "1", "ID", "e1"]),
        "[1 1 0]"
    );
    assert_eq!(
        q(&mut c, &["LB.INCR", "votes", "a", "1", "ID", "e2"]),
        "[2 1 1]"
    );
    // An id is per board, and shared by LB.SUBMIT and LB.INCR.
    assert_eq!(
        q(&mut c, &["LB.SUBMIT", "votes", "b", "5", "ID", "e2"]),
        "[5 nil 0]"
    );
    assert_eq!(
        q(&mut c, &["LB.INCR", "other", "a", "1", "ID", "e1"]),
        "[1 1 1]"
    );
    // The window keeps the last lb-dedup-window ids.
    assert_eq!(q(&mut c, &["CONFIG", "SET", "lb-dedup-window", "1"]), "OK");
    assert_eq!(
        q(&mut c, &["LB.INCR", "votes", "a", "1", "ID", "e3"]),
        "[3 1 1]"
    );
    assert_eq!(
        q(&mut c, &["LB.INCR", "votes", "a", "1", "ID", "e2"]),
        "[4 1 1]"
    );
    assert_eq!(
        q(&mut c, &["LB.INCR", "votes", "a", "1", "ID", "e2"]),
        "[4 1 0]"
    );
    assert_eq!(q(&mut c, &["LB.SEEN", "votes", "x", "y", "y"]), "2");
    assert_eq!(
        q(&mut c, &["LB.INCR", "votes", "a", "1", "ID", "x"]),
        "[5 1 1]"
    );
    assert!(err(&mut c, &["LB.SEEN", "nokey", "x"]).contains("no such key"));
}

#[test]
fn msubmit_is_atomic() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    q(&mut c, &["LB.CREATE", "all", "POLICY", "INCR"]);
    assert_eq!(
        q(
            &mut c,
            &[
                "LB.MSUBMIT",
                "day",
                "a",
                "5",
                "week",
                "a",
                "5",
                "all",
                "a",
                "5"
            ]
        ),
        "[[5 1 1] [5 1 1] [5 1 1]]"
    );
    assert_eq!(
        q(&mut c, &["LB.MSUBMIT", "day", "a", "3", "all", "a", "3"]),
        "[[5 1 0] [8 1 1]]"
    );
    // One bad triple changes no board.
    let max = i64::MAX.to_string();
    q(&mut c, &["SET", "str", "x"]);
    assert!(err(&mut c, &["LB.MSUBMIT", "day", "b", "1", "str", "a", "1"]).contains("WRONGTYPE"));
    assert!(err(&mut c, &["LB.MSUBMIT", "day", "b", "1", "all", "a", &max]).contains("overflow"));
    assert!(err(&mut c, &["LB.MSUBMIT", "day", "b", "1", "all", "a", "x"]).contains("64-bit"));
    // A member named twice on an INCR board: the second triple would
    // overflow what the first leaves (each alone would not).
    let half = (i64::MAX / 2 + 1).to_string();
    let both = [
        "LB.MSUBMIT",
        "day",
        "b",
        "1",
        "all",
        "a",
        &half,
        "all",
        "a",
        &half,
    ];
    assert!(err(&mut c, &both).contains("overflow"));
    assert_eq!(q(&mut c, &["LB.SCORE", "day", "b"]), "nil");
    assert_eq!(q(&mut c, &["LB.SCORE", "all", "a"]), "8");
    // ... and one that comes back below the limit passes.
    let back = [
        "LB.MSUBMIT",
        "all",
        "a",
        &half,
        "all",
        "a",
        "-8",
        "all",
        "a",
        &half,
    ];
    assert!(err(&mut c, &back).contains("overflow"));
    let fine = [
        "LB.MSUBMIT",
        "all",
        "a",
        &half,
        "all",
        "a",
        "-9",
        "all",
        "a",
        "-1",
    ];
    assert!(q(&mut c, &fine).starts_with("[["));
    let expect = (8 + i64::MAX / 2 + 1 - 10).to_string();
    assert_eq!(q(&mut c, &["LB.SCORE", "all", "a"]), expect);
    // Its keys are every first of the triples.
    assert_eq!(
        q(
            &mut c,
            &[
                "COMMAND",
                "GETKEYS",
                "LB.MSUBMIT",
                "x",
                "m",
                "1",
                "y",
                "m",
                "2"
            ]
        ),
        "[x y]"
    );
}

#[test]
fn generic_key_commands_on_a_board() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    board(&mut c, "b", "ORDINAL");
    assert_eq!(q(&mut c, &["TYPE", "b"]), "leaderboard");
    assert_eq!(q(&mut c, &["OBJECT", "ENCODING", "b"]), "btree");
    let mem: i64 = cmd(&["MEMORY", "USAGE", "b"])
        .query(&mut c)
        .expect("MEMORY USAGE");
    assert!(mem > 100, "{mem}");
    assert_eq!(q(&mut c, &["SCAN", "0", "TYPE", "leaderboard"]), "[0 [b]]");
    assert_eq!(q(&mut c, &["COPY", "b", "b2"]), "1");
    q(&mut c, &["LB.SUBMIT", "b2", "zed", "1000"]);
    assert_eq!(q(&mut c, &["LB.COUNT", "b"]), "4");
    assert_eq!(q(&mut c, &["LB.COUNT", "b2"]), "5");
    assert_eq!(q(&mut c, &["RENAME", "b2", "b3"]), "OK");
    assert_eq!(q(&mut c, &["LB.RANK", "b3", "zed"]), "1");
    assert_eq!(q(&mut c, &["EXPIRE", "b3", "100"]), "1");
    assert_eq!(q(&mut c, &["PEXPIRE", "b3", "1"]), "1");
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(q(&mut c, &["EXISTS", "b3"]), "0");
    // A write to a board breaks a WATCH on it.
    let mut other = srv.conn();
    assert_eq!(q(&mut c, &["WATCH", "b"]), "OK");
    q(&mut other, &["LB.SUBMIT", "b", "eve", "1"]);
    assert_eq!(q(&mut c, &["MULTI"]), "OK");
    assert_eq!(q(&mut c, &["LB.COUNT", "b"]), "QUEUED");
    assert_eq!(q(&mut c, &["EXEC"]), "nil");
    assert_eq!(q(&mut c, &["DEL", "b"]), "1");
    assert_eq!(q(&mut c, &["LB.TOP", "b", "5"]), "[]");
}

#[test]
fn resp3_reply_shapes() {
    let srv = TestServer::start(&[]);
    let mut s = srv.raw();
    let mut hello = encode(&["HELLO", "3"]);
    hello.extend(encode(&["PING"]));
    s.write_all(&hello).expect("write");
    let mut got = Vec::new();
    while !got.ends_with(b"+PONG\r\n") {
        let more = read_at_least(&mut s, 1);
        assert!(!more.is_empty(), "HELLO 3 reply: {got:?}");
        got.extend(more);
    }
    expect_raw(&mut s, &["LB.CREATE", "b", "CAPACITY", "3"], "+OK\r\n");
    expect_raw(
        &mut s,
        &["LB.SUBMIT", "b", "a", "4", "AT", "1"],
        "*3\r\n:4\r\n:1\r\n:1\r\n",
    );
    expect_raw(
        &mut s,
        &["LB.SUBMIT", "b", "c", "2", "AT", "1"],
        "*3\r\n:2\r\n:2\r\n:1\r\n",
    );
    expect_raw(&mut s, &["LB.RANK", "b", "x"], "_\r\n");
    expect_raw(&mut s, &["LB.PERCENT", "b", "c"], ",100\r\n");
    expect_raw(
        &mut s,
        &["LB.GET", "b", "a"],
        "*6\r\n:1\r\n$1\r\na\r\n:4\r\n:0\r\n:1\r\n_\r\n",
    );
    s.write_all(&encode(&["LB.INFO", "b"])).expect("write");
    let info = String::from_utf8_lossy(&read_at_least(&mut s, 100)).into_owned();
    assert!(
        info.starts_with("%14\r\n$5\r\norder\r\n$4\r\nDESC\r\n"),
        "{info}"
    );
    assert!(
        info.contains("$8\r\ncapacity\r\n:3\r\n$4\r\nsize\r\n:2\r\n"),
        "{info}"
    );
}

struct DataDir(PathBuf);

impl Drop for DataDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn wait_rewrite(c: &mut Connection) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info: String = redis::cmd("INFO")
            .arg("persistence")
            .query(c)
            .expect("INFO");
        if info.contains("aof_rewrite_in_progress:0") && info.contains("aof_rewrites:1") {
            return;
        }
        assert!(Instant::now() < deadline, "rewrite did not finish: {info}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every board's full entries and options, as compared across restarts.
fn boards(c: &mut Connection) -> Vec<String> {
    ["b", "comp", "asc", "cap", "none"]
        .iter()
        .map(|k| {
            let top = q(
                c,
                &["LB.TOP", k, "100", "WITHSUBSCORE", "WITHTIME", "WITHMETA"],
            );
            let info = q(c, &["LB.INFO", k]);
            // Memory may differ after a rebuild; the options and size may not.
            let info = info.rsplit_once(" memory").map(|(a, _)| a.to_string());
            format!("{k}: {top} {info:?}")
        })
        .collect()
}

#[test]
fn boards_survive_an_aof_restart_and_a_rewrite() {
    let dir = DataDir(temp_dir("lb-aof"));
    let mut srv = TestServer::start_with_aof(&dir.0);
    let mut c = srv.conn();
    board(&mut c, "b", "ORDINAL");
    board(&mut c, "comp", "COMPETITION");
    // Times from the server's clock: the AOF must record them.
    q(&mut c, &["LB.SUBMIT", "comp", "late", "100"]);
    q(&mut c, &["LB.INCR", "comp", "dan", "50", "META", "m"]);
    q(
        &mut c,
        &[
            "LB.CREATE",
            "asc",
            "ORDER",
            "ASC",
            "TIEBREAK",
            "LATEST",
            "POLICY",
            "SET",
        ],
    );
    q(&mut c, &["LB.SUBMIT", "asc", "x", "3"]);
    q(&mut c, &["LB.SUBMIT", "asc", "y", "3"]);
    q(&mut c, &["LB.SUBMIT", "asc", "x", "1"]);
    q(
        &mut c,
        &["LB.CREATE", "cap", "CAPACITY", "2", "RANKING", "DENSE"],
    );
    q(
        &mut c,
        &[
            "LB.MSUBMIT",
            "cap",
            "a",
            "1",
            "cap",
            "b",
            "2",
            "cap",
            "c",
            "3",
            "b",
            "m",
            "7",
        ],
    );
    q(&mut c, &["LB.REM", "b", "bob"]);
    q(&mut c, &["LB.CREATE", "empty"]);
    for id in ["v1", "v2", "v3"] {
        q(&mut c, &["LB.INCR", "b", "voter", "1", "ID", id]);
    }
    let before = boards(&mut c);
    drop(c);
    srv.terminate();

    let text = String::from_utf8_lossy(&common::aof_bytes(&dir.0)).into_owned();
    assert!(!text.contains("LB.MSUBMIT"), "logged as LB.SUBMITs");
    assert!(
        text.contains("$5\r\nMULTI\r\n"),
        "LB.MSUBMIT's SUBMITs in MULTI/EXEC"
    );
    assert!(text.contains("$4\r\nlate\r\n$3\r\n100\r\n$8\r\nSUBSCORE\r\n$1\r\n0\r\n$2\r\nAT\r\n"));

    let srv = TestServer::start_with_aof(&dir.0);
    let mut c = srv.conn();
    assert_eq!(boards(&mut c), before);
    assert_eq!(q(&mut c, &["TYPE", "empty"]), "leaderboard");
    assert_eq!(
        q(&mut c, &["LB.INCR", "b", "voter", "1", "ID", "v2"]),
        "[3 5 0]"
    );
    let _: String = cmd(&["BGREWRITEAOF"]).query(&mut c).expect("BGREWRITEAOF");
    wait_rewrite(&mut c);
    drop(c);
    drop(srv);
    let text = String::from_utf8_lossy(&common::aof_bytes(&dir.0)).into_owned();
    assert!(
        !text.contains("LB.REM") && !text.contains("LB.INCR"),
        "{text}"
    );
    assert!(text.contains("LB.SEEN"), "{text}");
    let srv = TestServer::start_with_aof(&dir.0);
    let mut c = srv.conn();
    assert_eq!(boards(&mut c), before);
    assert_eq!(q(&mut c, &["TYPE", "empty"]), "leaderboard");
    assert_eq!(
        q(&mut c, &["LB.INCR", "b", "voter", "1", "ID", "v1"]),
        "[3 5 0]"
    );
    assert_eq!(
        q(&mut c, &["LB.INCR", "b", "voter", "1", "ID", "v4"]),
        "[4 5 1]"
    );
}

/// A board big enough to be walked in steps (and loaded with one tree
/// build), with ties, subscores, times, metadata and a dedup window,
/// rewritten into the AOF's RDB preamble (`aof-use-rdb-preamble yes`):
/// the base is the board's own RDB record, not commands, and a restart
/// from it gives the same board (ranks, times, subscores, metadata,
/// options, ids) as before, and as the RDB file of SAVE does.
#[test]
fn a_big_board_restarts_equal_from_the_rdb_preamble() {
    let dir = DataDir(temp_dir("lb-preamble"));
    let d = dir.0.to_str().expect("utf-8 dir");
    let args = [
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
        "--aof-use-rdb-preamble",
        "yes",
        "--dir",
        d,
    ];
    let mut srv = TestServer::start(&args);
    let mut c = srv.conn();
    q(&mut c, &["LB.CREATE", "big", "RANKING", "COMPETITION"]);
    q(
        &mut c,
        &[
            "LB.CREATE",
            "asc",
            "ORDER",
            "ASC",
            "TIEBREAK",
            "LATEST",
            "CAPACITY",
            "500",
        ],
    );
    let mut p = redis::pipe();
    for i in 0..5000u64 {
        let (m, s, ss, t) = (
            format!("p{i}"),
            (i * 7919) % 300,
            i % 3,
            1_000 + (i * 31) % 977,
        );
        let mut c1 = cmd(&["LB.SUBMIT", "big", &m, &s.to_string()]);
        c1.arg("SUBSCORE").arg(ss).arg("AT").arg(t);
        if i % 9 == 0 {
            c1.arg("META").arg(format!("meta-{i}"));
        }
        p.add_command(c1).ignore();
        p.add_command(cmd(&[
            "LB.SUBMIT",
            "asc",
            &m,
            &s.to_string(),
            "AT",
            &t.to_string(),
        ]))
        .ignore();
    }
    p.query::<()>(&mut c).expect("fill");
    let mut last = String::new();
    for id in ["v1", "v2", "v3"] {
        last = q(&mut c, &["LB.INCR", "big", "voter", "1", "ID", id]);
    }
    // The same id again: nothing applied, the same score and rank.
    let seen = last.replace(" 1]", " 0]");
    assert!(seen.ends_with(" 0]"), "{last}");
    let snapshot = |c: &mut Connection| -> Vec<String> {
        ["big", "asc"]
            .iter()
            .map(|k| {
                let top = q(
                    c,
                    &[
                        "LB.TOP",
                        k,
                        "100000",
                        "WITHSUBSCORE",
                        "WITHTIME",
                        "WITHMETA",
                    ],
                );
                let info = q(c, &["LB.INFO", k]);
                let info = info.rsplit_once(" memory").map(|(a, _)| a.to_string());
                format!("{k}: {top} {info:?} {}", q(c, &["LB.RANK", k, "p4242"]))
            })
            .collect()
    };
    let before = snapshot(&mut c);
    assert_eq!(q(&mut c, &["LB.COUNT", "big"]), "5001");
    let _: String = cmd(&["BGREWRITEAOF"]).query(&mut c).expect("BGREWRITEAOF");
    wait_rewrite(&mut c);
    q(&mut c, &["SAVE"]);
    drop(c);
    srv.terminate();
    let aof = common::aof_bytes(&dir.0);
    assert!(aof.starts_with(b"REDIS"), "an RDB preamble");
    let text = String::from_utf8_lossy(&aof);
    assert!(
        !text.contains("LB.SUBMIT") && !text.contains("LB.SEEN"),
        "entries in the preamble, not as commands"
    );

    // From the AOF (its preamble).
    let srv = TestServer::start(&args);
    let mut c = srv.conn();
    assert_eq!(snapshot(&mut c), before);
    assert_eq!(
        q(&mut c, &["LB.INCR", "big", "voter", "1", "ID", "v2"]),
        seen
    );
    drop(c);
    drop(srv);

    // From SAVE's RDB file, the same board.
    std::fs::remove_dir_all(dir.0.join("appendonlydir")).expect("remove the AOF");
    let srv = TestServer::start(&["--appendonly", "no", "--dir", d]);
    let mut c = srv.conn();
    assert_eq!(snapshot(&mut c), before);
    assert_eq!(
        q(&mut c, &["LB.INCR", "big", "voter", "1", "ID", "v1"]),
        seen
    );
}

#[test]
fn keyspace_events_and_command_info() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Ed"]);
    let mut sub_conn = srv.conn();
    let mut sub = sub_conn.as_pubsub();
    sub.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    sub.psubscribe("__keyevent@0__:*").expect("psubscribe");
    q(&mut c, &["LB.CREATE", "b"]);
    q(&mut c, &["LB.SUBMIT", "b", "a", "1"]);
    q(&mut c, &["LB.SUBMIT", "b", "a", "0"]); // no change, no event
    q(&mut c, &["LB.INCR", "b", "a", "1"]);
    q(&mut c, &["LB.REM", "b", "a"]);
    let mut got = Vec::new();
    for _ in 0..4 {
        let m = sub.get_message().expect("an event");
        let key: String = m.get_payload().expect("payload");
        got.push(format!("{} {key}", m.get_channel_name()));
    }
    assert_eq!(
        got,
        [
            "__keyevent@0__:lb.create b",
            "__keyevent@0__:lb.submit b",
            "__keyevent@0__:lb.incr b",
            "__keyevent@0__:lb.rem b",
        ]
    );
    drop(sub);
    let info = q(&mut c, &["COMMAND", "INFO", "LB.TOP", "LB.SUBMIT"]);
    assert!(info.contains("lb.top -3 [readonly]"), "{info}");
    assert!(info.contains("@leaderboard"), "{info}");
    assert!(info.contains("lb.submit -4 [write denyoom fast]"), "{info}");
}

/// RESP for one command, as the AOF holds it.
fn resp(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

/// Starts Rostrum on `dir`'s AOF expecting it to refuse; returns stderr.
fn start_refused(dir: &std::path::Path, extra: &[&str]) -> String {
    let port = common::free_port().to_string();
    let dir = dir.to_str().expect("utf-8 dir");
    let mut args = vec!["--port", &port, "--appendonly", "yes", "--dir", dir];
    args.extend_from_slice(extra);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_rostrum"))
        .args(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn rostrum");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            assert!(!status.success(), "rostrum should have refused to start");
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("rostrum started on a truncated AOF with aof-load-truncated no");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    err
}

/// A board's entries, options and ids window survive an AOF cut anywhere in
/// its last write as Redis's rules say: with `aof-load-truncated yes` (the
/// default) the unfinished command is dropped, the file cut back to its
/// last whole command and the rest loaded; with `no` the start is refused.
/// An LB.MSUBMIT logged as MULTI ... EXEC that lost its EXEC is reverted.
#[test]
fn a_truncated_aof_drops_the_boards_unfinished_write() {
    let dir = DataDir(temp_dir("lb-aof-cut"));
    let mut srv = TestServer::start_with_aof(&dir.0);
    let mut c = srv.conn();
    board(&mut c, "b", "ORDINAL");
    board(&mut c, "comp", "COMPETITION");
    for id in ["v1", "v2"] {
        q(&mut c, &["LB.INCR", "b", "voter", "1", "ID", id]);
    }
    let before = boards(&mut c);
    drop(c);
    srv.terminate();
    let aof = common::aof_files(&dir.0).pop().expect("aof");
    let good = std::fs::read(&aof).expect("aof");

    let last = resp(&[
        "LB.INCR", "b", "voter", "5", "AT", "99", "META", "cut", "ID", "v3",
    ]);
    // A cut in the header, in a length line, inside a bulk and just before
    // the final CRLF.
    for cut in [1, 6, 20, last.len() / 2, last.len() - 1] {
        let mut bad = good.clone();
        bad.extend_from_slice(&last[..cut]);
        std::fs::write(&aof, &bad).expect("write");
        let err = start_refused(&dir.0, &["--config", "aof-load-truncated=no"]);
        assert!(err.contains("Unexpected end of file"), "cut {cut}: {err}");

        let srv = TestServer::start_with_aof(&dir.0);
        let mut c = srv.conn();
        assert_eq!(
            boards(&mut c),
            before,
            "cut at byte {cut} of the last write"
        );
        drop(c);
        drop(srv);
        assert_eq!(
            std::fs::read(&aof).expect("aof"),
            good,
            "cut {cut}: the file is cut back to its last whole command"
        );
    }

    // The whole command loads, its id included.
    let mut whole = good.clone();
    whole.extend_from_slice(&last);
    std::fs::write(&aof, &whole).expect("write");
    let srv = TestServer::start_with_aof(&dir.0);
    let mut c = srv.conn();
    assert_eq!(
        q(&mut c, &["LB.GET", "b", "voter"]),
        "[5 voter 7 0 99 cut]",
        "the last write applied"
    );
    assert_eq!(
        q(&mut c, &["LB.INCR", "b", "voter", "5", "ID", "v3"]),
        "[7 5 0]",
        "its id is in the window"
    );
    drop(c);
    drop(srv);

    // LB.MSUBMIT's MULTI without its EXEC: none of its boards changes.
    let mut open = good.clone();
    open.extend_from_slice(&resp(&["MULTI"]));
    open.extend_from_slice(&resp(&[
        "LB.SUBMIT",
        "b",
        "zed",
        "500",
        "SUBSCORE",
        "0",
        "AT",
        "1",
    ]));
    open.extend_from_slice(&resp(&[
        "LB.SUBMIT",
        "comp",
        "zed",
        "500",
        "SUBSCORE",
        "0",
        "AT",
        "1",
    ]));
    std::fs::write(&aof, &open).expect("write");
    let srv = TestServer::start_with_aof(&dir.0);
    let mut c = srv.conn();
    assert_eq!(boards(&mut c), before, "the unfinished MSUBMIT is reverted");
}

/// Metadata accepted once loads again after `lb-max-meta-bytes` is lowered:
/// the limit is for live writes, not for replaying the AOF.
#[test]
fn a_lower_meta_limit_does_not_refuse_the_aof() {
    let dir = DataDir(temp_dir("lb-aof-meta"));
    let mut srv = TestServer::start_with_aof(&dir.0);
    let mut c = srv.conn();
    q(
        &mut c,
        &["LB.SUBMIT", "b", "a", "1", "META", "twelve bytes"],
    );
    drop(c);
    srv.terminate();
    let d = dir.0.to_str().expect("utf-8");
    let args = [
        "--appendonly",
        "yes",
        "--dir",
        d,
        "--config",
        "lb-max-meta-bytes=4",
    ];
    let srv = TestServer::start(&args);
    let mut c = srv.conn();
    let entry = q(&mut c, &["LB.GET", "b", "a"]);
    assert!(entry.ends_with(" twelve bytes]"), "{entry}");
    // Live writes still meet the new limit.
    let e = err(&mut c, &["LB.SUBMIT", "b", "c", "2", "META", "longer"]);
    assert!(e.contains("metadata is too long"), "{e}");
}
