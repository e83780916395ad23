//! The string family through a real client: every command, its options and
//! errors, expiry with short times, binary data, and RESP3 replies. Expected
//! replies were checked against redis-server 7.0.15.
mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::thread::sleep;
use std::time::Duration;

use common::TestServer;
use redis::{Connection, Value};

/// A raw connection that sends commands and reads whole replies as bytes.
struct Raw {
    reader: BufReader<TcpStream>,
}

impl Raw {
    fn new(srv: &TestServer) -> Raw {
        Raw {
            reader: BufReader::new(srv.raw()),
        }
    }

    fn send(&mut self, args: &[&[u8]]) -> Vec<u8> {
        let mut req = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            req.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            req.extend_from_slice(a);
            req.extend_from_slice(b"\r\n");
        }
        self.reader.get_mut().write_all(&req).expect("write");
        let mut out = Vec::new();
        self.read_reply(&mut out);
        out
    }

    /// Sends a command of space-separated words.
    fn cmd(&mut self, line: &str) -> String {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        String::from_utf8_lossy(&self.send(&args)).into_owned()
    }

    fn read_reply(&mut self, out: &mut Vec<u8>) {
        let start = out.len();
        self.reader.read_until(b'\n', out).expect("read");
        let line = &out[start..];
        let kind = line.first().copied().unwrap_or(b'-');
        let n: i64 = std::str::from_utf8(&line[1..line.len().saturating_sub(2)])
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(-1);
        match kind {
            b'$' | b'=' | b'!' if n >= 0 => {
                let mut body = vec![0u8; n as usize + 2];
                self.reader.read_exact(&mut body).expect("read bulk");
                out.extend_from_slice(&body);
            }
            b'*' | b'~' | b'>' | b'%' if n > 0 => {
                let items = if kind == b'%' { 2 * n } else { n };
                for _ in 0..items {
                    self.read_reply(out);
                }
            }
            _ => {}
        }
    }
}

fn q<T: redis::FromRedisValue>(c: &mut Connection, line: &str) -> T {
    let mut words = line.split(' ');
    let mut cmd = redis::cmd(words.next().unwrap_or(""));
    for w in words {
        cmd.arg(w);
    }
    cmd.query(c).unwrap_or_else(|e| panic!("{line}: {e}"))
}

const NOT_INT: &str = "-ERR value is not an integer or out of range\r\n";
const NOT_FLOAT: &str = "-ERR value is not a valid float\r\n";
const SYNTAX: &str = "-ERR syntax error\r\n";

#[test]
fn get_set_and_options() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    assert_eq!(q::<Option<String>>(&mut c, "GET k"), None);
    let _: () = q(&mut c, "SET k v");
    assert_eq!(q::<String>(&mut c, "GET k"), "v");
    assert_eq!(q::<Option<String>>(&mut c, "SET k v2 NX"), None);
    assert_eq!(q::<String>(&mut c, "SET k v2 XX"), "OK");
    assert_eq!(q::<Option<String>>(&mut c, "SET nk v XX"), None);
    assert_eq!(q::<i64>(&mut c, "EXISTS nk"), 0);
    assert_eq!(
        q::<Option<String>>(&mut c, "SET k v3 GET"),
        Some("v2".into())
    );
    assert_eq!(
        q::<Option<String>>(&mut c, "SET k v4 NX GET"),
        Some("v3".into())
    );
    assert_eq!(q::<String>(&mut c, "GET k"), "v3");
    assert_eq!(q::<Option<String>>(&mut c, "SET g v GET NX"), None);
    assert_eq!(q::<String>(&mut c, "GET g"), "v");

    let mut r = Raw::new(&srv);
    for bad in [
        "SET k v NX XX",
        "SET k v XX NX",
        "SET k v EX 10 PX 10",
        "SET k v EX 10 KEEPTTL",
        "SET k v KEEPTTL PXAT 10",
        "SET k v EXAT 10 PXAT 10",
        "SET k v EX",
        "SET k v PERSIST",
        "SET k v foo",
    ] {
        assert_eq!(r.cmd(bad), SYNTAX, "{bad}");
    }
    let invalid = "-ERR invalid expire time in 'set' command\r\n";
    for bad in [
        "SET k v EX 0",
        "SET k v EX -1",
        "SET k v PX 0",
        "SET k v EXAT 0",
        "SET k v PXAT -5",
        "SET k v EX 9223372036854775",
        "SET k v PX 9223372036854775000",
        "SET k v EX 9223372036854775807",
    ] {
        assert_eq!(r.cmd(bad), invalid, "{bad}");
    }
    assert_eq!(r.cmd("SET k v EX abc"), NOT_INT);
    assert_eq!(r.cmd("SET k v EX 1.5"), NOT_INT);
    // Repeated options are accepted; the last time wins.
    assert_eq!(r.cmd("SET k v EX 10 EX 20"), "+OK\r\n");
    assert_eq!(r.cmd("SET k v NX NX"), "$-1\r\n");
    assert_eq!(r.cmd("SET k v GET GET"), "$1\r\nv\r\n");
    assert_eq!(r.cmd("SET k v EXAT 9223372036854775"), "+OK\r\n");
    assert_eq!(r.cmd("SET k v PXAT 9223372036854775807"), "+OK\r\n");
    assert_eq!(r.cmd("GET k"), "$1\r\nv\r\n");
    assert_eq!(
        r.cmd("SET"),
        "-ERR wrong number of arguments for 'set' command\r\n"
    );
    assert_eq!(
        r.cmd("GET a b"),
        "-ERR wrong number of arguments for 'get' command\r\n"
    );
}

