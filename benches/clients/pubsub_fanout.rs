//! The client side of `benches/pubsub_benchmark.sh`: measures a Redis
//! protocol server's Pub/Sub fan-out and the memory of its subscriptions.
//! It reads the server's CPU time and resident memory from /proc, so it
//! must run on the server's machine.
//!
//! ```text
//! pubsub_fanout fanout --port P --pid PID --subscribers N --messages M [--size BYTES] [--window W]
//!     N connections SUBSCRIBE one channel; one connection PUBLISHes M
//!     messages (W in flight); prints `delivered_per_s cpu_us_per_message`
//!     once every subscriber has every message.
//! pubsub_fanout memory --port P --pid PID --clients C --channels K
//!     C connections each SUBSCRIBE K channels of their own; prints the
//!     growth of the server's resident memory per subscription, in bytes.
//! ```
//!
//! Single-threaded (a current-thread runtime), so that the client takes at
//! most one core from the server.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

type Result<T> = std::result::Result<T, String>;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => fail(&format!("runtime: {e}")),
    };
    let result = match args.get(1).map(String::as_str) {
        Some("fanout") => rt.block_on(fanout(&args[2..])),
        Some("memory") => rt.block_on(memory(&args[2..])),
        _ => Err("usage: pubsub_fanout fanout|memory --port P --pid PID ...".into()),
    };
    if let Err(e) = result {
        fail(&e);
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("pubsub_fanout: {msg}");
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
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|&i| f.get(i).and_then(|v| v.parse::<f64>().ok()))
        .sum();
    // CLK_TCK is 100 on Linux.
    Ok(ticks / 100.0)
}

/// The server's resident memory, in bytes.
fn rss_bytes(pid: u64) -> Result<u64> {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|e| e.to_string())?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .ok_or_else(|| "no VmRSS".into())
}

fn command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

async fn connect(port: u64) -> Result<TcpStream> {
    let s = TcpStream::connect(("127.0.0.1", port as u16))
        .await
        .map_err(|e| format!("connect: {e}"))?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    Ok(s)
}

/// Reads exactly `n` bytes (and drops them).
async fn read_bytes(s: &mut TcpStream, mut n: usize, buf: &mut [u8]) -> Result<()> {
    while n > 0 {
        let want = n.min(buf.len());
        let got = s
            .read(&mut buf[..want])
            .await
            .map_err(|e| format!("read: {e}"))?;
        if got == 0 {
            return Err("connection closed".into());
        }
        n -= got;
    }
    Ok(())
}

/// Subscribes `s` (already on `already` channels) to `channels` and reads
/// the confirmations.
async fn subscribe(s: &mut TcpStream, channels: &[Vec<u8>], already: usize) -> Result<()> {
    let mut req = Vec::new();
    let mut expect = 0;
    for c in channels {
        req.extend_from_slice(&command(&[b"SUBSCRIBE", c]));
    }
    s.write_all(&req).await.map_err(|e| e.to_string())?;
    for (i, c) in channels.iter().enumerate() {
        // *3 $9 subscribe $len channel :count
        expect += format!("*3\r\n$9\r\nsubscribe\r\n${}\r\n", c.len()).len()
            + c.len()
            + 2
            + format!(":{}\r\n", already + i + 1).len();
    }
    read_bytes(s, expect, &mut vec![0u8; 64 * 1024]).await
}

