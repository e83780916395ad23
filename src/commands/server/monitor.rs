//! MONITOR, and which commands monitors see and when, as Redis 7.0 shows
//! them: a command is shown once it has run (so SELECT shows the database
//! it selected, and EXEC follows the commands it ran), with the time it
//! ended; a command refused before running (unknown, wrong arity, NOAUTH,
//! queued in MULTI) is not shown, nor one flagged `admin`, nor a blocked
//! command run again when woken. Scripts (`skip_monitor`) are shown as
//! they start, before the commands they call (`lua`). Secrets are hidden
//! (`state::monitor::redacted`).
//!
//! The registry and the line format are `state::monitor`'s.

use super::super::table::{flags::*, Command, CommandSpec, KeySpec};
use super::super::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::state::client::ClientState;
use crate::state::monitor::{redacted, Origin};
use crate::state::{unix_us, Server};

/// MONITOR.
pub const MONITOR: CommandSpec = CommandSpec {
    group: "server",
    summary: "Listen for all requests received by the server in real time",
    since: "1.0.0",
    ..CommandSpec::new(
        "monitor",
        1,
        ADMIN | NOSCRIPT | LOADING | STALE,
        KeySpec::None,
        monitor,
    )
};

fn monitor(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    // Inside EXEC a client expects one reply per command.
    if ctx.client.deny_blocking {
        return Err(CmdError::err(
            "MONITOR isn't allowed for DENY BLOCKING client",
        ));
    }
    // Already monitoring: ignored, without a reply.
    if ctx.server.monitors.add(&ctx.client.info) {
        ctx.out.ok();
    }
    Ok(())
}

/// Shows a command that has just run to the monitors (nothing but one
/// atomic load when nobody monitors).
#[inline]
pub fn feed_executed(ctx: &Ctx, cmd: &Command, args: &[&[u8]]) {
    if ctx.server.monitors.active() && !cmd.spec.has(SKIP_MONITOR) {
        feed(ctx, cmd.spec, args);
    }
}

/// Shows a script command (EVAL, FCALL, ...) as it starts, before the
/// commands it calls.
#[inline]
pub fn feed_script(ctx: &Ctx, args: &[&[u8]]) {
    if ctx.server.monitors.active() {
        if let Some(cmd) = args
            .first()
            .and_then(|n| super::super::table::table().get_callable(n))
        {
            feed(ctx, cmd.spec, args);
        }
    }
}

fn feed(ctx: &Ctx, spec: &CommandSpec, args: &[&[u8]]) {
    let server = ctx.server;
    if spec.has(ADMIN) || ctx.client.rerun || server.aof.loading() {
        return;
    }
    let origin = if ctx.client.in_script {
        Origin::Lua
    } else {
        Origin::Client(&ctx.client.info.addr)
    };
    let shown = redacted(spec.name, args);
    server
        .monitors
        .feed(unix_us(), ctx.keys.db, origin, &shown, |c| {
            server.output_limit_of(c)
        });
}

/// The error for a command a monitor may not run: one that reads or
/// writes the keyspace (Redis treats a monitor as a replica).
pub fn refused_in_monitor_mode(client: &ClientState, spec: &CommandSpec) -> Option<CmdError> {
    if !client.info.is_monitor() {
        return None;
    }
    // PUBLISH and SPUBLISH are propagated to replicas: Redis counts them
    // as `may_replicate` here, though COMMAND INFO does not list the flag.
    let keyspace = spec.flags & (READONLY | WRITE | MAY_REPLICATE) != 0
        || matches!(spec.name, "publish" | "spublish");
    keyspace.then(|| CmdError::err("Replica can't interact with the keyspace"))
}

/// Takes the client out of monitor mode (RESET, disconnect).
pub fn leave(server: &Server, client: &ClientState) {
    server.monitors.remove(&client.info);
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::commands::table::table;
    use crate::state::client::ClientInfo;

    #[test]
    fn monitors_may_not_touch_the_keyspace() {
        let info = Arc::new(ClientInfo::new(1, String::new(), String::new(), 0));
        let client = ClientState::new(info.clone(), true);
        let spec = |n: &str| table().get(n.as_bytes()).map(|c| c.spec);
        let refused = |n: &str| spec(n).and_then(|s| refused_in_monitor_mode(&client, s));
        assert!(refused("get").is_none(), "not a monitor yet");
        info.set_monitor(true);
        for name in ["get", "set", "dbsize", "publish", "spublish", "eval"] {
            assert!(refused(name).is_some(), "{name}");
        }
        for name in [
            "ping",
            "info",
            "subscribe",
            "reset",
            "quit",
            "monitor",
            "multi",
        ] {
            assert!(spec(name).is_some() && refused(name).is_none(), "{name}");
        }
    }
}
