//! Set commands through the redis crate (and raw sockets for exact error
//! lines and RESP3 reply types) against a spawned Rostrum.
mod common;

use std::collections::BTreeSet;
use std::io::Write;
use std::net::TcpStream;

use common::{read_at_least, TestServer};
use redis::Connection;

fn q<T: redis::FromRedisValue>(c: &mut Connection, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c)
        .unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
}

fn strings(c: &mut Connection, args: &[&str]) -> BTreeSet<String> {
    let v: Vec<String> = q(c, args);
    let n = v.len();
    let set: BTreeSet<String> = v.into_iter().collect();
    assert_eq!(set.len(), n, "{args:?} repeated a member");
    set
}

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

fn set_of(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn add_remove_count_and_membership() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    assert_eq!(q::<i64>(&mut c, &["SADD", "s", "3", "1", "2", "1"]), 3);
    assert_eq!(q::<i64>(&mut c, &["SADD", "s", "2", "4"]), 1);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "s"]), 4);
    // An intset replies in ascending order.
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SMEMBERS", "s"]),
        vec!["1", "2", "3", "4"]
    );
    assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "s", "3"]), 1);
    assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "s", "03"]), 0);
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["SMISMEMBER", "s", "1", "9", "4"]),
        vec![1, 0, 1]
    );
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["SMISMEMBER", "nokey", "1", "9"]),
        vec![0, 0]
    );
    assert_eq!(q::<i64>(&mut c, &["SADD", "s", "hello"]), 1);
    assert_eq!(
        strings(&mut c, &["SMEMBERS", "s"]),
        set_of(&["1", "2", "3", "4", "hello"])
    );
    assert_eq!(q::<i64>(&mut c, &["SREM", "s", "1", "hello", "nope"]), 2);
    assert_eq!(q::<i64>(&mut c, &["SREM", "s", "2", "3", "4"]), 3);
    // An emptied set is deleted.
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "s"]), 0);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "s"]), 0);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SMEMBERS", "s"]),
        Vec::<String>::new()
    );
    assert_eq!(q::<i64>(&mut c, &["SREM", "s", "x"]), 0);
    // Binary-safe members.
    let _: i64 = redis::cmd("SADD")
        .arg("bin")
        .arg(&b"a\x00b\xff"[..])
        .query(&mut c)
        .unwrap();
    let m: Vec<Vec<u8>> = q(&mut c, &["SMEMBERS", "bin"]);
    assert_eq!(m, vec![b"a\x00b\xff".to_vec()]);
}

#[test]
fn friend_list_of_scenario_one() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    // 1,000 integer ids: more than set-max-intset-entries, so a hashtable.
    let ids: Vec<String> = (0..1000).map(|i| (100_000 + i * 7).to_string()).collect();
    let mut sadd = redis::cmd("SADD");
    sadd.arg("friends:1").arg(&ids);
    assert_eq!(sadd.query::<i64>(&mut c).unwrap(), 1000);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "friends:1"]), 1000);
    let mut pipe = redis::pipe();
    for id in &ids {
        pipe.cmd("SISMEMBER").arg("friends:1").arg(id);
    }
    pipe.cmd("SISMEMBER").arg("friends:1").arg("100001");
    let found: Vec<i64> = pipe.query(&mut c).unwrap();
    assert_eq!(&found[..1000], &[1; 1000][..]);
    assert_eq!(found[1000], 0);
    let members = strings(&mut c, &["SMEMBERS", "friends:1"]);
    assert_eq!(members, ids.iter().cloned().collect::<BTreeSet<_>>());

    // The same with `user:<id>` members, 5,000 of them.
    let users: Vec<String> = (0..5000)
        .map(|i| format!("user:{}", 1_000_000 + i))
        .collect();
    let mut sadd = redis::cmd("SADD");
    sadd.arg("friends:2").arg(&users);
    assert_eq!(sadd.query::<i64>(&mut c).unwrap(), 5000);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "friends:2"]), 5000);
    assert_eq!(
        q::<i64>(&mut c, &["SISMEMBER", "friends:2", "user:1004999"]),
        1
    );
    assert_eq!(
        q::<i64>(&mut c, &["SISMEMBER", "friends:2", "user:1005000"]),
        0
    );
    let members = strings(&mut c, &["SMEMBERS", "friends:2"]);
    assert_eq!(members, users.iter().cloned().collect::<BTreeSet<_>>());
    // Unfriend half of them.
    let mut srem = redis::cmd("SREM");
    srem.arg("friends:2").arg(&users[..2500]);
    assert_eq!(srem.query::<i64>(&mut c).unwrap(), 2500);
    let members = strings(&mut c, &["SMEMBERS", "friends:2"]);
    assert_eq!(
        members,
        users[2500..].iter().cloned().collect::<BTreeSet<_>>()
    );
}

