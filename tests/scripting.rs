//! Lua scripts and functions through the `redis` crate (and raw sockets for
//! exact bytes): the vote script of the polls scenario under concurrency,
//! the redis API, reply conversions in RESP2 and RESP3, error lines, the
//! sandbox, BUSY and SCRIPT KILL, FUNCTION commands, and persistence.

mod common;

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{read_at_least, temp_dir, TestServer};
use redis::{Commands, Value};

fn cmd(c: &mut redis::Connection, args: &[&str]) -> redis::RedisResult<Value> {
    let mut k = redis::cmd(args[0]);
    for a in &args[1..] {
        k.arg(*a);
    }
    k.query(c)
}

fn eval(c: &mut redis::Connection, script: &str) -> redis::RedisResult<Value> {
    cmd(c, &["EVAL", script, "0"])
}

/// The whole error line of a failed command (code and message).
fn err_line(r: redis::RedisResult<Value>) -> String {
    let e = r.expect_err("an error reply");
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => e.to_string(),
    }
}

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

/// RESP for a command.
fn encode(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

/// Sends commands on a raw connection and returns the exact reply bytes of
/// the last one (the connection is in RESP3 when `resp3`).
fn raw_reply(s: &TestServer, resp3: bool, args: &[&str]) -> Vec<u8> {
    let mut c = s.raw();
    let mut req = Vec::new();
    if resp3 {
        req.extend(encode(&["HELLO", "3"]));
    }
    req.extend(encode(&["PING", "marker"]));
    req.extend(encode(args));
    req.extend(encode(&["PING", "end-marker"]));
    c.write_all(&req).expect("write");
    let mut buf = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !buf.ends_with(b"end-marker\r\n") && Instant::now() < deadline {
        buf.extend(read_at_least(&mut c, 1));
    }
    let marker: &[u8] = b"$6\r\nmarker\r\n";
    let start = buf
        .windows(marker.len())
        .position(|w| w == marker)
        .expect("marker")
        + marker.len();
    let end = buf.len() - b"$10\r\nend-marker\r\n".len();
    buf[start..end].to_vec()
}

/// Scenario 4's vote, as users write it: one bit per user and topic, the
/// tally in the `topic_rank` sorted set.
const VOTE_SCRIPT: &str = r#"
if redis.call('GETBIT', KEYS[1], tonumber(ARGV[1])) == 1 then
  return 0
end
redis.call('SETBIT', KEYS[1], tonumber(ARGV[1]), 1)
redis.call('ZINCRBY', KEYS[2], 1, ARGV[2])
return 1
"#;

#[test]
fn vote_script_from_50_connections_counts_each_voter_once() {
    let s = TestServer::start(&[]);
    let script = redis::Script::new(VOTE_SCRIPT);
    const THREADS: u64 = 50;
    const VOTES: u64 = 2_000;
    const USERS: u64 = 30_000;
    const TOPICS: u64 = 5;
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let url = s.url();
            let script = script.clone();
            std::thread::spawn(move || {
                let mut c = redis::Client::open(url)
                    .expect("client")
                    .get_connection()
                    .expect("connect");
                let mut accepted = Vec::new();
                // A small LCG: votes overlap between threads, so duplicates
                // race against each other.
                let mut x = t * 7919 + 1;
                for _ in 0..VOTES {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let user = (x >> 33) % USERS;
                    let topic = (x >> 20) % TOPICS;
                    let r: i64 = script
                        .key(format!("vote:topic:{topic}"))
                        .key("topic_rank")
                        .arg(user)
                        .arg(format!("topic_{topic}"))
                        .invoke(&mut c)
                        .expect("vote");
                    if r == 1 {
                        accepted.push((topic, user));
                    }
                }
                accepted
            })
        })
        .collect();
    let mut all: Vec<(u64, u64)> = Vec::new();
    for h in handles {
        all.extend(h.join().expect("voter thread"));
    }
    // Nobody's vote was accepted twice, across all connections.
    let distinct: HashSet<(u64, u64)> = all.iter().copied().collect();
    assert_eq!(distinct.len(), all.len(), "a duplicate vote was accepted");
    let mut c = s.conn();
    let mut per_topic: HashMap<u64, i64> = HashMap::new();
    for (topic, _) in &all {
        *per_topic.entry(*topic).or_default() += 1;
    }
    for topic in 0..TOPICS {
        let want = per_topic.get(&topic).copied().unwrap_or(0);
        let tally: i64 = redis::cmd("ZSCORE")
            .arg("topic_rank")
            .arg(format!("topic_{topic}"))
            .query::<Option<i64>>(&mut c)
            .expect("zscore")
            .unwrap_or(0);
        assert_eq!(tally, want, "tally of topic {topic}");
        let bits: i64 = redis::cmd("BITCOUNT")
            .arg(format!("vote:topic:{topic}"))
            .query(&mut c)
            .expect("bitcount");
        assert_eq!(bits, want, "voters of topic {topic}");
    }
    // Every vote that was refused was a repeat of an accepted one.
    let total: i64 = per_topic.values().sum();
    assert!(total > 0 && total < (THREADS * VOTES) as i64);
}

