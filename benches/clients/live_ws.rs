//! The client side of `benches/live_ws_benchmark.sh`: many watchers of one
//! board kept fresh about its top 10 while writers change it, either
//! pushed (WebSockets on Rostrum's `/ws/boards/live?n=10`) or polling
//! (`ZREVRANGE live 0 9 WITHSCORES` every 100 ms, the recipe on
//! redis-server). It measures what the watchers get and how fresh it is,
//! and the server's CPU time from /proc, so it runs on the server's
//! machine.
//!
//! ```text
//! live_ws push --port P --http H --pid PID [--watchers W] [--rate R] [--secs S] [--threads T]
//! live_ws poll --port P --pid PID [--watchers W] [--rate R] [--secs S] [--threads T]
//! ```
//!
//! Writers send R score changes a second (LB.INCR / ZINCRBY on 1,000
//! members, pipelined every 10 ms, the batches encoded before the window).
//! A marker member, far ahead at place 1, is bumped by one every 10 ms and
//! the send time of each of its scores is kept; a watcher that sees a new
//! marker score records the delay from that score's send to its arrival
//! (a push, or the poll reply that first shows it). `--watchers 0` runs
//! the writers alone (the cost of the writes without watchers). Prints one
//! line: `messages_per_s=.. delay_p50_ms=.. delay_p99_ms=..
//! server_cpu_s=.. window_s=.. writes_per_s=.. client_cpu_s=..
//! lag_p99_ms=.. ...`.
//!
//! Built to stay out of the measurement's way: one tokio runtime of T
//! worker threads (default 1, a current-thread runtime, so that on a
//! small machine the client takes at most one core from the server), no
//! lock on the path of a message (atomics and a shared histogram of
//! delays), frames parsed in place in each watcher's reused buffer, and
//! pollers driven in groups (one timer per 50 connections: a group writes
//! its 50 requests, then reads the replies). The client's own CPU time
//! (`client_cpu_s`, /proc/self) and how late its 10 ms ticks fire
//! (`lag_p99_ms`) say whether it kept up: a client near T cores, or ticks
//! late by more than a few ms, is the bottleneck and its rows do not
//! compare. Raw sockets (a hand-rolled WebSocket client handshake and frame
//! reader are enough for a benchmark).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

type Result<T> = std::result::Result<T, String>;

/// The marker's first score: every other member stays far below it.
const BASE: u64 = 1_000_000_000_000;
/// Width of a delay histogram bucket, in microseconds.
const BUCKET_US: u64 = 50;
/// Buckets: delays up to 10 s (longer ones land in the last).
const BUCKETS: usize = 200_000;
/// Pollers per timer.
const POLL_GROUP: u64 = 50;

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

/// A process's user + system CPU time, in seconds (`pid` "self" for this
/// one).
fn cpu_seconds(pid: &str) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(|e| e.to_string())?;
    let after = stat.rsplit_once(") ").map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 (1-based); here 11 and 12.
    Ok((ticks(11) + ticks(12)) / 100.0)
}

/// What every watcher adds to, without a lock.
struct Shared {
    /// The clock's origin.
    epoch: Instant,
    /// Send time of each marker score (index: score - BASE), in µs since
    /// `epoch` (0: not sent yet).
    sent: Vec<AtomicU64>,
    /// Delays seen, bucketed by [`BUCKET_US`].
    delays: Vec<AtomicU64>,
    /// Messages (pushes or poll replies) received in the window.
    messages: AtomicU64,
    /// Whether the measuring window is open.
    measuring: AtomicBool,
}

impl Shared {
    fn new(marks: usize) -> Shared {
        Shared {
            epoch: Instant::now(),
            sent: (0..marks).map(|_| AtomicU64::new(0)).collect(),
            delays: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            messages: AtomicU64::new(0),
            measuring: AtomicBool::new(false),
        }
    }

    fn now_us(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }

    /// One message arrived (at `now_us`), showing the marker at `seq` if
    /// any.
    fn got(&self, seq: Option<u64>, last: &mut u64, now_us: u64) {
        if !self.measuring.load(Ordering::Relaxed) {
            if let Some(s) = seq {
                *last = (*last).max(s);
            }
            return;
        }
        self.messages.fetch_add(1, Ordering::Relaxed);
        let Some(seq) = seq.filter(|&q| q > *last) else {
            return;
        };
        *last = seq;
        let Some(t) = self
            .sent
            .get(seq as usize)
            .map(|t| t.load(Ordering::Relaxed))
        else {
            return;
        };
        if t == 0 {
            return;
        }
        let b = (now_us.saturating_sub(t) / BUCKET_US) as usize;
        self.delays[b.min(BUCKETS - 1)].fetch_add(1, Ordering::Relaxed);
    }