#[test]
fn set_variants() {
    let srv = TestServer::start(&[]);
    let mut r = Raw::new(&srv);
    assert_eq!(r.cmd("SETNX k v"), ":1\r\n");
    assert_eq!(r.cmd("SETNX k v2"), ":0\r\n");
    assert_eq!(r.cmd("GET k"), "$1\r\nv\r\n");
    assert_eq!(r.cmd("SETEX k 100 v3"), "+OK\r\n");
    assert_eq!(r.cmd("GET k"), "$2\r\nv3\r\n");
    assert_eq!(r.cmd("PSETEX k 100000 v4"), "+OK\r\n");
    assert_eq!(r.cmd("GET k"), "$2\r\nv4\r\n");
    assert_eq!(
        r.cmd("SETEX k 0 v"),
        "-ERR invalid expire time in 'setex' command\r\n"
    );
    assert_eq!(
        r.cmd("PSETEX k -1 v"),
        "-ERR invalid expire time in 'psetex' command\r\n"
    );
    assert_eq!(r.cmd("SETEX k abc v"), NOT_INT);
    assert_eq!(r.cmd("GETSET k v5"), "$2\r\nv4\r\n");
    assert_eq!(r.cmd("GETSET nk v"), "$-1\r\n");
    assert_eq!(r.cmd("GETDEL k"), "$2\r\nv5\r\n");
    assert_eq!(r.cmd("GETDEL k"), "$-1\r\n");
    assert_eq!(r.cmd("EXISTS k"), ":0\r\n");
}

#[test]
fn getex_options() {
    let srv = TestServer::start(&[]);
    let mut r = Raw::new(&srv);
    assert_eq!(r.cmd("GETEX nokey EX 0"), "$-1\r\n");
    assert_eq!(r.cmd("GETEX nokey foo"), SYNTAX);
    r.cmd("SET k v");
    assert_eq!(r.cmd("GETEX k"), "$1\r\nv\r\n");
    for bad in [
        "GETEX k NX",
        "GETEX k KEEPTTL",
        "GETEX k GET",
        "GETEX k EX",
        "GETEX k EX 10 PERSIST",
        "GETEX k PERSIST EX 10",
        "GETEX k EX 1 PX 1",
    ] {
        assert_eq!(r.cmd(bad), SYNTAX, "{bad}");
    }
    assert_eq!(
        r.cmd("GETEX k EX 0"),
        "-ERR invalid expire time in 'getex' command\r\n"
    );
    assert_eq!(r.cmd("GETEX k PX abc"), NOT_INT);
    assert_eq!(r.cmd("GETEX k EX 10 EX 20"), "$1\r\nv\r\n");
    assert_eq!(r.cmd("GETEX k PERSIST PERSIST"), "$1\r\nv\r\n");
    // A past absolute time deletes the key after replying with it.
    assert_eq!(r.cmd("GETEX k PXAT 1"), "$1\r\nv\r\n");
    assert_eq!(r.cmd("EXISTS k"), ":0\r\n");
    // Relative expiry, then PERSIST cancels it.
    r.cmd("SET k v");
    assert_eq!(r.cmd("GETEX k PX 100"), "$1\r\nv\r\n");
    assert_eq!(r.cmd("GETEX k PERSIST"), "$1\r\nv\r\n");
    r.cmd("SET t v");
    assert_eq!(r.cmd("GETEX t PX 50"), "$1\r\nv\r\n");
    sleep(Duration::from_millis(200));
    assert_eq!(r.cmd("GET k"), "$1\r\nv\r\n");
    assert_eq!(r.cmd("GET t"), "$-1\r\n");
}

