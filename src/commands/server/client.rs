//! CLIENT and its subcommands: the connection's own settings (name, library,
//! reply mode) and the registry of connected clients (LIST, INFO, KILL).
//! The tracking subcommands' handlers are in `tracking`.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::super::args::{is, text};
use super::super::table::{flags::*, table, CommandSpec, Handler, KeySpec};
use super::super::Ctx;
use super::tracking;

use crate::error::{CmdError, CmdResult};
use crate::protocol::number::parse_i64;
use crate::state::client::{ClientInfo, ReplyMode, Unblock};
use crate::state::pubsub::Kind;
use crate::state::unix_ms;

const fn sub(
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: Handler,
    summary: &'static str,
    since: &'static str,
) -> CommandSpec {
    CommandSpec {
        group: "connection",
        summary,
        since,
        complexity: "O(1)",
        ..CommandSpec::new(name, arity, flags, KeySpec::None, handler)
    }
}

const OWN: u32 = NOSCRIPT | LOADING | STALE;
const ADMIN_FLAGS: u32 = ADMIN | NOSCRIPT | LOADING | STALE;

/// CLIENT's subcommands.
pub const SUBCOMMANDS: &[CommandSpec] = &[
    sub(
        "id",
        2,
        OWN,
        id,
        "Returns the client ID for the current connection",
        "5.0.0",
    ),
    sub(
        "setname",
        3,
        OWN,
        setname,
        "Set the current connection name",
        "2.6.9",
    ),
    sub(
        "getname",
        2,
        OWN,
        getname,
        "Get the current connection name",
        "2.6.9",
    ),
    CommandSpec {
        complexity: "O(N) where N is the number of client connections",
        ..sub(
            "list",
            -2,
            ADMIN_FLAGS,
            list,
            "Get the list of client connections",
            "2.4.0",
        )
    },
    sub(
        "info",
        2,
        OWN,
        info,
        "Returns information about the current client connection.",
        "6.2.0",
    ),
    CommandSpec {
        complexity: "O(N) where N is the number of client connections",
        ..sub(
            "kill",
            -3,
            ADMIN_FLAGS,
            kill,
            "Kill the connection of a client",
            "2.4.0",
        )
    },
    sub(
        "setinfo",
        4,
        OWN,
        setinfo,
        "Set client or connection specific info",
        "7.2.0",
    ),
    sub(
        "no-evict",
        3,
        ADMIN_FLAGS,
        no_evict,
        "Set client eviction mode for the current connection",
        "7.0.0",
    ),
    sub(
        "pause",
        -3,
        ADMIN_FLAGS,
        pause,
        "Stop processing commands from clients for some time",
        "3.0.0",
    ),
    sub(
        "unpause",
        2,
        ADMIN_FLAGS,
        unpause,
        "Resume processing of clients that were paused",
        "6.2.0",
    ),
    sub(
        "no-touch",
        3,
        OWN,
        no_touch,
        "Controls whether commands sent by the client will alter the LRU/LFU of the keys they access.",
        "7.2.0",
    ),
    sub(
        "reply",
        3,
        OWN,
        reply,
        "Instruct the server whether to reply to commands",
        "3.2.0",
    ),
    CommandSpec {
        complexity: "O(1). Some options may introduce additional complexity.",
        ..sub(
            "tracking",
            -3,
            OWN,
            tracking::tracking,
            "Enable or disable server assisted client side caching support",
            "6.0.0",
        )
    },
    sub(
        "caching",
        3,
        OWN,
        tracking::caching,
        "Instruct the server about tracking or not keys in the next request",
        "6.0.0",
    ),
    CommandSpec {
        complexity: "O(log N) where N is the number of client connections",
        ..sub(
            "unblock",
            -3,
            ADMIN_FLAGS,
            unblock,
            "Unblock a client blocked in a blocking command from a different connection",
            "5.0.0",
        )
    },
    sub(
        "getredir",
        2,
        OWN,
        tracking::getredir,
        "Get tracking notifications redirection client ID if any",
        "6.0.0",
    ),
    sub(
        "trackinginfo",
        2,
        OWN,
        tracking::trackinginfo,
        "Return information about server assisted client side caching for the current connection",
        "6.2.0",
    ),
    sub(
        "help",
        2,
        LOADING | STALE,
        client_help,
        "Show helpful text about the different subcommands",
        "5.0.0",
    ),
];

