//! The generic key commands through a real client: DEL ... OBJECT, expiry,
//! SCAN's guarantees under concurrent writes, cross-database moves.

mod common;

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::thread::sleep;
use std::time::Duration;

use common::TestServer;
use redis::{Connection, Value};

/// Runs a command, expecting success.
fn q<T: redis::FromRedisValue>(con: &mut Connection, args: &[&[u8]]) -> T {
    let mut c = redis::cmd(std::str::from_utf8(args[0]).expect("ascii name"));
    for a in &args[1..] {
        c.arg(*a);
    }
    match c.query(con) {
        Ok(v) => v,
        Err(e) => panic!("{:?} failed: {e}", String::from_utf8_lossy(&args.concat())),
    }
}

/// Runs a command given as words, expecting success.
fn qs<T: redis::FromRedisValue>(con: &mut Connection, line: &str) -> T {
    let words: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
    q(con, &words)
}

/// Runs a command given as words, expecting an error; returns its line.
fn err(con: &mut Connection, line: &str) -> String {
    let words: Vec<&str> = line.split(' ').collect();
    let mut c = redis::cmd(words[0]);
    for w in &words[1..] {
        c.arg(*w);
    }
    match c.query::<Value>(con) {
        Ok(v) => panic!("{line}: expected an error, got {v:?}"),
        Err(e) => format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or("")),
    }
}

/// One SCAN call: (next cursor, keys).
fn scan(con: &mut Connection, cursor: u64, extra: &str) -> (u64, Vec<Vec<u8>>) {
    let mut c = redis::cmd("SCAN");
    c.arg(cursor);
    for w in extra.split(' ').filter(|w| !w.is_empty()) {
        c.arg(w);
    }
    let (next, keys): (String, Vec<Vec<u8>>) = c.query(con).expect("scan");
    (next.parse().expect("numeric cursor"), keys)
}

/// A full SCAN iteration: every key returned, with how many times.
fn scan_all(con: &mut Connection, extra: &str) -> HashMap<Vec<u8>, usize> {
    let mut seen = HashMap::new();
    let mut cursor = 0;
    for _ in 0..100_000 {
        let (next, keys) = scan(con, cursor, extra);
        for k in keys {
            *seen.entry(k).or_insert(0) += 1;
        }
        if next == 0 {
            return seen;
        }
        cursor = next;
    }
    panic!("SCAN did not end");
}

#[test]
fn del_unlink_exists_touch_type() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    for k in ["a", "b", "c"] {
        let _: () = qs(&mut c, &format!("SET {k} 1"));
    }
    assert_eq!(qs::<i64>(&mut c, "EXISTS a a a nosuch"), 3);
    assert_eq!(qs::<i64>(&mut c, "TOUCH a b nosuch a"), 3);
    assert_eq!(qs::<String>(&mut c, "TYPE a"), "string");
    assert_eq!(qs::<String>(&mut c, "TYPE nosuch"), "none");
    assert_eq!(qs::<i64>(&mut c, "DEL a a nosuch"), 1);
    assert_eq!(qs::<i64>(&mut c, "UNLINK b c b"), 2);
    assert_eq!(qs::<i64>(&mut c, "EXISTS a b c"), 0);
    assert_eq!(
        err(&mut c, "DEL"),
        "ERR wrong number of arguments for 'del' command"
    );
    assert_eq!(
        err(&mut c, "TYPE a b"),
        "ERR wrong number of arguments for 'type' command"
    );

    // Binary and empty keys.
    let bin: &[u8] = b"k\x00\xff\r\n";
    let _: () = q(&mut c, &[b"SET", bin, b"v"]);
    let _: () = q(&mut c, &[b"SET", b"", b"e"]);
    assert_eq!(q::<i64>(&mut c, &[b"EXISTS", bin, b""]), 2);
    let all: HashSet<Vec<u8>> = qs(&mut c, "KEYS *");
    assert_eq!(all, HashSet::from([bin.to_vec(), Vec::new()]));
    let _: () = q(&mut c, &[b"RENAME", bin, b"\x01\x02"]);
    assert_eq!(q::<Vec<u8>>(&mut c, &[b"GET", b"\x01\x02"]), b"v");
    assert_eq!(q::<i64>(&mut c, &[b"DEL", b"\x01\x02", b""]), 2);
}

