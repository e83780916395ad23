//! DUMP and RESTORE: a key's value as an RDB payload (the value in RDB
//! version 10's encoding, the version, a CRC-64), byte for byte what
//! redis-server 7.0 writes and reads, so keys move between the two. The
//! encoding itself is `engine::rdb`.

use super::args;
use super::table::{flags::*, CommandSpec, KeySpec};
use super::Ctx;
use crate::engine::rdb::{decode, encode};
use crate::error::{CmdError, CmdResult};
use crate::state::notify::Class;

const fn keyspace(
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: super::table::Handler,
    [summary, since, complexity]: [&'static str; 3],
) -> CommandSpec {
    CommandSpec::new(name, arity, flags, KeySpec::FIRST, handler)
        .documented("generic", summary, since, complexity)
}

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    keyspace(
        "dump",
        2,
        READONLY,
        dump,
        [
            "Return a serialized version of the value stored at the specified key.",
            "2.6.0",
            "O(1) to access the key and additional O(N*M) to serialize it, where N is the number of Redis objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1).",
        ],
    ),
    keyspace(
        "restore",
        -4,
        WRITE | DENYOOM,
        restore,
        [
            "Create a key using the provided serialized value, previously obtained using DUMP.",
            "2.6.0",
            "O(1) to create the new key and additional O(N*M) to reconstruct the serialized value, where N is the number of Redis objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1). However for sorted set values the complexity is O(N*M*log(N)) because inserting values into sorted sets is O(log(N)).",
        ],
    ),
];

fn dump(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let opts = ctx.server.config.read().rdb_options();
    match ctx.keys.entry(a[1])? {
        Some(e) => {
            let payload = encode::dump_payload(&e.value, opts);
            ctx.out.bulk(&payload);
        }
        None => ctx.out.null(),
    }
    Ok(())
}

/// RESTORE's options.
struct RestoreOptions {
    replace: bool,
    absttl: bool,
    idle: Option<u64>,
    freq: Option<u8>,
}

fn restore_options(a: &[&[u8]]) -> Result<RestoreOptions, CmdError> {
    let mut o = RestoreOptions {
        replace: false,
        absttl: false,
        idle: None,
        freq: None,
    };
    let mut j = 4;
    while j < a.len() {
        let more = j + 1 < a.len();
        if args::is(a[j], "replace") {
            o.replace = true;
        } else if args::is(a[j], "absttl") {
            o.absttl = true;
        } else if args::is(a[j], "idletime") && more && o.freq.is_none() {
            let n = args::int(a[j + 1])?;
            if n < 0 {
                return Err(CmdError::err("Invalid IDLETIME value, must be >= 0"));
            }
            o.idle = Some(n as u64);
            j += 1;
        } else if args::is(a[j], "freq") && more && o.idle.is_none() {
            let n = args::int(a[j + 1])?;
            if !(0..=255).contains(&n) {
                return Err(CmdError::err("Invalid FREQ value, must be >= 0 and <= 255"));
            }
            o.freq = Some(n as u8);
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    Ok(o)
}

/// RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f]: the
/// checks in Redis 7.0's order (options, BUSYKEY, TTL, payload trailer,
/// payload body). A TTL already in the past removes the key (REPLACE) and
/// answers OK. A relative TTL is logged as an absolute one.
fn restore(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let key = a[1];
    let o = restore_options(a)?;
    let now = ctx.keys.now_ms;
    let exists = ctx.keys.part(key)?.contains(key, now);
    if exists && !o.replace {
        return Err(CmdError::line("BUSYKEY Target key name already exists."));
    }
    let ttl = args::int(a[2])?;
    if ttl < 0 {
        return Err(CmdError::err("Invalid TTL value, must be >= 0"));
    }
    if !decode::payload_ok(a[3]) {
        return Err(CmdError::err("DUMP payload version or checksum are wrong"));
    }
    let limits = ctx.server.config.read().rdb_limits();
    let value = match decode::payload_value(a[3], &limits) {
        Ok(Some(v)) => v,
        Ok(None) | Err(_) => return Err(CmdError::err("Bad data format")),
    };
    let at = match (ttl, o.absttl) {
        (0, _) => None,
        (t, true) => Some(t as u64),
        (t, false) => Some((t as u64).saturating_add(now)),
    };
    if at.is_some_and(|t| t <= now) && !ctx.server.aof.loading() {
        if exists && ctx.keys.part_mut(key)?.remove(key).is_some() {
            ctx.keys.propagate_as(vec![b"DEL".to_vec(), key.to_vec()]);
            ctx.keys.modified(key)?;
            ctx.keys.notify(Class::GENERIC, "del", key);
        }
        ctx.out.ok();
        return Ok(());
    }
    let part = ctx.keys.part_mut(key)?;
    part.remove(key);
    part.insert_with_expiry(key, value, at, now);
    if let (Some(idle), Some(e)) = (o.idle, part.peek(key, now)) {
        e.set_idle_secs(idle, now);
    }
    if let (Some(t), false) = (at, o.absttl) {
        let mut cmd: Vec<Vec<u8>> = a.iter().map(|x| x.to_vec()).collect();
        cmd[2] = itoa::Buffer::new().format(t).as_bytes().to_vec();
        cmd.push(b"ABSTTL".to_vec());
        ctx.keys.propagate_as(cmd);
    }
    ctx.keys.modified(key)?;
    ctx.keys.notify(Class::GENERIC, "restore", key);
    ctx.out.ok();
    Ok(())
}
