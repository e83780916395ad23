//! The client side of `benches/live_ws_benchmark.sh`: many watchers of one
//! board kept fresh about its top 10 while writers change it, either
//! pushed (WebSockets on Rostrum's `/ws/boards/live?n=10`) or polling
//! (`ZREVRANGE live 0 9 WITHSCORES` every 100 ms, the recipe on
//! redis-server). It measures what the watchers get and how fresh it is,
//! and the server's CPU time from /proc, so it runs on the server's
//! machine.
//!
//! ```text
//! live_ws push --port P --http H --pid PID [--watchers W] [--rate R] [--secs S]
//! live_ws poll --port P --pid PID [--watchers W] [--rate R] [--secs S]
//! ```
//!
//! Writers send R score changes a second (LB.INCR / ZINCRBY on 1,000
//! members, pipelined every 10 ms). A marker member, far ahead at place 1,
//! is bumped by one every 10 ms and the send time of each of its scores is
//! kept; a watcher that sees a new marker score records the delay from
//! that score's send to its arrival (a push, or the poll reply that first
//! shows it). Prints one line:
//! `messages_per_s=.. delay_p50_ms=.. delay_p99_ms=.. server_cpu_s=.. window_s=.. writes_per_s=.. watchers=..`.
//!
//! `--threads T` (default 1: a current-thread runtime, so that the client
//! takes at most one core from the server; on a machine with cores to
//! spare, more threads keep 10,000 watchers and the writers on time).
//! Raw sockets (a hand-rolled WebSocket
//! client handshake and frame reader are enough for a benchmark).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

type Result<T> = std::result::Result<T, String>;

/// The marker's first score: every other member stays far below it.
const BASE: u64 = 1_000_000_000_000;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let push = match args.get(1).map(String::as_str) {
        Some("push") => true,
        Some("poll") => false,
        _ => fail("usage: live_ws push|poll --port P --pid PID [--http H] ..."),
    };
    let threads = opt(&args[2..], "--threads", Some(1)).unwrap_or_else(|e| fail(&e));
    let rt = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads as usize)
            .enable_all()
            .build()
    };
    let rt = rt.unwrap_or_else(|e| fail(&format!("runtime: {e}")));
    if let Err(e) = rt.block_on(run(push, &args[2..])) {
        fail(&e);
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("live_ws: {msg}");
    std::process::exit(1)
}

fn opt(args: &[String], name: &str, default: Option<u64>) -> Result<u64> {
    match args.iter().position(|a| a == name) {
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{name} takes a number")),
        None => default.ok_or_else(|| format!("{name} is required")),
    }
}

/// The server's user + system CPU time, in seconds.
fn cpu_seconds(pid: u64) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(|e| e.to_string())?;
    let after = stat.rsplit_once(") ").map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 (1-based); here 11 and 12.
    Ok((ticks(11) + ticks(12)) / 100.0)
}

/// What every watcher adds to.
#[derive(Default)]
struct Shared {
    /// Send time of each marker score (index: score - BASE).
    sent: Vec<Instant>,
    /// Delays seen, in microseconds.
    delays: Vec<u64>,
    /// Messages (pushes or poll replies) received in the window.
    messages: u64,
    /// Whether the measuring window is open.
    measuring: bool,
}

impl Shared {
    fn saw(&mut self, seq: u64, now: Instant) {
        if !self.measuring {
            return;
        }
        if let Some(t) = self.sent.get(seq as usize) {
            self.delays.push(now.duration_since(*t).as_micros() as u64);
        }
    }
}