#[test]
fn expiry_with_short_times() {
    let srv = TestServer::start(&[]);
    let mut r = Raw::new(&srv);
    r.cmd("SET a v PX 60");
    r.cmd("PSETEX b 60 v");
    r.cmd("SET keep v PX 60");
    r.cmd("SET keep v2 KEEPTTL");
    r.cmd("SET clear v PX 60");
    r.cmd("SET clear v2");
    r.cmd("SET n 5 PX 60");
    r.cmd("INCR n");
    r.cmd("SET app a PX 60");
    r.cmd("APPEND app b");
    r.cmd("SET gs v PX 60");
    r.cmd("GETSET gs v2");
    r.cmd("SET ms v PX 60");
    r.cmd("MSET ms v2");
    assert_eq!(r.cmd("SET past v PXAT 1"), "+OK\r\n");
    assert_eq!(r.cmd("GET past"), "$-1\r\n");
    assert_eq!(r.cmd("GET a"), "$1\r\nv\r\n");
    sleep(Duration::from_millis(250));
    for gone in ["a", "b", "keep", "n", "app"] {
        assert_eq!(r.cmd(&format!("GET {gone}")), "$-1\r\n", "{gone}");
    }
    for kept in ["clear", "gs", "ms"] {
        assert_eq!(r.cmd(&format!("GET {kept}")), "$2\r\nv2\r\n", "{kept}");
    }
    // Commands treat an expired key as missing.
    r.cmd("SET e 5 PX 30");
    r.cmd("SET f 5 PX 30");
    r.cmd("SET g 5 PX 30");
    sleep(Duration::from_millis(150));
    assert_eq!(r.cmd("INCR e"), ":1\r\n");
    assert_eq!(r.cmd("SETNX f x"), ":1\r\n");
    assert_eq!(r.cmd("SET g x XX"), "$-1\r\n");
    assert_eq!(r.cmd("SETRANGE g 0 "), ":0\r\n");
    assert_eq!(r.cmd("STRLEN g"), ":0\r\n");
    assert_eq!(r.cmd("MGET e f g"), "*3\r\n$1\r\n1\r\n$1\r\nx\r\n$-1\r\n");
}

#[test]
fn multi_key_commands() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let _: () = q(&mut c, "MSET a 1 b 2 c 3");
    let v: Vec<Option<String>> = q(&mut c, "MGET a b nokey c");
    assert_eq!(
        v,
        vec![Some("1".into()), Some("2".into()), None, Some("3".into())]
    );
    let _: () = q(&mut c, "MSET a x a y");
    assert_eq!(q::<String>(&mut c, "GET a"), "y");
    assert_eq!(q::<i64>(&mut c, "MSETNX n1 1 n2 2"), 1);
    assert_eq!(q::<i64>(&mut c, "MSETNX n2 x n3 3"), 0);
    assert_eq!(q::<i64>(&mut c, "EXISTS n3"), 0);
    let mut r = Raw::new(&srv);
    assert_eq!(
        r.cmd("MSET a 1 b"),
        "-ERR wrong number of arguments for 'mset' command\r\n"
    );
    assert_eq!(
        r.cmd("MSETNX a 1 b"),
        "-ERR wrong number of arguments for 'msetnx' command\r\n"
    );
    assert_eq!(
        r.cmd("MGET"),
        "-ERR wrong number of arguments for 'mget' command\r\n"
    );
    // Many keys spread over many shards.
    let mut args: Vec<Vec<u8>> = vec![b"MSET".to_vec()];
    for i in 0..200 {
        args.push(format!("key:{i}").into_bytes());
        args.push(format!("{i}").into_bytes());
    }
    let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    assert_eq!(r.send(&refs), b"+OK\r\n");
    let mut mget = redis::cmd("MGET");
    for i in 0..200 {
        mget.arg(format!("key:{i}"));
    }
    let got: Vec<i64> = mget.query(&mut c).expect("mget");
    assert_eq!(got, (0..200).collect::<Vec<i64>>());
}

