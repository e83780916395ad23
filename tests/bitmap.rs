//! Bitmap commands through a real client: SETBIT, GETBIT, BITCOUNT, BITPOS,
//! BITOP, BITFIELD, BITFIELD_RO, their errors, sparse bitmaps read through
//! the string commands, the poll of scenario 4, and the memory a million
//! SETBITs cost.

mod common;

use common::TestServer;
use rostrum::engine::string::StrValue;

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Runs a command and returns the error line (`CODE message`) it failed with.
fn error_of(c: &mut redis::Connection, args: &[&str]) -> String {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match cmd.query::<redis::Value>(c) {
        Ok(v) => panic!("{args:?} succeeded with {v:?}"),
        Err(e) => format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or("")),
    }
}

fn int(c: &mut redis::Connection, args: &[&str]) -> i64 {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c)
        .unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
}

fn fields(c: &mut redis::Connection, args: &[&str]) -> Vec<Option<i64>> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c)
        .unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
}

fn get(c: &mut redis::Connection, key: &str) -> Option<Vec<u8>> {
    redis::cmd("GET").arg(key).query(c).expect("GET")
}

const OFFSET_ERR: &str = "ERR bit offset is not an integer or out of range";
const TYPE_ERR: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";
const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

#[test]
fn setbit_and_getbit() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    assert_eq!(int(&mut c, &["SETBIT", "b", "7", "1"]), 0);
    assert_eq!(int(&mut c, &["SETBIT", "b", "7", "1"]), 1);
    assert_eq!(int(&mut c, &["SETBIT", "b", "20", "1"]), 0);
    assert_eq!(get(&mut c, "b"), Some(vec![0x01, 0x00, 0x08]));
    assert_eq!(int(&mut c, &["GETBIT", "b", "20"]), 1);
    assert_eq!(int(&mut c, &["GETBIT", "b", "21"]), 0);
    assert_eq!(int(&mut c, &["GETBIT", "b", "4294967295"]), 0);
    assert_eq!(int(&mut c, &["GETBIT", "nokey", "3"]), 0);
    // Clearing a bit past the end still grows the string.
    assert_eq!(int(&mut c, &["SETBIT", "z", "9", "0"]), 0);
    assert_eq!(get(&mut c, "z"), Some(vec![0, 0]));
    // Integers are strings of digits.
    let _: () = redis::cmd("SET").arg("i").arg("12").query(&mut c).unwrap();
    assert_eq!(int(&mut c, &["GETBIT", "i", "2"]), 1);
    assert_eq!(int(&mut c, &["SETBIT", "i", "6", "1"]), 0);
    assert_eq!(get(&mut c, "i"), Some(b"32".to_vec()));

    for (args, want) in [
        (&["SETBIT", "b", "4294967296", "1"][..], OFFSET_ERR),
        (&["SETBIT", "b", "-1", "1"], OFFSET_ERR),
        (&["SETBIT", "b", "0012", "1"], OFFSET_ERR),
        (&["SETBIT", "b", "x", "2"], OFFSET_ERR),
        (
            &["SETBIT", "b", "1", "2"],
            "ERR bit is not an integer or out of range",
        ),
        (
            &["SETBIT", "b", "1", "01"],
            "ERR bit is not an integer or out of range",
        ),
        (
            &["SETBIT", "b", "1", "x"],
            "ERR bit is not an integer or out of range",
        ),
        (&["GETBIT", "b", "4294967296"], OFFSET_ERR),
        (&["GETBIT", "b", "-1"], OFFSET_ERR),
        (
            &["SETBIT", "b", "1"],
            "ERR wrong number of arguments for 'setbit' command",
        ),
        (
            &["GETBIT", "b"],
            "ERR wrong number of arguments for 'getbit' command",
        ),
    ] {
        assert_eq!(error_of(&mut c, args), want, "{args:?}");
    }
    // The offset limit follows proto-max-bulk-len.
    assert_eq!(int(&mut c, &["SETBIT", "top", "4294967295", "1"]), 0);
    assert_eq!(int(&mut c, &["GETBIT", "top", "4294967295"]), 1);
}