fn lock(s: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

/// The marker's score in a message, as a sequence number.
fn marker_seq(msg: &[u8], push: bool) -> Option<u64> {
    let pat: &[u8] = if push { b"\"marker\"," } else { b"marker\r\n$" };
    let at = msg.windows(pat.len()).position(|w| w == pat)? + pat.len();
    let rest = &msg[at..];
    // Poll replies: `$13\r\n1000000000005\r\n`; pushes: `1000000000005]`.
    let rest = if push {
        rest
    } else {
        let nl = rest.windows(2).position(|w| w == b"\r\n")? + 2;
        &rest[nl..]
    };
    let digits: Vec<u8> = rest
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .copied()
        .collect();
    let score: u64 = std::str::from_utf8(&digits).ok()?.parse().ok()?;
    score.checked_sub(BASE)
}

fn resp(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

async fn connect(port: u64) -> Result<TcpStream> {
    let s = TcpStream::connect(("127.0.0.1", port as u16))
        .await
        .map_err(|e| format!("connect {port}: {e}"))?;
    let _ = s.set_nodelay(true);
    Ok(s)
}

/// A WebSocket watcher: handshake, then count text frames and look for the
/// marker in each.
async fn ws_watcher(http: u64, shared: Arc<Mutex<Shared>>) -> Result<()> {
    let mut s = connect(http).await?;
    s.write_all(
        b"GET /ws/boards/live?n=10 HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n\
          Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
          Sec-WebSocket-Version: 13\r\n\r\n",
    )
    .await
    .map_err(|e| e.to_string())?;
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut chunk = vec![0u8; 16 * 1024];
    // The response head.
    loop {
        let n = s.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("closed during the handshake".into());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            if !buf.starts_with(b"HTTP/1.1 101") {
                return Err(String::from_utf8_lossy(&buf[..end]).into_owned());
            }
            buf.drain(..end + 4);
            break;
        }
    }
    let mut last = 0u64;
    loop {
        // Whole frames in buf.
        loop {
            if buf.len() < 2 {
                break;
            }
            let (len, at) = match buf[1] & 0x7f {
                126 if buf.len() >= 4 => (u16::from_be_bytes([buf[2], buf[3]]) as usize, 4),
                127 if buf.len() >= 10 => {
                    let mut l = [0u8; 8];
                    l.copy_from_slice(&buf[2..10]);
                    (u64::from_be_bytes(l) as usize, 10)
                }
                126 | 127 => break,
                n => (n as usize, 2),
            };
            if buf.len() < at + len {
                break;
            }
            let opcode = buf[0] & 0x0f;
            if opcode == 8 {
                return Ok(());
            }
            let now = Instant::now();
            let seq = marker_seq(&buf[at..at + len], true);
            {
                let mut sh = lock(&shared);
                if sh.measuring {
                    sh.messages += 1;
                }
                if let Some(seq) = seq.filter(|&q| q > last) {
                    last = seq;
                    sh.saw(seq, now);
                }
            }
            buf.drain(..at + len);
        }
        let n = s.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A polling watcher: ZREVRANGE live 0 9 WITHSCORES every 100 ms.
async fn poller(port: u64, shared: Arc<Mutex<Shared>>, stop: Instant) -> Result<()> {
    let mut s = connect(port).await?;
    let cmd = resp(&["ZREVRANGE", "live", "0", "9", "WITHSCORES"]);
    let mut buf = vec![0u8; 8192];
    let mut last = 0u64;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Spread the pollers over the 100 ms.
    tokio::time::sleep(Duration::from_micros(rand_below(100_000))).await;
    while Instant::now() < stop {
        tick.tick().await;
        s.write_all(&cmd).await.map_err(|e| e.to_string())?;
        // The reply: 20 bulk strings; read until it is whole.
        let mut got = 0;
        loop {
            let n = s.read(&mut buf[got..]).await.map_err(|e| e.to_string())?;
            if n == 0 {
                return Ok(());
            }
            got += n;
            if whole_array(&buf[..got]) || got == buf.len() {
                break;
            }
        }
        let now = Instant::now();
        let mut sh = lock(&shared);
        if sh.measuring {
            sh.messages += 1;
        }
        if let Some(seq) = marker_seq(&buf[..got], false).filter(|&q| q > last) {
            last = seq;
            sh.saw(seq, now);
        }
    }
    Ok(())
}

/// Whether `b` holds a whole array of bulk strings.
fn whole_array(b: &[u8]) -> bool {
    let mut lines = b.split(|c| *c == b'\n');
    let Some(head) = lines.next() else {
        return false;
    };
    let n: usize = std::str::from_utf8(&head[1..])
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0);
    // Each element is two lines; the last line is empty after its \n.
    b.ends_with(b"\r\n") && b.iter().filter(|c| **c == b'\n').count() == 1 + 2 * n
}

fn rand_below(n: u64) -> u64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut h = RandomState::new().build_hasher();
    h.write_u64(n);
    h.finish() % n.max(1)
}

/// Sends `rate` changes a second for `secs`, in batches every 10 ms, and
/// drains the replies.
async fn writer(port: u64, push: bool, rate: u64, stop: Instant) -> Result<u64> {
    let s = connect(port).await?;
    let (mut rd, mut wr) = s.into_split();
    tokio::task::spawn(async move {
        let mut sink = vec![0u8; 64 * 1024];
        while let Ok(n) = rd.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    });
    let per_batch = (rate / 100).max(1);
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    let mut sent = 0u64;
    let mut i = 0u64;
    while Instant::now() < stop {
        tick.tick().await;
        let mut batch = Vec::with_capacity(per_batch as usize * 48);
        for _ in 0..per_batch {
            let m = format!("m:{}", (i * 7919) % 1000);
            i += 1;
            if push {
                batch.extend_from_slice(&resp(&["LB.INCR", "live", &m, "1"]));
            } else {
                batch.extend_from_slice(&resp(&["ZINCRBY", "live", "1", &m]));
            }
        }
        wr.write_all(&batch).await.map_err(|e| e.to_string())?;
        sent += per_batch;
    }
    Ok(sent)
}

/// Bumps the marker by one every 10 ms, keeping each score's send time.
async fn marker(port: u64, push: bool, shared: Arc<Mutex<Shared>>, stop: Instant) -> Result<()> {
    let s = connect(port).await?;
    let (mut rd, mut wr) = s.into_split();
    tokio::task::spawn(async move {
        let mut sink = vec![0u8; 4096];
        while let Ok(n) = rd.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    });
    let bump = if push {
        resp(&["LB.INCR", "live", "marker", "1"])
    } else {
        resp(&["ZINCRBY", "live", "1", "marker"])
    };
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    while Instant::now() < stop {
        tick.tick().await;
        lock(&shared).sent.push(Instant::now());
        wr.write_all(&bump).await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)] as f64 / 1000.0
}