#[test]
fn expire_options_and_errors() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let _: () = qs(&mut c, "SET k v");
    for (line, want) in [
        (
            "EXPIRE k 10 NX XX",
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ),
        (
            "EXPIRE k 10 nx gt",
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ),
        (
            "PEXPIRE k 10 GT LT",
            "ERR GT and LT options at the same time are not compatible",
        ),
        ("EXPIRE k 10 foo", "ERR Unsupported option foo"),
        ("EXPIRE k abc foo", "ERR Unsupported option foo"),
        (
            "EXPIRE k abc",
            "ERR value is not an integer or out of range",
        ),
        (
            "EXPIRE k 9223372036854775807",
            "ERR invalid expire time in 'expire' command",
        ),
        (
            "EXPIRE k -9223372036854776",
            "ERR invalid expire time in 'expire' command",
        ),
        (
            "PEXPIRE k 9223372036854775807",
            "ERR invalid expire time in 'pexpire' command",
        ),
        (
            "EXPIREAT k 9223372036854775807",
            "ERR invalid expire time in 'expireat' command",
        ),
        (
            "EXPIRE nosuch 9223372036854775807",
            "ERR invalid expire time in 'expire' command",
        ),
        (
            "EXPIRE k",
            "ERR wrong number of arguments for 'expire' command",
        ),
    ] {
        assert_eq!(err(&mut c, line), want, "{line}");
    }
    assert_eq!(qs::<i64>(&mut c, "TTL k"), -1);
    assert_eq!(qs::<i64>(&mut c, "EXPIRE nosuch 10"), 0);
    assert_eq!(qs::<i64>(&mut c, "EXPIRE k 100 XX"), 0);
    assert_eq!(qs::<i64>(&mut c, "EXPIRE k 100 GT"), 0);
    assert_eq!(qs::<i64>(&mut c, "EXPIRE k 100 LT"), 1);
    assert_eq!(qs::<i64>(&mut c, "EXPIRE k 200 NX"), 0);
    assert_eq!(qs::<i64>(&mut c, "EXPIRE k 50 GT"), 0);
    assert_eq!(qs::<i64>(&mut c, "EXPIRE k 200 gt"), 1);
    assert_eq!(qs::<i64>(&mut c, "TTL k"), 200);
    assert_eq!(qs::<i64>(&mut c, "EXPIRE k 300 LT"), 0);
    assert_eq!(qs::<i64>(&mut c, "EXPIRE k 20 xx LT"), 1);
    assert_eq!(qs::<i64>(&mut c, "TTL k"), 20);
    let pttl: i64 = qs(&mut c, "PTTL k");
    assert!((19_000..=20_000).contains(&pttl), "{pttl}");
    assert_eq!(qs::<i64>(&mut c, "PERSIST k"), 1);
    assert_eq!(qs::<i64>(&mut c, "PERSIST k"), 0);
    assert_eq!(qs::<i64>(&mut c, "PERSIST nosuch"), 0);
    assert_eq!(qs::<i64>(&mut c, "TTL k"), -1);
    assert_eq!(qs::<i64>(&mut c, "TTL nosuch"), -2);
    assert_eq!(qs::<i64>(&mut c, "PTTL nosuch"), -2);
    assert_eq!(qs::<i64>(&mut c, "EXPIRETIME k"), -1);
    assert_eq!(qs::<i64>(&mut c, "PEXPIRETIME nosuch"), -2);

    // Absolute times read back exactly (seconds rounded to the nearest).
    assert_eq!(qs::<i64>(&mut c, "PEXPIREAT k 4102444800499"), 1);
    assert_eq!(qs::<i64>(&mut c, "PEXPIRETIME k"), 4102444800499);
    assert_eq!(qs::<i64>(&mut c, "EXPIRETIME k"), 4102444800);
    assert_eq!(qs::<i64>(&mut c, "PEXPIREAT k 4102444800500"), 1);
    assert_eq!(qs::<i64>(&mut c, "EXPIRETIME k"), 4102444801);
    assert_eq!(qs::<i64>(&mut c, "PEXPIREAT k 9223372036854775807"), 1);
    assert_eq!(qs::<i64>(&mut c, "EXPIRETIME k"), 9223372036854776);

    // A time in the past deletes the key and answers 1.
    for line in [
        "EXPIRE k -1",
        "PEXPIRE k 0",
        "EXPIREAT k 1",
        "PEXPIREAT k -5",
    ] {
        let _: () = qs(&mut c, "SET k v");
        assert_eq!(qs::<i64>(&mut c, line), 1, "{line}");
        assert_eq!(qs::<i64>(&mut c, "EXISTS k"), 0, "{line}");
    }
    // ... unless a condition refuses it.
    let _: () = qs(&mut c, "SET k v");
    assert_eq!(qs::<i64>(&mut c, "EXPIRE k -10 GT"), 0);
    assert_eq!(qs::<i64>(&mut c, "EXPIRE k -10 LT"), 1);
    assert_eq!(qs::<i64>(&mut c, "EXISTS k"), 0);
}