#[test]
fn counters() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    assert_eq!(q::<i64>(&mut c, "INCR n"), 1);
    assert_eq!(q::<i64>(&mut c, "INCRBY n 10"), 11);
    assert_eq!(q::<i64>(&mut c, "DECR n"), 10);
    assert_eq!(q::<i64>(&mut c, "DECRBY n 15"), -5);
    assert_eq!(
        q::<i64>(&mut c, "DECRBY n -9223372036854775807"),
        i64::MAX - 5
    );
    let mut r = Raw::new(&srv);
    r.cmd("SET n 9223372036854775807");
    let overflow = "-ERR increment or decrement would overflow\r\n";
    assert_eq!(r.cmd("INCR n"), overflow);
    r.cmd("SET n -9223372036854775808");
    assert_eq!(r.cmd("DECR n"), overflow);
    assert_eq!(r.cmd("INCRBY n -1"), overflow);
    assert_eq!(
        r.cmd("DECRBY n -9223372036854775808"),
        "-ERR decrement would overflow\r\n"
    );
    for bad in ["abc", "1.5", "01", "+1", " 1", "9223372036854775808"] {
        assert_eq!(
            r.send(&[b"INCRBY", b"n", bad.as_bytes()]),
            NOT_INT.as_bytes()
        );
    }
    for stored in ["abc", "1.0", " 1", "01", "-0", "", "99999999999999999999"] {
        r.send(&[b"SET", b"s", stored.as_bytes()]);
        assert_eq!(r.cmd("INCR s"), NOT_INT, "{stored:?}");
    }
}

#[test]
fn incrbyfloat_matches_long_double() {
    let srv = TestServer::start(&[]);
    let mut r = Raw::new(&srv);
    assert_eq!(r.cmd("INCRBYFLOAT f 0.1"), "$3\r\n0.1\r\n");
    assert_eq!(r.cmd("INCRBYFLOAT f 0.2"), "$3\r\n0.3\r\n");
    assert_eq!(r.cmd("INCRBYFLOAT f -0.3"), "$1\r\n0\r\n");
    r.cmd("SET f 3.0e3");
    assert_eq!(r.cmd("INCRBYFLOAT f 1.0e1"), "$4\r\n3010\r\n");
    assert_eq!(r.cmd("INCRBYFLOAT f 1e17"), "$18\r\n100000000000003010\r\n");
    assert_eq!(
        r.cmd("INCRBYFLOAT f 0.1"),
        "$26\r\n100000000000003010.1015625\r\n"
    );
    assert_eq!(r.cmd("GET f"), "$26\r\n100000000000003010.1015625\r\n");
    r.cmd("SET f 5");
    assert_eq!(r.cmd("INCRBYFLOAT f 0x10"), "$2\r\n21\r\n");
    assert_eq!(r.cmd("INCRBYFLOAT f -1e-4940"), "$2\r\n21\r\n");
    let nan_inf = "-ERR increment would produce NaN or Infinity\r\n";
    assert_eq!(r.cmd("INCRBYFLOAT f inf"), nan_inf);
    let big = r.cmd("INCRBYFLOAT f 1.18e4932");
    assert!(
        big.starts_with("$4933\r\n11800000000000000000"),
        "{big:.40}"
    );
    assert_eq!(r.cmd("GET f"), big);
    assert_eq!(r.cmd("INCRBYFLOAT f 1.18e4932"), nan_inf);
    for bad in [
        "nan", "abc", "", " 1", "1 ", "1e5000", "1e-5000", "0x", "1e",
    ] {
        assert_eq!(
            r.send(&[b"INCRBYFLOAT", b"f", bad.as_bytes()]),
            NOT_FLOAT.as_bytes(),
            "{bad:?}"
        );
    }
    r.cmd("SET s abc");
    assert_eq!(r.cmd("INCRBYFLOAT s 1"), NOT_FLOAT);
    r.cmd("SET s inf");
    assert_eq!(r.cmd("INCRBYFLOAT s 1"), nan_inf);
    r.cmd("SETEX t 100 1.5");
    assert_eq!(r.cmd("INCRBYFLOAT t 1"), "$3\r\n2.5\r\n");
}

