//! Replication commands: REPLICAOF / SLAVEOF, ROLE, WAIT, and what a
//! replica sends its primary (REPLCONF, SYNC, PSYNC).
//!
//! They only read and set `state::replication`: SYNC / PSYNC mark the
//! connection, which `server::connection` then hands to
//! `server::replication` (the full sync and the stream); WAIT marks it too,
//! and the connection waits for the replicas' acknowledgements before it
//! reads on. The link to this server's own primary is a task of
//! `server::replication`, told by REPLICAOF through the state.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::args::{int, is, text};
use super::table::{flags::*, CommandSpec, KeySpec};
use super::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::state::journal;
use crate::state::replication::{Failover, FailoverState, MasterAddr, SyncRequest, ONLINE};
use crate::state::unix_ms;

/// REPLCONF GETACK *, as a primary sends it in the stream.
pub const GETACK: &[u8] = b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n";

fn replicaof(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    if ctx.client.repl.is_master {
        return Err(CmdError::err(
            "Command is not valid when client is a replica.",
        ));
    }
    let repl = &ctx.server.replication;
    if is(a[1], "no") && is(a[2], "one") {
        if repl.set_master(None) {
            promote(ctx.server);
            tracing::info!("MASTER MODE enabled (user request)");
        }
        ctx.out.ok();
        return Ok(());
    }
    let port = int(a[2])
        .ok()
        .filter(|p| (0..=65535).contains(p))
        .ok_or_else(|| CmdError::err("Invalid master port"))?;
    let addr = MasterAddr {
        host: text(a[1]),
        port: port as u16,
    };
    if !repl.set_master(Some(addr.clone())) {
        ctx.out.simple(b"OK Already connected to specified master");
        return Ok(());
    }
    become_replica(ctx.server);
    tracing::info!(
        "REPLICAOF {}:{} enabled (user request from '{}')",
        addr.host,
        addr.port,
        ctx.client.info.addr
    );
    ctx.out.ok();
    Ok(())
}

/// A primary (or a replica of another primary) becomes a replica: its own
/// writes leave the backlog, whose id and offset it offers its new
/// primary for a partial resync; its replicas are let go (they reconnect
/// and follow the new history).
pub fn become_replica(server: &crate::state::Server) {
    server.aof.backlog.stop_emitting();
    disconnect_replicas(server);
}

/// REPLICAOF NO ONE: the current id becomes `master_replid2` (valid up to
/// this offset, so the other replicas of the old primary continue
/// partially), a new id is drawn, and writes go into the backlog.
pub fn promote(server: &crate::state::Server) {
    let size = backlog_size(server);
    {
        let _f = server.aof.feed.lock();
        let mut b = server.aof.backlog.inner.lock();
        b.replid2 = std::mem::replace(&mut b.replid, journal::backlog::random_id());
        b.second_offset = b.end as i64 + 1;
        b.stream.db = None;
    }
    journal::start_repl_emitting(&server.aof, size);
    disconnect_replicas(server);
}

/// `repl-backlog-size` in bytes.
pub fn backlog_size(server: &crate::state::Server) -> u64 {
    crate::state::config::parse_memory(&server.config.read().param("repl-backlog-size"))
        .unwrap_or(1 << 20)
}

/// Closes every replica's connection.
pub fn disconnect_replicas(server: &crate::state::Server) {
    let ids: Vec<u64> = server
        .replication
        .replicas
        .lock()
        .iter()
        .map(|r| r.id)
        .collect();
    for id in ids {
        if let Some(c) = server.clients.get(&id) {
            c.killed.store(true, Ordering::Release);
            c.wake.notify_one();
        }
    }
}

fn role(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    let repl = &ctx.server.replication;
    let master = repl.master.lock().clone();
    match master {
        None => {
            let offset = ctx.server.aof.backlog.end();
            let replicas = repl.replicas.lock().clone();
            ctx.out.array(3);
            ctx.out.bulk(b"master");
            ctx.out.int(offset as i64);
            ctx.out.array(replicas.len());
            for r in replicas {
                ctx.out.array(3);
                ctx.out.bulk(r.ip.as_bytes());
                ctx.out.bulk(r.port.to_string().as_bytes());
                ctx.out
                    .bulk(r.ack_offset.load(Ordering::Relaxed).to_string().as_bytes());
            }
        }
        Some(m) => {
            let state = repl.link.lock().state;
            ctx.out.array(5);
            ctx.out.bulk(b"slave");
            ctx.out.bulk(m.host.as_bytes());
            ctx.out.int(m.port as i64);
            ctx.out.bulk(state.as_bytes());
            let off = if state == "connected" {
                repl.applied.load(Ordering::Relaxed) as i64
            } else {
                -1
            };
            ctx.out.int(off);
        }
    }
    Ok(())
}

