//! Server commands through the `redis` crate and raw sockets: INFO, CONFIG,
//! CLIENT, COMMAND, SLOWLOG, SHUTDOWN and starting from a config file.
mod common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, info, read_at_least, roundtrip, temp_dir, TestServer};
use redis::Value;

fn config_get(c: &mut redis::Connection, pattern: &str) -> Vec<(String, String)> {
    redis::cmd("CONFIG")
        .arg("GET")
        .arg(pattern)
        .query(c)
        .unwrap()
}

fn err_of<T: redis::FromRedisValue + std::fmt::Debug>(r: redis::RedisResult<T>) -> String {
    let e = r.unwrap_err();
    format!("{} {}", e.code().unwrap_or(""), e.detail().unwrap_or(""))
}

#[test]
fn info_sections_and_fields() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let _: () = redis::cmd("SET").arg("k1").arg("v").query(&mut c).unwrap();
    let _: () = redis::cmd("SET").arg("k2").arg("v").query(&mut c).unwrap();
    let _: Option<String> = redis::cmd("GET").arg("nokey").query(&mut c).unwrap();
    let _ = redis::cmd("NOSUCH").query::<()>(&mut c);

    let text: String = redis::cmd("INFO").query(&mut c).unwrap();
    let headers: Vec<&str> = text.lines().filter(|l| l.starts_with('#')).collect();
    assert_eq!(
        headers,
        [
            "# Server",
            "# Clients",
            "# Memory",
            "# Persistence",
            "# Stats",
            "# Replication",
            "# CPU",
            "# Modules",
            "# Errorstats",
            "# Cluster",
            "# Keyspace"
        ]
    );
    assert!(text.ends_with("\r\n") && !text.contains("\n\n"));

    let all = info(&mut c, "everything");
    assert_eq!(all["redis_version"], "7.0.15");
    assert_eq!(all["rostrum_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(all["redis_mode"], "standalone");
    assert_eq!(all["tcp_port"], srv.port.to_string());
    assert_eq!(all["process_id"], srv.child.id().to_string());
    assert_eq!(all["run_id"].len(), 40);
    // (The harness's readiness probe may still be closing.)
    assert!(all["connected_clients"].parse::<u64>().unwrap() >= 1);
    assert_eq!(all["maxclients"], "10000");
    assert!(all["used_memory"].parse::<u64>().unwrap() > 0);
    assert!(all["used_memory_rss"].parse::<u64>().unwrap() > 0);
    assert!(all["mem_allocator"].starts_with("jemalloc"));
    assert_eq!(all["maxmemory_policy"], "noeviction");
    assert_eq!(all["loading"], "0");
    assert_eq!(all["aof_enabled"], "0");
    assert_eq!(all["role"], "master");
    assert_eq!(all["connected_slaves"], "0");
    assert_eq!(all["cluster_enabled"], "0");
    assert_eq!(all["keyspace_misses"], "1");
    assert!(all["total_commands_processed"].parse::<u64>().unwrap() >= 4);
    assert!(all["total_connections_received"].parse::<u64>().unwrap() >= 1);
    assert_eq!(all["total_error_replies"], "1");
    assert_eq!(all["errorstat_ERR"], "count=1");
    assert!(all["used_cpu_user"].parse::<f64>().is_ok());
    assert_eq!(all["db0"], "keys=2,expires=0,avg_ttl=0");
    assert!(
        all["cmdstat_set"].starts_with("calls=2,usec="),
        "{}",
        all["cmdstat_set"]
    );
    assert!(all["cmdstat_set"].ends_with(",rejected_calls=0,failed_calls=0"));

    // Sections come in Redis's order whatever the order asked.
    let text: String = redis::cmd("INFO")
        .arg("KEYSPACE")
        .arg("server")
        .query(&mut c)
        .unwrap();
    assert!(text.starts_with("# Server\r\n"));
    assert!(text.contains("\r\n\r\n# Keyspace\r\ndb0:keys=2"));
    let empty: String = redis::cmd("INFO").arg("nosuch").query(&mut c).unwrap();
    assert_eq!(empty, "");

    // CONFIG RESETSTAT zeroes the counters.
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut c).unwrap();
    let stats = info(&mut c, "all");
    assert_eq!(stats["total_error_replies"], "0");
    assert!(!stats.contains_key("cmdstat_set"));
    assert!(!stats.contains_key("errorstat_ERR"));
}

