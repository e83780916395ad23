//! TLS handshakes: a client accepted on `tls-port` (each in its own task,
//! with a time limit, so that a client that never finishes cannot hold up
//! the listener or anyone else), and [`connect`], the outgoing side for
//! links such as replication. The configurations come from `state::tls`.

use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::ServerName;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::connection;
use crate::state::Server;

/// The longest a handshake may take before the connection is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs the server side of the handshake on a client of the TLS port
/// with the configuration in force now (the certificates CONFIG SET last
/// put in place), then serves it, or, with `reject`, sends it that error
/// line and closes (protected mode, maxclients). A client that fails the
/// handshake (plaintext, no certificate or an untrusted or expired one
/// when one is required) or takes too long is dropped.
pub async fn accept(server: Arc<Server>, stream: TcpStream, reject: Option<&'static [u8]>) {
    let Some(config) = server.tls.server_config() else {
        return;
    };
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let handshake = TlsAcceptor::from(config).accept(stream);
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
        Ok(Ok(mut tls)) => match reject {
            Some(line) => {
                let _ = tls.write_all(line).await;
                let _ = tls.shutdown().await;
            }
            None => connection::serve(server, tls, None).await,
        },
        // Redis logs these at `verbose`: not shown at the default level,
        // so that a stream of bad clients does not flood the log.
        Ok(Err(e)) => {
            tracing::debug!("Error accepting a client connection: {e} (addr={peer})");
        }
        Err(_) => {
            tracing::debug!(
                "Error accepting a client connection: TLS handshake timed out (addr={peer})"
            );
        }
    }
}

/// Opens a TLS connection to `host:port` as a client, with the configured
/// certificates: `tls-client-cert-file` / `tls-client-key-file` (or, when
/// unset, `tls-cert-file` / `tls-key-file`) as its own, the CAs of
/// `tls-ca-cert-file` / `tls-ca-cert-dir` to check the other side's chain
/// (not its name, as Redis), TLS versions and suites as configured. For
/// the replication link under `tls-replication yes`. Fails when TLS is not
/// configured (no CA, or TLS not in use), when the connection or the
/// handshake fails, or after [`HANDSHAKE_TIMEOUT`].
pub async fn connect(
    server: &Server,
    host: &str,
    port: u16,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    use std::io::{Error, ErrorKind};
    let config = server.tls.client_config().ok_or_else(|| {
        Error::new(
            ErrorKind::NotConnected,
            "TLS is not configured for outgoing links (tls-ca-cert-file or tls-ca-cert-dir, and tls-cert-file)",
        )
    })?;
    let name = ServerName::try_from(host.to_string())
        .map_err(|e| Error::new(ErrorKind::InvalidInput, format!("{host}: {e}")))?;
    let attempt = async {
        let tcp = TcpStream::connect((host, port)).await?;
        let _ = tcp.set_nodelay(true);
        TlsConnector::from(config).connect(name, tcp).await
    };
    tokio::time::timeout(HANDSHAKE_TIMEOUT, attempt)
        .await
        .map_err(|_| Error::new(ErrorKind::TimedOut, "TLS handshake timed out"))?
}
