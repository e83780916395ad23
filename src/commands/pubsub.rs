//! Pub/Sub commands: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE,
//! PUBLISH, SSUBSCRIBE, SUNSUBSCRIBE, SPUBLISH and PUBSUB. They parse
//! arguments and write Redis's confirmation frames; who listens where and
//! delivery live in `state::pubsub`, the queues to the subscribers in
//! `state::outbox`.
//!
//! Channel arguments are not keys: no shard is locked for them and COMMAND
//! reports their key specs as `not_key` (see `CommandSpec::keys_are_channels`).

use super::args::text;
use super::table::{flags::*, CommandSpec, Handler, KeySpec};
use super::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::state::pubsub::{Kind, Own};

const fn ps(
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: Handler,
    summary: &'static str,
    since: &'static str,
    complexity: &'static str,
) -> CommandSpec {
    CommandSpec::new(name, arity, flags, KeySpec::None, handler)
        .documented("pubsub", summary, since, complexity)
}

const SUBSCRIBING: u32 = PUBSUB | NOSCRIPT | LOADING | STALE;
const PUBLISHING: u32 = PUBSUB | LOADING | STALE | FAST;
const INSPECTING: u32 = PUBSUB | LOADING | STALE;

/// Every channel argument (SSUBSCRIBE, SUNSUBSCRIBE).
const ALL_CHANNELS: KeySpec = KeySpec::Range {
    first: 1,
    last: -1,
    step: 1,
};

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    ps(
        "subscribe",
        -2,
        SUBSCRIBING,
        subscribe,
        "Listen for messages published to the given channels",
        "2.0.0",
        "O(N) where N is the number of channels to subscribe to.",
    ),
    ps(
        "unsubscribe",
        -1,
        SUBSCRIBING,
        unsubscribe,
        "Stop listening for messages posted to the given channels",
        "2.0.0",
        "O(N) where N is the number of clients already subscribed to a channel.",
    ),
    ps(
        "psubscribe",
        -2,
        SUBSCRIBING,
        psubscribe,
        "Listen for messages published to channels matching the given patterns",
        "2.0.0",
        "O(N) where N is the number of patterns the client is already subscribed to.",
    ),
    ps(
        "punsubscribe",
        -1,
        SUBSCRIBING,
        punsubscribe,
        "Stop listening for messages posted to channels matching the given patterns",
        "2.0.0",
        "O(N+M) where N is the number of patterns the client is already subscribed and M is the number of total patterns subscribed in the system (by any client).",
    ),
    ps(
        "publish",
        3,
        PUBLISHING,
        publish,
        "Post a message to a channel",
        "2.0.0",
        "O(N+M) where N is the number of clients subscribed to the receiving channel and M is the total number of subscribed patterns (by any client).",
    ),
    CommandSpec {
        keys: ALL_CHANNELS,
        ..ps(
            "ssubscribe",
            -2,
            SUBSCRIBING,
            ssubscribe,
            "Listen for messages published to the given shard channels",
            "7.0.0",
            "O(N) where N is the number of shard channels to subscribe to.",
        )
    },
    CommandSpec {
        keys: ALL_CHANNELS,
        ..ps(
            "sunsubscribe",
            -1,
            SUBSCRIBING,
            sunsubscribe,
            "Stop listening for messages posted to the given shard channels",
            "7.0.0",
            "O(N) where N is the number of clients already subscribed to a shard channel.",
        )
    },
    CommandSpec {
        keys: KeySpec::FIRST,
        ..ps(
            "spublish",
            3,
            PUBLISHING,
            spublish,
            "Post a message to a shard channel",
            "7.0.0",
            "O(N) where N is the number of clients subscribed to the receiving shard channel.",
        )
    },
    CommandSpec {
        subcommands: PUBSUB_SUBCOMMANDS,
        ..ps(
            "pubsub",
            -2,
            0,
            no_subcommand,
            "A container for Pub/Sub commands",
            "2.8.0",
            "Depends on subcommand.",
        )
    },
];