#[test]
fn info_is_verbatim_in_resp3() {
    let srv = TestServer::start(&[]);
    let mut s = srv.raw();
    let hello = roundtrip(&mut s, b"HELLO 3\r\n", 1);
    assert!(hello.starts_with(b"%7\r\n"));
    let mut got = roundtrip(&mut s, b"INFO cluster\r\n", 1);
    while !got.ends_with(b"\r\n\r\n") && got.len() < 100 {
        got.extend(read_at_least(&mut s, 1));
    }
    let body = b"txt:# Cluster\r\ncluster_enabled:0\r\n";
    let mut want = format!("={}\r\n", body.len()).into_bytes();
    want.extend_from_slice(body);
    want.extend_from_slice(b"\r\n");
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&want)
    );
}

#[test]
fn config_get_set_round_trips() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let defaults = [
        ("save", ""),
        ("appendonly", "no"),
        ("maxmemory", "0"),
        ("databases", "16"),
        ("timeout", "0"),
        ("maxmemory-policy", "noeviction"),
        ("zset-max-ziplist-entries", "128"),
        ("zset-max-listpack-value", "64"),
        ("notify-keyspace-events", ""),
        ("slowlog-log-slower-than", "10000"),
        ("replica-read-only", "yes"),
    ];
    for (name, value) in defaults {
        assert_eq!(
            config_get(&mut c, name),
            [(name.to_string(), value.to_string())]
        );
    }
    // Globs match names and aliases, case-insensitively.
    let mut zset: Vec<String> = config_get(&mut c, "ZSET-MAX-*")
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    zset.sort();
    assert_eq!(
        zset,
        [
            "zset-max-listpack-entries",
            "zset-max-listpack-value",
            "zset-max-ziplist-entries",
            "zset-max-ziplist-value"
        ]
    );
    assert!(config_get(&mut c, "nosuch").is_empty());

    // Set through an alias, read back under both names; units are bytes.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("zset-max-ziplist-entries")
        .arg("64")
        .arg("maxmemory")
        .arg("1mb")
        .query(&mut c)
        .unwrap();
    assert_eq!(config_get(&mut c, "zset-max-listpack-entries")[0].1, "64");
    assert_eq!(config_get(&mut c, "maxmemory")[0].1, "1048576");
    assert_eq!(info(&mut c, "memory")["maxmemory"], "1048576");
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("notify-keyspace-events")
        .arg("KEA")
        .query(&mut c)
        .unwrap();
    assert_eq!(config_get(&mut c, "notify-keyspace-events")[0].1, "AKE");

    // Errors, and a failing multi-set changes nothing.
    let set = |c: &mut redis::Connection, args: &[&str]| {
        err_of(redis::cmd("CONFIG").arg("SET").arg(args).query::<()>(c))
    };
    assert_eq!(
        set(&mut c, &["nosuch", "1"]),
        "ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'"
    );
    assert_eq!(
        set(&mut c, &["hz", "20", "maxmemory", "lots"]),
        "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value"
    );
    assert_eq!(config_get(&mut c, "hz")[0].1, "10");
    assert_eq!(
        set(&mut c, &["databases", "4"]),
        "ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config"
    );
    assert_eq!(
        set(&mut c, &["timeout", "1", "TIMEOUT", "2"]),
        "ERR CONFIG SET failed (possibly related to argument 'TIMEOUT') - duplicate parameter"
    );
    assert_eq!(
        set(&mut c, &["appendonly", "maybe"]),
        "ERR CONFIG SET failed (possibly related to argument 'appendonly') - argument must be 'yes' or 'no'"
    );
    assert_eq!(set(&mut c, &["hz", "1", "maxmemory"]), "ERR syntax error");
    assert_eq!(
        err_of(redis::cmd("CONFIG").arg("REWRITE").query::<()>(&mut c)),
        "ERR The server is running without a config file"
    );
}