#[test]
fn short_expiry_really_expires() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    for k in ["s1", "s2", "keep"] {
        let _: () = qs(&mut c, &format!("SET {k} v"));
    }
    assert_eq!(qs::<i64>(&mut c, "PEXPIRE s1 40"), 1);
    assert_eq!(qs::<i64>(&mut c, "PEXPIRE s2 40"), 1);
    assert_eq!(qs::<i64>(&mut c, "EXPIRE keep 100"), 1);
    sleep(Duration::from_millis(120));
    assert_eq!(qs::<i64>(&mut c, "EXISTS s1 s2 keep"), 1);
    assert_eq!(qs::<i64>(&mut c, "TTL s1"), -2);
    assert_eq!(qs::<String>(&mut c, "TYPE s2"), "none");
    assert_eq!(qs::<i64>(&mut c, "EXPIRE s1 10"), 0);
    assert_eq!(qs::<i64>(&mut c, "PERSIST s2"), 0);
    let keys: Vec<String> = qs(&mut c, "KEYS *");
    assert_eq!(keys, vec!["keep".to_string()]);
    assert_eq!(qs::<String>(&mut c, "RANDOMKEY"), "keep");
    let seen = scan_all(&mut c, "");
    assert_eq!(seen.len(), 1);
    assert!(seen.contains_key(&b"keep"[..]));
    assert!(err(&mut c, "RENAME s1 x").ends_with("no such key"));
}

#[test]
fn rename_and_renamenx() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    assert_eq!(err(&mut c, "RENAME nosuch x"), "ERR no such key");
    assert_eq!(err(&mut c, "RENAMENX nosuch x"), "ERR no such key");
    assert_eq!(err(&mut c, "RENAME nosuch nosuch"), "ERR no such key");
    let _: () = qs(&mut c, "SET a 1");
    let _: () = qs(&mut c, "RENAME a a");
    assert_eq!(qs::<i64>(&mut c, "RENAMENX a a"), 0);
    assert_eq!(qs::<i64>(&mut c, "EXPIRE a 100"), 1);
    let _: () = qs(&mut c, "RENAME a b");
    assert_eq!(qs::<i64>(&mut c, "EXISTS a"), 0);
    assert_eq!(
        qs::<i64>(&mut c, "TTL b"),
        100,
        "the TTL moves with the value"
    );
    let _: () = qs(&mut c, "SET c 3");
    assert_eq!(qs::<i64>(&mut c, "RENAMENX b c"), 0);
    assert_eq!(qs::<String>(&mut c, "GET c"), "3");
    let _: () = qs(&mut c, "RENAME b c");
    assert_eq!(qs::<String>(&mut c, "GET c"), "1");
    assert_eq!(qs::<i64>(&mut c, "TTL c"), 100);
    assert_eq!(qs::<i64>(&mut c, "RENAMENX c d"), 1);
    assert_eq!(qs::<i64>(&mut c, "TTL d"), 100);
    // Renaming over a key with a TTL drops that TTL along with its value.
    let _: () = qs(&mut c, "SET e 5");
    assert_eq!(qs::<i64>(&mut c, "EXPIRE e 50"), 1);
    let _: () = qs(&mut c, "PERSIST d");
    let _: () = qs(&mut c, "RENAME d e");
    assert_eq!(qs::<i64>(&mut c, "TTL e"), -1);
}

