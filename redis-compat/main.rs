//! The differential harness: sends the case files in `redis-compat/cases/`
//! and seeded random command streams to a real redis-server and to Rostrum,
//! and reports every reply whose bytes differ.
//!
//! Registered in Cargo.toml as the `compat` test with its own `main`; run it
//! with `cargo test --test compat [-- FILTER]`. See `redis-compat/README.md`.

mod random;

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use rostrum::protocol::request::split_args;

/// How long a server may take to send one reply before it counts as missing.
const REPLY_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a server may take to close a connection it was told to close.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);
/// Seeds of the random streams when `COMPAT_SEEDS` is not set.
const DEFAULT_SEEDS: &[u64] = &[1, 2, 3, 4, 5];
/// Commands per random stream when `COMPAT_COMMANDS` is not set.
const DEFAULT_STREAM_LEN: usize = 4_000;
/// Commands shown before the first difference of a random stream.
const STREAM_CONTEXT: usize = 6;
/// Longest escaped reply printed in full.
const SHOW_BYTES: usize = 600;

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(msg) => {
            eprintln!("compat: {msg}");
            ExitCode::FAILURE
        }
    }
}

/// Runs everything selected; `Ok(false)` when some reply differed. The two
/// servers are owned here, so they are killed when this returns or unwinds.
fn run() -> Result<bool, String> {
    // `cargo test -- --list` asks every test binary for its tests.
    if std::env::args().any(|a| a == "--list") {
        return Ok(true);
    }
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let Some(redis_bin) = find_in_path("redis-server") else {
        if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
            return Err("redis-server is not in PATH; the differential tests need \
                        Redis 7.0.15 (CI is set, so this is a failure)"
                .into());
        }
        println!("compat: redis-server is not in PATH; skipping the differential tests");
        return Ok(true);
    };

    let cases_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("redis-compat/cases");
    let files = case_files(&cases_dir, filter.as_deref())?;
    let families = random::select(filter.as_deref());
    if files.is_empty() && families.is_empty() {
        println!(
            "compat: nothing matches '{}' (case files: {}; random families: {}; or 'random')",
            filter.unwrap_or_default(),
            case_names(&cases_dir).join(", "),
            random::FAMILIES
                .iter()
                .map(|f| f.name)
                .collect::<Vec<_>>()
                .join(", ")
        );
        return Ok(true);
    }

    let work_dir = std::env::temp_dir().join(format!("rostrum-compat-{}", std::process::id()));
    std::fs::create_dir_all(&work_dir).map_err(|e| format!("create {work_dir:?}: {e}"))?;
    let redis = Process::start("redis-server", &redis_bin, &work_dir, redis_args)?;
    // COMPAT_SELF_CHECK=1 puts a second redis-server in Rostrum's place:
    // any difference then means a case or generator is not deterministic.
    let self_check = std::env::var_os("COMPAT_SELF_CHECK").is_some_and(|v| !v.is_empty());
    let rostrum = if self_check {
        println!("compat: COMPAT_SELF_CHECK: comparing redis-server with itself");
        Process::start("redis-server", &redis_bin, &work_dir, redis_args)?
    } else {
        Process::start(
            "rostrum",
            Path::new(env!("CARGO_BIN_EXE_rostrum")),
            &work_dir,
            |port| {
                vec![
                    "--port".into(),
                    port.to_string(),
                    "--bind".into(),
                    "127.0.0.1".into(),
                    "--loglevel".into(),
                    "warning".into(),
                    "--enable-debug-command".into(),
                    "local".into(),
                ]
            },
        )?
    };
    println!(
        "compat: {} on port {}, rostrum on port {}",
        redis_version(&redis_bin),
        redis.port,
        rostrum.port
    );
    let servers = Servers {
        redis: &redis,
        rostrum: &rostrum,
    };

    let mut report = Report::default();
    for file in &files {
        for proto in [Proto::Resp2, Proto::Resp3] {
            run_case_file(file, proto, &servers, &mut report)?;
        }
    }
    if !families.is_empty() {
        let len = env_number("COMPAT_COMMANDS")?
            .map(|n| n as usize)
            .unwrap_or(DEFAULT_STREAM_LEN);
        let seeds = match std::env::var("COMPAT_SEEDS") {
            Ok(s) => parse_seeds(&s)?,
            Err(_) => DEFAULT_SEEDS.to_vec(),
        };
        for &seed in &seeds {
            let commands = random::stream(seed, len, &families);
            for proto in [Proto::Resp2, Proto::Resp3] {
                run_stream(seed, &families, &commands, proto, &servers, &mut report)?;
            }
        }
    }
    drop(rostrum);
    drop(redis);
    let _ = std::fs::remove_dir_all(&work_dir);
    Ok(report.summary())
}