#[test]
fn client_name_list_and_kill() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let mut other = srv.conn();
    let name: Option<String> = redis::cmd("CLIENT").arg("GETNAME").query(&mut c).unwrap();
    assert_eq!(name, None);
    let _: () = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg("board-1")
        .query(&mut c)
        .unwrap();
    let name: String = redis::cmd("CLIENT").arg("GETNAME").query(&mut c).unwrap();
    assert_eq!(name, "board-1");
    assert_eq!(
        err_of(
            redis::cmd("CLIENT")
                .arg("SETNAME")
                .arg("a b")
                .query::<()>(&mut c)
        ),
        "ERR Client names cannot contain spaces, newlines or special characters."
    );
    let _: () = redis::cmd("CLIENT")
        .arg("SETINFO")
        .arg("LIB-NAME")
        .arg("redis-rs")
        .query(&mut c)
        .unwrap();

    let my_id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut c).unwrap();
    let other_id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut other).unwrap();
    let _: String = redis::cmd("PING").query(&mut other).unwrap();
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut c).unwrap();
    let lines: Vec<&str> = list.lines().collect();
    assert!(lines.len() >= 2, "{list}");
    let mine = lines
        .iter()
        .find(|l| l.starts_with(&format!("id={my_id} ")))
        .unwrap();
    for field in [
        "name=board-1 ",
        "flags=N ",
        "db=0 ",
        "cmd=client|list ",
        "user=default ",
        "resp=2 ",
        "lib-name=redis-rs ",
    ] {
        assert!(mine.contains(field), "{field} in {mine}");
    }
    let theirs = lines
        .iter()
        .find(|l| l.starts_with(&format!("id={other_id} ")))
        .unwrap();
    assert!(theirs.contains(" cmd=ping "), "{theirs}");
    let keys: Vec<&str> = mine
        .split(' ')
        .map(|kv| kv.split('=').next().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            "id",
            "addr",
            "laddr",
            "fd",
            "name",
            "age",
            "idle",
            "flags",
            "db",
            "sub",
            "psub",
            "ssub",
            "multi",
            "qbuf",
            "qbuf-free",
            "argv-mem",
            "multi-mem",
            "rbs",
            "rbp",
            "obl",
            "oll",
            "omem",
            "tot-mem",
            "events",
            "cmd",
            "user",
            "redir",
            "resp",
            "lib-name",
            "lib-ver"
        ]
    );
    let only: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("ID")
        .arg(other_id)
        .query(&mut c)
        .unwrap();
    assert_eq!(only.lines().count(), 1);
    let none: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("pubsub")
        .query(&mut c)
        .unwrap();
    assert_eq!(none, "");

    // The old form wants an address that exists.
    assert_eq!(
        err_of(
            redis::cmd("CLIENT")
                .arg("KILL")
                .arg("1.2.3.4:5")
                .query::<()>(&mut c)
        ),
        "ERR No such client"
    );
    // SKIPME yes (the default) spares the caller.
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(my_id)
        .query(&mut c)
        .unwrap();
    assert_eq!(killed, 0);
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(other_id)
        .query(&mut c)
        .unwrap();
    assert_eq!(killed, 1);
    assert!(redis::cmd("PING").query::<String>(&mut other).is_err());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut c).unwrap();
        if !list.contains(&format!("id={other_id} ")) {
            break;
        }
        assert!(Instant::now() < deadline, "killed client still listed");
        std::thread::sleep(Duration::from_millis(20));
    }

    // Killing oneself (by the address the server sees) answers, then closes.
    let mut raw = srv.raw();
    let addr = raw.local_addr().unwrap().to_string();
    let cmd = format!("CLIENT KILL {addr}\r\nPING\r\n");
    let got = roundtrip(&mut raw, cmd.as_bytes(), 1000);
    assert_eq!(got, b"+OK\r\n");
}

#[test]
fn client_reply_off_and_skip() {
    let srv = TestServer::start(&[]);
    let mut s = srv.raw();
    s.write_all(b"CLIENT REPLY OFF\r\nPING\r\nECHO hidden\r\nCLIENT REPLY ON\r\n")
        .unwrap();
    assert_eq!(read_at_least(&mut s, 5), b"+OK\r\n");
    s.write_all(b"CLIENT REPLY SKIP\r\nECHO skipped\r\nECHO shown\r\n")
        .unwrap();
    assert_eq!(read_at_least(&mut s, 11), b"$5\r\nshown\r\n");
    assert_eq!(
        roundtrip(&mut s, b"CLIENT REPLY maybe\r\n", 17),
        b"-ERR syntax error\r\n"
    );
}