#[test]
fn evalsha_falls_back_and_script_cache_commands() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg("return 1")
        .query(&mut c)
        .unwrap();
    assert_eq!(sha, "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
    let v: Vec<i64> = redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(&sha)
        .arg("ffffffffffffffffffffffffffffffffffffffff")
        .query(&mut c)
        .unwrap();
    assert_eq!(v, vec![1, 0]);
    assert_eq!(
        cmd(&mut c, &["EVALSHA", &sha.to_uppercase(), "0"]).unwrap(),
        Value::Int(1)
    );
    assert_eq!(
        err_line(cmd(
            &mut c,
            &["EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", "0"]
        )),
        "NOSCRIPT No matching script. Please use EVAL."
    );
    assert_eq!(
        cmd(&mut c, &["SCRIPT", "FLUSH", "ASYNC"]).unwrap(),
        Value::Okay
    );
    assert_eq!(
        err_line(cmd(&mut c, &["SCRIPT", "FLUSH", "bogus"])),
        "ERR SCRIPT FLUSH only support SYNC|ASYNC option"
    );
    // redis::Script loads the script again after the flush.
    let script = redis::Script::new("return ARGV[1] .. KEYS[1]");
    let r: String = script.key("k").arg("a").invoke(&mut c).unwrap();
    assert_eq!(r, "ak");
    assert_eq!(
        err_line(cmd(&mut c, &["SCRIPT", "KILL"])),
        "NOTBUSY No scripts in execution right now."
    );
    // EVAL caches the script too.
    eval(&mut c, "return 2").unwrap();
    let sha2 = "7f923f79fe76194c868d7e1d0820de36700eb649";
    assert_eq!(cmd(&mut c, &["EVALSHA", sha2, "0"]).unwrap(), Value::Int(2));
}

#[test]
fn numkeys_errors() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    assert_eq!(
        err_line(cmd(&mut c, &["EVAL", "return 1", "-1"])),
        "ERR Number of keys can't be negative"
    );
    assert_eq!(
        err_line(cmd(&mut c, &["EVAL", "return 1", "2", "a"])),
        "ERR Number of keys can't be greater than number of args"
    );
    assert_eq!(
        err_line(cmd(&mut c, &["EVAL", "return 1", "x"])),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err_line(cmd(&mut c, &["FCALL", "f", "x"])),
        "ERR Bad number of keys provided"
    );
    assert_eq!(
        cmd(
            &mut c,
            &[
                "EVAL",
                "return {KEYS[1], KEYS[2], ARGV[1], #ARGV}",
                "2",
                "a",
                "b",
                "c"
            ]
        )
        .unwrap(),
        Value::Array(vec![bulk("a"), bulk("b"), bulk("c"), Value::Int(1)])
    );
}

#[test]
fn error_lines_match_redis() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let sha = |body: &str| sha1_smol::Sha1::from(body).digest().to_string();
    assert_eq!(
        err_line(eval(&mut c, "return 1 +")),
        "ERR Error compiling script (new function): user_script:1: unexpected symbol near '<eof>'"
    );
    let body = "return nosuch()";
    assert_eq!(
        err_line(eval(&mut c, body)),
        format!(
            "ERR user_script:1: Script attempted to access nonexistent global variable 'nosuch' script: {}, on @user_script:1.",
            sha(body)
        )
    );
    let body = "redis.call('set','s','x') return redis.call('incr','s')";
    assert_eq!(
        err_line(eval(&mut c, body)),
        format!(
            "ERR value is not an integer or out of range script: {}, on @user_script:1.",
            sha(body)
        )
    );
    let body = "\nreturn redis.call('nosuch')";
    assert_eq!(
        err_line(eval(&mut c, body)),
        format!(
            "ERR Unknown Redis command called from script script: {}, on @user_script:2.",
            sha(body)
        )
    );
    let body = "return redis.call('get')";
    assert_eq!(
        err_line(eval(&mut c, body)),
        format!(
            "ERR Wrong number of args calling Redis command from script script: {}, on @user_script:1.",
            sha(body)
        )
    );
    let body = "return redis.call('multi')";
    assert_eq!(
        err_line(eval(&mut c, body)),
        format!(
            "ERR This Redis command is not allowed from script script: {}, on @user_script:1.",
            sha(body)
        )
    );
    let body = "return redis.call('set', 'k', {})";
    assert_eq!(
        err_line(eval(&mut c, body)),
        format!(
            "ERR Lua redis lib command arguments must be strings or integers script: {}, on @user_script:1.",
            sha(body)
        )
    );
    let body = "error('boom')";
    assert_eq!(
        err_line(eval(&mut c, body)),
        format!(
            "ERR user_script:1: boom script: {}, on @user_script:1.",
            sha(body)
        )
    );
    let body = "error({err='TABLE boom'})";
    assert_eq!(
        err_line(eval(&mut c, body)),
        format!("TABLE boom script: {}, on @user_script:1.", sha(body))
    );
    assert_eq!(
        err_line(eval(&mut c, "return redis.error_reply('My Error')")),
        "My Error"
    );
    assert_eq!(
        err_line(eval(&mut c, "return redis.error_reply('Oops')")),
        "ERR Oops"
    );
    assert_eq!(err_line(eval(&mut c, "return {err='XYZ bad'}")), "XYZ bad");
    // EVAL_RO refuses writes, and scripts declaring no-writes too.
    let body = "return redis.call('set','a','b')";
    assert_eq!(
        err_line(cmd(&mut c, &["EVAL_RO", body, "0"])),
        format!(
            "ERR Write commands are not allowed from read-only scripts. script: {}, on @user_script:1.",
            sha(body)
        )
    );
    assert_eq!(
        err_line(cmd(&mut c, &["EVAL_RO", "#!lua\nreturn 1", "0"])),
        "ERR Can not execute a script with write flag using *_ro command."
    );
    assert_eq!(
        cmd(
            &mut c,
            &[
                "EVAL_RO",
                "#!lua flags=no-writes\nreturn redis.call('get','a')",
                "0"
            ]
        )
        .unwrap(),
        Value::Nil
    );
    assert_eq!(
        err_line(eval(&mut c, "#!lua flags=bogus\nreturn 1")),
        "ERR Unexpected flag in script shebang: bogus"
    );
}

