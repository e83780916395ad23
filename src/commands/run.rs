//! Runs of pipelined calls handled together. A client that pipelines
//! ZRANKs (or ZSCOREs, ZADDs, ...) of one board has them handled in one
//! go, so the engine can overlap their cache misses: reads are answered
//! together (`ZSet::ranks`), writes are read ahead (`ZSet::prepare_scores`)
//! and then run one at a time. Replies, command statistics, keyspace hits,
//! errors and the AOF are those of running the calls one at a time;
//! anything that could make them differ (a transaction, replies switched
//! off, a call that is refused) runs them one at a time instead. Writes
//! applied in one go (LPUSH, RPOP, LB.SUBMIT, ...: [`RunHandler::Apply`])
//! are so only while nothing observes their single changes: no keyspace
//! events, no blocked client, no client-side caching, no AOF, no memory
//! limit; a handler may apply the first calls of a run and leave the rest
//! (from one that would fail) to run one at a time.

use std::sync::atomic::Ordering;
use std::time::Instant;

use smallvec::SmallVec;

use super::table::{flags, Command, RunHandler};
use super::{
    account_with, admit, execute_cached, execute_resolved, invoke, resolve, run_admitted, LockCache,
};
use crate::engine::keyspace::MAX_PREFETCH;
use crate::protocol::{request, Reply};
use crate::state::client::{ClientState, ReplyMode};
use crate::state::journal;
use crate::state::notify::{self, Class};
use crate::state::{Ctx, Server};

/// Most calls handled together: enough to overlap the misses of a rank
/// walk (16 walks run about twice as fast as one at a time, 32 no faster).
const MAX_RUN: usize = 16;

/// Pipelined calls of one command with a [`RunHandler`], all on one key
/// and in the command's shortest form, waiting to run. Their arguments are
/// copied (a few bytes each), so the read buffer can move on meanwhile.
#[derive(Default)]
pub struct PipelineRun {
    cmd: Option<&'static Command>,
    /// The first call's name and key, then every call's other arguments.
    bytes: Vec<u8>,
    /// Where each of those ends in `bytes`.
    ends: SmallVec<[usize; 2 * MAX_RUN + 2]>,
    /// Number of calls held (their arguments after the key may be none).
    calls: usize,
}

impl PipelineRun {
    /// An empty run.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the run holds as many calls as are handled together.
    pub fn is_full(&self) -> bool {
        self.len() >= MAX_RUN
    }

    /// Arguments after the key in each call (all in the command's
    /// shortest form); 0 when the run is empty.
    fn per_call(&self) -> usize {
        self.cmd.map_or(0, |c| {
            (c.spec.arity.unsigned_abs() as usize).saturating_sub(2)
        })
    }

    /// Number of calls held.
    fn len(&self) -> usize {
        self.calls
    }

    /// Adds the call `args` of `cmd` if it can join the run: a command
    /// with a run handler, in its shortest form, and, when calls are
    /// already held, the same command on the same key. Otherwise returns
    /// false and the caller runs the held calls ([`execute_run`]) and then
    /// this one.
    fn push(&mut self, cmd: &'static Command, args: &[&[u8]]) -> bool {
        let [name, key, rest @ ..] = args else {
            return false;
        };
        if cmd.spec.batch.is_none() || cmd.spec.arity.unsigned_abs() as usize != args.len() {
            return false;
        }
        match self.cmd {
            None => {
                self.cmd = Some(cmd);
                self.add(name);
                self.add(key);
            }
            Some(held) => {
                // The name as written too: the calls are rebuilt from the
                // first one's (for the slow log).
                if self.is_full()
                    || !std::ptr::eq(held, cmd)
                    || *name != self.part(0)
                    || *key != self.part(1)
                {
                    return false;
                }
            }
        }
        for a in rest {
            self.add(a);
        }
        self.calls += 1;
        true
    }

    fn add(&mut self, arg: &[u8]) {
        self.bytes.extend_from_slice(arg);
        self.ends.push(self.bytes.len());
    }