// ---------------------------------------------------------------------------
// Server processes

/// redis-server's command line: no persistence, loopback only, DEBUG
/// allowed from there (cases/debug.txt).
fn redis_args(port: u16) -> Vec<String> {
    [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--daemonize",
        "no",
        "--enable-debug-command",
        "local",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// A server process started by the harness, killed on drop.
struct Process {
    child: Child,
    port: u16,
}

impl Process {
    /// Starts `program` with the arguments `args(port)` on a free port and
    /// waits until it answers PING.
    fn start(
        name: &'static str,
        program: &Path,
        dir: &Path,
        args: impl Fn(u16) -> Vec<String>,
    ) -> Result<Process, String> {
        for _attempt in 0..5 {
            let port = free_port()?;
            let child = Command::new(program)
                .args(args(port))
                .current_dir(dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
            let mut process = Process { child, port };
            if process.wait_ready() {
                return Ok(process);
            }
            // Dropping the handle kills it; another port may work.
        }
        Err(format!("{name} did not start (5 attempts)"))
    }

    /// Polls until the server answers PING (at most 10 s) or exits.
    fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if let Ok(mut conn) = Conn::open(self.port, Proto::Resp2) {
                if conn.send(b"*1\r\n$4\r\nPING\r\n").is_ok()
                    && conn.read_reply(false) == Reply::Frame(b"+PONG\r\n".to_vec())
                {
                    return true;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The two servers compared.
struct Servers<'a> {
    redis: &'a Process,
    rostrum: &'a Process,
}

fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("local addr: {e}"))
}

fn find_in_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

fn redis_version(bin: &Path) -> String {
    Command::new(bin)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| {
            s.split_whitespace()
                .find_map(|w| w.strip_prefix("v=").map(|v| format!("redis-server {v}")))
        })
        .unwrap_or_else(|| "redis-server (unknown version)".into())
}

// ---------------------------------------------------------------------------
// Connections and replies

/// The protocol a pass runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Proto {
    Resp2,
    Resp3,
}

impl Proto {
    fn name(self) -> &'static str {
        match self {
            Proto::Resp2 => "RESP2",
            Proto::Resp3 => "RESP3",
        }
    }
}

/// What one server sent back for one command.
#[derive(Debug, PartialEq, Eq)]
enum Reply {
    /// One complete reply, byte for byte.
    Frame(Vec<u8>),
    /// The server closed the connection before sending anything.
    Closed,
    /// Nothing complete arrived in time; the bytes that did arrive.
    Timeout(Vec<u8>),
    /// The connection closed in the middle of a reply.
    Truncated(Vec<u8>),
    /// Bytes that are not RESP: the decoder's complaint and the bytes.
    Invalid(String, Vec<u8>),
    /// Another socket error.
    Failed(String),
}

impl Reply {
    fn is_frame(&self) -> bool {
        matches!(self, Reply::Frame(_))
    }

    fn starts_with(&self, prefix: &[u8]) -> bool {
        matches!(self, Reply::Frame(b) if b.starts_with(prefix))
    }