#[test]
fn bitcount_and_bitpos() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("foobar")
        .query(&mut c)
        .unwrap();
    let cases: &[(&[&str], i64)] = &[
        (&["BITCOUNT", "k"], 26),
        (&["BITCOUNT", "k", "0", "0"], 4),
        (&["BITCOUNT", "k", "1", "1"], 6),
        (&["BITCOUNT", "k", "1", "1", "BYTE"], 6),
        (&["BITCOUNT", "k", "5", "30", "BIT"], 17),
        (&["BITCOUNT", "k", "-2", "-1", "bit"], 1),
        (&["BITCOUNT", "k", "-100", "100"], 26),
        (&["BITCOUNT", "k", "3", "2"], 0),
        (&["BITCOUNT", "k", "-1", "-2", "nonsense"], 0),
        (&["BITCOUNT", "nokey", "x", "y"], 0),
    ];
    for (args, want) in cases {
        assert_eq!(int(&mut c, args), *want, "{args:?}");
    }
    assert_eq!(
        error_of(&mut c, &["BITCOUNT", "k", "0"]),
        "ERR syntax error"
    );
    assert_eq!(
        error_of(&mut c, &["BITCOUNT", "k", "0", "1", "WORD"]),
        "ERR syntax error"
    );
    assert_eq!(
        error_of(&mut c, &["BITCOUNT", "k", "a", "1"]),
        "ERR value is not an integer or out of range"
    );

    let _: () = redis::cmd("SET")
        .arg("p")
        .arg(&[0xffu8, 0xf0, 0x00][..])
        .query(&mut c)
        .unwrap();
    let cases: &[(&[&str], i64)] = &[
        (&["BITPOS", "p", "0"], 12),
        (&["BITPOS", "p", "1"], 0),
        (&["BITPOS", "p", "1", "2"], -1),
        (&["BITPOS", "p", "0", "2"], 16),
        (&["BITPOS", "p", "1", "0", "-1", "BIT"], 0),
        (&["BITPOS", "p", "0", "0", "11", "BIT"], -1),
        (&["BITPOS", "p", "1", "12", "-1", "BIT"], -1),
        (&["BITPOS", "p", "0", "3", "14", "BIT"], 12),
        (&["BITPOS", "p", "0", "2", "1"], -1),
        (&["BITPOS", "nokey", "0"], 0),
        (&["BITPOS", "nokey", "1"], -1),
        (&["BITPOS", "nokey", "1", "x", "y"], -1),
    ];
    for (args, want) in cases {
        assert_eq!(int(&mut c, args), *want, "{args:?}");
    }
    // All ones: without an end the string counts as followed by zeros.
    let _: () = redis::cmd("SET")
        .arg("ones")
        .arg(&[0xffu8; 3][..])
        .query(&mut c)
        .unwrap();
    assert_eq!(int(&mut c, &["BITPOS", "ones", "0"]), 24);
    assert_eq!(int(&mut c, &["BITPOS", "ones", "0", "1"]), 24);
    assert_eq!(int(&mut c, &["BITPOS", "ones", "0", "0", "-1"]), -1);
    assert_eq!(
        error_of(&mut c, &["BITPOS", "p", "2"]),
        "ERR The bit argument must be 1 or 0."
    );
    assert_eq!(
        error_of(&mut c, &["BITPOS", "p", "1", "0", "x", "BIT"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        error_of(&mut c, &["BITPOS", "p", "1", "12", "BIT"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        error_of(&mut c, &["BITPOS", "p", "1", "0", "1", "BITS"]),
        "ERR syntax error"
    );
}

#[test]
fn bitop() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let _: () = redis::cmd("SET")
        .arg("a")
        .arg("foobar")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("b")
        .arg("abcdef")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SET").arg("s").arg("ab").query(&mut c).unwrap();
    assert_eq!(int(&mut c, &["BITOP", "AND", "d", "a", "b"]), 6);
    assert_eq!(get(&mut c, "d"), Some(b"`bc`ab".to_vec()));
    assert_eq!(int(&mut c, &["BITOP", "or", "d", "a", "b", "nokey"]), 6);
    assert_eq!(get(&mut c, "d"), Some(b"goofev".to_vec()));
    assert_eq!(int(&mut c, &["BITOP", "XOR", "d", "a", "s"]), 6);
    assert_eq!(get(&mut c, "d"), Some(b"\x07\x0dobar".to_vec()));
    assert_eq!(int(&mut c, &["BITOP", "AND", "d", "a", "s"]), 6);
    assert_eq!(get(&mut c, "d"), Some(b"`b\0\0\0\0".to_vec()));
    assert_eq!(int(&mut c, &["BITOP", "NOT", "d", "s"]), 2);
    assert_eq!(get(&mut c, "d"), Some(vec![!b'a', !b'b']));
    // An empty result deletes the destination.
    assert_eq!(int(&mut c, &["BITOP", "OR", "d", "nokey", "nokey2"]), 0);
    assert_eq!(get(&mut c, "d"), None);
    assert_eq!(
        error_of(&mut c, &["BITOP", "NOT", "d", "a", "b"]),
        "ERR BITOP NOT must be called with a single source key."
    );
    assert_eq!(
        error_of(&mut c, &["BITOP", "NAND", "d", "a"]),
        "ERR syntax error"
    );
    assert_eq!(
        error_of(&mut c, &["BITOP", "AND", "d"]),
        "ERR wrong number of arguments for 'bitop' command"
    );

    // Sparse operands (far offsets) mixed with a plain one.
    assert_eq!(int(&mut c, &["SETBIT", "x", "3", "1"]), 0);
    assert_eq!(int(&mut c, &["SETBIT", "x", "8000000", "1"]), 0);
    assert_eq!(int(&mut c, &["SETBIT", "y", "8000000", "1"]), 0);
    assert_eq!(int(&mut c, &["SETBIT", "y", "8000007", "1"]), 0);
    assert_eq!(int(&mut c, &["BITOP", "AND", "d", "x", "y"]), 1_000_001);
    assert_eq!(int(&mut c, &["BITCOUNT", "d"]), 1);
    assert_eq!(int(&mut c, &["BITPOS", "d", "1"]), 8_000_000);
    assert_eq!(
        int(&mut c, &["BITOP", "XOR", "d", "x", "y", "a"]),
        1_000_001
    );
    // x's bit 3 is clear in "foobar"; y's bit 8000007 stays alone.
    assert_eq!(int(&mut c, &["BITCOUNT", "d"]), 26 + 1 + 1);
    let d = get(&mut c, "d").unwrap();
    let mut want = vec![0u8; 1_000_001];
    want[..6].copy_from_slice(b"foobar");
    want[0] ^= 0x10;
    want[1_000_000] = 0x01;
    assert_eq!(d, want);
    assert_eq!(int(&mut c, &["BITOP", "NOT", "d", "x"]), 1_000_001);
    assert_eq!(int(&mut c, &["BITCOUNT", "d"]), 8_000_008 - 2);
}

#[test]
fn bitfield() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    assert_eq!(
        fields(
            &mut c,
            &["BITFIELD", "f", "SET", "u8", "0", "255", "GET", "u8", "0"]
        ),
        vec![Some(0), Some(255)]
    );
    assert_eq!(
        fields(
            &mut c,
            &["BITFIELD", "f", "GET", "u4", "0", "GET", "i4", "0", "GET", "i8", "0"]
        ),
        vec![Some(15), Some(-1), Some(-1)]
    );
    assert_eq!(
        fields(
            &mut c,
            &["BITFIELD", "f", "INCRBY", "u8", "0", "1", "SET", "i16", "#1", "-2"]
        ),
        vec![Some(0), Some(0)]
    );
    assert_eq!(get(&mut c, "f"), Some(vec![0, 0, 0xff, 0xfe]));
    assert_eq!(
        fields(
            &mut c,
            &[
                "BITFIELD", "g", "SET", "i8", "0", "100", "INCRBY", "i8", "0", "100", "OVERFLOW",
                "SAT", "INCRBY", "i8", "0", "100", "OVERFLOW", "FAIL", "INCRBY", "i8", "0", "1",
                "GET", "i8", "0"
            ]
        ),
        vec![Some(0), Some(-56), Some(44), Some(45), Some(45)]
    );
    assert_eq!(
        fields(
            &mut c,
            &["BITFIELD", "g", "OVERFLOW", "FAIL", "SET", "u8", "0", "256", "GET", "u8", "0"]
        ),
        vec![None, Some(45)]
    );
    assert_eq!(
        fields(
            &mut c,
            &["BITFIELD", "g", "OVERFLOW", "SAT", "SET", "u8", "0", "-1", "GET", "u8", "0"]
        ),
        vec![Some(45), Some(255)]
    );
    assert_eq!(
        fields(
            &mut c,
            &[
                "BITFIELD",
                "g",
                "SET",
                "i64",
                "8",
                "9223372036854775807",
                "INCRBY",
                "i64",
                "8",
                "1"
            ]
        ),
        vec![Some(0), Some(i64::MIN)]
    );
    // A failed write still grows the string.
    assert_eq!(
        fields(
            &mut c,
            &["BITFIELD", "h", "OVERFLOW", "FAIL", "INCRBY", "u2", "100", "7"]
        ),
        vec![None]
    );
    assert_eq!(get(&mut c, "h"), Some(vec![0; 13]));
    assert_eq!(
        fields(&mut c, &["BITFIELD", "nokey", "GET", "u8", "0"]),
        vec![Some(0)]
    );
    assert_eq!(get(&mut c, "nokey"), None);
    assert_eq!(fields(&mut c, &["BITFIELD", "f"]), vec![]);
    assert_eq!(
        fields(
            &mut c,
            &["BITFIELD_RO", "f", "GET", "u8", "16", "OVERFLOW", "SAT"]
        ),
        vec![Some(255)]
    );

    for (args, want) in [
        (&["BITFIELD", "f", "GET", "u64", "0"][..], TYPE_ERR),
        (&["BITFIELD", "f", "GET", "i65", "0"], TYPE_ERR),
        (&["BITFIELD", "f", "GET", "U8", "0"], TYPE_ERR),
        (&["BITFIELD", "f", "GET", "u0", "0"], TYPE_ERR),
        (&["BITFIELD", "f", "GET", "u8", "#-1"], OFFSET_ERR),
        (&["BITFIELD", "f", "GET", "u8", "4294967296"], OFFSET_ERR),
        (&["BITFIELD", "f", "GET", "u8", "#536870912"], OFFSET_ERR),
        (&["BITFIELD", "f", "GET", "u8"], "ERR syntax error"),
        (&["BITFIELD", "f", "FOO"], "ERR syntax error"),
        (
            &["BITFIELD", "f", "OVERFLOW", "NOPE", "GET", "u8", "0"],
            "ERR Invalid OVERFLOW type specified",
        ),
        (
            &["BITFIELD", "f", "SET", "u8", "0", "x"],
            "ERR value is not an integer or out of range",
        ),
        (
            &["BITFIELD_RO", "f", "SET", "u8", "0", "1"],
            "ERR BITFIELD_RO only supports the GET subcommand",
        ),
        (
            &["BITFIELD_RO", "f", "INCRBY", "u8", "0", "1"],
            "ERR BITFIELD_RO only supports the GET subcommand",
        ),
        (
            &["BITFIELD"],
            "ERR wrong number of arguments for 'bitfield' command",
        ),
    ] {
        assert_eq!(error_of(&mut c, args), want, "{args:?}");
    }
}

#[test]
fn wrong_type() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    assert_eq!(int(&mut c, &["SADD", "st", "m"]), 1);
    for args in [
        &["SETBIT", "st", "1", "1"][..],
        &["GETBIT", "st", "1"],
        &["BITCOUNT", "st"],
        &["BITCOUNT", "st", "0"],
        &["BITPOS", "st", "1"],
        &["BITOP", "AND", "d", "st"],
        &["BITFIELD", "st", "GET", "u8", "0"],
        &["BITFIELD", "st", "SET", "u8", "0", "1"],
        &["BITFIELD_RO", "st", "GET", "u8", "0"],
    ] {
        assert_eq!(error_of(&mut c, args), WRONGTYPE, "{args:?}");
    }
    // Argument errors come first.
    assert_eq!(error_of(&mut c, &["SETBIT", "st", "x", "1"]), OFFSET_ERR);
    assert_eq!(
        error_of(&mut c, &["BITFIELD_RO", "st", "SET", "u8", "0", "1"]),
        "ERR BITFIELD_RO only supports the GET subcommand"
    );
    // BITOP overwrites a destination of any type.
    let _: () = redis::cmd("SET").arg("a").arg("x").query(&mut c).unwrap();
    assert_eq!(int(&mut c, &["BITOP", "OR", "st", "a"]), 1);
    assert_eq!(get(&mut c, "st"), Some(b"x".to_vec()));
}

