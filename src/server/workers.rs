//! Where connections run: `worker-threads` runtimes of one worker thread
//! each, every accepted connection placed on the one serving the fewest.
//!
//! One runtime of N workers would let any worker run any connection: a
//! worker woken by its socket wakes another to steal the tasks it queued,
//! and on 2 cores (issue 20) those park / unpark hand-offs cost more CPU
//! per request than the second worker gains at `-P 16`. A runtime of one
//! worker has nobody to steal from or to wake: its thread waits on its own
//! sockets, runs the connections they make ready and sleeps again. The
//! runtimes are still tokio's multi-thread kind, so `block_in_place` (a
//! long script, SAVE) hands the worker's connections to a fresh thread as
//! before, and everything shared between connections (shard locks, the AOF
//! feed, blocking pops, pub/sub, CLIENT KILL / PAUSE) is runtime-agnostic:
//! a waker wakes its task on whichever runtime it lives.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::net::TcpStream;
use tokio::runtime::Handle;

use crate::state::Server;

use super::{connection, tls};

/// The runtimes connections are placed on; the first one also runs the
/// listeners and the background tasks (it is the one `server::run` runs
/// on).
#[derive(Debug, Clone)]
pub struct Workers {
    runtimes: Arc<[Runtime]>,
}

#[derive(Debug)]
struct Runtime {
    handle: Handle,
    /// Connections running there now.
    connections: Arc<AtomicUsize>,
}

/// Counts a connection on its runtime until its task ends (or is dropped
/// with the runtime).
struct Placed(Arc<AtomicUsize>);

impl Drop for Placed {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Workers {
    /// The runtimes to place connections on, the one running
    /// `server::run` first.
    pub fn new(handles: Vec<Handle>) -> Self {
        Workers {
            runtimes: handles
                .into_iter()
                .map(|handle| Runtime {
                    handle,
                    connections: Arc::new(AtomicUsize::new(0)),
                })
                .collect(),
        }
    }

    /// The runtime with the fewest connections (the first of equals).
    fn least_loaded(&self) -> Option<&Runtime> {
        self.runtimes
            .iter()
            .min_by_key(|r| r.connections.load(Ordering::Relaxed))
    }

    /// Serves an accepted client (`tls`: on the TLS port, `reject`: the
    /// line to refuse it with) on the least loaded runtime. The stream is
    /// registered with that runtime's I/O driver, so its readiness wakes
    /// that runtime's worker only.
    pub fn spawn(
        &self,
        server: Arc<Server>,
        stream: TcpStream,
        tls: bool,
        reject: Option<&'static [u8]>,
    ) {
        // A refusal is one write: no need to move it.
        let refusal = !tls && reject.is_some();
        let Some(rt) = self
            .least_loaded()
            .filter(|_| self.runtimes.len() > 1 && !refusal)
        else {
            spawn_here(server, stream, tls, reject);
            return;
        };
        rt.connections.fetch_add(1, Ordering::Relaxed);
        let placed = Placed(rt.connections.clone());
        // A tokio stream belongs to the driver that registered it: hand the
        // socket over as a plain one and register it again over there.
        let socket = match stream.into_std() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("accept: cannot move the connection to its worker: {e}");
                return;
            }
        };
        rt.handle.spawn(async move {
            let _placed = placed;
            match TcpStream::from_std(socket) {
                Ok(stream) => serve(server, stream, tls, reject).await,
                Err(e) => tracing::warn!("accept: cannot register the connection: {e}"),
            }
        });
    }
}

fn spawn_here(server: Arc<Server>, stream: TcpStream, tls: bool, reject: Option<&'static [u8]>) {
    tokio::spawn(serve(server, stream, tls, reject));
}

/// A client's task: TLS handshake first on the TLS port, the refusal line
/// for a refused client, the connection loop otherwise.
async fn serve(server: Arc<Server>, stream: TcpStream, tls: bool, reject: Option<&'static [u8]>) {
    match (tls, reject) {
        (true, reject) => tls::accept(server, stream, reject).await,
        (false, Some(line)) => {
            use tokio::io::AsyncWriteExt;
            let mut s = stream;
            let _ = s.write_all(line).await;
        }
        (false, None) => connection::serve(server, stream).await,
    }
}