/// Checks a client name as CLIENT SETNAME does (no spaces or newlines).
pub fn validate_client_name(name: &[u8]) -> Result<(), CmdError> {
    if !printable(name) {
        return Err(CmdError::err(
            "Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(())
}

/// Whether every byte is a visible ASCII character (`!` to `~`).
fn printable(s: &[u8]) -> bool {
    s.iter().all(|&c| (b'!'..=b'~').contains(&c))
}

fn id(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    ctx.out.int(ctx.client.id() as i64);
    Ok(())
}

fn setname(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    validate_client_name(a[2])?;
    *ctx.client.info.name.lock() = a[2].to_vec();
    ctx.out.ok();
    Ok(())
}

fn getname(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    let name = ctx.client.info.name.lock().clone();
    if name.is_empty() {
        ctx.out.null();
    } else {
        ctx.out.bulk(&name);
    }
    Ok(())
}

fn setinfo(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (attr, value) = (a[2], a[3]);
    let lib_name = if is(attr, "lib-name") {
        true
    } else if is(attr, "lib-ver") {
        false
    } else {
        return Err(CmdError::err(format!(
            "Unrecognized option '{}'",
            text(attr)
        )));
    };
    if !printable(value) {
        return Err(CmdError::err(format!(
            "{} cannot contain spaces, newlines or special characters.",
            text(attr)
        )));
    }
    let mut lib = ctx.client.info.lib.lock();
    if lib_name {
        lib.0 = value.to_vec();
    } else {
        lib.1 = value.to_vec();
    }
    drop(lib);
    ctx.out.ok();
    Ok(())
}

fn no_evict(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let on = on_off(a[2])?;
    ctx.client.info.no_evict.store(on, Ordering::Relaxed);
    ctx.out.ok();
    Ok(())
}

/// CLIENT PAUSE timeout [WRITE|ALL]: see `state::server::ClientPause`.
fn pause(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    if a.len() > 4 {
        return Err(CmdError::err(format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
            text(a[1])
        )));
    }
    let ms = match parse_i64(a[2]) {
        Some(ms) if ms < 0 => return Err(CmdError::err("timeout is negative")),
        Some(ms) => ms as u64,
        None => return Err(CmdError::err("timeout is not an integer or out of range")),
    };
    let all = match a.get(3) {
        None => true,
        Some(m) if is(m, "all") => true,
        Some(m) if is(m, "write") => false,
        Some(_) => return Err(CmdError::err("CLIENT PAUSE mode must be WRITE or ALL")),
    };
    let now = std::time::Instant::now();
    // A timeout past what the clock can add pauses for a century.
    let until = now
        .checked_add(std::time::Duration::from_millis(ms))
        .or_else(|| now.checked_add(std::time::Duration::from_secs(100 * 365 * 86400)))
        .unwrap_or(now);
    ctx.server.pause.pause(all, until);
    ctx.out.ok();
    Ok(())
}

/// CLIENT UNPAUSE: the paused clients' commands run now.
fn unpause(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    ctx.server.wake_client(ctx.server.pause.unpause());
    ctx.out.ok();
    Ok(())
}

/// CLIENT NO-TOUCH ON|OFF (Redis 7.2): while on, the client's commands
/// leave the access time of the keys they read (OBJECT IDLETIME) as it
/// was; TOUCH still updates it.
fn no_touch(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    ctx.client.no_touch = on_off(a[2])?;
    ctx.out.ok();
    Ok(())
}

/// `CLIENT UNBLOCK client-id [TIMEOUT|ERROR]`: ends a blocked client's
/// wait as a timeout would, or with the UNBLOCKED error; 1 when that client
/// was blocked, else 0.
fn unblock(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    if a.len() > 4 {
        return Err(CmdError::line(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
            String::from_utf8_lossy(a[1])
        )));
    }
    let id = parse_i64(a[2]).ok_or(CmdError::NotInteger)?;
    let how = match a.get(3) {
        None => Unblock::Timeout,
        Some(w) if is(w, "timeout") => Unblock::Timeout,
        Some(w) if is(w, "error") => Unblock::Error,
        Some(_) => {
            return Err(CmdError::line(
                "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
            ))
        }
    };
    let done = u64::try_from(id)
        .ok()
        .and_then(|id| ctx.server.clients.get(&id).map(|c| c.value().clone()))
        .is_some_and(|c| c.request_unblock(how));
    ctx.out.int(i64::from(done));
    Ok(())
}

fn on_off(arg: &[u8]) -> Result<bool, CmdError> {
    if is(arg, "on") {
        Ok(true)
    } else if is(arg, "off") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

/// CLIENT REPLY: the dispatcher drops replies according to the mode.
fn reply(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let mode = if is(a[2], "on") {
        ReplyMode::On
    } else if is(a[2], "off") {
        ReplyMode::Off
    } else if is(a[2], "skip") {
        ReplyMode::Skip
    } else {
        return Err(CmdError::Syntax);
    };
    ctx.client.reply_mode = mode;
    ctx.out.ok();
    Ok(())
}

/// The client types CLIENT LIST / KILL filter on: a replica of this
/// server, the link from this server's primary, a connection that
/// subscribes to something (`pubsub`), or `normal`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ClientType {
    Normal,
    PubSub,
    Master,
    Replica,
}

impl ClientType {
    fn of(c: &ClientInfo) -> ClientType {
        let kind = c.repl_kind.load(Ordering::Relaxed);
        if kind == crate::state::client::REPL_REPLICA {
            ClientType::Replica
        } else if kind == crate::state::client::REPL_MASTER {
            ClientType::Master
        } else if c.is_subscriber() {
            ClientType::PubSub
        } else {
            ClientType::Normal
        }
    }
}

fn client_type(arg: &[u8]) -> Result<ClientType, CmdError> {
    if is(arg, "normal") {
        Ok(ClientType::Normal)
    } else if is(arg, "pubsub") {
        Ok(ClientType::PubSub)
    } else if is(arg, "master") {
        Ok(ClientType::Master)
    } else if is(arg, "replica") || is(arg, "slave") {
        Ok(ClientType::Replica)
    } else {
        Err(CmdError::err(format!(
            "Unknown client type '{}'",
            text(arg)
        )))
    }
}

/// Every connected client, oldest first.
fn clients_by_id(ctx: &Ctx) -> Vec<Arc<ClientInfo>> {
    let mut v: Vec<Arc<ClientInfo>> = ctx
        .server
        .clients
        .iter()
        .map(|e| e.value().clone())
        .collect();
    v.sort_by_key(|c| c.id);
    v
}

fn list(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let mut ids: Option<Vec<u64>> = None;
    let mut only: Option<ClientType> = None;
    match a {
        [_, _] => {}
        [_, _, ty, t] if is(ty, "type") => only = Some(client_type(t)?),
        [_, _, id, rest @ ..] if is(id, "id") && !rest.is_empty() => {
            let mut v = Vec::with_capacity(rest.len());
            for r in rest {
                // Any integer is accepted; ids below 1 simply match nothing.
                let n = parse_i64(r).ok_or_else(|| CmdError::err("Invalid client ID"))?;
                if n >= 1 {
                    v.push(n as u64);
                }
            }
            ids = Some(v);
        }
        _ => return Err(CmdError::Syntax),
    }
    let mut text = String::new();
    {
        let now = unix_ms();
        let slots = table().all_slots();
        for c in clients_by_id(ctx) {
            if ids.as_ref().is_some_and(|ids| !ids.contains(&c.id)) {
                continue;
            }
            if only.is_some_and(|t| t != ClientType::of(&c)) {
                continue;
            }
            client_line(&mut text, ctx.client.id(), &c, "client|list", &slots, now);
        }
    }
    ctx.out.verbatim(text.as_bytes());
    Ok(())
}

fn info(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    let mut text = String::new();
    let me = ctx.client.info.clone();
    client_line(
        &mut text,
        ctx.client.id(),
        &me,
        "client|info",
        &table().all_slots(),
        unix_ms(),
    );
    ctx.out.verbatim(text.as_bytes());
    Ok(())
}

/// A client's CLIENT LIST line as it runs `current` (ACL LOG's
/// `client-info`).
pub fn client_info_line(c: &ClientInfo, current: &str) -> String {
    let mut s = String::new();
    client_line(&mut s, c.id, c, current, &table().all_slots(), unix_ms());
    s.trim_end().to_string()
}

/// Appends one CLIENT LIST line (Redis 7.0's fields, then 7.2's lib-name
/// and lib-ver). For the calling client, `current` names the command
/// running now.
fn client_line(
    out: &mut String,
    me_id: u64,
    c: &ClientInfo,
    current: &str,
    slots: &[&super::super::table::Command],
    now_ms: u64,
) {
    let me = c.id == me_id;
    let name = String::from_utf8_lossy(&c.name.lock()).into_owned();
    let (lib_name, lib_ver) = {
        let lib = c.lib.lock();
        (
            String::from_utf8_lossy(&lib.0).into_owned(),
            String::from_utf8_lossy(&lib.1).into_owned(),
        )
    };
    let multi = c.multi.load(Ordering::Relaxed);
    let no_evict = c.no_evict.load(Ordering::Relaxed);
    let mut flags = String::new();
    match c.repl_kind.load(Ordering::Relaxed) {
        crate::state::client::REPL_REPLICA => flags.push('S'),
        crate::state::client::REPL_MASTER => flags.push('M'),
        _ => {}
    }
    if c.is_monitor() {
        flags.push('O');
    }
    if c.is_subscriber() {
        flags.push('P');
    }
    if multi != u64::MAX {
        flags.push('x');
    }
    if c.is_blocked() {
        flags.push('b');
    }
    flags.push_str(&c.tracking.letters());
    if no_evict {
        flags.push('e');
    }
    if flags.is_empty() {
        flags.push('N');
    }
    let cmd = if me {
        current.to_string()
    } else {
        slots
            .get(c.last_cmd.load(Ordering::Relaxed))
            .map_or_else(|| "NULL".to_string(), |s| s.full_name.clone())
    };
    let age = now_ms.saturating_sub(c.created_ms) / 1000;
    let idle = if me {
        0
    } else {
        now_ms.saturating_sub(c.last_cmd_ms.load(Ordering::Relaxed)) / 1000
    };
    let qbuf = c.qbuf.load(Ordering::Relaxed);
    let qbuf_free = c.qbuf_free.load(Ordering::Relaxed);
    let pending = OutputFigures::of(c);
    // The read buffer a connection starts with (see `server::connection`).
    let rbs: usize = 16 * 1024;
    let _ = writeln!(
        out,
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} \
         multi={} qbuf={} qbuf-free={} argv-mem=0 multi-mem=0 rbs={} rbp={} obl={} oll={} omem={} \
         tot-mem={} events=r{} cmd={} user={} redir={} resp={} lib-name={} lib-ver={}",
        c.id,
        c.addr,
        c.laddr,
        c.fd.load(Ordering::Relaxed),
        name,
        age,
        idle,
        flags,
        c.db.load(Ordering::Relaxed),
        c.subscriptions(Kind::Channel),
        c.subscriptions(Kind::Pattern),
        c.subscriptions(Kind::Shard),
        if multi == u64::MAX { -1 } else { multi as i64 },
        qbuf,
        qbuf_free,
        rbs,
        rbs,
        pending.obl,
        pending.oll,
        pending.omem,
        rbs + qbuf + qbuf_free + pending.obl + pending.omem,
        if pending.obl > 0 { "w" } else { "" },
        cmd,
        c.user.lock(),
        c.tracking.redirect_shown(),
        c.resp.load(Ordering::Relaxed),
        lib_name,
        lib_ver,
    );
}

