//! The HTTP listener (issue 18), off unless `http-port` is set: `GET
//! /metrics` (Prometheus text, `metrics`), `GET /ws/boards/{key}` (a
//! board's top n live over a WebSocket, `ws`) and `GET /boards/{key}` (a
//! page that shows it). Bound to `http-bind`; when
//! `requirepass` is set every request needs `Authorization: Bearer
//! <password>`.
//!
//! A deliberately small HTTP/1.1 server: one GET request per connection,
//! answered with `Connection: close` (or upgraded to a WebSocket). That is
//! all a scraper and the page need, and it keeps the listener free of a
//! web framework's dependencies.
//!
//! Not here: what the metrics say (`metrics`), the watchers (`state::watch`).

pub mod metrics;
pub mod ws;

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::state::Server;

/// The live board page (`GET /boards/{key}`): it reads the key, `n` and
/// `access_token` from its own address and opens the WebSocket.
const BOARD_PAGE: &str = include_str!("board.html");

/// Longest request head read (request line and headers).
const MAX_HEAD: usize = 16 * 1024;
/// How long a client may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// Binds `http-bind`:`http-port` when the port is set, and serves there
/// until shutdown.
pub async fn spawn(server: Arc<Server>) -> std::io::Result<()> {
    let (bind, port) = {
        let c = server.config.read();
        (c.http_bind.clone(), c.http_port)
    };
    if port == 0 {
        return Ok(());
    }
    let listener = TcpListener::bind((bind.as_str(), port as u16)).await?;
    tracing::info!("HTTP listener on {}", listener.local_addr()?);
    tokio::spawn(async move {
        let mut shutdown = server.shutdown.subscribe();
        loop {
            tokio::select! {
                r = listener.accept() => match r {
                    Ok((stream, _)) => {
                        tokio::spawn(serve(server.clone(), stream));
                    }
                    Err(e) => tracing::warn!("HTTP accept: {e}"),
                },
                _ = shutdown.changed() => return,
            }
        }
    });
    Ok(())
}

/// One parsed request head.
#[derive(Debug, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// The path without its query string.
    pub path: String,
    /// The query string, without `?`.
    pub query: String,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
    /// The `Sec-WebSocket-Key` header of an upgrade, if any.
    pub ws_key: Option<String>,
}

/// Parses a request head (up to its blank line); None when malformed.
pub fn parse_head(head: &[u8]) -> Option<Request> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_string();
    let target = first.next()?;
    if !first.next()?.starts_with("HTTP/1.") {
        return None;
    }
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), q.to_string()),
        None => (target.to_string(), String::new()),
    };
    let mut authorization = None;
    let mut ws_key = None;
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            let name = name.trim();
            if name.eq_ignore_ascii_case("authorization") {
                authorization = Some(value.trim().to_string());
            } else if name.eq_ignore_ascii_case("sec-websocket-key") {
                ws_key = Some(value.trim().to_string());
            }
        }
    }
    Some(Request {
        method,
        path,
        query,
        authorization,
        ws_key,
    })
}

/// Whether the request may be served: no password, or the right bearer
/// token (compared in constant time).
pub fn authorized(requirepass: Option<&[u8]>, authorization: Option<&str>) -> bool {
    let Some(pass) = requirepass else {
        return true;
    };
    let Some(token) = authorization.and_then(|a| {
        a.strip_prefix("Bearer ")
            .or_else(|| a.strip_prefix("bearer "))
    }) else {
        return false;
    };
    let token = token.trim().as_bytes();
    if token.len() != pass.len() {
        return false;
    }
    token
        .iter()
        .zip(pass)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

/// Writes a whole response and closes.
async fn respond(
    stream: &mut TcpStream,
    status: &str,
    content_type: &str,
    extra: &str,
    body: &[u8],
) {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body).await;
    let _ = stream.shutdown().await;
}