#[test]
fn append_strlen_ranges() {
    let srv = TestServer::start(&[]);
    let mut r = Raw::new(&srv);
    assert_eq!(r.cmd("APPEND a hello"), ":5\r\n");
    assert_eq!(r.send(&[b"APPEND", b"a", b" world"]), b":11\r\n");
    assert_eq!(r.cmd("STRLEN a"), ":11\r\n");
    assert_eq!(r.cmd("STRLEN nokey"), ":0\r\n");
    assert_eq!(r.send(&[b"APPEND", b"e", b""]), b":0\r\n");
    assert_eq!(r.cmd("EXISTS e"), ":1\r\n");
    assert_eq!(r.cmd("GETRANGE a 0 4"), "$5\r\nhello\r\n");
    assert_eq!(r.cmd("GETRANGE a -5 -1"), "$5\r\nworld\r\n");
    assert_eq!(r.cmd("GETRANGE a -1 -5"), "$0\r\n\r\n");
    assert_eq!(r.cmd("GETRANGE a 0 100"), "$11\r\nhello world\r\n");
    assert_eq!(r.cmd("GETRANGE a -100 -50"), "$1\r\nh\r\n");
    assert_eq!(r.cmd("SUBSTR a 6 -1"), "$5\r\nworld\r\n");
    assert_eq!(r.cmd("GETRANGE nokey 0 -1"), "$0\r\n\r\n");
    assert_eq!(r.cmd("GETRANGE a x 1"), NOT_INT);
    assert_eq!(r.send(&[b"SETRANGE", b"r", b"0", b""]), b":0\r\n");
    assert_eq!(r.cmd("EXISTS r"), ":0\r\n");
    assert_eq!(r.cmd("SETRANGE r 3 ab"), ":5\r\n");
    assert_eq!(r.cmd("GET r"), "$5\r\n\0\0\0ab\r\n");
    assert_eq!(r.cmd("SETRANGE r 0 X"), ":5\r\n");
    assert_eq!(r.cmd("GET r"), "$5\r\nX\0\0ab\r\n");
    assert_eq!(r.cmd("SETRANGE r -1 x"), "-ERR offset is out of range\r\n");
    assert_eq!(r.cmd("SETRANGE r x x"), NOT_INT);
    assert_eq!(
        r.cmd("SETRANGE r 536870912 x"),
        "-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n"
    );
}

#[test]
fn proto_max_bulk_len_limits_growth() {
    let srv = TestServer::start(&["--config", "proto-max-bulk-len=1mb"]);
    let mut r = Raw::new(&srv);
    let half = vec![b'x'; 600 * 1024];
    assert_eq!(r.send(&[b"APPEND", b"k", &half]), b":614400\r\n");
    assert_eq!(
        r.send(&[b"APPEND", b"k", &half]),
        b"-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n"
    );
    assert_eq!(r.cmd("SETRANGE k 1048575 x"), ":1048576\r\n");
    assert_eq!(
        r.cmd("SETRANGE k 1048576 x"),
        "-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n"
    );
}

#[test]
fn binary_keys_and_values() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let key: &[u8] = b"k\x00\r\n\xff";
    let value: Vec<u8> = (0..=255u8).collect();
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg(&value)
        .query(&mut c)
        .expect("set");
    let got: Vec<u8> = redis::cmd("GET").arg(key).query(&mut c).expect("get");
    assert_eq!(got, value);
    let got: Vec<u8> = redis::cmd("GETRANGE")
        .arg(key)
        .arg(10)
        .arg(13)
        .query(&mut c)
        .expect("getrange");
    assert_eq!(got, vec![10, 11, 12, 13]);
    let n: i64 = redis::cmd("APPEND")
        .arg(key)
        .arg(b"\x00")
        .query(&mut c)
        .expect("append");
    assert_eq!(n, 257);
    let other: Option<Vec<u8>> = redis::cmd("GET").arg(b"k").query(&mut c).expect("get");
    assert_eq!(other, None);
}

#[test]
fn resp3_replies() {
    let srv = TestServer::start(&[]);
    let mut r = Raw::new(&srv);
    let hello = r.cmd("HELLO 3");
    assert!(hello.starts_with('%'), "{hello}");
    assert_eq!(r.cmd("GET nokey"), "_\r\n");
    assert_eq!(r.cmd("SET k v NX"), "+OK\r\n");
    assert_eq!(r.cmd("SET k v NX"), "_\r\n");
    assert_eq!(r.cmd("SET k2 v XX GET"), "_\r\n");
    assert_eq!(r.cmd("MGET k nokey"), "*2\r\n$1\r\nv\r\n_\r\n");
    assert_eq!(r.cmd("INCRBYFLOAT f 1.5"), "$3\r\n1.5\r\n");
    assert_eq!(r.cmd("INCR n"), ":1\r\n");
    assert_eq!(r.cmd("GETEX nokey"), "_\r\n");
    assert_eq!(r.cmd("GETDEL nokey"), "_\r\n");
}

#[test]
fn replies_parse_in_redis_crate() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let v: Value = q(&mut c, "MGET a b");
    assert!(
        matches!(v, Value::Array(ref items) if items.len() == 2),
        "{v:?}"
    );
    let v: Value = q(&mut c, "SET a 1 GET");
    assert!(matches!(v, Value::Nil), "{v:?}");
    let v: Value = q(&mut c, "INCRBYFLOAT a 0.5");
    assert!(
        matches!(v, Value::BulkString(ref b) if b == b"1.5"),
        "{v:?}"
    );
}
