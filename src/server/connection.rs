//! One connection: reads requests, runs every complete command already
//! buffered, then sends all their replies in one write. A client blocked by
//! a blocking command (BZPOPMIN, ...) waits here, its later commands kept in
//! the buffer, until a write wakes it, its timeout passes, or it goes away.
//! Messages other clients publish to it (and MONITOR lines) wait in its
//! outbox (`state::outbox`); the connection wakes for them while idle and
//! writes them after the replies of the commands it has run. Its pending
//! output, replies and outbox together, is held to its class of
//! `client-output-buffer-limit`.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use super::transport::Transport;
use super::workers::{self, Seat};
use crate::commands;
use crate::protocol::{Limits, Parsed, Reply, RequestParser};
use crate::state::client::{ClientInfo, ClientState, Unblock};
use crate::state::journal::{self, Fsync};
use crate::state::memory;
use crate::state::outbox::OutputLimit;
use crate::state::{unix_ms, Server};

/// Replies are sent early once this many bytes are waiting.
const FLUSH_AT: usize = 64 * 1024;
/// Longest a client waits, after a command that woke blocked clients, for
/// them to take their turn before its next command (one stuck writing to
/// a slow peer must not hold it up).
const TURN_WAIT: std::time::Duration = std::time::Duration::from_millis(50);
/// Read buffer size for ordinary traffic.
const READ_CHUNK: usize = 16 * 1024;
/// Most room a read is given (see `Conn::read_room`): a pipeline of 64
/// 1 KB values in one read.
const MOST_READ_ROOM: usize = 64 * 1024;
/// A read buffer emptied at this size or more is replaced by a small one.
const BIG_IDLE_BUFFER: usize = 256 * 1024;
/// How often a client stuck writing is checked against a soft output limit.
const SOFT_LIMIT_CHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// How [`Exec::run_parsed`] stopped.
enum Batch {
    /// No complete command left (or the client blocked or is closing).
    Done,
    /// The replies reached the flush size: send them, then go on.
    Flush,
    /// The last command woke blocked clients: let them take their turn,
    /// then go on.
    Woke,
    /// The client was killed.
    Killed,
    /// The input is not the protocol: reply this error and close.
    ProtocolError(String),
}

/// What ended an idle connection's wait in [`Conn::read_more`].
enum Woke {
    Read(std::io::Result<usize>),
    /// `ClientInfo::wake`: killed, or nothing for an idle client.
    Wake,
    /// Messages arrived in the outbox.
    Outbox,
    Shutdown,
}

/// What ended a blocked client's wait in [`Conn::wait_unblocked`].
enum Ended {
    /// A key it waits on changed: run the command again.
    Woken,
    /// Its timeout passed, or CLIENT UNBLOCK asked.
    Unblock(Unblock),
}

/// Why the connection ends (here).
enum Stop {
    Close,
    /// SYNC / PSYNC: the connection becomes a replica's.
    Replica,
    /// It goes on on another worker (`Seat::wants_move`).
    Move,
}

/// A connection: `S` its transport, `()` while it moves to another worker.
struct Conn<S> {
    server: Arc<Server>,
    stream: S,
    info: Arc<ClientInfo>,
    /// What its commands run with: boxed, so that a batch can be run by
    /// another worker (`Conn::run_elsewhere`) while this one keeps the
    /// socket.
    exec: Box<Exec>,
    /// What `exec` is swapped with while it is away on another worker
    /// (made the first time it goes).
    spare: Option<Box<Exec>>,
    /// Room the next read gets at least ([`Conn::make_room`]): doubles,
    /// up to [`MOST_READ_ROOM`], after a read that filled all it had, and
    /// halves back toward [`READ_CHUNK`] after reads that used little.
    read_room: usize,
    shutdown: watch::Receiver<bool>,
    /// Where it runs, for a plain TCP connection on one of several workers.
    seat: Option<Seat>,
}

/// The part of a connection its commands run with: the client, the
/// requests read and the replies made.
struct Exec {
    client: ClientState,
    rbuf: BytesMut,
    parser: RequestParser,
    out: Reply,
    /// Pipelined calls waiting to be handled together (see `run_parsed`).
    run: commands::PipelineRun,
    /// Bytes moved from the outbox into `out` and not yet written.
    outbox_taken: usize,
    /// Commands run since the last read (see `Conn::run`).
    batch_len: usize,
    /// Commands at the front of the read buffer whose keys were read ahead
    /// (`commands::read_ahead`) and that have not run yet.
    read_ahead: usize,
}

