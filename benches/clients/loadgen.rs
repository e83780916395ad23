//! A load generator lighter than redis-benchmark, for `benches/lib.sh`'s
//! `measure` under `LOADGEN=light`. On a 2-core machine redis-benchmark is
//! often the bottleneck itself (hiredis builds an object for every element
//! of every reply); this client spends as little CPU per request as it can,
//! so that the server's share sets the rate.
//!
//! ```text
//! loadgen [-h HOST] [-p PORT] [-c CLIENTS] [-n REQUESTS] [-P PIPELINE]
//!         [-r KEYSPACELEN] [--threads N] [--timeout SECONDS] [--csv] COMMAND ARGS...
//!   defaults: -h 127.0.0.1 -p 6379 -c 50 -n 100000 -P 1, --threads 1, --timeout 30
//! ```
//! As redis-benchmark: with -r, each `__rand_int__` in the command becomes 12
//! zero-padded digits of its own random number in [0, KEYSPACELEN); each
//! connection sends PIPELINE requests at a time and the next batch once every
//! reply of the last has come; -n counts requests over all connections.
//! Prints redis-benchmark's `--csv` lines (a header, then `"COMMAND",rps,
//! avg, min, p50, p95, p99, max` latency in ms), whether or not `--csv` is
//! given. Latency is per batch, from its write to its last reply
//! (redis-benchmark's is to the batch's first reply, for every request in it).
//!
//! Cheap per request: each connection's batch is encoded once and only the
//! random digits are rewritten; replies are counted by [`Skipper`], which
//! walks RESP2 without building anything; one write and (mostly) one read per
//! connection per batch, through level-triggered epoll; one thread unless
//! `--threads` says otherwise.
//!
//! With `LOADGEN_SPREAD` set in the environment, each thread also prints on
//! stderr how evenly its connections were served: the fewest, median and
//! most replies a connection got.
//!
//! Exits non-zero, with the reason on stderr and no CSV, when any reply is an
//! error, a connection breaks or a reply is malformed, and when no reply has
//! come for `--timeout` seconds: a row must not look fast because it failed.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, String>;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = match Options::parse(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("loadgen: {e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    match run(&opts) {
        Ok(report) => {
            println!("\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"");
            println!("{report}");
        }
        Err(e) => {
            eprintln!("loadgen: {e}");
            std::process::exit(1);
        }
    }
}

const USAGE: &str = "usage: loadgen [-h HOST] [-p PORT] [-c CLIENTS] [-n REQUESTS] [-P PIPELINE] \
[-r KEYSPACELEN] [--threads N] [--timeout SECONDS] [--csv] COMMAND ARGS...";

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq)]
struct Options {
    host: String,
    port: u16,
    clients: usize,
    requests: u64,
    pipeline: usize,
    /// `-r`: the range of `__rand_int__`; `None` leaves it as written.
    keyspace: Option<u64>,
    threads: usize,
    /// No reply for this long ends the run with an error.
    timeout: Duration,
    command: Vec<String>,
}

impl Options {
    /// Parses redis-benchmark's options for what the benches use; the first
    /// word that is not an option starts the command.
    fn parse(args: &[String]) -> Result<Options> {
        let mut o = Options {
            host: "127.0.0.1".into(),
            port: 6379,
            clients: 50,
            requests: 100_000,
            pipeline: 1,
            keyspace: None,
            threads: 1,
            timeout: Duration::from_secs(30),
            command: Vec::new(),
        };
        let mut i = 0;
        while i < args.len() {
            let flag = args[i].as_str();
            if !flag.starts_with('-') {
                o.command = args[i..].to_vec();
                break;
            }
            if flag == "--csv" || flag == "-q" {
                i += 1;
                continue;
            }
            let value = args
                .get(i + 1)
                .ok_or_else(|| format!("{flag} takes a value"))?;
            match flag {
                "-h" => o.host = value.clone(),
                "-p" => o.port = number(flag, value)?,
                "-c" => o.clients = positive(flag, value)?,
                "-n" => o.requests = positive(flag, value)?,
                "-P" => o.pipeline = positive(flag, value)?,
                // redis-benchmark takes a negative range as 0.
                "-r" => o.keyspace = Some(number::<i64>(flag, value)?.max(0) as u64),
                "--threads" => o.threads = positive(flag, value)?,
                "--timeout" => o.timeout = Duration::from_secs(positive(flag, value)?),
                _ => return Err(format!("unknown option {flag}")),
            }
            i += 2;
        }
        if o.command.is_empty() {
            return Err("no command given".into());
        }
        Ok(o)
    }
}

fn number<T: std::str::FromStr>(flag: &str, value: &str) -> Result<T> {
    value
        .parse()
        .map_err(|_| format!("{flag} takes a number, not {value:?}"))
}

fn positive<T: std::str::FromStr + PartialOrd + Default>(flag: &str, value: &str) -> Result<T> {
    let v: T = number(flag, value)?;
    if v > T::default() {
        Ok(v)
    } else {
        Err(format!("{flag} takes a number above 0, not {value:?}"))
    }
}

/// The placeholder redis-benchmark replaces; as long as the 12 digits it
/// becomes, so a request's length never changes.
const RAND: &[u8] = b"__rand_int__";

