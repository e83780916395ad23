//! Connection commands: PING, ECHO, QUIT, SELECT, AUTH, HELLO, RESET.

use std::sync::atomic::Ordering;

use super::args::{self, is};
use super::table::{flags::*, CommandSpec, KeySpec};
use super::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::state::client::ReplyMode;

/// The Redis version whose behaviour Rostrum matches.
pub const REDIS_VERSION: &str = "7.0.15";

const fn conn(
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: super::table::Handler,
    summary: &'static str,
) -> CommandSpec {
    CommandSpec {
        group: "connection",
        summary,
        ..CommandSpec::new(name, arity, flags, KeySpec::None, handler)
    }
}

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    conn("ping", -1, FAST | STALE, ping, "Ping the server"),
    conn("echo", 2, FAST, echo, "Echo the given string"),
    conn(
        "quit",
        -1,
        ALLOW_BUSY | NO_AUTH | LOADING | STALE | FAST,
        quit,
        "Close the connection",
    ),
    conn(
        "select",
        2,
        LOADING | STALE | FAST,
        select,
        "Change the selected database for the current connection",
    ),
    conn(
        "auth",
        -2,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY,
        auth,
        "Authenticate to the server",
    ),
    conn(
        "hello",
        -1,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY,
        hello,
        "Handshake with Redis",
    ),
    conn(
        "reset",
        1,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY,
        reset,
        "Reset the connection",
    ),
];

fn ping(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    // RESP2 subscribe mode: PING answers as a message would, `pong` and
    // the argument (or an empty string) in an array.
    if !ctx.out.resp3 && ctx.client.pubsub.active() && a.len() <= 2 {
        ctx.out.array(2);
        ctx.out.bulk(b"pong");
        ctx.out.bulk(a.get(1).copied().unwrap_or(b""));
        return Ok(());
    }
    match a.len() {
        1 => ctx.out.simple(b"PONG"),
        2 => ctx.out.bulk(a[1]),
        _ => return Err(CmdError::WrongArity("ping".into())),
    }
    Ok(())
}

fn echo(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    ctx.out.bulk(a[1]);
    Ok(())
}

fn quit(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    ctx.out.ok();
    ctx.client.close_after_reply = true;
    Ok(())
}

fn select(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let db = args::int(a[1])?;
    if db < 0 || db as usize >= ctx.server.keyspace.databases() {
        return Err(CmdError::DbIndexOutOfRange);
    }
    ctx.client.db = db as usize;
    ctx.keys.db = db as usize;
    ctx.client.info.db.store(db as usize, Ordering::Relaxed);
    ctx.out.ok();
    Ok(())
}

fn auth(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    match a.len() {
        2 => {
            let nopass = super::acl::acl(ctx.server)
                .user("default")
                .is_some_and(|u| u.nopass);
            if nopass {
                return Err(CmdError::err(
                    "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
                ));
            }
            super::acl::authenticate(ctx.server, ctx.client, b"default", a[1])?;
        }
        3 => super::acl::authenticate(ctx.server, ctx.client, a[1], a[2])?,
        _ => return Err(CmdError::Syntax),
    }
    ctx.out.ok();
    Ok(())
}

fn hello(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let mut proto = None;
    let mut i = 1;
    if a.len() > 1 {
        let v = args::int(a[1])
            .map_err(|_| CmdError::err("Protocol version is not an integer or out of range"))?;
        if !(2..=3).contains(&v) {
            return Err(CmdError::line("NOPROTO unsupported protocol version"));
        }
        proto = Some(v);
        i = 2;
    }
    let mut setname = None;
    while i < a.len() {
        let more = a.len() - i - 1;
        if is(a[i], "auth") && more >= 2 {
            super::acl::authenticate(ctx.server, ctx.client, a[i + 1], a[i + 2])?;
            i += 3;
        } else if is(a[i], "setname") && more >= 1 {
            let name = a[i + 1];
            super::server::validate_client_name(name)?;
            setname = Some(name.to_vec());
            i += 2;
        } else {
            return Err(CmdError::err(format!(
                "Syntax error in HELLO option '{}'",
                args::text(a[i])
            )));
        }
    }
    if !ctx.client.authenticated {
        return Err(CmdError::line("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"));
    }
    if let Some(name) = setname {
        *ctx.client.info.name.lock() = name;
    }
    if let Some(p) = proto {
        ctx.out.resp3 = p == 3;
        ctx.client.info.resp.store(p as usize, Ordering::Relaxed);
    }
    let out = &mut *ctx.out;
    out.map(7);
    out.bulk(b"server");
    out.bulk(b"redis");
    out.bulk(b"version");
    out.bulk(REDIS_VERSION.as_bytes());
    out.bulk(b"proto");
    out.int(if out.resp3 { 3 } else { 2 });
    out.bulk(b"id");
    out.int(ctx.client.id() as i64);
    out.bulk(b"mode");
    out.bulk(b"standalone");
    out.bulk(b"role");
    out.bulk(b"master");
    out.bulk(b"modules");
    out.array(0);
    Ok(())
}

fn reset(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    ctx.client.multi = None;
    ctx.client.multi_error = false;
    ctx.client.info.multi.store(u64::MAX, Ordering::Relaxed);
    super::unwatch_all(ctx.server, ctx.client, None);
    ctx.server
        .pubsub
        .forget(&ctx.client.info, &mut ctx.client.pubsub);
    super::lbwatch::forget(ctx.server, ctx.client);
    super::server::tracking::reset(ctx);
    super::server::monitor::leave(ctx.server, ctx.client);
    ctx.client.db = 0;
    ctx.keys.db = 0;
    ctx.client.info.db.store(0, Ordering::Relaxed);
    ctx.client.reply_mode = ReplyMode::On;
    ctx.client.info.no_evict.store(false, Ordering::Relaxed);
    ctx.client.info.name.lock().clear();
    *ctx.client.info.user.lock() = "default".to_string();
    ctx.client.acl_user = None;
    ctx.client.authenticated = !super::acl::default_needs_auth(ctx.server);
    ctx.out.resp3 = false;
    ctx.client.info.resp.store(2, Ordering::Relaxed);
    ctx.out.simple(b"RESET");
    Ok(())
}
