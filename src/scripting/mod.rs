//! Lua scripting (EVAL and friends) and Redis 7 functions (FUNCTION LOAD,
//! FCALL): one Lua 5.1 VM shared by every connection, behind a mutex.
//!
//! - [`vm`] owns the VM: the sandbox, the script cache, the libraries, and
//!   running a script against a command context (every shard locked by the
//!   dispatcher, so a script is atomic);
//! - [`convert`] turns command replies into Lua values and Lua values into
//!   replies, with Redis's rules for RESP2 and RESP3;
//! - [`library`] parses `#!lua` headers and the FUNCTION DUMP payload;
//! - [`libs`] holds the Lua libraries Redis bundles (bit, struct, cjson,
//!   cmsgpack), written for this server.
//!
//! The command handlers are in `commands::scripting`. This module sits
//! below the command layer: it knows neither the command table nor the
//! server, and `redis.call` reaches the dispatcher through the
//! [`ScriptHost`] the running command hands to [`Vm::eval`] and
//! [`Vm::fcall`].
//!
//! Scripts are atomic, so one VM behind a mutex costs nothing: two scripts
//! never run at once anyway. A running script is visible to the dispatcher
//! through [`Running`], so that other clients get `BUSY` once it has run
//! longer than `busy-reply-threshold` instead of waiting on its locks.

pub mod convert;
pub mod library;
pub mod libs;
pub mod vm;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::error::CmdError;

pub use vm::{ScriptHost, Vm};

/// `BUSY` while an EVAL script runs.
pub const BUSY_EVAL: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
/// `BUSY` while a function runs.
pub const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

/// What the dispatcher and SCRIPT KILL can see of the script running now.
#[derive(Debug)]
pub struct Running {
    base: Instant,
    /// Milliseconds since `base` + 1 when the script started; 0 when idle.
    since_ms: AtomicU64,
    /// SCRIPT KILL / FUNCTION KILL asked the script to stop.
    pub(crate) kill: AtomicBool,
    /// The server is shutting down: stop whatever runs.
    shutdown: AtomicBool,
    /// The script ran a write command (it can no longer be killed).
    pub(crate) wrote: AtomicBool,
    /// The running script is an EVAL (not a function).
    pub(crate) eval: AtomicBool,
    /// A FUNCTION LOAD is running library code (stopped after 500 ms).
    loading: AtomicBool,
    /// Libraries and functions loaded (FUNCTION STATS while a function
    /// holds the VM).
    pub(crate) counts: Mutex<(usize, usize)>,
    /// The running function's name and its FCALL arguments (FUNCTION STATS).
    pub(crate) current: Mutex<Option<(String, Vec<Vec<u8>>)>>,
    /// When (in `now()` terms) the running script last offered its tokio
    /// worker's core to another thread; 0 when it has not.
    offered_ms: AtomicU64,
    /// Signalled when a script ends (commands waiting in
    /// [`wait_not_busy`]).
    ended_lock: Mutex<()>,
    ended: Condvar,
    /// What the VM holds, for INFO (updated after every run and load).
    pub memory: MemoryFigures,
}

/// The scripting engine's memory, as INFO's memory section reports it.
/// Updated by the VM after each script, load and flush, so INFO reads it
/// without taking the VM (which a running script holds).
#[derive(Debug, Default)]
pub struct MemoryFigures {
    /// Bytes the Lua VM holds (INFO `used_memory_lua`): its heap, as its
    /// allocator counts it.
    pub vm_bytes: AtomicU64,
    /// Bytes of the cached EVAL scripts' bodies and names
    /// (`used_memory_scripts_eval`).
    pub scripts_bytes: AtomicU64,
    /// Scripts in the EVAL cache (`number_of_cached_scripts`).
    pub scripts: AtomicU64,
    /// Bytes of the loaded libraries' code and function names
    /// (`used_memory_functions`).
    pub functions_bytes: AtomicU64,
}

/// How long FUNCTION LOAD may run a library's code.
pub const LOAD_TIMEOUT: Duration = Duration::from_millis(500);

/// A script running this long hands its tokio worker's core to another
/// thread (see [`Running::offer_core_if_long`]).
const OFFER_CORE_AFTER: Duration = Duration::from_millis(2);
/// How often a long script offers the core again if the first hand-off
/// did not take.
const OFFER_CORE_EVERY: Duration = Duration::from_millis(10);

