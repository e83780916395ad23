//! The client side of `benches/snapshot_probe.sh`: how long a client
//! waits on a write while the server takes a point-in-time snapshot
//! (BGSAVE, BGREWRITEAOF), and what the snapshot costs in memory.
//!
//! ```text
//! snapshot_probe load --port P --key K --members N [--type zset|board]
//!     fills sorted set K with members m0..m<N-1> (ZADD batches of 1000,
//!     pipelined), random scores; with `--type board`, leaderboard K
//!     (pipelined LB.SUBMITs).
//! snapshot_probe run --port P --pid PID --key K --members N --command BGSAVE|BGREWRITEAOF [--type zset|board]
//!     one connection sends ZINCRBY K 1 m<random> (a board: LB.INCR) every ~1 ms and times
//!     each reply; another sends the command, then polls INFO persistence
//!     every 10 ms until the snapshot is over, and samples the resident
//!     memory of PID and its children (Redis's fork). Prints one line:
//!     snapshot_ms writes max_ms p999_ms p99_ms rss_before_mb rss_peak_mb
//!     cow_peak_mb (current_cow_peak / rdb_ / aof_last_cow_size).
//! ```
//!
//! Blocking std sockets and two threads: nothing else to build.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, String>;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Err(e) = run(&args) {
        eprintln!("snapshot_probe: {e}");
        std::process::exit(1);
    }
}

fn opt<'a>(args: &'a [String], name: &str) -> Result<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|s| s.as_str())
        .ok_or_else(|| format!("missing {name}"))
}

fn num(args: &[String], name: &str) -> Result<u64> {
    opt(args, name)?.parse().map_err(|e| format!("{name}: {e}"))
}

fn run(args: &[String]) -> Result<()> {
    let port = num(args, "--port")?;
    let key = opt(args, "--key")?.to_string();
    let members = num(args, "--members")?;
    let board = match opt(args, "--type").unwrap_or("zset") {
        "zset" => Kind::ZSet,
        "board" => Kind::Board,
        "hash" => Kind::Hash,
        "set" => Kind::Set,
        "list" => Kind::List,
        "stream" => Kind::Stream,
        "strings" => Kind::Strings,
        t => {
            return Err(format!(
                "--type: {t}? (zset board hash set list stream strings)"
            ))
        }
    };
    match args.get(1).map(|s| s.as_str()) {
        Some("load") => load(port, &key, members, board),
        Some("run") => probe(
            port,
            num(args, "--pid")? as u32,
            &key,
            members,
            opt(args, "--command")?,
            board,
        ),
        _ => Err("usage: snapshot_probe load|run ...".into()),
    }
}

struct Conn {
    w: TcpStream,
    r: BufReader<TcpStream>,
}

impl Conn {
    fn open(port: u64) -> Result<Conn> {
        let s = TcpStream::connect(("127.0.0.1", port as u16)).map_err(|e| e.to_string())?;
        s.set_nodelay(true).map_err(|e| e.to_string())?;
        let r = BufReader::new(s.try_clone().map_err(|e| e.to_string())?);
        Ok(Conn { w: s, r })
    }

    fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
        out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
    }

    fn send(&mut self, buf: &[u8]) -> Result<()> {
        self.w.write_all(buf).map_err(|e| e.to_string())
    }

    /// Reads one reply; returns its text (bulk strings whole, an array as
    /// its elements' texts joined by spaces).
    fn reply(&mut self) -> Result<String> {
        let mut line = String::new();
        self.r.read_line(&mut line).map_err(|e| e.to_string())?;
        let line = line.trim_end().to_string();
        match line.as_bytes().first() {
            Some(b'*') => {
                let n: i64 = line[1..].parse().map_err(|_| format!("bad reply {line}"))?;
                let mut parts = Vec::new();
                for _ in 0..n.max(0) {
                    parts.push(self.reply()?);
                }
                Ok(parts.join(" "))
            }
            Some(b'$') => {
                let n: i64 = line[1..].parse().map_err(|_| format!("bad reply {line}"))?;
                if n < 0 {
                    return Ok(String::new());
                }
                let mut body = vec![0u8; n as usize + 2];
                std::io::Read::read_exact(&mut self.r, &mut body).map_err(|e| e.to_string())?;
                body.truncate(n as usize);
                Ok(String::from_utf8_lossy(&body).into_owned())
            }
            Some(b'-') => Err(format!("server error: {line}")),
            Some(_) => Ok(line),
            None => Err("connection closed".into()),
        }
    }

    fn call(&mut self, args: &[&[u8]]) -> Result<String> {
        let mut buf = Vec::new();
        Conn::encode(&mut buf, args);
        self.send(&buf)?;
        self.reply()
    }
}

