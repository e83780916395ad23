//! MONITOR through real clients (raw sockets, `redis-cli monitor`), its
//! lines compared with redis-server 7.0's where it is installed, and the
//! output limits of normal clients and monitors, and what CLIENT LIST shows
//! of a client's buffers.
mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::redis_server::RedisServer;
use common::TestServer;

/// A command as a RESP multibulk.
fn resp(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// A raw connection reading replies line by line.
struct Raw {
    r: BufReader<TcpStream>,
}

impl Raw {
    fn connect(port: u16) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5))).ok();
        Raw {
            r: BufReader::new(s),
        }
    }

    fn send(&mut self, args: &[&str]) {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.r.get_mut().write_all(&resp(&args)).expect("write");
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        self.r.read_line(&mut l).expect("read a line");
        l
    }

    /// Sends a command whose reply is one line (`+OK`, `:1`, `-ERR ...`).
    fn call(&mut self, args: &[&str]) -> String {
        self.send(args);
        self.line()
    }

    /// Sends a command and skips its reply, whatever its shape.
    fn run(&mut self, args: &[&str]) {
        self.send(args);
        self.skip_reply();
    }

    fn skip_reply(&mut self) {
        let l = self.line();
        let n: i64 = l.get(1..).unwrap_or("").trim().parse().unwrap_or(-1);
        match l.as_bytes().first() {
            Some(b'$') | Some(b'=') if n >= 0 => {
                let mut body = vec![0; n as usize + 2];
                self.r.read_exact(&mut body).expect("bulk body");
            }
            Some(b'*') | Some(b'%') | Some(b'>') => {
                let items = if l.starts_with('%') { 2 * n } else { n };
                for _ in 0..items.max(0) {
                    self.skip_reply();
                }
            }
            _ => {}
        }
    }
}

/// Replaces a line's time and client address by fixed words, so the
/// lines of two servers compare.
fn mask(line: &str) -> String {
    let rest = line.strip_prefix('+').unwrap_or(line);
    let Some((time, rest)) = rest.split_once(" [") else {
        return line.to_string();
    };
    let (secs, micros) = time.split_once('.').unwrap_or(("", ""));
    assert!(
        secs.len() >= 10
            && micros.len() == 6
            && time.chars().all(|c| c.is_ascii_digit() || c == '.'),
        "time of {line:?}"
    );
    let (origin, args) = rest.split_once(']').expect("closing bracket");
    let (db, who) = origin.split_once(' ').expect("db and origin");
    let who = if who == "lua" { "lua" } else { "ADDR" };
    format!("+T [{db} {who}]{}", args.trim_end())
}

/// The commands both servers get, and the lines a monitor must see.
const SCRIPT: &[&[&str]] = &[
    &["set", "k", "a\"\\\n\r\t\x07\x08\x01 é"],
    &["get", "k"],
    &["nosuchcommand", "x"],
    &["get"],
    &["config", "get", "maxmemory"],
    &["client", "setname", "watched"],
    &["auth", "secret"],
    &["auth", "user", "secret"],
    &["hello", "3", "auth", "user", "secret"],
    &["hello", "2"],
    &[
        "eval",
        "redis.call('select', '4'); return redis.call('set', 'e', '1')",
        "0",
    ],
    &["multi"],
    &["select", "2"],
    &["incr", "n"],
    &["exec"],
    &["select", "0"],
    &["ping"],
];

const EXPECTED: &[&str] = &[
    "+T [0 ADDR] \"set\" \"k\" \"a\\\"\\\\\\n\\r\\t\\a\\b\\x01 \\xc3\\xa9\"",
    "+T [0 ADDR] \"get\" \"k\"",
    "+T [0 ADDR] \"client\" \"setname\" \"watched\"",
    "+T [0 ADDR] \"auth\" \"(redacted)\"",
    "+T [0 ADDR] \"auth\" \"(redacted)\" \"(redacted)\"",
    "+T [0 ADDR] \"hello\" \"3\" \"auth\" \"(redacted)\" \"(redacted)\"",
    "+T [0 ADDR] \"hello\" \"2\"",
    "+T [0 ADDR] \"eval\" \"redis.call('select', '4'); return redis.call('set', 'e', '1')\" \"0\"",
    "+T [4 lua] \"select\" \"4\"",
    "+T [4 lua] \"set\" \"e\" \"1\"",
    "+T [0 ADDR] \"multi\"",
    "+T [2 ADDR] \"select\" \"2\"",
    "+T [2 ADDR] \"incr\" \"n\"",
    "+T [2 ADDR] \"exec\"",
    "+T [0 ADDR] \"select\" \"0\"",
    "+T [0 ADDR] \"ping\"",
];