/// A batch of PIPELINE copies of the command in RESP, and where each
/// `__rand_int__` in it starts.
#[derive(Clone)]
struct Batch {
    bytes: Vec<u8>,
    /// Placeholder offsets, ascending; empty without -r.
    slots: Vec<usize>,
    /// Bytes of one request.
    request_len: usize,
    /// Placeholders in one request.
    slots_per_request: usize,
}

impl Batch {
    fn new(command: &[String], pipeline: usize, randomize: bool) -> Batch {
        let mut one = format!("*{}\r\n", command.len()).into_bytes();
        for word in command {
            one.extend_from_slice(format!("${}\r\n", word.len()).as_bytes());
            one.extend_from_slice(word.as_bytes());
            one.extend_from_slice(b"\r\n");
        }
        let mut slots_one = Vec::new();
        if randomize {
            let mut at = 0;
            while let Some(found) = find(&one[at..], RAND) {
                slots_one.push(at + found);
                at += found + RAND.len();
            }
        }
        let mut bytes = Vec::with_capacity(one.len() * pipeline);
        let mut slots = Vec::with_capacity(slots_one.len() * pipeline);
        for i in 0..pipeline {
            slots.extend(slots_one.iter().map(|s| s + i * one.len()));
            bytes.extend_from_slice(&one);
        }
        Batch {
            request_len: one.len(),
            slots_per_request: slots_one.len(),
            bytes,
            slots,
        }
    }

    /// Writes fresh random digits into the first `requests` requests.
    fn randomize(&mut self, requests: usize, keyspace: u64, rng: &mut Rng) {
        for &slot in &self.slots[..requests * self.slots_per_request] {
            let mut r = rng.below(keyspace);
            // The last 12 digits, as redis-benchmark writes them.
            for d in self.bytes[slot..slot + 12].iter_mut().rev() {
                *d = b'0' + (r % 10) as u8;
                r /= 10;
            }
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// xorshift64*: enough randomness for keys, a few cycles a number.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        // splitmix64 of the seed, never 0.
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng((z ^ (z >> 31)) | 1)
    }

    /// A number in [0, n); 0 when n is 0 (redis-benchmark's `-r 0`).
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d);
        ((u128::from(x) * u128::from(n)) >> 64) as u64
    }
}

/// Nesting deeper than this is taken as a malformed reply (XREADGROUP's
/// deepest reply is 4 levels).
const MAX_DEPTH: usize = 32;

/// Where the skipper is inside a reply.
#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    /// At a type byte.
    Type,
    /// In a `$` or `*` header's number.
    Length {
        array: bool,
        negative: bool,
        digits: u32,
        value: u64,
    },
    /// In a simple string, an error or an integer, before its `\r`.
    Line { error: bool },
    /// At the `\n` that ends a line; `next` says what the line began.
    Lf { next: Next },
    /// In a bulk string's payload, `left` bytes to go.
    Payload { left: u64 },
    /// At the `\r` after a bulk string's payload.
    PayloadCr,
}

/// What follows a line's `\n`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Next {
    /// The element is complete.
    Done,
    /// A bulk string's payload of this many bytes.
    Payload(u64),
    /// An array of this many elements.
    Array(u64),
}

/// Counts RESP2 replies without storing them: bulk strings, arrays (nested,
/// empty, nil), integers, simple strings, errors and nil bulk strings. Fed
/// any split of the byte stream, in order, it resumes where the last piece
/// ended; it allocates nothing.
#[derive(Clone, Debug)]
struct Skipper {
    state: State,
    /// Elements still to come in each open array, outermost first.
    open: [u64; MAX_DEPTH],
    depth: usize,
    /// Error replies seen (top level or inside an array).
    errors: u64,
    /// The first error's text, cut at `first_error.len()` bytes.
    first_error: [u8; 120],
    first_error_len: usize,
}

impl Skipper {
    fn new() -> Skipper {
        Skipper {
            state: State::Type,
            open: [0; MAX_DEPTH],
            depth: 0,
            errors: 0,
            first_error: [0; 120],
            first_error_len: 0,
        }
    }

    /// The first error reply's text, lossily.
    fn first_error(&self) -> String {
        String::from_utf8_lossy(&self.first_error[..self.first_error_len]).into_owned()
    }