fn check_random_commands(c: &mut Connection, key: &str, all: &BTreeSet<String>) {
    let n = all.len();
    let one: String = q(c, &["SRANDMEMBER", key]);
    assert!(all.contains(&one));
    for count in [1, 5, n - 1, n, n + 10] {
        let got = strings(c, &["SRANDMEMBER", key, &count.to_string()]);
        assert_eq!(got.len(), count.min(n), "count {count}");
        assert!(got.is_subset(all));
    }
    let with_repeats: Vec<String> = q(c, &["SRANDMEMBER", key, "-200"]);
    assert_eq!(with_repeats.len(), 200);
    assert!(with_repeats.iter().all(|m| all.contains(m)));
    assert_eq!(q::<Vec<String>>(c, &["SRANDMEMBER", key, "0"]).len(), 0);
    assert_eq!(
        q::<i64>(c, &["SCARD", key]),
        n as i64,
        "SRANDMEMBER changed the set"
    );

    // SPOP: popped members are distinct, belong to the set, and are gone.
    let mut left = all.clone();
    let popped: String = q(c, &["SPOP", key]);
    assert!(left.remove(&popped));
    let popped = strings(c, &["SPOP", key, "7"]);
    assert_eq!(popped.len(), 7);
    for m in &popped {
        assert!(left.remove(m), "{m} popped twice or never there");
    }
    // Most of the rest at once (Redis rebuilds the remainder then).
    let popped = strings(c, &["SPOP", key, &(left.len() - 2).to_string()]);
    for m in &popped {
        assert!(left.remove(m));
    }
    assert_eq!(strings(c, &["SMEMBERS", key]), left);
    let popped = strings(c, &["SPOP", key, "10"]);
    assert_eq!(popped, left);
    assert_eq!(q::<i64>(c, &["EXISTS", key]), 0);
    assert_eq!(q::<Option<String>>(c, &["SPOP", key]), None);
    assert_eq!(q::<Vec<String>>(c, &["SPOP", key, "3"]).len(), 0);
    assert_eq!(q::<Option<String>>(c, &["SRANDMEMBER", key]), None);
}

#[test]
fn spop_and_srandmember_properties() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    for (key, members) in [
        (
            "ints",
            (0..60).map(|i| (i * 3).to_string()).collect::<Vec<_>>(),
        ),
        ("strs", (0..60).map(|i| format!("m{i}")).collect()),
        ("bigints", (0..600).map(|i| i.to_string()).collect()),
    ] {
        let mut sadd = redis::cmd("SADD");
        sadd.arg(key).arg(&members);
        let _: i64 = sadd.query(&mut c).unwrap();
        check_random_commands(&mut c, key, &members.into_iter().collect());
    }
    // The last member of a set popped alone deletes the key.
    assert_eq!(q::<i64>(&mut c, &["SADD", "solo", "x"]), 1);
    assert_eq!(q::<String>(&mut c, &["SPOP", "solo"]), "x");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "solo"]), 0);
}

#[test]
fn smove_between_sets() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    q::<i64>(&mut c, &["SADD", "a", "1", "2"]);
    q::<i64>(&mut c, &["SADD", "b", "x"]);
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "a", "b", "1"]), 1);
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "a", "b", "9"]), 0);
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "a", "a", "2"]), 1);
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "a", "a", "9"]), 0);
    assert_eq!(strings(&mut c, &["SMEMBERS", "b"]), set_of(&["1", "x"]));
    // Moving the last member deletes the source and creates the target.
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "a", "new", "2"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "a"]), 0);
    assert_eq!(q::<Vec<String>>(&mut c, &["SMEMBERS", "new"]), vec!["2"]);
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "nokey", "new", "2"]), 0);
    // A member already in the target still leaves the source.
    q::<i64>(&mut c, &["SADD", "c", "2", "3"]);
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "c", "new", "2"]), 1);
    assert_eq!(q::<Vec<String>>(&mut c, &["SMEMBERS", "c"]), vec!["3"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["SMEMBERS", "new"]), vec!["2"]);
}

