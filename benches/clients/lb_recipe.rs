//! The client side of `benches/lb_benchmark.sh` for the two leaderboard
//! reads that take the Redis recipe more than one round trip: the window
//! around a player and the friends board. Each mode is timed end to end,
//! client work included, as an application sees it.
//!
//! ```text
//! lb_recipe MODE --port P --members M --requests N --conns C --pipeline D
//!   around-recipe   ZREVRANK board m, then ZREVRANGE board a b WITHSCORES
//!                   with the 21-entry window shifted at the ends
//!   around-lb       LB.AROUND lb m 21
//!   friends-recipe  SMEMBERS friends:me, a pipeline of one ZSCORE per
//!                   friend (and me), a sort by score in the client
//!   friends-lb      LB.FRIENDS lb friends:me INCLUDE m:me
//! ```
//! Members are `m:<12 digits>` below M; D independent queries are in
//! flight per connection (for the recipe: D first steps pipelined, then D
//! second steps). Prints `queries_per_second`.

use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::net::TcpStream;
use std::time::Instant;

use rand::Rng;

type Result<T> = std::result::Result<T, String>;

/// A parsed RESP2 reply, as much of it as these modes read.
enum Reply {
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
    Status,
}

struct Conn {
    rd: BufReader<TcpStream>,
    wr: BufWriter<TcpStream>,
}

impl Conn {
    fn open(port: u16) -> Result<Conn> {
        let s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
        s.set_nodelay(true).map_err(|e| e.to_string())?;
        let r = s.try_clone().map_err(|e| e.to_string())?;
        Ok(Conn {
            rd: BufReader::with_capacity(1 << 16, r),
            wr: BufWriter::with_capacity(1 << 16, s),
        })
    }

    fn send(&mut self, args: &[&[u8]]) -> Result<()> {
        let w = &mut self.wr;
        let io = |e: std::io::Error| e.to_string();
        write!(w, "*{}\r\n", args.len()).map_err(io)?;
        for a in args {
            write!(w, "${}\r\n", a.len()).map_err(io)?;
            w.write_all(a).map_err(io)?;
            w.write_all(b"\r\n").map_err(io)?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.wr.flush().map_err(|e| e.to_string())
    }

    fn line(&mut self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(32);
        self.rd
            .read_until(b'\n', &mut out)
            .map_err(|e| e.to_string())?;
        if out.pop() != Some(b'\n') {
            return Err("connection closed".into());
        }
        out.pop();
        Ok(out)
    }

    fn read(&mut self) -> Result<Reply> {
        let line = self.line()?;
        let (kind, rest) = line.split_first().ok_or("empty reply line")?;
        let num = || -> Result<i64> {
            std::str::from_utf8(rest)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| "bad number".to_string())
        };
        match kind {
            b'+' => Ok(Reply::Status),
            b'-' => Err(format!("server error: {}", String::from_utf8_lossy(rest))),
            b':' => Ok(Reply::Int(num()?)),
            b'$' => {
                let n = num()?;
                if n < 0 {
                    return Ok(Reply::Bulk(None));
                }
                let mut v = vec![0u8; n as usize + 2];
                self.rd.read_exact(&mut v).map_err(|e| e.to_string())?;
                v.truncate(n as usize);
                Ok(Reply::Bulk(Some(v)))
            }
            b'*' => {
                let n = num()?;
                let mut items = Vec::with_capacity(n.max(0) as usize);
                for _ in 0..n.max(0) {
                    items.push(self.read()?);
                }
                Ok(Reply::Array(items))
            }
            _ => Err(format!("unexpected reply type {}", *kind as char)),
        }
    }
}

fn member(id: u64) -> Vec<u8> {
    format!("m:{id:012}").into_bytes()
}