impl Running {
    fn new() -> Self {
        Running {
            base: Instant::now(),
            since_ms: AtomicU64::new(0),
            kill: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            wrote: AtomicBool::new(false),
            eval: AtomicBool::new(false),
            loading: AtomicBool::new(false),
            counts: Mutex::new((0, 0)),
            current: Mutex::new(None),
            offered_ms: AtomicU64::new(0),
            ended_lock: Mutex::new(()),
            ended: Condvar::new(),
            memory: MemoryFigures::default(),
        }
    }

    fn now(&self) -> u64 {
        self.base.elapsed().as_millis() as u64 + 1
    }

    /// How long the running script has run; `None` when none runs.
    pub fn elapsed_ms(&self) -> Option<u64> {
        match self.since_ms.load(Ordering::Acquire) {
            0 => None,
            t => Some(self.now().saturating_sub(t)),
        }
    }

    /// Marks the start of a script (or of a library's load).
    fn start(&self, eval: bool, loading: bool) {
        self.kill.store(false, Ordering::Release);
        self.wrote.store(false, Ordering::Release);
        self.eval.store(eval, Ordering::Release);
        self.loading.store(loading, Ordering::Release);
        self.offered_ms.store(0, Ordering::Release);
        self.since_ms.store(self.now(), Ordering::Release);
    }

    /// Marks the end of the running script and wakes the commands waiting
    /// for it.
    fn stop(&self) {
        self.since_ms.store(0, Ordering::Release);
        self.loading.store(false, Ordering::Release);
        *self.current.lock() = None;
        // Taken so that a waiter between its check and its wait cannot
        // miss the signal (it checks `since_ms` under this lock).
        let _g = self.ended_lock.lock();
        self.ended.notify_all();
    }

    /// Called by the VM's hook while a script runs: once the script has run
    /// [`OFFER_CORE_AFTER`], and again every [`OFFER_CORE_EVERY`] until
    /// it ends, offers its tokio worker's core (its queued connections and
    /// the I/O driver) to a fresh thread, so that the other connections
    /// keep being served (and get their BUSY replies, SCRIPT KILL among
    /// them) while this thread runs the script. A short script never pays
    /// for the hand-off.
    fn offer_core_if_long(&self) {
        let Some(elapsed) = self.elapsed_ms() else {
            return;
        };
        if elapsed < OFFER_CORE_AFTER.as_millis() as u64 {
            return;
        }
        let now = self.now();
        let last = self.offered_ms.load(Ordering::Acquire);
        if last != 0 && now.saturating_sub(last) < OFFER_CORE_EVERY.as_millis() as u64 {
            return;
        }
        self.offered_ms.store(now, Ordering::Release);
        if let Ok(h) = tokio::runtime::Handle::try_current() {
            if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread {
                // block_in_place hands the core to a fresh thread, and takes
                // it back when the closure returns if that thread has not
                // started yet; the short sleep lets it start. Once the core
                // is gone, later calls just run the closure.
                tokio::task::block_in_place(|| std::thread::sleep(Duration::from_micros(200)));
            }
        }
    }

    /// Whether the script must stop now (the VM's hook asks every few
    /// thousand instructions).
    fn must_abort(&self) -> bool {
        if self.kill.load(Ordering::Acquire) || self.shutdown.load(Ordering::Acquire) {
            return true;
        }
        self.loading.load(Ordering::Acquire)
            && self
                .elapsed_ms()
                .is_some_and(|ms| ms > LOAD_TIMEOUT.as_millis() as u64)
    }

    /// Whether the running script was killed (SCRIPT KILL or shutdown).
    pub fn killed(&self) -> bool {
        self.kill.load(Ordering::Acquire) || self.shutdown.load(Ordering::Acquire)
    }
}

/// The scripting state of a server (`Server::scripting`).
pub struct Scripting {
    vm: Mutex<Option<Vm>>,
    /// The running script, for BUSY and SCRIPT KILL.
    pub running: Arc<Running>,
}

impl Default for Scripting {
    fn default() -> Self {
        Self::new()
    }
}

impl Scripting {
    /// No VM yet: it is created on first use.
    pub fn new() -> Self {
        Scripting {
            vm: Mutex::new(None),
            running: Arc::new(Running::new()),
        }
    }