impl Exec {
    /// Runs the complete commands in the read buffer until none is left,
    /// the replies must be sent first, or the client is blocked, killed or
    /// closing. Consecutive commands on the same shards share one taking of
    /// their locks (`commands::LockCache`), released when this returns, and
    /// consecutive calls that can be handled together wait in a
    /// `commands::PipelineRun` until the next command or the end.
    fn run_parsed(&mut self, server: &Server, info: &ClientInfo, limits: &Limits) -> Batch {
        let limit = server.output_limit_of(info);
        let mut cache = commands::LockCache::new();
        let run = &mut self.run;
        let batch = loop {
            if self.client.blocked.is_some()
                || self.client.postponed.is_some()
                || self.client.close_after_reply
                || self.client.repl.sync.is_some()
                || self.client.repl.wait.is_some()
            {
                break Batch::Done;
            }
            match self.parser.parse(&self.rbuf, limits) {
                Ok(None) => break Batch::Done,
                Ok(Some(Parsed::Skip { consumed })) => self.rbuf.advance(consumed),
                Ok(Some(Parsed::Command { consumed })) => {
                    self.batch_len += 1;
                    // More commands behind this one: read their keys
                    // ahead, a window at a time.
                    if self.read_ahead == 0 && consumed < self.rbuf.len() {
                        self.read_ahead = commands::read_ahead(server, &self.client, &self.rbuf);
                    }
                    self.read_ahead = self.read_ahead.saturating_sub(1);
                    {
                        let args = self.parser.args(&self.rbuf);
                        commands::execute_pipelined(
                            server,
                            &mut self.client,
                            &mut self.out,
                            &args,
                            consumed < self.rbuf.len(),
                            run,
                            &mut cache,
                        );
                    }
                    self.rbuf.advance(consumed);
                    if info.killed.load(Ordering::Acquire) {
                        return Batch::Killed;
                    }
                    if past_limit(info, self.outbox_taken, &limit, self.out.len()) {
                        return Batch::Killed;
                    }
                    // Redis serves blocked clients after each command: the
                    // next one sees what they took.
                    if !self.client.woken.is_empty() {
                        return Batch::Woke;
                    }
                    if self.out.len() >= FLUSH_AT {
                        self.note_qbuf(server, info);
                        return Batch::Flush;
                    }
                }
                Err(e) => break Batch::ProtocolError(e.to_string()),
            }
        };
        commands::execute_run(server, &mut self.client, &mut self.out, run, &mut cache);
        self.note_qbuf(server, info);
        if info.killed.load(Ordering::Acquire) {
            return Batch::Killed;
        }
        if past_limit(info, self.outbox_taken, &limit, self.out.len()) {
            return Batch::Killed;
        }
        batch
    }

    /// Publishes the buffers' figures (CLIENT LIST `qbuf`, `qbuf-free`;
    /// INFO `mem_clients_normal`), and closes the biggest clients if all
    /// of them together are past `maxmemory-clients` (this one may be
    /// among them: then it is marked killed).
    fn note_qbuf(&self, server: &Server, info: &ClientInfo) {
        let (len, cap) = (self.rbuf.len(), self.rbuf.capacity());
        info.qbuf.store(len, Ordering::Relaxed);
        info.qbuf_free.store(cap - len, Ordering::Relaxed);
        info.obuf.store(self.out.buf.capacity(), Ordering::Relaxed);
        let mem = &server.memory;
        if mem.note_client(info, info.buffer_memory()) {
            memory::evict_clients(server);
        }
    }

    /// A new connection's, for `client`.
    fn new(client: ClientState) -> Self {
        Exec {
            rbuf: BytesMut::with_capacity(READ_CHUNK),
            out: Reply::new(false),
            ..Exec::bare(client)
        }
    }

    /// One with no buffers: what stands in for a connection's `Exec`
    /// while it is away (never used), and the rest of a new one's.
    fn bare(client: ClientState) -> Self {
        Exec {
            client,
            rbuf: BytesMut::new(),
            parser: RequestParser::new(),
            out: Reply {
                buf: Vec::new(),
                resp3: false,
            },
            run: commands::PipelineRun::new(),
            outbox_taken: 0,
            batch_len: 0,
            read_ahead: 0,
        }
    }
}

/// Serves one client until it quits, is killed, breaks the protocol or the
/// server shuts down. `stream` is plain TCP or TLS (after the handshake);
/// `seat`, its place among several workers, lets a plain one move to
/// another, or run its commands on another (see [`Seat`]).
pub async fn serve<S: Transport>(server: Arc<Server>, stream: S, seat: Option<Seat>) {
    let tcp = stream.tcp();
    let _ = tcp.set_nodelay(true);
    let addr = tcp.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    let laddr = tcp.local_addr().map(|a| a.to_string()).unwrap_or_default();
    let id = server.next_client_id();
    let info = Arc::new(ClientInfo::new(id, addr, laddr, unix_ms()));
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        info.fd.store(tcp.as_raw_fd() as i64, Ordering::Relaxed);
    }
    server.clients.insert(id, info.clone());
    server
        .stats
        .connections_received
        .fetch_add(1, Ordering::Relaxed);
    let needs_auth = crate::commands::acl::default_needs_auth(&server);
    let mut client = ClientState::new(info.clone(), !needs_auth);
    client.await_woken = true;
    let shutdown = server.shutdown_watch();
    let conn = Conn {
        server: server.clone(),
        stream,
        info,
        exec: Box::new(Exec::new(client)),
        spare: None,
        read_room: READ_CHUNK,
        shutdown,
        seat,
    };
    drive(conn).await;
}

/// Runs the connection's loop until it ends, or hands it to the worker it
/// moves to. Its future holds the connection and its loop's; what comes
/// after the loop is in [`after_run`], which is not async, so that the
/// rare waits that may follow (a replica's feed) are boxed and take no
/// room in every connection's future.
/// (Not an `async fn`: one keeps its argument twice in its future, as
/// the argument and as the local it is moved to; the block captures it
/// once.)
#[allow(clippy::manual_async_fn)] // on purpose: see above
fn drive<S: Transport>(mut conn: Conn<S>) -> impl Future<Output = ()> + Send {
    async move {
        let stop = conn.run().await;
        if let Some(replica) = after_run(stop, conn) {
            replica.await;
        }
    }
}