#[test]
fn copy_move_swapdb_across_databases() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let _: () = qs(&mut c, "SET k v");
    let same = "ERR source and destination objects are the same";
    assert_eq!(err(&mut c, "COPY k k"), same);
    assert_eq!(err(&mut c, "COPY k k DB 0"), same);
    assert_eq!(err(&mut c, "MOVE k 0"), same);
    for line in [
        "COPY k x DB 16",
        "COPY k x DB -1",
        "MOVE k 16",
        "SWAPDB 0 16",
    ] {
        assert_eq!(err(&mut c, line), "ERR DB index is out of range", "{line}");
    }
    assert_eq!(err(&mut c, "COPY k x DB"), "ERR syntax error");
    assert_eq!(err(&mut c, "COPY k x foo"), "ERR syntax error");
    assert_eq!(
        err(&mut c, "MOVE k abc"),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(&mut c, "MOVE k 4294967296"),
        "ERR value is out of range, value must between -2147483648 and 2147483647"
    );
    assert_eq!(err(&mut c, "SWAPDB a 1"), "ERR invalid first DB index");
    assert_eq!(err(&mut c, "SWAPDB 0 x"), "ERR invalid second DB index");
    assert_eq!(
        err(&mut c, "SWAPDB 0 4294967296"),
        "ERR invalid second DB index"
    );

    // COPY within a db and into another, with the TTL.
    assert_eq!(qs::<i64>(&mut c, "EXPIRE k 100"), 1);
    assert_eq!(qs::<i64>(&mut c, "COPY nosuch x"), 0);
    assert_eq!(qs::<i64>(&mut c, "COPY k k2"), 1);
    assert_eq!(qs::<i64>(&mut c, "TTL k2"), 100);
    let _: () = qs(&mut c, "SET k v2");
    assert_eq!(qs::<i64>(&mut c, "COPY k k2"), 0);
    assert_eq!(qs::<i64>(&mut c, "COPY k k2 REPLACE"), 1);
    assert_eq!(qs::<String>(&mut c, "GET k2"), "v2");
    assert_eq!(qs::<i64>(&mut c, "TTL k2"), -1);
    assert_eq!(qs::<i64>(&mut c, "COPY k k DB 3"), 1);
    // The copy is independent of the source.
    let _: () = qs(&mut c, "SET k changed");
    let _: () = qs(&mut c, "SELECT 3");
    assert_eq!(qs::<String>(&mut c, "GET k"), "v2");
    let _: () = qs(&mut c, "SELECT 0");

    // MOVE: refused when the key exists in the target, keeps the TTL.
    assert_eq!(qs::<i64>(&mut c, "MOVE nosuch 1"), 0);
    assert_eq!(qs::<i64>(&mut c, "MOVE k 3"), 0);
    assert_eq!(qs::<String>(&mut c, "GET k"), "changed");
    assert_eq!(qs::<i64>(&mut c, "EXPIRE k2 70"), 1);
    assert_eq!(qs::<i64>(&mut c, "MOVE k2 1"), 1);
    assert_eq!(qs::<i64>(&mut c, "EXISTS k2"), 0);
    let _: () = qs(&mut c, "SELECT 1");
    assert_eq!(qs::<i64>(&mut c, "TTL k2"), 70);
    assert_eq!(qs::<String>(&mut c, "GET k2"), "v2");

    // SWAPDB exchanges the contents; a client keeps its db number.
    let _: () = qs(&mut c, "SET only1 x");
    let mut other = srv.conn();
    let _: () = qs(&mut other, "SWAPDB 0 1");
    let mut here: Vec<String> = qs(&mut c, "KEYS *");
    here.sort();
    assert_eq!(here, vec!["k".to_string()]);
    let mut there: Vec<String> = qs(&mut other, "KEYS *");
    there.sort();
    assert_eq!(there, vec!["k2".to_string(), "only1".to_string()]);
    assert_eq!(qs::<i64>(&mut other, "TTL k2"), 70);
    let _: () = qs(&mut other, "SWAPDB 0 0");
    let _: () = qs(&mut other, "SWAPDB 1 0");
    assert_eq!(qs::<i64>(&mut other, "EXISTS k2 only1"), 0);
    assert_eq!(qs::<i64>(&mut c, "EXISTS k2 only1"), 2);
}