/// Reads the request head: up to the blank line, at most [`MAX_HEAD`].
async fn read_head(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.truncate(end);
            return Some(buf);
        }
        if buf.len() > MAX_HEAD {
            return None;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

async fn serve(server: Arc<Server>, mut stream: TcpStream) {
    let head = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut stream)).await {
        Ok(Some(h)) => h,
        _ => return,
    };
    let Some(req) = parse_head(&head) else {
        respond(
            &mut stream,
            "400 Bad Request",
            "text/plain",
            "",
            b"bad request\n",
        )
        .await;
        return;
    };
    let pass = server.config.read().requirepass.clone();
    // A browser cannot set headers on a WebSocket: the page passes the
    // token as `access_token` in the query instead.
    let token = req.authorization.clone().or_else(|| {
        ws::query_param(&req.query, "access_token")
            .map(|t| format!("Bearer {}", String::from_utf8_lossy(&ws::percent_decode(t))))
    });
    if !authorized(pass.as_deref(), token.as_deref()) {
        respond(
            &mut stream,
            "401 Unauthorized",
            "text/plain",
            "WWW-Authenticate: Bearer realm=\"rostrum\"\r\n",
            b"a bearer token (requirepass) is required\n",
        )
        .await;
        return;
    }
    if req.method != "GET" {
        respond(
            &mut stream,
            "405 Method Not Allowed",
            "text/plain",
            "Allow: GET\r\n",
            b"GET only\n",
        )
        .await;
        return;
    }
    match req.path.as_str() {
        "/metrics" => {
            // The scrape walks the keyspace: off the async workers.
            let s = server.clone();
            let body = tokio::task::spawn_blocking(move || metrics::render(&s))
                .await
                .unwrap_or_default();
            respond(
                &mut stream,
                "200 OK",
                "text/plain; version=0.0.4; charset=utf-8",
                "",
                body.as_bytes(),
            )
            .await;
        }
        p if p.starts_with("/ws/boards/") => {
            let key = ws::percent_decode(&p["/ws/boards/".len()..]);
            let (Some(ws_key), Some((n, interval))) =
                (req.ws_key.clone(), ws::watch_params(&req.query))
            else {
                respond(
                    &mut stream,
                    "400 Bad Request",
                    "text/plain",
                    "",
                    b"a WebSocket upgrade with n in 1..1000 and interval >= 10\n",
                )
                .await;
                return;
            };
            ws::serve(server, stream, &ws_key, key, n, interval).await;
        }
        p if p.starts_with("/boards/") => {
            respond(
                &mut stream,
                "200 OK",
                "text/html; charset=utf-8",
                "",
                BOARD_PAGE.as_bytes(),
            )
            .await;
        }
        _ => {
            respond(
                &mut stream,
                "404 Not Found",
                "text/plain",
                "",
                b"not found\n",
            )
            .await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_heads_parse() {
        let r = parse_head(
            b"GET /ws/boards/x?n=10 HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer s3\r\n",
        )
        .expect("a request");
        assert_eq!(r.method, "GET");
        assert_eq!(r.path, "/ws/boards/x");
        assert_eq!(r.query, "n=10");
        assert_eq!(r.authorization.as_deref(), Some("Bearer s3"));
        assert!(parse_head(b"GET /\r\n").is_none());
        assert!(parse_head(b"GET / SPDY/3\r\n").is_none());
        assert!(parse_head(&[0xff, 0xfe]).is_none());
    }

    #[test]
    fn bearer_token_is_the_password() {
        assert!(authorized(None, None));
        assert!(authorized(Some(b"pw"), Some("Bearer pw")));
        assert!(!authorized(Some(b"pw"), Some("Bearer px")));
        assert!(!authorized(Some(b"pw"), Some("Basic pw")));
        assert!(!authorized(Some(b"pw"), None));
        assert!(!authorized(Some(b"pw"), Some("Bearer pww")));
    }
}