#[test]
fn pcall_and_error_tables() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    eval(&mut c, "redis.call('set','s','x')").unwrap();
    // pcall(redis.call, ...) gives the error's message, as in Redis 7.0.
    assert_eq!(
        eval(
            &mut c,
            "local ok, e = pcall(redis.call, 'incr', 's') return {tostring(ok), e}"
        )
        .unwrap(),
        Value::Array(vec![
            bulk("false"),
            bulk("ERR value is not an integer or out of range")
        ])
    );
    // redis.pcall returns the error table; returning it is an error reply.
    assert_eq!(
        eval(&mut c, "return redis.pcall('incr', 's').err").unwrap(),
        bulk("ERR value is not an integer or out of range")
    );
    assert_eq!(
        err_line(eval(&mut c, "return redis.pcall('incr', 's')")),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        eval(
            &mut c,
            "local ok, e = pcall(function() error({err='A b'}) end) return e"
        )
        .unwrap(),
        bulk("A b")
    );
    assert_eq!(
        eval(&mut c, "local ok, e = pcall(error, 'x') return e").unwrap(),
        bulk("x")
    );
    // Errors nested in arrays stay in place.
    let s2 = &s;
    assert_eq!(
        raw_reply(
            s2,
            false,
            &["EVAL", "return {1, redis.pcall('incr', 's'), 3}", "0"]
        ),
        b"*3\r\n:1\r\n-ERR value is not an integer or out of range\r\n:3\r\n"
    );
}

#[test]
fn sandbox_protects_globals_and_removes_unsafe_functions() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    for name in [
        "print", "dofile", "loadfile", "os", "io", "require", "setfenv", "getfenv", "debug",
        "module", "package", "newproxy",
    ] {
        let e = err_line(eval(&mut c, &format!("return type({name})")));
        assert!(
            e.starts_with(&format!(
                "ERR user_script:1: Script attempted to access nonexistent global variable '{name}'"
            )),
            "{name}: {e}"
        );
    }
    for name in [
        "loadstring",
        "pcall",
        "xpcall",
        "unpack",
        "tonumber",
        "rawget",
        "collectgarbage",
    ] {
        assert_eq!(
            eval(&mut c, &format!("return type({name})")).unwrap(),
            bulk("function"),
            "{name}"
        );
    }
    for name in [
        "string",
        "math",
        "table",
        "cjson",
        "bit",
        "struct",
        "cmsgpack",
        "redis",
        "coroutine",
    ] {
        assert_eq!(
            eval(&mut c, &format!("return type({name})")).unwrap(),
            bulk("table"),
            "{name}"
        );
    }
    for body in ["x = 1", "_G.x = 1", "string.x = 1", "redis.call = nil"] {
        let e = err_line(eval(&mut c, body));
        assert!(
            e.starts_with("ERR user_script:1: Attempt to modify a readonly table script:"),
            "{body}: {e}"
        );
    }
    let e = err_line(eval(&mut c, "rawset(_G, 'x', 1) return 1"));
    assert!(
        e.starts_with("ERR Attempt to modify a readonly table script:"),
        "{e}"
    );
    // Chunks built by loadstring are sandboxed too.
    let e = err_line(eval(&mut c, "local f = loadstring('y = 2') f() return 1"));
    assert!(e.contains("Attempt to modify a readonly table"), "{e}");
    // The string metatable is out of reach; string methods still work.
    assert_eq!(eval(&mut c, "return ('abc'):upper()").unwrap(), bulk("ABC"));
    let e = err_line(eval(&mut c, "getmetatable('').__index = {} return 1"));
    assert!(e.contains("attempt to index a boolean value"), "{e}");
    // Locals and fresh tables are free; pairs sees the globals.
    assert_eq!(
        eval(&mut c, "local t = {} t.x = 1 return t.x").unwrap(),
        Value::Int(1)
    );
    assert_eq!(
        eval(
            &mut c,
            "local n = 0 for k in pairs(redis) do n = n + 1 end return n > 10"
        )
        .unwrap(),
        Value::Int(1)
    );
}