const PUBSUB_SUBCOMMANDS: &[CommandSpec] = &[
    ps(
        "channels",
        -2,
        INSPECTING,
        channels,
        "List active channels",
        "2.8.0",
        "O(N) where N is the number of active channels, and assuming constant time pattern matching (relatively short channels and patterns)",
    ),
    ps(
        "numsub",
        -2,
        INSPECTING,
        numsub,
        "Get the count of subscribers for channels",
        "2.8.0",
        "O(N) for the NUMSUB subcommand, where N is the number of requested channels",
    ),
    ps(
        "numpat",
        2,
        INSPECTING,
        numpat,
        "Get the count of unique patterns pattern subscriptions",
        "2.8.0",
        "O(1)",
    ),
    ps(
        "shardchannels",
        -2,
        INSPECTING,
        shardchannels,
        "List active shard channels",
        "7.0.0",
        "O(N) where N is the number of active shard channels, and assuming constant time pattern matching (relatively short shard channels).",
    ),
    ps(
        "shardnumsub",
        -2,
        INSPECTING,
        shardnumsub,
        "Get the count of subscribers for shard channels",
        "7.0.0",
        "O(N) for the SHARDNUMSUB subcommand, where N is the number of requested shard channels",
    ),
    ps(
        "help",
        2,
        LOADING | STALE,
        help,
        "Show helpful text about the different subcommands",
        "6.2.0",
        "O(1)",
    ),
];

/// Whether a command may run in RESP2 subscribe mode.
pub fn allowed_in_subscribe_mode(spec: &CommandSpec) -> bool {
    matches!(
        spec.name,
        "subscribe"
            | "unsubscribe"
            | "psubscribe"
            | "punsubscribe"
            | "ssubscribe"
            | "sunsubscribe"
            | "lb.watch"
            | "lb.unwatch"
            | "ping"
            | "quit"
            | "reset"
    ) && spec.subcommands.is_empty()
}

/// Redis's refusal of another command in RESP2 subscribe mode.
pub fn subscribe_mode_error(full_name: &str) -> CmdError {
    CmdError::err(format!(
        "Can't execute '{full_name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
    ))
}

/// Never runs: the dispatcher answers PUBSUB without a subcommand.
fn no_subcommand(_ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    Err(CmdError::WrongArity("pubsub".into()))
}

/// A subscription confirmation (`subscribe`, ...) or its opposite; a
/// missing name is a null (UNSUBSCRIBE with nothing to leave).
fn confirm(ctx: &mut Ctx, word: &[u8], name: Option<&[u8]>, count: usize) {
    ctx.out.push(3);
    ctx.out.bulk(word);
    match name {
        Some(n) => ctx.out.bulk(n),
        None => ctx.out.null(),
    }
    ctx.out.int(count as i64);
}

fn subscribe_to(ctx: &mut Ctx, a: &[&[u8]], kind: Kind) -> CmdResult {
    // (Redis refuses clients that need one reply per command; here those
    // are scripts, which NOSCRIPT keeps out. EXEC may subscribe.)
    let server = ctx.server;
    for name in &a[1..] {
        let new = server
            .pubsub
            .subscribe(kind, &ctx.client.info, &mut ctx.client.pubsub, name);
        let count = ctx.client.pubsub.count_for(kind);
        confirm(ctx, kind.subscribe_word(), Some(name), count);
        if new && kind == Kind::Channel && name.starts_with(super::lbwatch::CHANNEL_PREFIX) {
            // A board's channel (after the confirmation, which the
            // snapshot follows).
            super::lbwatch::subscribed(server, ctx.client, name);
        }
    }
    Ok(())
}