/// One batch of `depth` queries of `mode`; returns the entries seen (so
/// that the work is not optimised away and a wrong reply is noticed).
fn batch(c: &mut Conn, mode: &str, members: u64, depth: usize) -> Result<usize> {
    let mut rng = rand::rng();
    let mut seen = 0;
    match mode {
        "around-lb" => {
            for _ in 0..depth {
                let m = member(rng.random_range(0..members));
                c.send(&[b"LB.AROUND", b"lb", &m, b"21"])?;
            }
            c.flush()?;
            for _ in 0..depth {
                if let Reply::Array(v) = c.read()? {
                    seen += v.len();
                }
            }
        }
        "around-recipe" => {
            let ms: Vec<Vec<u8>> = (0..depth)
                .map(|_| member(rng.random_range(0..members)))
                .collect();
            for m in &ms {
                c.send(&[b"ZREVRANK", b"board", m])?;
            }
            c.send(&[b"ZCARD", b"board"])?;
            c.flush()?;
            let mut ranks = Vec::with_capacity(depth);
            for _ in 0..depth {
                ranks.push(match c.read()? {
                    Reply::Int(r) => Some(r),
                    _ => None,
                });
            }
            let card = match c.read()? {
                Reply::Int(n) => n,
                _ => return Err("ZCARD".into()),
            };
            let mut asked = 0;
            for r in ranks.into_iter().flatten() {
                let start = (r - 10).clamp(0, (card - 21).max(0));
                let (a, b) = (start.to_string(), (start + 20).to_string());
                c.send(&[
                    b"ZREVRANGE",
                    b"board",
                    a.as_bytes(),
                    b.as_bytes(),
                    b"WITHSCORES",
                ])?;
                asked += 1;
            }
            c.flush()?;
            for _ in 0..asked {
                if let Reply::Array(v) = c.read()? {
                    seen += v.len() / 2;
                }
            }
        }
        "friends-lb" => {
            for _ in 0..depth {
                c.send(&[b"LB.FRIENDS", b"lb", b"friends:me", b"INCLUDE", b"m:me"])?;
            }
            c.flush()?;
            for _ in 0..depth {
                if let Reply::Array(v) = c.read()? {
                    seen += v.len();
                }
            }
        }
        "friends-recipe" => {
            for _ in 0..depth {
                c.send(&[b"SMEMBERS", b"friends:me"])?;
            }
            c.flush()?;
            let mut lists = Vec::with_capacity(depth);
            for _ in 0..depth {
                match c.read()? {
                    Reply::Array(v) => lists.push(
                        v.into_iter()
                            .filter_map(|r| match r {
                                Reply::Bulk(Some(b)) => Some(b),
                                _ => None,
                            })
                            .chain(std::iter::once(b"m:me".to_vec()))
                            .collect::<Vec<_>>(),
                    ),
                    _ => return Err("SMEMBERS".into()),
                }
            }
            for list in &lists {
                for m in list {
                    c.send(&[b"ZSCORE", b"board", m])?;
                }
            }
            c.flush()?;
            for list in lists {
                let mut board: Vec<(f64, Vec<u8>)> = Vec::with_capacity(list.len());
                for m in list {
                    if let Reply::Bulk(Some(s)) = c.read()? {
                        let score = std::str::from_utf8(&s)
                            .ok()
                            .and_then(|s| s.parse::<f64>().ok())
                            .ok_or("ZSCORE is not a number")?;
                        board.push((score, m));
                    }
                }
                board.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
                seen += board.len();
            }
        }
        _ => return Err(format!("unknown mode {mode}")),
    }
    Ok(seen)
}

fn arg(args: &[String], name: &str) -> Result<u64> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("missing or bad {name}"))
}

fn run(args: &[String]) -> Result<f64> {
    let mode = args
        .first()
        .ok_or("usage: lb_recipe MODE --port P ...")?
        .clone();
    let port = arg(args, "--port")? as u16;
    let members = arg(args, "--members")?;
    let requests = arg(args, "--requests")?;
    let conns = arg(args, "--conns")?.max(1);
    let depth = arg(args, "--pipeline")?.max(1) as usize;
    let per_conn = requests / conns;
    let start = Instant::now();
    let workers: Vec<_> = (0..conns)
        .map(|_| {
            let mode = mode.clone();
            std::thread::spawn(move || -> Result<usize> {
                let mut c = Conn::open(port)?;
                let mut done = 0u64;
                let mut seen = 0;
                while done < per_conn {
                    seen += batch(&mut c, &mode, members, depth)?;
                    done += depth as u64;
                }
                Ok(seen)
            })
        })
        .collect();
    let mut seen = 0;
    for w in workers {
        seen += w.join().map_err(|_| "worker panicked".to_string())??;
    }
    if seen == 0 {
        return Err("no entries in any reply".into());
    }
    Ok((per_conn * conns) as f64 / start.elapsed().as_secs_f64())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(qps) => println!("{qps:.0}"),
        Err(e) => {
            eprintln!("lb_recipe: {e}");
            std::process::exit(1);
        }
    }
}