#[test]
fn the_redis_api() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    assert_eq!(
        eval(&mut c, "return redis.sha1hex('')").unwrap(),
        bulk("da39a3ee5e6b4b0d3255bfef95601890afd80709")
    );
    assert!(err_line(eval(&mut c, "return redis.sha1hex()"))
        .starts_with("ERR wrong number of arguments script:"));
    assert_eq!(
        eval(&mut c, "return redis.REDIS_VERSION").unwrap(),
        bulk("7.0.15")
    );
    assert_eq!(
        eval(&mut c, "return redis.REDIS_VERSION_NUM").unwrap(),
        Value::Int(0x07000f)
    );
    assert_eq!(
        eval(
            &mut c,
            "return {redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING}"
        )
        .unwrap(),
        Value::Array(vec![
            Value::Int(0),
            Value::Int(1),
            Value::Int(2),
            Value::Int(3)
        ])
    );
    assert_eq!(
        eval(&mut c, "return redis.log(redis.LOG_WARNING, 'hi', 1)").unwrap(),
        Value::Nil
    );
    assert!(err_line(eval(&mut c, "return redis.log(99, 'x')"))
        .starts_with("ERR Invalid debug level. script:"));
    assert!(err_line(eval(&mut c, "return redis.log()"))
        .starts_with("ERR redis.log() requires two arguments or more. script:"));
    assert_eq!(
        eval(&mut c, "return {redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL}").unwrap(),
        Value::Array(vec![Value::Int(0), Value::Int(1), Value::Int(2), Value::Int(2), Value::Int(3)])
    );
    assert_eq!(
        eval(&mut c, "return redis.set_repl(redis.REPL_ALL)").unwrap(),
        Value::Nil
    );
    assert!(err_line(eval(&mut c, "return redis.set_repl(99)"))
        .starts_with("ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE. script:"));
    assert_eq!(
        eval(&mut c, "return redis.replicate_commands()").unwrap(),
        Value::Int(1)
    );
    assert_eq!(
        eval(&mut c, "return redis.breakpoint()").unwrap(),
        Value::Nil
    );
    assert_eq!(eval(&mut c, "return redis.debug('x')").unwrap(), Value::Nil);
    assert_eq!(
        eval(&mut c, "return redis.status_reply('FINE')").unwrap(),
        Value::SimpleString("FINE".into())
    );
    assert_eq!(
        err_line(eval(&mut c, "return redis.status_reply()")),
        "ERR wrong number or type of arguments"
    );
    assert!(err_line(eval(&mut c, "return redis.setresp(4)"))
        .starts_with("ERR RESP version must be 2 or 3. script:"));
    assert_eq!(
        eval(&mut c, "return redis.acl_check_cmd('get', 'x')").unwrap(),
        Value::Int(1)
    );
    // Arguments: integers as integers, floats with 17 digits.
    eval(
        &mut c,
        "redis.call('set', 'f', 0.1) redis.call('set', 'i', 3)",
    )
    .unwrap();
    assert_eq!(c.get::<_, String>("f").unwrap(), "0.10000000000000001");
    assert_eq!(c.get::<_, String>("i").unwrap(), "3");
    // Blocking commands answer at once; SELECT inside a script stays there.
    assert_eq!(
        eval(
            &mut c,
            "redis.call('select', 1) return redis.call('set', 'in1', 'x')"
        )
        .unwrap(),
        Value::Okay
    );
    assert_eq!(c.get::<_, Option<String>>("in1").unwrap(), None);
}