/// Runs [`SCRIPT`] on the server at `port` while a monitor watches;
/// returns the monitor's lines, masked.
fn monitored_lines(port: u16) -> Vec<String> {
    let mut mon = Raw::connect(port);
    assert_eq!(mon.call(&["monitor"]), "+OK\r\n");
    let mut c = Raw::connect(port);
    for cmd in SCRIPT {
        c.run(cmd);
    }
    (0..EXPECTED.len()).map(|_| mask(&mon.line())).collect()
}

#[test]
fn lines_match_redis() {
    let srv = TestServer::start(&[]);
    let ours = monitored_lines(srv.port);
    assert_eq!(ours, EXPECTED);
    match RedisServer::start() {
        Some(redis) => assert_eq!(monitored_lines(redis.port), ours),
        None => eprintln!("redis-server not installed: compared with the recorded lines only"),
    }
}

#[test]
fn monitor_mode_refuses_the_keyspace_and_reset_leaves_it() {
    let srv = TestServer::start(&[]);
    let mut other = srv.conn();
    let mut mon = Raw::connect(srv.port);
    assert_eq!(mon.call(&["monitor"]), "+OK\r\n");
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut other).unwrap();
    assert_eq!(list.matches("flags=O ").count(), 1, "{list}");
    assert_eq!(
        mon.call(&["get", "k"]),
        "-ERR Replica can't interact with the keyspace\r\n"
    );
    assert_eq!(
        mon.call(&["publish", "c", "m"]),
        "-ERR Replica can't interact with the keyspace\r\n"
    );
    // Its own commands are shown to it, after their replies.
    assert_eq!(mon.call(&["ping"]), "+PONG\r\n");
    assert_eq!(mask(&mon.line()), "+T [0 ADDR] \"ping\"");
    // A second MONITOR is ignored without a reply.
    mon.send(&["monitor"]);
    // Others keep working, and are watched.
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query(&mut other)
        .unwrap();
    assert_eq!(mask(&mon.line()), "+T [0 ADDR] \"SET\" \"k\" \"v\"");
    assert_eq!(mon.call(&["reset"]), "+RESET\r\n");
    mon.send(&["get", "k"]);
    assert_eq!(mon.line(), "$1\r\n");
    assert_eq!(mon.line(), "v\r\n");
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut other).unwrap();
    assert!(!list.contains("flags=O "), "{list}");
}

#[test]
fn monitor_inside_exec_is_refused_and_resp3_monitors_get_status_lines() {
    let srv = TestServer::start(&[]);
    let mut c = Raw::connect(srv.port);
    assert_eq!(c.call(&["multi"]), "+OK\r\n");
    assert_eq!(c.call(&["monitor"]), "+QUEUED\r\n");
    c.send(&["exec"]);
    assert_eq!(c.line(), "*1\r\n");
    assert_eq!(
        c.line(),
        "-ERR MONITOR isn't allowed for DENY BLOCKING client\r\n"
    );
    let mut mon = Raw::connect(srv.port);
    mon.run(&["hello", "3"]);
    assert_eq!(mon.call(&["monitor"]), "+OK\r\n");
    assert_eq!(c.call(&["set", "a", "1"]), "+OK\r\n");
    assert_eq!(mask(&mon.line()), "+T [0 ADDR] \"set\" \"a\" \"1\"");
    // QUIT's own line is not sent to a closing monitor.
    assert_eq!(mon.call(&["quit"]), "+OK\r\n");
    let mut rest = String::new();
    let _ = mon.r.read_to_string(&mut rest);
    assert_eq!(rest, "");
}

#[test]
fn redis_cli_monitor_shows_commands() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let Ok(mut cli) = Command::new("redis-cli")
        .args(["-p", &srv.port.to_string(), "monitor"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
    else {
        eprintln!("redis-cli not installed: skipped");
        return;
    };
    let mut out = BufReader::new(cli.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("OK line");
    assert_eq!(line.trim(), "OK");
    let _: () = redis::cmd("ZADD")
        .arg("board")
        .arg(5)
        .arg("ann")
        .query(&mut c)
        .unwrap();
    line.clear();
    out.read_line(&mut line).expect("monitor line");
    let _ = cli.kill();
    let _ = cli.wait();
    assert_eq!(
        mask(line.trim_end()),
        "+T [0 ADDR] \"ZADD\" \"board\" \"5\" \"ann\""
    );
}

/// Reads from `s` until the server closes it; false if it stays open
/// (reading nothing new) for `within`.
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(Duration::from_millis(200))).ok();
    let deadline = Instant::now() + within;
    let mut buf = vec![0u8; 1 << 20];
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return true,
        }
    }
    false
}

/// Big GETs pipelined by a client that reads nothing.
fn pipeline_gets(s: &mut TcpStream, n: usize) {
    let one = resp(&[b"GET", b"big"]);
    let _ = s.write_all(&one.repeat(n));
}

