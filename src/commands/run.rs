//! Runs of pipelined reads answered together. A client that pipelines
//! ZRANKs (or ZREVRANKs) of one board has them answered in one go, so the
//! engine can overlap their cache misses (`ZSet::ranks`). Replies, command
//! statistics, keyspace hits and errors are those of running the calls one
//! at a time; anything that could make them differ (a transaction, replies
//! switched off, a call that is refused) runs them one at a time instead.

use std::time::Instant;

use smallvec::SmallVec;

use super::table::{table, Command, Lookup};
use super::{account, admit, execute_cached, invoke, run_admitted, LockCache};
use crate::protocol::Reply;
use crate::server::client::{ClientState, ReplyMode};
use crate::server::state::Server;

/// Most calls answered together: enough to overlap the misses of a rank
/// walk (16 walks run about twice as fast as one at a time, 32 no faster).
const MAX_RUN: usize = 16;

/// Pipelined calls `NAME key member` of one command with a batch handler,
/// all on one key, waiting to run. Their arguments are copied (a few bytes
/// each), so the read buffer can move on meanwhile.
#[derive(Default)]
pub struct PipelineRun {
    cmd: Option<&'static Command>,
    /// The first call's name and key, then every call's member.
    bytes: Vec<u8>,
    /// Where each of those ends in `bytes`.
    ends: SmallVec<[usize; MAX_RUN + 2]>,
}

impl PipelineRun {
    /// An empty run.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether no call waits.
    pub fn is_empty(&self) -> bool {
        self.cmd.is_none()
    }

    /// Whether the run holds as many calls as are answered together.
    pub fn is_full(&self) -> bool {
        self.len() >= MAX_RUN
    }

    /// Number of calls held.
    fn len(&self) -> usize {
        self.ends.len().saturating_sub(2)
    }

    /// Adds the call `args` if it can join the run: a command with a batch
    /// handler, called as `NAME key member`, and, when calls are already
    /// held, the same command on the same key. Otherwise returns false and
    /// the caller runs the held calls ([`execute_run`]) and then this one.
    pub fn push(&mut self, args: &[&[u8]]) -> bool {
        let [name, key, member] = args else {
            return false;
        };
        match self.cmd {
            None => {
                let Lookup::Found(cmd) = table().lookup(args) else {
                    return false;
                };
                if cmd.spec.batch.is_none() || !cmd.spec.arity_ok(3) {
                    return false;
                }
                self.cmd = Some(cmd);
                self.add(name);
                self.add(key);
            }
            Some(_) => {
                if self.is_full()
                    || !name.eq_ignore_ascii_case(self.part(0))
                    || *key != self.part(1)
                {
                    return false;
                }
            }
        }
        self.add(member);
        true
    }

    fn add(&mut self, arg: &[u8]) {
        self.bytes.extend_from_slice(arg);
        self.ends.push(self.bytes.len());
    }

    /// Part `i` of `bytes` (0: name, 1: key, 2..: members).
    fn part(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    /// The arguments of call `i`.
    fn call(&self, i: usize) -> [&[u8]; 3] {
        [self.part(0), self.part(1), self.part(2 + i)]
    }

    fn clear(&mut self) {
        self.cmd = None;
        self.bytes.clear();
        self.ends.clear();
    }
}

/// Runs a pipelined command: adds it to `run` if it can join (running the
/// run once it is full), else runs the calls waiting in `run`, then it.
/// Call [`execute_run`] when the pipeline ends.
pub fn execute_pipelined<'s>(
    server: &'s Server,
    client: &mut ClientState,
    out: &mut Reply,
    args: &[&[u8]],
    run: &mut PipelineRun,
    cache: &mut LockCache<'s>,
) {
    if run.push(args) {
        if run.is_full() {
            execute_run(server, client, out, run, cache);
        }
    } else {
        execute_run(server, client, out, run, cache);
        execute_cached(server, client, out, args, cache);
    }
}

/// Runs the calls held in `run` and empties it: together through the
/// command's batch handler when nothing stands in the way, else one at a
/// time through [`execute_cached`].
pub fn execute_run<'s>(
    server: &'s Server,
    client: &mut ClientState,
    out: &mut Reply,
    run: &mut PipelineRun,
    cache: &mut LockCache<'s>,
) {
    let (Some(cmd), n) = (run.cmd, run.len()) else {
        return;
    };
    let batch = cmd
        .spec
        .batch
        .filter(|_| n > 1 && client.multi.is_none() && matches!(client.reply_mode, ReplyMode::On));
    let first = run.call(0);
    let admitted = match batch {
        Some(_) => admit(server, client, out, &first, cache),
        None => None,
    };
    match (batch, admitted) {
        (Some(batch), Some(adm)) => {
            let members: SmallVec<[&[u8]; MAX_RUN]> = (0..n).map(|i| run.part(2 + i)).collect();
            run_admitted(server, client, out, &first, cache, adm, |ctx, start| {
                if batch(ctx, first[1], &members) {
                    let end = Instant::now();
                    let us = end.saturating_duration_since(start).as_micros() as u64 / n as u64;
                    for i in 0..n {
                        account(ctx, cmd, &run.call(i), us, false);
                    }
                    end
                } else {
                    (0..n).fold(start, |t, i| invoke(ctx, cmd, &run.call(i), t))
                }
            });
        }
        // The first call was refused (and answered): the others in turn.
        (Some(_), None) => {
            for i in 1..n {
                execute_cached(server, client, out, &run.call(i), cache);
            }
        }
        (None, _) => {
            for i in 0..n {
                execute_cached(server, client, out, &run.call(i), cache);
            }
        }
    }
    run.clear();
}