    fn show(&self) -> String {
        match self {
            Reply::Frame(b) => escape(b),
            Reply::Closed => "<connection closed>".into(),
            Reply::Timeout(b) if b.is_empty() => "<no reply within the timeout>".into(),
            Reply::Timeout(b) => format!("<incomplete reply, timed out> {}", escape(b)),
            Reply::Truncated(b) => format!("<connection closed mid-reply> {}", escape(b)),
            Reply::Invalid(e, b) => format!("<not RESP: {e}> {}", escape(b)),
            Reply::Failed(e) => format!("<socket error: {e}>"),
        }
    }
}

/// One client connection to one server.
struct Conn {
    stream: TcpStream,
    /// Bytes received and not yet returned as a reply.
    buf: Vec<u8>,
    /// Protocol the server currently speaks on this connection.
    proto: Proto,
    /// A write failed: the next read reports the connection as closed.
    broken: bool,
}

impl Conn {
    /// Connects, and switches to RESP3 with `HELLO 3` if asked to.
    fn open(port: u16, proto: Proto) -> Result<Conn, String> {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
            .map_err(|e| format!("connect to port {port}: {e}"))?;
        stream
            .set_read_timeout(Some(REPLY_TIMEOUT))
            .map_err(|e| e.to_string())?;
        let _ = stream.set_nodelay(true);
        let mut conn = Conn {
            stream,
            buf: Vec::new(),
            proto: Proto::Resp2,
            broken: false,
        };
        if proto == Proto::Resp3 {
            conn.setup(&[b"HELLO", b"3"])?;
        }
        Ok(conn)
    }

    /// Sends a command whose reply does not matter, as long as it is not an
    /// error.
    fn setup(&mut self, args: &[&[u8]]) -> Result<(), String> {
        let is_hello = args
            .first()
            .is_some_and(|a| a.eq_ignore_ascii_case(b"hello"));
        self.send(&encode(args)).map_err(|e| e.to_string())?;
        let reply = self.read_reply(is_hello);
        if !reply.is_frame() || reply.starts_with(b"-") {
            return Err(format!(
                "{} answered {}",
                String::from_utf8_lossy(&args.join(&b' ')),
                reply.show()
            ));
        }
        if is_hello {
            self.proto = Proto::Resp3;
        }
        Ok(())
    }

    fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let r = self.stream.write_all(bytes);
        if r.is_err() {
            self.broken = true;
        }
        r
    }

    /// Reads exactly one reply. `any_proto` decodes it as RESP3 whatever the
    /// connection speaks (HELLO answers in the protocol it switches to).
    fn read_reply(&mut self, any_proto: bool) -> Reply {
        let resp3 = any_proto || self.proto == Proto::Resp3;
        let mut chunk = [0u8; 16 * 1024];
        loop {
            if !self.buf.is_empty() {
                match frame_len(&self.buf, resp3) {
                    Ok(Some(n)) => return Reply::Frame(self.buf.drain(..n).collect()),
                    Ok(None) => {}
                    Err(e) => return Reply::Invalid(e, std::mem::take(&mut self.buf)),
                }
            }
            if self.broken && self.buf.is_empty() {
                return Reply::Closed;
            }
            match self.stream.read(&mut chunk) {
                Ok(0) if self.buf.is_empty() => return Reply::Closed,
                Ok(0) => return Reply::Truncated(std::mem::take(&mut self.buf)),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Reply::Timeout(std::mem::take(&mut self.buf));
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe)
                        && self.buf.is_empty() =>
                {
                    return Reply::Closed;
                }
                Err(e) => return Reply::Failed(e.to_string()),
            }
        }
    }

    /// Whether the server closes the connection within [`CLOSE_TIMEOUT`]
    /// without sending anything more.
    fn closes(&mut self) -> bool {
        if !self.buf.is_empty() {
            return false;
        }
        let _ = self.stream.set_read_timeout(Some(CLOSE_TIMEOUT));
        let mut byte = [0u8; 1];
        let closed = loop {
            match self.stream.read(&mut byte) {
                Ok(0) => break true,
                Ok(_) => break false,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    break matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe)
                }
            }
        };
        let _ = self.stream.set_read_timeout(Some(REPLY_TIMEOUT));
        closed
    }
}

