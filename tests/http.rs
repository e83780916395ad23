//! The HTTP listener (issue 18): off by default, `/metrics` in Prometheus's
//! text format scraped while clients write (and checked by `promtool check
//! metrics` when Debian's `prometheus` package is installed: skipped with a
//! notice without it, a failure when the CI variable is set), and the
//! bearer token `requirepass` asks for.
mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{free_port, TestServer};

/// One GET; returns (status line, body).
fn get(port: u16, path: &str, token: Option<&str>) -> (String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the HTTP port");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(s, "GET {path} HTTP/1.1\r\nHost: localhost\r\n{auth}\r\n").unwrap();
    let mut resp = Vec::new();
    s.read_to_end(&mut resp).expect("a whole response");
    let text = String::from_utf8_lossy(&resp).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
    (
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    )
}

/// Sends `request` as is; returns the whole response head.
fn raw(port: u16, request: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the HTTP port");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut resp = Vec::new();
    let _ = s.read_to_end(&mut resp);
    let text = String::from_utf8_lossy(&resp).into_owned();
    text.split_once("\r\n\r\n")
        .map_or(text.clone(), |(h, _)| h.to_string())
}

/// A header's value in a response head (names compared without case).
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// The value of an unlabelled or labelled sample line `name{...} value`.
fn sample(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

fn promtool_missing() -> bool {
    let ok = Command::new("promtool")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "promtool is missing (apt-get install prometheus) and CI is set"
        );
        eprintln!("SKIPPED promtool check: promtool not installed (apt-get install prometheus)");
    }
    !ok
}

fn promtool_check(body: &str) {
    if promtool_missing() {
        return;
    }
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_listener_is_off_by_default() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let v: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("http-port")
        .query(&mut c)
        .unwrap();
    assert_eq!(v, vec!["http-port".to_string(), "0".to_string()]);
    assert!(redis::cmd("CONFIG")
        .arg("SET")
        .arg("http-port")
        .arg("1")
        .query::<()>(&mut c)
        .is_err());
}

