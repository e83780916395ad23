//! Live boards (issue 18): LB.WATCH and LB.UNWATCH. Arguments and the
//! confirmation frames live here; the groups of watchers, the diffs and
//! their delivery in `state::watch`, the timer that runs them in `server`.
//!
//! Decided here:
//! - LB.WATCH's reply is the snapshot (`lb.snapshot`), an array in RESP2
//!   and RESP3 alike, so that every client reads it as the command's reply;
//!   the diffs that follow are RESP3 pushes, or arrays in RESP2's subscribe
//!   mode.
//! - A connection watches a key once: LB.WATCH of a key it watches already
//!   replaces that watch (new n and interval) and sends a new snapshot.
//! - A key that holds nothing is watched as an empty board (it may be
//!   created later); another type answers WRONGTYPE.
//! - The pub/sub face, for clients that only speak Pub/Sub (ioredis,
//!   Jedis, go-redis): SUBSCRIBE to `__lbwatch@<db>__:<n>:<key>` (named
//!   like keyspace notifications; `<n>` from 1 to 1000, the key is the
//!   rest of the name, colons and all) joins the watch group of (db, key,
//!   n, the default INTERVAL) and receives Pub/Sub `message` frames on that
//!   channel whose payload is the JSON line the WebSocket sends: the
//!   snapshot first, then the diffs. It is an ordinary subscription in
//!   every other way (PUBSUB CHANNELS / NUMSUB count it, UNSUBSCRIBE or a
//!   disconnect leaves the group, the `pubsub` output limit applies); a
//!   name that does not parse, or a database that does not exist, is an
//!   ordinary channel. PUBLISH to such a channel reaches its subscribers
//!   like any PUBLISH (only the server's own messages are snapshots and
//!   diffs).
//! - LB.UNWATCH answers one array, `["lb.unwatch", [key ...], left]`: the
//!   keys it stopped watching and the number of watches left (UNSUBSCRIBE's
//!   one frame per channel, pushed in RESP3, would leave a client that
//!   does not special-case the command waiting for a reply).

use super::args;
use super::table::{flags::*, CommandSpec, KeySpec};
use super::Ctx;
use crate::engine::Value;
use crate::error::{CmdError, CmdResult};
use crate::state::client::ClientState;
use crate::state::watch::{
    top_of_value, GroupKey, Watcher, DEFAULT_INTERVAL_MS, MAX_N, MIN_INTERVAL_MS,
};
use crate::state::Server;

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        // Registers the group's flag in the key's WATCH list.
        lock_write: true,
        ..CommandSpec::new("lb.watch", -3, NOSCRIPT | LOADING | STALE, KeySpec::FIRST, lb_watch)
            .documented(
                "leaderboard",
                "Receive a board's top n now and each change of it, coalesced per interval",
                "0.1.0",
                "O(log N + n) for the snapshot; each change costs O(log N + n) once per group of watchers",
            )
    },
    CommandSpec::new(
        "lb.unwatch",
        -1,
        NOSCRIPT | LOADING | STALE | FAST,
        KeySpec::Range {
            first: 1,
            last: -1,
            step: 1,
        },
        lb_unwatch,
    )
    .documented(
        "leaderboard",
        "Stop receiving the changes of the given boards (all without keys)",
        "0.1.0",
        "O(N) where N is the number of boards watched",
    ),
];

/// LB.WATCH's arguments after the key.
#[derive(Debug, PartialEq, Eq)]
struct WatchArgs {
    n: u64,
    interval_ms: u64,
}

fn parse_watch(a: &[&[u8]]) -> Result<WatchArgs, CmdError> {
    let n = args::int(a[2])?;
    if n < 1 || n as u64 > MAX_N {
        return Err(CmdError::err(format!("n must be between 1 and {MAX_N}")));
    }
    let mut interval_ms = DEFAULT_INTERVAL_MS;
    let mut i = 3;
    while i < a.len() {
        if a[i].eq_ignore_ascii_case(b"INTERVAL") {
            let v = a.get(i + 1).ok_or(CmdError::Syntax)?;
            let ms = args::int(v)?;
            if ms < MIN_INTERVAL_MS as i64 {
                return Err(CmdError::err(format!(
                    "INTERVAL must be at least {MIN_INTERVAL_MS} ms"
                )));
            }
            interval_ms = ms as u64;
            i += 2;
        } else {
            return Err(CmdError::err(format!(
                "unknown option '{}'",
                args::text(a[i])
            )));
        }
    }
    Ok(WatchArgs {
        n: n as u64,
        interval_ms,
    })
}