/// Length of the complete reply at the start of `buf`, `None` if more bytes
/// are needed.
fn frame_len(buf: &[u8], resp3: bool) -> Result<Option<usize>, String> {
    if resp3 {
        redis_protocol::resp3::decode::complete::decode_range(buf)
            .map(|r| r.map(|(_, n)| n))
            .map_err(|e| e.to_string())
    } else {
        redis_protocol::resp2::decode::decode_range(buf)
            .map(|r| r.map(|(_, n)| n))
            .map_err(|e| e.to_string())
    }
}

/// A command as a RESP multibulk, as clients send it.
fn encode<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// A connection to each server.
struct Pair {
    redis: Conn,
    rostrum: Conn,
}

impl Pair {
    /// Fresh connections in `proto`, selecting db 0 (no flush).
    fn open(servers: &Servers, proto: Proto) -> Result<Pair, String> {
        let redis =
            Conn::open(servers.redis.port, proto).map_err(|e| format!("redis-server: {e}"))?;
        let rostrum =
            Conn::open(servers.rostrum.port, proto).map_err(|e| format!("rostrum: {e}"))?;
        Ok(Pair { redis, rostrum })
    }

    /// Fresh connections on empty servers.
    fn open_flushed(servers: &Servers, proto: Proto) -> Result<Pair, String> {
        let mut pair = Pair::open(servers, proto)?;
        for conn in [&mut pair.redis, &mut pair.rostrum] {
            conn.setup(&[b"FLUSHALL"])?;
            conn.setup(&[b"SELECT", b"0"])?;
        }
        Ok(pair)
    }

    /// Sends `bytes` to both servers and reads one reply from each.
    fn exchange(&mut self, bytes: &[u8], command: &[u8]) -> (Reply, Reply) {
        self.send(bytes);
        self.read_pair(command)
    }

    /// Sends `bytes` to both servers.
    fn send(&mut self, bytes: &[u8]) {
        let _ = self.redis.send(bytes);
        let _ = self.rostrum.send(bytes);
    }

    /// Reads the reply to `command` from each server.
    fn read_pair(&mut self, command: &[u8]) -> (Reply, Reply) {
        let hello = command.eq_ignore_ascii_case(b"hello");
        let expected = self.redis.read_reply(hello);
        let got = self.rostrum.read_reply(hello);
        for (conn, reply) in [(&mut self.redis, &expected), (&mut self.rostrum, &got)] {
            if hello && reply.starts_with(b"%") {
                conn.proto = Proto::Resp3;
            } else if (hello && reply.starts_with(b"*")) || reply.starts_with(b"+RESET") {
                conn.proto = Proto::Resp2;
            }
        }
        (expected, got)
    }
}

/// Reconnects after a closed or broken connection; a server that refuses is
/// fatal (it probably crashed).
fn reopen(servers: &Servers, proto: Proto) -> Result<Pair, String> {
    Pair::open(servers, proto).map_err(|e| format!("{e} (did the server crash?)"))
}

// ---------------------------------------------------------------------------
// Case files

/// One step of a case file.
enum Step {
    /// Send `bytes`, read `replies` replies from each server, compare unless
    /// told not.
    Send {
        bytes: Vec<u8>,
        /// The command's name (first argument), for protocol switches.
        command: Vec<u8>,
        compare: bool,
        /// Replies the command produces (SUBSCRIBE a b: 2); 1 by default.
        replies: usize,
        /// The named extra connection it goes on (`!on NAME`); `None`: the
        /// main one.
        on: Option<Vec<u8>>,
    },
    /// Wait on both sides.
    Sleep(u64),
    /// The commands up to the next `!end` go in one write (a pipeline).
    Pipeline,
    /// Sends the pipeline, then reads and compares its replies in order.
    End,
}

