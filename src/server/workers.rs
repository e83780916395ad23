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
//!
//! A placed connection stays, except one that pipelines writes to a hot
//! shard another worker writes too: it moves to that shard's home runtime
//! (see [`Seat`]), so that a hot board's writers take turns on one worker.
//!
//! Each worker thread also counts the batches of commands run in its
//! current turn (until it runs out of work): [`batch_ran`], which
//! `connection` asks before sending a lone command's reply.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::net::TcpStream;
use tokio::runtime::Handle;

use crate::engine::SHARD_COUNT;
use crate::state::Server;

use super::{connection, tls};

/// The runtimes connections are placed on; the first one also runs the
/// listeners and the background tasks (it is the one `server::run` runs
/// on).
#[derive(Debug, Clone)]
pub struct Workers {
    runtimes: Arc<[Runtime]>,
    /// Each shard's home: the runtime that connections which keep taking
    /// that shard over from other workers move to ([`NO_HOME`] until one
    /// does).
    homes: Arc<[AtomicUsize; SHARD_COUNT]>,
}

/// A shard no connection has had to move for.
const NO_HOME: usize = usize::MAX;

/// Batches a connection's hand-offs are counted over before it decides.
const WINDOW: u32 = 32;
/// Batches of a window that must have taken the same shard over from
/// another thread (`engine::take_handoff`), and commands the window must
/// hold, for the connection to move to that shard's home: an eighth of
/// its batches, and pipelines of 4 commands or more on average.
/// Connections that pipeline to one hot board spend most of their time
/// under its lock, so two workers can only take turns, and each hand-off
/// moves the board's cache lines from one core to the other: on one worker
/// they are faster. Lone commands (`-P 1`) spend most of theirs reading
/// and writing sockets, which two workers do at once: they stay spread,
/// however often the board changes hands.
const HANDOFFS_IN_WINDOW: u32 = WINDOW / 8;
const COMMANDS_IN_WINDOW: usize = 4 * WINDOW as usize;
/// Most moves one connection makes (one that writes to two hot boards
/// with homes on different runtimes must not go back and forth).
const MOST_MOVES: u8 = 2;

#[derive(Debug)]
struct Runtime {
    handle: Handle,
    /// Connections running there now.
    connections: Arc<AtomicUsize>,
}

/// Counts a connection on its runtime until its task ends (or is dropped
/// with the runtime).
#[derive(Debug)]
struct Placed(Arc<AtomicUsize>);

/// A plain TCP connection's place on a runtime, and the shards it has
/// taken over from other workers there. A pipelining connection whose
/// batches keep taking one shard's write lock after another worker (a hot
/// board written by clients on several workers) moves to that shard's
/// home runtime ([`Workers::home_of`]): once its writers run on one worker
/// they take turns there, between batches, instead of waiting for each
/// other across cores, and the board's cache lines stay on one core.
/// Other connections, and reads, stay spread over the workers.
#[derive(Debug)]
pub struct Seat {
    workers: Workers,
    at: usize,
    _placed: Placed,
    /// Batches counted in this window, and the commands they ran.
    batches: u32,
    commands: usize,
    /// The shard last taken over in this window, and in how many of its
    /// batches.
    shard: Option<usize>,
    handoffs: u32,
    /// Moves made so far.
    moves: u8,
    /// The runtime to move to, once decided.
    wants: Option<usize>,
}

impl Seat {
    /// Counts a batch of `commands` just run on this seat: `handoff`, the
    /// shard it took over from another thread (`engine::take_handoff`),
    /// if any. At the end of a window of pipelines where enough batches
    /// took over the same shard (see [`HANDOFFS_IN_WINDOW`]), the
    /// connection is to move to that shard's home if it is elsewhere.
    pub fn after_batch(&mut self, handoff: Option<usize>, commands: usize) {
        if self.moves >= MOST_MOVES || self.wants.is_some() {
            return;
        }
        self.batches += 1;
        self.commands += commands;
        if let Some(idx) = handoff {
            if self.shard == Some(idx) {
                self.handoffs += 1;
            } else {
                self.shard = Some(idx);
                self.handoffs = 1;
            }
        }
        if self.batches < WINDOW {
            return;
        }
        let hot = self.handoffs >= HANDOFFS_IN_WINDOW && self.commands >= COMMANDS_IN_WINDOW;
        if let (Some(idx), true) = (self.shard, hot) {
            let home = self.workers.home_of(idx, self.at);
            if home != self.at {
                self.wants = Some(home);
            }
        }
        self.batches = 0;
        self.commands = 0;
        self.shard = None;
        self.handoffs = 0;
    }

    /// The runtime this connection is to move to, if it is to move.
    pub fn wants_move(&self) -> Option<usize> {
        self.wants
    }

