//! DUMP, RESTORE and MIGRATE: a key's value as an RDB payload (the value
//! in RDB version 10's encoding, the version, a CRC-64), byte for byte what
//! redis-server 7.0 writes and reads, so keys move between the two. The
//! encoding itself is `engine::rdb`.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use smallvec::SmallVec;

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
    CommandSpec::new(
        "migrate",
        -6,
        WRITE,
        KeySpec::Find(migrate_keys),
        migrate,
    )
    .documented(
        "generic",
        "Atomically transfer a key from a Redis instance to another one.",
        "2.6.0",
        "This command actually executes a DUMP+DEL in the source instance, and a RESTORE in the target instance. See the pages of these commands for time complexity. Also an O(N) data transfer between the two instances is performed.",
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
    let mut value = match decode::payload_value(a[3], &limits) {
        Ok(Some(v)) => v,
        Ok(None) | Err(_) => return Err(CmdError::err("Bad data format")),
    };
    // A payload carries a board's periods on disk whole: they go to files
    // of this board (issue 17).
    if let crate::engine::Value::Leaderboard(b) = &mut value {
        let dir = ctx.server.config.read().dir.clone();
        let folder = crate::engine::leaderboard::disk::folder(std::path::Path::new(&dir));
        for e in b.place_archives(&folder, key, ctx.keys.db as u64, false) {
            tracing::warn!("{e}");
        }
        // The server's timer rolls it at its boundary, as after LB.CREATE.
        ctx.server.season_timers.arm_board(b, ctx.keys.db, key);
    }
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

/// MIGRATE's keys: those after KEYS (when the key argument is empty), else
/// the key argument.
fn migrate_keys(a: &[&[u8]]) -> SmallVec<[usize; 4]> {
    let mut keys = SmallVec::new();
    let mut i = 6;
    while i < a.len() {
        if args::is(a[i], "auth") {
            i += 2;
        } else if args::is(a[i], "auth2") {
            i += 3;
        } else if args::is(a[i], "keys") {
            if a.get(3).is_some_and(|k| k.is_empty()) {
                keys.extend(i + 1..a.len());
                return keys;
            }
            break;
        } else {
            i += 1;
        }
    }
    if a.len() > 3 {
        keys.push(3);
    }
    keys
}

/// MIGRATE's options.
#[derive(Default)]
struct MigrateOptions<'a> {
    copy: bool,
    replace: bool,
    auth: Option<(Option<&'a [u8]>, &'a [u8])>,
    keys_at: Option<usize>,
}