    /// (p50, p99) of the delays in ms, and how many there were.
    fn percentiles(&self) -> (f64, f64, u64) {
        let counts: Vec<u64> = self
            .delays
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        let at = |p: f64| {
            if total == 0 {
                return f64::NAN;
            }
            let want = ((p / 100.0) * total as f64).ceil().max(1.0) as u64;
            let mut seen = 0;
            for (i, c) in counts.iter().enumerate() {
                seen += c;
                if seen >= want {
                    return ((i as u64 * BUCKET_US) + BUCKET_US / 2) as f64 / 1000.0;
                }
            }
            f64::NAN
        };
        (at(50.0), at(99.0), total)
    }
}

/// The marker's score in a message, as a sequence number: the digits
/// after `pat` (`"marker",` in JSON; in a RESP reply `marker\r\n$13\r\n`).
fn marker_seq(msg: &[u8], pat: &[u8], skip_line: bool) -> Option<u64> {
    let at = find(msg, pat)? + pat.len();
    let mut rest = &msg[at..];
    if skip_line {
        let nl = find(rest, b"\n")? + 1;
        rest = &rest[nl..];
    }
    let mut score = 0u64;
    let mut digits = 0;
    for c in rest.iter().take_while(|c| c.is_ascii_digit()) {
        score = score.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
        digits += 1;
    }
    if digits == 0 {
        return None;
    }
    score.checked_sub(BASE)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let first = *needle.first()?;
    let mut i = 0;
    while i + needle.len() <= hay.len() {
        let j = hay[i..].iter().position(|&c| c == first)? + i;
        if hay.get(j..j + needle.len())? == needle {
            return Some(j);
        }
        i = j + 1;
    }
    None
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
async fn ws_watcher(http: u64, shared: Arc<Shared>) -> Result<()> {
    let mut s = connect(http).await?;
    s.write_all(
        b"GET /ws/boards/live?n=10 HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n\
          Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
          Sec-WebSocket-Version: 13\r\n\r\n",
    )
    .await
    .map_err(|e| e.to_string())?;
    // Frames accumulate at buf[..len]; whole ones are consumed from the
    // front and the rest moved down once per read.
    let mut buf = vec![0u8; 8 * 1024];
    let mut len = 0;
    // The response head.
    loop {
        if len == buf.len() {
            return Err("response head too long".into());
        }
        let n = s.read(&mut buf[len..]).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("closed during the handshake".into());
        }
        len += n;
        if let Some(end) = find(&buf[..len], b"\r\n\r\n") {
            if !buf.starts_with(b"HTTP/1.1 101") {
                return Err(String::from_utf8_lossy(&buf[..end]).into_owned());
            }
            buf.copy_within(end + 4..len, 0);
            len -= end + 4;
            break;
        }
    }
    let mut last = 0u64;
    loop {
        let mut at = 0;
        let now = shared.now_us();
        // Whole frames in buf[at..len].
        loop {
            let b = &buf[at..len];
            if b.len() < 2 {
                break;
            }
            let (plen, head) = match b[1] & 0x7f {
                126 if b.len() >= 4 => (u16::from_be_bytes([b[2], b[3]]) as usize, 4),
                127 if b.len() >= 10 => {
                    let mut l = [0u8; 8];
                    l.copy_from_slice(&b[2..10]);
                    (u64::from_be_bytes(l) as usize, 10)
                }
                126 | 127 => break,
                n => (n as usize, 2),
            };
            if b.len() < head + plen {
                if head + plen > buf.len() {
                    buf.resize(head + plen + 1024, 0);
                }
                break;
            }
            if b[0] & 0x0f == 8 {
                return Ok(());
            }
            let seq = marker_seq(&b[head..head + plen], b"\"marker\",", false);
            shared.got(seq, &mut last, now);
            at += head + plen;
        }
        buf.copy_within(at..len, 0);
        len -= at;
        let n = s.read(&mut buf[len..]).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Ok(());
        }
        len += n;
    }
}

/// A group of polling watchers: every 100 ms each sends ZREVRANGE live 0 9
/// WITHSCORES, then the group reads each reply.
async fn poll_group(
    port: u64,
    count: u64,
    shared: Arc<Shared>,
    stop: Instant,
    offset: Duration,
) -> Result<()> {
    let mut conns = Vec::with_capacity(count as usize);
    for _ in 0..count {
        conns.push((connect(port).await?, 0u64));
    }
    let cmd = resp(&["ZREVRANGE", "live", "0", "9", "WITHSCORES"]);
    let mut buf = vec![0u8; 8192];
    // Groups are spread over the 100 ms.
    let mut tick = tokio::time::interval_at(
        tokio::time::Instant::now() + offset,
        Duration::from_millis(100),
    );
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while Instant::now() < stop {
        tick.tick().await;
        for (s, _) in conns.iter_mut() {
            s.write_all(&cmd).await.map_err(|e| e.to_string())?;
        }
        for (s, last) in conns.iter_mut() {
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
            let seq = marker_seq(&buf[..got], b"marker\r\n$", true);
            shared.got(seq, last, shared.now_us());
        }
    }
    Ok(())
}