/// Parses one non-blank, non-comment line of a case file.
fn parse_step(line: &[u8]) -> Result<Step, String> {
    let (word, rest) = match line.iter().position(|b| b.is_ascii_whitespace()) {
        Some(i) => (&line[..i], trim(&line[i..])),
        None => (line, &b""[..]),
    };
    match word {
        b"!sleep" => std::str::from_utf8(rest)
            .ok()
            .and_then(|s| s.parse().ok())
            .map(Step::Sleep)
            .ok_or_else(|| "!sleep takes milliseconds".into()),
        b"!pipeline" if rest.is_empty() => Ok(Step::Pipeline),
        b"!end" if rest.is_empty() => Ok(Step::End),
        b"!nocompare" => match parse_step(rest)? {
            Step::Send {
                bytes,
                command,
                replies,
                on,
                ..
            } => Ok(Step::Send {
                bytes,
                command,
                compare: false,
                replies,
                on,
            }),
            _ => Err("!nocompare needs a command".into()),
        },
        b"!replies" => {
            let (n, rest) = match rest.iter().position(|b| b.is_ascii_whitespace()) {
                Some(i) => (&rest[..i], trim(&rest[i..])),
                None => (rest, &b""[..]),
            };
            let n: usize = std::str::from_utf8(n)
                .ok()
                .and_then(|s| s.parse().ok())
                .filter(|&n| n >= 1)
                .ok_or("!replies takes a count of at least 1")?;
            match parse_step(rest)? {
                Step::Send {
                    bytes,
                    command,
                    compare,
                    on,
                    ..
                } => Ok(Step::Send {
                    bytes,
                    command,
                    compare,
                    replies: n,
                    on,
                }),
                _ => Err("!replies needs a command".into()),
            }
        }
        b"!on" => {
            let (name, rest) = match rest.iter().position(|b| b.is_ascii_whitespace()) {
                Some(i) => (&rest[..i], trim(&rest[i..])),
                None => return Err("!on takes a connection name and a command".into()),
            };
            match parse_step(rest)? {
                Step::Send {
                    bytes,
                    command,
                    compare,
                    replies,
                    ..
                } => Ok(Step::Send {
                    bytes,
                    command,
                    compare,
                    replies,
                    on: Some(name.to_vec()),
                }),
                _ => Err("!on needs a command".into()),
            }
        }
        // A command whose reply comes later (a blocking pop): send it, read
        // nothing now; `!receive` reads the reply when it is due.
        b"!send" => match parse_step(rest)? {
            Step::Send {
                bytes,
                command,
                replies: 1,
                on: None,
                ..
            } if !bytes.is_empty() => Ok(Step::Send {
                bytes,
                command,
                compare: true,
                replies: 0,
                on: None,
            }),
            _ => Err("!send needs a plain command".into()),
        },
        // A message pushed without a command: read one reply, send nothing.
        b"!receive" if rest.is_empty() => Ok(Step::Send {
            bytes: Vec::new(),
            command: Vec::new(),
            compare: true,
            replies: 1,
            on: None,
        }),
        b"!inline" => {
            let mut bytes = rest.to_vec();
            bytes.extend_from_slice(b"\r\n");
            let command = rest
                .split(|b| b.is_ascii_whitespace())
                .next()
                .unwrap_or_default()
                .to_vec();
            Ok(Step::Send {
                bytes,
                command,
                compare: true,
                replies: 1,
                on: None,
            })
        }
        b"!raw" => match split_args(rest) {
            Some(args) if args.len() == 1 => Ok(Step::Send {
                bytes: args.concat(),
                command: Vec::new(),
                compare: true,
                replies: 1,
                on: None,
            }),
            _ => Err("!raw takes one quoted string".into()),
        },
        w if w.starts_with(b"!") => {
            Err(format!("unknown directive {}", String::from_utf8_lossy(w)))
        }
        _ => match split_args(line) {
            Some(args) if !args.is_empty() => Ok(Step::Send {
                bytes: encode(&args),
                command: args[0].clone(),
                compare: true,
                replies: 1,
                on: None,
            }),
            _ => Err("unbalanced quotes".into()),
        },
    }
}