    /// The VM, created on first use; `is_command` tells
    /// `redis.acl_check_cmd` which commands exist.
    pub fn vm(&self, is_command: IsCommand) -> Result<MutexGuard<'_, Option<Vm>>, CmdError> {
        let mut g = self.vm.lock();
        if g.is_none() {
            *g = Some(Vm::new(self.running.clone(), is_command)?);
        }
        Ok(g)
    }

    /// The VM for a command that does not hold the shards (SCRIPT LOAD,
    /// FUNCTION LIST, ...): waits while a script runs, and gives up with
    /// `BUSY` once it has run past `threshold_ms` (`busy-reply-threshold`).
    pub fn vm_waiting(
        &self,
        threshold_ms: u64,
        is_command: IsCommand,
    ) -> Result<MutexGuard<'_, Option<Vm>>, CmdError> {
        loop {
            if let Some(mut g) = self.vm.try_lock_for(Duration::from_millis(2)) {
                if g.is_none() {
                    *g = Some(Vm::new(self.running.clone(), is_command)?);
                }
                return Ok(g);
            }
            if let Some(e) = self.busy_error(threshold_ms) {
                return Err(e);
            }
        }
    }

    /// Whether a script runs now.
    pub fn busy(&self) -> bool {
        self.running.elapsed_ms().is_some()
    }

    /// The `BUSY` error other clients get when a script has run longer than
    /// `threshold_ms` (`busy-reply-threshold`), `None` otherwise.
    pub fn busy_error(&self, threshold_ms: u64) -> Option<CmdError> {
        let running = &self.running;
        let elapsed = running.elapsed_ms()?;
        if elapsed < threshold_ms {
            return None;
        }
        Some(CmdError::line(if running.eval.load(Ordering::Acquire) {
            BUSY_EVAL
        } else {
            BUSY_FUNCTION
        }))
    }

    /// Waits for the running script to end, and gives up with `BUSY` once
    /// it has run past `threshold_ms`. The wait blocks this thread as Redis
    /// blocks its event loop: scripts are short, and a long one hands its
    /// own core to another thread (`Running::offer_core_if_long`), so
    /// connections keep being read and get their BUSY once the threshold
    /// has passed.
    pub fn wait_not_busy(&self, threshold_ms: u64) -> Result<(), CmdError> {
        let running = &self.running;
        let mut g = running.ended_lock.lock();
        loop {
            let Some(elapsed) = running.elapsed_ms() else {
                return Ok(());
            };
            if elapsed >= threshold_ms {
                drop(g);
                return self.busy_error(threshold_ms).map_or(Ok(()), Err);
            }
            // Woken when the script ends; the timeout is the threshold.
            running
                .ended
                .wait_for(&mut g, Duration::from_millis(threshold_ms - elapsed));
        }
    }

    /// SHUTDOWN: stops a running script.
    pub fn abort(&self) {
        self.running.shutdown.store(true, Ordering::Release);
    }

    /// The code of every library, for the AOF rewrite (FUNCTION LOAD each).
    pub fn library_codes(&self) -> Vec<Vec<u8>> {
        match self.vm.lock().as_ref() {
            Some(vm) => vm.library_codes(),
            None => Vec::new(),
        }
    }
}

/// Hands the pages the allocator keeps for reuse back to the system: after
/// a script that ran out of `lua-maxmemory`, the hundreds of megabytes it
/// took would otherwise stay resident until jemalloc's decay (10 s) or
/// for good. Setting an arena's dirty and muzzy decay time to 0 purges it
/// at once; the previous times are then put back.
pub fn return_free_memory() {
    use tikv_jemalloc_ctl::{arenas, Access, AsName};
    let Ok(n) = arenas::narenas::read() else {
        return;
    };
    for i in 0..n {
        for kind in ["dirty", "muzzy"] {
            let name = format!("arena.{i}.{kind}_decay_ms\0");
            let ctl = name.as_bytes().name();
            let Ok(old) = Access::<isize>::read(ctl) else {
                continue;
            };
            let _ = ctl.write(0isize);
            let _ = ctl.write(old);
        }
    }
}

/// Tells whether arguments name a command of the table (with its
/// subcommand): how `redis.acl_check_cmd` sees the table it cannot import.
pub type IsCommand = fn(&[&[u8]]) -> bool;

/// The SHA1 of `body` in lower-case hex (script names, redis.sha1hex).
pub fn sha1_hex(body: &[u8]) -> String {
    sha1_smol::Sha1::from(body).digest().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha1_of_scripts() {
        assert_eq!(sha1_hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(
            sha1_hex(b"return 1"),
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"
        );
    }
}