/// A bitmap with a bit near 2^32 reads, through the string commands, as the
/// 512 MiB string Redis would hold; a smaller far one is compared whole.
#[test]
fn sparse_bitmap_through_string_commands() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    assert_eq!(int(&mut c, &["SETBIT", "top", "4294967295", "1"]), 0);
    assert_eq!(int(&mut c, &["SETBIT", "top", "3", "1"]), 0);
    assert_eq!(int(&mut c, &["BITCOUNT", "top"]), 2);
    assert_eq!(int(&mut c, &["BITPOS", "top", "1", "1"]), 4294967295);
    assert_eq!(int(&mut c, &["BITPOS", "top", "0", "-1"]), 4294967288);
    assert_eq!(int(&mut c, &["BITCOUNT", "top", "-1", "-1"]), 1);
    assert_eq!(
        fields(
            &mut c,
            &[
                "BITFIELD",
                "top",
                "GET",
                "u8",
                "4294967288",
                "GET",
                "i8",
                "0"
            ]
        ),
        vec![Some(1), Some(0x10)]
    );

    let mut want = vec![0u8; 125_001];
    for o in [5u64, 999_999, 1_000_000] {
        assert_eq!(int(&mut c, &["SETBIT", "sb", &o.to_string(), "1"]), 0);
        want[(o / 8) as usize] |= 0x80 >> (o % 8);
    }
    assert_eq!(get(&mut c, "sb"), Some(want.clone()));
    assert_eq!(int(&mut c, &["STRLEN", "sb"]), 125_001);
    assert_eq!(int(&mut c, &["STRLEN", "top"]), 1 << 29);
    let r: Vec<u8> = redis::cmd("GETRANGE")
        .arg("top")
        .arg(-2)
        .arg(-1)
        .query(&mut c)
        .unwrap();
    assert_eq!(r, vec![0, 1]);
    // Appending to and overwriting a far bitmap keeps it compressed.
    assert_eq!(int(&mut c, &["SETBIT", "far", "4000000000", "1"]), 0);
    assert_eq!(int(&mut c, &["APPEND", "far", "ab"]), 500_000_003);
    assert_eq!(
        int(&mut c, &["SETRANGE", "far", "1000", "xyz"]),
        500_000_003
    );
    assert_eq!(
        int(&mut c, &["SETRANGE", "new", "400000000", "q"]),
        400_000_001
    );
    assert!(int(&mut c, &["MEMORY", "USAGE", "far"]) < 100_000);
    assert!(int(&mut c, &["MEMORY", "USAGE", "new"]) < 100_000);
    assert_eq!(int(&mut c, &["BITCOUNT", "far"]), 1 + 6 + 14);
    assert_eq!(int(&mut c, &["BITPOS", "far", "1", "8"]), 8000 + 1);
    let r: Vec<u8> = redis::cmd("GETRANGE")
        .arg("far")
        .arg(-3)
        .arg(-1)
        .query(&mut c)
        .unwrap();
    assert_eq!(r, b"\x80ab".to_vec());
    let r: Vec<u8> = redis::cmd("GETRANGE")
        .arg("far")
        .arg(999)
        .arg(1003)
        .query(&mut c)
        .unwrap();
    assert_eq!(r, b"\0xyz\0".to_vec());
    let r: Vec<u8> = redis::cmd("GETRANGE")
        .arg("sb")
        .arg(124_999)
        .arg(-1)
        .query(&mut c)
        .unwrap();
    assert_eq!(r, want[124_999..].to_vec());
    assert_eq!(int(&mut c, &["APPEND", "sb", "xyz"]), 125_004);
    want.extend_from_slice(b"xyz");
    assert_eq!(int(&mut c, &["SETRANGE", "sb", "2", "hello"]), 125_004);
    want[2..7].copy_from_slice(b"hello");
    assert_eq!(int(&mut c, &["SETRANGE", "sb", "300000", "\x01"]), 300_001);
    want.resize(300_000, 0);
    want.push(1);
    assert_eq!(get(&mut c, "sb"), Some(want.clone()));
    let ones: u32 = want.iter().map(|b| b.count_ones()).sum();
    assert_eq!(int(&mut c, &["BITCOUNT", "sb"]), i64::from(ones));
    assert_eq!(int(&mut c, &["GETBIT", "sb", "2400007"]), 1);
}