/// A small xorshift: random members and scores without a crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// What the probe loads and writes to.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    ZSet,
    Board,
    Hash,
    Set,
    List,
    Stream,
    /// N string keys `m<i>` (the key argument is not used).
    Strings,
}

/// One element `i` of a non-zset kind, as the command that loads it.
fn load_command(kind: Kind, key: &str, i: u64, r: u64) -> Vec<Vec<u8>> {
    let (k, m, r) = (
        key.as_bytes().to_vec(),
        format!("m{i}").into_bytes(),
        r.to_string().into_bytes(),
    );
    match kind {
        Kind::Board => vec![b"LB.SUBMIT".to_vec(), k, m, r],
        Kind::Hash => vec![b"HSET".to_vec(), k, m, r],
        Kind::Set => vec![b"SADD".to_vec(), k, m],
        Kind::List => vec![b"RPUSH".to_vec(), k, m],
        Kind::Stream => vec![b"XADD".to_vec(), k, b"*".to_vec(), b"f".to_vec(), m],
        Kind::Strings | Kind::ZSet => vec![b"SET".to_vec(), m, r],
    }
}

/// The probe's write to element `r` of a kind.
fn write_command(kind: Kind, key: &str, r: u64) -> Vec<Vec<u8>> {
    let (k, m) = (key.as_bytes().to_vec(), format!("m{r}").into_bytes());
    match kind {
        Kind::ZSet => vec![b"ZINCRBY".to_vec(), k, b"1".to_vec(), m],
        Kind::Board => vec![b"LB.INCR".to_vec(), k, m, b"1".to_vec()],
        Kind::Hash => vec![b"HINCRBY".to_vec(), k, m, b"1".to_vec()],
        Kind::Set => vec![b"SADD".to_vec(), k, format!("n{r}").into_bytes()],
        Kind::List => vec![
            b"LSET".to_vec(),
            k,
            r.to_string().into_bytes(),
            b"x".to_vec(),
        ],
        Kind::Stream => vec![b"XADD".to_vec(), k, b"*".to_vec(), b"f".to_vec(), m],
        Kind::Strings => vec![b"INCR".to_vec(), m],
    }
}

fn load(port: u64, key: &str, members: u64, board: Kind) -> Result<()> {
    let mut c = Conn::open(port)?;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let batch = 1000;
    let mut sent = 0u64;
    let mut pending = 0u64;
    while sent < members {
        let mut buf = Vec::new();
        // Up to 16 batches in flight.
        for _ in 0..16 {
            if sent >= members {
                break;
            }
            let n = batch.min(members - sent);
            if board != Kind::ZSet {
                for i in sent..sent + n {
                    let owned = load_command(board, key, i, rng.next() % 10_000_000);
                    let args: Vec<&[u8]> = owned.iter().map(|a| a.as_slice()).collect();
                    Conn::encode(&mut buf, &args);
                }
                pending += n;
            } else {
                let mut owned: Vec<Vec<u8>> = vec![b"ZADD".to_vec(), key.as_bytes().to_vec()];
                for i in sent..sent + n {
                    owned.push((rng.next() % 10_000_000).to_string().into_bytes());
                    owned.push(format!("m{i}").into_bytes());
                }
                let args: Vec<&[u8]> = owned.iter().map(|a| a.as_slice()).collect();
                Conn::encode(&mut buf, &args);
                pending += 1;
            }
            sent += n;
        }
        c.send(&buf)?;
        while pending > 0 {
            c.reply()?;
            pending -= 1;
        }
    }
    Ok(())
}

