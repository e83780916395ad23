//! Replication's sockets, both ways.
//!
//! - [`serve_replica`]: a connection that sent SYNC or PSYNC. A partial
//!   resync answers `+CONTINUE` and sends the backlog from the asked
//!   offset; a full one takes an RDB snapshot through the snapshot thread,
//!   shared by the replicas asking while it is prepared: under
//!   `repl-diskless-sync` (to replicas with `capa eof`) taken into memory
//!   and sent as `$EOF:<mark>`, leaving `dir`/`dbfilename` alone;
//!   otherwise saved as SAVE does and the file sent as `$<len>` (the
//!   file's `repl-offset` aux field is the offset it is at). It answers
//!   `+FULLRESYNC <id> <offset>`, sends the RDB, then the stream from that
//!   offset. REPLCONF ACKs are read meanwhile; PINGs go into the
//!   stream every `repl-ping-replica-period`.
//! - [`spawn_link`]: the link to this server's own primary (REPLICAOF):
//!   the handshake of a Redis 7.0 replica, the RDB loaded (or `+CONTINUE`),
//!   then the stream applied through the dispatcher without replies, its
//!   bytes appended to this server's backlog as they came (for chained
//!   replicas), REPLCONF ACK once a second and on GETACK.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::commands;
use crate::engine::rdb::decode;
use crate::persistence::rdb::{del_sync_file, rdb_path, write_sync_file};
use crate::protocol::{Limits, Parsed, Reply, RequestParser};
use crate::state::client::{ClientInfo, ClientState, REPL_MASTER, REPL_REPLICA};
use crate::state::journal;
use crate::state::journal::ReplSnapshot;
use crate::state::replication::{
    FailoverState, FullSyncJob, MasterAddr, ReplicaInfo, SyncRequest, ONLINE, SEND_BULK,
    WAIT_BGSAVE,
};
use crate::state::{unix_ms, Server};

/// PING, as a primary sends it in the stream.
const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";

/// Bytes sent to a replica per write.
const SEND_CHUNK: usize = 1 << 20;

fn conf(server: &Server, name: &str) -> String {
    server.config.read().param(name)
}

fn conf_u64(server: &Server, name: &str, default: u64) -> u64 {
    conf(server, name).parse().unwrap_or(default)
}

/// The `repl-id` and `repl-offset` aux fields of an RDB file's header.
fn rdb_repl_point(data: &[u8]) -> Option<(String, u64)> {
    let mut r = decode::Reader::new(data, 0);
    r.take(9).ok()?;
    let (mut id, mut off) = (None, None);
    while r.u8().ok()? == 0xFA {
        let k = r.string().ok()?;
        let v = r.string().ok()?;
        match k.as_slice() {
            b"repl-id" => id = Some(String::from_utf8_lossy(&v).into_owned()),
            b"repl-offset" => off = std::str::from_utf8(&v).ok()?.parse().ok(),
            _ => {}
        }
    }
    Some((id?, off?))
}

/// The `client-output-buffer-limit` replica class's hard limit (0: none).
fn replica_hard_limit(server: &Server) -> u64 {
    let v = conf(server, "client-output-buffer-limit");
    let w: Vec<&str> = v.split_whitespace().collect();
    w.chunks(4)
        .find(|c| c.first().is_some_and(|n| *n == "slave" || *n == "replica"))
        .and_then(|c| c.get(1))
        .and_then(|s| crate::state::config::parse_memory(s))
        .unwrap_or(0)
}

