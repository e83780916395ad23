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
//! A placed connection stays, except for the writers of a hot shard. One
//! that pipelines writes to a shard another worker writes too has its
//! batches of commands run on that shard's home runtime, which every
//! runtime has a queue for ([`Job`]), while its own worker keeps reading
//! and writing its socket; one that finds itself on the home moves off it
//! to another worker and sends its batches back (see [`Seat`]). A hot
//! board's writes all run on its home, one batch after another, and the
//! other workers do the rest of its writers' work: their sockets.
//!
//! Each worker thread also counts the batches of commands run in its
//! current turn (until it runs out of work): [`batch_ran`], which
//! `connection` asks before sending a lone command's reply.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::net::TcpStream;
use tokio::runtime::Handle;
use tokio::sync::mpsc;

use crate::engine::SHARD_COUNT;
use crate::state::Server;

use super::{connection, tls};

/// The runtimes connections are placed on; the first one also runs the
/// listeners and the background tasks (it is the one `server::run` runs
/// on).
#[derive(Debug, Clone)]
pub struct Workers {
    runtimes: Arc<[Runtime]>,
    /// Each shard's home: the runtime that runs the batches of the
    /// connections which keep taking that shard over from other workers
    /// ([`NO_HOME`] until one does).
    homes: Arc<[AtomicUsize; SHARD_COUNT]>,
    /// Each runtime's queue of batches run there for connections placed
    /// on another ([`Seat::run_at`]); none with one runtime.
    jobs: Arc<[mpsc::UnboundedSender<Job>]>,
}

/// A batch of a connection's commands, run on another worker than its
/// own ([`Seat::run_at`]).
pub type Job = Box<dyn FnOnce() + Send>;

/// A shard no connection has had to send its batches to.
const NO_HOME: usize = usize::MAX;

/// Batches a connection's hand-offs are counted over before it decides.
const WINDOW: u32 = 32;
/// Batches of a window that must have taken the same shard over from
/// another thread (`engine::take_handoff`), and commands the window must
/// hold, for the connection's batches to run on that shard's home from
/// then on: an eighth of its batches, and pipelines of 4 commands or more
/// on average. Connections that pipeline to one hot board spend most of
/// their time under its lock, so two workers running them can only take
/// turns, and each hand-off moves the board's cache lines from one core
/// to the other: run on one worker they are faster. Lone commands (`-P 1`)
/// spend most of theirs reading and writing sockets, which two workers do
/// at once: they run where they are, however often the board changes
/// hands (a batch sent to another worker and back costs each a wake-up).
const HANDOFFS_IN_WINDOW: u32 = WINDOW / 8;
const COMMANDS_IN_WINDOW: usize = 4 * WINDOW as usize;

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
/// board written by clients on several workers) has its batches run on
/// that shard's home runtime ([`Workers::home_of`]) from then on
/// ([`Seat::runs_at`], [`Seat::run_at`]): its commands and the other
/// writers' take turns there, between batches, instead of waiting for
/// each other across cores, and the board's cache lines stay on one core;
/// reading its requests and writing its replies stays with its own
/// worker, so each worker does a share. A writer placed on the home
/// itself moves to the other runtime with the fewest connections
/// ([`Seat::wants_move`], [`Seat::move_on`]) and sends its batches back
/// from there: run on the home, its socket's turns would come only when
/// the home's queue let the worker look at its sockets, a fraction of
/// the turns of those whose sockets another worker serves (a tenth, on 2
/// cores), and the home would spend on sockets what it is needed for the
/// board. (Batches run on the home write as a guest,
/// `engine::as_guest_writer`, so a writer still placed there sees the
/// shard taken over too.) Other connections, and reads, run where they
/// are.
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
    /// The runtime its batches run on, once decided.
    runs_at: Option<usize>,
    /// For a connection on the home of a hot shard it writes: the runtime
    /// to move to, whose batches then run on the home (`runs_at`).
    wants: Option<Move>,
}

/// Where a connection on the home of a hot shard it writes goes: to
/// runtime `to`, its batches sent back to `home`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Move {
    pub to: usize,
    pub home: usize,
}