/// A boxed future a connection goes on with, on its own task.
type Continued = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

/// The end of a connection's loop: it moves to another worker, becomes a
/// replica's (the returned future feeds it), or is finished.
fn after_run<S: Transport>(stop: Result<(), Stop>, conn: Conn<S>) -> Option<Continued> {
    let (stream, mut conn) = conn.with_stream(());
    match stop {
        Err(Stop::Move) => {
            let Some(seat) = conn.seat.take() else {
                finish(conn);
                return None;
            };
            // A tokio stream belongs to the driver that registered it: the
            // socket goes over as a plain one, registered again there.
            match stream.detach() {
                Ok(socket) => {
                    conn.server
                        .stats
                        .hot_shard_moves
                        .fetch_add(1, Ordering::Relaxed);
                    seat.move_on(move |seat| resume(conn, socket, seat));
                }
                Err(e) => {
                    tracing::warn!(client = conn.info.id, "cannot move the connection: {e}");
                    finish(conn);
                }
            }
            None
        }
        Err(Stop::Replica) => Some(Box::pin(feed_replica(stream, conn))),
        _ => {
            finish(conn);
            None
        }
    }
}

/// A connection that became a replica's (SYNC / PSYNC): fed until it
/// goes.
async fn feed_replica<S: Transport>(stream: S, mut conn: Conn<()>) {
    if let Some(req) = conn.exec.client.repl.sync.take() {
        crate::server::replication::serve_replica(
            conn.server.clone(),
            stream,
            conn.info.clone(),
            &conn.exec.client,
            req,
        )
        .await;
    }
    finish(conn);
}

/// A moved connection, taken up again on the worker it moved to (its
/// socket registered with that worker's driver). Boxed: its future holds
/// [`drive`]'s.
fn resume(conn: Conn<()>, socket: std::net::TcpStream, seat: Seat) -> Continued {
    Box::pin(async move {
        match tokio::net::TcpStream::from_std(socket) {
            Ok(stream) => {
                let ((), mut conn) = conn.with_stream(stream);
                conn.seat = Some(seat);
                drive(conn).await;
            }
            Err(e) => {
                tracing::warn!(
                    client = conn.info.id,
                    "cannot register the moved connection: {e}"
                );
                finish(conn);
            }
        }
    })
}

/// What a connection leaves behind when it ends: its blocked keys, pause,
/// pub/sub, tracking and watches, its entry in the client list.
fn finish(conn: Conn<()>) {
    let Conn {
        server, info, exec, ..
    } = conn;
    let mut client = exec.client;
    let id = info.id;
    if let Some(b) = client.blocked.take() {
        server.unblock_client(id, &b.keys);
        server.signal_ready(&b.keys);
    }
    server.wake_client(server.pause.forget(id));
    commands::flush_stats(&server, &mut client);
    commands::disconnect(&server, &mut client);
    info.outbox.close();
    server.memory.forget_client(&info);
    server.clients.remove(&id);
}

impl<S> Conn<S> {
    /// The connection on `stream` instead (`()` while it moves), and the
    /// transport it had.
    fn with_stream<T>(self, stream: T) -> (S, Conn<T>) {
        let Conn {
            server,
            stream: had,
            info,
            exec,
            spare,
            read_room,
            shutdown,
            seat,
        } = self;
        let conn = Conn {
            server,
            stream,
            info,
            exec,
            spare,
            read_room,
            shutdown,
            seat,
        };
        (had, conn)
    }
}

/// [`Conn::output_over`], for a caller that has lent out other parts of
/// the connection. `outbox_taken` of the `unwritten` bytes are the outbox's
/// (it counts them itself).
fn output_over(
    info: &ClientInfo,
    outbox_taken: usize,
    limit: &OutputLimit,
    unwritten: usize,
) -> bool {
    info.outbox
        .set_replies(unwritten.saturating_sub(outbox_taken));
    if info.outbox.over_limit(limit) {
        info.close_for_output_limit();
        return true;
    }
    false
}

/// After a command: whether the `unwritten` bytes of replies (and the
/// outbox) took the client past `limit` (see [`output_over`]). Without a
/// limit, or well under it, costs a comparison or two.
fn past_limit(
    info: &ClientInfo,
    outbox_taken: usize,
    limit: &OutputLimit,
    unwritten: usize,
) -> bool {
    limit.is_set()
        && limit.may_exceed(unwritten + info.outbox.pending())
        && output_over(info, outbox_taken, limit, unwritten)
}

