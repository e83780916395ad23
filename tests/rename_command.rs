//! `rename-command` in the config file, compared with a real redis-server
//! 7.0 started with the same file (skipped without one, failed under `CI`):
//! a hidden FLUSHALL, CONFIG and SET under new names, and what COMMAND,
//! ACL, scripts, MULTI, MONITOR and the AOF make of them.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::redis_server::RedisServer;
use common::{cmd, show, TestServer};

const RENAMES: &str = "rename-command FLUSHALL \"\"\n\
                       rename-command CONFIG SOMETHINGELSE\n\
                       rename-command SET MYSET\n";

fn connect(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .expect("client")
        .get_connection_with_timeout(Duration::from_secs(5))
        .expect("connect")
}

/// A reply or an error line, as text.
fn reply(c: &mut redis::Connection, args: &[&str]) -> String {
    match cmd(args).query::<redis::Value>(c) {
        Ok(v) => show(&v),
        Err(e) => format!("(error) {e}"),
    }
}

/// The commands both servers must answer alike.
const CASES: &[&[&str]] = &[
    &["FLUSHALL"],
    &["CONFIG", "GET", "maxmemory-policy"],
    &["SOMETHINGELSE", "GET", "maxmemory-policy"],
    &["SOMETHINGELSE", "SET", "rename-command", "GET X"],
    &["SOMETHINGELSE", "GET", "rename-command"],
    &["MYSET", "a", "1"],
    &["SET", "a", "1"],
    &["myset", "b", "2"],
    &["COMMAND", "INFO", "config", "set", "flushall"],
    &["COMMAND", "GETKEYS", "myset", "a", "b"],
    &["COMMAND", "GETKEYS", "set", "a", "b"],
    &["ACL", "SETUSER", "u1", "on", "nopass", "+config"],
    &["ACL", "SETUSER", "u1", "+somethingelse"],
    &["ACL", "SETUSER", "u1", "+flushall"],
    &["ACL", "SETUSER", "u1", "+myset"],
    &["ACL", "SETUSER", "u1", "+config|get"],
    &[
        "ACL", "SETUSER", "u2", "on", "nopass", "+@all", "-config", "~*",
    ],
    &["ACL", "DRYRUN", "u2", "somethingelse", "get", "port"],
    &["ACL", "DRYRUN", "u2", "config", "get", "port"],
    &["ACL", "DRYRUN", "u2", "myset", "a", "b"],
    &["ACL", "DRYRUN", "u2", "set", "a", "b"],
    &["EVAL", "return redis.call('set','k','v')", "0"],
    &["EVAL", "return redis.call('myset','k','v')", "0"],
    &["EVAL", "return redis.call('MySet','k2','v')", "0"],
    &["EVAL", "return redis.pcall('flushall')", "0"],
    &["GET", "k"],
];

/// What COMMAND INFO NAME says, reduced to the command's name there (or nil).
fn info_name(c: &mut redis::Connection, name: &str) -> String {
    let v: redis::Value = cmd(&["COMMAND", "INFO", name])
        .query(c)
        .expect("COMMAND INFO");
    match v {
        redis::Value::Array(a) => match a.first() {
            Some(redis::Value::Array(e)) => e.first().map(show).unwrap_or_default(),
            Some(other) => show(other),
            None => String::new(),
        },
        other => show(&other),
    }
}

/// What the server listens as: COMMAND LIST, a MULTI, NOPERM lines, a
/// MONITOR line; all must be Redis's.
fn observe(port: u16) -> Vec<String> {
    let mut c = connect(port);
    let mut out: Vec<String> = CASES.iter().map(|a| reply(&mut c, a)).collect();
    for name in ["config", "somethingelse", "set", "myset", "flushall"] {
        out.push(format!("info {name}: {}", info_name(&mut c, name)));
        let docs = reply(&mut c, &["COMMAND", "DOCS", name]);
        out.push(format!(
            "docs {name}: {}",
            docs.split(' ').next().unwrap_or("")
        ));
    }
    let list = reply(&mut c, &["COMMAND", "LIST"]);
    let list: Vec<&str> = list.trim_matches(['[', ']']).split(' ').collect();
    for name in [
        "config",
        "config|get",
        "somethingelse",
        "set",
        "myset",
        "flushall",
    ] {
        out.push(format!("list has {name}: {}", list.contains(&name)));
    }
    // MULTI: the old name is unknown (the transaction is doomed), the new
    // one queues.
    out.push(reply(&mut c, &["MULTI"]));
    out.push(reply(&mut c, &["MYSET", "x", "1"]));
    out.push(reply(&mut c, &["SET", "y", "1"]));
    out.push(reply(&mut c, &["EXEC"]));
    out.push(reply(&mut c, &["MULTI"]));
    out.push(reply(&mut c, &["MYSET", "z", "1"]));
    out.push(reply(&mut c, &["EXEC"]));
    // NOPERM and ACL LOG name the command by its original name.
    let mut u2 = connect(port);
    out.push(reply(&mut u2, &["AUTH", "u2", "x"]));
    out.push(reply(&mut u2, &["SOMETHINGELSE", "GET", "port"]));
    let log = reply(&mut c, &["ACL", "LOG", "1"]);
    out.push(format!(
        "log object config|get: {}",
        log.contains("object config|get")
    ));
    // MONITOR shows the name as the client wrote it.
    let mut mon = TcpStream::connect(("127.0.0.1", port)).expect("monitor");
    mon.set_read_timeout(Some(Duration::from_secs(5))).ok();
    mon.write_all(b"MONITOR\r\n").expect("write");
    let mut lines = BufReader::new(mon);
    let mut line = String::new();
    lines.read_line(&mut line).expect("+OK");
    out.push(line.trim().to_string());
    out.push(reply(&mut c, &["MySet", "m", "1"]));
    line.clear();
    lines.read_line(&mut line).expect("monitor line");
    out.push(line.split("] ").nth(1).unwrap_or("").trim().to_string());
    out
}

