//! Seasons (issue 17) through the redis crate against a spawned Rostrum:
//! schedules and their boundaries in a fixed offset and in an IANA zone
//! across daylight-saving changes (the server's time moved by the test
//! clock, `debug-clock-offset-ms`, not waited for), reads of closed
//! periods with every read command, LB.RESET / LB.CONFIG / LB.PERIODS, an
//! EVERY 2000 board rolling over under concurrent LB.INCR load, and a
//! restart across missed boundaries (with an AOF rewrite in between).
mod common;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use chrono::{TimeZone, Utc};
use common::{cmd, err, q, show, temp_dir, TestServer};
use redis::{Connection, Value};

/// Unix ms of a UTC date and time.
fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> i64 {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, 0)
        .single()
        .expect("a valid date")
        .timestamp_millis()
}

fn real_now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

/// The test clock offset that makes the server's time `target` now.
fn offset_to(target: i64) -> i64 {
    target - real_now_ms()
}

/// Moves the server's clock to `target` (unix ms).
fn set_clock(c: &mut Connection, target: i64) {
    let off = offset_to(target).to_string();
    assert_eq!(
        q(c, &["CONFIG", "SET", "debug-clock-offset-ms", &off]),
        "OK"
    );
}

/// A field of a flat `[name value name value ...]` reply.
fn field(reply: &str, name: &str) -> String {
    let inner = reply.trim_start_matches('[').trim_end_matches(']');
    let words: Vec<&str> = inner.split(' ').collect();
    words
        .chunks(2)
        .find(|p| p[0] == name)
        .map(|p| p[1].to_string())
        .unwrap_or_else(|| panic!("no {name} in {reply}"))
}

/// LB.PERIODS as (number, start, end, size) tuples.
fn periods(c: &mut Connection, key: &str) -> Vec<(i64, i64, Option<i64>, i64)> {
    let v: Value = cmd(&["LB.PERIODS", key]).query(c).expect("LB.PERIODS");
    let Value::Array(list) = v else {
        panic!("LB.PERIODS answered {v:?}")
    };
    list.iter()
        .map(|p| {
            let Value::Array(f) = p else {
                panic!("a period is {p:?}")
            };
            let int = |i: usize| match &f[i] {
                Value::Int(n) => Some(*n),
                Value::Nil => None,
                other => panic!("{other:?}"),
            };
            assert_eq!(show(&f[8]), "location");
            assert_eq!(show(&f[9]), "memory");
            (
                int(1).expect("number"),
                int(3).expect("start"),
                int(5),
                int(7).expect("size"),
            )
        })
        .collect()
}