fn trim(s: &[u8]) -> &[u8] {
    let start = s
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |i| i + 1);
    &s[start..end.max(start)]
}

fn case_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let p = e.path();
            (p.extension()? == "txt")
                .then(|| p.file_stem()?.to_str().map(String::from))
                .flatten()
        })
        .collect();
    names.sort();
    names
}

/// The case files to run: all of them, or the one named by the filter.
fn case_files(dir: &Path, filter: Option<&str>) -> Result<Vec<PathBuf>, String> {
    if !dir.is_dir() {
        return Err(format!("no case directory {}", dir.display()));
    }
    Ok(case_names(dir)
        .into_iter()
        .filter(|n| filter.is_none_or(|f| f == n))
        .map(|n| dir.join(format!("{n}.txt")))
        .collect())
}

fn run_case_file(
    path: &Path,
    proto: Proto,
    servers: &Servers,
    report: &mut Report,
) -> Result<(), String> {
    let file = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let text = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let source = format!("{file} {}", proto.name());
    report.start(&source);
    let mut main = Pair::open_flushed(servers, proto)?;
    // The named extra connections (`!on NAME`), opened on first use.
    let mut named: BTreeMap<Vec<u8>, Pair> = BTreeMap::new();
    // The commands of a `!pipeline` block so far.
    let mut pipeline: Option<Vec<Piped>> = None;
    for (i, raw_line) in text.split(|&b| b == b'\n').enumerate() {
        let line = trim(raw_line);
        if line.is_empty() || line.starts_with(b"#") {
            continue;
        }
        let place = format!("{file}:{}", i + 1);
        let step = match parse_step(line) {
            Ok(step) => step,
            Err(e) => {
                report.broken_case(&source, &place, &e);
                continue;
            }
        };
        let step = match (step, pipeline.as_mut()) {
            (Step::Sleep(ms), None) => {
                std::thread::sleep(Duration::from_millis(ms));
                continue;
            }
            (Step::Pipeline, None) => {
                pipeline = Some(Vec::new());
                continue;
            }
            (Step::End, Some(_)) => {
                let sent = pipeline.take().unwrap_or_default();
                run_pipeline(&mut main, &sent, &source, proto, report);
                if sent.iter().any(|p| p.command.eq_ignore_ascii_case(b"quit")) {
                    main = reopen(servers, proto)
                        .map_err(|e| format!("{place} {}: {e}", proto.name()))?;
                }
                continue;
            }
            (
                Step::Send {
                    bytes,
                    command,
                    compare,
                    replies: 1,
                    on: None,
                },
                Some(block),
            ) => {
                let shown = String::from_utf8_lossy(line).into_owned();
                block.push(Piped {
                    place,
                    shown,
                    bytes,
                    command,
                    compare,
                });
                continue;
            }
            (
                Step::Send {
                    bytes,
                    command,
                    compare,
                    replies,
                    on,
                },
                None,
            ) => (bytes, command, compare, replies, on),
            (_, _) => {
                report.broken_case(
                    &source,
                    &place,
                    "misplaced !pipeline, !end or !sleep, or !on / !replies in a pipeline",
                );
                continue;
            }
        };
        let (bytes, command, compare, replies, on) = step;
        let pair = match &on {
            None => &mut main,
            Some(name) => match named.entry(name.clone()) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(e) => e.insert(
                    Pair::open(servers, proto)
                        .map_err(|e| format!("{place} {}: {e}", proto.name()))?,
                ),
            },
        };
        pair.send(&bytes);
        if replies == 0 {
            // `!send`: the reply is read by a later `!receive`.
            continue;
        }
        let shown = String::from_utf8_lossy(line);
        let (mut expected, mut got) = (Reply::Closed, Reply::Closed);
        for _ in 0..replies {
            (expected, got) = pair.read_pair(&command);
            report.compared(&source);
            if compare && expected != got {
                report.difference(&source, &place, proto, &shown, &expected, &got, &[]);
            }
            if !expected.is_frame() || !got.is_frame() {
                break;
            }
        }
        let told_to_close = command.eq_ignore_ascii_case(b"quit")
            || expected.starts_with(b"-ERR Protocol error")
            || got.starts_with(b"-ERR Protocol error");
        if told_to_close {
            let closed = (pair.redis.closes(), pair.rostrum.closes());
            if closed.0 != closed.1 {
                let state = |c: bool| {
                    Reply::Failed(
                        if c {
                            "connection closed"
                        } else {
                            "connection left open"
                        }
                        .into(),
                    )
                };
                report.difference(
                    &source,
                    &place,
                    proto,
                    &format!("{shown}   (then: is the connection closed?)"),
                    &state(closed.0),
                    &state(closed.1),
                    &[],
                );
            }
        }
        if told_to_close || !expected.is_frame() || !got.is_frame() {
            *pair = reopen(servers, proto).map_err(|e| format!("{place} {}: {e}", proto.name()))?;
        }
    }
    Ok(())
}