#[test]
fn renamed_and_hidden_commands_as_redis() {
    let dir = common::temp_dir("rename");
    let conf = dir.join("renames.conf");
    std::fs::write(&conf, RENAMES).expect("write conf");
    let rdir = dir.join("redis");
    std::fs::create_dir_all(&rdir).expect("dir");
    let Some(redis) = RedisServer::start_with(Some(&rdir), Some(&conf), &[]) else {
        return;
    };
    let want = observe(redis.port);
    let conf_s = conf.to_str().expect("utf-8 path");
    let srv = TestServer::start(&[conf_s]);
    let got = observe(srv.port);
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        assert_eq!(g, w, "case {i}");
    }
    assert_eq!(got.len(), want.len());
}

/// The AOF holds the names as clients wrote them (as Redis's), and a
/// restart with the same renames loads it, a rewritten base (SET by its
/// original name) included.
#[test]
fn aof_keeps_the_new_names() {
    let dir = common::temp_dir("rename-aof");
    let conf = dir.join("renames.conf");
    std::fs::write(&conf, RENAMES).expect("write conf");
    let conf_s = conf.to_str().expect("utf-8 path");
    let dir_s = dir.to_str().expect("utf-8 path");
    let args = [
        conf_s,
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--aof-use-rdb-preamble",
        "no",
        "--dir",
        dir_s,
    ];
    let mut srv = TestServer::start_in(dir.clone(), &args);
    let mut c = srv.conn();
    assert_eq!(common::q(&mut c, &["MYSET", "a", "1"]), "OK");
    assert_eq!(
        common::q(&mut c, &["EVAL", "return redis.call('myset','b','2')", "0"]),
        "OK"
    );
    let aof = String::from_utf8_lossy(&common::aof_bytes(&dir)).into_owned();
    assert!(aof.contains("$5\r\nMYSET\r\n$1\r\na"), "{aof:?}");
    assert!(aof.contains("$5\r\nmyset\r\n$1\r\nb"), "{aof:?}");
    // A rewritten base names SET by its original name (as Redis's does);
    // the server's own loading still finds it.
    common::q(&mut c, &["BGREWRITEAOF"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while common::info(&mut c, "persistence")
        .get("aof_rewrite_in_progress")
        .is_some_and(|v| v != "0")
        || common::info(&mut c, "persistence")
            .get("aof_rewrite_scheduled")
            .is_some_and(|v| v != "0")
    {
        assert!(std::time::Instant::now() < deadline, "rewrite did not end");
        std::thread::sleep(Duration::from_millis(50));
    }
    srv.terminate();
    let srv = TestServer::start_in(dir.clone(), &args);
    let mut c = srv.conn();
    assert_eq!(common::q(&mut c, &["MGET", "a", "b"]), "[1 2]");
}

/// Mistakes stop the start with Redis's lines; the command line takes
/// `--rename-command` too, as redis-server does.
#[test]
fn bad_renames_stop_the_start() {
    let dir = common::temp_dir("rename-bad");
    for (line, why) in [
        (
            "rename-command NOSUCH X",
            "No such command in rename-command",
        ),
        (
            "rename-command CONFIG GET",
            "Target command name already exists",
        ),
        (
            "rename-command CONFIG",
            "Bad directive or wrong number of arguments",
        ),
        (
            "rename-command config|get x",
            "No such command in rename-command",
        ),
    ] {
        let conf = dir.join("bad.conf");
        std::fs::write(&conf, format!("{line}\n")).expect("write conf");
        let out = Command::new(common::server_binary())
            .arg(&conf)
            .args(["--port", &common::free_port().to_string()])
            .current_dir(&dir)
            .stdin(Stdio::null())
            .output()
            .expect("run rostrum");
        assert!(!out.status.success(), "{line}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(">>> '{line}'\n{why}")),
            "{line}: {err}"
        );
    }
    let srv = TestServer::start(&["--rename-command", "CONFIG", "XX"]);
    let mut c = srv.conn();
    assert_eq!(
        common::q(&mut c, &["XX", "GET", "maxclients"]),
        "[maxclients 10000]"
    );
    assert!(common::err(&mut c, &["CONFIG", "GET", "maxclients"]).contains("unknown command"));
}
