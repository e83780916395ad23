//! CONFIG GET / SET / RESETSTAT / REWRITE / HELP. The parameters themselves
//! (names, syntax, defaults) live in `state::config`.

use std::sync::atomic::Ordering;

use super::super::args::text;
use super::super::Ctx;
use super::srv;
use crate::error::{CmdError, CmdResult};
use crate::state::config::SetError;
use crate::state::config_rewrite;
use crate::state::{Config, Server};

use super::super::table::{flags::*, CommandSpec};

const ADMIN_FLAGS: u32 = ADMIN | NOSCRIPT | LOADING | STALE;

/// CONFIG's subcommands.
pub const SUBCOMMANDS: &[CommandSpec] = &[
    srv(
        "get",
        -3,
        ADMIN_FLAGS,
        get,
        "Get the values of configuration parameters",
        "2.0.0",
        "O(N) when N is the number of configuration parameters provided",
    ),
    srv(
        "set",
        -4,
        ADMIN_FLAGS,
        set,
        "Set configuration parameters to the given values",
        "2.0.0",
        "O(N) when N is the number of configuration parameters provided",
    ),
    srv(
        "resetstat",
        2,
        ADMIN_FLAGS,
        resetstat,
        "Reset the stats returned by INFO",
        "2.0.0",
        "O(1)",
    ),
    srv(
        "rewrite",
        2,
        ADMIN_FLAGS,
        rewrite,
        "Rewrite the configuration file with the in memory configuration",
        "2.8.0",
        "O(1)",
    ),
    srv(
        "help",
        2,
        LOADING | STALE,
        config_help,
        "Show helpful text about the different subcommands",
        "5.0.0",
        "O(1)",
    ),
];

fn get(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let found = ctx.server.config.read().get_matching(&a[2..]);
    ctx.out.map(found.len());
    for (name, value) in found {
        ctx.out.bulk(name.as_bytes());
        ctx.out.bulk(value.as_bytes());
    }
    Ok(())
}

fn set(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    if !a.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let owned: Vec<(String, String)> = a[2..].chunks(2).map(|p| (text(p[0]), text(p[1]))).collect();
    let pairs: Vec<(&str, &str)> = owned
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let result = {
        let mut config = ctx.server.config.write();
        // A TLS change takes effect only if its configuration builds (the
        // files read, the names known); else the old one stays.
        let tls = pairs
            .iter()
            .find(|(n, _)| n.len() > 4 && n[..4].eq_ignore_ascii_case("tls-"));
        let before = tls.map(|_| config.clone());
        let ports_before = (config.port, crate::state::tls::port(&config));
        let old = config.clone();
        config
            .set_many(&pairs)
            .and_then(|()| match (tls, before) {
                (Some((name, _)), Some(before)) => ctx.server.tls.reload(&config).map_err(|why| {
                    tracing::warn!("Unable to update TLS configuration: {why}");
                    *config = before;
                    SetError::Failed(
                        name.to_string(),
                        format!("Unable to update TLS configuration. {why}"),
                    )
                }),
                _ => Ok(()),
            })
            .and_then(|()| {
                // `port` / `tls-port` changed: the listener moves now, or
                // everything set here is undone (as Redis).
                move_listeners(ctx.server, &config, ports_before).inspect_err(|_| {
                    *config = old;
                    if tls.is_some() {
                        let _ = ctx.server.tls.reload(&config);
                    }
                })
            })
    };
    match result {
        Ok(()) => {
            ctx.server.refresh_hot_config();
            if pairs
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("requirepass"))
            {
                super::super::acl::requirepass_changed(ctx.server);
            }
            let aof_param = pairs.iter().find(|(n, _)| {
                n.eq_ignore_ascii_case("appendonly") || n.eq_ignore_ascii_case("appendfsync")
            });
            if let Some((name, _)) = aof_param {
                crate::state::journal::on_config_change(&ctx.server.aof, &ctx.server.config.read())
                    .map_err(|why| {
                        CmdError::err(format!(
                            "CONFIG SET failed (possibly related to argument '{name}') - {why}"
                        ))
                    })?;
            }
            ctx.out.ok();
            Ok(())
        }
        Err(SetError::Unknown(name)) => Err(CmdError::err(format!(
            "Unknown option or number of arguments for CONFIG SET - '{name}'"
        ))),
        Err(SetError::Failed(name, why)) => Err(CmdError::err(format!(
            "CONFIG SET failed (possibly related to argument '{name}') - {why}"
        ))),
    }
}

/// Moves the listeners whose port `config` changed from `before` (plain,
/// TLS); a port that can't be bound fails with Redis's reason.
fn move_listeners(server: &Server, config: &Config, before: (u16, u16)) -> Result<(), SetError> {
    use crate::state::listeners::Kind;
    let now = (config.port, crate::state::tls::port(config));
    for (kind, name, old, new) in [
        (Kind::Plain, "port", before.0, now.0),
        (Kind::Tls, "tls-port", before.1, now.1),
    ] {
        if old != new {
            server
                .listeners
                .rebind(kind, &config.bind, new)
                .map_err(|why| SetError::Failed(name.to_string(), why))?;
        }
    }
    Ok(())
}

/// Zeroes the counters INFO reports (command and error statistics, the
/// stats section), as CONFIG RESETSTAT does. `expired_now` is the keyspace's
/// expired-keys count, from which INFO's `expired_keys` starts again.
pub fn reset_stats(server: &Server, expired_now: u64) {
    for s in server.command_stat_tables().flatten() {
        s.reset();
    }
    server.error_stats.lock().clear();
    server.stats.reset();
    let marks = &server.info_marks;
    marks.expired_at_reset.store(expired_now, Ordering::Relaxed);
    *marks.ops_sample.lock() = None;
}

fn resetstat(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    // A pipeline's earlier commands are reset too, not added afterwards.
    crate::commands::flush_stats(ctx.server, ctx.client);
    let expired = super::expired_keys(ctx);
    reset_stats(ctx.server, expired);
    ctx.out.ok();
    Ok(())
}

fn rewrite(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    let Some(path) = ctx.server.config_file.as_deref() else {
        return Err(CmdError::err("The server is running without a config file"));
    };
    let fail = |e: std::io::Error| CmdError::err(format!("Rewriting config file: {e}"));
    // A vanished file is rewritten from scratch, as Redis does.
    let original = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(fail(e)),
    };
    let text = {
        let c = ctx.server.config.read();
        let dir = std::fs::canonicalize(&c.dir)
            .map(|d| d.to_string_lossy().into_owned())
            .unwrap_or_else(|_| c.dir.clone());
        let users = if c.param("aclfile").is_empty() {
            let cat = crate::commands::acl::catalog();
            crate::commands::acl::acl(ctx.server)
                .users()
                .iter()
                .map(|u| format!("user {}", u.describe(cat)))
                .collect()
        } else {
            Vec::new()
        };
        let live = config_rewrite::Live {
            replicaof: ctx
                .server
                .replication
                .master
                .lock()
                .as_ref()
                .map(|m| (m.host.clone(), m.port)),
            dir,
            users: Some(users),
        };
        config_rewrite::rewrite(&c, &original, &live)
    };
    // Write beside the file, then rename over it: never a half-written file.
    let tmp = format!("{path}.rewrite-{}", std::process::id());
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            fail(e)
        })?;
    tracing::info!("CONFIG REWRITE executed with success.");
    ctx.out.ok();
    Ok(())
}

fn config_help(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    ctx.out.help(
        "CONFIG",
        &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
        ],
    );
    Ok(())
}
