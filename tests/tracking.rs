//! Client-side caching (CLIENT TRACKING) on raw sockets: default mode in
//! RESP3 (own writes, other clients' writes, MULTI, FLUSHALL's null),
//! BCAST with prefixes and NOLOOP, OPTIN / OPTOUT with CLIENT CACHING,
//! RESP2 REDIRECT through `__redis__:invalidate`, a broken redirect,
//! every CLIENT TRACKING error line, `tracking-table-max-keys` and expiry.
//!
//! Each scenario runs on Rostrum and, when `redis-server` is in PATH, on a
//! redis-server started here: the two transcripts (client ids masked) must
//! be the same bytes. Without redis-server the test checks Rostrum alone
//! (and fails under `CI=true`).
mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::redis_server::RedisServer;
use common::TestServer;

/// The end of the RESP2/RESP3 frame starting at `i`, if it is complete.
fn frame_end(b: &[u8], i: usize) -> Option<usize> {
    let line_end = i + b.get(i..)?.windows(2).position(|w| w == b"\r\n")?;
    let head = std::str::from_utf8(&b[i + 1..line_end]).ok()?;
    let next = line_end + 2;
    match *b.get(i)? {
        b'$' | b'!' | b'=' => {
            let n: i64 = head.parse().ok()?;
            if n < 0 {
                return Some(next);
            }
            let end = next + n as usize + 2;
            (b.len() >= end).then_some(end)
        }
        t @ (b'*' | b'~' | b'>' | b'%' | b'|') => {
            let n: i64 = head.parse().ok()?;
            let items = if matches!(t, b'%' | b'|') { 2 * n } else { n };
            let mut at = next;
            for _ in 0..items.max(0) {
                at = frame_end(b, at)?;
            }
            Some(at)
        }
        _ => Some(next),
    }
}

/// Complete frames in `b`.
fn frames(b: &[u8]) -> usize {
    let (mut n, mut at) = (0, 0);
    while at < b.len() {
        match frame_end(b, at) {
            Some(e) => {
                n += 1;
                at = e;
            }
            None => break,
        }
    }
    n
}

/// One raw connection of a scenario.
struct Conn {
    s: TcpStream,
    pending: Vec<u8>,
}

impl Conn {
    fn open(port: u16) -> Conn {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_millis(50))).ok();
        Conn {
            s,
            pending: Vec::new(),
        }
    }

    /// Sends commands without reading.
    fn send(&mut self, cmds: &[&[&str]]) {
        let mut req = Vec::new();
        for args in cmds {
            req.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
            for a in *args {
                req.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
            }
        }
        self.s.write_all(&req).expect("write");
    }

    /// Reads until `n` complete frames arrived (at most 5 s).
    fn read(&mut self, n: usize) -> Vec<u8> {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut buf = [0u8; 65536];
        while frames(&self.pending) < n && Instant::now() < deadline {
            match self.s.read(&mut buf) {
                Ok(0) => break,
                Ok(k) => self.pending.extend_from_slice(&buf[..k]),
                Err(_) => {}
            }
        }
        let mut end = 0;
        for _ in 0..n {
            match frame_end(&self.pending, end) {
                Some(e) => end = e,
                None => break,
            }
        }
        self.pending.drain(..end).collect()
    }

    /// Sends commands and reads `n` frames.
    fn ask(&mut self, cmds: &[&[&str]], n: usize) -> Vec<u8> {
        self.send(cmds);
        self.read(n)
    }

    /// Whether nothing more arrives within a short while.
    fn quiet(&mut self) -> bool {
        std::thread::sleep(Duration::from_millis(100));
        let mut buf = [0u8; 1024];
        match self.s.read(&mut buf) {
            Ok(k) => {
                self.pending.extend_from_slice(&buf[..k]);
                self.pending.is_empty()
            }
            Err(_) => self.pending.is_empty(),
        }
    }

    /// CLIENT ID.
    fn id(&mut self) -> String {
        let r = self.ask(&[&["CLIENT", "ID"]], 1);
        String::from_utf8_lossy(&r[1..r.len() - 2]).into_owned()
    }

    /// HELLO 3 (its reply, which names the server's id, is dropped).
    fn resp3(&mut self) {
        self.ask(&[&["HELLO", "3"]], 1);
    }
}