async fn run(push: bool, args: &[String]) -> Result<()> {
    let port = opt(args, "--port", None)?;
    let pid = opt(args, "--pid", None)?;
    let http = if push { opt(args, "--http", None)? } else { 0 };
    let watchers = opt(args, "--watchers", Some(10_000))?;
    let rate = opt(args, "--rate", Some(50_000))?;
    let secs = opt(args, "--secs", Some(10))?;
    // The board: the marker far ahead (score BASE: sequence 0).
    let mut setup = connect(port).await?;
    let first = if push {
        [
            resp(&["DEL", "live"]),
            resp(&["LB.CREATE", "live", "POLICY", "INCR"]),
            resp(&["LB.INCR", "live", "marker", &BASE.to_string()]),
        ]
        .concat()
    } else {
        [
            resp(&["DEL", "live"]),
            resp(&["PING"]),
            resp(&["ZADD", "live", &BASE.to_string(), "marker"]),
        ]
        .concat()
    };
    setup.write_all(&first).await.map_err(|e| e.to_string())?;
    let mut sink = [0u8; 1024];
    let _ = tokio::time::timeout(Duration::from_millis(300), setup.read(&mut sink)).await;
    let shared = Arc::new(Mutex::new(Shared {
        sent: vec![Instant::now()],
        ..Shared::default()
    }));
    // Warm-up (connecting) + the window + a tail for the last deliveries.
    let connect_by = Duration::from_secs(5 + watchers / 2000);
    let start = Instant::now() + connect_by;
    let stop = start + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for i in 0..watchers {
        let sh = shared.clone();
        tasks.push(tokio::task::spawn(async move {
            let r = if push {
                ws_watcher(http, sh).await
            } else {
                poller(port, sh, stop + Duration::from_secs(1)).await
            };
            if let Err(e) = r {
                eprintln!("live_ws: watcher {i}: {e}");
            }
        }));
        if i % 200 == 199 {
            tokio::task::yield_now().await;
        }
    }
    tokio::time::sleep_until(start.into()).await;
    let cpu0 = cpu_seconds(pid)?;
    let t0 = Instant::now();
    lock(&shared).measuring = true;
    let w = tokio::task::spawn(writer(port, push, rate, stop));
    let m = tokio::task::spawn(marker(port, push, shared.clone(), stop));
    let written = w.await.map_err(|e| e.to_string())??;
    m.await.map_err(|e| e.to_string())??;
    let cpu1 = cpu_seconds(pid)?;
    let window = t0.elapsed().as_secs_f64();
    // Late deliveries of the last writes still count toward the delays.
    tokio::time::sleep(Duration::from_millis(500)).await;
    lock(&shared).measuring = false;
    for t in &tasks {
        t.abort();
    }
    let mut sh = lock(&shared);
    let messages = sh.messages;
    sh.delays.sort_unstable();
    println!(
        "messages_per_s={:.0} delay_p50_ms={:.1} delay_p99_ms={:.1} server_cpu_s={:.2} window_s={:.1} writes_per_s={:.0} watchers={} delay_samples={}",
        messages as f64 / window,
        percentile(&sh.delays, 50.0),
        percentile(&sh.delays, 99.0),
        cpu1 - cpu0,
        window,
        written as f64 / window,
        watchers,
        sh.delays.len()
    );
    Ok(())
}