/// A deterministic pseudo-random sequence (no dependency on `rand` here).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[test]
fn algebra_matches_a_model() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let mut rng = Lcg(42);
    for round in 0..6 {
        let keys = ["k1", "k2", "k3"];
        let mut model: Vec<BTreeSet<String>> = Vec::new();
        for k in keys {
            let _: i64 = q(&mut c, &["DEL", k]);
            let size = [5, 40, 700][rng.next(3) as usize];
            let set: BTreeSet<String> = (0..size)
                .map(|_| {
                    let v = rng.next(900);
                    // Some rounds mix in strings (hashtable encoding).
                    if round % 2 == 1 && v.is_multiple_of(5) {
                        format!("s{v}")
                    } else {
                        v.to_string()
                    }
                })
                .collect();
            let mut sadd = redis::cmd("SADD");
            sadd.arg(k).arg(set.iter().collect::<Vec<_>>());
            let _: i64 = sadd.query(&mut c).unwrap();
            model.push(set);
        }
        let inter: BTreeSet<String> = model[0]
            .iter()
            .filter(|m| model[1].contains(*m) && model[2].contains(*m))
            .cloned()
            .collect();
        let union: BTreeSet<String> = model.iter().flatten().cloned().collect();
        let diff: BTreeSet<String> = model[0]
            .iter()
            .filter(|m| !model[1].contains(*m) && !model[2].contains(*m))
            .cloned()
            .collect();
        assert_eq!(strings(&mut c, &["SINTER", "k1", "k2", "k3"]), inter);
        assert_eq!(strings(&mut c, &["SUNION", "k1", "k2", "k3"]), union);
        assert_eq!(strings(&mut c, &["SDIFF", "k1", "k2", "k3"]), diff);
        assert_eq!(
            q::<usize>(&mut c, &["SINTERCARD", "3", "k1", "k2", "k3"]),
            inter.len()
        );
        assert_eq!(
            q::<usize>(&mut c, &["SINTERCARD", "3", "k1", "k2", "k3", "LIMIT", "2"]),
            inter.len().min(2)
        );
        for (cmd, want) in [
            ("SINTERSTORE", &inter),
            ("SUNIONSTORE", &union),
            ("SDIFFSTORE", &diff),
        ] {
            let n: usize = q(&mut c, &[cmd, "dst", "k1", "k2", "k3"]);
            assert_eq!(n, want.len(), "{cmd}");
            assert_eq!(strings(&mut c, &["SMEMBERS", "dst"]), *want, "{cmd}");
        }
    }
    // Missing keys: empty intersection, ignored in unions, empty diff base.
    assert_eq!(strings(&mut c, &["SINTER", "k1", "nokey"]).len(), 0);
    assert_eq!(
        strings(&mut c, &["SUNION", "k1", "nokey"]),
        strings(&mut c, &["SMEMBERS", "k1"])
    );
    assert_eq!(strings(&mut c, &["SDIFF", "nokey", "k1"]).len(), 0);
    // An empty result deletes the destination, whatever it held.
    let _: () = q(&mut c, &["SET", "dst", "string"]);
    assert_eq!(q::<i64>(&mut c, &["SINTERSTORE", "dst", "k1", "nokey"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "dst"]), 0);
    assert_eq!(q::<i64>(&mut c, &["SDIFFSTORE", "dst", "k1", "k1"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "dst"]), 0);
    // A source can be its own destination.
    let before = strings(&mut c, &["SUNION", "k1", "k2"]);
    let n: usize = q(&mut c, &["SUNIONSTORE", "k1", "k1", "k2"]);
    assert_eq!(n, before.len());
    assert_eq!(strings(&mut c, &["SMEMBERS", "k1"]), before);
}

fn full_scan(c: &mut Connection, key: &str, extra: &[&str]) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut cursor = "0".to_string();
    for _ in 0..100_000 {
        let mut args = vec!["SSCAN", key, cursor.as_str()];
        args.extend_from_slice(extra);
        let (next, batch): (String, Vec<String>) = q(c, &args);
        seen.extend(batch);
        if next == "0" {
            return seen;
        }
        cursor = next;
    }
    panic!("SSCAN did not finish");
}