    /// Runs `task` (the connection, taken up again) on the runtime it
    /// wants to move to, with a seat there; this seat is given up. With no
    /// move wanted, `task` runs here with this seat.
    pub fn move_on<F, Fut>(self, task: F)
    where
        F: FnOnce(Seat) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let target = self
            .wants
            .and_then(|to| Some((to, self.workers.runtimes.get(to)?.handle.clone())));
        let Some((to, handle)) = target else {
            tokio::spawn(task(self));
            return;
        };
        let Some(mut seat) = self.workers.seat(to) else {
            tokio::spawn(task(self));
            return;
        };
        seat.moves = self.moves + 1;
        drop(self);
        handle.spawn(task(seat));
    }
}

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
            homes: Arc::new(std::array::from_fn(|_| AtomicUsize::new(NO_HOME))),
        }
    }

    /// A seat for a connection on runtime `at`, counted there until the
    /// seat is dropped.
    fn seat(&self, at: usize) -> Option<Seat> {
        let rt = self.runtimes.get(at)?;
        rt.connections.fetch_add(1, Ordering::Relaxed);
        Some(Seat {
            workers: self.clone(),
            at,
            _placed: Placed(rt.connections.clone()),
            batches: 0,
            commands: 0,
            shard: None,
            handoffs: 0,
            moves: 0,
            wants: None,
        })
    }

    /// The home of shard `idx`: the runtime its busy writers gather
    /// on. The first connection to ask for a shard with none makes one:
    /// the runtime that is home to the fewest shards, its own (`at`)
    /// among equals, so that several hot boards spread over the workers.
    fn home_of(&self, idx: usize, at: usize) -> usize {
        let Some(home) = self.homes.get(idx) else {
            return at;
        };
        let now = home.load(Ordering::Acquire);
        if now != NO_HOME {
            return now;
        }
        let homes_of = |r: usize| {
            self.homes
                .iter()
                .filter(|h| h.load(Ordering::Relaxed) == r)
                .count()
        };
        let pick = (0..self.runtimes.len())
            .min_by_key(|&r| (homes_of(r), r != at))
            .unwrap_or(at);
        match home.compare_exchange(NO_HOME, pick, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => pick,
            Err(other) => other,
        }
    }

    /// The runtime with the fewest connections (the first of equals).
    fn least_loaded(&self) -> Option<(usize, &Runtime)> {
        self.runtimes
            .iter()
            .enumerate()
            .min_by_key(|(_, r)| r.connections.load(Ordering::Relaxed))
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
        let Some((at, rt)) = self
            .least_loaded()
            .filter(|_| self.runtimes.len() > 1 && !refusal)
        else {
            spawn_here(server, stream, tls, reject);
            return;
        };
        let Some(seat) = self.seat(at) else {
            spawn_here(server, stream, tls, reject);
            return;
        };
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
            match TcpStream::from_std(socket) {
                Ok(stream) => serve(server, stream, tls, reject, Some(seat)).await,
                Err(e) => tracing::warn!("accept: cannot register the connection: {e}"),
            }
        });
    }
}

thread_local! {
    /// Batches of commands the connections on this worker thread have run
    /// since it last ran out of work ([`worker_idle`]).
    static TURN_BATCHES: Cell<u32> = const { Cell::new(0) };
}

/// Counts a batch of commands just run on this worker thread, and says
/// whether another ran on it since it last ran out of work: whether
/// other clients are being served in the same turn, so that a reply held
/// back to the turn's end (`connection::Conn::run`) leaves with theirs.
pub fn batch_ran() -> bool {
    TURN_BATCHES.with(|n| {
        let before = n.get();
        n.set(before.saturating_add(1));
        before > 0
    })
}

/// The worker thread ran out of work (tokio's `on_thread_park`): the
/// next batch starts a turn.
pub fn worker_idle() {
    TURN_BATCHES.with(|n| n.set(0));
}

fn spawn_here(server: Arc<Server>, stream: TcpStream, tls: bool, reject: Option<&'static [u8]>) {
    tokio::spawn(serve(server, stream, tls, reject, None));
}

