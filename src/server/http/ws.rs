//! `GET /ws/boards/{key}?n=10[&interval=100]`: a WebSocket (RFC 6455,
//! tokio-tungstenite's) that streams a board's snapshot and diffs as JSON
//! text frames, one message a frame, from the same groups LB.WATCH uses
//! (`state::watch`): a WebSocket watcher of (board, n, interval) shares its
//! diffs with RESP watchers of the same. Database 0. The server only
//! sends; what the browser sends is read for pings (tungstenite answers
//! them) and close, and is bounded ([`MAX_IN`]).
//!
//! The send queue is the watcher's bounded outbox (the `pubsub` class of
//! `client-output-buffer-limit`): past it the watcher is cut off, closed
//! with 1008, even while a write to a reader that stopped reading waits.
//!
//! JSON: `{"type":"snapshot"|"diff","key":k,"version":v[,"period":p],
//! "entries":[[place, member, score] | [place, null] ...]}` (`period` on
//! snapshots of boards with seasons: a rollover sends one).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{self, Message, Utf8Bytes};
use tokio_tungstenite::WebSocketStream;

use crate::state::watch::{
    top_of_value, GroupKey, JsonWatcher, Watcher, DEFAULT_INTERVAL_MS, MAX_N, MIN_INTERVAL_MS,
};
use crate::state::{unix_ms, Server};

/// Largest message or frame read from the browser.
pub const MAX_IN: usize = 64 * 1024;

/// The `Sec-WebSocket-Accept` value for a `Sec-WebSocket-Key`.
pub fn accept_key(key: &str) -> String {
    tungstenite::handshake::derive_accept_key(key.trim().as_bytes())
}

/// `%XX` and `+` decoded (a key in a path or query).
pub fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                match std::str::from_utf8(&b[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                {
                    Some(v) => {
                        out.push(v);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    out
}

/// A query parameter's value.
pub fn query_param<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query.split('&').find_map(|kv| {
        kv.split_once('=')
            .filter(|(k, _)| *k == name)
            .map(|(_, v)| v)
    })
}

/// (n, interval ms) from the query: `n` 1..=1000 (default 10), `interval`
/// at least 10 (default 100); None when out of range.
pub fn watch_params(query: &str) -> Option<(u64, u64)> {
    let n = match query_param(query, "n") {
        Some(v) => v.parse::<u64>().ok().filter(|n| (1..=MAX_N).contains(n))?,
        None => 10,
    };
    let interval = match query_param(query, "interval") {
        Some(v) => v.parse::<u64>().ok().filter(|i| *i >= MIN_INTERVAL_MS)?,
        None => DEFAULT_INTERVAL_MS,
    };
    Some((n, interval))
}

/// Speaks WebSocket on an upgraded connection and streams (`key`, n,
/// interval) until either side closes, the watcher is cut off at its
/// limit, or the server stops.
pub async fn serve<S>(server: Arc<Server>, io: S, key: Vec<u8>, n: u64, interval_ms: u64)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_IN))
        .max_frame_size(Some(MAX_IN));
    let mut ws = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
    let jw = server.live.json_watcher();
    let me = Watcher::Json(jw.clone());
    let key = bytes::Bytes::from(key);
    let joined = {
        // As LB.WATCH: the key's shard, then the registry.
        let ks = &server.keyspace;
        let mut g = ks.lock_one(ks.shard_of(&key), true);
        let Some(part) = g.shard_mut().and_then(|s| s.dbs.get_mut(0)) else {
            return;
        };
        let now = unix_ms();
        let top = top_of_value(part.peek(&key, now).map(|e| &e.value), n, now);
        let id = GroupKey {
            db: 0,
            key: key.clone(),
            n,
            interval_ms,
        };
        let joined = server.live.join(id, me.clone(), || top);
        if joined.created {
            part.watch(&key, &joined.group.dirty);
        }
        joined
    };
    let group = joined.group.clone();
    let _ = pump(&server, &mut ws, &jw, &joined.snapshot.json).await;
    server.live.leave(&group, &me);
    jw.outbox.close();
}

/// Resolves once the watcher was cut off at its limit.
async fn cut_off(jw: &JsonWatcher) {
    while !jw.killed.load(Ordering::Acquire) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn text(json: &[u8]) -> Message {
    Message::text(String::from_utf8_lossy(json).into_owned())
}

/// The messages of a batch of queued JSON lines, each a slice of `batch`
/// (no copy; the JSON is UTF-8, see `state::watch`).
fn texts(batch: Bytes) -> impl Iterator<Item = Message> {
    let mut at = 0;
    std::iter::from_fn(move || {
        while at < batch.len() {
            let end = batch[at..]
                .iter()
                .position(|b| *b == b'\n')
                .map_or(batch.len(), |i| at + i);
            let line = batch.slice(at..end);
            at = end + 1;
            if line.is_empty() {
                continue;
            }
            match Utf8Bytes::try_from(line) {
                Ok(t) => return Some(Message::Text(t)),
                Err(_) => continue,
            }
        }
        None
    })
}

/// Sends the snapshot, then each queued message, while reading the
/// browser's frames; returns when the connection ends.
async fn pump<S>(
    server: &Server,
    ws: &mut WebSocketStream<S>,
    jw: &JsonWatcher,
    snapshot: &[u8],
) -> Result<(), tungstenite::Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut shutdown = server.shutdown.subscribe();
    ws.send(text(snapshot)).await?;
    let mut queued = Vec::new();
    // One timer for the connection, not one per message.
    let mut look_again = tokio::time::interval(Duration::from_secs(1));
    look_again.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        if jw.killed.load(Ordering::Acquire) {
            let close = CloseFrame {
                code: CloseCode::Policy,
                reason: "output buffer limit".into(),
            };
            let _ = tokio::time::timeout(Duration::from_secs(1), ws.close(Some(close))).await;
            return Ok(());
        }
        queued.clear();
        let n = jw.outbox.take_into(&mut queued);
        if n > 0 {
            let batch = Bytes::from(std::mem::take(&mut queued));
            let send = async {
                for msg in texts(batch) {
                    ws.feed(msg).await?;
                }
                ws.flush().await
            };
            tokio::select! {
                r = send => r?,
                // A reader that stopped reading: the queue behind it grew
                // past its limit and the watcher was cut off.
                _ = cut_off(jw) => return Ok(()),
            }
            jw.outbox.written(n);
            continue;
        }
        tokio::select! {
            _ = jw.outbox.ready() => {}
            m = ws.next() => match m {
                None | Some(Ok(Message::Close(_))) => return Ok(()),
                Some(Err(e)) => return Err(e),
                // Pings are answered by tungstenite; the rest is ignored.
                Some(Ok(_)) => {}
            },
            _ = shutdown.changed() => return Ok(()),
            // Cut off at its limit (or idle): look again.
            _ = look_again.tick() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_key_as_rfc_6455_shows() {
        assert_eq!(
            accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn queued_lines_are_messages() {
        let got: Vec<Message> = texts(Bytes::from_static(b"\n{\"a\":1}\n\n{}")).collect();
        assert_eq!(got, vec![Message::text("{\"a\":1}"), Message::text("{}")]);
    }

    #[test]
    fn keys_and_parameters() {
        assert_eq!(percent_decode("a%20b+c%2"), b"a b c%2".to_vec());
        assert_eq!(watch_params(""), Some((10, 100)));
        assert_eq!(watch_params("n=3&interval=20"), Some((3, 20)));
        assert_eq!(watch_params("n=0"), None);
        assert_eq!(watch_params("interval=5"), None);
    }
}