/// A command of a `!pipeline` block.
struct Piped {
    place: String,
    shown: String,
    bytes: Vec<u8>,
    command: Vec<u8>,
    compare: bool,
}

/// Sends the commands of a `!pipeline` block in one write, then reads and
/// compares their replies in order.
fn run_pipeline(pair: &mut Pair, sent: &[Piped], source: &str, proto: Proto, report: &mut Report) {
    let bytes: Vec<u8> = sent.iter().flat_map(|p| p.bytes.iter().copied()).collect();
    pair.send(&bytes);
    for p in sent {
        let (expected, got) = pair.read_pair(&p.command);
        report.compared(source);
        if p.compare && expected != got {
            report.difference(source, &p.place, proto, &p.shown, &expected, &got, &[]);
        }
    }
}

// ---------------------------------------------------------------------------
// Random streams

fn run_stream(
    seed: u64,
    families: &[&random::Family],
    commands: &[random::Cmd],
    proto: Proto,
    servers: &Servers,
    report: &mut Report,
) -> Result<(), String> {
    let names: Vec<&str> = families.iter().map(|f| f.name).collect();
    let source = format!("random seed={seed} [{}] {}", names.join(","), proto.name());
    report.start(&source);
    let mut pair = Pair::open_flushed(servers, proto)?;
    for (i, args) in commands.iter().enumerate() {
        let command = args.first().cloned().unwrap_or_default();
        let (expected, got) = pair.exchange(&encode(args), &command);
        report.compared(&source);
        if expected != got {
            let context: Vec<String> = commands[i.saturating_sub(STREAM_CONTEXT)..i]
                .iter()
                .map(|c| show_command(c))
                .collect();
            report.difference(
                &source,
                &format!("random seed={seed} command #{i}"),
                proto,
                &show_command(args),
                &expected,
                &got,
                &context,
            );
            // Once the keyspaces diverge every later reply may differ:
            // the first difference is the one worth reading.
            println!(
                "  (stream stopped; rerun with COMPAT_SEEDS={seed} cargo test --test compat -- {})",
                if families.len() == 1 {
                    names[0]
                } else {
                    "random"
                }
            );
            break;
        }
        if !expected.is_frame() || !got.is_frame() {
            pair = reopen(servers, proto)?;
        }
    }
    Ok(())
}

