//! `GET /ws/boards/{key}?n=10[&interval=100]`: a WebSocket (RFC 6455) that
//! streams a board's snapshot and diffs as JSON text frames, one message a
//! frame, from the same groups LB.WATCH uses (`state::watch`): a WebSocket
//! watcher of (board, n, interval) shares its diffs with RESP watchers of
//! the same. Database 0. The server only sends; of what the browser sends
//! it reads ping (answered with pong) and close.
//!
//! JSON: `{"type":"snapshot"|"diff","key":k,"version":v,"entries":[[place,
//! member, score] | [place, null] ...]}`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::state::watch::{
    top_of_value, GroupKey, Watcher, DEFAULT_INTERVAL_MS, MAX_N, MIN_INTERVAL_MS,
};
use crate::state::{unix_ms, Server};

const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The `Sec-WebSocket-Accept` value for a `Sec-WebSocket-Key`.
pub fn accept_key(key: &str) -> String {
    let mut h = sha1_smol::Sha1::new();
    h.update(key.trim().as_bytes());
    h.update(GUID.as_bytes());
    base64(&h.digest().bytes())
}

fn base64(b: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in b.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A server frame (unmasked) of `opcode` carrying `payload`.
pub fn frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(payload.len() + 10);
    f.push(0x80 | opcode);
    match payload.len() {
        n if n < 126 => f.push(n as u8),
        n if n <= u16::MAX as usize => {
            f.push(126);
            f.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            f.push(127);
            f.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    f.extend_from_slice(payload);
    f
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

/// Upgrades the connection and streams (`key`, n, interval) until either
/// side closes, the watcher is cut off at its limit, or the server stops.
pub async fn serve(
    server: Arc<Server>,
    mut stream: TcpStream,
    ws_key: &str,
    key: Vec<u8>,
    n: u64,
    interval_ms: u64,
) {
    let head = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n",
        accept_key(ws_key)
    );
    if stream.write_all(head.as_bytes()).await.is_err() {
        return;
    }
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
    let _ = pump(&server, &mut stream, &jw, &joined.snapshot.json).await;
    server.live.leave(&group, &me);
    jw.outbox.close();
}

/// Sends the snapshot, then each queued message, while reading the
/// browser's frames; returns when the connection ends.
async fn pump(
    server: &Server,
    stream: &mut TcpStream,
    jw: &crate::state::watch::JsonWatcher,
    snapshot: &[u8],
) -> std::io::Result<()> {
    let mut shutdown = server.shutdown.subscribe();
    let (mut rd, mut wr) = stream.split();
    wr.write_all(&frame(1, snapshot)).await?;
    let mut inbuf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 1024];
    let mut queued = Vec::new();
    loop {
        if jw.killed.load(Ordering::Acquire) {
            let _ = wr.write_all(&frame(8, &1008u16.to_be_bytes())).await;
            return Ok(());
        }
        queued.clear();
        let n = jw.outbox.take_into(&mut queued);
        if n > 0 {
            for msg in queued.split(|b| *b == b'\n').filter(|m| !m.is_empty()) {
                wr.write_all(&frame(1, msg)).await?;
            }
            jw.outbox.written(n);
            continue;
        }
        tokio::select! {
            _ = jw.outbox.ready() => {}
            r = rd.read(&mut chunk) => {
                let k = r?;
                if k == 0 {
                    return Ok(());
                }
                inbuf.extend_from_slice(&chunk[..k]);
                while let Some((opcode, payload, used)) = parse_client_frame(&inbuf) {
                    inbuf.drain(..used);
                    match opcode {
                        8 => {
                            let _ = wr.write_all(&frame(8, &payload)).await;
                            return Ok(());
                        }
                        9 => wr.write_all(&frame(10, &payload)).await?,
                        _ => {}
                    }
                }
                if inbuf.len() > 64 * 1024 {
                    return Ok(());
                }
            }
            _ = shutdown.changed() => return Ok(()),
            // Cut off at its limit (or idle): look again.
            _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
        }
    }
}

/// One whole frame from the browser (masked): (opcode, unmasked payload,
/// bytes used), or None while incomplete.
pub fn parse_client_frame(b: &[u8]) -> Option<(u8, Vec<u8>, usize)> {
    if b.len() < 2 {
        return None;
    }
    let opcode = b[0] & 0x0f;
    let masked = b[1] & 0x80 != 0;
    let (len, mut at) = match b[1] & 0x7f {
        126 => (u16::from_be_bytes([*b.get(2)?, *b.get(3)?]) as usize, 4),
        127 => {
            let mut l = [0u8; 8];
            l.copy_from_slice(b.get(2..10)?);
            (usize::try_from(u64::from_be_bytes(l)).ok()?, 10)
        }
        n => (n as usize, 2),
    };
    let mask = if masked {
        let m = [
            *b.get(at)?,
            *b.get(at + 1)?,
            *b.get(at + 2)?,
            *b.get(at + 3)?,
        ];
        at += 4;
        Some(m)
    } else {
        None
    };
    let end = at.checked_add(len)?;
    let mut payload = b.get(at..end)?.to_vec();
    if let Some(m) = mask {
        for (i, x) in payload.iter_mut().enumerate() {
            *x ^= m[i % 4];
        }
    }
    Some((opcode, payload, end))
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
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b"a"), "YQ==");
    }

    #[test]
    fn frames_both_ways() {
        assert_eq!(frame(1, b"hi"), vec![0x81, 2, b'h', b'i']);
        assert_eq!(&frame(1, &[0; 200])[..4], &[0x81, 126, 0, 200]);
        // A masked "Hello" from RFC 6455 5.7.
        let f = [
            0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
        ];
        assert_eq!(parse_client_frame(&f), Some((1, b"Hello".to_vec(), 11)));
        assert_eq!(parse_client_frame(&f[..6]), None);
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