/// Scenario 4: 10,000 users vote through a pipeline on a few topics, each
/// at most once per topic (a repeated vote finds its bit already set).
/// The tally is the sorted set `topic_rank` (ZINCRBY topic_rank 1 topic_N);
/// the bitmaps and the live ranking must agree with it.
#[test]
fn one_vote_per_user_per_topic() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    const USERS: u64 = 10_000;
    const TOPICS: u64 = 5;
    // Each user tries a few topics, some twice; ids spread up to 2^32.
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut attempts = Vec::new();
    for u in 0..USERS {
        let uid = u * 429_496 + next() % 429_496;
        for _ in 0..3 {
            attempts.push((uid, next() % TOPICS));
        }
    }
    let mut tally = [0i64; TOPICS as usize];
    for batch in attempts.chunks(1000) {
        let mut p = redis::pipe();
        for (uid, t) in batch {
            p.cmd("SETBIT")
                .arg(format!("vote:topic:{t}"))
                .arg(*uid)
                .arg(1);
        }
        let old: Vec<i64> = p.query(&mut c).unwrap();
        let mut p = redis::pipe();
        for ((_, t), was) in batch.iter().zip(old) {
            if was == 0 {
                tally[*t as usize] += 1;
                p.cmd("ZINCRBY")
                    .arg("topic_rank")
                    .arg(1)
                    .arg(format!("topic_{t}"));
            }
        }
        let _: redis::Value = p.query(&mut c).unwrap();
    }
    let voted: std::collections::HashSet<(u64, u64)> = attempts.iter().copied().collect();
    for t in 0..TOPICS {
        let key = format!("vote:topic:{t}");
        // One counted vote per user and topic, however often they tried.
        let voters = voted.iter().filter(|(_, vt)| *vt == t).count() as i64;
        assert_eq!(tally[t as usize], voters);
        let server_tally: i64 = redis::cmd("ZSCORE")
            .arg("topic_rank")
            .arg(format!("topic_{t}"))
            .query::<Option<i64>>(&mut c)
            .unwrap()
            .unwrap_or(0);
        assert_eq!(server_tally, tally[t as usize]);
        assert_eq!(int(&mut c, &["BITCOUNT", &key]), tally[t as usize]);
    }
    // The live ranking: ZREVRANGE topic_rank 0 9 WITHSCORES, highest first.
    let ranking: Vec<(String, i64)> = redis::cmd("ZREVRANGE")
        .arg("topic_rank")
        .arg(0)
        .arg(9)
        .arg("WITHSCORES")
        .query(&mut c)
        .unwrap();
    let mut want: Vec<(String, i64)> = (0..TOPICS)
        .map(|t| (format!("topic_{t}"), tally[t as usize]))
        .filter(|(_, n)| *n > 0)
        .collect();
    want.sort_by(|a, b| b.1.cmp(&a.1).then(b.0.cmp(&a.0)));
    assert_eq!(ranking, want);
    // Every attempt finds its bit set now, and nobody else's is.
    let mut p = redis::pipe();
    for (uid, t) in &attempts {
        p.cmd("GETBIT").arg(format!("vote:topic:{t}")).arg(*uid);
        p.cmd("GETBIT").arg(format!("vote:topic:{t}")).arg(*uid + 1);
    }
    let bits: Vec<i64> = p.query(&mut c).unwrap();
    for (i, (uid, t)) in attempts.iter().enumerate() {
        assert_eq!(bits[2 * i], 1);
        assert_eq!(bits[2 * i + 1], i64::from(voted.contains(&(uid + 1, *t))));
    }
}