/// A transcript: what each step read, one per line, with client ids
/// replaced by names.
#[derive(Default)]
struct Transcript {
    text: Vec<u8>,
    ids: Vec<(String, &'static str)>,
}

impl Transcript {
    fn add(&mut self, step: &str, bytes: Vec<u8>) {
        let mut shown = String::from_utf8_lossy(&bytes).into_owned();
        for (id, name) in &self.ids {
            shown = shown.replace(&format!(":{id}\r\n"), &format!(":<{name}>\r\n"));
        }
        self.text
            .extend_from_slice(format!("{step}: {shown:?}\n").as_bytes());
    }

    fn name(&mut self, id: String, name: &'static str) {
        self.ids.push((id, name));
    }
}

/// Runs `scenario` on Rostrum and, if installed, redis-server; asserts
/// the transcripts are equal and returns Rostrum's.
fn compare(scenario: fn(u16) -> Transcript) -> String {
    let srv = TestServer::start(&[]);
    let ours = String::from_utf8_lossy(&scenario(srv.port).text).into_owned();
    if let Some(redis) = RedisServer::start() {
        let theirs = String::from_utf8_lossy(&scenario(redis.port).text).into_owned();
        assert_eq!(ours, theirs, "Rostrum (left) and redis-server (right)");
    }
    ours
}

const INV_K: &str = ">2\\r\\n$10\\r\\ninvalidate\\r\\n*1\\r\\n$1\\r\\nk\\r\\n";

fn default_mode(port: u16) -> Transcript {
    let mut t = Transcript::default();
    let (mut a, mut b) = (Conn::open(port), Conn::open(port));
    a.resp3();
    t.add("on", a.ask(&[&["CLIENT", "TRACKING", "ON"]], 1));
    t.add("get", a.ask(&[&["GET", "k"]], 1));
    t.add("own set", a.ask(&[&["SET", "k", "v"]], 2));
    t.add("get", a.ask(&[&["GET", "k"]], 1));
    t.add("pipeline", a.ask(&[&["SET", "k", "v"], &["GET", "k"]], 3));
    t.add("mget", a.ask(&[&["MGET", "k", "k2"]], 1));
    t.add("other mset", b.ask(&[&["MSET", "k", "1", "k2", "2"]], 1));
    t.add("pushed", a.read(2));
    t.add("info", a.ask(&[&["CLIENT", "TRACKINGINFO"]], 1));
    t.add("getredir", a.ask(&[&["CLIENT", "GETREDIR"]], 1));
    t.add("other info", b.ask(&[&["CLIENT", "TRACKINGINFO"]], 1));
    t.add("get", a.ask(&[&["GET", "k"]], 1));
    t.add(
        "other db",
        b.ask(&[&["SELECT", "3"], &["SET", "k", "x"]], 2),
    );
    t.add("pushed", a.read(1));
    t.add("get", a.ask(&[&["GET", "k"]], 1));
    t.add("flushall", b.ask(&[&["FLUSHALL"]], 1));
    t.add("pushed", a.read(1));
    t.add("own flushdb", a.ask(&[&["FLUSHDB"], &["PING"]], 3));
    t.add("get", a.ask(&[&["GET", "k"]], 1));
    let multi: &[&[&str]] = &[
        &["MULTI"],
        &["SET", "k", "1"],
        &["GET", "k"],
        &["SET", "k", "2"],
        &["EXEC"],
        &["PING"],
    ];
    t.add("multi", a.ask(multi, 8));
    t.add("read-only commands", {
        let reads: &[&[&str]] = &[
            &["GET", "r1"],
            &["EXISTS", "r2"],
            &["TYPE", "r3"],
            &["STRLEN", "r4"],
            &["EVAL_RO", "redis.call('get','r6') return 1", "1", "r5"],
            &["EVAL", "return 1", "0"],
        ];
        a.ask(reads, 6)
    });
    b.ask(&[&["SELECT", "0"]], 1);
    let mset = &[
        "MSET", "r1", "1", "r2", "1", "r3", "1", "r4", "1", "r5", "1", "r6", "1",
    ];
    t.add("mset", b.ask(&[mset], 1));
    t.add("pushed", a.read(5));
    let scripts: &[&[&str]] = &[
        &[
            "EVAL",
            "redis.call('get',KEYS[1]) redis.call('set',KEYS[1],'x') return 1",
            "1",
            "s1",
        ],
        &[
            "EVAL",
            "redis.call('set',KEYS[1],'x') redis.call('get',KEYS[1]) return 1",
            "1",
            "s2",
        ],
        &["EVAL_RO", "return 1", "1", "s3"],
    ];
    t.add("scripts", a.ask(scripts, 4));
    t.add(
        "mset",
        b.ask(&[&["MSET", "s1", "1", "s2", "1", "s3", "1"]], 1),
    );
    t.add("pushed", a.read(1));
    // Pipelined calls on one board run together; the board is still
    // remembered once.
    let zscores: &[&[&str]] = &[
        &["ZSCORE", "board", "a"],
        &["ZSCORE", "board", "b"],
        &["ZSCORE", "board", "c"],
        &["ZRANK", "board", "a"],
    ];
    t.add("zscores", a.ask(zscores, 4));
    t.add("zadd", b.ask(&[&["ZADD", "board", "1", "a"]], 1));
    t.add("pushed", a.read(1));
    let reply_off: &[&[&str]] = &[
        &["CLIENT", "REPLY", "OFF"],
        &["GET", "q"],
        &["SET", "q", "1"],
        &["CLIENT", "REPLY", "ON"],
    ];
    t.add("pushes with replies off", a.ask(reply_off, 2));
    t.add("off", a.ask(&[&["CLIENT", "TRACKING", "OFF"]], 1));
    t.add("quiet", vec![a.quiet() as u8 + b'0']);
    t
}

#[test]
fn default_mode_sends_one_invalidation_per_reader_after_the_reply() {
    let t = compare(default_mode);
    assert!(t.contains(&format!("own set: \"+OK\\r\\n{INV_K}\"")), "{t}");
    assert!(
        t.contains("flushall: \"+OK\\r\\n\"\npushed: \">2\\r\\n$10\\r\\ninvalidate\\r\\n_\\r\\n\"")
    );
    assert!(t.contains("quiet: \"1\""), "{t}");
}

fn bcast(port: u16) -> Transcript {
    let mut t = Transcript::default();
    let (mut a, mut n, mut w) = (Conn::open(port), Conn::open(port), Conn::open(port));
    a.resp3();
    n.resp3();
    let on = &[
        "CLIENT", "TRACKING", "on", "bcast", "prefix", "user:", "prefix", "obj:",
    ];
    t.add("a on", a.ask(&[on], 1));
    t.add(
        "n on",
        n.ask(&[&["CLIENT", "TRACKING", "on", "bcast", "noloop"]], 1),
    );
    t.add("info", a.ask(&[&["CLIENT", "TRACKINGINFO"]], 1));
    let mset = &[
        "MSET", "user:1", "a", "obj:2", "b", "other", "c", "user:3", "d",
    ];
    t.add("w mset", w.ask(&[mset], 1));
    t.add("a got", a.read(2));
    t.add("n got", n.read(1));
    let own: &[&[&str]] = &[
        &["SET", "user:1", "x"],
        &["SET", "user:2", "y"],
        &["GET", "user:1"],
    ];
    t.add("a pipeline", a.ask(own, 4));
    t.add("n got", n.read(1));
    t.add("n own", n.ask(&[&["MSET", "zz", "1", "user:1", "2"]], 1));
    t.add("a got", a.read(1));
    t.add("n quiet", vec![n.quiet() as u8 + b'0']);
    t.add("flushall", w.ask(&[&["FLUSHALL"]], 1));
    t.add("a got", a.read(1));
    t.add("n got", n.read(1));
    t.add(
        "prefixes",
        w.ask(&[&["INFO", "stats"]], 1)
            .windows(25)
            .any(|x| x == b"tracking_total_prefixes:3")
            .to_string()
            .into_bytes(),
    );
    t
}

#[test]
fn bcast_sends_keys_under_prefixes_and_noloop_skips_own_changes() {
    let t = compare(bcast);
    assert!(t.contains("a got: \">2\\r\\n$10\\r\\ninvalidate\\r\\n*1\\r\\n$5\\r\\nobj:2\\r\\n>2\\r\\n$10\\r\\ninvalidate\\r\\n*2\\r\\n$6\\r\\nuser:1\\r\\n$6\\r\\nuser:3\\r\\n\""), "{t}");
    assert!(t.contains("n quiet: \"1\""), "{t}");
    assert!(t.contains("prefixes: \"true\""), "{t}");
}

fn optin_optout(port: u16) -> Transcript {
    let mut t = Transcript::default();
    let (mut a, mut w) = (Conn::open(port), Conn::open(port));
    a.resp3();
    t.add("optin", a.ask(&[&["CLIENT", "TRACKING", "on", "optin"]], 1));
    t.add("get", a.ask(&[&["GET", "o1"]], 1));
    let steps: &[&[&str]] = &[
        &["CLIENT", "CACHING", "yes"],
        &["GET", "o2"],
        &["GET", "o3"],
    ];
    t.add("caching get get", a.ask(steps, 3));
    let steps: &[&[&str]] = &[
        &["CLIENT", "CACHING", "yes"],
        &["CLIENT", "ID"],
        &["GET", "o4"],
    ];
    a.send(steps);
    a.read(3);
    let steps: &[&[&str]] = &[
        &["CLIENT", "CACHING", "yes"],
        &["MULTI"],
        &["GET", "o5"],
        &["GET", "o6"],
        &["EXEC"],
        &["GET", "o7"],
    ];
    t.add("multi", a.ask(steps, 6));
    t.add(
        "info",
        a.ask(
            &[&["CLIENT", "CACHING", "yes"], &["CLIENT", "TRACKINGINFO"]],
            2,
        ),
    );
    t.add("ping", a.ask(&[&["PING"], &["GET", "o8"]], 2));
    let mset = &[
        "MSET", "o1", "1", "o2", "1", "o3", "1", "o4", "1", "o5", "1", "o6", "1", "o7", "1", "o8",
        "1",
    ];
    t.add("mset", w.ask(&[mset], 1));
    t.add("pushed", a.read(4));
    t.add("off", a.ask(&[&["CLIENT", "TRACKING", "off"]], 1));
    t.add(
        "optout",
        a.ask(&[&["CLIENT", "TRACKING", "on", "optout"]], 1),
    );
    let steps: &[&[&str]] = &[
        &["GET", "p1"],
        &["CLIENT", "CACHING", "no"],
        &["GET", "p2"],
        &["GET", "p3"],
    ];
    t.add("reads", a.ask(steps, 4));
    t.add(
        "mset",
        w.ask(&[&["MSET", "p1", "1", "p2", "1", "p3", "1"]], 1),
    );
    t.add("pushed", a.read(2));
    t
}

#[test]
fn optin_and_optout_follow_client_caching() {
    let t = compare(optin_optout);
    assert!(t.contains("*1\\r\\n$2\\r\\no2\\r\\n"), "{t}");
    assert!(!t.contains("*1\\r\\n$2\\r\\no3\\r\\n"), "{t}");
    assert!(!t.contains("*1\\r\\n$2\\r\\np2\\r\\n"), "{t}");
}

fn redirect(port: u16) -> Transcript {
    let mut t = Transcript::default();
    let (mut a, mut b, mut w) = (Conn::open(port), Conn::open(port), Conn::open(port));
    let bid = b.id();
    t.name(bid.clone(), "b");
    t.add(
        "twice",
        a.ask(
            &[&[
                "CLIENT", "TRACKING", "on", "redirect", &bid, "redirect", &bid,
            ]],
            1,
        ),
    );
    t.add(
        "on",
        a.ask(&[&["CLIENT", "TRACKING", "on", "redirect", &bid]], 1),
    );
    t.add("getredir", a.ask(&[&["CLIENT", "GETREDIR"]], 1));
    t.add("info", a.ask(&[&["CLIENT", "TRACKINGINFO"]], 1));
    t.add("get", a.ask(&[&["GET", "k"]], 1));
    t.add("set", w.ask(&[&["SET", "k", "1"]], 1));
    t.add("b not subscribed", vec![b.quiet() as u8 + b'0']);
    t.add(
        "subscribe",
        b.ask(&[&["SUBSCRIBE", "__redis__:invalidate"]], 1),
    );
    t.add("get", a.ask(&[&["GET", "k"]], 1));
    t.add("set", w.ask(&[&["SET", "k", "2"]], 1));
    t.add("b got", b.read(1));
    t.add("get", a.ask(&[&["GET", "k"]], 1));
    t.add("own set", a.ask(&[&["SET", "k", "3"]], 1));
    t.add("b got", b.read(1));
    t.add("flushall", w.ask(&[&["FLUSHALL"]], 1));
    t.add("b got", b.read(1));
    drop(b);
    let gone = Instant::now() + Duration::from_secs(5);
    while Instant::now() < gone && w.ask(&[&["CLIENT", "LIST", "ID", &bid]], 1).len() > 6 {
        std::thread::sleep(Duration::from_millis(10));
    }
    t.add("get", a.ask(&[&["GET", "k"]], 1));
    t.add("set", w.ask(&[&["SET", "k", "4"]], 1));
    t.add("resp2 a quiet", vec![a.quiet() as u8 + b'0']);
    t.add("info", a.ask(&[&["CLIENT", "TRACKINGINFO"]], 1));
    let info = a.ask(&[&["CLIENT", "INFO"]], 1);
    t.add(
        "flags",
        vec![info.windows(8).any(|x| x == b"flags=tR") as u8 + b'0'],
    );
    a.resp3();
    t.add("get", a.ask(&[&["GET", "k"]], 1));
    t.add("set", w.ask(&[&["SET", "k", "5"]], 1));
    t.add("a got", a.read(1));
    t.add("own set", a.ask(&[&["SET", "k", "6"]], 2));
    t.add(
        "on again",
        a.ask(
            &[&["CLIENT", "TRACKING", "on"], &["CLIENT", "TRACKINGINFO"]],
            2,
        ),
    );
    t
}

#[test]
fn redirect_to_a_resp2_subscriber_and_broken_redirect() {
    let t = compare(redirect);
    assert!(t.contains("b got: \"*3\\r\\n$7\\r\\nmessage\\r\\n$20\\r\\n__redis__:invalidate\\r\\n*1\\r\\n$1\\r\\nk\\r\\n\""), "{t}");
    assert!(
        t.contains(
            "b got: \"*3\\r\\n$7\\r\\nmessage\\r\\n$20\\r\\n__redis__:invalidate\\r\\n$-1\\r\\n\""
        ),
        "{t}"
    );
    assert!(
        t.contains("a got: \">2\\r\\n$21\\r\\ntracking-redir-broken\\r\\n:<b>\\r\\n\""),
        "{t}"
    );
    assert!(t.contains("flags: \"1\""), "{t}");
}

fn errors(port: u16) -> Transcript {
    let mut t = Transcript::default();
    let mut a = Conn::open(port);
    let cases: &[&[&str]] = &[
        &["CLIENT", "TRACKING"],
        &["CLIENT", "TRACKING", "maybe"],
        &["CLIENT", "TRACKING", "on", "foo"],
        &["CLIENT", "TRACKING", "on", "prefix", "a"],
        &["CLIENT", "TRACKING", "on", "bcast", "optin"],
        &["CLIENT", "TRACKING", "on", "optin", "optout"],
        &["CLIENT", "TRACKING", "on", "redirect", "99999"],
        &["CLIENT", "TRACKING", "on", "redirect", "0"],
        &["CLIENT", "TRACKING", "on", "redirect", "-1"],
        &["CLIENT", "TRACKING", "on", "redirect", "abc"],
        &["CLIENT", "TRACKING", "on", "redirect"],
        &["CLIENT", "TRACKING", "on", "prefix"],
        &[
            "CLIENT", "TRACKING", "on", "bcast", "prefix", "ab", "prefix", "a",
        ],
        &[
            "CLIENT", "TRACKING", "on", "bcast", "prefix", "a", "prefix", "ab",
        ],
        &[
            "CLIENT", "TRACKING", "on", "bcast", "prefix", "a", "prefix", "a",
        ],
        &[
            "CLIENT", "TRACKING", "on", "bcast", "prefix", "a", "prefix", "b",
        ],
        &["CLIENT", "TRACKING", "on", "bcast", "prefix", "abc"],
        &["CLIENT", "TRACKING", "on", "bcast", "prefix", "b"],
        &["CLIENT", "TRACKING", "on", "bcast", "prefix", "c", "noloop"],
        &["CLIENT", "TRACKING", "on"],
        &["CLIENT", "TRACKING", "on", "bcast"],
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "CACHING", "yes"],
        &["CLIENT", "TRACKING", "off", "foo"],
        &[
            "CLIENT", "TRACKING", "off", "prefix", "x", "optin", "optout",
        ],
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "CACHING", "yes"],
        &["CLIENT", "CACHING"],
        &["CLIENT", "CACHING", "yes", "no"],
        &["CLIENT", "TRACKING", "on", "optin"],
        &["CLIENT", "CACHING", "no"],
        &["CLIENT", "CACHING", "maybe"],
        &["CLIENT", "CACHING", "yes"],
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "TRACKING", "on", "optout"],
        &["CLIENT", "TRACKING", "on", "bcast"],
        &["CLIENT", "TRACKING", "on", "optin", "noloop"],
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "TRACKING", "off"],
        &["CLIENT", "TRACKING", "on", "optout"],
        &["CLIENT", "CACHING", "yes"],
        &["CLIENT", "CACHING", "no"],
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "GETREDIR", "x"],
        &["CLIENT", "TRACKINGINFO", "x"],
        &["CLIENT", "TRACKING", "off"],
        &["CLIENT", "TRACKING", "on", "BCAST", "prefix", ""],
        &["CLIENT", "TRACKING", "on", "BCAST", "prefix", "a"],
        &["CLIENT", "TRACKING", "off"],
        &[
            "CLIENT", "TRACKING", "on", "BCAST", "prefix", "a", "prefix", "",
        ],
        &["CLIENT", "GETREDIR"],
    ];
    for c in cases {
        t.add(&c.join(" "), a.ask(&[c], 1));
    }
    t.add("resp3 info", {
        a.resp3();
        a.ask(&[&["CLIENT", "TRACKINGINFO"]], 1)
    });
    t
}