#[test]
fn bundled_libraries() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let cases: &[(&str, Value)] = &[
        (
            "return cjson.encode({1, 2, 'a/b', {x=true}})",
            bulk(r#"[1,2,"a\/b",{"x":true}]"#),
        ),
        ("return cjson.encode({})", bulk("{}")),
        ("return cjson.encode({[1]=1, [3]=3})", bulk("[1,null,3]")),
        ("return cjson.encode(0.1)", bulk("0.1")),
        ("return cjson.decode('[1,2.5,\"x\"]')[2] * 2", Value::Int(5)),
        (
            "return cjson.decode('{\"a\":{\"b\":\"c\"}}').a.b",
            bulk("c"),
        ),
        (
            "return tostring(cjson.decode('null') == cjson.null)",
            bulk("true"),
        ),
        ("return bit.band(0xff, 0x0f)", Value::Int(15)),
        ("return bit.bor(1, 2, 4)", Value::Int(7)),
        ("return bit.bxor(5, 1)", Value::Int(4)),
        ("return bit.bnot(0)", Value::Int(-1)),
        ("return bit.lshift(1, 4)", Value::Int(16)),
        ("return bit.rshift(-1, 28)", Value::Int(15)),
        ("return bit.arshift(-16, 2)", Value::Int(-4)),
        ("return bit.tobit(4294967297)", Value::Int(1)),
        ("return bit.tohex(255)", bulk("000000ff")),
        ("return bit.tohex(-1, -4)", bulk("FFFF")),
        (
            "return struct.pack('>I2', 258)",
            Value::BulkString(vec![1, 2]),
        ),
        (
            "return {struct.unpack('<hB', struct.pack('<hB', -2, 200))}",
            Value::Array(vec![Value::Int(-2), Value::Int(200), Value::Int(4)]),
        ),
        ("return struct.size('!4 b i')", Value::Int(8)),
        (
            "return cmsgpack.unpack(cmsgpack.pack({1, 'two', {3}}))[2]",
            bulk("two"),
        ),
        (
            "return cmsgpack.pack(1, 300)",
            Value::BulkString(vec![1, 0xcd, 1, 44]),
        ),
    ];
    for (body, want) in cases {
        assert_eq!(&eval(&mut c, body).unwrap(), want, "{body}");
    }
    let e = err_line(eval(&mut c, "return cjson.encode({[20]=1})"));
    assert!(
        e.starts_with(
            "ERR user_script:1: Cannot serialise table: excessively sparse array script:"
        ),
        "{e}"
    );
    let e = err_line(eval(&mut c, "return cjson.decode('[1,')"));
    assert!(
        e.starts_with("ERR user_script:1: Expected value but found T_END at character 4 script:"),
        "{e}"
    );
}

#[test]
fn reply_conversions_resp2_and_resp3() {
    let s = TestServer::start(&[]);
    let cases: &[(&str, &[u8], &[u8])] = &[
        ("return {1,2,3,'ciao',{1,2}}", b"*5\r\n:1\r\n:2\r\n:3\r\n$4\r\nciao\r\n*2\r\n:1\r\n:2\r\n", b"*5\r\n:1\r\n:2\r\n:3\r\n$4\r\nciao\r\n*2\r\n:1\r\n:2\r\n"),
        ("return {1,2,nil,3}", b"*2\r\n:1\r\n:2\r\n", b"*2\r\n:1\r\n:2\r\n"),
        ("return 3.99", b":3\r\n", b":3\r\n"),
        ("return -3.99", b":-3\r\n", b":-3\r\n"),
        ("return 1e300", b":-9223372036854775808\r\n", b":-9223372036854775808\r\n"),
        ("return true", b":1\r\n", b":1\r\n"),
        ("return false", b"$-1\r\n", b"_\r\n"),
        ("return nil", b"$-1\r\n", b"_\r\n"),
        ("return {ok='FINE'}", b"+FINE\r\n", b"+FINE\r\n"),
        ("return {a=1}", b"*0\r\n", b"*0\r\n"),
        ("return {1, {err='X y'}, 3}", b"*3\r\n:1\r\n-X y\r\n:3\r\n", b"*3\r\n:1\r\n-X y\r\n:3\r\n"),
        ("return {map={a=1}}", b"*2\r\n$1\r\na\r\n:1\r\n", b"%1\r\n$1\r\na\r\n:1\r\n"),
        ("return {set={a=true}}", b"*1\r\n$1\r\na\r\n", b"~1\r\n$1\r\na\r\n"),
        ("return {double=3.5}", b"$3\r\n3.5\r\n", b",3.5\r\n"),
        ("return {big_number='123'}", b"$3\r\n123\r\n", b"(123\r\n"),
        ("redis.setresp(3) return {verbatim_string={format='txt', string='hello'}}", b"$5\r\nhello\r\n", b"=9\r\ntxt:hello\r\n"),
        ("redis.setresp(3) return true", b":1\r\n", b"#t\r\n"),
        ("redis.setresp(3) return false", b":0\r\n", b"#f\r\n"),
        ("redis.setresp(3) return redis.call('get', 'nokey')", b"$-1\r\n", b"_\r\n"),
        ("redis.setresp(3) return type(redis.call('get', 'nokey'))", b"$3\r\nnil\r\n", b"$3\r\nnil\r\n"),
        ("return type(redis.call('get', 'nokey'))", b"$7\r\nboolean\r\n", b"$7\r\nboolean\r\n"),
        ("return redis.call('ping')", b"+PONG\r\n", b"+PONG\r\n"),
        ("return redis.call('ping').ok", b"$4\r\nPONG\r\n", b"$4\r\nPONG\r\n"),
        ("redis.call('sadd', 'st', 'a') redis.setresp(3) local r = redis.call('smembers', 'st') return {type(r), r.set.a}", b"*2\r\n$5\r\ntable\r\n:1\r\n", b"*2\r\n$5\r\ntable\r\n#t\r\n"),
        ("redis.call('sadd', 'st', 'a') return redis.call('smembers', 'st')", b"*1\r\n$1\r\na\r\n", b"*1\r\n$1\r\na\r\n"),
        ("redis.setresp(3) redis.call('sadd', 'st', 'a') return redis.call('smembers', 'st')", b"*1\r\n$1\r\na\r\n", b"~1\r\n$1\r\na\r\n"),
    ];
    for (body, resp2, resp3) in cases {
        assert_eq!(
            String::from_utf8_lossy(&raw_reply(&s, false, &["EVAL", body, "0"])),
            String::from_utf8_lossy(resp2),
            "RESP2: {body}"
        );
        assert_eq!(
            String::from_utf8_lossy(&raw_reply(&s, true, &["EVAL", body, "0"])),
            String::from_utf8_lossy(resp3),
            "RESP3: {body}"
        );
    }
}

