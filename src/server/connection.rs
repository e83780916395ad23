//! One connection: reads requests, runs every complete command already
//! buffered, then sends all their replies in one write.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::client::{ClientInfo, ClientState};
use super::state::{unix_ms, Server};
use crate::commands;
use crate::protocol::{Limits, Parsed, Reply, RequestParser};

/// Replies are sent early once this many bytes are waiting.
const FLUSH_AT: usize = 64 * 1024;
/// Read buffer size for ordinary traffic.
const READ_CHUNK: usize = 16 * 1024;

/// Serves one client until it quits, is killed, breaks the protocol or the
/// server shuts down.
pub async fn serve(server: Arc<Server>, mut stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let addr = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let laddr = stream
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let id = server.next_client_id();
    let info = Arc::new(ClientInfo::new(id, addr, laddr, unix_ms()));
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        info.fd.store(stream.as_raw_fd() as i64, Ordering::Relaxed);
    }
    server.clients.insert(id, info.clone());
    server
        .stats
        .connections_received
        .fetch_add(1, Ordering::Relaxed);
    let needs_auth = server.config.read().requirepass.is_some();
    let mut client = ClientState::new(info.clone(), !needs_auth);
    let mut shutdown = server.shutdown.subscribe();

    let mut rbuf = BytesMut::with_capacity(READ_CHUNK);
    let mut parser = RequestParser::new();
    let mut out = Reply::new(false);

    'conn: loop {
        if rbuf.capacity() - rbuf.len() < 1024 {
            rbuf.reserve(READ_CHUNK);
        }
        let want = parser.wanted(rbuf.len());
        if want > rbuf.capacity() - rbuf.len() {
            rbuf.reserve(want);
        }
        let n = tokio::select! {
            r = stream.read_buf(&mut rbuf) => match r {
                Ok(0) | Err(_) => break 'conn,
                Ok(n) => n,
            },
            _ = info.wake.notified() => {
                if info.killed.load(Ordering::Acquire) { break 'conn; }
                continue 'conn;
            }
            _ = shutdown.changed() => break 'conn,
        };
        server
            .stats
            .net_input_bytes
            .fetch_add(n as u64, Ordering::Relaxed);
        if rbuf.len() as u64 > server.query_buffer_limit.load(Ordering::Relaxed) {
            tracing::warn!(
                client = id,
                "closing client that reached max query buffer length"
            );
            break 'conn;
        }

        let limits = Limits {
            max_bulk_len: server.proto_max_bulk_len.load(Ordering::Relaxed) as usize,
            max_multibulk_len: i32::MAX as usize,
            authenticated: client.authenticated,
        };
        loop {
            match parser.parse(&rbuf, &limits) {
                Ok(None) => break,
                Ok(Some(Parsed::Skip { consumed })) => rbuf.advance(consumed),
                Ok(Some(Parsed::Command { consumed })) => {
                    {
                        let args = parser.args(&rbuf);
                        commands::execute(&server, &mut client, &mut out, &args);
                    }
                    rbuf.advance(consumed);
                    if client.close_after_reply || info.killed.load(Ordering::Acquire) {
                        break;
                    }
                    if out.len() >= FLUSH_AT {
                        if send(&server, &mut stream, &mut out).await.is_err() {
                            break 'conn;
                        }
                    }
                }
                Err(e) => {
                    out.error(&e.to_string());
                    tracing::debug!(client = id, error = %e, "protocol error");
                    let _ = send(&server, &mut stream, &mut out).await;
                    break 'conn;
                }
            }
        }
        commands::flush_stats(&server, &mut client);
        if send(&server, &mut stream, &mut out).await.is_err() {
            break;
        }
        if client.close_after_reply || info.killed.load(Ordering::Acquire) {
            break;
        }
    }
    commands::flush_stats(&server, &mut client);
    commands::disconnect(&server, &mut client);
    server.clients.remove(&id);
}

async fn send(server: &Server, stream: &mut TcpStream, out: &mut Reply) -> std::io::Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    stream.write_all(&out.buf).await?;
    server
        .stats
        .net_output_bytes
        .fetch_add(out.buf.len() as u64, Ordering::Relaxed);
    out.buf.clear();
    if out.buf.capacity() > 1024 * 1024 {
        out.buf.shrink_to(64 * 1024);
    }
    Ok(())
}