#[test]
fn every_client_tracking_error_line() {
    let t = compare(errors);
    assert!(
        t.contains("Prefixes for a single client must not overlap"),
        "{t}"
    );
    assert!(
        t.contains("-ERR You can't specify both OPTIN mode and OPTOUT mode"),
        "{t}"
    );
}

/// A RESP3 tracking client on `port`.
fn tracker(port: u16) -> Conn {
    let mut a = Conn::open(port);
    a.resp3();
    assert_eq!(a.ask(&[&["CLIENT", "TRACKING", "on"]], 1), b"+OK\r\n");
    a
}

fn info_field(c: &mut Conn, section: &str, field: &str) -> String {
    let text = String::from_utf8_lossy(&c.ask(&[&["INFO", section]], 1)).into_owned();
    text.split("\r\n")
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_string))
        .unwrap_or_default()
}

/// `tracking-table-max-keys`: reading past it evicts random keys from the
/// table, each with its invalidation, after the reply.
fn table_limit(port: u16) -> (Vec<u8>, String, String) {
    let mut w = Conn::open(port);
    let mut a = tracker(port);
    w.ask(&[&["CONFIG", "SET", "tracking-table-max-keys", "2"]], 1);
    let r = a.ask(&[&["MGET", "a", "b", "c", "d", "e"]], 4);
    let keys = info_field(&mut w, "stats", "tracking_total_keys");
    let clients = info_field(&mut w, "clients", "tracking_clients");
    (r, keys, clients)
}