/// Resident memory of `pid` and of its child processes, in bytes.
fn rss_tree(pid: u32) -> u64 {
    let mut total = rss(pid);
    let children =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    for c in children.split_whitespace() {
        if let Ok(c) = c.parse::<u32>() {
            total += rss(c);
        }
    }
    total
}

fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn info_field(info: &str, name: &str) -> Option<String> {
    info.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k == name).then(|| v.trim().to_string())
    })
}

fn probe(port: u64, pid: u32, key: &str, members: u64, command: &str, board: Kind) -> Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicBool::new(false));
    let mut c = Conn::open(port)?;
    let (stop2, started2, key2) = (stop.clone(), started.clone(), key.to_string());
    let writer = std::thread::spawn(move || -> Result<Vec<f64>> {
        let mut rng = Rng(0x2545_F491_4F6C_DD1D);
        let mut waits = Vec::new();
        let mut next = Instant::now();
        // Writes start a little before the snapshot and end when it does.
        while !stop2.load(Ordering::Acquire) {
            let owned = write_command(board, &key2, rng.next() % members.max(1));
            let args: Vec<&[u8]> = owned.iter().map(|a| a.as_slice()).collect();
            let t = Instant::now();
            c.call(&args)?;
            if started2.load(Ordering::Acquire) {
                waits.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            next += Duration::from_millis(1);
            let now = Instant::now();
            if next > now {
                std::thread::sleep(next - now);
            } else {
                next = now;
            }
        }
        Ok(waits)
    });
    let mut ctl = Conn::open(port)?;
    std::thread::sleep(Duration::from_millis(200));
    let rss_before = rss_tree(pid);
    let (flag, cow_field) = if command.eq_ignore_ascii_case("bgsave") {
        ("rdb_bgsave_in_progress", "rdb_last_cow_size")
    } else {
        ("aof_rewrite_in_progress", "aof_last_cow_size")
    };
    started.store(true, Ordering::Release);
    let t0 = Instant::now();
    let answer = ctl.call(&[command.as_bytes()]);
    let mut peak = rss_before;
    let mut cow_peak = 0u64;
    let result = (|| -> Result<()> {
        answer?;
        loop {
            peak = peak.max(rss_tree(pid));
            let info = ctl.call(&[b"INFO", b"persistence"])?;
            if let Some(v) = info_field(&info, "current_cow_peak").and_then(|v| v.parse().ok()) {
                cow_peak = cow_peak.max(v);
            }
            if info_field(&info, flag).as_deref() == Some("0") {
                if let Some(v) = info_field(&info, cow_field).and_then(|v| v.parse().ok()) {
                    cow_peak = cow_peak.max(v);
                }
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    })();
    let snapshot_ms = t0.elapsed().as_secs_f64() * 1000.0;
    stop.store(true, Ordering::Release);
    let mut waits = writer.join().map_err(|_| "writer panicked".to_string())??;
    result?;
    waits.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| -> f64 {
        if waits.is_empty() {
            return 0.0;
        }
        let i = ((waits.len() as f64 * q).ceil() as usize).clamp(1, waits.len()) - 1;
        waits[i]
    };
    let mb = |b: u64| b as f64 / (1024.0 * 1024.0);
    println!(
        "{snapshot_ms:.0}\t{}\t{:.2}\t{:.2}\t{:.2}\t{:.0}\t{:.0}\t{:.1}",
        waits.len(),
        at(1.0),
        at(0.999),
        at(0.99),
        mb(rss_before),
        mb(peak),
        mb(cow_peak)
    );
    Ok(())
}
