//! COMMAND DOCS and COMMAND INFO compared with a real redis-server 7.0
//! (skipped without one, failed under `CI`), byte for byte, in RESP2 and
//! RESP3, for every command and subcommand Redis has; and redis-cli's HELP
//! built from Rostrum's COMMAND DOCS.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::redis_server::RedisServer;
use common::TestServer;

/// One reply, with the bytes it was sent as.
struct Frame {
    raw: Vec<u8>,
    /// A string's text; empty for aggregates.
    text: String,
    /// An aggregate's elements (a map's keys and values alternate).
    items: Vec<Frame>,
}

/// Parses the frame at `b[*at..]`; None if it is not all there.
fn parse(b: &[u8], at: &mut usize) -> Option<Frame> {
    let start = *at;
    let eol = start + b.get(start..)?.windows(2).position(|w| w == b"\r\n")?;
    let head = std::str::from_utf8(b.get(start + 1..eol)?).ok()?;
    *at = eol + 2;
    let mut items = Vec::new();
    let mut text = head.to_string();
    match b[start] {
        b'$' | b'=' | b'!' => {
            let n: i64 = head.parse().ok()?;
            if n >= 0 {
                let end = *at + n as usize;
                text = String::from_utf8_lossy(b.get(*at..end)?).into_owned();
                b.get(end..end + 2)?;
                *at = end + 2;
            }
        }
        b'*' | b'~' | b'>' | b'%' => {
            let n: i64 = head.parse().ok()?;
            let n = if b[start] == b'%' { 2 * n } else { n };
            for _ in 0..n.max(0) {
                items.push(parse(b, at)?);
            }
            text.clear();
        }
        _ => {}
    }
    Some(Frame {
        raw: b[start..*at].to_vec(),
        text,
        items,
    })
}

/// A connection that sends commands and reads whole replies.
struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    fn open(port: u16, resp3: bool) -> Conn {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).ok();
        let mut c = Conn { s, buf: Vec::new() };
        if resp3 {
            c.call(&["HELLO", "3"]);
        }
        c
    }

    fn call(&mut self, args: &[&str]) -> Frame {
        let mut req = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            req.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        self.s.write_all(&req).expect("write");
        loop {
            let mut at = 0;
            if let Some(f) = parse(&self.buf, &mut at) {
                self.buf.drain(..at);
                return f;
            }
            let mut chunk = [0u8; 65536];
            let n = self.s.read(&mut chunk).expect("read a reply");
            assert!(n > 0, "connection closed");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// The value under `key` in a map frame.
fn field<'f>(map: &'f Frame, key: &str) -> Option<&'f Frame> {
    map.items
        .chunks(2)
        .find(|kv| kv[0].text == key)
        .and_then(|kv| kv.get(1))
}

/// Each command's and subcommand's `arguments` field (its raw bytes, or
/// empty when it has none), from one COMMAND DOCS entry.
fn arguments(name: &str, doc: &Frame, out: &mut BTreeMap<String, Vec<u8>>) {
    let raw = field(doc, "arguments").map(|a| a.raw.clone());
    out.insert(name.to_string(), raw.unwrap_or_default());
    if let Some(subs) = field(doc, "subcommands") {
        for kv in subs.items.chunks(2) {
            arguments(&kv[0].text, &kv[1], out);
        }
    }
}

/// COMMAND DOCS of each command, as `name -> arguments`.
fn docs(c: &mut Conn, names: &[String]) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for n in names {
        let reply = c.call(&["COMMAND", "DOCS", n]);
        for kv in reply.items.chunks(2) {
            arguments(&kv[0].text, &kv[1], &mut out);
        }
    }
    out
}

/// Redis's top-level command names.
fn redis_commands(c: &mut Conn) -> Vec<String> {
    let list = c.call(&["COMMAND", "LIST"]);
    let mut v: Vec<String> = list
        .items
        .iter()
        .map(|f| f.text.clone())
        .filter(|n| !n.contains('|'))
        .collect();
    v.sort();
    v
}

/// A readable form of a frame, for failure messages.
fn show(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw).replace("\r\n", " ")
}

