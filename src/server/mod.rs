//! The network side, at the top: the listener, one task per connection,
//! the periodic work and signals. The state they share is `state`;
//! commands live in `commands`.

pub mod connection;
pub mod http;
pub mod live;
pub mod logging;
pub mod replication;
pub mod tls;
pub mod transport;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::commands;
use crate::protocol::Reply;
use crate::state::client::{ClientInfo, ClientState};
use crate::state::{journal, memory, notify};
use crate::state::{unix_ms, Server};

/// Binds every configured address, then serves until shutdown (SHUTDOWN,
/// SIGTERM or Ctrl-C). Returns once every listener has stopped.
/// `listening` is called once every listener is bound (the daemonized
/// parent exits then; see `main`).
pub async fn run(server: Arc<Server>, listening: impl FnOnce()) -> std::io::Result<()> {
    let (binds, port, tls_port) = {
        let c = server.config.read();
        (c.bind.clone(), c.port, crate::state::tls::port(&c))
    };
    // `port 0` with a TLS port: TLS only, as Redis.
    let plain = port != 0 || tls_port == 0;
    let mut listeners = Vec::new();
    for addr in &binds {
        let addr = addr.trim_start_matches('-');
        if plain {
            let l = TcpListener::bind((addr, port)).await?;
            server.port.store(
                l.local_addr()?.port() as u64,
                std::sync::atomic::Ordering::Relaxed,
            );
            tracing::info!("Ready to accept connections tcp on {}", l.local_addr()?);
            listeners.push((l, false));
        }
        if tls_port != 0 {
            let l = TcpListener::bind((addr, tls_port)).await?;
            tracing::info!("Ready to accept connections tls on {}", l.local_addr()?);
            listeners.push((l, true));
        }
    }
    listening();
    spawn_cron(server.clone());
    replication::spawn_ping(server.clone());
    // `replicaof host port` in the config file.
    let configured = server.config.read().param("replicaof");
    if let [host, port] = configured.split_whitespace().collect::<Vec<_>>()[..] {
        if let Ok(port) = port.parse::<u16>() {
            let addr = crate::state::replication::MasterAddr {
                host: host.to_string(),
                port,
            };
            if server.replication.set_master(Some(addr)) {
                commands::replication::become_replica(&server);
            }
        }
    }
    replication::spawn_link(server.clone());
    live::spawn(server.clone());
    http::spawn(server.clone()).await?;
    spawn_signals(server.clone());
    let mut tasks = Vec::new();
    for (l, tls) in listeners {
        tasks.push(tokio::spawn(accept_loop(server.clone(), l, tls)));
    }
    for t in tasks {
        let _ = t.await;
    }
    Ok(())
}

/// The reply to a non-loopback client refused by protected mode.
const PROTECTED_MODE_DENIED: &[u8] = b"-DENIED Rostrum is running in protected mode: protected mode is enabled and no password is set for the default user, so only connections from the loopback interface are accepted. To serve other hosts, set a password (requirepass), or turn protected mode off (CONFIG SET protected-mode no from a loopback connection, or --config protected-mode=no at start-up), and restart if needed.\r\n";

/// Accepts clients on `listener` until shutdown; `tls`: the TLS port,
/// whose handshakes run in each client's own task (see `tls::accept`).
async fn accept_loop(server: Arc<Server>, listener: TcpListener, tls: bool) {
    let mut shutdown = server.shutdown.subscribe();
    loop {
        tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, peer)) => {
                    let (max, protected) = {
                        let c = server.config.read();
                        (c.maxclients as usize, c.protected_mode && c.requirepass.is_none())
                    };
                    // Protected mode: without a password only loopback
                    // clients are served, as in Redis.
                    let reject: Option<&'static [u8]> = if protected && !peer.ip().is_loopback() {
                        Some(PROTECTED_MODE_DENIED)
                    } else if server.clients.len() >= max {
                        Some(b"-ERR max number of clients reached\r\n")
                    } else {
                        None
                    };
                    if reject.is_some() {
                        server.stats.rejected_connections.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    match (tls, reject) {
                        (true, reject) => {
                            tokio::spawn(tls::accept(server.clone(), stream, reject));
                        }
                        (false, Some(line)) => {
                            tokio::spawn(async move {
                                use tokio::io::AsyncWriteExt;
                                let mut s = stream;
                                let _ = s.write_all(line).await;
                            });
                        }
                        (false, None) => {
                            tokio::spawn(connection::serve(server.clone(), stream));
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            _ = shutdown.changed() => break,
        }
    }
}