#[test]
fn metrics_scraped_under_load() {
    let http = free_port();
    let srv = TestServer::start(&["--config", &format!("http-port={http}")]);
    let mut c = srv.conn();
    let _: () = redis::cmd("LB.SUBMIT")
        .arg("board")
        .arg("a")
        .arg(1)
        .query(&mut c)
        .unwrap();
    // A watcher, so that the board has one.
    let mut w = srv.conn();
    let _: redis::Value = redis::cmd("LB.WATCH")
        .arg("board")
        .arg(3)
        .query(&mut w)
        .unwrap();
    // Writers hammer the server while it is scraped.
    let stop = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..2)
        .map(|t| {
            let (stop, writes) = (stop.clone(), writes.clone());
            let mut c = srv.conn();
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) && i < 200_000 {
                    let mut p = redis::pipe();
                    for _ in 0..50 {
                        p.cmd("LB.INCR")
                            .arg("board")
                            .arg(format!("m{t}:{}", i % 500))
                            .arg(1)
                            .ignore();
                        p.cmd("SET").arg(format!("k{}", i % 100)).arg(i).ignore();
                        i += 1;
                    }
                    let _: () = p.query(&mut c).expect("writes under scrape");
                    writes.fetch_add(50, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let mut last_calls = 0.0;
    let mut body = String::new();
    for _ in 0..20 {
        let (status, b) = get(http, "/metrics", None);
        assert_eq!(status, "HTTP/1.1 200 OK");
        let calls = sample(&b, "redis_commands_total{cmd=\"lb.incr\"}").unwrap_or(0.0);
        assert!(
            calls >= last_calls,
            "a counter went down: {calls} < {last_calls}"
        );
        last_calls = calls;
        body = b;
        std::thread::sleep(Duration::from_millis(25));
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    assert!(writes.load(Ordering::Relaxed) > 0);
    assert!(last_calls > 0.0, "lb.incr calls seen while scraping");
    for series in [
        "redis_up",
        "redis_connected_clients",
        "redis_memory_used_bytes",
        "redis_commands_processed_total",
        "redis_aof_enabled",
        "redis_db_keys{db=\"db0\"}",
        "rostrum_board_watchers{db=\"0\",key=\"board\"}",
        "rostrum_live_groups",
    ] {
        assert!(
            sample(&body, series).is_some(),
            "{series} missing from\n{body}"
        );
    }
    assert_eq!(
        sample(&body, "rostrum_board_watchers{db=\"0\",key=\"board\"}"),
        Some(1.0)
    );
    assert!(
        sample(&body, "rostrum_board_entries{db=\"0\",key=\"board\"}").is_some_and(|n| n > 1.0)
    );
    assert!(body.contains("# TYPE redis_commands_total counter"));
    // Per-command latency histograms: cumulative buckets ending in +Inf,
    // which equals _count, and a _sum.
    assert!(body.contains("# TYPE rostrum_command_duration_seconds histogram"));
    let buckets: Vec<(String, f64)> = body
        .lines()
        .filter_map(|l| {
            let rest =
                l.strip_prefix("rostrum_command_duration_seconds_bucket{cmd=\"lb.incr\",le=\"")?;
            let (le, v) = rest.split_once("\"} ")?;
            Some((le.to_string(), v.parse().ok()?))
        })
        .collect();
    assert!(buckets.len() > 2, "lb.incr buckets in\n{body}");
    assert!(
        buckets.windows(2).all(|w| w[0].1 <= w[1].1),
        "cumulative: {buckets:?}"
    );
    let (last_le, inf) = buckets.last().cloned().unwrap();
    assert_eq!(last_le, "+Inf");
    assert!(inf > 0.0);
    assert_eq!(
        sample(
            &body,
            "rostrum_command_duration_seconds_count{cmd=\"lb.incr\"}"
        ),
        Some(inf)
    );
    assert!(sample(
        &body,
        "rostrum_command_duration_seconds_sum{cmd=\"lb.incr\"}"
    )
    .is_some_and(|s| s > 0.0));
    promtool_check(&body);
    // Prometheus's text format, and every answer closes.
    let head = raw(http, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert_eq!(
        header(&head, "content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    assert_eq!(header(&head, "connection"), Some("close"));
    // Other paths and methods, and what is not HTTP.
    assert_eq!(get(http, "/nope", None).0, "HTTP/1.1 404 Not Found");
    let head = raw(
        http,
        "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
    );
    assert!(
        head.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"),
        "{head}"
    );
    assert_eq!(header(&head, "allow"), Some("GET"));
    let head = raw(http, "GET /boards/board HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(
        header(&head, "content-type"),
        Some("text/html; charset=utf-8")
    );
    let head = raw(http, "GET /ws/boards/board?n=0 HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{head}");
    let head = raw(http, "NONSENSE\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{head}");
}

#[test]
fn requirepass_asks_for_a_bearer_token() {
    let http = free_port();
    let srv = TestServer::start(&[
        "--config",
        &format!("http-port={http}"),
        "--config",
        "requirepass=s3cret",
    ]);
    assert_eq!(get(http, "/metrics", None).0, "HTTP/1.1 401 Unauthorized");
    let head = raw(http, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(
        header(&head, "www-authenticate"),
        Some("Bearer realm=\"rostrum\"")
    );
    assert_eq!(
        get(http, "/metrics", Some("wrong")).0,
        "HTTP/1.1 401 Unauthorized"
    );
    let (status, body) = get(http, "/metrics", Some("s3cret"));
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(body.contains("redis_up 1"));
    // A browser's WebSocket passes the token in the query.
    assert!(tungstenite::connect(format!("ws://127.0.0.1:{http}/ws/boards/b?n=3")).is_err());
    let (mut ws, _) = tungstenite::connect(format!(
        "ws://127.0.0.1:{http}/ws/boards/b?n=3&access_token=s3cret"
    ))
    .expect("a WebSocket with the token");
    if let tungstenite::stream::MaybeTlsStream::Plain(s) = ws.get_ref() {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    }
    assert_eq!(
        next_text(&mut ws),
        r#"{"type":"snapshot","key":"b","version":1,"entries":[]}"#
    );
    drop(srv);
}

/// The next text message of a WebSocket.
fn next_text(
    ws: &mut tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<TcpStream>>,
) -> String {
    loop {
        match ws.read().expect("a WebSocket message") {
            tungstenite::Message::Text(t) => return t.as_str().to_string(),
            tungstenite::Message::Ping(_) | tungstenite::Message::Pong(_) => continue,
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[test]
fn websocket_streams_the_snapshot_and_diffs_as_json() {
    let http = free_port();
    let srv = TestServer::start(&["--config", &format!("http-port={http}")]);
    let mut c = srv.conn();
    let submit = |c: &mut redis::Connection, m: &str, s: i64| {
        let _: redis::Value = redis::cmd("LB.SUBMIT")
            .arg("live board")
            .arg(m)
            .arg(s)
            .query(c)
            .unwrap();
    };
    submit(&mut c, "ann", 10);
    submit(&mut c, "bob", 20);
    let (mut ws, _) = tungstenite::connect(format!(
        "ws://127.0.0.1:{http}/ws/boards/live%20board?n=2&interval=20"
    ))
    .expect("a WebSocket");
    if let tungstenite::stream::MaybeTlsStream::Plain(s) = ws.get_ref() {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    }
    assert_eq!(
        next_text(&mut ws),
        r#"{"type":"snapshot","key":"live board","version":1,"entries":[[1,"bob",20],[2,"ann",10]]}"#
    );
    // A RESP watcher of the same (board, n, interval) shares the group.
    let mut w = srv.conn();
    let snap: redis::Value = redis::cmd("LB.WATCH")
        .arg("live board")
        .arg(2)
        .arg("INTERVAL")
        .arg(20)
        .query(&mut w)
        .unwrap();
    assert!(format!("{snap:?}").contains("bob"));
    let (_, metrics) = get(http, "/metrics", None);
    assert_eq!(sample(&metrics, "rostrum_live_groups"), Some(1.0));
    assert_eq!(
        sample(
            &metrics,
            "rostrum_board_watchers{db=\"0\",key=\"live board\"}"
        ),
        Some(2.0)
    );
    submit(&mut c, "cat", 15);
    assert_eq!(
        next_text(&mut ws),
        r#"{"type":"diff","key":"live board","version":2,"entries":[[2,"cat",15]]}"#
    );
    let _: i64 = redis::cmd("DEL").arg("live board").query(&mut c).unwrap();
    assert_eq!(
        next_text(&mut ws),
        r#"{"type":"diff","key":"live board","version":3,"entries":[[1,null],[2,null]]}"#
    );
    ws.close(None).ok();
    // Bad parameters are refused before the upgrade.
    assert!(tungstenite::connect(format!("ws://127.0.0.1:{http}/ws/boards/x?n=0")).is_err());
    // The page is served from the binary.
    let (status, page) = get(http, "/boards/live%20board?n=5", None);
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(page.contains("new WebSocket") && page.contains("/ws/boards/"));
}

#[test]
fn websocket_gets_a_snapshot_of_each_new_period() {
    let http = free_port();
    let srv = TestServer::start(&["--config", &format!("http-port={http}")]);
    let mut c = srv.conn();
    let run = |c: &mut redis::Connection, args: &[&str]| {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        let _: redis::Value = cmd.query(c).unwrap();
    };
    // Just after a boundary of EVERY 3000, so that the steps before the
    // rollover have most of a period.
    let since = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
            % 3000
    };
    while !(50..400).contains(&since()) {
        std::thread::sleep(Duration::from_millis(10));
    }
    run(&mut c, &["LB.CREATE", "s", "RESET", "EVERY", "3000"]);
    run(&mut c, &["LB.SUBMIT", "s", "ann", "10"]);
    let (mut ws, _) =
        tungstenite::connect(format!("ws://127.0.0.1:{http}/ws/boards/s?n=2&interval=20"))
            .expect("a WebSocket");
    if let tungstenite::stream::MaybeTlsStream::Plain(s) = ws.get_ref() {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    }
    assert_eq!(
        next_text(&mut ws),
        r#"{"type":"snapshot","key":"s","version":1,"period":1,"entries":[[1,"ann",10]]}"#
    );
    run(&mut c, &["LB.SUBMIT", "s", "bob", "20"]);
    assert_eq!(
        next_text(&mut ws),
        r#"{"type":"diff","key":"s","version":2,"entries":[[1,"bob",20],[2,"ann",10]]}"#
    );
    // The timer rolls the board over at the boundary.
    assert_eq!(
        next_text(&mut ws),
        r#"{"type":"snapshot","key":"s","version":3,"period":2,"entries":[]}"#
    );
    run(&mut c, &["LB.SUBMIT", "s", "cat", "1"]);
    assert_eq!(
        next_text(&mut ws),
        r#"{"type":"diff","key":"s","version":4,"entries":[[1,"cat",1]]}"#
    );
    run(&mut c, &["LB.RESET", "s"]);
    assert_eq!(
        next_text(&mut ws),
        r#"{"type":"snapshot","key":"s","version":5,"period":3,"entries":[]}"#
    );
    ws.close(None).ok();
}

#[test]
fn a_websocket_that_never_reads_is_cut_off_while_another_keeps_up() {
    let http = free_port();
    let srv = TestServer::start(&["--config", &format!("http-port={http}")]);
    let mut c = srv.conn();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("client-output-buffer-limit")
        .arg("pubsub 2mb 0 0")
        .query(&mut c)
        .unwrap();
    // 1,000 entries with long names: moving the last to the top changes
    // every place, about 500 KB a message.
    let _: () = redis::cmd("LB.CREATE")
        .arg("wide")
        .arg("POLICY")
        .arg("SET")
        .query(&mut c)
        .unwrap();
    let name = |i: i64| format!("{i:0>480}");
    let mut p = redis::pipe();
    for i in 0..1000 {
        p.cmd("LB.SUBMIT").arg("wide").arg(name(i)).arg(i).ignore();
    }
    let _: () = p.query(&mut c).unwrap();
    let path = "/ws/boards/wide?n=1000&interval=10";
    // The slow one upgrades, then never reads.
    let mut slow = TcpStream::connect(("127.0.0.1", http)).unwrap();
    slow.write_all(
        format!(
            "GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        .as_bytes(),
    )
    .unwrap();
    let (mut fast, _) =
        tungstenite::connect(format!("ws://127.0.0.1:{http}{path}")).expect("a WebSocket");
    if let tungstenite::stream::MaybeTlsStream::Plain(s) = fast.get_ref() {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    }
    assert!(next_text(&mut fast).starts_with(r#"{"type":"snapshot","key":"wide","version":1,"#));
    let seen = Arc::new(AtomicU64::new(1));
    let seen_by_reader = seen.clone();
    let reader = std::thread::spawn(move || {
        let mut version = 1;
        loop {
            let m = next_text(&mut fast);
            let v: u64 = m
                .split("\"version\":")
                .nth(1)
                .and_then(|r| r.split(',').next())
                .and_then(|v| v.parse().ok())
                .expect("a version");
            assert_eq!(v, version + 1, "the fast watcher missed nothing");
            version = v;
            seen_by_reader.store(version, Ordering::Release);
            if m.contains(r#"[1,"end",1000000000]"#) {
                return version;
            }
        }
    });
    let cut = || {
        let (_, m) = get(http, "/metrics", None);
        sample(&m, "rostrum_live_limit_disconnections_total").unwrap_or(0.0) >= 1.0
    };
    // Each step waits for the fast watcher's message, so that each is one
    // message of ~500 KB to the slow one.
    let mut steps = 0u64;
    while !cut() {
        assert!(
            steps < 400,
            "the slow watcher is still on after {steps} diffs"
        );
        let _: () = redis::cmd("LB.SUBMIT")
            .arg("wide")
            .arg(name(steps as i64))
            .arg(10_000 + steps)
            .query(&mut c)
            .unwrap();
        steps += 1;
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while seen.load(Ordering::Acquire) < steps + 1 {
            assert!(
                std::time::Instant::now() < deadline,
                "the fast watcher fell behind"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let _: () = redis::cmd("LB.SUBMIT")
        .arg("wide")
        .arg("end")
        .arg(1_000_000_000)
        .query(&mut c)
        .unwrap();
    assert!(reader.join().expect("reader") > steps);
    // The slow one's socket ends after what the kernel held for it.
    slow.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match slow.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => panic!("the slow watcher's socket did not end: {e}"),
        }
    }
    let (_, m) = get(http, "/metrics", None);
    assert_eq!(
        sample(&m, "rostrum_live_limit_disconnections_total"),
        Some(1.0),
        "only the slow one was cut off"
    );
}