#[test]
fn table_limit_evicts_keys_with_their_invalidations() {
    let srv = TestServer::start(&[]);
    let mut all = vec![table_limit(srv.port)];
    if let Some(redis) = RedisServer::start() {
        all.push(table_limit(redis.port));
    }
    for (r, keys, clients) in all {
        let text = String::from_utf8_lossy(&r).into_owned();
        assert!(
            text.starts_with("*5\r\n_\r\n_\r\n_\r\n_\r\n_\r\n>2\r\n"),
            "{text}"
        );
        assert_eq!(text.matches("invalidate").count(), 3, "{text}");
        assert_eq!((keys.as_str(), clients.as_str()), ("2", "1"));
    }
    let mut c = Conn::open(srv.port);
    let r = c.ask(&[&["CONFIG", "GET", "tracking-table-max-keys"]], 1);
    assert_eq!(r, b"*2\r\n$23\r\ntracking-table-max-keys\r\n$1\r\n2\r\n");
    let r = c.ask(&[&["CONFIG", "SET", "tracking-table-max-keys", "-1"]], 1);
    assert!(r.starts_with(b"-ERR CONFIG SET failed"), "{r:?}");
}

#[test]
fn expired_keys_are_invalidated() {
    let srv = TestServer::start(&[]);
    let mut w = Conn::open(srv.port);
    let mut a = tracker(srv.port);
    w.ask(&[&["SET", "k", "1", "PX", "50"]], 1);
    assert_eq!(a.ask(&[&["GET", "k"]], 1), b"$1\r\n1\r\n");
    // The active expiry cycle removes it and tells the reader.
    let got = a.read(1);
    assert_eq!(got, INV_K.replace("\\r\\n", "\r\n").as_bytes());
    // A write that finds it expired does too.
    w.ask(&[&["SET", "j", "1", "PX", "30"]], 1);
    a.ask(&[&["GET", "j"]], 1);
    std::thread::sleep(Duration::from_millis(40));
    w.ask(&[&["CONFIG", "SET", "hz", "1"]], 1);
    w.ask(&[&["APPEND", "j", "x"]], 1);
    let got = a.read(1);
    assert!(got.ends_with(b"$1\r\nj\r\n"), "{got:?}");
}