fn unsubscribe_from(ctx: &mut Ctx, a: &[&[u8]], kind: Kind) -> CmdResult {
    let server = ctx.server;
    let word = kind.unsubscribe_word();
    if a.len() == 1 {
        let names = server
            .pubsub
            .unsubscribe_all(kind, &ctx.client.info, &mut ctx.client.pubsub);
        if kind == Kind::Channel {
            for n in &names {
                super::lbwatch::unsubscribed(server, ctx.client, n);
            }
        }
        if names.is_empty() {
            let count = ctx.client.pubsub.count_for(kind);
            confirm(ctx, word, None, count);
        }
        // Each confirmation carries the count left after it.
        let mut left = ctx.client.pubsub.count_for(kind) + names.len();
        for n in &names {
            left -= 1;
            confirm(ctx, word, Some(n), left);
        }
        return Ok(());
    }
    for name in &a[1..] {
        let was = server
            .pubsub
            .unsubscribe(kind, &ctx.client.info, &mut ctx.client.pubsub, name);
        if was && kind == Kind::Channel {
            super::lbwatch::unsubscribed(server, ctx.client, name);
        }
        let count = ctx.client.pubsub.count_for(kind);
        confirm(ctx, word, Some(name), count);
    }
    Ok(())
}

fn subscribe(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    subscribe_to(ctx, a, Kind::Channel)
}

fn psubscribe(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    subscribe_to(ctx, a, Kind::Pattern)
}

fn ssubscribe(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    subscribe_to(ctx, a, Kind::Shard)
}

fn unsubscribe(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    unsubscribe_from(ctx, a, Kind::Channel)
}

fn punsubscribe(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    unsubscribe_from(ctx, a, Kind::Pattern)
}

fn sunsubscribe(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    unsubscribe_from(ctx, a, Kind::Shard)
}

fn publish_to(ctx: &mut Ctx, a: &[&[u8]], kind: Kind) -> CmdResult {
    let resp3 = ctx
        .client
        .info
        .resp
        .load(std::sync::atomic::Ordering::Relaxed)
        == 3;
    let id = ctx.client.id();
    // The publisher's own copy goes with its replies (inside a script:
    // ahead of the script's reply, see `commands::scripting`).
    let out = if ctx.client.in_script {
        &mut ctx.client.script_pushes
    } else {
        &mut ctx.out.buf
    };
    let mut own = Own { id, resp3, out };
    let n = ctx.server.pubsub.publish(kind, a[1], a[2], &mut own);
    ctx.out.int(n as i64);
    // To replicas (not the AOF), as Redis 7.0 propagates it: in order with
    // the writes around it, inside EXEC's or a script's MULTI/EXEC.
    if ctx.server.aof.backlog.emitting() {
        ctx.keys
            .propagate_to_replicas(a.iter().map(|x| x.to_vec()).collect());
    }
    Ok(())
}

fn publish(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    publish_to(ctx, a, Kind::Channel)
}

fn spublish(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    publish_to(ctx, a, Kind::Shard)
}

/// PUBSUB CHANNELS / SHARDCHANNELS take at most one pattern.
fn names_of(ctx: &mut Ctx, a: &[&[u8]], kind: Kind) -> CmdResult {
    if a.len() > 3 {
        return Err(CmdError::err(format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try PUBSUB HELP.",
            text(a[1])
        )));
    }
    let names = ctx.server.pubsub.names(kind, a.get(2).copied());
    ctx.out.array(names.len());
    for n in &names {
        ctx.out.bulk(n);
    }
    Ok(())
}

fn counts_of(ctx: &mut Ctx, a: &[&[u8]], kind: Kind) -> CmdResult {
    let asked = &a[2..];
    ctx.out.array(asked.len() * 2);
    for name in asked {
        ctx.out.bulk(name);
        ctx.out
            .int(ctx.server.pubsub.subscribers(kind, name) as i64);
    }
    Ok(())
}

fn channels(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    names_of(ctx, a, Kind::Channel)
}

fn shardchannels(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    names_of(ctx, a, Kind::Shard)
}

fn numsub(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    counts_of(ctx, a, Kind::Channel)
}

fn shardnumsub(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    counts_of(ctx, a, Kind::Shard)
}

fn numpat(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    ctx.out.int(ctx.server.pubsub.len(Kind::Pattern) as i64);
    Ok(())
}

fn help(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    ctx.out.help(
        "PUBSUB",
        &[
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            "    Return the currently active shard level channels matching a <pattern> (default: '*').",
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
        ],
    );
    Ok(())
}