impl Seat {
    /// Counts a batch of `commands` just run on this seat: `handoff`, the
    /// shard it took over from another thread (`engine::take_handoff`),
    /// if any. At the end of a window of pipelines where enough batches
    /// took over the same shard (see [`HANDOFFS_IN_WINDOW`]), the
    /// connection's batches are to run on that shard's home if it is
    /// elsewhere; on the home, the connection is to move off it.
    pub fn after_batch(&mut self, handoff: Option<usize>, commands: usize) {
        if self.runs_at.is_some() || self.wants.is_some() {
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
                self.runs_at = Some(home);
            } else {
                self.wants = (self.workers.least_loaded_but(home)).map(|to| Move { to, home });
            }
        }
        self.batches = 0;
        self.commands = 0;
        self.shard = None;
        self.handoffs = 0;
    }

    /// The runtime this connection's commands are to run on, when not on
    /// its own: the home of a hot shard it writes in pipelines.
    pub fn runs_at(&self) -> Option<usize> {
        self.runs_at
    }

    /// Where this connection is to move, if it is to move.
    pub fn wants_move(&self) -> Option<Move> {
        self.wants
    }

    /// Runs `task` (the connection, taken up again) on the runtime it
    /// wants to move to, with a seat there that sends its batches to the
    /// home it left; this seat is given up. With no move wanted, `task`
    /// runs here with this seat.
    pub fn move_on<F, Fut>(self, task: F)
    where
        F: FnOnce(Seat) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let target = self.wants.and_then(|m| {
            let handle = self.workers.runtimes.get(m.to)?.handle.clone();
            let mut seat = self.workers.seat(m.to)?;
            seat.runs_at = Some(m.home);
            Some((handle, seat))
        });
        let Some((handle, seat)) = target else {
            tokio::spawn(task(self));
            return;
        };
        drop(self);
        handle.spawn(task(seat));
    }

    /// Runs `job` on runtime `to`, after the batches queued there before
    /// it; here, now, if that runtime is gone.
    pub fn run_at(&self, to: usize, job: Job) {
        match self.workers.jobs.get(to) {
            Some(queue) => {
                if let Err(mpsc::error::SendError(job)) = queue.send(job) {
                    job();
                }
            }
            None => job(),
        }
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
        let jobs = if handles.len() > 1 {
            handles
                .iter()
                .map(|h| {
                    let (tx, rx) = mpsc::unbounded_channel();
                    h.spawn(run_jobs(rx));
                    tx
                })
                .collect()
        } else {
            Vec::new()
        };
        Workers {
            jobs: jobs.into(),
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
            runs_at: None,
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

    /// The runtime other than `home` with the fewest connections (the
    /// first of equals).
    fn least_loaded_but(&self, home: usize) -> Option<usize> {
        (self.runtimes.iter().enumerate())
            .filter(|(at, _)| *at != home)
            .min_by_key(|(_, r)| r.connections.load(Ordering::Relaxed))
            .map(|(at, _)| at)
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

/// Batches [`run_jobs`] runs in one go at most.
const JOBS_IN_A_GO: usize = 64;

/// Runs the batches other workers' connections send this one, in the
/// order they come: those queued when it wakes (each connection has one
/// at most), then it lets the worker look at its sockets before it runs
/// more (`yield_now` waits for tokio's next poll of them). Without that a
/// steady stream of batches from elsewhere keeps the worker from ever
/// running out of tasks, and its own connections, whose sockets tokio
/// polls only then or every so many tasks, got a tenth of the turns of
/// those sending their batches.
async fn run_jobs(mut jobs: mpsc::UnboundedReceiver<Job>) {
    while let Some(job) = jobs.recv().await {
        job();
        for _ in 1..JOBS_IN_A_GO {
            match jobs.try_recv() {
                Ok(job) => job(),
                Err(_) => break,
            }
        }
        tokio::task::yield_now().await;
    }
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
            // Counted on its runtime while it runs; a TLS session's
            // commands run where it is.
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

    /// A pipelining connection that keeps taking one shard over has its
    /// batches run on the shard's home; the first to decide makes its own
    /// runtime the home, and is to move off it.
    #[test]
    fn pipelined_writers_of_a_shard_run_on_its_home() {
        let (_rts, w) = two();
        let mut a = w.seat(0).expect("seat");
        let mut b = w.seat(1).expect("seat");
        assert_eq!((count(&w, 0), count(&w, 1)), (1, 1));
        window(&mut b, 9, 8, 16);
        assert_eq!(b.runs_at(), None, "its own runtime became the home");
        assert_eq!(b.wants_move(), Some(Move { to: 0, home: 1 }));
        window(&mut a, 9, 8, 16);
        assert_eq!(a.runs_at(), Some(1));
        assert_eq!(a.wants_move(), None);
        // Decided for good: later windows do not change it.
        window(&mut a, 20, 1, 16);
        assert_eq!(a.runs_at(), Some(1));
        // A second hot shard gets the runtime home to fewer shards.
        let mut c = w.seat(1).expect("seat");
        window(&mut c, 20, 4, 16);
        assert_eq!(c.runs_at(), Some(0));
        drop((a, b, c));
        assert_eq!((count(&w, 0), count(&w, 1)), (0, 0));
    }

    /// Lone commands (`-P 1`), hand-offs below an eighth of the batches,
    /// or of different shards, run where they are.
    #[test]
    fn others_stay() {
        let (_rts, w) = two();
        w.home_of(3, 1);
        let mut lone = w.seat(0).expect("seat");
        for _ in 0..10 {
            window(&mut lone, 3, 1, 1);
        }
        assert_eq!(lone.runs_at(), None, "lone commands");
        assert_eq!(lone.wants_move(), None, "lone commands");
        let mut rare = w.seat(0).expect("seat");
        window(&mut rare, 3, 11, 16);
        assert_eq!(rare.runs_at(), None, "4 of 32 batches needed, 3 seen");
        let mut spread = w.seat(0).expect("seat");
        for b in 0..WINDOW {
            spread.after_batch(Some(b as usize % SHARD_COUNT), 16);
        }
        assert_eq!(spread.runs_at(), None, "different shards");
        let mut hot = w.seat(0).expect("seat");
        window(&mut hot, 3, 8, 16);
        assert_eq!(hot.runs_at(), Some(1), "the same, hot");
    }

    /// A hot writer on its shard's home moves to the least loaded other
    /// runtime, with a seat there counted there, that sends its batches
    /// back to the home; the old seat is let go.
    #[test]
    fn a_move_takes_a_seat_off_the_home() {
        let (rts, w) = two();
        w.home_of(5, 0);
        let mut seat = w.seat(0).expect("seat");
        window(&mut seat, 5, 1, 16);
        assert_eq!(seat.wants_move(), Some(Move { to: 1, home: 0 }));
        let (tx, rx) = std::sync::mpsc::channel();
        seat.move_on(move |seat| async move {
            let _ = tx.send((seat.at, seat.runs_at(), seat.wants_move()));
            std::future::pending::<()>().await;
        });
        assert_eq!(count(&w, 0), 0, "the old seat is let go");
        assert_eq!(count(&w, 1), 1, "counted where it went");
        rts[1].block_on(async {
            for _ in 0..100 {
                tokio::task::yield_now().await;
            }
        });
        let got = rx.try_recv().expect("the task ran on runtime 1");
        assert_eq!(got, (1, Some(0), None));
    }

    /// Batches sent to a runtime run there, on its thread, in the order
    /// sent; once that runtime is gone, they run at once where they are
    /// sent from.
    #[test]
    fn batches_run_on_the_runtime_they_are_sent_to_in_order() {
        let (mut rts, w) = two();
        let seat = w.seat(0).expect("seat");
        let ran = Arc::new(std::sync::Mutex::new(Vec::new()));
        for n in 0..3 {
            let ran = ran.clone();
            seat.run_at(
                1,
                Box::new(move || {
                    if let Ok(mut r) = ran.lock() {
                        r.push((n, std::thread::current().id()));
                    }
                }),
            );
        }
        let taken =
            |ran: &std::sync::Mutex<Vec<_>>| std::mem::take(&mut *ran.lock().expect("lock"));
        // Runtime 0 running does not run them.
        rts[0].block_on(async {
            for _ in 0..100 {
                tokio::task::yield_now().await;
            }
        });
        assert!(taken(&ran).is_empty(), "ran before runtime 1 did");
        // Runtime 1's thread (a current-thread runtime runs on the one that
        // drives it: another thread here) runs them, in order.
        let rt1 = rts.pop().expect("runtime 1");
        let on = std::thread::spawn(move || {
            rt1.block_on(async {
                for _ in 0..100 {
                    tokio::task::yield_now().await;
                }
            });
            (std::thread::current().id(), rt1)
        });
        let (thread, rt1) = on.join().expect("runtime 1's thread");
        let got = taken(&ran);
        assert_eq!(got, vec![(0, thread), (1, thread), (2, thread)]);
        // Gone: the queue's reader goes with its runtime.
        drop(rt1);
        let ran2 = ran.clone();
        seat.run_at(
            1,
            Box::new(move || {
                if let Ok(mut r) = ran2.lock() {
                    r.push((9, std::thread::current().id()));
                }
            }),
        );
        assert_eq!(taken(&ran), vec![(9, std::thread::current().id())]);
    }
}