/// Bytes this thread holds from the allocator (jemalloc's per-thread
/// counts; other tests run on other threads meanwhile).
fn allocated() -> usize {
    let a = tikv_jemalloc_ctl::thread::allocatedp::read().map_or(0, |p| p.get());
    let d = tikv_jemalloc_ctl::thread::deallocatedp::read().map_or(0, |p| p.get());
    a.saturating_sub(d) as usize
}

/// The two 1,000,000-SETBIT cases of issue 4, measured in this process
/// with the server's allocator. Redis 7.0 figures for the same workloads
/// (INFO used_memory before/after): 536,920,600 bytes for random offsets
/// below 2^32, 131,160 bytes for offsets 0..10^6. Run with --nocapture to
/// see the figures; the targets (1/50 and 1.1x of Redis) are asserted.
#[test]
fn memory_of_a_million_setbits() {
    let mut seed: u64 = 42;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let before = allocated();
    let mut sparse = StrValue::raw(Vec::new());
    for _ in 0..1_000_000 {
        sparse.set_bit(next() & 0xffff_ffff, true);
    }
    let sparse_alloc = allocated() - before;
    let before = allocated();
    let mut dense = StrValue::raw(Vec::new());
    for o in 0..1_000_000 {
        dense.set_bit(o, true);
    }
    let dense_alloc = allocated() - before;
    println!(
        "sparse: len {} compressed {} memory_usage {} jemalloc {} (redis 536920600)",
        sparse.len(),
        sparse.is_compressed(),
        sparse.memory_usage(),
        sparse_alloc
    );
    println!(
        "dense: len {} compressed {} memory_usage {} jemalloc {} (redis 131160)",
        dense.len(),
        dense.is_compressed(),
        dense.memory_usage(),
        dense_alloc
    );
    assert!(sparse.is_compressed() && !dense.is_compressed());
    assert!(sparse_alloc <= 536_920_600 / 50);
    assert!(dense_alloc * 10 <= 131_160 * 11);
}