#[test]
fn busy_script_answers_busy_and_script_kill_stops_it() {
    busy_script_case(&[]);
}

/// With one worker thread, the looping script must hand that worker's
/// connections to another thread, or nobody would get BUSY.
#[test]
fn busy_script_with_one_worker_thread() {
    busy_script_case(&["--config", "worker-threads=1"]);
}

/// With two worker threads each connection lives on one of them: the
/// clients placed on the looping script's worker must be handed to another
/// thread too. Four clients besides the script's: whatever the placement,
/// at least one shares its worker; every one gets BUSY, and SCRIPT KILL
/// from any of them ends the script.
#[test]
fn busy_script_answers_every_client_with_two_worker_threads() {
    let s = TestServer::start(&["--worker-threads", "2"]);
    let mut others: Vec<redis::Connection> = (0..2).map(|_| s.conn()).collect();
    let looping = start_looping_script(&s, &mut others[0]);
    // Connected while the script runs, and before it.
    others.extend((0..2).map(|_| s.conn()));
    for (i, c) in others.iter_mut().enumerate() {
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        assert_eq!(
            err_line(cmd(c, &["PING"])),
            "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
            "client {i}"
        );
    }
    assert_eq!(
        cmd(&mut others[3], &["SCRIPT", "KILL"]).unwrap(),
        Value::Okay
    );
    let e = looping.join().unwrap();
    assert!(e.starts_with("ERR Script killed by user"), "{e}");
    for c in &mut others {
        assert_eq!(
            cmd(c, &["PING"]).unwrap(),
            Value::SimpleString("PONG".into())
        );
    }
}