/// Serves a connection that sent SYNC or PSYNC, until it goes.
pub async fn serve_replica<S>(
    server: Arc<Server>,
    stream: S,
    info: Arc<ClientInfo>,
    client: &ClientState,
    req: SyncRequest,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
{
    let repl = &server.replication;
    let aof = &server.aof;
    info.repl_kind.store(REPL_REPLICA, Ordering::Release);
    if !repl.is_replica() && !aof.backlog.emitting() {
        journal::start_repl_emitting(aof, commands::replication::backlog_size(&server));
    }
    let ip = client.repl.ip_address.clone().unwrap_or_else(|| {
        info.addr
            .rsplit_once(':')
            .map(|(h, _)| h.to_string())
            .unwrap_or_default()
    });
    let replica = Arc::new(ReplicaInfo {
        id: info.id,
        ip,
        port: client.repl.listening_port,
        state: WAIT_BGSAVE.into(),
        ack_offset: 0.into(),
        last_ack_ms: unix_ms().into(),
    });
    let (mut rd, mut wr) = tokio::io::split(stream);
    // Partial resync?
    let partial = req.replid.as_ref().and_then(|id| {
        let b = aof.backlog.inner.lock();
        (req.offset > 0 && b.can_continue(id, req.offset as u64)).then(|| {
            let from = req.offset as u64 - 1;
            (from, b.replid.clone())
        })
    });
    let from = if let Some((from, replid)) = partial {
        aof.backlog.inner.lock().pins.insert(info.id, from);
        repl.replicas.lock().push(replica.clone());
        let line = if client.repl.capa_psync2 {
            format!("+CONTINUE {replid}\r\n")
        } else {
            "+CONTINUE\r\n".to_string()
        };
        repl.sync_partial_ok.fetch_add(1, Ordering::Relaxed);
        tracing::info!(
            "Partial resynchronization request from {} accepted. Sending {} bytes of backlog starting from offset {}.",
            info.addr,
            aof.backlog.end().saturating_sub(from),
            from + 1
        );
        if wr.write_all(line.as_bytes()).await.is_err() {
            forget(&server, info.id);
            return;
        }
        replica.state.store(ONLINE, Ordering::Release);
        from
    } else {
        if req.replid.as_deref().is_some_and(|id| id != "?") {
            repl.sync_partial_err.fetch_add(1, Ordering::Relaxed);
        }
        repl.sync_full.fetch_add(1, Ordering::Relaxed);
        // Pinned from now: the snapshot's point is at or after this.
        let end = aof.backlog.end();
        aof.backlog.inner.lock().pins.insert(info.id, end);
        repl.replicas.lock().push(replica.clone());
        // `repl-backlog-ttl` may have freed the backlog just before the
        // push (it frees only with no replica listed).
        if !repl.is_replica() && !aof.backlog.emitting() {
            journal::start_repl_emitting(aof, commands::replication::backlog_size(&server));
        }
        match full_sync(&server, &info, client, &req, &replica, &mut rd, &mut wr).await {
            Some(from) => from,
            None => {
                forget(&server, info.id);
                return;
            }
        }
    };
    replica.state.store(ONLINE, Ordering::Release);
    replica.last_ack_ms.store(unix_ms(), Ordering::Relaxed);
    // ACKs (and anything else the replica sends) are read by a task of
    // their own, so a replica slow to read its stream still acks.
    let reader = {
        let server = server.clone();
        let info = info.clone();
        tokio::spawn(async move {
            let mut buf = BytesMut::with_capacity(4096);
            let mut parser = RequestParser::new();
            let limits = Limits {
                max_bulk_len: 1 << 20,
                max_multibulk_len: 1024,
                authenticated: true,
            };
            loop {
                match rd.read_buf(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                loop {
                    match parser.parse(&buf, &limits) {
                        Ok(Some(Parsed::Command { consumed })) => {
                            {
                                let args = parser.args(&buf);
                                if args.len() >= 3
                                    && args[0].eq_ignore_ascii_case(b"replconf")
                                    && args[1].eq_ignore_ascii_case(b"ack")
                                {
                                    if let Some(off) = std::str::from_utf8(args[2])
                                        .ok()
                                        .and_then(|s| s.parse::<u64>().ok())
                                    {
                                        server.replication.ack(info.id, off, unix_ms());
                                    }
                                }
                            }
                            buf.advance(consumed);
                        }
                        Ok(Some(Parsed::Skip { consumed })) => buf.advance(consumed),
                        Ok(None) => break,
                        Err(_) => {
                            info.killed.store(true, Ordering::Release);
                            info.wake.notify_one();
                            return;
                        }
                    }
                }
            }
            info.killed.store(true, Ordering::Release);
            info.wake.notify_one();
        })
    };
    stream_to(&server, &info, &replica, &mut wr, from).await;
    reader.abort();
    forget(&server, info.id);
    tracing::info!("Connection with replica {} lost.", info.addr);
}

/// Removes replica `id` from the list and its pin from the backlog.
fn forget(server: &Server, id: u64) {
    {
        let backlog = &server.aof.backlog;
        let mut b = backlog.inner.lock();
        b.pins.remove(&id);
        backlog.trim(&mut b);
    }
    server.replication.replicas.lock().retain(|r| r.id != id);
    server.replication.acks.send_modify(|n| *n += 1);
}

/// The full sync: the snapshot (shared with the replicas that ask while
/// it is prepared), `+FULLRESYNC`, the file. Returns the offset the
/// stream goes on from.
async fn full_sync(
    server: &Arc<Server>,
    info: &Arc<ClientInfo>,
    client: &ClientState,
    req: &SyncRequest,
    replica: &ReplicaInfo,
    rd: &mut (impl tokio::io::AsyncRead + Unpin),
    wr: &mut (impl tokio::io::AsyncWrite + Unpin),
) -> Option<u64> {
    let repl = &server.replication;
    let diskless = conf(server, "repl-diskless-sync") == "yes" && client.repl.capa_eof;
    // Join the snapshot being prepared, or start one.
    let (job, leader) = {
        let mut j = repl.full_job.lock();
        match j.as_ref() {
            Some(job) if job.diskless == diskless => {
                job.joined.fetch_add(1, Ordering::AcqRel);
                (job.clone(), false)
            }
            _ => {
                let job = Arc::new(FullSyncJob::new(diskless, server.aof.backlog.end()));
                *j = Some(job.clone());
                (job, true)
            }
        }
    };
    // The snapshot is at or after `pin_at`: the stream is kept from there.
    server
        .aof
        .backlog
        .inner
        .lock()
        .pins
        .insert(info.id, job.pin_at);
    tracing::info!(
        "Replica {} asks for synchronization; {} BGSAVE for SYNC with target: {}",
        info.addr,
        if leader {
            "starting"
        } else {
            "attached to the"
        },
        if diskless { "replicas sockets" } else { "disk" }
    );
    if leader {
        // Its own task: the snapshot goes on if this replica goes.
        tokio::spawn(prepare_full_sync(server.clone(), job.clone()));
    }
    // Keepalive newlines meanwhile (as Redis sends them while it waits).
    let mut rx = job.result.subscribe();
    let snap = loop {
        if let Some(r) = rx.borrow_and_update().clone() {
            break r;
        }
        tokio::select! {
            r = rx.changed() => if r.is_err() { return None },
            _ = tokio::time::sleep(Duration::from_secs(1)) => {
                if info.killed.load(Ordering::Acquire) {
                    return None;
                }
                if req.replid.is_some() && wr.write_all(b"\n").await.is_err() {
                    return None;
                }
            }
        }
    };
    let (data, replid, offset) = match snap.as_ref() {
        Ok((d, id, off)) => (d, id.clone(), *off),
        Err(e) => {
            tracing::warn!("BGSAVE for replication failed: {e}");
            return None;
        }
    };
    // The stream goes on from the snapshot's point: pin there.
    server.aof.backlog.inner.lock().pins.insert(info.id, offset);
    replica.state.store(SEND_BULK, Ordering::Release);
    if req.replid.is_some() {
        let line = format!("+FULLRESYNC {replid} {offset}\r\n");
        wr.write_all(line.as_bytes()).await.ok()?;
    }
    if diskless {
        let mark = journal::backlog::random_id();
        wr.write_all(format!("$EOF:{mark}\r\n").as_bytes())
            .await
            .ok()?;
        wr.write_all(data).await.ok()?;
        wr.write_all(mark.as_bytes()).await.ok()?;
        // The replica finds the end by the mark's being the last bytes it
        // read: the stream waits for its first REPLCONF ACK (as Redis's).
        let timeout = Duration::from_secs(conf_u64(server, "repl-timeout", 60).max(1));
        let mut buf = [0u8; 256];
        let mut got = Vec::new();
        while !got.windows(3).any(|w| w.eq_ignore_ascii_case(b"ack")) || !got.ends_with(b"\r\n") {
            let n = tokio::time::timeout(timeout, rd.read(&mut buf))
                .await
                .ok()?
                .ok()?;
            if n == 0 {
                return None;
            }
            got.extend_from_slice(&buf[..n]);
        }
    } else {
        wr.write_all(format!("${}\r\n", data.len()).as_bytes())
            .await
            .ok()?;
        wr.write_all(data).await.ok()?;
    }
    tracing::info!("Synchronization with replica {} succeeded", info.addr);
    Some(offset)
}

/// Takes the snapshot of a full sync `job` and hands it to its replicas.
/// Diskless: after `repl-diskless-sync-delay` seconds, or as soon as
/// `repl-diskless-sync-max-replicas` have gathered, an RDB taken into
/// memory by the snapshot thread (`dir`/`dbfilename` untouched). On disk:
/// at once, a save to `dir`/`dbfilename` (as SAVE runs it), whose file is
/// sent. Replicas arriving meanwhile join (the job is open until its
/// snapshot is taken).
async fn prepare_full_sync(server: Arc<Server>, job: Arc<FullSyncJob>) {
    if job.diskless {
        let delay = conf_u64(&server, "repl-diskless-sync-delay", 5);
        let max = conf_u64(&server, "repl-diskless-sync-max-replicas", 0);
        let until = Instant::now() + Duration::from_secs(delay);
        while Instant::now() < until {
            if max > 0 && job.joined.load(Ordering::Acquire) + 1 >= max {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let result: ReplSnapshot = if job.diskless {
        match journal::request_repl_snapshot(&server.aof).await {
            Ok(r) => r,
            Err(_) => Arc::new(Err("the snapshot thread stopped".into())),
        }
    } else {
        let s2 = server.clone();
        let ok = tokio::task::spawn_blocking(move || journal::save_blocking(&s2.aof))
            .await
            .unwrap_or(false);
        let path = rdb_path(&server);
        let r = if !ok {
            Err("the save failed".to_string())
        } else {
            let read = tokio::fs::read(&path).await;
            if read.is_ok() {
                // Sent from memory from now on.
                del_sync_file(&server);
            }
            match read {
                Ok(data) => match rdb_repl_point(&data) {
                    Some((id, off)) => Ok((data, id, off)),
                    None => Err("no repl-id / repl-offset in the saved file".into()),
                },
                Err(e) => Err(format!("reading {}: {e}", path.display())),
            }
        };
        Arc::new(r)
    };
    {
        // Replicas asking from now on start another snapshot.
        let mut j = server.replication.full_job.lock();
        if j.as_ref().is_some_and(|x| Arc::ptr_eq(x, &job)) {
            *j = None;
        }
    }
    job.result.send_replace(Some(result));
}

/// Sends the stream after offset `from` until the replica goes, is
/// killed, falls past its output limit or times out.
///
/// Batched as Redis writes a replica's output once per event-loop turn:
/// woken by an append only when it sleeps (an append while it writes
/// costs the writer nothing), it first lets the clients ready on its
/// worker run (`yield_now`), then sends everything held in one write from
/// one reused buffer. `repl-timeout` is checked by one interval.
async fn stream_to(
    server: &Server,
    info: &ClientInfo,
    replica: &ReplicaInfo,
    wr: &mut (impl tokio::io::AsyncWrite + Unpin),
    mut from: u64,
) {
    let backlog = &server.aof.backlog;
    let mut offsets = backlog.offset.subscribe();
    let mut shutdown = server.shutdown_watch();
    let hard = replica_hard_limit(server);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.reset();
    let mut chunk = Vec::new();
    let mut pinned = u64::MAX;
    loop {
        if info.killed.load(Ordering::Acquire) {
            return;
        }
        chunk.clear();
        {
            let mut b = backlog.inner.lock();
            if pinned != from {
                b.pins.insert(info.id, from);
                pinned = from;
                backlog.trim(&mut b);
            }
            if hard > 0 && b.end.saturating_sub(from) > hard {
                drop(b);
                tracing::warn!(
                    "Client id={} addr={} scheduled to be closed ASAP for overcoming of output buffer limits.",
                    info.id,
                    info.addr
                );
                return;
            }
            match b.since(from) {
                Some(bytes) => {
                    let n = bytes.len().min(SEND_CHUNK);
                    chunk.extend_from_slice(&bytes[..n]);
                }
                None => return,
            }
        }
        if !chunk.is_empty() {
            if wr.write_all(&chunk).await.is_err() {
                return;
            }
            from += chunk.len() as u64;
            (server.stats.hot.local())
                .net_output_bytes
                .fetch_add(chunk.len() as u64, Ordering::Relaxed);
            continue;
        }
        offsets.borrow_and_update();
        if !backlog.sender_sleeps(from) {
            continue;
        }
        tokio::select! {
            r = offsets.changed() => {
                if r.is_err() {
                    return;
                }
                // The clients ready on this worker write first: one
                // send for all of them.
                tokio::task::yield_now().await;
            }
            _ = info.wake.notified() => {}
            _ = shutdown.changed() => return,
            _ = tick.tick() => {
                let timeout = conf_u64(server, "repl-timeout", 60);
                let last = replica.last_ack_ms.load(Ordering::Relaxed);
                if unix_ms().saturating_sub(last) > timeout * 1000 {
                    tracing::warn!("Disconnecting timedout replica (streaming sync): {}", info.addr);
                    return;
                }
            }
        }
    }
}

/// Once a second (from the cron): PING into the stream every
/// `repl-ping-replica-period` seconds while replicas are attached; a
/// primary's backlog freed after `repl-backlog-ttl` seconds without any.
pub fn spawn_ping(server: Arc<Server>) {
    tokio::spawn(async move {
        let mut shutdown = server.shutdown_watch();
        let mut last = Instant::now();
        let mut no_replicas_since = Instant::now();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                _ = shutdown.changed() => return,
            }
            if server.replication.is_replica() || !server.replication.replicas.lock().is_empty() {
                no_replicas_since = Instant::now();
            } else {
                let ttl = conf_u64(&server, "repl-backlog-ttl", 3600);
                if ttl > 0
                    && no_replicas_since.elapsed() >= Duration::from_secs(ttl)
                    && server.aof.backlog.inner.lock().active
                {
                    let _f = server.aof.feed.lock();
                    // A replica may have attached since the check.
                    if server.replication.replicas.lock().is_empty() {
                        server.aof.backlog.free();
                        tracing::info!(
                            "Replication backlog freed after {ttl} seconds without connected replicas."
                        );
                    }
                }
            }
            drive_failover(&server);
            let period = conf_u64(&server, "repl-ping-replica-period", 10).max(1);
            if last.elapsed() < Duration::from_secs(period) {
                continue;
            }
            last = Instant::now();
            // No PING while writes are paused (the offset a FAILOVER
            // waits for stays put), as Redis.
            if !server.replication.is_replica()
                && server.aof.backlog.emitting()
                && !server.replication.replicas.lock().is_empty()
                && server.pause.until().is_none()
            {
                journal::feed_repl_raw(&server.aof, PING);
            }
        }
    });
}

/// FAILOVER's steps (every 100 ms): while waiting, the target (or any
/// replica) that acknowledged the whole stream makes this server its
/// replica, whose PSYNC then carries FAILOVER; at the timeout, FORCE fails
/// over anyway and otherwise the failover is aborted.
fn drive_failover(server: &Server) {
    let repl = &server.replication;
    let mut f = repl.failover.lock();
    let expired = f.end.is_some_and(|e| e <= Instant::now());
    match f.state {
        FailoverState::None => {}
        FailoverState::InProgress => {
            if expired {
                drop(f);
                commands::replication::abort_failover(server, "Failover target timed out");
            }
        }
        FailoverState::WaitForSync => {
            if expired {
                match f.target.clone() {
                    Some(t) if f.force => {
                        tracing::info!(
                            "FAILOVER to {}:{} time out exceeded, failing over.",
                            t.host,
                            t.port
                        );
                        f.state = FailoverState::InProgress;
                        drop(f);
                        switch_to(server, t);
                    }
                    _ => {
                        drop(f);
                        commands::replication::abort_failover(
                            server,
                            "Replica never caught up before timeout",
                        );
                    }
                }
                return;
            }
            let offset = server.aof.backlog.end();
            let caught = repl
                .replicas
                .lock()
                .iter()
                .find(|r| {
                    r.state.load(Ordering::Relaxed) == ONLINE
                        && r.ack_offset.load(Ordering::Relaxed) == offset
                        && f.target
                            .as_ref()
                            .is_none_or(|t| t.host == r.ip && u64::from(t.port) == r.port)
                })
                .map(|r| MasterAddr {
                    host: r.ip.clone(),
                    port: r.port as u16,
                });
            if let Some(t) = caught {
                tracing::info!(
                    "Failover target {}:{} is synced, failing over.",
                    t.host,
                    t.port
                );
                f.target = Some(t.clone());
                f.state = FailoverState::InProgress;
                drop(f);
                switch_to(server, t);
            }
        }
    }
}

/// This primary becomes the replica of `t` (FAILOVER's hand-over).
fn switch_to(server: &Server, t: MasterAddr) {
    if server.replication.set_master(Some(t)) {
        commands::replication::become_replica(server);
    }
}

// ---------------------------------------------------------------------
// The replica's side.

/// A connection to the primary with a read buffer.
struct Link {
    stream: TcpStream,
    buf: BytesMut,
}

impl Link {
    async fn fill(&mut self, timeout: Duration) -> Result<(), String> {
        match tokio::time::timeout(timeout, self.stream.read_buf(&mut self.buf)).await {
            Ok(Ok(0)) => Err("connection closed by the master".into()),
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(format!("read error: {e}")),
            Err(_) => Err("timeout reading from the master".into()),
        }
    }

    /// One line (without CRLF); empty keepalive lines are skipped when
    /// `skip_empty`.
    async fn line(&mut self, timeout: Duration, skip_empty: bool) -> Result<String, String> {
        loop {
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                let raw = self.buf.split_to(i + 1);
                let l = String::from_utf8_lossy(&raw[..i])
                    .trim_end_matches('\r')
                    .to_string();
                if skip_empty && l.is_empty() {
                    continue;
                }
                return Ok(l);
            }
            self.fill(timeout).await?;
        }
    }

    async fn send(&mut self, args: &[&[u8]]) -> Result<(), String> {
        let mut out = Vec::new();
        journal::encode::write_command(&mut out, args.iter().copied());
        self.stream
            .write_all(&out)
            .await
            .map_err(|e| format!("write error: {e}"))
    }

    async fn command(&mut self, args: &[&[u8]], timeout: Duration) -> Result<String, String> {
        self.send(args).await?;
        self.line(timeout, true).await
    }
}

/// Starts the task that follows this server's primary while there is one
/// (REPLICAOF, `replicaof` in the config file).
pub fn spawn_link(server: Arc<Server>) {
    tokio::spawn(async move {
        let mut gen = server.replication.generation.subscribe();
        let mut shutdown = server.shutdown_watch();
        let info = Arc::new(ClientInfo::new(
            server.next_client_id(),
            String::new(),
            String::new(),
            unix_ms(),
        ));
        info.repl_kind.store(REPL_MASTER, Ordering::Release);
        let mut client = ClientState::new(info, true);
        client.repl.is_master = true;
        client.replaying = true;
        loop {
            let master = server.replication.master.lock().clone();
            let g = *gen.borrow_and_update();
            if let Some(m) = master {
                let r = tokio::select! {
                    r = follow(&server, &mut client, &m.host, m.port) => r,
                    _ = gen.changed() => Ok(()),
                    _ = shutdown.changed() => return,
                };
                server.clients.remove(&client.id());
                client.multi = None;
                {
                    let mut l = server.replication.link.lock();
                    if l.up {
                        l.down_since = Some(Instant::now());
                    }
                    l.up = false;
                    l.sync_in_progress = false;
                    l.state = "connect";
                }
                server.replication.loading.store(false, Ordering::Release);
                if let Err(e) = r {
                    tracing::warn!("Replication link to {}:{}: {e}", m.host, m.port);
                }
                if *gen.borrow() == g {
                    // Same primary: retry in a second.
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                        _ = gen.changed() => {}
                        _ = shutdown.changed() => return,
                    }
                }
            } else {
                tokio::select! {
                    _ = gen.changed() => {}
                    _ = shutdown.changed() => return,
                }
            }
        }
    });
}

/// Connects to the primary, syncs, and applies its stream until the link
/// breaks.
async fn follow(
    server: &Arc<Server>,
    client: &mut ClientState,
    host: &str,
    port: u16,
) -> Result<(), String> {
    let repl = &server.replication;
    let timeout = Duration::from_secs(conf_u64(server, "repl-timeout", 60).max(1));
    repl.link.lock().state = "connecting";
    tracing::info!("Connecting to MASTER {host}:{port}");
    let stream = tokio::time::timeout(timeout, TcpStream::connect((host, port)))
        .await
        .map_err(|_| "timeout connecting to the MASTER".to_string())?
        .map_err(|e| format!("Error condition on socket for SYNC: {e}"))?;
    let _ = stream.set_nodelay(true);
    let mut link = Link {
        stream,
        buf: BytesMut::with_capacity(1 << 16),
    };
    repl.link.lock().state = "handshake";
    let pong = link.command(&[b"PING"], timeout).await?;
    if pong.starts_with('-')
        && !pong.starts_with("-NOAUTH")
        && !pong.starts_with("-NOPERM")
        && !pong.starts_with("-ERR operation not permitted")
    {
        return Err(format!("Error reply to PING from master: '{pong}'"));
    }
    let (auth, user) = (conf(server, "masterauth"), conf(server, "masteruser"));
    if !auth.is_empty() {
        let r = if user.is_empty() {
            link.command(&[b"AUTH", auth.as_bytes()], timeout).await?
        } else {
            link.command(&[b"AUTH", user.as_bytes(), auth.as_bytes()], timeout)
                .await?
        };
        if r.starts_with('-') {
            return Err(format!("Unable to AUTH to MASTER: {r}"));
        }
    }
    // `replica-announce-port` / `-ip` (behind NAT or a port forward):
    // what the primary shows in INFO's slaveN lines and ROLE.
    let announced = conf_u64(server, "replica-announce-port", 0);
    let my_port = if announced > 0 {
        announced
    } else {
        server.port.load(Ordering::Relaxed)
    }
    .to_string();
    let r = link
        .command(
            &[b"REPLCONF", b"listening-port", my_port.as_bytes()],
            timeout,
        )
        .await?;
    if r.starts_with('-') {
        tracing::info!("(Non critical) Master does not understand REPLCONF listening-port: {r}");
    }
    let ip = conf(server, "replica-announce-ip");
    if !ip.is_empty() {
        let r = link
            .command(&[b"REPLCONF", b"ip-address", ip.as_bytes()], timeout)
            .await?;
        if r.starts_with('-') {
            tracing::info!("(Non critical) Master does not understand REPLCONF ip-address: {r}");
        }
    }
    let r = link
        .command(&[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"], timeout)
        .await?;
    if r.starts_with('-') {
        tracing::info!("(Non critical) Master does not understand REPLCONF capa: {r}");
    }
    // PSYNC with our own history when we have one (a former primary, or a
    // replica whose link broke), else ? -1.
    let (cached_id, cached_next) = {
        let b = server.aof.backlog.inner.lock();
        (b.active.then(|| b.replid.clone()), b.end + 1)
    };
    let next_s = cached_next.to_string();
    let failing_over = repl.failover.lock().state == FailoverState::InProgress;
    let reply = match &cached_id {
        Some(id) if failing_over => {
            tracing::info!(
                "Trying a partial resynchronization (request {id}:{cached_next}), failover."
            );
            link.command(
                &[b"PSYNC", id.as_bytes(), next_s.as_bytes(), b"FAILOVER"],
                timeout,
            )
            .await?
        }
        Some(id) => {
            tracing::info!("Trying a partial resynchronization (request {id}:{cached_next}).");
            link.command(&[b"PSYNC", id.as_bytes(), next_s.as_bytes()], timeout)
                .await?
        }
        None => link.command(&[b"PSYNC", b"?", b"-1"], timeout).await?,
    };
    if failing_over {
        if reply.starts_with("+FULLRESYNC") || reply.starts_with("+CONTINUE") {
            commands::replication::finish_failover(server);
        } else {
            commands::replication::abort_failover(server, "Failover target rejected psync request");
            return Err(format!("Failover target rejected PSYNC: {reply}"));
        }
    }
    if let Some(rest) = reply.strip_prefix("+FULLRESYNC ") {
        let mut it = rest.split_whitespace();
        let id = it.next().unwrap_or_default().to_string();
        let off: u64 = it
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("bad FULLRESYNC reply '{reply}'"))?;
        tracing::info!("Full resync from master: {id}:{off}");
        receive_rdb(server, &mut link, timeout).await?;
        {
            let _f = server.aof.feed.lock();
            let mut b = server.aof.backlog.inner.lock();
            b.replid = id;
            b.replid2 = "0".repeat(40);
            b.second_offset = -1;
            b.end = off;
            b.stream.buf.clear();
            b.stream.db = None;
            b.active = true;
        }
        server.aof.backlog.end_reset(off);
        client.db = 0;
        repl.applied.store(off, Ordering::Release);
        // Our replicas had another history: they sync again.
        commands::replication::disconnect_replicas(server);
    } else if let Some(rest) = reply.strip_prefix("+CONTINUE") {
        let new_id = rest.trim();
        tracing::info!("Successful partial resynchronization with master.");
        if !new_id.is_empty() {
            let mut b = server.aof.backlog.inner.lock();
            if b.replid != new_id {
                b.replid2 = std::mem::replace(&mut b.replid, new_id.to_string());
                b.second_offset = b.end as i64 + 1;
                drop(b);
                commands::replication::disconnect_replicas(server);
            }
        }
        repl.applied
            .store(server.aof.backlog.end(), Ordering::Release);
    } else {
        return Err(format!("Unexpected reply to PSYNC from master: {reply}"));
    }
    server.clients.insert(client.id(), client.info.clone());
    {
        let mut l = repl.link.lock();
        l.up = true;
        l.state = "connected";
        l.sync_in_progress = false;
        l.last_io = Some(Instant::now());
        l.down_since = None;
    }
    tracing::info!("MASTER <-> REPLICA sync: Finished with success");
    apply_stream(server, client, &mut link, timeout).await
}

/// Reads the RDB the primary sends (`$<len>` or `$EOF:<mark>`) and loads it.
async fn receive_rdb(server: &Server, link: &mut Link, timeout: Duration) -> Result<(), String> {
    let repl = &server.replication;
    {
        let mut l = repl.link.lock();
        l.sync_in_progress = true;
        l.state = "sync";
        l.sync_read = 0;
    }
    let head = link.line(timeout, true).await?;
    let Some(spec) = head.strip_prefix('$') else {
        return Err(format!(
            "Bad protocol from MASTER, the first byte is not '$': {head}"
        ));
    };
    let data: Vec<u8> = if let Some(mark) = spec.strip_prefix("EOF:") {
        let mark = mark.as_bytes().to_vec();
        repl.link.lock().sync_size = -1;
        loop {
            if link.buf.len() >= mark.len() && link.buf.ends_with(&mark) {
                let n = link.buf.len() - mark.len();
                let d = link.buf.split_to(n).to_vec();
                link.buf.clear();
                break d;
            }
            link.fill(timeout).await?;
            repl.link.lock().sync_read = link.buf.len() as u64;
        }
    } else {
        let len: usize = spec
            .parse()
            .map_err(|_| format!("bad bulk length from MASTER: {head}"))?;
        repl.link.lock().sync_size = len as i64;
        link.buf.reserve(len.saturating_sub(link.buf.len()));
        while link.buf.len() < len {
            link.fill(timeout).await?;
            repl.link.lock().sync_read = link.buf.len().min(len) as u64;
        }
        link.buf.split_to(len).to_vec()
    };
    tracing::info!(
        "MASTER <-> REPLICA sync: receiving {} bytes from master",
        data.len()
    );
    let on_disk = conf(server, "repl-diskless-load") == "disabled";
    if on_disk {
        // Decoding below blocks this task as long; Redis writes it inline too.
        write_sync_file(server, &data)?;
    }
    repl.loading.store(true, Ordering::Release);
    let r = load_rdb(server, data).await;
    repl.loading.store(false, Ordering::Release);
    if r.is_ok() && on_disk {
        del_sync_file(server);
    }
    r
}

/// Replaces the data with the RDB's (FLUSHALL, then the keys as a start-up
/// load stores them, then the function libraries).
async fn load_rdb(server: &Server, data: Vec<u8>) -> Result<(), String> {
    let (limits, databases) = {
        let c = server.config.read();
        (c.rdb_limits(), c.databases)
    };
    // Expired keys are kept: their primary's DELs remove them.
    let loaded = decode::read_file(&data, databases, 0, &limits).map_err(|e| {
        format!("Failed trying to load the MASTER synchronization DB from socket: {e}")
    })?;
    drop(data);
    tracing::info!("MASTER <-> REPLICA sync: Flushing old data");
    let info = Arc::new(ClientInfo::new(0, String::new(), String::new(), unix_ms()));
    let mut c = ClientState::new(info, true);
    c.repl.is_master = true;
    c.replaying = true;
    let mut out = Reply::new(false);
    commands::execute(server, &mut c, &mut out, &[b"FLUSHALL"]);
    if !loaded.functions.is_empty() {
        commands::execute(server, &mut c, &mut out, &[b"FUNCTION", b"FLUSH"]);
    }
    for code in &loaded.functions {
        out.buf.clear();
        commands::execute(
            server,
            &mut c,
            &mut out,
            &[b"FUNCTION", b"LOAD", b"REPLACE", code],
        );
    }
    tracing::info!("MASTER <-> REPLICA sync: Loading DB in memory");
    let now = unix_ms();
    let count = loaded.keys.len();
    for (i, k) in loaded.keys.into_iter().enumerate() {
        {
            let mut g = server
                .keyspace
                .lock_one(server.keyspace.shard_of(&k.key), true);
            if let Some(db) = g.shard_mut().and_then(|s| s.dbs.get_mut(k.db)) {
                db.insert_with_expiry(&k.key, k.value, k.expire_ms, now);
            }
        }
        if i % 4096 == 4095 {
            tokio::task::yield_now().await;
        }
    }
    tracing::info!("Done loading RDB, keys loaded: {count}.");
    if server.aof.enabled() {
        // The AOF must hold the new data: rewrite it.
        journal::request_rewrite(&server.aof);
    }
    Ok(())
}

/// Applies the primary's stream: each command through the dispatcher as the
/// master client (replies dropped), the offset counted by whole commands
/// outside MULTI (as Redis counts `reploff`), the bytes appended to this
/// server's backlog for its own replicas; REPLCONF ACK every second and on
/// GETACK.
async fn apply_stream(
    server: &Server,
    client: &mut ClientState,
    link: &mut Link,
    timeout: Duration,
) -> Result<(), String> {
    let repl = &server.replication;
    let mut parser = RequestParser::new();
    let limits = Limits {
        max_bulk_len: server.proto_max_bulk_len.load(Ordering::Relaxed) as usize,
        max_multibulk_len: i32::MAX as usize,
        authenticated: true,
    };
    let mut out = Reply::new(false);
    // Bytes at the front of the buffer applied inside an open MULTI, counted
    // at its EXEC.
    let mut pending: usize = 0;
    let mut ack_tick = tokio::time::interval(Duration::from_secs(1));
    let mut last_io = Instant::now();
    let mut ack_now = false;
    loop {
        apply_buffered(
            server,
            client,
            link,
            &mut parser,
            &limits,
            &mut out,
            &mut pending,
            &mut ack_now,
        )?;
        commands::flush_stats(server, client);
        if ack_now {
            ack_now = false;
            send_ack(link, repl.applied.load(Ordering::Acquire)).await?;
        }
        tokio::select! {
            r = link.stream.read_buf(&mut link.buf) => {
                match r {
                    Ok(0) => return Err("connection closed by the master".into()),
                    Ok(_) => {}
                    Err(e) => return Err(format!("read error: {e}")),
                }
                last_io = Instant::now();
                repl.link.lock().last_io = Some(last_io);
            }
            _ = ack_tick.tick() => {
                if last_io.elapsed() > timeout {
                    return Err("MASTER timeout: no data nor PING received".into());
                }
                send_ack(link, repl.applied.load(Ordering::Acquire)).await?;
            }
            _ = client.info.wake.notified() => {
                if client.info.killed.swap(false, Ordering::AcqRel) {
                    return Err("killed (CLIENT KILL)".into());
                }
            }
        }
    }
}

/// Runs the complete commands in the buffer after its first `pending`
/// bytes (an open MULTI's, applied already). Whenever no MULTI is open,
/// everything before is counted, copied to the backlog and dropped.
#[allow(clippy::too_many_arguments)]
fn apply_buffered(
    server: &Server,
    client: &mut ClientState,
    link: &mut Link,
    parser: &mut RequestParser,
    limits: &Limits,
    out: &mut Reply,
    pending: &mut usize,
    ack_now: &mut bool,
) -> Result<(), String> {
    let repl = &server.replication;
    loop {
        let at = *pending;
        match parser.parse(&link.buf[at..], limits) {
            Ok(Some(Parsed::Command { consumed })) => {
                {
                    let args = parser.args(&link.buf[at..]);
                    let getack = args.len() >= 2
                        && args[0].eq_ignore_ascii_case(b"replconf")
                        && args[1].eq_ignore_ascii_case(b"getack");
                    if getack {
                        *ack_now = true;
                    } else {
                        client.clock.reset();
                        out.buf.clear();
                        commands::execute(server, client, out, &args);
                    }
                }
                *pending += consumed;
            }
            Ok(Some(Parsed::Skip { consumed })) => *pending += consumed,
            Ok(None) => return Ok(()),
            Err(e) => return Err(format!("protocol error from MASTER: {e}")),
        }
        if client.multi.is_none() {
            let n = *pending;
            journal::feed_repl_raw(&server.aof, &link.buf[..n]);
            repl.applied.fetch_add(n as u64, Ordering::AcqRel);
            link.buf.advance(n);
            *pending = 0;
        }
    }
}

async fn send_ack(link: &mut Link, offset: u64) -> Result<(), String> {
    let off = offset.to_string();
    link.send(&[b"REPLCONF", b"ACK", off.as_bytes()]).await
}
