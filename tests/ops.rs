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
    // A library whose loading code does the same.
    let r: redis::RedisResult<String> = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("#!lua name=bomb\nlocal s = 'x' while true do s = s .. s end")
        .query(&mut c);
    let e = r.unwrap_err().to_string();
    assert!(e.contains("lua-maxmemory"), "{e}");
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

/// Runs `rostrum args...` to its end (at most 20 s), as an init script's
/// start command does.
fn run_binary(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_rostrum"))
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn rostrum");
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("rostrum {args:?} did not return");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

fn process_alive(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

fn signal(pid: i32, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("run kill")
        .success();
    assert!(ok, "kill {sig} {pid}");
}

/// Kills a daemon by the pid its file names, if the test fails midway.
struct Daemon(std::path::PathBuf);

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(pid) = std::fs::read_to_string(&self.0)
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok())
        {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

#[test]
fn daemonize_and_pidfile_as_an_init_script_starts_and_stops_it() {
    let dir = common::temp_dir("daemon");
    let port = common::free_port();
    let pidfile = dir.join("rostrum.pid");
    let logfile = dir.join("rostrum.log");
    let conf = dir.join("rostrum.conf");
    // The init script's config file, with command-line directives after it.
    std::fs::write(
        &conf,
        format!(
            "daemonize yes\npidfile {}\nlogfile {}\nloglevel notice\n",
            pidfile.display(),
            logfile.display()
        ),
    )
    .expect("conf");
    let _guard = Daemon(pidfile.clone());
    let port_s = port.to_string();
    let out = run_binary(
        &dir,
        &[
            conf.to_str().unwrap(),
            "--port",
            &port_s,
            "--maxmemory",
            "100mb",
            "--save",
            "",
            "--appendonly",
            "yes",
        ],
    );
    // The start command returns 0 once the daemon listens: no waiting.
    assert!(out.status.success(), "{out:?}");
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .expect("pidfile written")
        .trim()
        .parse()
        .expect("a pid");
    assert!(process_alive(pid));
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let mut c = client
        .get_connection_with_timeout(Duration::from_secs(5))
        .expect("the daemon serves once its parent exited");
    let v: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory")
        .query(&mut c)
        .unwrap();
    assert_eq!(v[1], "104857600");
    let server = info(&mut c, "server");
    assert_eq!(server["process_id"], pid.to_string());
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    // The log names the version, port and persistence mode, with no
    // colour codes in a file.
    let log = std::fs::read_to_string(&logfile).expect("log file");
    assert!(log.contains(&format!("port {port}")), "{log}");
    assert!(log.contains("AOF on (appendfsync everysec)"), "{log}");
    assert!(log.contains("appendonly.aof"), "{log}");
    assert!(!log.contains('\u{1b}'), "ANSI codes in the log file: {log}");
    // Stopped by the pid in the file, as `kill $(cat pidfile)`.
    signal(pid, "-TERM");
    let deadline = Instant::now() + Duration::from_secs(10);
    while process_alive(pid) {
        assert!(Instant::now() < deadline, "the daemon did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!pidfile.exists(), "pidfile removed at a clean shutdown");
    assert!(dir.join("appendonlydir/appendonly.aof.manifest").exists());

    // A daemon that cannot start says why, and its start command fails.
    let out = run_binary(
        &dir,
        &[
            "--daemonize",
            "yes",
            "--pidfile",
            pidfile.to_str().unwrap(),
            "--bind",
            "192.0.2.1",
            "--port",
            &port_s,
        ],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("listening socket"), "{err}");
    assert!(!pidfile.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn logfile_is_reopened_on_sighup_after_logrotate_renames_it() {
    let dir = common::temp_dir("logfile");
    let log = dir.join("server.log");
    let srv = TestServer::start_in(
        dir.clone(),
        &["--logfile", log.to_str().unwrap(), "--loglevel", "notice"],
    );
    let pid = srv.child.id() as i32;
    let first = std::fs::read_to_string(&log).expect("log written");
    assert!(first.contains("Ready to accept connections"), "{first}");
    assert!(!first.contains('\u{1b}'), "{first}");
    // logrotate: rename, then SIGHUP.
    let rotated = dir.join("server.log.1");
    std::fs::rename(&log, &rotated).expect("rename");
    signal(pid, "-HUP");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !log.exists() {
        assert!(Instant::now() < deadline, "no new log file after SIGHUP");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Later lines go to the new file, none to the renamed one.
    let mut c = srv.conn();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("loglevel")
        .arg("notice")
        .query(&mut c)
        .unwrap();
    let _: redis::Value = redis::cmd("EVAL")
        .arg("redis.log(redis.LOG_WARNING, 'after the rotation') return 1")
        .arg(0)
        .query(&mut c)
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let fresh = std::fs::read_to_string(&log).unwrap_or_default();
        if fresh.contains("after the rotation") {
            break;
        }
        assert!(Instant::now() < deadline, "new log: {fresh}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let old = std::fs::read_to_string(&rotated).unwrap();
    assert!(!old.contains("after the rotation"), "{old}");
    assert!(old.contains("Ready to accept connections"));
}

#[test]
fn bad_directives_on_the_command_line_stop_the_start() {
    let dir = common::temp_dir("badargs");
    for args in [
        &["--maxmemory", "lots"][..],
        &["--appendonly", "maybe"],
        &["--no-such-directive", "1"],
        &["--syslog-facility", "kern"],
    ] {
        let out = run_binary(&dir, args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&args[0][2..]), "{args:?}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `syslog-enabled yes` logs to /dev/log, or, where the system has no log
/// socket, stops the start with an error saying so (never a silent yes).
#[test]
fn syslog_enabled_logs_or_is_refused() {
    let dir = common::temp_dir("syslog");
    if std::path::Path::new("/dev/log").exists() {
        let srv = TestServer::start_in(
            dir,
            &["--syslog-enabled", "yes", "--syslog-ident", "rostrum-test"],
        );
        let mut c = srv.conn();
        let pong: String = redis::cmd("PING").query(&mut c).unwrap();
        assert_eq!(pong, "PONG");
        return;
    }
    let out = run_binary(&dir, &["--port", "0", "--syslog-enabled", "yes"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("syslog-enabled yes") && err.contains("/dev/log"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Whether this process may make a private mount namespace (root with
/// `unshare`), where a test can put its own socket at /dev/log.
fn private_mounts_available() -> bool {
    std::process::Command::new("unshare")
        .args(["--mount", "true"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// One syslog datagram, split as glibc's `syslog(3)` writes it:
/// `<priority>Mmm dd hh:mm:ss ident[pid]: message`.
#[derive(Debug)]
struct SyslogLine {
    priority: u32,
    ident: String,
    pid: Option<u32>,
    message: String,
}

fn bad<T>(text: &str) -> T {
    panic!("not a syslog line: {text:?}")
}

fn parse_syslog(d: &[u8]) -> SyslogLine {
    let text = String::from_utf8_lossy(d).to_string();
    let rest = text.strip_prefix('<').unwrap_or_else(|| bad(&text));
    let (pri, rest) = rest.split_once('>').unwrap_or_else(|| bad(&text));
    let priority: u32 = pri.parse().unwrap_or_else(|_| bad(&text));
    // `Nov 24 21:37:02` or `Nov  4 21:37:02`.
    let (time, rest) = (rest.get(..15).unwrap_or_else(|| bad(&text)), &rest[15..]);
    let months = "JanFebMarAprMayJunJulAugSepOctNovDec";
    let b = time.as_bytes();
    assert!(
        months.contains(&time[..3])
            && b[3] == b' '
            && (b[4] == b' ' || b[4].is_ascii_digit())
            && b[5].is_ascii_digit()
            && b[6] == b' '
            && b[9] == b':'
            && b[12] == b':',
        "timestamp of {text:?}"
    );
    let rest = rest.strip_prefix(' ').unwrap_or_else(|| bad(&text));
    let (tag, message) = rest.split_once(": ").unwrap_or_else(|| bad(&text));
    // (redis-server's first lines, before its openlog, have no pid.)
    let (ident, pid) = match tag.strip_suffix(']').and_then(|t| t.split_once('[')) {
        Some((ident, pid)) => (
            ident,
            Some(pid.parse::<u32>().unwrap_or_else(|_| bad(&text))),
        ),
        None => (tag, None),
    };
    SyslogLine {
        priority,
        ident: ident.to_string(),
        pid,
        message: message.to_string(),
    }
}

/// Starts `program args...` in a private mount namespace whose /dev holds
/// only null, zero, random, urandom (the host's, bound) and `log`, a link
/// to a datagram socket this test listens on; waits for the line saying it
/// is ready, stops it with SIGTERM and returns its pid and every datagram
/// it sent. The host's /dev is not touched.
fn syslog_of(tag: &str, program: &str, args: &[&str]) -> (u32, Vec<SyslogLine>) {
    use std::os::unix::net::UnixDatagram;
    let dir = common::temp_dir(tag);
    let sock_path = dir.join("log.sock");
    let sock = UnixDatagram::bind(&sock_path).expect("bind the log socket");
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let dev = dir.join("dev");
    std::fs::create_dir(&dev).expect("mkdir dev");
    for n in ["null", "zero", "random", "urandom"] {
        std::fs::write(dev.join(n), b"").expect("mount point");
    }
    std::os::unix::fs::symlink(&sock_path, dev.join("log")).expect("link /dev/log");
    let script = r#"set -e
for n in null zero random urandom; do mount --bind "/dev/$n" "$D/dev/$n"; done
mount --rbind "$D/dev" /dev
exec "$@""#;
    let mut child = std::process::Command::new("unshare")
        .args(["--mount", "sh", "-c", script, "sh", program])
        .args(args)
        .env("D", &dir)
        .current_dir(&dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("spawn unshare");
    let pid = child.id();
    let mut lines = Vec::new();
    let mut buf = vec![0u8; 65536];
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut stopping: Option<Instant> = None;
    loop {
        if let Ok(n) = sock.recv(&mut buf) {
            let line = parse_syslog(&buf[..n]);
            if stopping.is_none() && line.message.starts_with("Ready to accept connections") {
                signal(pid as i32, "-TERM");
                stopping = Some(Instant::now());
            }
            lines.push(line);
            continue;
        }
        let exited = child.try_wait().expect("try_wait").is_some();
        if stopping.is_some_and(|t| exited || t.elapsed() > Duration::from_secs(30)) {
            break;
        }
        if stopping.is_none() && (exited || Instant::now() > deadline) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{program} never logged that it was ready: {lines:?}");
        }
    }
    // What it sent while exiting.
    while let Ok(n) = sock.recv(&mut buf) {
        lines.push(parse_syslog(&buf[..n]));
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    (pid, lines)
}

/// `syslog-enabled yes` sends each log line to /dev/log as redis-server
/// does (glibc's `syslog(3)`): the priority carries `syslog-facility`
/// (local0: 16) and the line's level (notice 5, warning 4), then the time,
/// `syslog-ident[pid]: ` and the bare message. Both servers run in a
/// private mount namespace whose /dev/log is this test's socket; the
/// same lines of both are compared.
#[test]
fn syslog_lines_carry_facility_level_ident_and_pid_as_redis_server() {
    if !private_mounts_available() {
        eprintln!(
            "\n*** SKIPPED syslog_lines_carry_facility_level_ident_and_pid_as_redis_server: \
             `unshare --mount` is not available here (not root?), so the test cannot put \
             its own socket at /dev/log. CI runs it as root. ***\n"
        );
        return;
    }
    let bin = env!("CARGO_BIN_EXE_rostrum");
    let port = common::free_port().to_string();
    let syslog_args = [
        "--syslog-enabled",
        "yes",
        "--syslog-ident",
        "rostrum-test",
        "--syslog-facility",
        "local0",
    ];
    let mut args = vec!["--port", port.as_str()];
    args.extend(syslog_args);
    let (pid, ours) = syslog_of("syslog-rostrum", bin, &args);
    const LOCAL0: u32 = 16 << 3;
    const NOTICE: u32 = 5;
    const WARNING: u32 = 4;
    assert!(!ours.is_empty());
    for l in &ours {
        assert_eq!(l.ident, "rostrum-test", "{l:?}");
        assert_eq!(l.pid, Some(pid), "{l:?}");
        assert_eq!(l.priority >> 3, 16, "facility local0: {l:?}");
        // The bare message: no time stamp, level or colour of its own.
        assert!(
            !l.message.contains('\x1b')
                && !l.message.contains(" INFO ")
                && !l.message.starts_with("20"),
            "{l:?}"
        );
    }
    let find = |lines: &[SyslogLine], start: &str| -> u32 {
        lines
            .iter()
            .find(|l| l.message.starts_with(start))
            .unwrap_or_else(|| panic!("no {start:?} line in {lines:?}"))
            .priority
    };
    assert_eq!(find(&ours, "Ready to accept connections"), LOCAL0 | NOTICE);
    assert_eq!(
        find(&ours, "Received SIGTERM scheduling shutdown"),
        LOCAL0 | WARNING
    );
    assert!(
        ours.iter()
            .any(|l| l.message.contains("is now ready to exit, bye bye")
                && l.priority == LOCAL0 | WARNING),
        "{ours:#?}"
    );

    // redis-server, the same way: the same priorities for the same lines.
    if std::process::Command::new("redis-server")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("redis-server not installed: the comparison with it is skipped");
        return;
    }
    let rport = common::free_port().to_string();
    let mut rargs = vec!["--port", rport.as_str(), "--save", "", "--appendonly", "no"];
    rargs.extend(syslog_args);
    let (rpid, theirs) = syslog_of("syslog-redis", "redis-server", &rargs);
    let mine: Vec<_> = theirs.iter().filter(|l| l.pid == Some(rpid)).collect();
    assert!(!mine.is_empty(), "{theirs:?}");
    for l in &mine {
        assert_eq!(l.ident, "rostrum-test", "{l:?}");
        assert_eq!(l.priority >> 3, 16, "{l:?}");
    }
    assert_eq!(
        find(&theirs, "Ready to accept connections"),
        find(&ours, "Ready to accept connections")
    );
    assert_eq!(
        find(&theirs, "Redis is now ready to exit, bye bye"),
        LOCAL0 | WARNING
    );
}

fn config_set(c: &mut redis::Connection, name: &str, value: &str) -> redis::RedisResult<()> {
    redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .query(c)
}

/// INFO's commandstats line of `cmd` as `field -> value`.
fn cmdstat(c: &mut redis::Connection, cmd: &str) -> std::collections::HashMap<String, String> {
    info(c, "commandstats")
        .get(&format!("cmdstat_{cmd}"))
        .map(|v| {
            v.split(',')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn error_and_latency_statistics() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut c).unwrap();
    let _: () = redis::cmd("SET").arg("s").arg("v").query(&mut c).unwrap();
    let _: redis::RedisResult<i64> = redis::cmd("LPUSH").arg("s").arg("x").query(&mut c);
    let _: redis::RedisResult<i64> = redis::cmd("INCR").arg("s").query(&mut c);
    let _: redis::RedisResult<String> = redis::cmd("GET").query(&mut c);
    let _: redis::RedisResult<i64> = redis::cmd("EVAL")
        .arg("return redis.call('lpush', KEYS[1], 1)")
        .arg(1)
        .arg("s")
        .query(&mut c);
    let _: redis::RedisResult<i64> = redis::cmd("EVAL")
        .arg("return redis.error_reply('MYERR mine')")
        .arg(0)
        .query(&mut c);
    let errors = info(&mut c, "errorstats");
    assert_eq!(errors["errorstat_WRONGTYPE"], "count=2");
    assert_eq!(errors["errorstat_ERR"], "count=2");
    assert_eq!(errors["errorstat_MYERR"], "count=1");
    assert_eq!(info(&mut c, "stats")["total_error_replies"], "5");
    assert_eq!(cmdstat(&mut c, "get")["rejected_calls"], "1");
    assert_eq!(cmdstat(&mut c, "lpush")["failed_calls"], "2");
    assert_eq!(cmdstat(&mut c, "eval")["failed_calls"], "2");
    assert_eq!(cmdstat(&mut c, "set")["failed_calls"], "0");

    // Latency percentiles of every command called, at the configured
    // percentiles.
    for _ in 0..20 {
        let _: String = redis::cmd("GET").arg("s").query(&mut c).unwrap();
    }
    let lat = info(&mut c, "latencystats");
    let line = &lat["latency_percentiles_usec_get"];
    let fields: Vec<(&str, f64)> = line
        .split(',')
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k, v.parse().unwrap())
        })
        .collect();
    assert_eq!(
        fields.iter().map(|f| f.0).collect::<Vec<_>>(),
        ["p50", "p99", "p99.9"]
    );
    assert!(fields[0].1 > 0.0 && fields[0].1 <= fields[1].1 && fields[1].1 <= fields[2].1);
    assert!(
        lat.contains_key("latency_percentiles_usec_config|resetstat")
            || lat.contains_key("latency_percentiles_usec_set")
    );
    config_set(&mut c, "latency-tracking-info-percentiles", "0 50.5 100").unwrap();
    let v: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("latency-tracking-info-percentiles")
        .query(&mut c)
        .unwrap();
    assert_eq!(v[1], "0 50.5 100");
    let line = info(&mut c, "latencystats")["latency_percentiles_usec_get"].clone();
    assert!(
        line.starts_with("p0=") && line.contains(",p50.5=") && line.contains(",p100="),
        "{line}"
    );
    let e = config_set(&mut c, "latency-tracking-info-percentiles", "101").unwrap_err();
    assert!(e.to_string().contains("[0.0,100.0]"), "{e}");
    // Off: nothing reported, nothing recorded.
    config_set(&mut c, "latency-tracking", "no").unwrap();
    assert!(info(&mut c, "latencystats")
        .keys()
        .all(|k| !k.starts_with("latency_")));
    config_set(&mut c, "latency-tracking", "yes").unwrap();
    // CONFIG RESETSTAT clears errors, command and latency statistics.
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut c).unwrap();
    assert!(info(&mut c, "errorstats")
        .keys()
        .all(|k| !k.starts_with("errorstat_")));
    let lat = info(&mut c, "latencystats");
    assert!(!lat.contains_key("latency_percentiles_usec_get"), "{lat:?}");
}

/// The counters every request adds to are kept per worker thread: with
/// several workers serving connections at once, INFO's figures are still
/// every call's, and CONFIG RESETSTAT zeroes every worker's share.
#[test]
fn statistics_add_up_over_workers() {
    let srv = TestServer::start(&["--worker-threads", "4"]);
    let mut c = srv.conn();
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut c).unwrap();
    let (clients, calls) = (8, 250);
    std::thread::scope(|s| {
        for t in 0..clients {
            let mut k = srv.conn();
            s.spawn(move || {
                for i in 0..calls {
                    let key = format!("k{t}:{}", i % 10);
                    let _: () = redis::cmd("SET").arg(&key).arg(i).query(&mut k).unwrap();
                    let _: Option<String> = redis::cmd("GET").arg(&key).query(&mut k).unwrap();
                    let _: Option<String> = redis::cmd("GET").arg("absent").query(&mut k).unwrap();
                }
            });
        }
    });
    let n = clients * calls;
    assert_eq!(cmdstat(&mut c, "set")["calls"], n.to_string());
    assert_eq!(cmdstat(&mut c, "get")["calls"], (2 * n).to_string());
    let stats = info(&mut c, "stats");
    assert_eq!(stats["keyspace_hits"], n.to_string());
    assert_eq!(stats["keyspace_misses"], n.to_string());
    // The 3n calls, the INFO calls before this one and the clients'
    // CLIENT SETINFO on connecting.
    let processed: usize = stats["total_commands_processed"].parse().unwrap();
    assert!((3 * n..3 * n + 40).contains(&processed), "{processed}");
    let reads: usize = stats["total_reads_processed"].parse().unwrap();
    assert!(reads >= 3 * n, "{reads}");
    let lat = info(&mut c, "latencystats");
    assert!(lat.contains_key("latency_percentiles_usec_get"), "{lat:?}");
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut c).unwrap();
    assert!(cmdstat(&mut c, "get").is_empty());
    let stats = info(&mut c, "stats");
    assert_eq!(stats["keyspace_hits"], "0");
    let processed: usize = stats["total_commands_processed"].parse().unwrap();
    assert!(processed <= 2, "{processed}");
    assert!(!info(&mut c, "latencystats").contains_key("latency_percentiles_usec_get"));
}

/// LATENCY HISTOGRAM: each command's calls and cumulative distribution,
/// keyed by Redis's power-of-two levels; a container names its
/// subcommands; unknown names are skipped. INFO and LATENCY HISTOGRAM
/// pipelined behind other commands count them, as Redis does.
#[test]
fn latency_histogram_and_pipelined_statistics() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut c).unwrap();
    for i in 0..30 {
        let _: () = redis::cmd("SET").arg("k").arg(i).query(&mut c).unwrap();
    }
    let _: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory")
        .query(&mut c)
        .unwrap();
    let v: redis::Value = redis::cmd("LATENCY")
        .arg("HISTOGRAM")
        .arg("set")
        .arg("nosuch")
        .arg("config")
        .query(&mut c)
        .unwrap();
    let map = |v: &redis::Value| -> Vec<(redis::Value, redis::Value)> {
        match v {
            redis::Value::Array(items) => items
                .chunks(2)
                .map(|p| (p[0].clone(), p[1].clone()))
                .collect(),
            redis::Value::Map(pairs) => pairs.clone(),
            other => panic!("not a map: {other:?}"),
        }
    };
    let text = |v: &redis::Value| -> String { redis::from_redis_value(v.clone()).unwrap() };
    let int = |v: &redis::Value| -> i64 { redis::from_redis_value(v.clone()).unwrap() };
    let commands = map(&v);
    let names: Vec<String> = commands.iter().map(|(k, _)| text(k)).collect();
    assert_eq!(names, ["set", "config|get", "config|resetstat"]);
    let set = map(&commands[0].1);
    assert_eq!(text(&set[0].0), "calls");
    assert_eq!(int(&set[0].1), 30);
    assert_eq!(text(&set[1].0), "histogram_usec");
    let levels: Vec<(i64, i64)> = map(&set[1].1)
        .iter()
        .map(|(k, v)| (int(k), int(v)))
        .collect();
    let known = [
        1, 2, 4, 8, 16, 33, 66, 132, 264, 528, 1056, 2113, 4227, 8454,
    ];
    assert!(
        levels.iter().all(|(us, _)| known.contains(us)),
        "{levels:?}"
    );
    assert!(levels
        .windows(2)
        .all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1));
    assert_eq!(levels.last().map(|l| l.1), Some(30), "{levels:?}");
    let none: redis::Value = redis::cmd("LATENCY")
        .arg("HISTOGRAM")
        .arg("get")
        .query(&mut c)
        .unwrap();
    assert!(map(&none).is_empty());

    // Pipelined: the earlier commands of the same batch are counted.
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut c).unwrap();
    let (_, _, stats, hist): ((), Option<String>, String, redis::Value) = redis::pipe()
        .cmd("SET")
        .arg("a")
        .arg("b")
        .cmd("GET")
        .arg("a")
        .cmd("INFO")
        .arg("everything")
        .cmd("LATENCY")
        .arg("HISTOGRAM")
        .arg("get")
        .query(&mut c)
        .unwrap();
    assert!(stats.contains("\r\nkeyspace_hits:1\r\n"), "{stats}");
    // CONFIG RESETSTAT, SET and GET.
    assert!(
        stats.contains("\r\ntotal_commands_processed:3\r\n"),
        "{stats}"
    );
    assert!(stats.contains("\r\ncmdstat_get:calls=1,"), "{stats}");
    assert_eq!(map(&hist).len(), 1);
    // Commands before a pipelined CONFIG RESETSTAT are reset with it.
    let _: ((), ()) = redis::pipe()
        .cmd("SET")
        .arg("a")
        .arg("b")
        .cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut c)
        .unwrap();
    assert!(cmdstat(&mut c, "set").is_empty());
}

/// MODULE with `enable-module-command yes`: no module is loaded, and one
/// cannot be (Rostrum loads no Redis modules): LOAD and LOADEX fail as
/// redis-server fails a library it cannot load, UNLOAD finds nothing.
#[test]
fn module_commands_when_enabled() {
    let srv = TestServer::start(&["--enable-module-command", "yes"]);
    let mut c = srv.conn();
    let list: Vec<redis::Value> = redis::cmd("MODULE").arg("LIST").query(&mut c).unwrap();
    assert!(list.is_empty());
    for load in [
        &["LOAD", "/tmp/m.so"][..],
        &["LOADEX", "/tmp/m.so", "ARGS", "x"],
    ] {
        let e = redis::cmd("MODULE")
            .arg(load)
            .query::<()>(&mut c)
            .unwrap_err();
        assert!(
            e.to_string()
                .ends_with(": Error loading the extension. Please check the server logs."),
            "{e}"
        );
    }
    let e = redis::cmd("MODULE")
        .arg("UNLOAD")
        .arg("m")
        .query::<()>(&mut c)
        .unwrap_err();
    assert!(
        e.to_string().contains("no such module with that name"),
        "{e}"
    );
    let v: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("enable-module-command")
        .query(&mut c)
        .unwrap();
    assert_eq!(v[1], "yes");
}

/// Sends raw commands on `s` and reads what arrives within `wait`.
fn send_raw(s: &mut std::net::TcpStream, bytes: &[u8], wait: Duration) -> Vec<u8> {
    use std::io::{Read, Write};
    s.write_all(bytes).unwrap();
    s.set_read_timeout(Some(wait)).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => break,
        }
    }
    out
}

/// Reads until `want` bytes came (at most `limit`).
fn read_reply(s: &mut std::net::TcpStream, want: usize, limit: Duration) -> Vec<u8> {
    use std::io::Read;
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + limit;
    while out.len() < want && Instant::now() < deadline {
        if let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
    }
    out
}

#[test]
fn client_pause_write_and_all() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("before")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(100_000)
        .arg("WRITE")
        .query(&mut c)
        .unwrap();
    // Reads go on; writes, EVAL and a pipeline behind a write wait.
    let mut w = srv.raw();
    let held = send_raw(
        &mut w,
        b"GET k\r\nSET k during\r\nGET k\r\n",
        Duration::from_millis(300),
    );
    assert_eq!(held, b"$6\r\nbefore\r\n");
    let mut e = srv.raw();
    assert_eq!(
        send_raw(
            &mut e,
            b"EVAL \"return 1\" 0\r\n",
            Duration::from_millis(200)
        ),
        b""
    );
    let mut r = srv.raw();
    assert_eq!(
        send_raw(
            &mut r,
            b"EVAL_RO \"return 2\" 0\r\nMULTI\r\nGET k\r\nEXEC\r\n",
            Duration::from_millis(300)
        ),
        b":2\r\n+OK\r\n+QUEUED\r\n*1\r\n$6\r\nbefore\r\n"
    );
    let v: String = redis::cmd("GET").arg("k").query(&mut c).unwrap();
    assert_eq!(v, "before");
    // UNPAUSE: the held commands run at once, in order.
    let t = Instant::now();
    let _: () = redis::cmd("CLIENT").arg("UNPAUSE").query(&mut c).unwrap();
    assert_eq!(
        read_reply(&mut w, 17, Duration::from_secs(5)),
        b"+OK\r\n$6\r\nduring\r\n"
    );
    assert_eq!(read_reply(&mut e, 4, Duration::from_secs(5)), b":1\r\n");
    assert!(t.elapsed() < Duration::from_secs(2));

    // ALL: every command waits until the pause runs out.
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(400)
        .arg("ALL")
        .query(&mut c)
        .unwrap();
    let t = Instant::now();
    let mut p = srv.raw();
    use std::io::Write;
    p.write_all(b"PING\r\nGET k\r\n").unwrap();
    assert_eq!(
        read_reply(&mut p, 19, Duration::from_secs(5)),
        b"+PONG\r\n$6\r\nduring\r\n"
    );
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t.elapsed()
    );

    // Expired keys are not deleted during a pause (deleting is writing):
    // they read as absent, and go once the pause ends.
    let expired = |c: &mut redis::Connection| info(c, "stats")["expired_keys"].clone();
    let before = expired(&mut c);
    let _: () = redis::cmd("SET")
        .arg("e")
        .arg("v")
        .arg("PX")
        .arg(50)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(100_000)
        .arg("WRITE")
        .query(&mut c)
        .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    let v: Option<String> = redis::cmd("GET").arg("e").query(&mut c).unwrap();
    assert_eq!(v, None);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(expired(&mut c), before);
    let _: () = redis::cmd("CLIENT").arg("UNPAUSE").query(&mut c).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while expired(&mut c) == before {
        assert!(
            Instant::now() < deadline,
            "the expired key stayed after UNPAUSE"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // Argument errors.
    let e: redis::RedisResult<()> = redis::cmd("CLIENT").arg("PAUSE").arg(-1).query(&mut c);
    assert!(e.unwrap_err().to_string().contains("timeout is negative"));
    let e: redis::RedisResult<()> = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(10)
        .arg("READ")
        .query(&mut c);
    assert!(e
        .unwrap_err()
        .to_string()
        .contains("mode must be WRITE or ALL"));
}

#[test]
fn client_no_touch_leaves_idle_time_alone() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    let _: () = redis::cmd("SET").arg("t").arg("v").query(&mut c).unwrap();
    let _: () = redis::cmd("CLIENT")
        .arg("NO-TOUCH")
        .arg("ON")
        .query(&mut c)
        .unwrap();
    std::thread::sleep(Duration::from_millis(2100));
    let _: String = redis::cmd("GET").arg("k").query(&mut c).unwrap();
    let _: i64 = redis::cmd("TOUCH").arg("t").query(&mut c).unwrap();
    let idle = |c: &mut redis::Connection, key: &str| -> i64 {
        redis::cmd("OBJECT")
            .arg("IDLETIME")
            .arg(key)
            .query(c)
            .unwrap()
    };
    assert!(idle(&mut c, "k") >= 2, "GET under NO-TOUCH touched the key");
    assert_eq!(idle(&mut c, "t"), 0, "TOUCH still touches");
    let _: () = redis::cmd("CLIENT")
        .arg("NO-TOUCH")
        .arg("OFF")
        .query(&mut c)
        .unwrap();
    let _: String = redis::cmd("GET").arg("k").query(&mut c).unwrap();
    assert_eq!(idle(&mut c, "k"), 0);
    let e: redis::RedisResult<()> = redis::cmd("CLIENT")
        .arg("NO-TOUCH")
        .arg("maybe")
        .query(&mut c);
    assert!(e.unwrap_err().to_string().contains("syntax error"));
}

/// `supervised systemd`: READY=1 reaches $NOTIFY_SOCKET once the server
/// listens, STOPPING=1 when it stops (a `Type=notify` unit).
#[test]
fn supervised_systemd_notifies_ready_and_stopping() {
    let dir = common::temp_dir("notify");
    let sock_path = dir.join("notify.sock");
    let sock = std::os::unix::net::UnixDatagram::bind(&sock_path).expect("bind notify socket");
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let port = common::free_port();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_rostrum"))
        .args(["--port", &port.to_string(), "--supervised", "systemd"])
        .env("NOTIFY_SOCKET", &sock_path)
        .current_dir(&dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let mut buf = [0u8; 64];
    let n = sock.recv(&mut buf).expect("READY=1 within 10 s");
    assert_eq!(&buf[..n], b"READY=1");
    // Ready means serving.
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("listening");
    assert_eq!(
        send_raw(&mut s, b"PING\r\n", Duration::from_millis(300)),
        b"+PONG\r\n"
    );
    common::terminate(&mut child);
    let n = sock.recv(&mut buf).expect("STOPPING=1");
    assert_eq!(&buf[..n], b"STOPPING=1");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A script running past busy-reply-threshold: a command queued meanwhile
/// is refused with BUSY and dooms the transaction; an EXEC refused with
/// BUSY discards it (EXECABORT), as Redis 7.0.
#[test]
fn multi_while_a_script_is_busy_aborts_the_exec() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    config_set(&mut c, "busy-reply-threshold", "100").unwrap();
    const SLOW: &str = "local t = redis.call('time') local s = t[1] * 1000000 + t[2] \
        repeat local n = redis.call('time') until n[1] * 1000000 + n[2] > s + 800000 return 1";
    let slow = |srv: &TestServer| {
        let mut s = srv.conn();
        std::thread::spawn(move || {
            let r: i64 = redis::cmd("EVAL").arg(SLOW).arg(0).query(&mut s).unwrap();
            r
        })
    };
    let mut raw = srv.raw();
    assert_eq!(
        send_raw(&mut raw, b"MULTI\r\n", Duration::from_millis(200)),
        b"+OK\r\n"
    );
    let script = slow(&srv);
    std::thread::sleep(Duration::from_millis(350));
    let busy = read_reply_after(&mut raw, b"SET busyk 1\r\n");
    assert!(
        busy.starts_with(b"-BUSY "),
        "{}",
        String::from_utf8_lossy(&busy)
    );
    assert_eq!(script.join().unwrap(), 1);
    let exec = read_reply_after(&mut raw, b"EXEC\r\n");
    assert_eq!(
        exec,
        b"-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    // EXEC itself refused with BUSY: the transaction is discarded.
    assert_eq!(
        send_raw(
            &mut raw,
            b"MULTI\r\nSET busyk 2\r\n",
            Duration::from_millis(200)
        ),
        b"+OK\r\n+QUEUED\r\n"
    );
    let script = slow(&srv);
    std::thread::sleep(Duration::from_millis(350));
    let exec = read_reply_after(&mut raw, b"EXEC\r\n");
    assert!(
        exec.starts_with(b"-EXECABORT Transaction discarded because of: BUSY "),
        "{}",
        String::from_utf8_lossy(&exec)
    );
    script.join().unwrap();
    assert_eq!(
        read_reply_after(&mut raw, b"EXEC\r\n"),
        b"-ERR EXEC without MULTI\r\n"
    );
    let v: Option<String> = redis::cmd("GET").arg("busyk").query(&mut c).unwrap();
    assert_eq!(v, None);
}

/// Sends `cmd` and reads one line (at most 5 s).
fn read_reply_after(s: &mut std::net::TcpStream, cmd: &[u8]) -> Vec<u8> {
    use std::io::{Read, Write};
    s.write_all(cmd).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 1024];
    let deadline = Instant::now() + Duration::from_secs(5);
    while !out.ends_with(b"\r\n") && Instant::now() < deadline {
        if let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
    }
    out
}