/// Sets `busy-reply-threshold` to 100 ms through `c`, starts an endless
/// script on a connection of its own (the thread returns the error line
/// that ends it), and waits until `c` is answered BUSY.
fn start_looping_script(
    s: &TestServer,
    c: &mut redis::Connection,
) -> std::thread::JoinHandle<String> {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("busy-reply-threshold")
        .arg("100")
        .query(c)
        .unwrap();
    let url = s.url();
    let looping = std::thread::spawn(move || {
        let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
        err_line(cmd(
            &mut c,
            &["EVAL", "local i = 0 while true do i = i + 1 end", "0"],
        ))
    });
    // Wait until the script runs past the threshold.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = cmd(c, &["GET", "x"]);
        if let Err(e) = &r {
            if e.code() == Some("BUSY") {
                break;
            }
        }
        assert!(Instant::now() < deadline, "never busy: {r:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    looping
}

fn busy_script_case(extra: &[&str]) {
    let s = TestServer::start(extra);
    let mut other = s.conn();
    other
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let looping = start_looping_script(&s, &mut other);
    assert_eq!(
        err_line(cmd(&mut other, &["PING"])),
        "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
    );
    assert_eq!(
        err_line(cmd(&mut other, &["FUNCTION", "KILL"])),
        "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
    );
    assert_eq!(cmd(&mut other, &["SCRIPT", "KILL"]).unwrap(), Value::Okay);
    let e = looping.join().unwrap();
    let sha = sha1_smol::Sha1::from("local i = 0 while true do i = i + 1 end").digest();
    assert_eq!(
        e,
        format!("ERR Script killed by user with SCRIPT KILL... script: {sha}, on @user_script:1.")
    );
    assert_eq!(
        cmd(&mut other, &["PING"]).unwrap(),
        Value::SimpleString("PONG".into())
    );

    // A script that wrote cannot be killed.
    let url = s.url();
    let writer = std::thread::spawn(move || {
        let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
        let body = "redis.call('set', 'w', 1) local t = redis.call('time') while tonumber(redis.call('time')[1]) < t[1] + 2 do end return 1";
        cmd(&mut c, &["EVAL", body, "0"])
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match cmd(&mut other, &["SCRIPT", "KILL"]) {
            Err(e) if e.code() == Some("UNKILLABLE") => break,
            r => assert!(Instant::now() < deadline, "never unkillable: {r:?}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(writer.join().unwrap().unwrap(), Value::Int(1));
}

const LIB: &str = "#!lua name=mylib\n\
redis.register_function('set_it', function(keys, args) return redis.call('set', keys[1], args[1]) end)\n\
redis.register_function{function_name='get_it', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}, description='reads'}\n";

#[test]
fn functions_load_call_list_delete() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    assert_eq!(
        cmd(&mut c, &["FUNCTION", "LOAD", LIB]).unwrap(),
        bulk("mylib")
    );
    assert_eq!(
        err_line(cmd(&mut c, &["FUNCTION", "LOAD", LIB])),
        "ERR Library 'mylib' already exists"
    );
    assert_eq!(
        cmd(&mut c, &["FUNCTION", "LOAD", "REPLACE", LIB]).unwrap(),
        bulk("mylib")
    );
    assert_eq!(
        cmd(&mut c, &["FCALL", "set_it", "1", "k", "v"]).unwrap(),
        Value::Okay
    );
    assert_eq!(
        cmd(&mut c, &["FCALL_RO", "get_it", "1", "k"]).unwrap(),
        bulk("v")
    );
    assert_eq!(
        err_line(cmd(&mut c, &["FCALL_RO", "set_it", "1", "k", "v"])),
        "ERR Can not execute a script with write flag using *_ro command."
    );
    assert_eq!(
        err_line(cmd(&mut c, &["FCALL", "nosuch", "0"])),
        "ERR Function not found"
    );
    assert_eq!(
        err_line(cmd(
            &mut c,
            &[
                "FUNCTION",
                "LOAD",
                "#!lua name=other\nredis.register_function('set_it', function() return 1 end)"
            ]
        )),
        "ERR Function set_it already exists"
    );
    assert_eq!(
        err_line(cmd(&mut c, &["FUNCTION", "LOAD", "#!lua name=bad\nredis.call('ping')"])),
        "ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'call'"
    );
    assert_eq!(
        err_line(cmd(&mut c, &["FUNCTION", "LOAD", "return 1"])),
        "ERR Missing library metadata"
    );
    assert_eq!(
        err_line(cmd(
            &mut c,
            &["FUNCTION", "LOAD", "#!lua name=empty\nlocal x = 1"]
        )),
        "ERR No functions registered"
    );
    let list = cmd(&mut c, &["FUNCTION", "LIST", "WITHCODE"]).unwrap();
    let want = Value::Array(vec![Value::Array(vec![
        bulk("library_name"),
        bulk("mylib"),
        bulk("engine"),
        bulk("LUA"),
        bulk("functions"),
        Value::Array(vec![
            Value::Array(vec![
                bulk("name"),
                bulk("get_it"),
                bulk("description"),
                bulk("reads"),
                bulk("flags"),
                Value::Array(vec![Value::SimpleString("no-writes".into())]),
            ]),
            Value::Array(vec![
                bulk("name"),
                bulk("set_it"),
                bulk("description"),
                Value::Nil,
                bulk("flags"),
                Value::Array(vec![]),
            ]),
        ]),
        bulk("library_code"),
        bulk(LIB),
    ])]);
    assert_eq!(list, want);
    assert_eq!(
        cmd(&mut c, &["FUNCTION", "LIST", "LIBRARYNAME", "nomatch*"]).unwrap(),
        Value::Array(vec![])
    );
    let stats = cmd(&mut c, &["FUNCTION", "STATS"]).unwrap();
    assert_eq!(
        stats,
        Value::Array(vec![
            bulk("running_script"),
            Value::Nil,
            bulk("engines"),
            Value::Array(vec![
                bulk("LUA"),
                Value::Array(vec![
                    bulk("libraries_count"),
                    Value::Int(1),
                    bulk("functions_count"),
                    Value::Int(2)
                ])
            ]),
        ])
    );
    // DUMP then RESTORE round-trips.
    let payload: Vec<u8> = redis::cmd("FUNCTION").arg("DUMP").query(&mut c).unwrap();
    assert_eq!(
        cmd(&mut c, &["FUNCTION", "DELETE", "mylib"]).unwrap(),
        Value::Okay
    );
    assert_eq!(
        err_line(cmd(&mut c, &["FUNCTION", "DELETE", "mylib"])),
        "ERR Library not found"
    );
    assert_eq!(
        err_line(cmd(&mut c, &["FCALL", "set_it", "1", "k", "v"])),
        "ERR Function not found"
    );
    let r: Value = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&payload)
        .query(&mut c)
        .unwrap();
    assert_eq!(r, Value::Okay);
    let r: redis::RedisResult<Value> = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&payload)
        .query(&mut c);
    assert_eq!(err_line(r), "ERR Library 'mylib' already exists");
    let r: Value = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&payload)
        .arg("REPLACE")
        .query(&mut c)
        .unwrap();
    assert_eq!(r, Value::Okay);
    assert_eq!(
        cmd(&mut c, &["FCALL_RO", "get_it", "1", "k"]).unwrap(),
        bulk("v")
    );
    let r: redis::RedisResult<Value> = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(b"garbage")
        .query(&mut c);
    assert_eq!(
        err_line(r),
        "ERR DUMP payload version or checksum are wrong"
    );
    assert_eq!(cmd(&mut c, &["FUNCTION", "FLUSH"]).unwrap(), Value::Okay);
    assert_eq!(
        cmd(&mut c, &["FUNCTION", "LIST"]).unwrap(),
        Value::Array(vec![])
    );
}

#[test]
fn functions_survive_a_restart_with_the_aof_and_script_writes_are_logged_as_commands() {
    let dir = temp_dir("scripting-aof");
    let args = ["--appendonly", "yes", "--dir", dir.to_str().unwrap()];
    let mut a = TestServer::start_in(dir.clone(), &args);
    let mut c = a.conn();
    cmd(&mut c, &["FUNCTION", "LOAD", LIB]).unwrap();
    cmd(&mut c, &["FCALL", "set_it", "1", "k", "from-function"]).unwrap();
    cmd(&mut c, &["SCRIPT", "LOAD", "return 'cached'"]).unwrap();
    cmd(
        &mut c,
        &[
            "EVAL",
            "redis.call('set', 'e1', 'x') redis.call('incr', 'e2') return 1",
            "0",
        ],
    )
    .unwrap();
    // A read-only script is not logged at all.
    cmd(&mut c, &["EVAL", "return redis.call('get', 'e1')", "0"]).unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    let aof = common::aof_bytes(&dir);
    let text = String::from_utf8_lossy(&aof);
    assert!(text.contains("FUNCTION"), "{text}");
    assert!(!text.contains("EVAL") && !text.contains("FCALL"), "{text}");
    assert!(
        text.contains("$5\r\nMULTI\r\n") && text.contains("incr"),
        "{text}"
    );
    a.kill();

    let b = TestServer::start_in(dir.clone(), &args);
    let mut c = b.conn();
    assert_eq!(
        cmd(&mut c, &["FCALL_RO", "get_it", "1", "k"]).unwrap(),
        bulk("from-function")
    );
    assert_eq!(c.get::<_, String>("e1").unwrap(), "x");
    assert_eq!(c.get::<_, i64>("e2").unwrap(), 1);
    // SCRIPT LOAD'ed scripts are not persisted (as Redis 7).
    let sha = sha1_smol::Sha1::from("return 'cached'")
        .digest()
        .to_string();
    assert_eq!(
        err_line(cmd(&mut c, &["EVALSHA", &sha, "0"])),
        "NOSCRIPT No matching script. Please use EVAL."
    );
    // The rewrite keeps the libraries.
    let _: Value = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info: String = redis::cmd("INFO").arg("persistence").query(&mut c).unwrap();
        if info.contains("aof_rewrite_in_progress:0") && info.contains("aof_rewrites:1") {
            break;
        }
        assert!(Instant::now() < deadline, "rewrite did not finish");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(c);
    let mut b = b;
    b.kill();
    let d = TestServer::start_in(dir.clone(), &args);
    let mut c = d.conn();
    assert_eq!(
        cmd(&mut c, &["FCALL_RO", "get_it", "1", "k"]).unwrap(),
        bulk("from-function")
    );
    drop(a);
}

#[test]
fn scripts_reach_keys_in_every_shard() {
    // A script's KEYS may name keys in any shard; every shard is held.
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let mut raw = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut keys = Vec::new();
    for i in 0..50 {
        keys.push(format!("key{i}"));
    }
    let mut args = vec![
        "EVAL",
        "for i, k in ipairs(KEYS) do redis.call('set', k, i) end return #KEYS",
        "50",
    ];
    args.extend(keys.iter().map(|k| k.as_str()));
    assert_eq!(cmd(&mut c, &args).unwrap(), Value::Int(50));
    raw.write_all(&encode(&["GET", "key49"])).unwrap();
    assert_eq!(read_at_least(&mut raw, 8), b"$2\r\n50\r\n");
}