#[test]
fn daily_boundaries_in_an_offset_and_across_new_york_dst() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();

    // +08:00: local midnight is 16:00 UTC.
    set_clock(&mut c, utc(2025, 3, 9, 10, 0));
    q(
        &mut c,
        &[
            "LB.CREATE",
            "p8",
            "POLICY",
            "INCR",
            "RESET",
            "DAILY",
            "TZ",
            "+08:00",
        ],
    );
    let conf = q(&mut c, &["LB.CONFIG", "p8", "GET"]);
    assert_eq!(
        field(&conf, "next"),
        utc(2025, 3, 9, 16, 0).to_string(),
        "{conf}"
    );
    assert_eq!(field(&conf, "tz"), "+08:00");
    q(&mut c, &["LB.INCR", "p8", "alice", "3"]);
    set_clock(&mut c, utc(2025, 3, 9, 16, 0) + 500);
    // Read at once: the boundary is seen whether or not the timer ran.
    assert_eq!(q(&mut c, &["LB.SCORE", "p8", "alice"]), "nil");
    assert_eq!(q(&mut c, &["LB.SCORE", "p8", "alice", "PERIOD", "-1"]), "3");
    let conf = q(&mut c, &["LB.CONFIG", "p8", "GET"]);
    assert_eq!(field(&conf, "next"), utc(2025, 3, 10, 16, 0).to_string());
    assert_eq!(field(&conf, "period"), "2");

    // America/New_York, spring forward: 2025-03-09 is 23 hours long.
    set_clock(&mut c, utc(2025, 3, 8, 17, 0));
    q(
        &mut c,
        &[
            "LB.CREATE",
            "ny",
            "POLICY",
            "INCR",
            "RESET",
            "DAILY",
            "TZ",
            "America/New_York",
            "HISTORY",
            "5",
        ],
    );
    let mar9 = utc(2025, 3, 9, 5, 0);
    let mar10 = utc(2025, 3, 10, 4, 0);
    assert_eq!(
        field(&q(&mut c, &["LB.CONFIG", "ny", "GET"]), "next"),
        mar9.to_string()
    );
    q(&mut c, &["LB.INCR", "ny", "alice", "1"]);
    set_clock(&mut c, utc(2025, 3, 9, 6, 0));
    assert_eq!(q(&mut c, &["LB.SCORE", "ny", "alice"]), "nil");
    assert_eq!(q(&mut c, &["LB.INCR", "ny", "alice", "2"]), "[2 1 1]");
    let p = periods(&mut c, "ny");
    assert_eq!(p[0], (2, mar9, Some(mar10), 1));
    assert_eq!(p[1].0, 1);
    assert_eq!((p[1].2, p[1].3), (Some(mar9), 1));
    assert_eq!(mar10 - mar9, 23 * 3_600_000);

    // Fall back: 2025-11-02 is 25 hours long. The months in between are
    // missed boundaries: the period numbers count them.
    set_clock(&mut c, utc(2025, 11, 2, 10, 0));
    let nov2 = utc(2025, 11, 2, 4, 0);
    let nov3 = utc(2025, 11, 3, 5, 0);
    let conf = q(&mut c, &["LB.CONFIG", "ny", "GET"]);
    assert_eq!(field(&conf, "start"), nov2.to_string(), "{conf}");
    assert_eq!(field(&conf, "next"), nov3.to_string());
    let days = (Utc.timestamp_millis_opt(nov2).unwrap().date_naive()
        - Utc.timestamp_millis_opt(mar9).unwrap().date_naive())
    .num_days();
    assert_eq!(field(&conf, "period"), (2 + days).to_string());
    assert_eq!(nov3 - nov2, 25 * 3_600_000);
    let p = periods(&mut c, "ny");
    assert_eq!(p.len(), 6, "the current one and HISTORY 5");
    assert!(p.iter().all(|x| x.3 == 0));
    assert_eq!(
        q(&mut c, &["LB.SCORE", "ny", "alice", "PERIOD", "-5"]),
        "nil"
    );
    assert_eq!(
        q(&mut c, &["LB.SCORE", "ny", "alice", "PERIOD", "-6"]),
        "nil"
    );
    // The timer applies them to the board too (INFO counts what is held).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let info = common::info(&mut c, "leaderboards");
        if info["lb_periods_in_memory"] == "6" {
            assert_eq!(info["lb_boards"], "2");
            break;
        }
        assert!(Instant::now() < deadline, "{info:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn closed_periods_answer_every_read_command() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    q(
        &mut c,
        &["LB.CREATE", "s", "RANKING", "COMPETITION", "HISTORY", "2"],
    );
    q(&mut c, &["LB.CREATE", "ref", "RANKING", "COMPETITION"]);
    for key in ["s", "ref"] {
        for (m, score, at) in [
            ("a", "10", "1"),
            ("b", "20", "2"),
            ("c", "20", "3"),
            ("d", "5", "4"),
        ] {
            q(&mut c, &["LB.SUBMIT", key, m, score, "AT", at, "META", m]);
        }
    }
    q(&mut c, &["SADD", "fr", "a", "c", "zz"]);
    assert_eq!(q(&mut c, &["LB.RESET", "s"]), "2");
    q(&mut c, &["LB.SUBMIT", "s", "new", "1"]);
    let reads: &[&[&str]] = &[
        &["LB.GET", "K", "c"],
        &["LB.SCORE", "K", "b"],
        &["LB.RANK", "K", "c"],
        &["LB.MRANK", "K", "a", "zz", "d"],
        &["LB.TOP", "K", "3", "WITHSUBSCORE", "WITHTIME", "WITHMETA"],
        &["LB.TOP", "K", "PERCENT", "50"],
        &["LB.RANGE", "K", "2", "-1", "WITHMETA"],
        &["LB.AROUND", "K", "a", "3"],
        &["LB.AMONG", "K", "a", "b", "d", "WITHGLOBAL"],
        &["LB.FRIENDS", "K", "fr", "INCLUDE", "d", "WITHGLOBAL"],
        &["LB.PERCENT", "K", "c"],
        &["LB.COUNT", "K"],
        &["LB.COUNT", "K", "10", "20"],
    ];
    for r in reads {
        let on = |key: &'static str| -> Vec<&str> {
            r.iter().map(|a| if *a == "K" { key } else { *a }).collect()
        };
        let want = q(&mut c, &on("ref"));
        let mut past = on("s");
        past.extend(["PERIOD", "-1"]);
        assert_eq!(q(&mut c, &past), want, "{past:?}");
        // PERIOD 0 is the current period.
        let mut now = on("s");
        now.extend(["PERIOD", "0"]);
        assert_eq!(q(&mut c, &now), q(&mut c, &on("s")), "{now:?}");
    }
    // Options before PERIOD or after it read the same.
    assert_eq!(
        q(&mut c, &["LB.TOP", "s", "2", "PERIOD", "-1", "WITHTIME"]),
        q(&mut c, &["LB.TOP", "ref", "2", "WITHTIME"])
    );
    // A period not kept reads as an absent board.
    assert_eq!(q(&mut c, &["LB.SCORE", "s", "b", "PERIOD", "-2"]), "nil");
    assert_eq!(q(&mut c, &["LB.TOP", "s", "5", "PERIOD", "-7"]), "[]");
    assert_eq!(q(&mut c, &["LB.COUNT", "s", "PERIOD", "-2"]), "0");
    // Archives are read-only: writes take no PERIOD.
    assert!(err(&mut c, &["LB.SUBMIT", "s", "a", "1", "PERIOD", "-1"])
        .contains("unknown option 'PERIOD'"));
    assert!(err(&mut c, &["LB.SCORE", "s", "b", "PERIOD", "1"])
        .contains("PERIOD must be 0 or negative"));
    // HISTORY 2: a third reset drops the first period.
    q(&mut c, &["LB.RESET", "s"]);
    q(&mut c, &["LB.RESET", "s"]);
    let p = periods(&mut c, "s");
    assert_eq!(p.iter().map(|x| x.0).collect::<Vec<_>>(), [4, 3, 2]);
    assert_eq!(p[2].3, 1, "period 2 holds `new`");
    assert_eq!(q(&mut c, &["LB.SCORE", "s", "new", "PERIOD", "-2"]), "1");
}

