//! The HTTP listener (issue 18), off unless `http-port` is set: `GET
//! /metrics` (Prometheus text, `metrics`), `GET /ws/boards/{key}` (a
//! board's top n live over a WebSocket, `ws`) and `GET /boards/{key}` (a
//! page that shows it). Bound to `http-bind`; when
//! `requirepass` is set every request needs `Authorization: Bearer
//! <password>`.
//!
//! HTTP/1.1 is hyper's (`hyper::server::conn::http1`, driven by
//! hyper-util's tokio glue), the WebSocket protocol tokio-tungstenite's:
//! the listener faces browsers and scrapers on the network, and those
//! crates parse malformed requests and frames for a living. What stays
//! here is the routing and the limits on slow or hostile clients: a
//! request head must arrive within [`HEAD_TIMEOUT`] and fit in
//! [`MAX_HEAD`] bytes, one request per connection (`Connection: close`),
//! and a WebSocket's messages wait in its bounded queue (`ws`).
//!
//! Not here: what the metrics say (`metrics`), the watchers (`state::watch`).

pub mod metrics;
pub mod ws;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};

use crate::state::Server;

/// The live board page (`GET /boards/{key}`): it reads the key, `n` and
/// `access_token` from its own address and opens the WebSocket.
const BOARD_PAGE: &str = include_str!("board.html");

/// Longest request head read (request line and headers; hyper's buffer,
/// whose least is 8 KiB).
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
        let mut shutdown = server.shutdown_watch();
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

/// A whole response.
fn respond(
    status: StatusCode,
    content_type: &'static str,
    extra: Option<(header::HeaderName, &'static str)>,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // One request per connection: hyper closes after a response that says
    // so (a keep-alive switched off for the connection would also mark
    // the 101 of a WebSocket `close`, which clients refuse).
    h.insert(header::CONNECTION, HeaderValue::from_static("close"));
    if let Some((name, value)) = extra {
        h.insert(name, HeaderValue::from_static(value));
    }
    r
}

/// One connection: one request (hyper reads and checks it), answered,
/// or upgraded to a WebSocket.
async fn serve(server: Arc<Server>, stream: TcpStream) {
    let service = service_fn(move |req| {
        let server = server.clone();
        async move { Ok::<_, Infallible>(route(server, req).await) }
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_buf_size(MAX_HEAD)
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    // Malformed requests are answered (400) and closed by hyper.
    let _ = conn.await;
}

fn header_str(req: &Request<Incoming>, name: header::HeaderName) -> Option<&str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

async fn route(server: Arc<Server>, mut req: Request<Incoming>) -> Response<Full<Bytes>> {
    let query = req.uri().query().unwrap_or("").to_string();
    let pass = server.config.read().requirepass.clone();
    // A browser cannot set headers on a WebSocket: the page passes the
    // token as `access_token` in the query instead.
    let token = header_str(&req, header::AUTHORIZATION)
        .map(str::to_string)
        .or_else(|| {
            ws::query_param(&query, "access_token")
                .map(|t| format!("Bearer {}", String::from_utf8_lossy(&ws::percent_decode(t))))
        });
    if !authorized(pass.as_deref(), token.as_deref()) {
        return respond(
            StatusCode::UNAUTHORIZED,
            "text/plain",
            Some((header::WWW_AUTHENTICATE, "Bearer realm=\"rostrum\"")),
            "a bearer token (requirepass) is required\n",
        );
    }
    if req.method() != Method::GET {
        return respond(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            Some((header::ALLOW, "GET")),
            "GET only\n",
        );
    }
    let path = req.uri().path().to_string();
    match path.as_str() {
        "/metrics" => {
            // The scrape walks the keyspace: off the async workers.
            let s = server.clone();
            let body = tokio::task::spawn_blocking(move || metrics::render(&s))
                .await
                .unwrap_or_default();
            respond(
                StatusCode::OK,
                "text/plain; version=0.0.4; charset=utf-8",
                None,
                body,
            )
        }
        p if p.starts_with("/ws/boards/") => {
            let key = ws::percent_decode(&p["/ws/boards/".len()..]);
            let upgrade = header_str(&req, header::UPGRADE)
                .is_some_and(|u| u.eq_ignore_ascii_case("websocket"));
            let ws_key = header_str(&req, header::SEC_WEBSOCKET_KEY).map(str::to_string);
            let (true, Some(ws_key), Some((n, interval))) =
                (upgrade, ws_key, ws::watch_params(&query))
            else {
                return respond(
                    StatusCode::BAD_REQUEST,
                    "text/plain",
                    None,
                    "a WebSocket upgrade with n in 1..1000 and interval >= 10\n",
                );
            };
            let upgraded = hyper::upgrade::on(&mut req);
            tokio::spawn(async move {
                // The TCP stream back from hyper, for the live-boards
                // task to write to (`ws`).
                let Ok(up) = upgraded.await else { return };
                if let Ok(parts) = up.downcast::<TokioIo<TcpStream>>() {
                    let sock = parts.io.into_inner();
                    ws::serve(server, sock, parts.read_buf, key, n, interval).await;
                }
            });
            let mut r = Response::new(Full::new(Bytes::new()));
            *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
            let h = r.headers_mut();
            h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
            h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
            if let Ok(v) = HeaderValue::from_str(&ws::accept_key(&ws_key)) {
                h.insert(header::SEC_WEBSOCKET_ACCEPT, v);
            }
            r
        }
        p if p.starts_with("/boards/") => {
            respond(StatusCode::OK, "text/html; charset=utf-8", None, BOARD_PAGE)
        }
        _ => respond(StatusCode::NOT_FOUND, "text/plain", None, "not found\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