#[test]
fn sscan_visits_every_member() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let members: Vec<String> = (0..2000).map(|i| format!("user:{i}")).collect();
    let mut sadd = redis::cmd("SADD");
    sadd.arg("f").arg(&members);
    let _: i64 = sadd.query(&mut c).unwrap();
    let all: BTreeSet<String> = members.iter().cloned().collect();
    assert_eq!(full_scan(&mut c, "f", &[]), all);
    assert_eq!(full_scan(&mut c, "f", &["COUNT", "7"]), all);
    let tens: BTreeSet<String> = all.iter().filter(|m| m.ends_with('0')).cloned().collect();
    assert_eq!(
        full_scan(&mut c, "f", &["MATCH", "*0", "COUNT", "50"]),
        tens
    );

    // Members present for the whole scan come back even while the set grows.
    let mut seen = BTreeSet::new();
    let mut cursor = "0".to_string();
    let mut step = 0;
    loop {
        let (next, batch): (String, Vec<String>) = q(&mut c, &["SSCAN", "f", &cursor]);
        seen.extend(batch);
        step += 1;
        if step < 30 {
            let more: Vec<String> = (0..200).map(|i| format!("late:{step}:{i}")).collect();
            let mut sadd = redis::cmd("SADD");
            sadd.arg("f").arg(&more);
            let _: i64 = sadd.query(&mut c).unwrap();
        }
        if next == "0" || step > 100_000 {
            break;
        }
        cursor = next;
    }
    assert!(all.is_subset(&seen));

    // An intset comes back whole with cursor 0.
    q::<i64>(&mut c, &["SADD", "i", "3", "1", "2"]);
    let (next, batch): (String, Vec<String>) = q(&mut c, &["SSCAN", "i", "0", "COUNT", "1"]);
    assert_eq!(
        (next.as_str(), batch),
        ("0", vec!["1".into(), "2".into(), "3".into()])
    );
    let (next, batch): (String, Vec<String>) = q(&mut c, &["SSCAN", "nokey", "0"]);
    assert_eq!((next.as_str(), batch.len()), ("0", 0));
}

#[test]
fn errors_are_redis_lines() {
    let srv = TestServer::start(&[]);
    let mut s = srv.raw();
    let wrongtype = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
    expect_raw(&mut s, &["SET", "str", "x"], "+OK\r\n");
    expect_raw(&mut s, &["SADD", "s", "1", "2", "3"], ":3\r\n");
    for cmd in [
        &["SADD", "str", "a"][..],
        &["SREM", "str", "a"],
        &["SMEMBERS", "str"],
        &["SISMEMBER", "str", "a"],
        &["SMISMEMBER", "str", "a"],
        &["SCARD", "str"],
        &["SRANDMEMBER", "str"],
        &["SRANDMEMBER", "str", "2"],
        &["SPOP", "str"],
        &["SPOP", "str", "0"],
        &["SMOVE", "str", "s", "1"],
        &["SMOVE", "s", "str", "1"],
        &["SINTER", "nokey", "str"],
        &["SINTERCARD", "2", "nokey", "str"],
        &["SUNION", "s", "str"],
        &["SDIFF", "nokey", "str"],
        &["SINTERSTORE", "d", "nokey", "str"],
        &["SUNIONSTORE", "d", "str"],
        &["SDIFFSTORE", "d", "s", "str"],
        &["SSCAN", "str", "0"],
    ] {
        expect_raw(&mut s, cmd, wrongtype);
    }
    expect_raw(&mut s, &["SMOVE", "nokey", "str", "1"], ":0\r\n");
    for (cmd, name) in [
        (&["SADD", "s"][..], "sadd"),
        (&["SREM", "s"], "srem"),
        (&["SMEMBERS"], "smembers"),
        (&["SMEMBERS", "a", "b"], "smembers"),
        (&["SISMEMBER", "s"], "sismember"),
        (&["SMISMEMBER", "s"], "smismember"),
        (&["SCARD"], "scard"),
        (&["SRANDMEMBER"], "srandmember"),
        (&["SPOP"], "spop"),
        (&["SMOVE", "a", "b"], "smove"),
        (&["SINTER"], "sinter"),
        (&["SINTERCARD", "1"], "sintercard"),
        (&["SUNION"], "sunion"),
        (&["SDIFF"], "sdiff"),
        (&["SINTERSTORE", "d"], "sinterstore"),
        (&["SUNIONSTORE", "d"], "sunionstore"),
        (&["SDIFFSTORE", "d"], "sdiffstore"),
        (&["SSCAN", "s"], "sscan"),
    ] {
        let want = format!("-ERR wrong number of arguments for '{name}' command\r\n");
        expect_raw(&mut s, cmd, &want);
    }
    let cases: &[(&[&str], &str)] = &[
        (&["SRANDMEMBER", "s", "x"], "-ERR value is not an integer or out of range\r\n"),
        (
            &["SRANDMEMBER", "s", "-9223372036854775808"],
            "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n",
        ),
        (&["SRANDMEMBER", "s", "1", "2"], "-ERR syntax error\r\n"),
        (&["SPOP", "s", "-1"], "-ERR value is out of range, must be positive\r\n"),
        (&["SPOP", "s", "x"], "-ERR value is out of range, must be positive\r\n"),
        (&["SPOP", "s", "1", "2"], "-ERR syntax error\r\n"),
        (&["SINTERCARD", "0", "s"], "-ERR numkeys should be greater than 0\r\n"),
        (&["SINTERCARD", "x", "s"], "-ERR numkeys should be greater than 0\r\n"),
        (
            &["SINTERCARD", "2", "s"],
            "-ERR Number of keys can't be greater than number of args\r\n",
        ),
        (&["SINTERCARD", "1", "s", "LIMIT", "-1"], "-ERR LIMIT can't be negative\r\n"),
        (&["SINTERCARD", "1", "s", "LIMIT", "x"], "-ERR LIMIT can't be negative\r\n"),
        (&["SINTERCARD", "1", "s", "LIMIT"], "-ERR syntax error\r\n"),
        (&["SINTERCARD", "1", "s", "FOO", "1"], "-ERR syntax error\r\n"),
        (&["SSCAN", "s", "x"], "-ERR invalid cursor\r\n"),
        (&["SSCAN", "s", "18446744073709551616"], "-ERR invalid cursor\r\n"),
        (&["SSCAN", "nokey", "x"], "-ERR invalid cursor\r\n"),
        (&["SSCAN", "s", "0", "COUNT", "0"], "-ERR syntax error\r\n"),
        (&["SSCAN", "s", "0", "COUNT", "x"], "-ERR value is not an integer or out of range\r\n"),
        (&["SSCAN", "s", "0", "MATCH"], "-ERR syntax error\r\n"),
        (&["SSCAN", "s", "0", "TYPE", "string"], "-ERR syntax error\r\n"),
        // Options are not read for a missing key, as in Redis.
        (&["SSCAN", "nokey", "0", "COUNT", "x"], "*2\r\n$1\r\n0\r\n*0\r\n"),
        (&["SINTERCARD", "1", "s", "LIMIT", "0"], ":3\r\n"),
        (&["SINTERCARD", "1", "s", "LIMIT", "5", "LIMIT", "2"], ":2\r\n"),
    ];
    for (cmd, want) in cases {
        expect_raw(&mut s, cmd, want);
    }
}