    /// Reads `data`, the next bytes of the stream, and returns how many
    /// top-level replies it completed.
    fn feed(&mut self, data: &[u8]) -> Result<u64> {
        let mut done = 0;
        let mut i = 0;
        while i < data.len() {
            match self.state {
                State::Type => {
                    self.state = match data[i] {
                        b'$' | b'*' => State::Length {
                            array: data[i] == b'*',
                            negative: false,
                            digits: 0,
                            value: 0,
                        },
                        b'+' | b':' => State::Line { error: false },
                        b'-' => {
                            self.errors += 1;
                            State::Line { error: true }
                        }
                        b => return Err(format!("malformed reply: type byte {b:#04x}")),
                    };
                    i += 1;
                }
                State::Length {
                    array,
                    negative,
                    digits,
                    value,
                } => {
                    let b = data[i];
                    i += 1;
                    self.state = match b {
                        b'-' if digits == 0 && !negative => State::Length {
                            array,
                            negative: true,
                            digits,
                            value,
                        },
                        b'0'..=b'9' if digits < 18 => State::Length {
                            array,
                            negative,
                            digits: digits + 1,
                            value: value * 10 + u64::from(b - b'0'),
                        },
                        b'\r' if digits > 0 => {
                            let next = match (negative, value, array) {
                                // Nil bulk string, nil array, empty array.
                                (true, 1, _) | (false, 0, true) => Next::Done,
                                (true, _, _) => {
                                    return Err(format!("malformed reply: length -{value}"))
                                }
                                (false, n, true) => Next::Array(n),
                                (false, n, false) => Next::Payload(n),
                            };
                            State::Lf { next }
                        }
                        _ => return Err(format!("malformed reply: byte {b:#04x} in a length")),
                    };
                }
                State::Line { error } => {
                    let rest = &data[i..];
                    let end = rest.iter().position(|&b| b == b'\r');
                    let text = &rest[..end.unwrap_or(rest.len())];
                    if error && self.errors == 1 {
                        let room = self.first_error.len() - self.first_error_len;
                        let take = text.len().min(room);
                        self.first_error[self.first_error_len..self.first_error_len + take]
                            .copy_from_slice(&text[..take]);
                        self.first_error_len += take;
                    }
                    i += text.len();
                    if end.is_some() {
                        i += 1;
                        self.state = State::Lf { next: Next::Done };
                    }
                }
                State::Lf { next } => {
                    if data[i] != b'\n' {
                        return Err(format!("malformed reply: {:#04x} after \\r", data[i]));
                    }
                    i += 1;
                    match next {
                        Next::Done => {
                            self.state = State::Type;
                            done += self.element_done();
                        }
                        Next::Payload(n) => self.state = State::Payload { left: n },
                        Next::Array(n) => {
                            if self.depth == MAX_DEPTH {
                                return Err(format!("reply nested deeper than {MAX_DEPTH}"));
                            }
                            self.open[self.depth] = n;
                            self.depth += 1;
                            self.state = State::Type;
                        }
                    }
                }
                State::Payload { left } => {
                    let take = left.min((data.len() - i) as u64);
                    i += take as usize;
                    self.state = if take == left {
                        State::PayloadCr
                    } else {
                        State::Payload { left: left - take }
                    };
                }
                State::PayloadCr => {
                    if data[i] != b'\r' {
                        return Err("malformed reply: a bulk string longer than its length".into());
                    }
                    i += 1;
                    self.state = State::Lf { next: Next::Done };
                }
            }
        }
        Ok(done)
    }

    /// Closes an element: counts a reply at the top level, or takes one
    /// from its array (closing the array, and so its parent's element, when
    /// it was the last). Returns the replies completed (0 or 1).
    fn element_done(&mut self) -> u64 {
        while self.depth > 0 {
            let left = &mut self.open[self.depth - 1];
            *left -= 1;
            if *left > 0 {
                return 0;
            }
            self.depth -= 1;
        }
        1
    }
}

/// Latencies in microseconds: exact below 64, then 32 buckets per power of
/// two (3% wide); one record per batch, weighted by its requests.
struct Histogram {
    counts: Vec<u64>,
    total: u64,
    sum_us: f64,
    min_us: u64,
    max_us: u64,
}

impl Histogram {
    const BUCKETS: usize = 64 + 58 * 32;

    fn new() -> Histogram {
        Histogram {
            counts: vec![0; Self::BUCKETS],
            total: 0,
            sum_us: 0.0,
            min_us: u64::MAX,
            max_us: 0,
        }
    }

    fn bucket(us: u64) -> usize {
        if us < 64 {
            return us as usize;
        }
        let e = 63 - us.leading_zeros() as usize;
        64 + (e - 6) * 32 + ((us >> (e - 5)) as usize - 32)
    }

    /// The middle of bucket `i`.
    fn value(i: usize) -> u64 {
        if i < 64 {
            return i as u64;
        }
        let e = (i - 64) / 32 + 6;
        let m = ((i - 64) % 32 + 32) as u64;
        (m << (e - 5)) + (1 << (e - 5)) / 2
    }

    fn record(&mut self, us: u64, weight: u64) {
        self.counts[Self::bucket(us)] += weight;
        self.total += weight;
        self.sum_us += us as f64 * weight as f64;
        self.min_us = self.min_us.min(us);
        self.max_us = self.max_us.max(us);
    }

    fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
        self.sum_us += other.sum_us;
        self.min_us = self.min_us.min(other.min_us);
        self.max_us = self.max_us.max(other.max_us);
    }

    /// The latency below which `q` of the requests fall, within the
    /// recorded minimum and maximum.
    fn percentile(&self, q: f64) -> u64 {
        let rank = ((q * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::value(i).clamp(self.min_us, self.max_us);
            }
        }
        self.max_us
    }
}

/// What every connection of every thread shares.
struct Shared {
    opts: Options,
    batch: Batch,
    /// Requests handed out so far (may overshoot -n by a batch a
    /// connection).
    issued: AtomicU64,
    /// Set by a thread that failed, so the others stop.
    abort: AtomicBool,
}