/// Rolls the seasonal boards whose boundary has passed (issue 17), each
/// with `LB.RESET key UNTIL now` run as an internal client, so that the
/// roll takes the board's lock, is seen by a running AOF rewrite and is
/// logged like any write. A board deleted or renamed since its timer was
/// armed answers an error, which is ignored.
fn roll_due_boards(server: &Server, client: &mut ClientState) {
    let now = unix_ms();
    let due = server.season_timers.take_due(now, 1000);
    if due.is_empty() {
        return;
    }
    let now_arg = now.to_string();
    for (db, key) in due {
        client.db = db;
        client.clock.reset();
        let mut out = Reply::new(false);
        let args: [&[u8]; 4] = [b"LB.RESET", &key, b"UNTIL", now_arg.as_bytes()];
        commands::execute(server, client, &mut out, &args);
    }
    commands::flush_stats(server, client);
}

/// The periodic work: active expiry and seasonal boards' boundaries, `hz`
/// times a second.
fn spawn_cron(server: Arc<Server>) {
    tokio::spawn(async move {
        let mut shutdown = server.shutdown.subscribe();
        let info = Arc::new(ClientInfo::new(0, String::new(), String::new(), unix_ms()));
        let mut season_client = ClientState::new(info, true);
        loop {
            let hz = server.config.read().hz.clamp(1, 500);
            let period = Duration::from_millis(1000 / hz);
            tokio::select! {
                _ = tokio::time::sleep(period) => {}
                _ = shutdown.changed() => break,
            }
            // Keep going while much is due, but yield between rounds. An AOF
            // rewrite pauses it (see persistence::rewrite), and so does
            // CLIENT PAUSE (deleting is writing); expired keys are logged
            // to the AOF as DELs.
            for _ in 0..16 {
                // A replica hides expired keys but leaves deleting them to
                // its primary (whose DEL comes in the stream), as Redis.
                if journal::expiry_paused(&server.aof)
                    || server.pause.until().is_some()
                    || server.replication.is_replica()
                {
                    break;
                }
                let (_, more) = server
                    .keyspace
                    .active_expire(unix_ms(), 200, &mut |db, keys| {
                        let flags = server.notify_flags.load(Ordering::Relaxed);
                        notify::publish_expired(&server.pubsub, flags, db, &keys);
                        server.removed_expired(db, keys);
                    });
                if !more {
                    break;
                }
                tokio::task::yield_now().await;
            }
            // Background eviction (as Redis's eviction time event): a
            // command that spent its eviction time budget may leave memory
            // over maxmemory; the cron carries on while it is, so an idle
            // server does not stay over the limit until the next command.
            for _ in 0..64 {
                if server.pause.until().is_some()
                    || memory::perform_evictions(&server) != memory::Outcome::Running
                {
                    break;
                }
                tokio::task::yield_now().await;
            }
            roll_due_boards(&server, &mut season_client);
            server.tracking.after_batch(&server);
        }
    });
}

fn spawn_signals(server: Arc<Server>) {
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let Ok(mut term) = signal(SignalKind::terminate()) else {
                return;
            };
            // SIGHUP: reopen the log file (logrotate).
            if let Ok(mut hup) = signal(SignalKind::hangup()) {
                tokio::spawn(async move {
                    while hup.recv().await.is_some() {
                        logging::reopen();
                        tracing::info!("Received SIGHUP, log file reopened");
                    }
                });
            }
            let mut int = match signal(SignalKind::interrupt()) {
                Ok(s) => s,
                Err(_) => return,
            };
            tokio::select! {
                _ = term.recv() => tracing::warn!("Received SIGTERM scheduling shutdown..."),
                _ = int.recv() => tracing::warn!("Received SIGINT scheduling shutdown..."),
            }
            server.request_shutdown();
        }
    });
}
