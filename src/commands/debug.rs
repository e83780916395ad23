//! DEBUG, as redis-server 7.0 has it, for the subcommands that mean
//! something here: RELOAD, SLEEP, OBJECT, SET-ACTIVE-EXPIRE, DIGEST,
//! DIGEST-VALUE, CHANGE-REPL-ID, PROTOCOL, ERROR, LOG and HELP. Every
//! other name gets Redis's answer to an unknown subcommand.
//!
//! Like Redis, DEBUG runs only where `enable-debug-command` allows it
//! (`yes`, or `local` for a client on the loopback interface); the
//! dispatcher refuses it otherwise, with Redis's line ([`allowed`]).
//!
//! DEBUG RELOAD saves through the one snapshot mechanism (the snapshot
//! thread, as SAVE does), then empties the keyspace and loads the file
//! back, holding every shard while it stores the keys.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::args::{is, text};
use super::table::{flags::*, CommandSpec, KeySpec};
use super::Ctx;
use crate::engine::digest::{self, Digest};
use crate::engine::rdb::{decode, encode};
use crate::engine::{Entry, Value};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::state::client::{ClientInfo, ClientState};
use crate::state::journal;
use crate::state::{unix_ms, Server};

/// This family's one command.
pub const COMMANDS: &[CommandSpec] = &[CommandSpec {
    group: "server",
    summary: "A container for debugging commands",
    since: "1.0.0",
    complexity: "Depends on subcommand.",
    ..CommandSpec::new(
        "debug",
        -2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        KeySpec::None,
        debug,
    )
}];

/// The line Redis 7.0 refuses DEBUG with.
pub const NOT_ALLOWED: &str = "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";

/// The line Redis 7.0 refuses MODULE LOAD, LOADEX and UNLOAD with.
pub const MODULE_NOT_ALLOWED: &str = "ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";

/// The line a protected command is refused with where its gate does not
/// let a client at `addr` run it: DEBUG (the command, not a subcommand
/// named so: SCRIPT DEBUG is not protected) behind
/// `enable-debug-command`; MODULE LOAD, LOADEX and UNLOAD behind
/// `enable-module-command`.
pub fn refusal(server: &Server, full_name: &str, addr: &str) -> Option<&'static str> {
    let (gate, line) = match full_name {
        "debug" => ("enable-debug-command", NOT_ALLOWED),
        "module|load" | "module|loadex" | "module|unload" => {
            ("enable-module-command", MODULE_NOT_ALLOWED)
        }
        _ => return None,
    };
    (!allowed_by(server, gate, addr)).then_some(line)
}

/// Whether the gate `param` (`no`, `yes`, `local`) lets a client at
/// `addr` run a protected command (Redis's `allowProtectedAction`): `yes`,
/// or `local` and a loopback peer. The server's own clients (no address)
/// may.
fn allowed_by(server: &Server, param: &str, addr: &str) -> bool {
    match server.config.read().param(param).as_str() {
        "yes" => true,
        "local" => {
            addr.is_empty()
                || addr.parse::<SocketAddr>().is_ok_and(|a| match a {
                    SocketAddr::V4(v4) => v4.ip().is_loopback(),
                    SocketAddr::V6(v6) => {
                        v6.ip().is_loopback()
                            || v6.ip().to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
                    }
                })
        }
        _ => false,
    }
}