/// The `redis` crate's client-side cache (RESP3, `cache-aio`): a cached
/// GET is answered locally until another client's write invalidates it.
#[tokio::test]
async fn redis_crate_cache_is_invalidated_by_another_clients_write() {
    use redis::caching::CacheConfig;
    use redis::{AsyncCommands, AsyncConnectionConfig};
    let srv = TestServer::start(&[]);
    let client = redis::Client::open(format!("{}?protocol=resp3", srv.url())).expect("client");
    let config = AsyncConnectionConfig::new().set_cache_config(CacheConfig::new());
    let mut cached = client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .expect("connect with a cache");
    let mut writer = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let _: () = writer.set("k", "1").await.expect("SET");
    let stats = |c: &redis::aio::MultiplexedConnection| {
        let s = c.get_cache_statistics().expect("statistics");
        (s.hit, s.miss, s.invalidate)
    };
    let v: String = cached.get("k").await.expect("GET");
    assert_eq!((v.as_str(), stats(&cached)), ("1", (0, 1, 0)));
    let v: String = cached.get("k").await.expect("GET");
    assert_eq!((v.as_str(), stats(&cached)), ("1", (1, 1, 0)));
    let _: () = writer.set("k", "2").await.expect("SET");
    let deadline = Instant::now() + Duration::from_secs(5);
    while stats(&cached).2 == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(stats(&cached), (1, 1, 1), "the invalidation arrived");
    let v: String = cached.get("k").await.expect("GET");
    assert_eq!((v.as_str(), stats(&cached)), ("2", (1, 2, 1)));
}