/// COMMAND DOCS's arguments equal redis-server 7.0's, byte for byte, for
/// every command and subcommand both have, in RESP2 and RESP3.
#[test]
fn command_docs_arguments_equal_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(&[]);
    for resp3 in [false, true] {
        let mut rc = Conn::open(redis.port, resp3);
        let mut oc = Conn::open(srv.port, resp3);
        let names = redis_commands(&mut rc);
        let want = docs(&mut rc, &names);
        let got = docs(&mut oc, &names);
        let mut missing = Vec::new();
        let mut differ = Vec::new();
        for (name, w) in &want {
            match got.get(name) {
                None => missing.push(name.as_str()),
                Some(g) if g != w => differ.push(format!(
                    "{name}:\n  redis:   {}\n  rostrum: {}",
                    show(w),
                    show(g)
                )),
                Some(_) => {}
            }
        }
        eprintln!(
            "RESP{}: {} commands and subcommands compared; not in Rostrum: {missing:?}",
            if resp3 { 3 } else { 2 },
            want.len() - missing.len()
        );
        assert!(want.len() - missing.len() > 200, "too few compared");
        assert!(
            differ.is_empty(),
            "{} differ:\n{}",
            differ.len(),
            differ.join("\n")
        );
    }
}

/// Each command's and subcommand's COMMAND INFO entry, subcommands left
/// out of their container's entry, as raw fields.
fn info_entries(e: &Frame, out: &mut BTreeMap<String, Vec<Vec<u8>>>) {
    let Some(name) = e.items.first() else {
        return;
    };
    let fields = e.items.iter().take(9).map(|f| f.raw.clone()).collect();
    out.insert(name.text.clone(), fields);
    if let Some(subs) = e.items.get(9) {
        for s in &subs.items {
            info_entries(s, out);
        }
    }
}

fn info(c: &mut Conn, names: &[String]) -> BTreeMap<String, Vec<Vec<u8>>> {
    let mut out = BTreeMap::new();
    for n in names {
        let reply = c.call(&["COMMAND", "INFO", n]);
        for e in &reply.items {
            info_entries(e, &mut out);
        }
    }
    out
}

/// COMMAND INFO's fields (arity, flags, key range, categories, tips, key
/// specs) equal redis-server 7.0's for every command and subcommand both
/// have, in RESP2 and RESP3.
#[test]
fn command_info_equals_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(&[]);
    const FIELDS: [&str; 9] = [
        "name",
        "arity",
        "flags",
        "first key",
        "last key",
        "step",
        "categories",
        "tips",
        "key specs",
    ];
    for resp3 in [false, true] {
        let mut rc = Conn::open(redis.port, resp3);
        let mut oc = Conn::open(srv.port, resp3);
        let names = redis_commands(&mut rc);
        let want = info(&mut rc, &names);
        let got = info(&mut oc, &names);
        let mut differ = Vec::new();
        let mut compared = 0;
        for (name, w) in &want {
            let Some(g) = got.get(name) else {
                continue;
            };
            compared += 1;
            for (i, field) in FIELDS.iter().enumerate() {
                if w.get(i) != g.get(i) {
                    differ.push(format!(
                        "{name} {field}:\n  redis:   {}\n  rostrum: {}",
                        show(w.get(i).map_or(&[][..], |v| v)),
                        show(g.get(i).map_or(&[][..], |v| v)),
                    ));
                }
            }
        }
        assert!(compared > 200, "too few compared");
        assert!(
            differ.is_empty(),
            "{} differ:\n{}",
            differ.len(),
            differ.join("\n")
        );
    }
}

/// redis-cli's HELP shows the syntax it builds from COMMAND DOCS: the same
/// line as with redis-server for a Redis command, and the argument hints
/// of Rostrum's own commands.
#[test]
fn redis_cli_help_shows_the_syntax() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(&[]);
    let help = |port: u16, command: &str| {
        let out = Command::new("redis-cli")
            .args(["-p", &port.to_string(), "HELP"])
            .args(command.split(' '))
            .stdin(Stdio::null())
            .output()
            .expect("run redis-cli");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    for command in ["ZADD", "SET", "MIGRATE", "CLIENT KILL", "XADD", "SORT"] {
        let want = help(redis.port, command);
        assert!(want.contains("summary:"), "{want}");
        // Summaries are Rostrum's own; the syntax line is the first.
        let syntax = |s: &str| s.trim_start().lines().next().unwrap_or("").to_string();
        assert_eq!(syntax(&help(srv.port, command)), syntax(&want), "{command}");
    }
    let zadd = help(srv.port, "ZADD");
    assert!(
        zadd.contains("key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]"),
        "{zadd}"
    );
    let submit = help(srv.port, "LB.SUBMIT");
    assert!(submit.contains("key member score"), "{submit}");
    let watch = help(srv.port, "LB.WATCH");
    assert!(watch.contains("INTERVAL"), "{watch}");
}