fn wait(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    if ctx.server.replication.is_replica() {
        return Err(CmdError::err(
            "WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.",
        ));
    }
    let n = int(a[1])?;
    let t = int(a[2])?;
    if t < 0 {
        return Err(CmdError::err("timeout is negative"));
    }
    // The client's own last write, not the offset now (writes of others
    // after it need not be acknowledged).
    let offset = ctx.client.repl.woff;
    let acked = ctx.server.replication.acked(offset);
    if acked as i64 >= n || ctx.client.multi.is_some() || ctx.client.in_script || n <= 0 {
        ctx.out.int(acked as i64);
        return Ok(());
    }
    let deadline = (t > 0).then(|| Instant::now() + Duration::from_millis(t as u64));
    ctx.client.repl.wait = Some((offset, n as u64, deadline));
    // Ask the replicas for their offsets now rather than at their next
    // second's ACK; not while FAILOVER waits for a replica to reach this
    // offset (Redis defers GETACK while writes are paused).
    if ctx.server.replication.failover.lock().state == FailoverState::None {
        journal::feed_repl_raw(&ctx.server.aof, GETACK);
    }
    Ok(())
}

fn sync(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    if ctx.client.repl.sync.is_some() || ctx.client.repl.is_master {
        return Ok(());
    }
    let repl = &ctx.server.replication;
    // PSYNC <id> <offset> FAILOVER: our primary hands over to us (FAILOVER
    // on its side); the ids must match, then we are the primary and its
    // PSYNC continues from our old id as a partial resync.
    if a.len() > 3 && is(a[0], "psync") && is(a[3], "failover") {
        let mine = ctx.server.aof.backlog.inner.lock().replid.clone();
        if a[1] != mine.as_bytes() {
            return Err(CmdError::err("PSYNC FAILOVER replid must match my replid."));
        }
        if repl.set_master(None) {
            promote(ctx.server);
        }
        tracing::info!(
            "MASTER MODE enabled (failover request from '{}')",
            ctx.client.info.addr
        );
    }
    if repl.is_replica() && !repl.link.lock().up {
        return Err(CmdError::line(
            "NOMASTERLINK Can't SYNC while not connected with my master",
        ));
    }
    let req = if is(a[0], "psync") {
        SyncRequest {
            replid: Some(text(a[1])),
            offset: int(a[2]).unwrap_or(-1),
        }
    } else {
        SyncRequest {
            replid: None,
            offset: -1,
        }
    };
    ctx.client.repl.sync = Some(req);
    Ok(())
}

