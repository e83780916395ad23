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
pub mod workers;

use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::commands;
use crate::protocol::Reply;
use crate::state::client::{ClientInfo, ClientState};
use crate::state::{journal, memory, notify};
use crate::state::{unix_ms, Server};

pub use workers::Workers;

/// Binds every configured address, then serves until shutdown (SHUTDOWN,
/// SIGTERM or Ctrl-C). Returns once every listener has stopped.
/// `listening` is called once every listener is bound (the daemonized
/// parent exits then; see `main`). Accepted clients are served on
/// `workers` (see [`Workers`]).
pub async fn run(
    server: Arc<Server>,
    workers: Workers,
    listening: impl FnOnce(),
) -> std::io::Result<()> {
    let (binds, port, tls_port) = {
        let c = server.config.read();
        (c.bind.clone(), c.port, crate::state::tls::port(&c))
    };
    spawn_signals(server.clone());
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
    serve_listeners(server, workers, listeners).await;
    Ok(())
}

/// Runs an accept loop per listener until shutdown, swapping a kind's
/// loops when CONFIG SET moves its port (`state::listeners`).
async fn serve_listeners(
    server: Arc<Server>,
    workers: Workers,
    listeners: Vec<(TcpListener, bool)>,
) {
    use crate::state::listeners::Kind;
    let mut changes = server.listeners.subscribe();
    let mut shutdown = server.shutdown_watch();
    let mut tasks: Vec<(bool, tokio::task::JoinHandle<()>)> = Vec::new();
    for (l, tls) in listeners {
        tasks.push((
            tls,
            tokio::spawn(accept_loop(server.clone(), workers.clone(), l, tls)),
        ));
    }
    loop {
        tokio::select! {
            change = changes.recv() => {
                let Some(change) = change else { break };
                let tls = change.kind == Kind::Tls;
                // Dropping an accept loop closes its socket; clients
                // already connected stay.
                for (_, t) in tasks.iter().filter(|(k, _)| *k == tls) {
                    t.abort();
                }
                tasks.retain(|(k, _)| *k != tls);
                for socket in change.sockets {
                    match TcpListener::from_std(socket) {
                        Ok(l) => {
                            let addr = l.local_addr();
                            if let Ok(a) = &addr {
                                if !tls {
                                    server.port.store(a.port() as u64, Ordering::Relaxed);
                                }
                                let kind = if tls { "tls" } else { "tcp" };
                                tracing::info!("Ready to accept connections {kind} on {a}");
                            }
                            tasks.push((tls, tokio::spawn(accept_loop(server.clone(), workers.clone(), l, tls))));
                        }
                        Err(e) => tracing::warn!("listener: {e}"),
                    }
                }
            }
            _ = shutdown.changed() => break,
        }
    }
    for (_, t) in tasks {
        let _ = t.await;
    }
}

/// The reply to a non-loopback client refused by protected mode: Redis
/// 7.0's line, word for word (clients and tools look for it).
const PROTECTED_MODE_DENIED: &[u8] = b"-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// Whether protected mode refuses a client from `peer`, as Redis 7.0's
/// `clientAcceptHandler`: protected mode on, the `default` user `nopass`
/// (no `requirepass`, no password given by ACL), and a peer that is not
/// loopback (`127.0.0.0/8`, `::1`, or either mapped into IPv6). The bind
/// addresses play no part (Redis 7.0 dropped that condition).
pub fn protected_mode_refuses(protected_mode: bool, default_nopass: bool, peer: IpAddr) -> bool {
    protected_mode && default_nopass && !peer.to_canonical().is_loopback()
}

/// Accepts clients on `listener` until shutdown; `tls`: the TLS port,
/// whose handshakes run in each client's own task (see `tls::accept`).
async fn accept_loop(server: Arc<Server>, workers: Workers, listener: TcpListener, tls: bool) {
    let mut shutdown = server.shutdown_watch();
    loop {
        tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, peer)) => {
                    let (max, protected) = {
                        let c = server.config.read();
                        (c.maxclients as usize, c.protected_mode)
                    };
                    let refused = protected
                        && protected_mode_refuses(true, default_user_nopass(&server), peer.ip());
                    let reject: Option<&'static [u8]> = if refused {
                        Some(PROTECTED_MODE_DENIED)
                    } else if server.clients.len() >= max {
                        Some(b"-ERR max number of clients reached\r\n")
                    } else {
                        None
                    };
                    if reject.is_some() {
                        server.stats.rejected_connections.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    workers.spawn(server.clone(), stream, tls, reject);
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

/// Whether the `default` user has `nopass` now (`requirepass` and ACL
/// SETUSER both change it).
fn default_user_nopass(server: &Server) -> bool {
    commands::acl::acl(server)
        .user("default")
        .is_some_and(|u| u.nopass)
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
        let mut shutdown = server.shutdown_watch();
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
                    || !server.active_expire.load(Ordering::Relaxed)
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
            // The allocator is read afresh here, not on the command path.
            server.memory.refresh_if_due();
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

/// Installs the signal handlers at once (before the server says it is
/// ready, as Redis does: a SIGTERM right after "Ready to accept
/// connections" must shut down cleanly, not kill), then waits for them.
fn spawn_signals(server: Arc<Server>) {
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
        let Ok(mut int) = signal(SignalKind::interrupt()) else {
            return;
        };
        tokio::spawn(async move {
            tokio::select! {
                _ = term.recv() => tracing::warn!("Received SIGTERM scheduling shutdown..."),
                _ = int.recv() => tracing::warn!("Received SIGINT scheduling shutdown..."),
            }
            server.request_shutdown();
        });
    }
    #[cfg(not(unix))]
    drop(server);
}

#[cfg(test)]
mod tests {
    use super::protected_mode_refuses;
    use std::net::IpAddr;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("address")
    }

    #[test]
    fn protected_mode_serves_loopback_and_password_holders() {
        for peer in ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"] {
            assert!(!protected_mode_refuses(true, true, ip(peer)), "{peer}");
        }
        for peer in ["192.0.2.2", "10.0.0.1", "::ffff:10.0.0.1", "2001:db8::1"] {
            assert!(protected_mode_refuses(true, true, ip(peer)), "{peer}");
            // A password for the default user, or protected mode off.
            assert!(!protected_mode_refuses(true, false, ip(peer)), "{peer}");
            assert!(!protected_mode_refuses(false, true, ip(peer)), "{peer}");
        }
    }
}
