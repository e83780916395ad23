//! Limits and the operator's side (issue 19): the Lua VM's memory limit
//! and its INFO figures, error and latency statistics, CLIENT PAUSE, and
//! starting the binary as an init script or a service manager would
//! (daemonize, pidfile, logfile reopened on SIGHUP, command-line
//! directives).
mod common;

use std::time::{Duration, Instant};

use common::{info, TestServer};

/// The server's resident set size, in kB.
fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS")
}

fn eval_err(c: &mut redis::Connection, script: &str) -> String {
    let r: redis::RedisResult<redis::Value> = redis::cmd("EVAL").arg(script).arg(0).query(c);
    match r {
        Err(e) => e.to_string(),
        Ok(v) => panic!("{script} answered {v:?}"),
    }
}

#[test]
fn lua_memory_bombs_are_refused_and_their_memory_given_back() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    // The VM exists (and shows in INFO) once a script ran.
    let one: i64 = redis::cmd("EVAL")
        .arg("return 1")
        .arg(0)
        .query(&mut c)
        .unwrap();
    assert_eq!(one, 1);
    let m = info(&mut c, "memory");
    let lua: u64 = m["used_memory_lua"].parse().unwrap();
    assert!(lua > 10_000, "used_memory_lua {lua}");
    assert_eq!(m["used_memory_vm_eval"], m["used_memory_lua"]);
    assert_eq!(m["number_of_cached_scripts"], "1");
    let scripts: u64 = m["used_memory_scripts"].parse().unwrap();
    assert_eq!(scripts, ("return 1".len() + 40) as u64);
    let before = rss_kb(srv.child.id());

    for bomb in [
        "return #string.rep('x', 2^30)",
        "local s = 'x' while true do s = s .. s end",
        "local t = {} for i = 1, 1e9 do t[i] = i end",
    ] {
        let e = eval_err(&mut c, bomb);
        assert!(e.contains("lua-maxmemory"), "{bomb}: {e}");
    }
    // Freed: the heap is back near its size before, and so is the RSS.
    let lua_after: u64 = info(&mut c, "memory")["used_memory_lua"].parse().unwrap();
    assert!(lua_after < lua * 4 + 1_000_000, "{lua} -> {lua_after}");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let now = rss_kb(srv.child.id());
        if now * 2 < before * 3 {
            break;
        }
        assert!(Instant::now() < deadline, "RSS {before} kB -> {now} kB");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The server and the VM still work.
    let n: i64 = redis::cmd("EVAL")
        .arg("return #string.rep('x', 1000000)")
        .arg(0)
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 1_000_000);

    // lua-maxmemory is shown and settable at run time.
    let v: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("lua-maxmemory")
        .query(&mut c)
        .unwrap();
    assert_eq!(v, ["lua-maxmemory", "268435456"]);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("lua-maxmemory")
        .arg("4mb")
        .query(&mut c)
        .unwrap();
    let e = eval_err(&mut c, "return #string.rep('x', 8 * 1024 * 1024)");
    assert!(e.contains("lua-maxmemory (4194304 bytes)"), "{e}");
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("lua-maxmemory")
        .arg("64mb")
        .query(&mut c)
        .unwrap();
    let n: i64 = redis::cmd("EVAL")
        .arg("return #string.rep('x', 8 * 1024 * 1024)")
        .arg(0)
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 8 * 1024 * 1024);
    // A script catching the error with pcall goes on, and the limit holds.
    let caught: String = redis::cmd("EVAL")
        .arg("local ok, e = pcall(string.rep, 'x', 2^30) return tostring(ok)")
        .arg(0)
        .query(&mut c)
        .unwrap();
    assert_eq!(caught, "false");
}
