//! Start-up: replays the AOF through the dispatcher with a fake client
//! (replies dropped), before any client is accepted.
//!
//! A truncated last command (a crash mid-write) is dropped and the file cut
//! to the last whole command when `aof-load-truncated` is on (as is an
//! unfinished MULTI at the end); anything else that is not a well-formed
//! command stops the start with an error naming the byte offset.
//!
//! Big sorted sets written by ZADD / ZINCRBY have their order deferred
//! while the file is read ([`Deferred`]): each change then costs a hash
//! lookup instead of two skiplist walks, and each set is sorted once, at
//! the end or before the first command that could read an order.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Buf, BytesMut};

use crate::commands;
use crate::commands::table::{CommandSpec, KeySpec};
use crate::engine::rdb::decode;
use crate::engine::Value;
use crate::protocol::{Limits, Parsed, Reply, RequestParser};
use crate::state::client::{ClientInfo, ClientState};
use crate::state::{unix_ms, Server};

/// Bytes read from the file at a time.
const READ_CHUNK: usize = 4 << 20;

/// What a load did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// Commands run.
    pub commands: u64,
    /// Bytes of whole commands (the file size after any truncation).
    pub bytes: u64,
    /// The size of a truncated file before it was cut, if it was.
    pub truncated_from: Option<u64>,
}

/// Commands that cannot read any sorted set's order, so they may run while
/// the loader has deferred some ([`Deferred`]); any other command first puts
/// every deferred set back in order. (EXEC runs its queued commands: it is
/// checked by what it queued.)
fn order_free(name: &str) -> bool {
    matches!(
        name,
        "zadd"
            | "zincrby"
            | "zrem"
            | "zscore"
            | "zmscore"
            | "zcard"
            | "select"
            | "multi"
            | "exec"
            | "discard"
            | "ping"
            | "set"
            | "setbit"
            | "setex"
            | "psetex"
            | "setnx"
            | "mset"
            | "incr"
            | "incrby"
            | "incrbyfloat"
            | "decr"
            | "decrby"
            | "append"
            | "setrange"
            | "sadd"
            | "srem"
            | "del"
            | "unlink"
            | "expire"
            | "pexpire"
            | "expireat"
            | "pexpireat"
            | "persist"
            | "flushdb"
            | "flushall"
    )
}

/// The sorted sets whose order the loader deferred, by database and key
/// (`true`), and those put back in order before the end (`false`), which
/// are not deferred again: a file mixing order reads with writes on one big
/// set would otherwise sort it again and again. A command that reads an
/// order puts back only the sets among its keys when its key spec names
/// them, so a ZREMRANGEBYRANK on one board leaves the others deferred.
///
/// Only the loader runs commands, and only [`order_free`] commands run while
/// a set is deferred, so no command sees a set out of order. A deferred set
/// cannot move to another key: RENAME, MOVE, COPY, SWAPDB... are not
/// order-free.
#[derive(Default)]
struct Deferred {
    /// Per database: key -> deferred now.
    dbs: Vec<HashMap<Vec<u8>, bool, ahash::RandomState>>,
    pending: usize,
}

impl Deferred {
    /// Before ZADD / ZINCRBY on `key` in `db`: defers the order of the set
    /// there if it is a skiplist seen for the first time. (A listpack is
    /// looked at again next time: it may have grown.)
    fn consider(&mut self, server: &Server, db: usize, key: &[u8]) {
        if self.dbs.get(db).is_some_and(|m| m.contains_key(key)) {
            return;
        }
        let ks = &server.keyspace;
        let mut guard = ks.lock_one(ks.shard_of(key), true);
        let Some(part) = guard.shard_mut().and_then(|s| s.dbs.get_mut(db)) else {
            return;
        };
        if let Some(Value::ZSet(z)) = part.get_mut(key, 0).map(|e| &mut e.value) {
            if z.defer_order() {
                if self.dbs.len() <= db {
                    self.dbs.resize_with(db + 1, HashMap::default);
                }
                if let Some(m) = self.dbs.get_mut(db) {
                    m.insert(key.to_vec(), true);
                }
                self.pending += 1;
            }
        }
    }