#[test]
fn keys_patterns() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    for k in ["user:1", "user:2", "usr:3", "a*b", "[x", ""] {
        let _: () = q(&mut c, &[b"SET", k.as_bytes(), b"v"]);
    }
    let mut keys = |p: &str| -> Vec<String> {
        let mut v: Vec<String> = q(&mut c, &[b"KEYS", p.as_bytes()]);
        v.sort();
        v
    };
    assert_eq!(keys("*").len(), 6, "KEYS * includes the empty key");
    assert_eq!(keys("**").len(), 5, "the glob itself never matches \"\"");
    assert_eq!(keys("user:*"), ["user:1", "user:2"]);
    assert_eq!(keys("us?r:*"), ["user:1", "user:2"]);
    assert_eq!(keys("u*:[^1]"), ["user:2", "usr:3"]);
    assert_eq!(keys("a\\*b"), ["a*b"]);
    assert_eq!(keys("[[]x"), ["[x"]);
    assert_eq!(keys("user:["), Vec::<String>::new());
    assert_eq!(keys("nosuch"), Vec::<String>::new());
    assert_eq!(
        err(&mut c, "KEYS"),
        "ERR wrong number of arguments for 'keys' command"
    );
}

#[test]
fn scan_visits_ten_thousand_keys_once_each() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let n = 10_000;
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let mut cmd = redis::cmd("MSET");
        for i in chunk {
            cmd.arg(format!("key:{i}")).arg(i);
        }
        // MSET may not exist yet: fall back to pipelined SETs.
        if cmd.query::<()>(&mut c).is_err() {
            let mut p = redis::pipe();
            for i in chunk {
                p.cmd("SET").arg(format!("key:{i}")).arg(i).ignore();
            }
            let _: () = p.query(&mut c).expect("pipelined SET");
        }
    }
    for count in ["", "COUNT 1", "COUNT 1000"] {
        let seen = scan_all(&mut c, count);
        assert_eq!(seen.len(), n, "{count}");
        assert!(seen.values().all(|&t| t == 1), "{count}: a key came twice");
    }
    let seen = scan_all(&mut c, "MATCH key:99* COUNT 50");
    let mut got: Vec<String> = seen
        .keys()
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect();
    got.sort();
    let mut want: Vec<String> = (0..n)
        .map(|i| format!("key:{i}"))
        .filter(|k| k.starts_with("key:99"))
        .collect();
    want.sort();
    assert_eq!(got, want);
    assert_eq!(scan_all(&mut c, "TYPE string").len(), n);
    assert_eq!(scan_all(&mut c, "TYPE STRING").len(), n);
    assert!(scan_all(&mut c, "TYPE zset").is_empty());
    // COUNT is a hint: one call visits about COUNT keys, not all of them.
    let (cursor, keys) = scan(&mut c, 0, "COUNT 5");
    assert_ne!(cursor, 0);
    assert!(!keys.is_empty() && keys.len() < 100, "{}", keys.len());
}