/// Pub/Sub through the `redis` crate's async PubSub: subscribe, receive,
/// patterns, unsubscribe.
#[tokio::test]
async fn redis_crate_async_pubsub() {
    use futures_util::StreamExt;
    use redis::AsyncCommands;
    let srv = TestServer::start(&[]);
    let client = redis::Client::open(srv.url()).expect("client");
    let mut sub = client.get_async_pubsub().await.expect("pubsub");
    let mut p = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    sub.subscribe("news").await.expect("SUBSCRIBE");
    sub.psubscribe("n*").await.expect("PSUBSCRIBE");
    let n: i64 = p.publish("news", "hello").await.expect("PUBLISH");
    assert_eq!(n, 2);
    {
        let mut stream = sub.on_message();
        let mut next = async || {
            tokio::time::timeout(Duration::from_secs(5), stream.next())
                .await
                .expect("a message within 5 s")
                .expect("the stream is open")
        };
        let m = next().await;
        assert_eq!(
            (m.get_channel_name(), m.get_payload_bytes()),
            ("news", &b"hello"[..])
        );
        let m = next().await;
        assert!(m.from_pattern());
        assert_eq!(m.get_pattern::<String>().expect("pattern"), "n*");
    }
    sub.unsubscribe("news").await.expect("UNSUBSCRIBE");
    sub.punsubscribe("n*").await.expect("PUNSUBSCRIBE");
    let n: i64 = p.publish("news", "x").await.expect("PUBLISH");
    assert_eq!(n, 0);
}