    /// Part `i` of `bytes` (0: name, 1: key, then the calls' arguments).
    fn part(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    /// The arguments after the key of every call, back to back.
    fn rest(&self) -> SmallVec<[&[u8]; 2 * MAX_RUN]> {
        // (Each part from the end of the one before: `part` without its
        // first-part case.)
        self.ends
            .windows(2)
            .skip(1)
            .map(|w| &self.bytes[w[0]..w[1]])
            .collect()
    }

    /// The arguments of call `i`.
    fn call(&self, i: usize) -> SmallVec<[&[u8]; 4]> {
        let per = self.per_call();
        let mut args = SmallVec::new();
        args.push(self.part(0));
        args.push(self.part(1));
        args.extend((0..per).map(|j| self.part(2 + i * per + j)));
        args
    }

    fn clear(&mut self) {
        self.cmd = None;
        self.calls = 0;
        self.bytes.clear();
        self.ends.clear();
    }
}

/// Runs a pipelined command: adds it to `run` if it can join (running the
/// run once it is full), else runs the calls waiting in `run`, then it.
/// `more` says whether more input follows it already (else it runs at
/// once when no run is waiting: a run of one call gains nothing).
/// Call [`execute_run`] when the pipeline ends.
pub fn execute_pipelined<'s>(
    server: &'s Server,
    client: &mut ClientState,
    out: &mut Reply,
    args: &[&[u8]],
    more: bool,
    run: &mut PipelineRun,
    cache: &mut LockCache<'s>,
) {
    let resolved = resolve(args);
    if let Ok(cmd) = resolved {
        // While clients are blocked, writes run one at a time: each may
        // wake some, who take their turn before the next command.
        let alone =
            || cmd.spec.has(flags::WRITE) && server.blocked_clients.load(Ordering::Relaxed) > 0;
        if (more || run.len() > 0) && !alone() && run.push(cmd, args) {
            if run.is_full() {
                execute_run(server, client, out, run, cache);
            }
            return;
        }
    }
    execute_run(server, client, out, run, cache);
    execute_resolved(server, client, out, args, resolved, cache);
}

/// Runs the calls held in `run` and empties it: through the command's run
/// handler when nothing stands in the way, else one at a time through
/// [`execute_cached`].
pub fn execute_run<'s>(
    server: &'s Server,
    client: &mut ClientState,
    out: &mut Reply,
    run: &mut PipelineRun,
    cache: &mut LockCache<'s>,
) {
    run_calls(server, client, out, run, cache);
    run.clear();
}

/// [`execute_run`] but for emptying the run.
fn run_calls<'s>(
    server: &'s Server,
    client: &mut ClientState,
    out: &mut Reply,
    run: &PipelineRun,
    cache: &mut LockCache<'s>,
) {
    let (Some(cmd), n) = (run.cmd, run.len()) else {
        return;
    };
    let handler = cmd
        .spec
        .batch
        .filter(|_| n > 1 && client.multi.is_none() && matches!(client.reply_mode, ReplyMode::On))
        // A batched read would not raise its keymiss events.
        .filter(|_| !notify::enabled(server.notify_flags.load(Ordering::Relaxed), Class::KEY_MISS))
        // The AOF logs each call; a memory limit is checked before each.
        .filter(|h| {
            !matches!(h, RunHandler::Apply(_))
                || (!journal::feeding(&server.aof) && server.memory.maxmemory() == 0)
        });
    let first = run.call(0);
    // The calls still to run one at a time after the handler.
    let mut next = 0;
    if let Some(handler) = handler {
        next = 1;
        if let Some(adm) = admit(server, client, out, &first, Ok(cmd), cache) {
            let (key, rest) = (first[1], run.rest());
            run_admitted(server, client, out, &first, cache, adm, |ctx, start| {
                match handler {
                    RunHandler::Answer(answer) => {
                        if answer(ctx, key, &rest) {
                            next = n;
                            let end = Instant::now();
                            let ns = end.saturating_duration_since(start).as_nanos() as u64;
                            for i in 0..n {
                                account_with(ctx, cmd, || run.call(i), ns / n as u64, false);
                            }
                            return end;
                        }
                    }
                    RunHandler::Apply(apply) => {
                        let done = if unobserved(ctx) {
                            apply(ctx, key, n, &rest).min(n)
                        } else {
                            0
                        };
                        if done > 0 {
                            // The calls it left run one at a time below.
                            next = done;
                            let end = Instant::now();
                            let ns = end.saturating_duration_since(start).as_nanos() as u64;
                            for i in 0..done {
                                account_with(ctx, cmd, || run.call(i), ns / done as u64, false);
                            }
                            return end;
                        }
                    }
                    RunHandler::Prepare(prepare) => prepare(ctx, key, &rest),
                }
                invoke(ctx, cmd, &first, start)
            });
        }
    }
    for i in next..n {
        execute_cached(server, client, out, &run.call(i), cache);
    }
}