impl<S: Transport> Conn<S> {
    async fn run(&mut self) -> Result<(), Stop> {
        loop {
            self.process_buffer().await?;
            commands::flush_stats(&self.server, &mut self.exec.client);
            self.server.tracking.after_batch(&self.server);
            // The other connections ready on this worker run theirs
            // before these replies go out, so that the replies leave close
            // together, as Redis writes them all just before it sleeps.
            // Written one at a time between other clients' batches, each
            // could find the client asleep again and wake it: a context
            // switch of the client, a wake-up paid by this worker's write
            // and often a preemption of the worker (README, "Replies held
            // to the turn's end"). A lone command waits only when other
            // clients were served in this turn: alone, its reply is all
            // there is to send.
            let batch = std::mem::take(&mut self.exec.batch_len);
            if batch > 0 && (workers::batch_ran() || batch > 1) && !self.exec.out.is_empty() {
                tokio::task::yield_now().await;
            }
            self.send().await?;
            if self.exec.client.close_after_reply || self.info.killed.load(Ordering::Acquire) {
                return Err(Stop::Close);
            }
            if self.exec.client.repl.sync.is_some() {
                return Err(Stop::Replica);
            }
            if self.exec.client.repl.wait.is_some() {
                self.wait_replicas().await?;
                continue;
            }
            if self.exec.client.blocked.is_some() {
                self.wait_unblocked().await?;
                continue;
            }
            if self.exec.client.postponed.is_some() {
                self.wait_unpaused().await?;
                continue;
            }
            if self.moves_now() {
                return Err(Stop::Move);
            }
            self.read_more().await?;
        }
    }

    /// Whether the connection is to move to another worker now: its seat
    /// wants to, and it is idle between requests, with nothing that ties
    /// it to this worker's tasks (a transaction may move; it is state in
    /// the client). Pushes (subscribers, tracking, MONITOR) keep it here.
    fn moves_now(&self) -> bool {
        self.seat.as_ref().is_some_and(|s| s.wants_move().is_some())
            && self.exec.out.is_empty()
            && self.exec.client.woken.is_empty()
            && self.exec.client.aof_wait == 0
            && !self.receives_pushes()
    }

    /// Whether messages may come through the outbox: while the client
    /// subscribes to something, tracks keys or monitors, or some are still
    /// queued. (Other clients skip waiting on it: no cost on their
    /// commands.)
    fn receives_pushes(&self) -> bool {
        self.exec.client.pubsub.active()
            || self.exec.client.tracking.on
            || self.info.is_monitor()
            || self.info.outbox.pending() > 0
    }

    /// Publishes the buffers' figures (see [`Exec::note_qbuf`]).
    fn note_qbuf(&self) {
        self.exec.note_qbuf(&self.server, &self.info);
    }

    /// Makes room in the read buffer before a read: at least `read_room`
    /// bytes, so that a pipeline arrives in one read as it does in Redis
    /// (which reads as much as its buffer holds). Consumed bytes at the
    /// front are taken back first (the few bytes of a partial command
    /// move down), so a buffer emptied by its commands costs nothing to
    /// reuse. Beyond that the room grows with what has arrived, never
    /// with what a bulk header claims: a client that declares 512 MB and
    /// sends 40 KB holds about 80 KB more than its read room. The buffer
    /// at most doubles each time, so a big argument that does arrive costs
    /// few reallocations. An emptied buffer that grew large is let go.
    fn make_room(&mut self) {
        if self.exec.rbuf.is_empty() && self.exec.rbuf.capacity() > BIG_IDLE_BUFFER {
            self.exec.rbuf = BytesMut::with_capacity(READ_CHUNK);
        }
        let free = self.exec.rbuf.capacity() - self.exec.rbuf.len();
        if free >= self.read_room {
            return;
        }
        let want = self.exec.parser.wanted(self.exec.rbuf.len());
        let grow = want.min(self.exec.rbuf.len()).max(self.read_room);
        self.exec.rbuf.reserve(grow);
    }

    /// Counts a read of `n` bytes (INFO `total_net_input_bytes`,
    /// `total_reads_processed`).
    fn count_read(&self, n: usize) {
        let hot = self.server.stats.hot.local();
        hot.net_input_bytes.fetch_add(n as u64, Ordering::Relaxed);
        hot.reads_processed.fetch_add(1, Ordering::Relaxed);
    }

    /// After a read of `n` bytes into `room`: a read that filled its room
    /// may have left more in the socket, so the next gets twice the room
    /// (up to [`MOST_READ_ROOM`]); reads that used under a quarter of it
    /// give half back (down to [`READ_CHUNK`]).
    fn note_read(&mut self, n: usize, room: usize) {
        if n >= room {
            self.read_room = (self.read_room * 2).min(MOST_READ_ROOM);
        } else if n < self.read_room / 4 {
            self.read_room = (self.read_room / 2).max(READ_CHUNK);
        }
    }

    /// Checks the client's pending output against `limit`, `unwritten`
    /// bytes of `out` included; past it, the client is to be closed.
    fn output_over(&self, limit: &OutputLimit, unwritten: usize) -> bool {
        output_over(&self.info, self.exec.outbox_taken, limit, unwritten)
    }

    /// Moves the messages queued in the outbox after the replies in `out`.
    fn collect_outbox(&mut self) {
        if self.info.outbox.pending() > self.exec.outbox_taken {
            self.exec.outbox_taken += self.info.outbox.take_into(&mut self.exec.out.buf);
        }
    }