fn parse_seeds(s: &str) -> Result<Vec<u64>, String> {
    s.split(',')
        .map(|p| p.trim())
        .filter(|p| !p.is_empty())
        .map(|p| {
            p.parse()
                .map_err(|_| format!("COMPAT_SEEDS: '{p}' is not a number"))
        })
        .collect()
}

fn env_number(name: &str) -> Result<Option<u64>, String> {
    match std::env::var(name) {
        Ok(s) => s
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| format!("{name}: '{s}' is not a number")),
        Err(_) => Ok(None),
    }
}

// ---------------------------------------------------------------------------
// Reporting

/// Counts per source (a case file or a random stream, in one protocol).
#[derive(Default)]
struct Report {
    sources: BTreeMap<String, Counts>,
    order: Vec<String>,
}

#[derive(Default)]
struct Counts {
    compared: usize,
    differences: usize,
    broken_cases: usize,
}

impl Report {
    fn start(&mut self, source: &str) {
        self.order.push(source.to_string());
        self.sources.entry(source.to_string()).or_default();
    }

    fn counts(&mut self, source: &str) -> &mut Counts {
        self.sources.entry(source.to_string()).or_default()
    }

    fn compared(&mut self, source: &str) {
        self.counts(source).compared += 1;
    }

    fn broken_case(&mut self, source: &str, place: &str, why: &str) {
        self.counts(source).broken_cases += 1;
        println!("\nBAD CASE {place}: {why}");
    }

    #[allow(clippy::too_many_arguments)]
    fn difference(
        &mut self,
        source: &str,
        place: &str,
        proto: Proto,
        command: &str,
        expected: &Reply,
        got: &Reply,
        context: &[String],
    ) {
        self.counts(source).differences += 1;
        println!("\nDIFF {place} {}", proto.name());
        for c in context {
            println!("  before:   {c}");
        }
        println!("  command:  {command}");
        println!("  expected: {}", expected.show());
        println!("  got:      {}", got.show());
    }

    /// Prints one line per source and the totals; true if all matched.
    fn summary(&self) -> bool {
        println!("\ncompat summary:");
        let mut total = Counts::default();
        for source in &self.order {
            let Some(c) = self.sources.get(source) else {
                continue;
            };
            let verdict = if c.differences == 0 && c.broken_cases == 0 {
                "ok".to_string()
            } else {
                format!(
                    "{} difference(s), {} bad case line(s)",
                    c.differences, c.broken_cases
                )
            };
            println!("  {source:<48} {:>6} replies  {verdict}", c.compared);
            total.compared += c.compared;
            total.differences += c.differences;
            total.broken_cases += c.broken_cases;
        }
        println!(
            "compat: {} replies compared, {} difference(s), {} bad case line(s)",
            total.compared, total.differences, total.broken_cases
        );
        total.differences == 0 && total.broken_cases == 0
    }
}

/// Bytes as a double-quoted string with `\r \n \t \\ \" \xHH` escapes.
fn escape(bytes: &[u8]) -> String {
    let shown = &bytes[..bytes.len().min(SHOW_BYTES)];
    let mut s = String::with_capacity(shown.len() + 2);
    s.push('"');
    for &b in shown {
        match b {
            b'\r' => s.push_str("\\r"),
            b'\n' => s.push_str("\\n"),
            b'\t' => s.push_str("\\t"),
            b'\\' => s.push_str("\\\\"),
            b'"' => s.push_str("\\\""),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s.push('"');
    if bytes.len() > SHOW_BYTES {
        s.push_str(&format!("... ({} bytes in all)", bytes.len()));
    }
    s
}

/// A command as it would be typed in redis-cli.
fn show_command(args: &[Vec<u8>]) -> String {
    args.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.iter()
                    .all(|&b| b.is_ascii_graphic() && b != b'"' && b != b'\'' && b != b'\\');
            if plain {
                String::from_utf8_lossy(a).into_owned()
            } else {
                escape(a)
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