#[test]
fn options_and_errors() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    assert!(err(&mut c, &["LB.CREATE", "x", "ARCHIVE", "TAPE"]).contains("invalid value 'TAPE'"));
    assert!(err(&mut c, &["LB.CREATE", "x", "TZ", "Mars/Base"])
        .contains("unknown time zone 'Mars/Base'"));
    assert!(
        err(&mut c, &["LB.CREATE", "x", "RESET", "CRON", "61 * * * *"])
            .contains("invalid cron line")
    );
    assert!(err(&mut c, &["LB.CREATE", "x", "RESET", "EVERY", "0"]).contains("positive"));
    assert!(err(&mut c, &["LB.CREATE", "x", "RESET", "HOURLY"]).contains("invalid value 'HOURLY'"));
    assert!(err(&mut c, &["LB.RESET", "nokey"]).contains("no such key"));
    assert!(err(&mut c, &["LB.CONFIG", "nokey", "GET"]).contains("no such key"));
    assert_eq!(q(&mut c, &["LB.PERIODS", "nokey"]), "[]");
    assert!(err(&mut c, &["LB.CREATE", "x", "HISTORY", "10001"])
        .contains("HISTORY must be between 0 and 10000"));
    assert_eq!(q(&mut c, &["EXISTS", "x"]), "0");

    q(
        &mut c,
        &[
            "LB.CREATE",
            "w",
            "RESET",
            "CRON",
            "0 9 * * 1-5",
            "TZ",
            "Europe/Paris",
            "HISTORY",
            "3",
            "ARCHIVE",
            "MEMORY",
        ],
    );
    let conf = q(&mut c, &["LB.CONFIG", "w", "GET"]);
    assert!(
        conf.starts_with(
            "[reset CRON 0 9 * * 1-5 tz Europe/Paris history 3 archive MEMORY period 1"
        ),
        "{conf}"
    );
    let info = q(&mut c, &["LB.INFO", "w"]);
    assert!(info.contains("memory "), "{info}");
    assert!(
        info.contains("reset CRON 0 9 * * 1-5 tz Europe/Paris history 3"),
        "{info}"
    );
    assert_eq!(
        q(
            &mut c,
            &[
                "LB.CONFIG",
                "w",
                "SET",
                "RESET",
                "WEEKLY",
                "HISTORY",
                "1",
                "TZ",
                "-03:30"
            ]
        ),
        "OK"
    );
    let conf = q(&mut c, &["LB.CONFIG", "w", "GET"]);
    assert!(
        conf.starts_with("[reset WEEKLY tz -03:30 history 1 archive MEMORY"),
        "{conf}"
    );
    assert!(
        err(&mut c, &["LB.CONFIG", "w", "SET", "ORDER", "ASC"]).contains("unknown option 'ORDER'")
    );
    assert_eq!(
        q(&mut c, &["LB.CONFIG", "w", "SET", "ARCHIVE", "DISK"]),
        "OK"
    );
    assert_eq!(
        q(&mut c, &["LB.CONFIG", "w", "SET", "ARCHIVE", "MEMORY"]),
        "OK"
    );
    assert!(err(&mut c, &["LB.CONFIG", "w", "FOO"]).contains("unknown subcommand"));
    // A plain board resets too (HISTORY 1 by default).
    q(&mut c, &["LB.SUBMIT", "plain", "a", "1"]);
    assert_eq!(q(&mut c, &["LB.RESET", "plain"]), "2");
    assert_eq!(q(&mut c, &["LB.SCORE", "plain", "a", "PERIOD", "-1"]), "1");
    assert!(err(&mut c, &["LB.RESET", "plain", "AT", "5"])
        .contains("before the current period's start"));
    assert!(err(&mut c, &["LB.RESET", "plain", "AT", "99999999999999"]).contains("future"));
    assert!(err(&mut c, &["LB.RESET", "plain", "UNTIL", "99999999999999"]).contains("future"));
    q(&mut c, &["SET", "str", "v"]);
    assert!(err(&mut c, &["LB.RESET", "str"]).contains("WRONGTYPE"));
}