    /// Reads at least one more chunk into the buffer, or returns early
    /// when messages arrive in the outbox.
    async fn read_more(&mut self) -> Result<(), Stop> {
        self.make_room();
        let room = self.exec.rbuf.capacity() - self.exec.rbuf.len();
        loop {
            // Only a subscriber waits on its outbox: other clients' waits
            // stay exactly as they were.
            let woke = if self.receives_pushes() {
                tokio::select! {
                    r = self.stream.read_buf(&mut self.exec.rbuf) => Woke::Read(r),
                    _ = self.info.wake.notified() => Woke::Wake,
                    _ = self.info.outbox.ready() => Woke::Outbox,
                    _ = self.shutdown.changed() => Woke::Shutdown,
                }
            } else {
                self.read_or_wake().await
            };
            match woke {
                Woke::Read(Ok(0) | Err(_)) | Woke::Shutdown => return Err(Stop::Close),
                Woke::Read(Ok(n)) => {
                    self.note_read(n, room);
                    self.count_read(n);
                    self.note_qbuf();
                    break;
                }
                Woke::Wake => {
                    if self.info.killed.load(Ordering::Acquire)
                        || self.server.shutting_down.load(Ordering::SeqCst)
                    {
                        return Err(Stop::Close);
                    }
                }
                Woke::Outbox => return Ok(()),
            }
        }
        if self.exec.rbuf.len() as u64 > self.server.query_buffer_limit.load(Ordering::Relaxed) {
            tracing::warn!(
                client = self.info.id,
                "closing client that reached max query buffer length"
            );
            return Err(Stop::Close);
        }
        Ok(())
    }

    /// The wait of a client that receives no pushes, for its next request:
    /// bytes to read, a wake (`ClientInfo::wake`) or shutdown. The wake is
    /// taken through `Wake::poll_kicked` and shutdown seen through
    /// `shutting_down` (`Server::request_shutdown` wakes every client), not
    /// through the `Notify` and the `watch` other waits select on: each of
    /// those is a locked registration and removal a wait, and at `-P 1`
    /// this wait comes once a request (about 900 of a GET's 6,250
    /// instructions, with the three-way `select!`).
    async fn read_or_wake(&mut self) -> Woke {
        let read = self.stream.read_buf(&mut self.exec.rbuf);
        tokio::pin!(read);
        let (info, server) = (&self.info, &self.server);
        std::future::poll_fn(|cx| {
            if let std::task::Poll::Ready(r) = read.as_mut().poll(cx) {
                return std::task::Poll::Ready(Woke::Read(r));
            }
            if info.wake.poll_kicked(cx) {
                return std::task::Poll::Ready(Woke::Wake);
            }
            if server.shutting_down.load(Ordering::SeqCst) {
                return std::task::Poll::Ready(Woke::Shutdown);
            }
            std::task::Poll::Pending
        })
        .await
    }

    /// Runs every complete command in the buffer (stopping early if one
    /// blocks the client or closes the connection).
    async fn process_buffer(&mut self) -> Result<(), Stop> {
        let limits = Limits {
            max_bulk_len: self.server.proto_max_bulk_len.load(Ordering::Relaxed) as usize,
            max_multibulk_len: i32::MAX as usize,
            authenticated: self.exec.client.authenticated,
        };
        self.exec.client.clock.reset();
        // Messages that arrived before these commands go out before their
        // replies.
        self.collect_outbox();
        loop {
            // A big argument still arriving (over several reads): no
            // command is complete, nothing to send to the home for.
            let home = (self.seat.as_ref().and_then(Seat::runs_at))
                .filter(|_| self.exec.parser.wanted(self.exec.rbuf.len()) == 0);
            let batch = match home {
                Some(home) => self.run_elsewhere(home, &limits).await?,
                None => {
                    let ran = self.exec.batch_len;
                    let batch = self.exec.run_parsed(&self.server, &self.info, &limits);
                    if let Some(seat) = &mut self.seat {
                        seat.after_batch(crate::engine::take_handoff(), self.exec.batch_len - ran);
                    }
                    batch
                }
            };
            match batch {
                Batch::Done => return Ok(()),
                Batch::Flush => {
                    self.send().await?;
                    self.exec.client.clock.reset();
                }
                Batch::Woke => {
                    self.await_turns().await;
                    self.exec.client.clock.reset();
                }
                Batch::Killed => return Err(Stop::Close),
                Batch::ProtocolError(e) => {
                    self.exec.out.error(&e);
                    tracing::debug!(client = self.info.id, error = %e, "protocol error");
                    let _ = self.send().await;
                    return Err(Stop::Close);
                }
            }
        }
    }