/// One connection's state between events.
struct Conn {
    stream: TcpStream,
    batch: Batch,
    rng: Rng,
    skipper: Skipper,
    /// Bytes of the current batch, and how many are written.
    out_len: usize,
    written: usize,
    /// Replies the current batch waits for, and how many have come.
    expected: u64,
    received: u64,
    started: Instant,
    /// Replies of completed batches.
    answered: u64,
    /// Waiting for writability (a partial write).
    want_write: bool,
    /// No batch left to send (-n reached).
    finished: bool,
}

impl Conn {
    /// Takes the next batch's requests; false when -n is reached.
    fn next_batch(&mut self, shared: &Shared, now: Instant) -> bool {
        let p = shared.opts.pipeline as u64;
        let first = shared.issued.fetch_add(p, Ordering::Relaxed);
        let n = shared.opts.requests;
        if first >= n {
            self.finished = true;
            return false;
        }
        let k = p.min(n - first) as usize;
        if let Some(range) = shared.opts.keyspace {
            self.batch.randomize(k, range, &mut self.rng);
        }
        self.out_len = k * self.batch.request_len;
        self.written = 0;
        self.expected = k as u64;
        self.received = 0;
        self.started = now;
        true
    }

    /// Writes what is left of the batch; true once all of it is written.
    fn write(&mut self) -> Result<bool> {
        while self.written < self.out_len {
            match (&self.stream).write(&self.batch.bytes[self.written..self.out_len]) {
                Ok(0) => return Err("connection closed while writing".into()),
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("write: {e}")),
            }
        }
        Ok(true)
    }

    /// Counts the replies in `data`; true when the batch is complete.
    fn replies(&mut self, data: &[u8]) -> Result<bool> {
        self.received += self.skipper.feed(data)?;
        if self.received > self.expected {
            return Err("more replies than requests".into());
        }
        let complete = self.received == self.expected;
        if complete {
            self.answered += self.expected;
        }
        Ok(complete)
    }
}

/// What one thread measured.
struct Totals {
    histogram: Histogram,
    replies: u64,
    errors: u64,
    first_error: String,
}

