//! `GET /ws/boards/{key}?n=10[&interval=100]`: a WebSocket (RFC 6455,
//! tokio-tungstenite's) that streams a board's snapshot and diffs as JSON
//! text frames, one message a frame, from the same groups LB.WATCH uses
//! (`state::watch`): a WebSocket watcher of (board, n, interval) shares its
//! diffs with RESP watchers of the same. Database 0. The server only
//! sends; what the browser sends is read for pings (tungstenite answers
//! them) and close, and is bounded ([`MAX_IN`]).
//!
//! A message costs one write: the live-boards task writes the message's
//! frame, made once for every watcher (`Encoded::ws`), straight to each
//! watcher's socket when nothing waits before it there; only what the
//! socket cannot take at once goes to the watcher's bounded outbox (the
//! `pubsub` class of `client-output-buffer-limit`), which this
//! connection's task writes out. Past the limit the watcher is cut off,
//! closed with 1008, even while a write to a reader that stopped reading
//! waits. Tungstenite reads the browser's frames; what it writes (pongs,
//! the close reply) goes through the outbox too, so frames never
//! interleave.
//!
//! JSON: `{"type":"snapshot"|"diff","key":k,"version":v[,"period":p],
//! "entries":[[place, member, score] | [place, null] ...]}` (`period` on
//! snapshots of boards with seasons: a rollover sends one).

use std::io::ErrorKind;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::WebSocketStream;

use crate::state::outbox::{OutputLimit, Pushed};
use crate::state::watch::{
    top_of_value, ws_text_frame, GroupKey, JsonWatcher, TryWrite, Watcher, DEFAULT_INTERVAL_MS,
    MAX_N, MIN_INTERVAL_MS,
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

/// A WebSocket watcher's socket as tungstenite sees it: it reads the
/// browser's frames from the socket (after `early`, what hyper read past
/// the request), and what it writes (pongs, the close reply) goes to the
/// watcher's queue, in order with the board's messages, never straight
/// to the socket.
struct Wire {
    sock: Arc<TcpStream>,
    early: Bytes,
    jw: Arc<JsonWatcher>,
    limit: OutputLimit,
}

impl AsyncRead for Wire {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let me = self.get_mut();
        if !me.early.is_empty() {
            let n = me.early.len().min(buf.remaining());
            buf.put_slice(&me.early.split_to(n));
            return Poll::Ready(Ok(()));
        }
        loop {
            ready!(me.sock.poll_read_ready(cx))?;
            match me.sock.try_read(buf.initialize_unfilled()) {
                Ok(n) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                // Readiness was cleared: wait again.
                Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for Wire {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let me = self.get_mut();
        match me.jw.outbox.push_frame(buf, &me.limit) {
            Pushed::Queued => Poll::Ready(Ok(buf.len())),
            Pushed::Dropped => Poll::Ready(Err(ErrorKind::BrokenPipe.into())),
            Pushed::OverLimit => {
                me.jw.killed.store(true, Ordering::Release);
                me.jw.cut.notify_one();
                Poll::Ready(Err(ErrorKind::BrokenPipe.into()))
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// The live-boards task writes messages straight to the socket.
#[derive(Debug)]
struct Socket(Arc<TcpStream>);

impl TryWrite for Socket {
    fn try_write(&self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.try_write(buf)
    }
}

/// Speaks WebSocket on an upgraded connection (`early`: the bytes read
/// past the request) and streams (`key`, n, interval) until either side
/// closes, the watcher is cut off at its limit, or the server stops.
pub async fn serve(
    server: Arc<Server>,
    sock: TcpStream,
    early: Bytes,
    key: Vec<u8>,
    n: u64,
    interval_ms: u64,
) {
    let sock = Arc::new(sock);
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_IN))
        .max_frame_size(Some(MAX_IN));
    let jw = server.live.json_watcher();
    let _ = jw.socket.set(Arc::new(Socket(sock.clone())));
    let wire = Wire {
        sock: sock.clone(),
        early,
        jw: jw.clone(),
        limit: server.pubsub.limit(),
    };
    let mut ws = WebSocketStream::from_raw_socket(wire, Role::Server, Some(config)).await;
    let me = Watcher::Json(jw.clone());
    let key = bytes::Bytes::from(key);
    let joined = {
        // As LB.WATCH: the key's shard, then the registry. The group
        // queues the snapshot (`LiveBoards::join`).
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
    let _ = pump(&server, &mut ws, &sock, &jw).await;
    server.live.leave(&group, &me);
    jw.outbox.close();
}

/// Writes all of `buf` to `sock`.
async fn write_all(sock: &TcpStream, buf: &[u8]) -> std::io::Result<()> {
    let mut at = 0;
    while at < buf.len() {
        sock.writable().await?;
        match sock.try_write(&buf[at..]) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => at += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes what the watcher's queue holds, unless the watcher is cut off
/// meanwhile (a reader that stopped reading: the queue behind it grew
/// past its limit).
async fn drain(sock: &TcpStream, jw: &JsonWatcher, buf: &mut Vec<u8>) -> std::io::Result<()> {
    buf.clear();
    let n = jw.outbox.take_into(buf);
    if n == 0 {
        return Ok(());
    }
    tokio::select! {
        r = write_all(sock, buf) => r?,
        _ = jw.cut.notified() => return Ok(()),
    }
    jw.outbox.written(n);
    Ok(())
}

/// Writes what the board's messages left queued (the snapshot, then
/// whatever the socket could not take at once; the live-boards task
/// writes the rest itself) while reading the browser's frames; returns
/// when the connection ends.
async fn pump(
    server: &Server,
    ws: &mut WebSocketStream<Wire>,
    sock: &TcpStream,
    jw: &JsonWatcher,
) -> Result<(), tungstenite::Error> {
    let mut shutdown = server.shutdown_watch();
    let mut buf = Vec::new();
    loop {
        if jw.killed.load(Ordering::Acquire) {
            let close = close_frame(CloseCode::Policy, "output buffer limit");
            let _ = tokio::time::timeout(Duration::from_secs(1), write_all(sock, &close)).await;
            return Ok(());
        }
        if jw.outbox.pending() > 0 {
            drain(sock, jw, &mut buf).await?;
            continue;
        }
        tokio::select! {
            _ = jw.outbox.ready() => {}
            _ = jw.cut.notified() => {}
            m = ws.next() => match m {
                None | Some(Ok(Message::Close(_))) => {
                    // Tungstenite queued its close reply.
                    let _ = tokio::time::timeout(
                        Duration::from_secs(1),
                        drain(sock, jw, &mut buf),
                    )
                    .await;
                    return Ok(());
                }
                Some(Err(e)) => return Err(e),
                // Pings are answered by tungstenite; the rest is ignored.
                Some(Ok(_)) => {}
            },
            _ = shutdown.changed() => return Ok(()),
        }
    }
}

/// A close frame from a server.
fn close_frame(code: CloseCode, reason: &str) -> Vec<u8> {
    let mut payload = u16::from(code).to_be_bytes().to_vec();
    payload.extend_from_slice(reason.as_bytes());
    let mut f = ws_text_frame(&payload);
    f[0] = 0x88; // FIN, close
    f
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
    fn a_close_frame_names_its_code() {
        assert_eq!(
            close_frame(CloseCode::Policy, "x"),
            [0x88, 3, 0x03, 0xf0, b'x']
        );
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