fn migrate_options<'a>(a: &[&'a [u8]]) -> Result<MigrateOptions<'a>, CmdError> {
    let mut o = MigrateOptions::default();
    let mut j = 6;
    while j < a.len() {
        let left = a.len() - j - 1;
        if args::is(a[j], "copy") {
            o.copy = true;
        } else if args::is(a[j], "replace") {
            o.replace = true;
        } else if args::is(a[j], "auth") && left >= 1 {
            o.auth = Some((None, a[j + 1]));
            j += 1;
        } else if args::is(a[j], "auth2") && left >= 2 {
            o.auth = Some((Some(a[j + 1]), a[j + 2]));
            j += 2;
        } else if args::is(a[j], "keys") {
            if !a[3].is_empty() {
                return Err(CmdError::err(
                    "When using MIGRATE KEYS option, the key argument must be set to the empty string",
                ));
            }
            o.keys_at = Some(j + 1);
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    Ok(o)
}

/// Why talking to the target failed.
enum Link {
    Connect,
    Write,
    Read,
}

fn resp_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Sends AUTH, SELECT and the RESTOREs in one write, then reads one reply
/// line each: `Ok(error line or None)` per command sent.
fn talk(
    host: &[u8],
    port: &[u8],
    timeout: Duration,
    commands: &[Vec<Vec<u8>>],
) -> Result<Vec<Option<String>>, Link> {
    let addr = format!(
        "{}:{}",
        String::from_utf8_lossy(host),
        String::from_utf8_lossy(port)
    );
    let target = addr
        .to_socket_addrs()
        .map_err(|_| Link::Connect)?
        .next()
        .ok_or(Link::Connect)?;
    // Redis connects without blocking: a refused connection shows at its
    // first write, only a connection that never completes is a connect
    // timeout.
    let sock = TcpStream::connect_timeout(&target, timeout).map_err(|e| match e.kind() {
        std::io::ErrorKind::TimedOut => Link::Connect,
        _ => Link::Write,
    })?;
    sock.set_read_timeout(Some(timeout))
        .map_err(|_| Link::Connect)?;
    sock.set_write_timeout(Some(timeout))
        .map_err(|_| Link::Connect)?;
    let mut buf = Vec::new();
    for c in commands {
        let args: Vec<&[u8]> = c.iter().map(|x| x.as_slice()).collect();
        resp_command(&mut buf, &args);
    }
    (&sock).write_all(&buf).map_err(|_| Link::Write)?;
    let mut r = BufReader::new(&sock);
    let mut replies = Vec::with_capacity(commands.len());
    for _ in commands {
        let mut line = Vec::new();
        let n = r.read_until(b'\n', &mut line).map_err(|_| Link::Read)?;
        if n == 0 || !line.ends_with(b"\r\n") {
            return Err(Link::Read);
        }
        line.truncate(line.len() - 2);
        replies.push(match line.first() {
            Some(b'-') => Some(String::from_utf8_lossy(&line[1..]).into_owned()),
            Some(b'+') | Some(b':') => None,
            _ => return Err(Link::Read),
        });
    }
    Ok(replies)
}

/// MIGRATE host port key|"" db timeout [COPY] [REPLACE] [AUTH pw]
/// [AUTH2 user pw] [KEYS key ...]: DUMPs the keys, RESTOREs them on the
/// target (one connection, one write), and deletes those the target took
/// unless COPY. The command waits for the target (as Redis does), holding
/// its keys' shards.
fn migrate(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let o = migrate_options(a)?;
    let timeout = args::int(a[5])?;
    let db = args::int(a[4])?;
    if i32::try_from(db).is_err() {
        return Err(CmdError::NotInteger);
    }
    let timeout = Duration::from_millis(if timeout <= 0 { 1000 } else { timeout as u64 });
    let keys: Vec<&[u8]> = match o.keys_at {
        Some(i) => a[i..].to_vec(),
        None => vec![a[3]],
    };
    let opts = ctx.server.config.read().rdb_options();
    let now = ctx.keys.now_ms;
    let mut found: Vec<&[u8]> = Vec::new();
    let mut commands: Vec<Vec<Vec<u8>>> = Vec::new();
    if let Some((user, pass)) = o.auth {
        let mut c = vec![b"AUTH".to_vec()];
        c.extend(user.map(|u| u.to_vec()));
        c.push(pass.to_vec());
        commands.push(c);
    }
    commands.push(vec![b"SELECT".to_vec(), db.to_string().into_bytes()]);
    let head = commands.len();
    for &k in &keys {
        let Some(e) = ctx.keys.entry(k)? else {
            continue;
        };
        let ttl = e.expire_at().map_or(0, |t| t.saturating_sub(now).max(1));
        let mut c = vec![
            b"RESTORE".to_vec(),
            k.to_vec(),
            ttl.to_string().into_bytes(),
            encode::dump_payload(&e.value, opts),
        ];
        if o.replace {
            c.push(b"REPLACE".to_vec());
        }
        commands.push(c);
        found.push(k);
    }
    if found.is_empty() {
        ctx.out.simple(b"NOKEY");
        return Ok(());
    }
    let (host, port) = (a[1], a[2]);
    let replies = match super::persistence::blocking(|| talk(host, port, timeout, &commands)) {
        Ok(r) => r,
        Err(Link::Connect) => {
            return Err(CmdError::line(
                "IOERR error or timeout connecting to the client",
            ))
        }
        Err(Link::Write) => {
            return Err(CmdError::line(
                "IOERR error or timeout writing to target instance",
            ))
        }
        Err(Link::Read) => {
            return Err(CmdError::line(
                "IOERR error or timeout reading to target instance",
            ))
        }
    };
    if let Some(e) = replies[..head].iter().flatten().next() {
        return Err(CmdError::err(format!(
            "Target instance replied with error: {e}"
        )));
    }
    let mut error = None;
    let mut moved: Vec<&[u8]> = Vec::new();
    for (k, r) in found.iter().zip(&replies[head..]) {
        match r {
            Some(e) => error = Some(e.clone()),
            None => moved.push(k),
        }
    }
    if !o.copy && !moved.is_empty() {
        let mut del = vec![b"DEL".to_vec()];
        for &k in &moved {
            if ctx.keys.part_mut(k)?.remove(k).is_some() {
                ctx.keys.modified(k)?;
                ctx.keys.notify(Class::GENERIC, "del", k);
                del.push(k.to_vec());
            }
        }
        if del.len() > 1 {
            ctx.keys.propagate_as(del);
        }
    }
    match error {
        Some(e) => Err(CmdError::err(format!(
            "Target instance replied with error: {e}"
        ))),
        None => {
            ctx.out.ok();
            Ok(())
        }
    }
}