    /// Before a command that is not [`order_free`]: puts back in order the
    /// deferred sets among its keys (they are in the client's database:
    /// handlers touch only the keys their key spec names), or every one
    /// when it has no key spec (EXEC, scripts, SWAPDB, FUNCTION, ...).
    fn restore_for(&mut self, server: &Server, db: usize, spec: &CommandSpec, args: &[&[u8]]) {
        if self.pending == 0 {
            return;
        }
        match spec.keys {
            KeySpec::Range { .. } | KeySpec::Find(_) => {
                for i in spec.key_indexes(args) {
                    let Some(key) = args.get(i) else {
                        continue;
                    };
                    let Some(deferred) = self.dbs.get_mut(db).and_then(|m| m.get_mut(*key)) else {
                        continue;
                    };
                    if *deferred {
                        *deferred = false;
                        self.pending -= 1;
                        restore(server, db, key);
                    }
                }
            }
            KeySpec::None | KeySpec::All => self.restore_all(server),
        }
    }

    /// Puts every deferred set back in order (at the end of the file, and
    /// before commands that may touch any key).
    fn restore_all(&mut self, server: &Server) {
        if self.pending == 0 {
            return;
        }
        for (db, keys) in self.dbs.iter_mut().enumerate() {
            for (key, deferred) in keys.iter_mut().filter(|(_, d)| **d) {
                *deferred = false;
                restore(server, db, key);
            }
        }
        self.pending = 0;
    }
}

/// Puts the set under `key` in `db` back in order; the key may be gone or
/// hold another value by now.
fn restore(server: &Server, db: usize, key: &[u8]) {
    let ks = &server.keyspace;
    let mut guard = ks.lock_one(ks.shard_of(key), true);
    if let Some(part) = guard.shard_mut().and_then(|s| s.dbs.get_mut(db)) {
        if let Some(Value::ZSet(z)) = part.get_mut(key, 0).map(|e| &mut e.value) {
            z.restore_order();
        }
    }
}

fn bad_format(path: &Path, offset: u64, why: &str) -> String {
    format!(
        "Bad file format reading the append only file {} at byte offset {offset} ({why}): \
         make a backup of your AOF file, then use rostrum check-aof --fix {}",
        path.display(),
        path.display()
    )
}

/// An RDB preamble (a base file written with `aof-use-rdb-preamble yes`,
/// or an old-style AOF whose rewrite wrote one): its keys are stored and
/// the commands after it replayed next. Returns where they start (0 when
/// the file has no preamble), the file positioned there.
fn load_preamble(server: &Server, path: &Path, file: &mut File) -> Result<u64, String> {
    let mut sig = [0u8; 5];
    let is_rdb = file.read_exact(&mut sig).is_ok() && &sig == b"REDIS";
    let mut end = 0;
    if is_rdb {
        let data = std::fs::read(path)
            .map_err(|e| format!("Error reading the append only file {}: {e}", path.display()))?;
        let (limits, databases) = {
            let c = server.config.read();
            (c.rdb_limits(), c.databases)
        };
        let loaded = decode::read_file(&data, databases, unix_ms(), &limits).map_err(|e| {
            format!(
                "Error reading the RDB preamble of the AOF file {}: {e}",
                path.display()
            )
        })?;
        drop(data);
        end = loaded.end;
        tracing::info!(
            "Reading RDB base file on AOF loading... ({} keys)",
            loaded.keys.len()
        );
        super::rdb::apply_loaded(server, loaded).map_err(|e| {
            format!(
                "Error loading the RDB preamble of the AOF file {}: {e}",
                path.display()
            )
        })?;
    }
    file.seek(SeekFrom::Start(end))
        .map_err(|e| format!("Error reading the append only file {}: {e}", path.display()))?;
    Ok(end)
}