/// A client's task: TLS handshake first on the TLS port, the refusal line
/// for a refused client, the connection loop otherwise. The connection's
/// future (2.5 KB: its state, and every wait it may be in; the TLS one
/// more) is boxed, so that the task itself stays small: tokio copies a
/// task's future whole several times as it spawns and ends it. Unboxed,
/// the task was 14 KB, and those copies were 145,000 of the 178,000
/// instructions of a connect-GET-close (callgrind).
async fn serve(
    server: Arc<Server>,
    stream: TcpStream,
    tls: bool,
    reject: Option<&'static [u8]>,
    seat: Option<Seat>,
) {
    match (tls, reject) {
        (true, reject) => {
            // Counted on its runtime while it runs; a TLS session does not
            // move.
            let _seat = seat;
            Box::pin(tls::accept(server, stream, reject)).await
        }
        (false, Some(line)) => {
            use tokio::io::AsyncWriteExt;
            let mut s = stream;
            let _ = s.write_all(line).await;
        }
        (false, None) => Box::pin(connection::serve(server, stream, seat)).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_counts_the_batches_run_on_its_thread_until_the_worker_idles() {
        worker_idle();
        assert!(!batch_ran(), "the first batch of a turn has none before it");
        assert!(batch_ran());
        assert!(batch_ran());
        // Another thread's turn is its own.
        let other = std::thread::spawn(batch_ran).join().expect("thread");
        assert!(!other);
        worker_idle();
        assert!(!batch_ran());
    }

    /// Two runtimes' handles (kept alive by the returned runtimes).
    fn two() -> (Vec<tokio::runtime::Runtime>, Workers) {
        let rts: Vec<_> = (0..2)
            .map(|_| {
                tokio::runtime::Builder::new_current_thread()
                    .build()
                    .expect("runtime")
            })
            .collect();
        let workers = Workers::new(rts.iter().map(|r| r.handle().clone()).collect());
        (rts, workers)
    }

    /// One window of `batches` of `commands` each, every `every`-th
    /// taking `shard` over.
    fn window(seat: &mut Seat, shard: usize, every: u32, commands: usize) {
        for b in 0..WINDOW {
            seat.after_batch((b % every == 0).then_some(shard), commands);
        }
    }

    /// A client's task holds its connection boxed: tokio copies a task's
    /// future whole when it spawns it and when it ends, so that copy must
    /// stay small however big the connection's state machine grows.
    #[test]
    fn a_client_task_is_small() {
        connection::probe::with_socket(|server, stream| {
            let task = serve(server, stream, false, None, None);
            let size = connection::probe::size(&task);
            assert!(size <= 512, "{size} bytes");
        });
    }

    fn count(w: &Workers, at: usize) -> usize {
        w.runtimes[at].connections.load(Ordering::Relaxed)
    }

    /// A pipelining connection that keeps taking one shard over moves to
    /// the shard's home; the first to decide makes its own runtime the
    /// home, and stays.
    #[test]
    fn pipelined_writers_of_a_shard_gather_on_its_home() {
        let (_rts, w) = two();
        let mut a = w.seat(0).expect("seat");
        let mut b = w.seat(1).expect("seat");
        assert_eq!((count(&w, 0), count(&w, 1)), (1, 1));
        window(&mut b, 9, 8, 16);
        assert_eq!(b.wants_move(), None, "its own runtime became the home");
        window(&mut a, 9, 8, 16);
        assert_eq!(a.wants_move(), Some(1));
        // A second hot shard gets the runtime home to fewer shards.
        let mut c = w.seat(1).expect("seat");
        window(&mut c, 20, 4, 16);
        assert_eq!(c.wants_move(), Some(0));
        drop((a, b, c));
        assert_eq!((count(&w, 0), count(&w, 1)), (0, 0));
    }

    /// Lone commands (`-P 1`), hand-offs below an eighth of the batches,
    /// or of different shards, and a connection that has moved its most,
    /// stay where they are.
    #[test]
    fn others_stay() {
        let (_rts, w) = two();
        w.home_of(3, 1);
        let mut lone = w.seat(0).expect("seat");
        for _ in 0..10 {
            window(&mut lone, 3, 1, 1);
        }
        assert_eq!(lone.wants_move(), None, "lone commands");
        let mut rare = w.seat(0).expect("seat");
        window(&mut rare, 3, 11, 16);
        assert_eq!(rare.wants_move(), None, "4 of 32 batches needed, 3 seen");
        let mut spread = w.seat(0).expect("seat");
        for b in 0..WINDOW {
            spread.after_batch(Some(b as usize % SHARD_COUNT), 16);
        }
        assert_eq!(spread.wants_move(), None, "different shards");
        let mut moved = w.seat(0).expect("seat");
        moved.moves = MOST_MOVES;
        window(&mut moved, 3, 1, 16);
        assert_eq!(moved.wants_move(), None, "moved its most");
        let mut hot = w.seat(0).expect("seat");
        window(&mut hot, 3, 8, 16);
        assert_eq!(hot.wants_move(), Some(1), "the same, hot");
    }

    /// A move hands the task a seat on the home runtime, counted there,
    /// one move more; the old seat is let go.
    #[test]
    fn a_move_takes_a_seat_on_the_home() {
        let (rts, w) = two();
        w.home_of(5, 1);
        let mut seat = w.seat(0).expect("seat");
        window(&mut seat, 5, 1, 16);
        assert_eq!(seat.wants_move(), Some(1));
        let (tx, rx) = std::sync::mpsc::channel();
        seat.move_on(move |seat| async move {
            let _ = tx.send((seat.at, seat.moves, seat.wants_move()));
            std::future::pending::<()>().await;
        });
        assert_eq!(count(&w, 0), 0, "the old seat is let go");
        assert_eq!(count(&w, 1), 1, "counted on its home");
        // The task runs on runtime 1.
        rts[1].block_on(async {
            for _ in 0..100 {
                tokio::task::yield_now().await;
            }
        });
        let got = rx.try_recv().expect("the task ran on the home runtime");
        assert_eq!(got, (1, 1, None));
    }
}