/// A client's pending output in Redis's terms: Redis keeps the first
/// 16 KiB of a client's replies in a fixed buffer (`obl` bytes used) and
/// the rest in a list of blocks (`oll` blocks, `omem` bytes). Rostrum's
/// pending output (unwritten replies and queued messages) is shown as if
/// laid out the same way.
pub struct OutputFigures {
    /// Bytes in the first 16 KiB.
    pub obl: usize,
    /// Blocks of 16 KiB beyond it.
    pub oll: usize,
    /// Bytes beyond it.
    pub omem: usize,
}

impl OutputFigures {
    const BLOCK: usize = 16 * 1024;

    /// The figures of client `c` now.
    pub fn of(c: &ClientInfo) -> Self {
        let pending = c.outbox.total();
        let obl = pending.min(Self::BLOCK);
        let omem = pending - obl;
        OutputFigures {
            obl,
            oll: omem.div_ceil(Self::BLOCK),
            omem,
        }
    }
}

/// What CLIENT KILL's filters select.
#[derive(Default)]
struct KillFilter {
    id: Option<u64>,
    addr: Option<Vec<u8>>,
    laddr: Option<Vec<u8>>,
    /// `USER`: the clients authenticated as this user.
    user: Option<String>,
    /// `TYPE` (the last one given).
    ty: Option<ClientType>,
    max_age_s: Option<u64>,
    skip_me: bool,
}