fn run(opts: &Options) -> Result<String> {
    let addr = (opts.host.as_str(), opts.port)
        .to_socket_addrs()
        .map_err(|e| format!("{}:{}: {e}", opts.host, opts.port))?
        .next()
        .ok_or_else(|| format!("{}:{}: no address", opts.host, opts.port))?;
    let shared = Shared {
        opts: opts.clone(),
        batch: Batch::new(&opts.command, opts.pipeline, opts.keyspace.is_some()),
        issued: AtomicU64::new(0),
        abort: AtomicBool::new(false),
    };
    let threads = opts.threads.min(opts.clients);
    let mut groups: Vec<Vec<Conn>> = (0..threads).map(|_| Vec::new()).collect();
    for i in 0..opts.clients {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .map_err(|e| format!("connect to {addr}: {e}"))?;
        stream
            .set_nodelay(true)
            .and_then(|()| stream.set_nonblocking(true))
            .map_err(|e| format!("socket options: {e}"))?;
        groups[i % threads].push(Conn {
            stream,
            batch: shared.batch.clone(),
            rng: Rng::new(i as u64),
            skipper: Skipper::new(),
            out_len: 0,
            written: 0,
            expected: 0,
            received: 0,
            started: Instant::now(),
            answered: 0,
            want_write: false,
            finished: false,
        });
    }

    let start = Instant::now();
    let results: Vec<Result<Totals>> = std::thread::scope(|s| {
        let handles: Vec<_> = groups
            .into_iter()
            .map(|conns| {
                let shared = &shared;
                s.spawn(move || {
                    let r = drive(conns, shared);
                    if r.is_err() {
                        shared.abort.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a thread panicked".into())))
            .collect()
    });
    let elapsed = start.elapsed().as_secs_f64();

    let mut all = Totals {
        histogram: Histogram::new(),
        replies: 0,
        errors: 0,
        first_error: String::new(),
    };
    let mut failures = Vec::new();
    for r in results {
        match r {
            Ok(t) => {
                all.histogram.merge(&t.histogram);
                all.replies += t.replies;
                all.errors += t.errors;
                if all.first_error.is_empty() {
                    all.first_error = t.first_error;
                }
            }
            Err(e) if e != ABORTED => failures.push(e),
            Err(_) => {}
        }
    }
    if !failures.is_empty() {
        return Err(failures.join("; "));
    }
    if all.errors > 0 {
        return Err(format!(
            "{} of {} replies were errors (first: {})",
            all.errors, all.replies, all.first_error
        ));
    }
    if all.replies != opts.requests {
        return Err(format!(
            "{} replies to {} requests",
            all.replies, opts.requests
        ));
    }
    let h = &all.histogram;
    let ms = |us: u64| us as f64 / 1000.0;
    Ok(format!(
        "\"{}\",\"{:.2}\",\"{:.3}\",\"{:.3}\",\"{:.3}\",\"{:.3}\",\"{:.3}\",\"{:.3}\"",
        opts.command.join(" "),
        opts.requests as f64 / elapsed,
        h.sum_us / h.total as f64 / 1000.0,
        ms(h.min_us),
        ms(h.percentile(0.50)),
        ms(h.percentile(0.95)),
        ms(h.percentile(0.99)),
        ms(h.max_us),
    ))
}

/// A thread's error when another thread failed first.
const ABORTED: &str = "aborted";

/// Runs one thread's connections, through one epoll instance, until
/// they have their share of the requests answered.
fn drive(mut conns: Vec<Conn>, shared: &Shared) -> Result<Totals> {
    use std::os::fd::AsRawFd;
    let ep = epoll::Epoll::new().map_err(|e| format!("epoll: {e}"))?;
    let mut histogram = Histogram::new();
    let mut buf = vec![0u8; 1 << 17];
    let mut active = 0;
    let now = Instant::now();
    for (token, c) in conns.iter_mut().enumerate() {
        // A connection with no batch (-n below -c times -P) stays idle.
        if !c.next_batch(shared, now) {
            continue;
        }
        active += 1;
        let fd = c.stream.as_raw_fd();
        ep.add(fd, token as u64, libc::EPOLLIN as u32)
            .map_err(|e| format!("epoll_ctl: {e}"))?;
        if !c.write()? {
            c.want_write = true;
            ep.modify(fd, token as u64, (libc::EPOLLIN | libc::EPOLLOUT) as u32)
                .map_err(|e| format!("epoll_ctl: {e}"))?;
        }
    }
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; conns.len().max(1)];
    let mut last_progress = Instant::now();
    while active > 0 {
        if shared.abort.load(Ordering::Relaxed) {
            return Err(ABORTED.into());
        }
        if last_progress.elapsed() >= shared.opts.timeout {
            return Err(stalled(&conns, shared));
        }
        let ready = ep
            .wait(&mut events, 1000)
            .map_err(|e| format!("epoll_wait: {e}"))?;
        for ev in &events[..ready] {
            let token = ev.u64 as usize;
            let flags = ev.events;
            let c = &mut conns[token];
            let fd = c.stream.as_raw_fd();
            if c.want_write && flags & libc::EPOLLOUT as u32 != 0 && c.write()? {
                c.want_write = false;
                ep.modify(fd, token as u64, libc::EPOLLIN as u32)
                    .map_err(|e| format!("epoll_ctl: {e}"))?;
            }
            // Readable, or closed or failed (a read says which).
            if flags & !(libc::EPOLLOUT as u32) == 0 {
                continue;
            }
            let mut complete = false;
            loop {
                match (&c.stream).read(&mut buf) {
                    Ok(0) => return Err(closed(c, shared)),
                    Ok(n) => {
                        complete = c.replies(&buf[..n])?;
                        if n < buf.len() || complete {
                            break;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(format!("read: {e}")),
                }
            }
            if !complete {
                continue;
            }
            let now = Instant::now();
            last_progress = now;
            histogram.record(now.duration_since(c.started).as_micros() as u64, c.expected);
            if !c.next_batch(shared, now) {
                // Done: out of the set, so that a close by the server now
                // does not wake this loop.
                ep.delete(fd).map_err(|e| format!("epoll_ctl: {e}"))?;
                active -= 1;
            } else if !c.write()? {
                c.want_write = true;
                ep.modify(fd, token as u64, (libc::EPOLLIN | libc::EPOLLOUT) as u32)
                    .map_err(|e| format!("epoll_ctl: {e}"))?;
            }
        }
    }
    Ok(totals(histogram, &conns))
}

fn totals(histogram: Histogram, conns: &[Conn]) -> Totals {
    let mut t = Totals {
        histogram,
        replies: 0,
        errors: 0,
        first_error: String::new(),
    };
    // LOADGEN_SPREAD set: how evenly this thread's connections were
    // served (replies per connection: fewest, median, most), on stderr.
    if std::env::var_os("LOADGEN_SPREAD").is_some() {
        let mut each: Vec<u64> = conns.iter().map(|c| c.answered).collect();
        each.sort_unstable();
        if let (Some(lo), Some(hi)) = (each.first(), each.last()) {
            eprintln!(
                "replies per connection: fewest {lo}, median {}, most {hi}",
                each[each.len() / 2]
            );
        }
    }
    for c in conns {
        t.replies += c.answered;
        t.errors += c.skipper.errors;
        if t.first_error.is_empty() && c.skipper.errors > 0 {
            t.first_error = c.skipper.first_error();
        }
    }
    t
}

fn closed(c: &Conn, shared: &Shared) -> String {
    format!(
        "the server closed a connection after {} of a batch's {} replies ({} requests issued of {})",
        c.received,
        c.expected,
        shared.issued.load(Ordering::Relaxed).min(shared.opts.requests),
        shared.opts.requests
    )
}

fn stalled(conns: &[Conn], shared: &Shared) -> String {
    let waiting = conns.iter().filter(|c| !c.finished).count();
    format!(
        "no reply for {} s from {}:{}; {waiting} connections still wait",
        shared.opts.timeout.as_secs(),
        shared.opts.host,
        shared.opts.port
    )
}

/// The thin, safe face of Linux's epoll this client needs.
mod epoll {
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

    pub struct Epoll(OwnedFd);

    impl Epoll {
        pub fn new() -> io::Result<Epoll> {
            // SAFETY: epoll_create1 takes no pointers; a non-negative result
            // is a new descriptor that nothing else owns.
            let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `fd` is open and owned by no one else (see above).
            Ok(Epoll(unsafe { OwnedFd::from_raw_fd(fd) }))
        }

        fn ctl(&self, op: libc::c_int, fd: RawFd, token: u64, events: u32) -> io::Result<()> {
            let mut ev = libc::epoll_event { events, u64: token };
            // SAFETY: `ev` is a valid epoll_event that lives across the
            // call; the kernel only reads it. A bad `fd` is an error return.
            if unsafe { libc::epoll_ctl(self.0.as_raw_fd(), op, fd, &mut ev) } < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        }

        pub fn add(&self, fd: RawFd, token: u64, events: u32) -> io::Result<()> {
            self.ctl(libc::EPOLL_CTL_ADD, fd, token, events)
        }

        pub fn modify(&self, fd: RawFd, token: u64, events: u32) -> io::Result<()> {
            self.ctl(libc::EPOLL_CTL_MOD, fd, token, events)
        }

        pub fn delete(&self, fd: RawFd) -> io::Result<()> {
            self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
        }

        /// Waits up to `timeout_ms` for events; returns how many of
        /// `events`' first entries were filled (0 on timeout or a signal).
        pub fn wait(&self, events: &mut [libc::epoll_event], timeout_ms: i32) -> io::Result<usize> {
            let max = events.len().min(i32::MAX as usize) as i32;
            // SAFETY: the kernel writes at most `max` entries, which is no
            // more than `events` holds, and `events` is borrowed mutably
            // for the call.
            let n = unsafe {
                libc::epoll_wait(self.0.as_raw_fd(), events.as_mut_ptr(), max, timeout_ms)
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    return Ok(0);
                }
                return Err(e);
            }
            Ok(n as usize)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every RESP2 reply shape, 14 top-level replies, 2 of them errors (one
    /// inside an array); a bulk string holds `\r\n` and `*` in its payload.
    const STREAM: &[u8] = b"+OK\r\n\
-ERR bad thing\r\n\
:123\r\n\
:-5\r\n\
$5\r\nhello\r\n\
$0\r\n\r\n\
$-1\r\n\
*-1\r\n\
*0\r\n\
*2\r\n$1\r\na\r\n:1\r\n\
$6\r\n\r\n*1\r\n\r\n\
*3\r\n*2\r\n$1\r\nx\r\n*1\r\n+y\r\n*0\r\n$-1\r\n\
*1\r\n*2\r\n$3\r\nlog\r\n*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$4\r\nuser\r\n$2\r\nu1\r\n\
*2\r\n-WRONGTYPE inner\r\n+QUEUED\r\n";
    const REPLIES: u64 = 14;

    fn count(pieces: &[&[u8]]) -> (u64, Skipper) {
        let mut s = Skipper::new();
        let mut n = 0;
        for p in pieces {
            n += s.feed(p).expect("well-formed");
        }
        (n, s)
    }

    #[test]
    fn counts_every_reply_type_whole() {
        let (n, s) = count(&[STREAM]);
        assert_eq!(n, REPLIES);
        assert_eq!(s.errors, 2);
        assert_eq!(s.first_error(), "ERR bad thing");
        assert_eq!(s.state, State::Type);
        assert_eq!(s.depth, 0);
    }

    #[test]
    fn resumes_at_every_byte_boundary() {
        for i in 0..=STREAM.len() {
            let (n, s) = count(&[&STREAM[..i], &STREAM[i..]]);
            assert_eq!((n, s.errors), (REPLIES, 2), "split at {i}");
            assert_eq!(s.first_error(), "ERR bad thing", "split at {i}");
        }
        for i in 0..=STREAM.len() {
            for j in i..=STREAM.len() {
                let (n, _) = count(&[&STREAM[..i], &STREAM[i..j], &STREAM[j..]]);
                assert_eq!(n, REPLIES, "splits at {i} and {j}");
            }
        }
        let bytes: Vec<&[u8]> = STREAM.chunks(1).collect();
        assert_eq!(count(&bytes).0, REPLIES);
    }

    #[test]
    fn counts_a_reply_only_when_it_is_complete() {
        // An array of three, fed up to each of its elements' ends.
        let reply = b"*3\r\n$1\r\na\r\n*1\r\n:7\r\n+z\r\n";
        let mut s = Skipper::new();
        assert_eq!(s.feed(&reply[..reply.len() - 1]), Ok(0));
        assert_eq!(s.feed(&reply[reply.len() - 1..]), Ok(1));
        // Nested arrays close their parents' elements in one step.
        let mut s = Skipper::new();
        assert_eq!(s.feed(b"*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n:2\r\n"), Ok(2));
    }

    #[test]
    fn keeps_the_first_error_only_and_cuts_it() {
        let long = format!("-ERR {}\r\n-SECOND\r\n", "x".repeat(300));
        let (n, s) = count(&[long.as_bytes()]);
        assert_eq!((n, s.errors), (2, 2));
        assert_eq!(s.first_error().len(), 120);
        assert!(s.first_error().starts_with("ERR xxx"));
    }

    #[test]
    fn refuses_malformed_replies() {
        let deep = "*1\r\n".repeat(MAX_DEPTH + 1);
        for bad in [
            &b"?what\r\n"[..],
            b"$abc\r\n",
            b"$\r\n",
            b"$3\r\nabcd\r\n",
            b"+OK\rX",
            b"$-2\r\n",
            b"$--1\r\n",
            b"*1-\r\n",
            b"$1234567890123456789\r\n",
            deep.as_bytes(),
        ] {
            assert!(
                Skipper::new().feed(bad).is_err(),
                "{:?} was taken",
                String::from_utf8_lossy(bad)
            );
        }
        // The deepest allowed nesting is fine.
        let ok = format!("{}:1\r\n", "*1\r\n".repeat(MAX_DEPTH));
        assert_eq!(Skipper::new().feed(ok.as_bytes()), Ok(1));
    }

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_redis_benchmarks_options() {
        let o = Options::parse(&args("GET k")).expect("parses");
        assert_eq!(
            (o.host.as_str(), o.port, o.clients, o.requests, o.pipeline),
            ("127.0.0.1", 6379, 50, 100_000, 1)
        );
        assert_eq!(
            (o.keyspace, o.threads, o.timeout),
            (None, 1, Duration::from_secs(30))
        );
        assert_eq!(o.command, ["GET", "k"]);

        let o = Options::parse(&args(
            "-h ::1 -p 7000 -n 200000 -c 10 -r 100000 -P 16 --threads 2 --timeout 5 --csv \
             HSET profile:__rand_int__ -x --csv",
        ))
        .expect("parses");
        assert_eq!(
            (o.host.as_str(), o.port, o.clients, o.requests, o.pipeline),
            ("::1", 7000, 10, 200_000, 16)
        );
        assert_eq!(
            (o.keyspace, o.threads, o.timeout),
            (Some(100_000), 2, Duration::from_secs(5))
        );
        // Options end at the command: its words are kept as they are.
        assert_eq!(o.command, ["HSET", "profile:__rand_int__", "-x", "--csv"]);

        // redis-benchmark takes a negative range as 0.
        assert_eq!(
            Options::parse(&args("-r -3 GET k")).map(|o| o.keyspace),
            Ok(Some(0))
        );
        assert_eq!(
            Options::parse(&args("-r 0 GET k")).map(|o| o.keyspace),
            Ok(Some(0))
        );
    }

    #[test]
    fn refuses_bad_options() {
        for bad in [
            "",
            "-n 10",
            "-n",
            "-n ten GET k",
            "-n 0 GET k",
            "-c 0 GET k",
            "-P 0 GET k",
            "--threads 0 GET k",
            "--timeout 0 GET k",
            "-p 70000 GET k",
            "-n -5 GET k",
            "-t get",
            "-d 100 GET k",
        ] {
            assert!(Options::parse(&args(bad)).is_err(), "{bad:?} was taken");
        }
    }

    #[test]
    fn encodes_a_batch_and_patches_only_the_digits() {
        let cmd = args("SET key:__rand_int__ __rand_int__");
        let b = Batch::new(&cmd, 2, true);
        let one = b"*3\r\n$3\r\nSET\r\n$16\r\nkey:__rand_int__\r\n$12\r\n__rand_int__\r\n";
        assert_eq!(b.bytes, [&one[..], &one[..]].concat());
        assert_eq!(b.request_len, one.len());
        assert_eq!(b.slots_per_request, 2);
        assert_eq!(b.slots, [22, 41, 22 + one.len(), 41 + one.len()]);

        // Only the first request's digits change when one is sent.
        let mut p = b.clone();
        let mut rng = Rng::new(1);
        p.randomize(1, 1000, &mut rng);
        assert_eq!(p.bytes[one.len()..], one[..]);
        let text = String::from_utf8_lossy(&p.bytes[..one.len()]).into_owned();
        let key = &text[22..34];
        let value = &text[41..53];
        for digits in [key, value] {
            assert!(digits.bytes().all(|d| d.is_ascii_digit()), "{text:?}");
            assert!(digits.parse::<u64>().expect("digits") < 1000, "{text:?}");
            assert!(digits.starts_with("000000000"), "{text:?}");
        }
        // The RESP around them is untouched.
        let mut back = p.bytes[..one.len()].to_vec();
        back[22..34].copy_from_slice(RAND);
        back[41..53].copy_from_slice(RAND);
        assert_eq!(back, one);

        // -r 0: every placeholder becomes twelve zeros.
        let mut z = b.clone();
        z.randomize(2, 0, &mut rng);
        assert_eq!(
            z.bytes
                .windows(12)
                .filter(|w| *w == b"000000000000")
                .count(),
            4
        );

        // Without -r the placeholder goes as written.
        let plain = Batch::new(&cmd, 3, false);
        assert!(plain.slots.is_empty());
        assert_eq!(plain.bytes, [&one[..], &one[..], &one[..]].concat());
    }

    #[test]
    fn random_numbers_fall_in_range_and_spread() {
        let mut rng = Rng::new(7);
        let mut seen = [false; 10];
        for _ in 0..10_000 {
            let v = rng.below(10);
            assert!(v < 10);
            seen[v as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(rng.below(1), 0);
        assert_eq!(rng.below(0), 0);
        assert!((0..1000).all(|_| rng.below(1_000_000_000_000) < 1_000_000_000_000));
    }

    #[test]
    fn histogram_buckets_round_trip_and_rank() {
        for i in 0..Histogram::BUCKETS {
            assert_eq!(Histogram::bucket(Histogram::value(i)), i, "bucket {i}");
        }
        let mut last = 0;
        for us in (0..100_000u64).chain([u64::MAX / 2, u64::MAX]) {
            let b = Histogram::bucket(us);
            assert!(b >= last && b < Histogram::BUCKETS);
            last = b;
            // Within 3% of the value it stands for.
            let v = Histogram::value(b) as f64;
            assert!(
                (v - us as f64).abs() <= us as f64 / 32.0 + 0.5,
                "{us} -> {v}"
            );
        }

        let mut h = Histogram::new();
        for us in 1..=100 {
            h.record(us, 1);
        }
        h.record(1000, 100);
        assert_eq!((h.total, h.min_us, h.max_us), (200, 1, 1000));
        assert_eq!(h.percentile(0.25), 50);
        assert!((h.percentile(0.50) as i64 - 100).abs() <= 2);
        assert!((h.percentile(0.99) as i64 - 1000).abs() <= 16);
        assert!((h.sum_us / h.total as f64 - 525.25).abs() < 1e-9);
        let mut m = Histogram::new();
        m.merge(&h);
        assert_eq!((m.total, m.percentile(0.25), m.max_us), (200, 50, 1000));
    }

    /// What the fake server does with a connection's requests.
    #[derive(Clone, Copy)]
    enum Fake {
        /// Sends the canned reply once per request.
        Answer,
        /// Closes the connection once requests come.
        Close,
        /// Reads and never answers.
        Silent,
    }

    /// A server on a free loopback port that takes `clients` connections,
    /// counts the requests (RESP arrays, by a [`Skipper`]) and treats them
    /// as `fake` says; the handle ends once every connection has closed.
    fn fake_server(
        clients: usize,
        reply: &'static [u8],
        fake: Fake,
    ) -> (u16, std::sync::Arc<AtomicU64>, std::thread::JoinHandle<()>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        let count = std::sync::Arc::new(AtomicU64::new(0));
        let counted = std::sync::Arc::clone(&count);
        let handle = std::thread::spawn(move || {
            let conns: Vec<_> = (0..clients)
                .map(|_| {
                    let (mut s, _) = listener.accept().expect("accept");
                    let counted = std::sync::Arc::clone(&counted);
                    std::thread::spawn(move || {
                        let mut requests = Skipper::new();
                        let mut buf = vec![0u8; 4096];
                        let mut out = Vec::new();
                        while let Ok(n @ 1..) = s.read(&mut buf) {
                            let k = requests.feed(&buf[..n]).expect("requests are RESP");
                            counted.fetch_add(k, Ordering::Relaxed);
                            match fake {
                                Fake::Answer => {
                                    out.clear();
                                    for _ in 0..k {
                                        out.extend_from_slice(reply);
                                    }
                                    if s.write_all(&out).is_err() {
                                        return;
                                    }
                                }
                                Fake::Close => return,
                                Fake::Silent => {}
                            }
                        }
                    })
                })
                .collect();
            for c in conns {
                c.join().expect("connection thread");
            }
        });
        (port, count, handle)
    }

    fn options(port: u16, line: &str) -> Options {
        let mut o = Options::parse(&args(line)).expect("parses");
        o.port = port;
        o.timeout = Duration::from_secs(1);
        o
    }

    #[test]
    fn sends_exactly_n_requests_and_counts_big_replies() {
        // 1,000-element replies: a batch's replies take many reads.
        let reply = format!("*1000\r\n{}", "$5\r\nhello\r\n".repeat(1000));
        let reply: &'static [u8] = reply.leak().as_bytes();
        for (threads, line) in [
            (1, "-c 3 -n 1001 -P 16 LRANGE l 0 999"),
            (2, "-c 5 -n 7 -P 4 LRANGE l 0 999"),
        ] {
            let mut o = options(0, line);
            let (port, count, server) = fake_server(o.clients, reply, Fake::Answer);
            o.port = port;
            o.threads = threads;
            let csv = run(&o).expect("runs");
            server.join().expect("server");
            assert_eq!(count.load(Ordering::Relaxed), o.requests, "{line}");
            assert!(csv.starts_with("\"LRANGE l 0 999\",\""), "{csv}");
            assert_eq!(csv.split(',').count(), 8, "{csv}");
        }
    }

    #[test]
    fn fails_on_error_replies() {
        let (port, _, server) = fake_server(2, b"-ERR nope\r\n", Fake::Answer);
        let e = run(&options(port, "-c 2 -n 10 -P 3 GET k")).expect_err("errors fail the run");
        server.join().expect("server");
        assert_eq!(e, "10 of 10 replies were errors (first: ERR nope)");
    }

    #[test]
    fn fails_when_a_connection_closes() {
        let (port, _, server) = fake_server(2, b"", Fake::Close);
        let e = run(&options(port, "-c 2 -n 10 GET k")).expect_err("a close fails the run");
        server.join().expect("server");
        // A close after the requests were read, or a reset.
        assert!(
            e.contains("closed a connection") || e.contains("reset"),
            "{e}"
        );
    }

    #[test]
    fn gives_up_when_no_reply_comes() {
        let (port, _, server) = fake_server(2, b"", Fake::Silent);
        let t = Instant::now();
        let e = run(&options(port, "-c 2 -n 10 GET k")).expect_err("a stall fails the run");
        server.join().expect("server");
        assert!(e.starts_with("no reply for 1 s from 127.0.0.1:"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(5));
    }
}