/// INFO used_memory, as a number.
fn used_memory(c: &mut redis::Connection) -> i64 {
    common::info(c, "memory")["used_memory"].parse().unwrap()
}

/// Sets the last bit of each of the first `bytes` bytes of `key`, in order
/// (the string grows a byte at a time, as with SETBITs at 0..8 * bytes).
fn fill_in_order(c: &mut redis::Connection, key: &str, bytes: u64) {
    for start in (0..bytes).step_by(10_000) {
        let mut p = redis::pipe();
        for i in start..(start + 10_000).min(bytes) {
            p.cmd("SETBIT").arg(key).arg(i * 8 + 7).arg(1).ignore();
        }
        p.query::<()>(c).unwrap();
    }
}

/// Issue 4's dense case: a bitmap grown in order to 125,000 bytes takes
/// about what Redis takes (131,120 bytes of MEMORY USAGE, 131,128 of
/// used_memory growth), and used_memory counts only live memory: not the
/// buffers the string outgrew, which the allocator's thread caches keep.
#[test]
fn dense_bitmap_memory_is_its_bytes() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    // The same pipelines once first, so the connection's buffers are at
    // their size before the measured run.
    fill_in_order(&mut c, "warm", 125_000);
    assert_eq!(int(&mut c, &["DEL", "warm"]), 1);
    let before = used_memory(&mut c);
    fill_in_order(&mut c, "dense", 125_000);
    let grown = used_memory(&mut c) - before;
    let usage = int(&mut c, &["MEMORY", "USAGE", "dense"]);
    println!("dense: MEMORY USAGE {usage}, used_memory growth {grown}");
    assert_eq!(int(&mut c, &["STRLEN", "dense"]), 125_000);
    assert_eq!(int(&mut c, &["BITCOUNT", "dense"]), 125_000);
    assert!((125_000..=125_000 * 11 / 10).contains(&usage));
    assert!(grown <= 131_128 * 11 / 10, "used_memory grew by {grown}");
}

/// Values freed by DEL leave used_memory, even while the allocator's thread
/// caches keep their blocks for reuse (as Redis's own counter does).
#[test]
fn freed_values_leave_used_memory() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let value = vec![b'x'; 20_000];
    let keys: Vec<String> = (0..10).map(|i| format!("v{i}")).collect();
    // Once first, so the connection's buffers are at their size.
    for round in 0..2 {
        let before = used_memory(&mut c);
        for k in &keys {
            let _: () = redis::cmd("SET").arg(k).arg(&value).query(&mut c).unwrap();
        }
        let held = used_memory(&mut c) - before;
        assert!(held >= 10 * 20_000, "10 values of 20,000 bytes: {held}");
        for k in &keys {
            assert_eq!(int(&mut c, &["DEL", k]), 1);
        }
        let left = used_memory(&mut c) - before;
        println!("round {round}: held {held}, left after DEL {left}");
        if round == 1 {
            assert!(left < 20_000, "{left} bytes still counted after DEL");
        }
    }
}