#[test]
fn scan_returns_every_stable_key_while_keys_are_added() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let mut p = redis::pipe();
    for i in 0..2000 {
        p.cmd("SET").arg(format!("base:{i}")).arg(i).ignore();
    }
    let _: () = p.query(&mut c).expect("load");
    let mut writer = srv.conn();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let t = std::thread::spawn(move || {
        for i in 0..20_000 {
            if stop2.load(std::sync::atomic::Ordering::Relaxed) {
                break;
            }
            let _: () = redis::cmd("SET")
                .arg(format!("new:{i}"))
                .arg(i)
                .query(&mut writer)
                .expect("concurrent SET");
        }
    });
    // Start scanning once the writer is running.
    for _ in 0..500 {
        if qs::<i64>(&mut c, "EXISTS new:0") == 1 {
            break;
        }
        sleep(Duration::from_millis(10));
    }
    let seen = scan_all(&mut c, "COUNT 7");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    t.join().expect("writer");
    for i in 0..2000 {
        let k = format!("base:{i}").into_bytes();
        assert_eq!(seen.get(&k), Some(&1), "base:{i} seen {:?}", seen.get(&k));
    }
}

#[test]
fn scan_errors_and_cursors() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    for line in [
        "SCAN abc",
        "SCAN 0x",
        "SCAN 1.5",
        "SCAN 18446744073709551616",
    ] {
        assert_eq!(err(&mut c, line), "ERR invalid cursor", "{line}");
    }
    for line in [
        "SCAN 0 COUNT 0",
        "SCAN 0 COUNT -1",
        "SCAN 0 COUNT",
        "SCAN 0 MATCH",
        "SCAN 0 foo bar",
    ] {
        assert_eq!(err(&mut c, line), "ERR syntax error", "{line}");
    }
    assert_eq!(
        err(&mut c, "SCAN 0 COUNT abc"),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(scan(&mut c, 0, ""), (0, vec![]));
    let _: () = qs(&mut c, "SET only 1");
    assert_eq!(scan(&mut c, 0, ""), (0, vec![b"only".to_vec()]));
    assert_eq!(scan(&mut c, 0, "MATCH x*"), (0, vec![]));
    // Any number is a cursor; a huge one just ends the iteration.
    let (next, _) = scan(&mut c, u64::MAX, "");
    assert_eq!(next, 0);
}

#[test]
fn randomkey_never_returns_expired_keys() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    assert_eq!(qs::<Option<String>>(&mut c, "RANDOMKEY"), None);
    for i in 0..50 {
        let _: () = qs(&mut c, &format!("SET gone:{i} v"));
        assert_eq!(qs::<i64>(&mut c, &format!("PEXPIRE gone:{i} 30")), 1);
    }
    let _: () = qs(&mut c, "SET stay v");
    sleep(Duration::from_millis(80));
    for _ in 0..20 {
        assert_eq!(qs::<String>(&mut c, "RANDOMKEY"), "stay");
    }
    for i in 0..20 {
        let _: () = qs(&mut c, &format!("SET more:{i} v"));
    }
    let mut seen = HashSet::new();
    for _ in 0..200 {
        let k: String = qs(&mut c, "RANDOMKEY");
        assert!(k == "stay" || k.starts_with("more:"), "{k}");
        seen.insert(k);
    }
    assert!(seen.len() > 5, "not random: {seen:?}");
}