/// Whether `b` holds a whole array of bulk strings.
fn whole_array(b: &[u8]) -> bool {
    if b.len() < 4 || !b.ends_with(b"\r\n") {
        return false;
    }
    let Some(nl) = find(b, b"\r\n") else {
        return false;
    };
    let n: usize = std::str::from_utf8(&b[1..nl])
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    // Each element is two lines.
    b.iter().filter(|c| **c == b'\n').count() == 1 + 2 * n
}

/// Sends `rate` changes a second for `secs`, in batches every 10 ms, and
/// drains the replies. Returns the changes sent and the 10 ms ticks'
/// lateness (µs, sorted).
async fn writer(port: u64, push: bool, rate: u64, stop: Instant) -> Result<(u64, Vec<u64>)> {
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
    // Encoded beforehand: 16 batches cycling over the members.
    let mut i = 0u64;
    let batches: Vec<Vec<u8>> = (0..16)
        .map(|_| {
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
            batch
        })
        .collect();
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    let mut sent = 0u64;
    let mut lag = Vec::new();
    let mut k = 0;
    while Instant::now() < stop {
        let due = tick.tick().await;
        lag.push(due.elapsed().as_micros() as u64);
        wr.write_all(&batches[k % batches.len()])
            .await
            .map_err(|e| e.to_string())?;
        k += 1;
        sent += per_batch;
    }
    lag.sort_unstable();
    Ok((sent, lag))
}

/// Bumps the marker by one every 10 ms, keeping each score's send time.
async fn marker(port: u64, push: bool, shared: Arc<Shared>, stop: Instant) -> Result<()> {
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
    let mut seq = 1;
    while Instant::now() < stop && seq < shared.sent.len() {
        tick.tick().await;
        shared.sent[seq].store(shared.now_us().max(1), Ordering::Relaxed);
        seq += 1;
        wr.write_all(&bump).await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

async fn run(push: bool, args: &[String]) -> Result<()> {
    let port = opt(args, "--port", None)?;
    let pid = opt(args, "--pid", None)?.to_string();
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
    let shared = Arc::new(Shared::new((secs as usize + 5) * 100));
    // Warm-up (connecting) + the window + a tail for the last deliveries.
    let connect_by = Duration::from_secs(3 + watchers / 2000);
    let start = Instant::now() + connect_by;
    let stop = start + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    if push {
        for i in 0..watchers {
            let sh = shared.clone();
            tasks.push(tokio::task::spawn(async move {
                if let Err(e) = ws_watcher(http, sh).await {
                    eprintln!("live_ws: watcher {i}: {e}");
                }
            }));
            if i % 200 == 199 {
                tokio::task::yield_now().await;
            }
        }
    } else {
        let groups = watchers.div_ceil(POLL_GROUP);
        for g in 0..groups {
            let count = POLL_GROUP.min(watchers - g * POLL_GROUP);
            let sh = shared.clone();
            let offset = Duration::from_micros(100_000 * g / groups.max(1));
            tasks.push(tokio::task::spawn(async move {
                let r = poll_group(port, count, sh, stop + Duration::from_secs(1), offset).await;
                if let Err(e) = r {
                    eprintln!("live_ws: poll group {g}: {e}");
                }
            }));
            tokio::task::yield_now().await;
        }
    }
    tokio::time::sleep_until(start.into()).await;
    let cpu0 = cpu_seconds(&pid)?;
    let own0 = cpu_seconds("self")?;
    let t0 = Instant::now();
    shared.measuring.store(true, Ordering::Relaxed);
    let w = tokio::task::spawn(writer(port, push, rate, stop));
    let m = tokio::task::spawn(marker(port, push, shared.clone(), stop));
    let (written, lag) = w.await.map_err(|e| e.to_string())??;
    m.await.map_err(|e| e.to_string())??;
    let cpu1 = cpu_seconds(&pid)?;
    let own1 = cpu_seconds("self")?;
    let window = t0.elapsed().as_secs_f64();
    // Late deliveries of the last writes still count toward the delays,
    // not toward the messages of the window.
    let messages = shared.messages.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(500)).await;
    shared.measuring.store(false, Ordering::Relaxed);
    for t in &tasks {
        t.abort();
    }
    let (p50, p99, samples) = shared.percentiles();
    let lag_p99 = lag
        .get((lag.len() * 99 / 100).min(lag.len().saturating_sub(1)))
        .copied()
        .unwrap_or(0);
    println!(
        "messages_per_s={:.0} delay_p50_ms={:.1} delay_p99_ms={:.1} server_cpu_s={:.2} window_s={:.2} writes_per_s={:.0} client_cpu_s={:.2} lag_p99_ms={:.1} watchers={} delay_samples={}",
        messages as f64 / window,
        p50,
        p99,
        cpu1 - cpu0,
        window,
        written as f64 / window,
        own1 - own0,
        lag_p99 as f64 / 1000.0,
        watchers,
        samples
    );
    Ok(())
}