fn failover(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let repl = &ctx.server.replication;
    if a.len() == 2 && is(a[1], "abort") {
        if repl.failover.lock().state == FailoverState::None {
            return Err(CmdError::err("No failover in progress."));
        }
        abort_failover(ctx.server, "Failover manually aborted");
        ctx.out.ok();
        return Ok(());
    }
    let (mut timeout, mut force, mut target) = (0i64, false, None::<MasterAddr>);
    let mut j = 1;
    while j < a.len() {
        if is(a[j], "timeout") && j + 1 < a.len() && timeout == 0 {
            timeout = int(a[j + 1])?;
            if timeout <= 0 {
                return Err(CmdError::err("FAILOVER timeout must be greater than 0"));
            }
            j += 2;
        } else if is(a[j], "to") && j + 2 < a.len() && target.is_none() {
            let port = int(a[j + 2])?;
            target = Some(MasterAddr {
                host: text(a[j + 1]),
                port: port.clamp(0, 65535) as u16,
            });
            j += 3;
        } else if is(a[j], "force") && !force {
            force = true;
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    if repl.failover.lock().state != FailoverState::None {
        return Err(CmdError::err("FAILOVER already in progress."));
    }
    if repl.is_replica() {
        return Err(CmdError::err(
            "FAILOVER is not valid when server is a replica.",
        ));
    }
    let replicas = repl.replicas.lock().clone();
    if replicas.is_empty() {
        return Err(CmdError::err("FAILOVER requires connected replicas."));
    }
    if force && (timeout == 0 || target.is_none()) {
        return Err(CmdError::err(
            "FAILOVER with force option requires both a timeout and target HOST and IP.",
        ));
    }
    if let Some(t) = &target {
        let Some(r) = replicas
            .iter()
            .find(|r| r.ip == t.host && r.port == t.port as u64)
        else {
            return Err(CmdError::err(
                "FAILOVER target HOST and PORT is not a replica.",
            ));
        };
        if r.state.load(Ordering::Relaxed) != ONLINE {
            return Err(CmdError::err("FAILOVER target replica is not online."));
        }
        tracing::info!("FAILOVER requested to {}:{}.", t.host, t.port);
    } else {
        tracing::info!("FAILOVER requested to any replica.");
    }
    *repl.failover.lock() = Failover {
        state: FailoverState::WaitForSync,
        target,
        end: (timeout > 0).then(|| Instant::now() + Duration::from_millis(timeout as u64)),
        force,
    };
    ctx.server.pause.failover_pause(true);
    ctx.out.ok();
    Ok(())
}

/// Ends a FAILOVER that did not complete: a server that had become the
/// target's replica is a primary again; writes resume.
pub fn abort_failover(server: &crate::state::Server, why: &str) {
    let was = std::mem::take(&mut *server.replication.failover.lock());
    if was.state == FailoverState::None {
        return;
    }
    tracing::warn!("FAILOVER aborted: {why}");
    if was.state == FailoverState::InProgress && server.replication.set_master(None) {
        promote(server);
    }
    server.wake_client(server.pause.failover_pause(false));
}

/// The target accepted our PSYNC: the roles have swapped; writes resume
/// (and, this server being a replica now, meet -READONLY).
pub fn finish_failover(server: &crate::state::Server) {
    let was = std::mem::take(&mut *server.replication.failover.lock());
    if was.state == FailoverState::None {
        return;
    }
    tracing::info!("Failover to the new master completed.");
    server.wake_client(server.pause.failover_pause(false));
}

fn replconf(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    if a.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let mut i = 1;
    while i + 1 < a.len() {
        let (opt, v) = (a[i], a[i + 1]);
        if is(opt, "listening-port") {
            ctx.client.repl.listening_port = int(v)?.max(0) as u64;
        } else if is(opt, "ip-address") {
            ctx.client.repl.ip_address = Some(text(v));
        } else if is(opt, "capa") {
            if is(v, "eof") {
                ctx.client.repl.capa_eof = true;
            } else if is(v, "psync2") {
                ctx.client.repl.capa_psync2 = true;
            }
        } else if is(opt, "ack") || is(opt, "fack") {
            // Read by the replica's connection itself once it streams;
            // before that, not answered (as in Redis).
            if let Ok(off) = int(v) {
                ctx.server
                    .replication
                    .ack(ctx.client.id(), off.max(0) as u64, unix_ms());
            }
            return Ok(());
        } else if is(opt, "getack") {
            // Answered by the link to the primary (server::replication).
            return Ok(());
        } else if is(opt, "rdb-only") || is(opt, "rdb-filter-only") {
            // Accepted; nothing changes.
        } else {
            return Err(CmdError::err(format!(
                "Unrecognized REPLCONF option: {}",
                text(opt)
            )));
        }
        i += 2;
    }
    ctx.out.ok();
    Ok(())
}

const fn doc(c: CommandSpec, summary: &'static str, since: &'static str) -> CommandSpec {
    CommandSpec {
        group: "server",
        summary,
        since,
        complexity: "O(1)",
        ..c
    }
}

/// The replication commands, with Redis 7.0's arities and flags.
pub const COMMANDS: &[CommandSpec] = &[
    doc(
        CommandSpec::new(
            "replicaof",
            3,
            ADMIN | NOSCRIPT | STALE,
            KeySpec::None,
            replicaof,
        ),
        "Make the server a replica of another instance, or promote it as master.",
        "5.0.0",
    ),
    doc(
        CommandSpec::new(
            "slaveof",
            3,
            ADMIN | NOSCRIPT | STALE,
            KeySpec::None,
            replicaof,
        ),
        "Make the server a replica of another instance, or promote it as master.",
        "1.0.0",
    ),
    doc(
        CommandSpec::new(
            "role",
            1,
            NOSCRIPT | LOADING | STALE | FAST,
            KeySpec::None,
            role,
        ),
        "Return the role of the instance in the context of replication",
        "2.8.12",
    ),
    doc(
        CommandSpec::new("wait", 3, NOSCRIPT, KeySpec::None, wait),
        "Wait for the synchronous replication of all the write commands sent in the context of the current connection",
        "3.0.0",
    ),
    doc(
        CommandSpec::new(
            "sync",
            1,
            ADMIN | NOSCRIPT | NO_MULTI,
            KeySpec::None,
            sync,
        ),
        "Internal command used for replication",
        "1.0.0",
    ),
    doc(
        CommandSpec::new(
            "psync",
            -3,
            ADMIN | NOSCRIPT | NO_MULTI,
            KeySpec::None,
            sync,
        ),
        "Internal command used for replication",
        "2.8.0",
    ),
    CommandSpec {
        group: "server",
        summary: "Start a coordinated failover between this server and one of its replicas.",
        since: "6.2.0",
        complexity: "O(1)",
        ..CommandSpec::new(
            "failover",
            -1,
            ADMIN | NOSCRIPT | STALE,
            KeySpec::None,
            failover,
        )
    },
    doc(
        CommandSpec::new(
            "replconf",
            -1,
            ADMIN | NOSCRIPT | LOADING | STALE | ALLOW_BUSY,
            KeySpec::None,
            replconf,
        ),
        "An internal command for configuring the replication stream",
        "3.0.0",
    ),
];