async fn fanout(args: &[String]) -> Result<()> {
    let port = opt(args, "--port", None)?;
    let pid = opt(args, "--pid", None)?;
    let subscribers = opt(args, "--subscribers", None)? as usize;
    let messages = opt(args, "--messages", None)? as usize;
    let size = opt(args, "--size", Some(32))? as usize;
    let window = opt(args, "--window", Some(64))?.max(1) as usize;
    // Subscribers that never read: the server must cut them off at their
    // output limit while the others keep their rate.
    let stalled = opt(args, "--stalled", Some(0))? as usize;
    let channel = b"bench:fanout".to_vec();
    let payload = vec![b'm'; size];
    let frame = format!(
        "*3\r\n$7\r\nmessage\r\n${}\r\n{}\r\n${}\r\n",
        channel.len(),
        String::from_utf8_lossy(&channel),
        size
    )
    .len()
        + size
        + 2;
    let mut subs = Vec::with_capacity(subscribers);
    for _ in 0..subscribers {
        let mut s = connect(port).await?;
        subscribe(&mut s, std::slice::from_ref(&channel), 0).await?;
        subs.push(s);
    }
    let mut idle = Vec::with_capacity(stalled);
    for _ in 0..stalled {
        let mut s = connect(port).await?;
        subscribe(&mut s, std::slice::from_ref(&channel), 0).await?;
        idle.push(s);
    }
    let readers: Vec<_> = subs
        .into_iter()
        .map(|mut s| {
            tokio::spawn(async move {
                read_bytes(&mut s, frame * messages, &mut vec![0u8; 64 * 1024])
                    .await
                    .map(|()| s)
            })
        })
        .collect();
    let mut publisher = connect(port).await?;
    let one = command(&[b"PUBLISH", &channel, &payload]);
    let cpu_start = cpu_seconds(pid)?;
    let start = Instant::now();
    let mut sent = 0;
    let mut answered = 0;
    let mut buf = vec![0u8; 64 * 1024];
    let mut batch = Vec::with_capacity(one.len() * window);
    while answered < messages {
        if sent < messages && sent - answered < window {
            let n = (window - (sent - answered)).min(messages - sent);
            batch.clear();
            for _ in 0..n {
                batch.extend_from_slice(&one);
            }
            publisher
                .write_all(&batch)
                .await
                .map_err(|e| e.to_string())?;
            sent += n;
        }
        // Each reply is one `:N\r\n` line.
        let got = publisher
            .read(&mut buf)
            .await
            .map_err(|e| format!("read: {e}"))?;
        if got == 0 {
            return Err("publisher connection closed".into());
        }
        answered += buf[..got].iter().filter(|&&b| b == b'\n').count();
    }
    // The readers keep their connections until the count below.
    let mut done = Vec::with_capacity(readers.len());
    for r in readers {
        done.push(r.await.map_err(|e| e.to_string())??);
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds(pid)? - cpu_start;
    // Still subscribed: the readers, and the stalled ones not cut off.
    let left = numsub(&mut publisher, &channel).await?;
    let cut = (subscribers + stalled).saturating_sub(left);
    drop((idle, done));
    let delivered = (subscribers * messages) as f64;
    println!("{:.0} {:.3} {cut}", delivered / secs, cpu * 1e6 / delivered);
    Ok(())
}

/// PUBSUB NUMSUB of one channel.
async fn numsub(s: &mut TcpStream, channel: &[u8]) -> Result<usize> {
    s.write_all(&command(&[b"PUBSUB", b"NUMSUB", channel]))
        .await
        .map_err(|e| e.to_string())?;
    // `*2\r\n$len\r\nchannel\r\n:N\r\n`: read until the integer line ends.
    let mut reply = Vec::new();
    let mut buf = [0u8; 256];
    loop {
        let n = s.read(&mut buf).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("connection closed during PUBSUB NUMSUB".into());
        }
        reply.extend_from_slice(&buf[..n]);
        if let Some(at) = reply.iter().rposition(|&b| b == b':') {
            if let Some(end) = reply[at..].iter().position(|&b| b == b'\r') {
                let text = String::from_utf8_lossy(&reply[at + 1..at + end]).into_owned();
                return text
                    .parse()
                    .map_err(|_| format!("bad NUMSUB reply {text:?}"));
            }
        }
    }
}

async fn memory(args: &[String]) -> Result<()> {
    let port = opt(args, "--port", None)?;
    let pid = opt(args, "--pid", None)?;
    let clients = opt(args, "--clients", None)? as usize;
    let channels = opt(args, "--channels", None)? as usize;
    let mut conns = Vec::with_capacity(clients);
    for _ in 0..clients {
        conns.push(connect(port).await?);
    }
    // Let the connections settle before the first reading.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = rss_bytes(pid)?;
    for (i, c) in conns.iter_mut().enumerate() {
        let names: Vec<Vec<u8>> = (0..channels)
            .map(|j| format!("bench:mem:{i}:{j}").into_bytes())
            .collect();
        for (k, chunk) in names.chunks(1000).enumerate() {
            subscribe(c, chunk, k * 1000).await?;
        }
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = rss_bytes(pid)?;
    let total = (clients * channels) as f64;
    println!("{:.1}", after.saturating_sub(before) as f64 / total);
    Ok(())
}