/// Sum of every score over every kept period.
fn sum_over_periods(c: &mut Connection, key: &str) -> (i64, usize) {
    let n = periods(c, key).len();
    let mut sum = 0;
    for k in 0..n {
        let back = (-(k as i64)).to_string();
        let v: Value = cmd(&["LB.TOP", key, "100000", "PERIOD", &back])
            .query(c)
            .expect("LB.TOP");
        let Value::Array(entries) = v else { panic!() };
        for e in entries {
            let Value::Array(f) = e else { panic!() };
            let Value::Int(score) = f[2] else { panic!() };
            sum += score;
        }
    }
    (sum, n)
}

#[test]
fn an_every_2000_board_rolls_over_under_load_without_losing_an_increment() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    q(
        &mut c,
        &[
            "LB.CREATE",
            "e",
            "POLICY",
            "INCR",
            "RESET",
            "EVERY",
            "2000",
            "HISTORY",
            "100",
        ],
    );
    let stop = Instant::now() + Duration::from_millis(4500);
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let mut c = srv.conn();
            std::thread::spawn(move || {
                let mut acked = 0i64;
                let mut i = 0;
                while Instant::now() < stop {
                    let m = format!("m{}", (i * 4 + w) % 16);
                    let v: Value = cmd(&["LB.INCR", "e", &m, "1"])
                        .query(&mut c)
                        .expect("LB.INCR");
                    assert!(matches!(v, Value::Array(_)), "{v:?}");
                    acked += 1;
                    i += 1;
                }
                acked
            })
        })
        .collect();
    let acked: i64 = workers.into_iter().map(|w| w.join().expect("worker")).sum();
    let (sum, n) = sum_over_periods(&mut c, "e");
    assert_eq!(sum, acked, "over {n} periods");
    assert!(
        n >= 3,
        "4.5 s of EVERY 2000 spans at least two boundaries: {n}"
    );
    // Periods are contiguous, each 2000 ms on the schedule's grid (the
    // first begins at creation).
    let p = periods(&mut c, "e");
    for w in p.windows(2) {
        assert_eq!(w[1].2, Some(w[0].1), "{p:?}");
        assert_eq!(w[0].0, w[1].0 + 1);
    }
    for x in &p[..p.len() - 1] {
        assert_eq!(x.1 % 2000, 0, "{p:?}");
    }
    // Nothing written now: the timer still rolls the board.
    let before = p[0].0;
    let deadline = Instant::now() + Duration::from_secs(6);
    loop {
        let info = common::info(&mut c, "leaderboards");
        let held: usize = info["lb_periods_in_memory"].parse().expect("a number");
        if held as i64 >= before {
            break;
        }
        assert!(Instant::now() < deadline, "{info:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(sum_over_periods(&mut c, "e").0, acked);
}

struct DataDir(std::path::PathBuf);

impl Drop for DataDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn start_at(dir: &std::path::Path, target: i64) -> TestServer {
    let dir = dir.to_str().expect("UTF-8 path");
    let off = format!("debug-clock-offset-ms={}", offset_to(target));
    TestServer::start(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
        "--dir",
        dir,
        "--config",
        &off,
    ])
}