impl KillFilter {
    fn parse(ctx: &Ctx, args: &[&[u8]]) -> Result<Self, CmdError> {
        let mut f = KillFilter {
            skip_me: true,
            ..KillFilter::default()
        };
        if !args.len().is_multiple_of(2) {
            return Err(CmdError::Syntax);
        }
        for pair in args.chunks(2) {
            let (opt, v) = (pair[0], pair[1]);
            if is(opt, "id") {
                match parse_i64(v) {
                    Some(n) if n > 0 => f.id = Some(n as u64),
                    _ => return Err(CmdError::err("client-id should be greater than 0")),
                }
            } else if is(opt, "type") {
                f.ty = Some(client_type(v)?);
            } else if is(opt, "addr") {
                f.addr = Some(v.to_vec());
            } else if is(opt, "laddr") {
                f.laddr = Some(v.to_vec());
            } else if is(opt, "user") {
                let name = text(v);
                if super::super::acl::acl(ctx.server).user(&name).is_none() {
                    return Err(CmdError::err(format!("No such user '{name}'")));
                }
                f.user = Some(name);
            } else if is(opt, "skipme") {
                f.skip_me = on_off_yes_no(v)?;
            } else if is(opt, "maxage") {
                match parse_i64(v) {
                    Some(n) if n >= 0 => f.max_age_s = Some(n as u64),
                    _ => return Err(CmdError::Syntax),
                }
            } else {
                return Err(CmdError::Syntax);
            }
        }
        Ok(f)
    }

