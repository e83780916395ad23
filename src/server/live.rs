//! The live-boards task, on its own thread: runs LB.WATCH's groups
//! (`state::watch`) when their interval ends, reading each changed board's
//! top under its shard's read lock and writing the message to each
//! watcher, and removes retired groups' flags from their keys' WATCH
//! lists. One task for every group: a group costs nothing between its
//! ticks but a timer entry, and an unchanged board costs one atomic swap
//! per tick.

use std::sync::Arc;
use std::time::Instant;

use crate::state::watch::{top_of_value, BoardTop};
use crate::state::{unix_ms, Server};

/// Starts the task on its own thread (with its own timer): a tick writes
/// each watcher's message to its socket (`state::watch`), thousands of
/// writes in a row that would otherwise hold up a worker and every
/// connection on it. It ends with the server.
pub fn spawn(server: Arc<Server>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build();
    let started = rt.and_then(|rt| {
        let s = server.clone();
        std::thread::Builder::new()
            .name("live-boards".into())
            .spawn(move || rt.block_on(run(s)))
    });
    if let Err(e) = started {
        // No thread: on the workers, as any task.
        tracing::warn!("live boards on the workers: {e}");
        tokio::spawn(run(server));
    }
}

/// The task.
async fn run(server: Arc<Server>) {
    let mut shutdown = server.shutdown_watch();
    loop {
        // Groups made by SUBSCRIBE of a board's channel: their flag
        // goes in the key's WATCH list and their top is read under
        // the key's shard, as LB.WATCH does.
        for g in server.live.unregistered() {
            let ks = &server.keyspace;
            let mut guard = ks.lock_one(ks.shard_of(&g.id.key), true);
            let now = unix_ms();
            match guard.shard_mut().and_then(|s| s.dbs.get_mut(g.id.db)) {
                Some(part) => {
                    let value = part.peek(&g.id.key, now).map(|e| &e.value);
                    if g.register(top_of_value(value, g.id.n, now)) {
                        part.watch(&g.id.key, &g.dirty);
                    }
                }
                // No such database (SUBSCRIBE checks): an empty board
                // that never changes.
                None => {
                    g.register(BoardTop::default());
                }
            }
        }
        let limit = server.pubsub.limit();
        let (next, retired) = server
            .live
            .run_due(Instant::now(), &limit, &mut |db, key, n| {
                read_top(&server, db, key, n)
            });
        for r in retired {
            let ks = &server.keyspace;
            let mut g = ks.lock_one(ks.shard_of(&r.key), true);
            if let Some(part) = g.shard_mut().and_then(|s| s.dbs.get_mut(r.db)) {
                part.unwatch(&r.key, &r.dirty);
            }
        }
        let wake = server.live.wake.notified();
        tokio::select! {
            _ = async {
                match next {
                    Some(t) => tokio::time::sleep_until(t.into()).await,
                    None => std::future::pending().await,
                }
            } => {}
            _ = wake => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// The top `n` of (`db`, `key`) now.
fn read_top(server: &Server, db: usize, key: &[u8], n: u64) -> BoardTop {
    let ks = &server.keyspace;
    let now = unix_ms();
    let g = ks.lock_one(ks.shard_of(key), false);
    let value = g
        .shard()
        .dbs
        .get(db)
        .and_then(|part| part.peek(key, now))
        .map(|e| &e.value);
    top_of_value(value, n, now)
}