const HELP: &[&str] = &[
    "CHANGE-REPL-ID",
    "    Change the replication IDs of the instance.",
    "    Dangerous: should be used only for testing the replication subsystem.",
    "DIGEST",
    "    Output a hex signature representing the current DB content.",
    "DIGEST-VALUE <key> [<key> ...]",
    "    Output a hex signature of the values of all the specified keys.",
    "ERROR <string>",
    "    Return a Redis protocol error with <string> as message. Useful for clients",
    "    unit tests to simulate Redis errors.",
    "LOG <message>",
    "    Write <message> to the server log.",
    "OBJECT <key>",
    "    Show low level info about `key` and associated value.",
    "PROTOCOL <type>",
    "    Reply with a test value of the specified type. <type> can be: string,",
    "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
    "    true, false.",
    "RELOAD [option ...]",
    "    Save the RDB on disk and reload it back to memory. Valid <option> values:",
    "    * MERGE: conflicting keys will be loaded from RDB.",
    "    * NOFLUSH: the existing database will not be removed before load, but",
    "      conflicting keys will generate an exception and kill the server.",
    "    * NOSAVE: the database will be loaded from an existing RDB file.",
    "    Examples:",
    "    * DEBUG RELOAD: verify that the server is able to persist, flush and reload",
    "      the database.",
    "    * DEBUG RELOAD NOSAVE: replace the current database with the contents of an",
    "      existing RDB file.",
    "    * DEBUG RELOAD NOSAVE NOFLUSH MERGE: add the contents of an existing RDB",
    "      file to the database.",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Setting it to 0 disables expiring keys in background when they are not",
    "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
    "    default.",
    "SLEEP <seconds>",
    "    Stop the server for <seconds>. Decimals allowed.",
];

fn debug(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let sub = a[1];
    let n = a.len();
    if is(sub, "help") && n == 2 {
        ctx.out.help("DEBUG", HELP);
    } else if is(sub, "reload") {
        reload(ctx, &a[2..])?;
    } else if is(sub, "sleep") && n == 3 {
        sleep(ctx, a[2]);
    } else if is(sub, "object") && n == 3 {
        object(ctx, a[2])?;
    } else if is(sub, "set-active-expire") && n == 3 {
        let on = c_atoi(a[2]) != 0;
        ctx.server.active_expire.store(on, Ordering::Relaxed);
        ctx.out.ok();
    } else if is(sub, "digest") && n == 2 {
        let d = dataset_digest(ctx);
        ctx.out.simple(digest::hex(&d).as_bytes());
    } else if is(sub, "digest-value") && n >= 2 {
        ctx.out.array(n - 2);
        for key in &a[2..] {
            let d = with_entry(ctx, key, |e| {
                let mut d = [0u8; 20];
                if let Some(e) = e {
                    digest::mix_value(&mut d, &e.value, e.expire_at().is_some());
                }
                d
            });
            ctx.out.simple(digest::hex(&d).as_bytes());
        }
    } else if is(sub, "change-repl-id") && n == 2 {
        change_repl_id(ctx.server);
        ctx.out.ok();
    } else if is(sub, "protocol") && n == 3 {
        protocol(ctx.out, a[2])?;
    } else if is(sub, "error") && n == 3 {
        return Err(CmdError::line(text(a[2])));
    } else if is(sub, "log") && n == 3 {
        tracing::warn!("DEBUG LOG: {}", text(a[2]));
        ctx.out.ok();
    } else {
        let name: String = text(sub).chars().take(128).collect();
        return Err(CmdError::err(format!(
            "unknown subcommand or wrong number of arguments for '{name}'. Try DEBUG HELP."
        )));
    }
    Ok(())
}

/// C's `atoi`: the leading integer, 0 when there is none.
fn c_atoi(arg: &[u8]) -> i64 {
    let s = text(arg);
    let s = s.trim_start();
    let (sign, digits) = match s.strip_prefix('-') {
        Some(r) => (-1, r),
        None => (1, s.strip_prefix('+').unwrap_or(s)),
    };
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    digits[..end].parse::<i64>().map_or(0, |v| sign * v)
}

/// C's `strtod` on the longest prefix that reads as a number, 0 otherwise.
fn c_atof(arg: &[u8]) -> f64 {
    let s = text(arg);
    let s = s.trim_start();
    (1..=s.len())
        .rev()
        .filter(|&i| s.is_char_boundary(i))
        .find_map(|i| s[..i].parse::<f64>().ok())
        .unwrap_or(0.0)
}