    /// Runs the commands in the read buffer as [`Exec::run_parsed`] does,
    /// on the worker `to` (the home of a hot shard this connection writes
    /// in pipelines, see [`Seat`]), while this worker keeps the socket:
    /// the commands of a hot board's writers all run on one worker, and
    /// the reads and writes of the sockets of those placed elsewhere stay
    /// there. `exec` goes to that worker whole and comes back; meanwhile
    /// `spare` stands in for it, and nothing here uses it (the connection
    /// waits for its batch as it would for commands run here). Should that
    /// worker be gone (shutdown), the connection closes.
    async fn run_elsewhere(&mut self, to: usize, limits: &Limits) -> Result<Batch, Stop> {
        let Some(seat) = &self.seat else {
            return Ok(self.exec.run_parsed(&self.server, &self.info, limits));
        };
        let spare = match self.spare.take() {
            Some(spare) => spare,
            None => {
                (self.server.stats)
                    .hot_shard_guests
                    .fetch_add(1, Ordering::Relaxed);
                Box::new(Exec::bare(ClientState::new(self.info.clone(), false)))
            }
        };
        let mut exec = std::mem::replace(&mut self.exec, spare);
        let (server, info, limits) = (self.server.clone(), self.info.clone(), *limits);
        let (tx, rx) = tokio::sync::oneshot::channel();
        seat.run_at(
            to,
            Box::new(move || {
                let batch =
                    crate::engine::as_guest_writer(|| exec.run_parsed(&server, &info, &limits));
                // A hand-off seen here is not this worker's connections'.
                let _ = crate::engine::take_handoff();
                let _ = tx.send((exec, batch));
            }),
        );
        let Ok((exec, batch)) = rx.await else {
            return Err(Stop::Close);
        };
        self.spare = Some(std::mem::replace(&mut self.exec, exec));
        Ok(batch)
    }

    /// Waits until the blocked clients the last command woke have taken
    /// their turn (ran their command again, or went), at most
    /// [`TURN_WAIT`].
    async fn await_turns(&mut self) {
        let woken = std::mem::take(&mut self.exec.client.woken);
        let deadline = tokio::time::Instant::now() + TURN_WAIT;
        loop {
            let notified = self.server.turn_taken.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let all_taken = woken.iter().all(|(c, turns)| {
                c.turns.load(Ordering::Acquire) != *turns || c.killed.load(Ordering::Acquire)
            });
            if all_taken || tokio::time::timeout_at(deadline, notified).await.is_err() {
                return;
            }
        }
    }

    /// Waits while blocked (see [`Conn::wait_woken`]), then records that
    /// the client took its turn, for a client that woke it.
    async fn wait_unblocked(&mut self) -> Result<(), Stop> {
        let r = self.wait_woken().await;
        self.server.took_turn(&self.info);
        r
    }