#[test]
fn object_subcommands() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let _: () = qs(&mut c, "SET int 100");
    let _: () = qs(&mut c, "SET big 10000");
    let _: () = qs(&mut c, "SET str hello");
    assert_eq!(qs::<String>(&mut c, "OBJECT ENCODING int"), "int");
    assert_eq!(qs::<String>(&mut c, "OBJECT ENCODING str"), "embstr");
    assert_eq!(qs::<Option<String>>(&mut c, "OBJECT ENCODING nosuch"), None);
    assert_eq!(qs::<i64>(&mut c, "OBJECT REFCOUNT int"), 2147483647);
    assert_eq!(qs::<i64>(&mut c, "OBJECT REFCOUNT big"), 1);
    assert_eq!(qs::<i64>(&mut c, "OBJECT REFCOUNT str"), 1);
    assert_eq!(qs::<i64>(&mut c, "OBJECT IDLETIME str"), 0);
    assert_eq!(qs::<Option<i64>>(&mut c, "OBJECT IDLETIME nosuch"), None);
    assert_eq!(qs::<Option<i64>>(&mut c, "OBJECT FREQ nosuch"), None);
    assert!(err(&mut c, "OBJECT FREQ str")
        .starts_with("ERR An LFU maxmemory policy is not selected, access frequency not tracked."));
    let help: Vec<String> = qs(&mut c, "OBJECT HELP");
    assert_eq!(help.len(), 15);
    assert!(help[0].starts_with("OBJECT <subcommand>"));
    assert_eq!(
        err(&mut c, "OBJECT foo k"),
        "ERR unknown subcommand 'foo'. Try OBJECT HELP."
    );
    assert_eq!(
        err(&mut c, "OBJECT ENCODING"),
        "ERR wrong number of arguments for 'object|encoding' command"
    );
    assert_eq!(
        err(&mut c, "OBJECT"),
        "ERR wrong number of arguments for 'object' command"
    );
}

#[test]
fn object_idletime_counts_seconds_without_touching() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let _: () = qs(&mut c, "SET k v");
    sleep(Duration::from_millis(2100));
    // TYPE, TTL and OBJECT do not refresh the access time; TOUCH does.
    let _: String = qs(&mut c, "TYPE k");
    let _: i64 = qs(&mut c, "TTL k");
    let idle: i64 = qs(&mut c, "OBJECT IDLETIME k");
    assert!(idle >= 1, "{idle}");
    assert_eq!(qs::<i64>(&mut c, "TOUCH k"), 1);
    assert_eq!(qs::<i64>(&mut c, "OBJECT IDLETIME k"), 0);
}

/// Sends one RESP command on a raw connection and reads what arrives.
fn raw(s: &mut std::net::TcpStream, args: &[&str], expect: usize) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    s.write_all(&out).expect("write");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while got.len() < expect {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    got
}

#[test]
fn resp2_and_resp3_bytes() {
    let srv = TestServer::start(&[]);
    let mut s = srv.raw();
    assert_eq!(raw(&mut s, &["RANDOMKEY"], 5), b"$-1\r\n");
    assert_eq!(raw(&mut s, &["OBJECT", "ENCODING", "x"], 5), b"$-1\r\n");
    assert_eq!(raw(&mut s, &["TYPE", "x"], 7), b"+none\r\n");
    assert_eq!(raw(&mut s, &["SCAN", "0"], 16), b"*2\r\n$1\r\n0\r\n*0\r\n");
    let hello = raw(&mut s, &["HELLO", "3"], 1);
    assert!(hello.starts_with(b"%"));
    // Let the rest of the HELLO map arrive, then drop it.
    sleep(Duration::from_millis(100));
    s.set_nonblocking(true).expect("nonblocking");
    let mut buf = [0u8; 4096];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
    }
    s.set_nonblocking(false).expect("blocking");
    assert_eq!(raw(&mut s, &["RANDOMKEY"], 3), b"_\r\n");
    assert_eq!(raw(&mut s, &["OBJECT", "ENCODING", "x"], 3), b"_\r\n");
    assert_eq!(raw(&mut s, &["SCAN", "0"], 16), b"*2\r\n$1\r\n0\r\n*0\r\n");
    assert_eq!(raw(&mut s, &["SET", "k", "v"], 5), b"+OK\r\n");
    assert_eq!(raw(&mut s, &["KEYS", "*"], 11), b"*1\r\n$1\r\nk\r\n");
}