/// Replays the AOF at `path` into the server's keyspace.
pub fn load_file(server: &Server, path: &Path, load_truncated: bool) -> Result<Loaded, String> {
    let started = Instant::now();
    let mut file = File::open(path)
        .map_err(|e| format!("Can't open the append-only file {}: {e}", path.display()))?;
    let total = file.metadata().map(|m| m.len()).unwrap_or(0);
    if total == 0 {
        return Ok(Loaded {
            commands: 0,
            bytes: 0,
            truncated_from: None,
        });
    }
    tracing::info!("Reading the AOF file {} ({total} bytes)", path.display());
    // File offset of rbuf[0]: everything before it was whole commands.
    let mut offset = load_preamble(server, path, &mut file)?;
    let info = Arc::new(ClientInfo::new(0, String::new(), String::new(), unix_ms()));
    let mut client = ClientState::new(info, true);
    client.deny_blocking = true;
    client.replaying = true;
    let mut out = Reply::new(false);
    let mut parser = RequestParser::new();
    let limits = Limits::default();
    let mut rbuf = BytesMut::with_capacity(READ_CHUNK);
    // Where the open MULTI started, if one is open.
    let mut multi_at: Option<u64> = None;
    let mut commands_run: u64 = 0;
    let mut deferred = Deferred::default();
    // The open MULTI queued only order-free commands.
    let mut multi_order_free = true;
    let mut eof = false;
    let mut last_log = Instant::now();
    loop {
        // Run every whole command in the buffer.
        loop {
            if !parser.in_progress() {
                match rbuf.first() {
                    None => break,
                    Some(b'#') => {
                        // An annotation line (Redis 7 writes `#TS:...`).
                        match rbuf.iter().position(|&b| b == b'\n') {
                            Some(nl) => {
                                rbuf.advance(nl + 1);
                                offset += nl as u64 + 1;
                                continue;
                            }
                            None => break,
                        }
                    }
                    Some(b'*') => {}
                    Some(_) => return Err(bad_format(path, offset, "expected '*'")),
                }
            }
            match parser.parse(&rbuf, &limits) {
                Ok(None) => break,
                Ok(Some(Parsed::Skip { .. })) => {
                    return Err(bad_format(path, offset, "empty command"));
                }
                Ok(Some(Parsed::Command { consumed })) => {
                    {
                        let args = parser.args(&rbuf);
                        let cmd = match commands::resolve_for(&client, &args) {
                            Ok(cmd) => cmd,
                            Err(e) => return Err(bad_format(path, offset, &e.to_string())),
                        };
                        // `config|set` for a subcommand: never order-free.
                        let name = cmd.full_name.as_str();
                        if client.multi.is_some() {
                            if name == "exec" && !multi_order_free {
                                deferred.restore_all(server);
                            }
                            multi_order_free &= order_free(name);
                        } else if name == "multi" {
                            multi_at = Some(offset);
                            multi_order_free = true;
                        } else if !order_free(name) {
                            deferred.restore_for(server, client.db, cmd.spec, &args);
                        } else if name == "zadd" || name == "zincrby" {
                            if let Some(key) = args.get(1) {
                                deferred.consider(server, client.db, key);
                            }
                        }
                        commands::execute(server, &mut client, &mut out, &args);
                        if client.multi.is_none() {
                            multi_at = None;
                        }
                    }
                    out.buf.clear();
                    rbuf.advance(consumed);
                    offset += consumed as u64;
                    commands_run += 1;
                }
                Err(e) => return Err(bad_format(path, offset, &e.0)),
            }
        }
        if eof {
            break;
        }
        if last_log.elapsed().as_secs() >= 1 {
            last_log = Instant::now();
            tracing::info!(
                "Loading the AOF: {offset} of {total} bytes ({:.1}%)",
                offset as f64 * 100.0 / total as f64
            );
        }
        rbuf.reserve(READ_CHUNK);
        let start = rbuf.len();
        rbuf.resize(start + READ_CHUNK, 0);
        let n = loop {
            match file.read(&mut rbuf[start..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(format!(
                        "Error reading the append only file {}: {e}",
                        path.display()
                    ))
                }
            }
        };
        rbuf.truncate(start + n);
        if n == 0 {
            eof = true;
        }
    }
    let sorting = Instant::now();
    let sets = deferred.pending;
    deferred.restore_all(server);
    if sorting.elapsed().as_secs() >= 1 {
        tracing::info!(
            "Loading the AOF: sorted {sets} sorted sets in {:.3} seconds",
            sorting.elapsed().as_secs_f64()
        );
    }
    // What is left is a command cut short, or a MULTI without its EXEC.
    let whole = multi_at.unwrap_or(offset);
    let mut truncated_from = None;
    if whole < total {
        if multi_at.is_some() {
            tracing::warn!("Revert incomplete MULTI/EXEC transaction in AOF file");
        }
        tracing::warn!(
            "!!! Warning: short read while loading the AOF file {}!!!",
            path.display()
        );
        if !load_truncated {
            return Err(format!(
                "Unexpected end of file reading the append only file {} (the last whole command ends at byte offset {whole}). \
                 You can: 1) Make a backup of your AOF file, then use rostrum check-aof --fix <filename>. \
                 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server.",
                path.display()
            ));
        }
        tracing::warn!("!!! Truncating the AOF at offset {whole} !!!");
        OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|f| {
                f.set_len(whole)?;
                f.sync_all()
            })
            .map_err(|e| {
                format!(
                    "Error truncating the AOF file {} to {whole} bytes: {e}",
                    path.display()
                )
            })?;
        tracing::warn!("AOF loaded anyway because aof-load-truncated is enabled");
        truncated_from = Some(total);
    }
    let secs = started.elapsed().as_secs_f64();
    tracing::info!(
        "DB loaded from append only file: {secs:.3} seconds ({:.1} MB/s, {:.0} commands/s)",
        whole as f64 / 1e6 / secs.max(1e-9),
        commands_run as f64 / secs.max(1e-9)
    );
    Ok(Loaded {
        commands: commands_run,
        bytes: whole,
        truncated_from,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::journal::encode::write_command;
    use crate::state::Config;

    fn push(file: &mut Vec<u8>, args: &[&str]) {
        write_command(file, args.iter().map(|a| a.as_bytes()));
    }

    fn zadd_many(file: &mut Vec<u8>, key: &str, n: usize) {
        let mut args = vec!["ZADD".to_string(), key.to_string()];
        for i in 0..n {
            args.push((i % 37).to_string());
            args.push(format!("m:{i}"));
        }
        let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        push(file, &a);
    }

    fn zincr_many(file: &mut Vec<u8>, key: &str, seed: u64) {
        let mut x = seed;
        for _ in 0..400 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let delta = ((x >> 40) % 21) as i64 - 10;
            let member = format!("m:{}", (x >> 20) % 330);
            push(file, &["ZINCRBY", key, &delta.to_string(), &member]);
        }
    }

    /// Every key's contents in databases 0 and 1, as the commands see them.
    fn dump(server: &Server, keys: &[&str]) -> String {
        let info = Arc::new(ClientInfo::new(0, String::new(), String::new(), 0));
        let mut client = ClientState::new(info, true);
        let mut out = Reply::new(false);
        for db in ["0", "1"] {
            commands::execute(server, &mut client, &mut out, &[b"SELECT", db.as_bytes()]);
            for key in keys {
                let k = key.as_bytes();
                commands::execute(server, &mut client, &mut out, &[b"TYPE", k]);
                commands::execute(server, &mut client, &mut out, &[b"OBJECT", b"ENCODING", k]);
                let all: [&[u8]; 5] = [b"ZRANGE", k, b"0", b"-1", b"WITHSCORES"];
                commands::execute(server, &mut client, &mut out, &all);
                commands::execute(server, &mut client, &mut out, &[b"ZRANK", k, b"m:9"]);
                commands::execute(server, &mut client, &mut out, &[b"GET", k]);
            }
        }
        String::from_utf8_lossy(&out.buf).into_owned()
    }

    #[test]
    fn deferred_order_loads_as_the_dispatcher_runs_the_file() {
        // Big sets whose order is deferred, put back in order by commands
        // that read it (alone and inside MULTI), deleted and re-created,
        // and left deferred until the end.
        let mut file = Vec::new();
        push(&mut file, &["SELECT", "0"]);
        zadd_many(&mut file, "big", 300);
        zincr_many(&mut file, "big", 1);
        push(&mut file, &["ZREM", "big", "m:5", "m:6", "m:320"]);
        push(&mut file, &["ZADD", "big", "XX", "GT", "1000", "m:7"]);
        push(&mut file, &["ZRANGESTORE", "top", "big", "0", "9"]);
        zincr_many(&mut file, "big", 2);
        push(&mut file, &["ZREMRANGEBYRANK", "big", "0", "2"]);
        zincr_many(&mut file, "big", 3);
        push(&mut file, &["SELECT", "1"]);
        zadd_many(&mut file, "big", 300);
        zincr_many(&mut file, "big", 4);
        push(&mut file, &["MULTI"]);
        push(&mut file, &["ZINCRBY", "big", "3", "m:1"]);
        push(&mut file, &["ZRANGESTORE", "top", "big", "0", "4"]);
        push(&mut file, &["EXEC"]);
        zadd_many(&mut file, "gone", 300);
        zincr_many(&mut file, "gone", 5);
        push(&mut file, &["DEL", "gone"]);
        push(&mut file, &["ZADD", "gone", "1", "a", "2", "b"]);
        push(&mut file, &["ZINCRBY", "gone", "5", "a"]);
        push(&mut file, &["SELECT", "0"]);
        zadd_many(&mut file, "last", 300);
        zincr_many(&mut file, "last", 6);
        push(&mut file, &["MULTI"]);
        push(&mut file, &["ZINCRBY", "last", "-4", "m:2"]);
        push(&mut file, &["SETBIT", "bits", "7", "1"]);
        push(&mut file, &["EXEC"]);
        zincr_many(&mut file, "last", 7);
        // A command reading one set's order leaves the other deferred.
        zadd_many(&mut file, "other", 300);
        zincr_many(&mut file, "other", 8);
        push(&mut file, &["ZPOPMIN", "last", "3"]);
        zincr_many(&mut file, "last", 9);
        zincr_many(&mut file, "other", 10);
        push(&mut file, &["ZRANGESTORE", "top", "other", "0", "5"]);
        zincr_many(&mut file, "other", 11);
        push(
            &mut file,
            &["CONFIG", "SET", "zset-max-listpack-entries", "128"],
        );

        let path = std::env::temp_dir().join(format!("rostrum-load-{}.aof", std::process::id()));
        std::fs::write(&path, &file).expect("write");
        let loaded = Server::new(Config::default(), None);
        let result = load_file(&loaded, &path, false);
        let _ = std::fs::remove_file(&path);
        let done = result.expect("load");
        assert_eq!(done.bytes, file.len() as u64);

        // The same commands through the dispatcher, one by one.
        let reference = Server::new(Config::default(), None);
        let info = Arc::new(ClientInfo::new(0, String::new(), String::new(), 0));
        let mut client = ClientState::new(info, true);
        let mut out = Reply::new(false);
        let mut parser = RequestParser::new();
        let mut buf = &file[..];
        while let Ok(Some(Parsed::Command { consumed })) = parser.parse(buf, &Limits::default()) {
            commands::execute(&reference, &mut client, &mut out, &parser.args(buf));
            buf = &buf[consumed..];
        }
        assert!(buf.is_empty());

        let keys = ["big", "top", "gone", "last", "other", "bits"];
        let (got, want) = (dump(&loaded, &keys), dump(&reference, &keys));
        assert!(
            want.contains("skiplist") && want.contains("m:299"),
            "{want}"
        );
        assert_eq!(got, want);
    }
}