    fn selects(&self, c: &ClientInfo, me: u64, now_ms: u64) -> bool {
        self.ty.is_none_or(|t| t == ClientType::of(c))
            && self.id.is_none_or(|id| id == c.id)
            && self.addr.as_deref().is_none_or(|a| a == c.addr.as_bytes())
            && self
                .laddr
                .as_deref()
                .is_none_or(|a| a == c.laddr.as_bytes())
            && self.user.as_deref().is_none_or(|u| *c.user.lock() == u)
            && self
                .max_age_s
                .is_none_or(|m| now_ms.saturating_sub(c.created_ms) / 1000 >= m)
            && !(self.skip_me && c.id == me)
    }
}

fn on_off_yes_no(arg: &[u8]) -> Result<bool, CmdError> {
    if is(arg, "yes") {
        Ok(true)
    } else if is(arg, "no") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

fn kill(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let me = ctx.client.id();
    if a.len() == 3 {
        // The old form: CLIENT KILL ip:port.
        let target = clients_by_id(ctx)
            .into_iter()
            .find(|c| c.addr.as_bytes() == a[2])
            .ok_or_else(|| CmdError::err("No such client"))?;
        close(ctx, &target, me);
        ctx.out.ok();
        return Ok(());
    }
    let filter = KillFilter::parse(ctx, &a[2..])?;
    let now = unix_ms();
    let mut killed = 0;
    for c in clients_by_id(ctx) {
        if filter.selects(&c, me, now) {
            close(ctx, &c, me);
            killed += 1;
        }
    }
    ctx.out.int(killed);
    Ok(())
}

/// Closes a connection; the caller's own closes after this reply.
fn close(ctx: &mut Ctx, c: &ClientInfo, me: u64) {
    if c.id == me {
        ctx.client.close_after_reply = true;
    } else {
        c.kill();
    }
}

fn client_help(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    ctx.out.help(
        "CLIENT",
        &[
            "CACHING (YES|NO)",
            "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
            "GETREDIR",
            "    Return the client ID we are redirecting to when tracking is enabled.",
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port>",
            "    Kill connection made from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Kill connections. Options are:",
            "    * ADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made from the specified address",
            "    * LADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made to specified local address",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Kill connections by type.",
            "    * USER <username>",
            "      Kill connections authenticated by <username>.",
            "    * SKIPME (YES|NO)",
            "      Skip killing current connection (default: yes).",
            "    * ID <client-id>",
            "      Kill connection by client id.",
            "    * MAXAGE <maxage>",
            "      Kill connections older than the specified age.",
            "LIST [options ...]",
            "    Return information about client connections. Options:",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Return clients of specified type.",
            "    * ID <client-id> [<client-id> ...]",
            "      Return clients of specified IDs only.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
            "         [OPTIN] [OPTOUT] [NOLOOP]",
            "    Control server assisted client side caching.",
            "TRACKINGINFO",
            "    Report tracking status for the current connection.",
            "SETINFO <option> <value>",
            "    Set client meta attr. Options are:",
            "    * LIB-NAME: the client lib name.",
            "    * LIB-VER: the client lib version.",
            "NO-EVICT (ON|OFF)",
            "    Protect current client connection from eviction.",
        ],
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_output_is_shown_in_redis_layout() {
        let c = ClientInfo::new(1, String::new(), String::new(), 0);
        let f = OutputFigures::of(&c);
        assert_eq!((f.obl, f.oll, f.omem), (0, 0, 0));
        c.outbox.set_replies(100);
        let f = OutputFigures::of(&c);
        assert_eq!((f.obl, f.oll, f.omem), (100, 0, 0));
        c.outbox.set_replies(40_000);
        let f = OutputFigures::of(&c);
        assert_eq!((f.obl, f.oll, f.omem), (16384, 2, 40_000 - 16384));
    }
}