    /// Waits while blocked: reruns the command when woken, replies null on
    /// timeout. Bytes arriving meanwhile are buffered, not run.
    async fn wait_woken(&mut self) -> Result<(), Stop> {
        let Some(block) = self.exec.client.blocked.clone() else {
            return Ok(());
        };
        let sleep = async {
            match block.deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(sleep);
        let ended = loop {
            self.make_room();
            tokio::select! {
                _ = self.info.wake.notified() => {
                    if self.info.killed.load(Ordering::Acquire) {
                        return Err(Stop::Close);
                    }
                    match self.info.take_unblock() {
                        Some(how) => break Ended::Unblock(how),
                        None => break Ended::Woken,
                    }
                }
                _ = &mut sleep => break Ended::Unblock(Unblock::Timeout),
                _ = self.info.outbox.ready(), if self.receives_pushes() => {
                    self.send().await?;
                    continue;
                }
                r = self.stream.read_buf(&mut self.exec.rbuf) => match r {
                    Ok(0) | Err(_) => return Err(Stop::Close),
                    Ok(_) => {
                        if self.exec.rbuf.len() as u64 > self.server.query_buffer_limit.load(Ordering::Relaxed) {
                            return Err(Stop::Close);
                        }
                    }
                },
                _ = self.shutdown.changed() => return Err(Stop::Close),
            }
        };
        self.exec.client.blocked = None;
        match ended {
            Ended::Woken => {}
            Ended::Unblock(how) => {
                self.info.set_blocked(false, false);
                self.leave_line(&block.keys);
                match how {
                    Unblock::Timeout => self.exec.out.null_array(),
                    Unblock::Error => {
                        self.server.count_error("UNBLOCKED");
                        self.exec
                            .out
                            .error("UNBLOCKED client unblocked via CLIENT UNBLOCK");
                    }
                }
                return Ok(());
            }
        }
        // A client that has gone takes nothing: what it would have popped
        // stays for the next waiter (its departure wakes them).
        if self.peer_gone() {
            self.leave_line(&block.keys);
            return Err(Stop::Close);
        }
        // Run again while still registered, so that a client that finds
        // nothing (or finds an earlier waiter ahead of it) keeps its place.
        let args: Vec<&[u8]> = block.args.iter().map(|a| a.as_slice()).collect();
        self.exec.client.clock.reset();
        self.exec.client.rerun = true;
        commands::execute(
            &self.server,
            &mut self.exec.client,
            &mut self.exec.out,
            &args,
        );
        self.exec.client.rerun = false;
        match self.exec.client.blocked.as_mut() {
            // Still nothing to take: keep waiting until the original deadline.
            Some(b) => b.deadline = block.deadline,
            None => {
                self.info.set_blocked(false, false);
                self.leave_line(&block.keys);
            }
        }
        Ok(())
    }

    /// WAIT: until enough replicas acknowledged the offset, or the
    /// timeout; then replies how many did.
    async fn wait_replicas(&mut self) -> Result<(), Stop> {
        let Some((offset, want, deadline)) = self.exec.client.repl.wait.take() else {
            return Ok(());
        };
        let repl = &self.server.replication;
        let mut acks = repl.acks.subscribe();
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(sleep);
        let got = loop {
            let got = repl.acked(offset);
            if got >= want {
                break got;
            }
            tokio::select! {
                r = acks.changed() => if r.is_err() { return Err(Stop::Close) },
                _ = &mut sleep => break repl.acked(offset),
                _ = self.info.wake.notified() => {
                    if self.info.killed.load(Ordering::Acquire) {
                        return Err(Stop::Close);
                    }
                }
                _ = self.shutdown.changed() => return Err(Stop::Close),
            }
        };
        self.exec.out.int(got as i64);
        Ok(())
    }

    /// Waits while CLIENT PAUSE holds the postponed command, then runs it.
    /// Bytes arriving meanwhile are buffered, not run.
    async fn wait_unpaused(&mut self) -> Result<(), Stop> {
        // Until the pause is over (its time ran out, or CLIENT UNPAUSE),
        // then until this client's turn: the clients it held run one after
        // the other, in the order it held them.
        let id = self.info.id;
        loop {
            let until = self.server.pause.until();
            if until.is_none() && self.server.pause.take_turn(id) {
                break;
            }
            let sleep = async {
                match until {
                    Some(u) => tokio::time::sleep_until(u.into()).await,
                    None => std::future::pending().await,
                }
            };
            if self.exec.rbuf.capacity() - self.exec.rbuf.len() < 1024 {
                self.exec.rbuf.reserve(READ_CHUNK);
            }
            tokio::select! {
                _ = self.info.wake.notified() => {
                    if self.info.killed.load(Ordering::Acquire) {
                        return Err(Stop::Close);
                    }
                }
                _ = sleep => {}
                _ = self.info.outbox.ready(), if self.receives_pushes() => {
                    self.send().await?;
                }
                r = self.stream.read_buf(&mut self.exec.rbuf) => match r {
                    Ok(0) | Err(_) => return Err(Stop::Close),
                    Ok(_) => {
                        if self.exec.rbuf.len() as u64 > self.server.query_buffer_limit.load(Ordering::Relaxed) {
                            return Err(Stop::Close);
                        }
                    }
                },
                _ = self.shutdown.changed() => return Err(Stop::Close),
            }
        }
        // Runs them through the dispatcher again: a pause made longer in
        // the meantime postpones the first again, and the rest behind it.
        let Some((queue, _)) = self.exec.client.postponed.take() else {
            return Ok(());
        };
        for args in queue {
            let args: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
            self.exec.client.clock.reset();
            commands::execute(
                &self.server,
                &mut self.exec.client,
                &mut self.exec.out,
                &args,
            );
        }
        // The next client's turn (unless a new pause holds them all).
        if self.server.pause.until().is_none() {
            self.server.wake_client(self.server.pause.next());
        }
        Ok(())
    }

    /// Whether the peer has closed its side (or the socket failed), asked
    /// of the socket itself, now: tokio's readiness may not have seen the
    /// close yet. Bytes that arrived meanwhile (pipelined commands) are
    /// moved into the read buffer on the way.
    fn peer_gone(&mut self) -> bool {
        let mut chunk = [0u8; 4096];
        loop {
            match self.stream.read_now(&mut chunk) {
                Ok(0) => return true,
                Ok(n) => {
                    self.exec.rbuf.extend_from_slice(&chunk[..n]);
                    self.count_read(n);
                    let limit = self.server.query_buffer_limit.load(Ordering::Relaxed);
                    if self.exec.rbuf.len() as u64 > limit {
                        return true;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return true,
            }
        }
    }

    /// Stops waiting on `keys`, and wakes the clients that waited behind
    /// this one: one that let data go by because this client was first in
    /// line gets its turn now.
    fn leave_line(&self, keys: &[(usize, bytes::Bytes)]) {
        self.server.unblock_client(self.info.id, keys);
        self.server.signal_ready(keys);
    }

    /// Writes the replies, then whatever the outbox holds (unless the
    /// client is closing: as in Redis, nothing goes after its last reply).
    async fn send(&mut self) -> Result<(), Stop> {
        if !self.exec.client.close_after_reply {
            self.collect_outbox();
        }
        if self.exec.out.is_empty() {
            return Ok(());
        }
        self.wait_aof().await?;
        let limit = self.server.output_limit_of(&self.info);
        self.write_out(&limit).await?;
        self.info
            .outbox
            .written(std::mem::take(&mut self.exec.outbox_taken));
        // Written: the soft limit's clock, if this output could have
        // started it, stops (or the queue alone is still past the limit).
        let could_be_over = self.exec.out.buf.len() + self.info.outbox.pending();
        if limit.soft > 0 && could_be_over as u64 >= limit.soft && self.output_over(&limit, 0) {
            return Err(Stop::Close);
        }
        (self.server.stats.hot.local())
            .net_output_bytes
            .fetch_add(self.exec.out.buf.len() as u64, Ordering::Relaxed);
        self.exec.out.buf.clear();
        if self.exec.out.buf.capacity() > 1024 * 1024 {
            self.exec.out.buf.shrink_to(64 * 1024);
        }
        self.info
            .obuf
            .store(self.exec.out.buf.capacity(), Ordering::Relaxed);
        // Less to count now (the check for too much comes after reads and
        // commands).
        let _ = (self.server.memory).note_client(&self.info, self.info.buffer_memory());
        Ok(())
    }

    /// Writes all of `out`. A client whose peer stops reading stays here
    /// until it is killed (CLIENT KILL, its output past `limit`: checked
    /// here, by a publisher or monitor feed, and each second under a soft
    /// limit) or the server shuts down.
    async fn write_out(&mut self, limit: &OutputLimit) -> Result<(), Stop> {
        (self.server.stats.hot.local())
            .writes_processed
            .fetch_add(1, Ordering::Relaxed);
        // Usually the socket takes it all at once: one write, no waiting.
        let mut done = match self.stream.try_write_now(&self.exec.out.buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
            Err(_) => return Err(Stop::Close),
        };
        let mut woken = false;
        let len = self.exec.out.buf.len();
        if done < len {
            let own = (len - done).saturating_sub(self.exec.outbox_taken);
            self.info.outbox.set_replies(own);
            if limit.is_set() && self.output_over(limit, len - done) {
                return Err(Stop::Close);
            }
        }
        while done < len {
            tokio::select! {
                biased;
                r = self.stream.write_some(&self.exec.out.buf[done..]) => {
                    match r {
                        Ok(0) => return Err(Stop::Close),
                        Ok(n) => {
                            done += n;
                            // A slow reader can stay past the soft limit.
                            let unwritten = len - done;
                            if limit.may_exceed(unwritten + self.info.outbox.pending()) {
                                if self.output_over(limit, unwritten) {
                                    return Err(Stop::Close);
                                }
                            } else {
                                let own = (len - done).saturating_sub(self.exec.outbox_taken);
                                self.info.outbox.set_replies(own);
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(_) => return Err(Stop::Close),
                    }
                }
                _ = self.info.wake.notified() => {
                    if self.info.killed.load(Ordering::Acquire) {
                        return Err(Stop::Close);
                    }
                    // Not for us (an unblocked key): passed on below.
                    woken = true;
                }
                _ = self.shutdown.changed() => return Err(Stop::Close),
                _ = tokio::time::sleep(SOFT_LIMIT_CHECK),
                    if limit.soft > 0 && limit.may_exceed(len - done + self.info.outbox.pending()) =>
                {
                    if self.output_over(limit, len - done) {
                        return Err(Stop::Close);
                    }
                }
            }
        }
        if S::BUFFERS_WRITES {
            self.flush_transport().await?;
        }
        self.info.outbox.set_replies(0);
        if woken {
            self.info.wake.notify_one();
        }
        Ok(())
    }

    /// Pushes out what the transport still holds (TLS records), waiting
    /// as `write_out` does: until done, killed or shut down.
    async fn flush_transport(&mut self) -> Result<(), Stop> {
        let mut woken = false;
        let r = loop {
            tokio::select! {
                biased;
                r = self.stream.flush() => break r.map_err(|_| Stop::Close),
                _ = self.info.wake.notified() => {
                    if self.info.killed.load(Ordering::Acquire) {
                        return Err(Stop::Close);
                    }
                    // Not for us (an unblocked key): passed on below.
                    woken = true;
                }
                _ = self.shutdown.changed() => return Err(Stop::Close),
            }
        };
        if woken {
            self.info.wake.notify_one();
        }
        r
    }

    /// Replies to writes go out only once the writes are in the AOF:
    /// written (`everysec`, `no`: this worker writes them now, with every
    /// other record fed before them) or fsynced (`always`: one fsync
    /// serves every client waiting).
    async fn wait_aof(&mut self) -> Result<(), Stop> {
        let target = std::mem::take(&mut self.exec.client.aof_wait);
        if target == 0 {
            return Ok(());
        }
        if self.server.aof.fsync() != Fsync::Always && !self.server.aof.written(target) {
            // The clients ready on this worker run their commands first,
            // so that one write(2) takes all their records (as Redis
            // writes once per event loop turn).
            tokio::task::yield_now().await;
            journal::writer::write_through(&self.server.aof, target);
        }
        let mut synced = self.server.aof.synced_watch();
        tokio::select! {
            r = synced.wait_for(|&s| s >= target) => r.map(|_| ()).map_err(|_| Stop::Close),
            _ = self.shutdown.changed() => Err(Stop::Close),
        }
    }
}
/// For the size tests here and in `server::workers`: runs `f` in a
/// runtime with a server and a connected socket, and the size of a value's
/// type (a future's, never polled).
#[cfg(test)]
pub(super) mod probe {
    use std::sync::Arc;

    use crate::state::Server;

    pub fn with_socket(f: impl FnOnce(Arc<Server>, tokio::net::TcpStream)) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("listen");
            let addr = l.local_addr().expect("address");
            let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
            f(Server::new(Default::default(), None), stream);
        });
    }

    pub fn size<F>(_: &F) -> usize {
        std::mem::size_of::<F>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection's future holds its state once: `drive` keeps the
    /// connection (not a second copy of it, as an `async fn` would) and
    /// its loop's wait; rare long waits (a replica's feed) are boxed.
    /// Every client pays for this size, in memory and in copies.
    #[test]
    fn a_connection_future_holds_its_state_once() {
        probe::with_socket(|server, stream| {
            let conn = std::mem::size_of::<Conn<tokio::net::TcpStream>>();
            let f = serve(server, stream, None);
            let size = probe::size(&f);
            assert!(
                size <= conn + 1536,
                "{size} bytes for a connection of {conn}"
            );
        });
    }
}