/// DEBUG SLEEP: the keyspace is held (every shard) for that long, so no
/// command touching keys runs meanwhile, as Redis's whole server stops.
fn sleep(ctx: &mut Ctx, arg: &[u8]) {
    let secs = c_atof(arg);
    let d = if secs.is_finite() && secs > 0.0 {
        Duration::from_secs_f64(secs.min(u32::MAX as f64))
    } else {
        Duration::ZERO
    };
    if !d.is_zero() {
        let ks = &ctx.server.keyspace;
        super::persistence::blocking(|| {
            let _all = (!ctx.keys.locked.holds_all()).then(|| ks.lock_all(true));
            std::thread::sleep(d);
        });
    }
    ctx.out.ok();
}

/// Runs `f` on `key`'s entry in the selected database (None when missing
/// or expired), through the command's guards when it holds the shard
/// (inside EXEC), else locking the shard for the read.
fn with_entry<R>(ctx: &Ctx, key: &[u8], f: impl FnOnce(Option<&Entry>) -> R) -> R {
    let ks = &ctx.server.keyspace;
    let idx = ks.shard_of(key);
    let (db, now) = (ctx.keys.db, ctx.keys.now_ms);
    if let Some(g) = ctx.keys.locked.guard(idx) {
        return f(g.shard().dbs.get(db).and_then(|d| d.peek(key, now)));
    }
    let g = ks.lock_one(idx, false);
    f(g.shard().dbs.get(db).and_then(|d| d.peek(key, now)))
}

/// DEBUG OBJECT: Redis's line with the fields that have a meaning here.
fn object(ctx: &mut Ctx, key: &[u8]) -> CmdResult {
    let opts = ctx.server.config.read().rdb_options();
    let now = ctx.keys.now_ms;
    let line = with_entry(ctx, key, |e| {
        e.map(|e| {
            // What the value takes in an RDB file: its DUMP payload less
            // the type byte, the version and the checksum.
            let serialized = encode::dump_payload(&e.value, opts).len().saturating_sub(11);
            let idle = e.idle_secs(now);
            let lru = ((now / 1000).saturating_sub(idle)) & ((1 << 24) - 1);
            format!(
                "Value at:{:p} refcount:1 encoding:{} serializedlength:{serialized} lru:{lru} lru_seconds_idle:{idle}",
                &e.value,
                e.value.encoding(),
            )
        })
    });
    match line {
        Some(l) => ctx.out.simple(l.as_bytes()),
        None => return Err(CmdError::NoSuchKey),
    }
    Ok(())
}

/// DEBUG DIGEST: every database's keys (live ones), as Redis's
/// `computeDatasetDigest`. Shards are read one at a time.
fn dataset_digest(ctx: &Ctx) -> Digest {
    let databases = ctx.server.keyspace.databases();
    let now = ctx.keys.now_ms;
    // Per database: whether it has keys, and the XOR of their digests'
    // SHA-1s (an XOR, so the shards' order does not matter).
    let mut per_db: Vec<(bool, Digest)> = vec![(false, [0u8; 20]); databases];
    let ks = &ctx.server.keyspace;
    let mut visit = |shard: &crate::engine::keyspace::Shard| {
        for (j, db) in shard.dbs.iter().enumerate() {
            let Some(slot) = per_db.get_mut(j) else {
                continue;
            };
            for (key, e) in db.iter() {
                if e.expire_at().is_some_and(|t| t <= now) {
                    continue;
                }
                let d = digest::key_digest(key, &e.value, e.expire_at().is_some());
                slot.0 = true;
                digest::xor(&mut slot.1, &d);
            }
        }
    };
    for i in 0..crate::engine::SHARD_COUNT {
        if let Some(g) = ctx.keys.locked.guard(i) {
            visit(g.shard());
        } else {
            visit(ks.lock_one(i, false).shard());
        }
    }
    let mut out = [0u8; 20];
    for (j, (any, x)) in per_db.iter().enumerate() {
        if !any {
            continue;
        }
        digest::mix(&mut out, &(j as u32).to_be_bytes());
        for (o, b) in out.iter_mut().zip(x) {
            *o ^= b;
        }
    }
    out
}