fn lb_watch(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let w = parse_watch(a)?;
    let key = a[1];
    let db = ctx.keys.db;
    let now = ctx.keys.now_ms;
    let value = ctx.keys.typed(key, |v| match v {
        Value::Leaderboard(_) => Some(v),
        _ => None,
    })?;
    let top = top_of_value(value, w.n, now);
    // A second watch of the key replaces the first.
    leave(ctx.server, ctx.client, Some((db, key)));
    let id = GroupKey {
        db,
        key: bytes::Bytes::copy_from_slice(key),
        n: w.n,
        interval_ms: w.interval_ms,
    };
    let joined = ctx
        .server
        .live
        .join(id, Watcher::Client(ctx.client.info.clone()), || top);
    if joined.created {
        ctx.keys
            .part_in_mut(key, db)?
            .watch(key, &joined.group.dirty);
    }
    // The snapshot is the command's reply (an array in both protocols, so
    // that a client reads it as one); what follows are pushes.
    ctx.out.buf.push(b'*');
    ctx.out.buf.extend_from_slice(if ctx.out.resp3 {
        &joined.snapshot.resp3
    } else {
        &joined.snapshot.resp2
    });
    ctx.client.lb_watches.list.push(joined.group);
    note_count(ctx.client);
    Ok(())
}

/// Leaves the watch of (`db`, `key`), or every watch; returns the keys left.
fn leave(
    server: &Server,
    client: &mut ClientState,
    which: Option<(usize, &[u8])>,
) -> Vec<bytes::Bytes> {
    let me = Watcher::Client(client.info.clone());
    let mut left = Vec::new();
    client.lb_watches.list.retain(|g| {
        let hit = which.is_none_or(|(db, key)| g.id.db == db && &g.id.key[..] == key);
        if hit {
            server.live.leave(g, &me);
            left.push(g.id.key.clone());
        }
        !hit
    });
    note_count(client);
    left
}

/// Records the number of watches where subscribe mode and the output
/// class read it.
fn note_count(client: &mut ClientState) {
    let n = client.lb_watches.list.len();
    client.pubsub.set_watching(n);
    client
        .info
        .lb_watching
        .store(n as u32, std::sync::atomic::Ordering::Relaxed);
}

/// Disconnection and RESET: every watch ends (LB.WATCH's and the
/// boards' channels').
pub fn forget(server: &Server, client: &mut ClientState) {
    if !client.lb_watches.list.is_empty() {
        leave(server, client, None);
    }
    let me = client.info.clone();
    for (channel, g) in std::mem::take(&mut client.lb_watches.channels) {
        server.live.leave(
            &g,
            &Watcher::Channel {
                client: me.clone(),
                channel,
            },
        );
    }
}

/// The prefix of a board's channel (the pub/sub face).
pub const CHANNEL_PREFIX: &[u8] = b"__lbwatch@";

/// (db, n, key) of a board's channel `__lbwatch@<db>__:<n>:<key>`.
pub fn parse_channel(name: &[u8]) -> Option<(usize, u64, &[u8])> {
    let rest = name.strip_prefix(CHANNEL_PREFIX)?;
    let digits = |b: &[u8]| -> Option<u64> {
        if b.is_empty() || b.len() > 9 || !b.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(b).ok()?.parse().ok()
    };
    let end = rest.windows(3).position(|w| w == b"__:")?;
    let db = digits(&rest[..end])? as usize;
    let rest = &rest[end + 3..];
    let colon = rest.iter().position(|&c| c == b':')?;
    let n = digits(&rest[..colon])?;
    if !(1..=MAX_N).contains(&n) {
        return None;
    }
    Some((db, n, &rest[colon + 1..]))
}