/// Whether nothing observes a write's single changes, with the locks held
/// (a client blocking on the key registers under them): no keyspace events
/// (a client's own would go ahead of its reply), no blocked client to wake
/// after each change, no key noted for client-side caching.
fn unobserved(ctx: &Ctx<'_, '_>) -> bool {
    ctx.keys.notify_flags == 0 && !ctx.keys.track_ready && ctx.keys.tracked.is_none()
}

/// Reads ahead the keys of the complete commands at the start of `buf`
/// (the one about to run and those pipelined behind it, up to
/// [`MAX_PREFETCH`]), in the client's database, when there are two or more
/// (`Keyspace::prefetch`): a pipeline of calls on different keys then
/// waits for their cache misses together instead of one after another.
/// Only a hint (the first key of most commands; any second argument is
/// taken for one): nothing changes. Returns how many commands the caller
/// runs before reading ahead again: those it covered, or, when they all
/// name one key (a pipeline on one board, whose misses there is nothing
/// to overlap with), [`ONE_KEY_BACKOFF`] times as many, so that such a
/// pipeline pays for looking ahead only now and then.
pub fn read_ahead(server: &Server, client: &ClientState, buf: &[u8]) -> usize {
    let mut keys = SmallVec::new();
    let n = request::peek_keys(buf, MAX_PREFETCH, &mut keys);
    if n < 2 {
        return n;
    }
    if keys.iter().all(|k| *k == keys[0]) {
        return n * ONE_KEY_BACKOFF;
    }
    server.keyspace.prefetch(client.db, &keys);
    n
}

/// How many windows of commands on one key [`read_ahead`] lets pass before
/// looking ahead again.
const ONE_KEY_BACKOFF: usize = 4;

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::state::client::ClientInfo;
    use crate::state::config::Config;

    fn resp(calls: &[&[&str]]) -> Vec<u8> {
        let mut out = Vec::new();
        for args in calls {
            out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
            for a in *args {
                out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
            }
        }
        out
    }

    /// `read_ahead` covers the complete commands in the buffer (at most
    /// MAX_PREFETCH), lets a run on one key pass for longer, and changes
    /// nothing in the keyspace.
    #[test]
    fn read_ahead_counts_the_commands_it_covers() {
        let server = Server::new(Config::default(), None);
        let info = Arc::new(ClientInfo::new(1, "test".into(), "test".into(), 0));
        let client = ClientState::new(info, true);
        let many: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
        let calls: Vec<[&str; 2]> = many.iter().map(|k| ["GET", k.as_str()]).collect();
        let calls: Vec<&[&str]> = calls.iter().map(|c| &c[..]).collect();
        assert_eq!(read_ahead(&server, &client, &resp(&calls)), MAX_PREFETCH);
        assert_eq!(read_ahead(&server, &client, &resp(&calls[..3])), 3);
        assert_eq!(read_ahead(&server, &client, &resp(&calls[..1])), 1);
        let mut buf = resp(&calls[..2]);
        buf.extend_from_slice(b"*2\r\n$3\r\nGET");
        assert_eq!(read_ahead(&server, &client, &buf), 2);
        assert_eq!(read_ahead(&server, &client, b"GET k1\r\n"), 0);
        let one: Vec<&[&str]> = vec![&["ZADD", "board", "1", "m"]; 5];
        assert_eq!(
            read_ahead(&server, &client, &resp(&one)),
            5 * ONE_KEY_BACKOFF
        );
        assert_eq!(server.keyspace.db_sizes()[0], (0, 0));
    }
}