/// DEBUG CHANGE-REPL-ID: a new replication id, and no second one.
fn change_repl_id(server: &Server) {
    let mut b = server.aof.backlog.inner.lock();
    b.replid = journal::backlog::random_id();
    b.replid2 = "0".repeat(40);
    b.second_offset = -1;
}

/// DEBUG PROTOCOL: Redis's test values of each RESP3 type.
fn protocol(out: &mut Reply, kind: &[u8]) -> CmdResult {
    let k = text(kind).to_ascii_lowercase();
    match k.as_str() {
        "string" => out.bulk(b"Hello World"),
        "integer" => out.int(12345),
        // Redis's test value, not an approximation of pi.
        #[allow(clippy::approx_constant)]
        "double" => out.double(3.141),
        "bignum" => {
            let n = b"1234567999999999999999999999999999999";
            if out.resp3 {
                out.raw(b"(");
                out.raw(n);
                out.raw(b"\r\n");
            } else {
                out.bulk(n);
            }
        }
        "null" => out.null(),
        "array" | "set" | "map" => {
            if k == "array" {
                out.array(3);
            } else if k == "set" {
                out.set(3);
            } else {
                out.map(3);
            }
            for j in 0..3 {
                out.int(j);
                if k == "map" {
                    out.boolean(j == 1);
                }
            }
        }
        "attrib" => {
            if out.resp3 {
                out.raw(b"|1\r\n");
                out.bulk(b"key-popularity");
                out.array(2);
                out.bulk(b"key:123");
                out.int(90);
            }
            out.bulk(b"Some real reply following the attribute");
        }
        "push" => {
            if !out.resp3 {
                return Err(CmdError::err("RESP2 is not supported by this command"));
            }
            out.push(2);
            out.bulk(b"server-cpu-usage");
            out.int(42);
            out.bulk(b"Some real reply following the push reply");
        }
        "verbatim" => out.verbatim(b"This is a verbatim\nstring"),
        "true" => out.boolean(true),
        "false" => out.boolean(false),
        _ => {
            return Err(CmdError::err(
                "Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
            ))
        }
    }
    Ok(())
}

/// DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE]: saves the RDB file (unless
/// NOSAVE), empties the data (unless NOFLUSH) and loads the file. As in
/// Redis, a file that can't be read leaves the data emptied and answers
/// `Error trying to load the RDB dump`; unlike Redis (which stops the
/// server), NOFLUSH without MERGE finding a key already there loads
/// nothing and answers that error.
fn reload(ctx: &mut Ctx, opts: &[&[u8]]) -> CmdResult {
    let (mut merge, mut flush, mut save) = (false, true, true);
    for o in opts {
        if is(o, "merge") {
            merge = true;
        } else if is(o, "noflush") {
            flush = false;
        } else if is(o, "nosave") {
            save = false;
        } else {
            return Err(CmdError::err(
                "DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.",
            ));
        }
    }
    if ctx.keys.locked.holds_all() {
        // The save and the load take every shard themselves.
        return Err(CmdError::err(
            "DEBUG RELOAD can't run inside MULTI/EXEC or a script",
        ));
    }
    let server = ctx.server;
    if save && !super::persistence::blocking(|| journal::save_blocking(&server.aof)) {
        return Err(CmdError::line("ERR"));
    }
    let (path, limits, databases) = {
        let c = server.config.read();
        (
            std::path::Path::new(&c.dir).join(&c.dbfilename),
            c.rdb_limits(),
            c.databases,
        )
    };
    let loaded = super::persistence::blocking(|| {
        std::fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|data| {
                decode::read_file(&data, databases, unix_ms(), &limits).map_err(|e| e.to_string())
            })
    });
    let failed = || CmdError::err("Error trying to load the RDB dump");
    let loaded = match loaded {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!("DEBUG RELOAD: can't load {}: {e}", path.display());
            if flush {
                empty_all(ctx);
            }
            return Err(failed());
        }
    };
    // Function libraries first (FUNCTION LOAD takes the shards itself):
    // replaced when the data is replaced or merged, else one already
    // there fails the load.
    if !loaded.functions.is_empty() {
        let info = Arc::new(ClientInfo::new(0, String::new(), String::new(), unix_ms()));
        let mut c = ClientState::new(info, true);
        c.replaying = true;
        let mut out = Reply::new(false);
        for code in &loaded.functions {
            out.buf.clear();
            let args: Vec<&[u8]> = if flush || merge {
                vec![b"FUNCTION", b"LOAD", b"REPLACE", code]
            } else {
                vec![b"FUNCTION", b"LOAD", code]
            };
            super::execute(server, &mut c, &mut out, &args);
            if out.buf.first() == Some(&b'-') {
                return Err(failed());
            }
        }
    }
    let folder =
        crate::engine::leaderboard::disk::folder(std::path::Path::new(&server.config.read().dir));
    let now = unix_ms();
    let mut all = server.keyspace.lock_all(true);
    if !flush && !merge {
        let clash = loaded.keys.iter().any(|k| {
            let idx = server.keyspace.shard_of(&k.key);
            all.guard(idx)
                .and_then(|g| g.shard().dbs.get(k.db))
                .is_some_and(|d| d.peek(&k.key, now).is_some())
        });
        if clash {
            tracing::warn!("DEBUG RELOAD NOFLUSH: a key of the file is already there");
            return Err(failed());
        }
    }
    if flush {
        for g in all.guards_mut() {
            if let Some(s) = g.shard_mut() {
                for db in s.dbs.iter_mut() {
                    db.clear();
                }
            }
        }
    }
    let count = loaded.keys.len();
    for mut k in loaded.keys {
        if let Value::Leaderboard(b) = &mut k.value {
            for e in b.place_archives(&folder, &k.key, k.db as u64, true) {
                tracing::warn!("{e}");
            }
            server.season_timers.arm_board(b, k.db, &k.key);
        }
        let idx = server.keyspace.shard_of(&k.key);
        if let Some(db) = all
            .guard_mut(idx)
            .and_then(|g| g.shard_mut())
            .and_then(|s| s.dbs.get_mut(k.db))
        {
            if merge {
                db.remove(&k.key);
            }
            db.insert_with_expiry(&k.key, k.value, k.expire_ms, now);
        }
    }
    drop(all);
    super::server::tracking::flushed(ctx);
    tracing::warn!("DB reloaded by DEBUG RELOAD ({count} keys)");
    ctx.out.ok();
    Ok(())
}

/// Empties every database (a failed RELOAD after its flush, as Redis).
fn empty_all(ctx: &mut Ctx) {
    let mut all = ctx.server.keyspace.lock_all(true);
    for g in all.guards_mut() {
        if let Some(s) = g.shard_mut() {
            for db in s.dbs.iter_mut() {
                db.clear();
            }
        }
    }
    drop(all);
    super::server::tracking::flushed(ctx);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_numbers_read_their_prefix() {
        assert_eq!(c_atoi(b"1"), 1);
        assert_eq!(c_atoi(b"12abc"), 12);
        assert_eq!(c_atoi(b"abc"), 0);
        assert_eq!(c_atoi(b"-3"), -3);
        assert_eq!(c_atof(b"0.25"), 0.25);
        assert_eq!(c_atof(b"abc"), 0.0);
        assert_eq!(c_atof(b"1.5s"), 1.5);
    }
}