#[test]
fn command_introspection() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let count: i64 = redis::cmd("COMMAND").arg("COUNT").query(&mut c).unwrap();
    let all: Vec<Value> = redis::cmd("COMMAND").query(&mut c).unwrap();
    assert_eq!(all.len() as i64, count);
    assert!(count >= 10);

    let info: Vec<Value> = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("get")
        .arg("nosuch")
        .arg("config|get")
        .query(&mut c)
        .unwrap();
    assert_eq!(info.len(), 3);
    let Value::Array(get) = &info[0] else {
        panic!("{:?}", info[0]);
    };
    assert_eq!(get.len(), 10);
    assert_eq!(get[0], Value::BulkString(b"get".to_vec()));
    assert_eq!(get[1], Value::Int(2));
    assert_eq!(&get[3..6], &[Value::Int(1), Value::Int(1), Value::Int(1)]);
    assert_eq!(info[1], Value::Nil);
    let Value::Array(config_get) = &info[2] else {
        panic!("{:?}", info[2]);
    };
    assert_eq!(config_get[0], Value::BulkString(b"config|get".to_vec()));
    assert_eq!(config_get[1], Value::Int(-3));

    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg("GET")
        .arg("user:1")
        .query(&mut c)
        .unwrap();
    assert_eq!(keys, ["user:1"]);
    let getkeys = |c: &mut redis::Connection, args: &[&str]| {
        err_of(
            redis::cmd("COMMAND")
                .arg("GETKEYS")
                .arg(args)
                .query::<Vec<String>>(c),
        )
    };
    assert_eq!(
        getkeys(&mut c, &["nosuch", "a"]),
        "ERR Invalid command specified"
    );
    assert_eq!(
        getkeys(&mut c, &["get", "a", "b"]),
        "ERR Invalid number of arguments specified for command"
    );
    assert_eq!(
        getkeys(&mut c, &["ping", "x"]),
        "ERR The command has no key arguments"
    );

    let docs: HashMap<String, HashMap<String, Value>> = redis::cmd("COMMAND")
        .arg("DOCS")
        .arg("get")
        .arg("nosuch")
        .query(&mut c)
        .unwrap();
    assert_eq!(docs.len(), 1);
    for field in ["summary", "since", "group", "complexity"] {
        assert!(docs["get"].contains_key(field), "{field}");
    }
    let names: Vec<String> = redis::cmd("COMMAND")
        .arg("LIST")
        .arg("FILTERBY")
        .arg("PATTERN")
        .arg("config*")
        .query(&mut c)
        .unwrap();
    assert!(names.contains(&"config".to_string()));
    assert!(names.contains(&"config|set".to_string()));
}

#[test]
fn slowlog_records_commands() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let _: () = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg("slowpoke")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg("0")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    let entries: Vec<(i64, i64, i64, Vec<String>, String, String)> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(1)
        .query(&mut c)
        .unwrap();
    assert_eq!(entries.len(), 1);
    let (id, time, _us, args, addr, name) = &entries[0];
    assert!(*id >= 1);
    assert!(*time > 1_600_000_000);
    assert_eq!(args, &["SET", "k", "v"]);
    assert!(addr.starts_with("127.0.0.1:"));
    assert_eq!(name, "slowpoke");
    let len: i64 = redis::cmd("SLOWLOG").arg("LEN").query(&mut c).unwrap();
    assert!(len >= 3);
    let _: () = redis::cmd("SLOWLOG").arg("RESET").query(&mut c).unwrap();
    // The RESET itself is logged after it runs.
    let len: i64 = redis::cmd("SLOWLOG").arg("LEN").query(&mut c).unwrap();
    assert_eq!(len, 1);
    assert_eq!(
        err_of(
            redis::cmd("SLOWLOG")
                .arg("GET")
                .arg(-2)
                .query::<Vec<Value>>(&mut c)
        ),
        "ERR count should be greater than or equal to -1"
    );
}

#[test]
fn dbsize_time_memory_usage() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let _: () = redis::cmd("SET").arg("a").arg("1").query(&mut c).unwrap();
    let _: () = redis::cmd("SET").arg("b").arg("2").query(&mut c).unwrap();
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 2);
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut c).unwrap();
    assert!(secs > 1_600_000_000 && micros < 1_000_000);
    let usage: Option<i64> = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg("a")
        .query(&mut c)
        .unwrap();
    assert!(usage.unwrap() > 0);
    let usage: Option<i64> = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg("missing")
        .query(&mut c)
        .unwrap();
    assert_eq!(usage, None);
    let _: () = redis::cmd("FLUSHALL").arg("ASYNC").query(&mut c).unwrap();
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 0);
}