fn set_limit(c: &mut redis::Connection, value: &str) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("client-output-buffer-limit")
        .arg(value)
        .query(c)
        .unwrap();
}

fn client_count(c: &mut redis::Connection) -> usize {
    let list: String = redis::cmd("CLIENT").arg("LIST").query(c).unwrap();
    list.lines().count()
}

#[test]
fn a_reply_past_the_normal_hard_limit_disconnects_its_client() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    set_limit(&mut c, "normal 1mb 0 0");
    let big = vec![b'x'; 2 << 20];
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(&big)
        .query(&mut c)
        .unwrap();
    let mut greedy = srv.raw();
    pipeline_gets(&mut greedy, 20);
    assert!(closed_within(&mut greedy, Duration::from_secs(10)));
    // Others keep working; a client under the limit is served in full.
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(&big[..200_000])
        .query(&mut c)
        .unwrap();
    for _ in 0..5 {
        let v: Vec<u8> = redis::cmd("GET").arg("big").query(&mut c).unwrap();
        assert_eq!(v.len(), 200_000);
    }
    assert_eq!(client_count(&mut c), 1);
}

#[test]
fn a_client_over_the_soft_limit_for_its_seconds_is_disconnected() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    set_limit(&mut c, "normal 0 256kb 1");
    let big = vec![b'x'; 1 << 20];
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(&big)
        .query(&mut c)
        .unwrap();
    // A reader past the soft limit only for moments stays.
    for _ in 0..3 {
        let v: Vec<u8> = redis::cmd("GET").arg("big").query(&mut c).unwrap();
        assert_eq!(v.len(), 1 << 20);
        std::thread::sleep(Duration::from_millis(800));
    }
    let mut stuck = Raw::connect(srv.port);
    assert_eq!(stuck.call(&["ping"]), "+PONG\r\n");
    let mut stuck = stuck.r.into_inner();
    pipeline_gets(&mut stuck, 64);
    let start = Instant::now();
    // Watched from outside: reading would unstick it.
    while client_count(&mut c) > 1 {
        assert!(start.elapsed() < Duration::from_secs(15), "still connected");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        start.elapsed() >= Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
    assert!(closed_within(&mut stuck, Duration::from_secs(10)));
    let v: Vec<u8> = redis::cmd("GET").arg("big").query(&mut c).unwrap();
    assert_eq!(v.len(), 1 << 20);
}

#[test]
fn a_monitor_that_does_not_read_is_disconnected_at_its_limit() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    set_limit(&mut c, "normal 256kb 0 0");
    let mut mon = Raw::connect(srv.port);
    assert_eq!(mon.call(&["monitor"]), "+OK\r\n");
    let mut mon = mon.r.into_inner();
    // Enough to fill the socket's buffers, however far they grow.
    let value = vec![b'v'; 1 << 20];
    let deadline = Instant::now() + Duration::from_secs(60);
    while client_count(&mut c) > 1 {
        assert!(
            Instant::now() < deadline,
            "the monitor was not disconnected"
        );
        for _ in 0..20 {
            let _: () = redis::cmd("SET")
                .arg("k")
                .arg(&value)
                .query(&mut c)
                .unwrap();
        }
    }
    assert!(closed_within(&mut mon, Duration::from_secs(20)));
}

/// A CLIENT LIST field of the client named `name`.
fn field(list: &str, name: &str, key: &str) -> usize {
    let line = list
        .lines()
        .find(|l| l.contains(&format!(" name={name} ")))
        .unwrap_or_else(|| panic!("no client {name} in {list}"));
    line.split(' ')
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {line}"))
}

#[test]
fn client_list_shows_pending_input_and_output() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let big = vec![b'x'; 1 << 20];
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(&big)
        .query(&mut c)
        .unwrap();
    // A client that stops reading: its replies wait in the server.
    let mut stuck = Raw::connect(srv.port);
    assert_eq!(stuck.call(&["client", "setname", "stuck"]), "+OK\r\n");
    pipeline_gets(stuck.r.get_mut(), 64);
    // A client half-way through sending a command.
    let mut half = Raw::connect(srv.port);
    assert_eq!(half.call(&["client", "setname", "half"]), "+OK\r\n");
    half.r
        .get_mut()
        .write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100\r\nabc")
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut c).unwrap();
        let omem = field(&list, "stuck", "omem");
        let qbuf = field(&list, "half", "qbuf");
        if omem > 0 && qbuf > 0 {
            assert_eq!(field(&list, "stuck", "obl"), 16384);
            assert!(field(&list, "stuck", "oll") >= 1);
            assert!(list.contains("events=rw"), "{list}");
            assert_eq!(qbuf, 29);
            let info = common::info(&mut c, "clients");
            let max_out: usize = info["client_recent_max_output_buffer"].parse().unwrap();
            assert!(max_out > 0);
            break;
        }
        assert!(Instant::now() < deadline, "{list}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