/// SUBSCRIBE of `name` (newly subscribed): a board's channel joins the
/// board's watch group; the snapshot and diffs come as messages.
pub fn subscribed(server: &Server, client: &mut ClientState, name: &[u8]) {
    let Some((db, n, key)) = parse_channel(name) else {
        return;
    };
    if db >= server.keyspace.databases() {
        return;
    }
    let channel: std::sync::Arc<[u8]> = name.into();
    let id = GroupKey {
        db,
        key: bytes::Bytes::copy_from_slice(key),
        n,
        interval_ms: DEFAULT_INTERVAL_MS,
    };
    let group = server.live.join_later(
        id,
        Watcher::Channel {
            client: client.info.clone(),
            channel: channel.clone(),
        },
    );
    client.lb_watches.channels.push((channel, group));
}

/// UNSUBSCRIBE of `name`: a board's channel leaves its group.
pub fn unsubscribed(server: &Server, client: &mut ClientState, name: &[u8]) {
    let me = client.info.clone();
    client.lb_watches.channels.retain(|(channel, g)| {
        if &channel[..] != name {
            return true;
        }
        server.live.leave(
            g,
            &Watcher::Channel {
                client: me.clone(),
                channel: channel.clone(),
            },
        );
        false
    });
}

fn lb_unwatch(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let db = ctx.keys.db;
    let left = if a.len() == 1 {
        leave(ctx.server, ctx.client, None)
    } else {
        let mut left = Vec::new();
        for key in &a[1..] {
            left.extend(leave(ctx.server, ctx.client, Some((db, key))));
        }
        left
    };
    // One reply, in both protocols (see the module documentation).
    ctx.out.array(3);
    ctx.out.bulk(b"lb.unwatch");
    ctx.out.array(left.len());
    for k in &left {
        ctx.out.bulk(k);
    }
    ctx.out.int(ctx.client.lb_watches.list.len() as i64);
    // (A group's flag leaves the key's WATCH list when the live-boards
    // task retires the group.)
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn board_channels() {
        assert_eq!(
            parse_channel(b"__lbwatch@0__:10:race"),
            Some((0, 10, &b"race"[..]))
        );
        assert_eq!(
            parse_channel(b"__lbwatch@3__:1:a:b:"),
            Some((3, 1, &b"a:b:"[..]))
        );
        assert_eq!(parse_channel(b"__lbwatch@0__:5:"), Some((0, 5, &b""[..])));
        for bad in [
            &b"__lbwatch@0__:0:k"[..],
            b"__lbwatch@0__:1001:k",
            b"__lbwatch@x__:1:k",
            b"__lbwatch@__:1:k",
            b"__lbwatch@0__:1",
            b"__keyspace@0__:k",
            b"lbwatch",
        ] {
            assert_eq!(parse_channel(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn watch_arguments() {
        let p = |s: &str| {
            let v: Vec<&[u8]> = s.split(' ').map(|w| w.as_bytes()).collect();
            parse_watch(&v)
        };
        assert_eq!(
            p("lb.watch k 10"),
            Ok(WatchArgs {
                n: 10,
                interval_ms: 100
            })
        );
        assert_eq!(
            p("lb.watch k 3 interval 10"),
            Ok(WatchArgs {
                n: 3,
                interval_ms: 10
            })
        );
        assert_eq!(
            p("lb.watch k 3 INTERVAL 9").unwrap_err().to_string(),
            "ERR INTERVAL must be at least 10 ms"
        );
        assert_eq!(
            p("lb.watch k 0").unwrap_err().to_string(),
            "ERR n must be between 1 and 1000"
        );
        assert!(p("lb.watch k x").is_err());
        assert!(p("lb.watch k 3 INTERVAL").is_err());
        assert_eq!(
            p("lb.watch k 3 FOO 1").unwrap_err().to_string(),
            "ERR unknown option 'FOO'"
        );
    }
}