/// Waits for the process to exit, at most `limit`.
fn wait_exit(child: &mut std::process::Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn shutdown_stops_the_process() {
    let mut srv = TestServer::start(&[]);
    let mut idle = srv.raw();
    let mut s = srv.raw();
    s.write_all(b"SHUTDOWN NOSAVE\r\n").unwrap();
    // No reply: the connection just closes.
    assert_eq!(read_at_least(&mut s, 1), b"");
    let status = wait_exit(&mut srv.child, Duration::from_secs(10));
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    let mut buf = [0u8; 16];
    assert!(matches!(idle.read(&mut buf), Ok(0) | Err(_)));
}

#[test]
fn config_file_start_and_rewrite() {
    let dir = temp_dir("conf");
    let path = dir.join("rostrum.conf");
    std::fs::write(
        &path,
        "# leaderboard\nmaxmemory 2mb\nzset-max-ziplist-entries 32\n\nsave 3600 1\nsave 300 100\nhz 15\n",
    )
    .unwrap();
    let srv = TestServer::start(&[path.to_str().unwrap()]);
    let mut c = srv.conn();
    assert_eq!(config_get(&mut c, "maxmemory")[0].1, "2097152");
    assert_eq!(config_get(&mut c, "zset-max-listpack-entries")[0].1, "32");
    assert_eq!(config_get(&mut c, "save")[0].1, "3600 1 300 100");
    assert!(info(&mut c, "server")["config_file"].ends_with("rostrum.conf"));

    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("hz")
        .arg("20")
        .arg("maxmemory-policy")
        .arg("allkeys-lru")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("CONFIG").arg("REWRITE").query(&mut c).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.starts_with("# leaderboard\nmaxmemory 2mb\nzset-max-listpack-entries 32\n"),
        "{text}"
    );
    assert!(text.contains("\nhz 20\n"), "{text}");
    assert!(text.contains("\nmaxmemory-policy allkeys-lru\n"), "{text}");
    assert!(text.contains("\nsave 3600 1\nsave 300 100\n"), "{text}");
    // The rewritten file starts a server with the same settings.
    let again = TestServer::start(&[path.to_str().unwrap()]);
    let mut c2 = again.conn();
    assert_eq!(config_get(&mut c2, "hz")[0].1, "20");
    assert_eq!(config_get(&mut c2, "maxmemory-policy")[0].1, "allkeys-lru");
    assert_eq!(config_get(&mut c2, "save")[0].1, "3600 1 300 100");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn config_file_with_unknown_directive_fails() {
    let dir = temp_dir("badconf");
    let path = dir.join("bad.conf");
    std::fs::write(&path, "port 0\n# ok so far\nleaderboard-size 10\n").unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_rostrum"))
        .arg(&path)
        .arg("--port")
        .arg(free_port().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_exit(&mut child, Duration::from_secs(10));
    if status.is_none() {
        let _ = child.kill();
    }
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let _ = child.wait();
    assert!(status.is_some_and(|s| !s.success()), "{status:?}");
    assert!(err.contains("line 3"), "{err}");
    assert!(err.contains("leaderboard-size"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `park-spin-us` (Rostrum's own): set at start and at run time, bounded,
/// and a spinning server answers as usual, including a blocked client
/// woken by another connection's write.
#[test]
fn park_spin_us_is_configurable_and_serves_as_usual() {
    let srv = TestServer::start(&["--config", "park-spin-us=50"]);
    let mut c = srv.conn();
    assert_eq!(
        config_get(&mut c, "park-spin-us"),
        vec![("park-spin-us".to_string(), "50".to_string())]
    );
    for i in 0..200 {
        let _: i64 = redis::cmd("ZINCRBY")
            .arg("b")
            .arg(1)
            .arg(i % 7)
            .query(&mut c)
            .unwrap();
    }
    let top: Vec<String> = redis::cmd("ZREVRANGE")
        .arg("b")
        .arg(0)
        .arg(0)
        .query(&mut c)
        .unwrap();
    // 0 to 3 have 29 points each; ties go by member, highest first.
    assert_eq!(top, vec!["3".to_string()]);
    let waiter = {
        let mut w = srv.conn();
        std::thread::spawn(move || -> Option<(String, String, f64)> {
            redis::cmd("BZPOPMAX")
                .arg("q")
                .arg(5)
                .query(&mut w)
                .unwrap()
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(100));
    let _: i64 = redis::cmd("ZADD")
        .arg("q")
        .arg(3)
        .arg("x")
        .query(&mut c)
        .unwrap();
    assert_eq!(
        waiter.join().unwrap(),
        Some(("q".to_string(), "x".to_string(), 3.0))
    );
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("park-spin-us")
        .arg(0)
        .query(&mut c)
        .unwrap();
    assert_eq!(config_get(&mut c, "park-spin-us")[0].1, "0");
    let e = err_of(
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("park-spin-us")
            .arg(5000)
            .query::<()>(&mut c),
    );
    assert!(e.contains("park-spin-us"), "{e}");
}