#[test]
fn resp3_reply_types() {
    let srv = TestServer::start(&[]);
    let mut s = srv.raw();
    s.write_all(&encode(&["HELLO", "3"])).unwrap();
    let hello = read_at_least(&mut s, 1);
    assert!(
        hello.starts_with(b"%"),
        "{}",
        String::from_utf8_lossy(&hello)
    );
    expect_raw(&mut s, &["SADD", "s", "2", "1"], ":2\r\n");
    let set12 = "~2\r\n$1\r\n1\r\n$1\r\n2\r\n";
    expect_raw(&mut s, &["SMEMBERS", "s"], set12);
    expect_raw(&mut s, &["SINTER", "s"], set12);
    expect_raw(&mut s, &["SUNION", "s"], set12);
    expect_raw(&mut s, &["SDIFF", "s"], set12);
    expect_raw(&mut s, &["SMEMBERS", "nokey"], "~0\r\n");
    expect_raw(
        &mut s,
        &["SRANDMEMBER", "s", "5"],
        "*2\r\n$1\r\n1\r\n$1\r\n2\r\n",
    );
    expect_raw(&mut s, &["SRANDMEMBER", "nokey"], "_\r\n");
    expect_raw(&mut s, &["SRANDMEMBER", "nokey", "1"], "*0\r\n");
    expect_raw(&mut s, &["SMISMEMBER", "s", "1", "3"], "*2\r\n:1\r\n:0\r\n");
    expect_raw(&mut s, &["SPOP", "nokey"], "_\r\n");
    expect_raw(&mut s, &["SPOP", "nokey", "1"], "~0\r\n");
    expect_raw(&mut s, &["SPOP", "s", "0"], "~0\r\n");
    expect_raw(&mut s, &["SPOP", "s", "2"], set12);
    expect_raw(&mut s, &["SADD", "t", "a", "b"], ":2\r\n");
    s.write_all(&encode(&["SPOP", "t", "1"])).unwrap();
    let popped = read_at_least(&mut s, 11);
    assert!(
        popped == b"~1\r\n$1\r\na\r\n" || popped == b"~1\r\n$1\r\nb\r\n",
        "{}",
        String::from_utf8_lossy(&popped)
    );
}