fn wait_rewrite(c: &mut Connection) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info = common::info(c, "persistence");
        if info["aof_rewrite_in_progress"] == "0" && info["aof_rewrites"] == "1" {
            return;
        }
        assert!(Instant::now() < deadline, "rewrite did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_restart_across_missed_boundaries_archives_the_right_periods() {
    let dir = DataDir(temp_dir("lb-seasons"));
    let jun = |d: u32, h: u32| utc(2025, 6, d, h, 0);
    let mut srv = start_at(&dir.0, jun(1, 10));
    let mut c = srv.conn();
    q(
        &mut c,
        &["LB.CREATE", "d", "RESET", "DAILY", "HISTORY", "3"],
    );
    q(&mut c, &["LB.SUBMIT", "d", "alice", "5"]);
    q(&mut c, &["LB.SUBMIT", "d", "bob", "3"]);
    // An hourly board beside it.
    q(
        &mut c,
        &[
            "LB.CREATE",
            "h",
            "RESET",
            "EVERY",
            "3600000",
            "HISTORY",
            "2",
        ],
    );
    q(&mut c, &["LB.SUBMIT", "h", "x", "1"]);
    // A board reset by hand, then given a schedule mid-period: its period
    // ends at the first boundary after the change (June 3), not after
    // its start (June 2); the rewrite must keep that.
    q(&mut c, &["LB.CREATE", "m", "HISTORY", "2"]);
    q(&mut c, &["LB.SUBMIT", "m", "y", "1"]);
    assert_eq!(q(&mut c, &["LB.RESET", "m"]), "2");
    q(&mut c, &["LB.SUBMIT", "m", "z", "1"]);
    set_clock(&mut c, jun(2, 10));
    assert_eq!(
        q(&mut c, &["LB.CONFIG", "m", "SET", "RESET", "DAILY"]),
        "OK"
    );
    q(&mut c, &["LB.SUBMIT", "d", "carl", "7"]);
    assert_eq!(
        q(&mut c, &["BGREWRITEAOF"]),
        "Background append only file rewriting started"
    );
    wait_rewrite(&mut c);
    q(&mut c, &["LB.SUBMIT", "d", "dan", "1"]);
    let h_before = periods(&mut c, "h");
    srv.terminate();
    drop(c);

    // Down for two days: June 3 and June 4 passed.
    let mut srv = start_at(&dir.0, jun(4, 10));
    let mut c = srv.conn();
    let want = [
        (4, jun(4, 0), Some(jun(5, 0)), 0),
        (3, jun(3, 0), Some(jun(4, 0)), 0),
        (2, jun(2, 0), Some(jun(3, 0)), 2),
        (1, jun(1, 10), Some(jun(2, 0)), 2),
    ];
    // jun(1, 10) is when the board was created, give or take the time
    // the test took between moving the clock and LB.CREATE.
    let got = periods(&mut c, "d");
    assert_eq!(got.len(), 4, "{got:?}");
    assert_eq!(got[..3], want[..3]);
    assert!(
        (got[3].1 - want[3].1).abs() < 60_000 && got[3].2 == want[3].2,
        "{got:?}"
    );
    assert_eq!(q(&mut c, &["LB.SCORE", "d", "alice", "PERIOD", "-3"]), "5");
    assert_eq!(
        q(&mut c, &["LB.TOP", "d", "5", "PERIOD", "-2"]),
        "[[1 carl 7] [2 dan 1]]"
    );
    // The hourly board: 48 boundaries passed, HISTORY 2 kept.
    let h = periods(&mut c, "h");
    assert_eq!(h.len(), 3);
    assert_eq!(h[0].0, h_before[0].0 + 48);
    let m = periods(&mut c, "m");
    assert_eq!(m[0], (4, jun(4, 0), Some(jun(5, 0)), 0), "{m:?}");
    assert_eq!(m[1], (3, jun(3, 0), Some(jun(4, 0)), 0), "{m:?}");
    assert_eq!((m[2].0, m[2].2, m[2].3), (2, Some(jun(3, 0)), 1), "{m:?}");
    assert_eq!(q(&mut c, &["LB.SCORE", "m", "z", "PERIOD", "-2"]), "1");
    // Once the timer has rolled the boards (and logged it), a second
    // restart finds the same periods.
    let deadline = Instant::now() + Duration::from_secs(5);
    while common::info(&mut c, "leaderboards")["lb_periods_in_memory"] != "7" {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = (
        periods(&mut c, "d"),
        periods(&mut c, "h"),
        periods(&mut c, "m"),
    );
    srv.terminate();
    drop(c);
    let srv = start_at(&dir.0, jun(4, 10));
    let mut c = srv.conn();
    assert_eq!(
        (
            periods(&mut c, "d"),
            periods(&mut c, "h"),
            periods(&mut c, "m")
        ),
        before
    );
}

/// A seasonal board's whole state through a DUMP payload and an RDB file:
/// schedule, zone, history, the current period's number, start and end,
/// and every closed period with its entries.
#[test]
fn a_seasonal_board_survives_dump_restore_and_an_rdb_restart() {
    let dir = temp_dir("seasons-rdb");
    let d = dir.to_str().expect("utf-8 dir");
    let mut srv = TestServer::start(&["--dir", d]);
    let mut c = srv.conn();
    q(
        &mut c,
        &[
            "LB.CREATE",
            "s",
            "RESET",
            "DAILY",
            "TZ",
            "America/New_York",
            "HISTORY",
            "3",
        ],
    );
    for (i, who) in ["ann", "bob", "cy", "dee"].iter().enumerate() {
        q(
            &mut c,
            &["LB.SUBMIT", "s", who, &(10 * (i + 1)).to_string()],
        );
        q(&mut c, &["LB.SUBMIT", "s", "all", &i.to_string()]);
        q(&mut c, &["LB.RESET", "s"]);
    }
    q(&mut c, &["LB.SUBMIT", "s", "now", "5"]);
    let state = |c: &mut Connection, key: &str| -> Vec<String> {
        let mut out = vec![
            format!("{:?}", periods(c, key)),
            q(c, &["LB.CONFIG", key, "GET"]),
        ];
        for p in ["0", "-1", "-2", "-3", "-4"] {
            out.push(q(c, &["LB.TOP", key, "10", "WITHTIME", "PERIOD", p]));
        }
        out
    };
    let before = state(&mut c, "s");
    assert!(before[4].contains("cy"), "{before:?}");
    let payload: Vec<u8> = redis::cmd("DUMP").arg("s").query(&mut c).expect("DUMP");
    let ok: String = redis::cmd("RESTORE")
        .arg("copy")
        .arg(0)
        .arg(payload)
        .query(&mut c)
        .expect("RESTORE");
    assert_eq!(ok, "OK");
    assert_eq!(state(&mut c, "copy"), before, "restored");
    q(&mut c, &["SAVE"]);
    drop(c);
    srv.terminate();
    let srv = TestServer::start(&["--dir", d]);
    let mut c = srv.conn();
    assert_eq!(state(&mut c, "s"), before, "after a start from dump.rdb");
    drop(c);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}
