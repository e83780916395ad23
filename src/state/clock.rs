//! Time: unix clocks, and the per-connection command clock that reads the
//! time once per command.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// `debug-clock-offset-ms`: added to the wall clock everywhere the server
/// reads it (the test clock: a test moves the server's time across a
/// boundary instead of waiting for it).
static OFFSET_MS: AtomicI64 = AtomicI64::new(0);

/// Sets the test clock's offset (see [`OFFSET_MS`]).
pub fn set_offset_ms(ms: i64) {
    OFFSET_MS.store(ms, Ordering::Relaxed);
}

fn shifted(us: u64, per_ms: i64) -> u64 {
    let off = OFFSET_MS.load(Ordering::Relaxed).saturating_mul(per_ms);
    (us as i64).saturating_add(off).max(0) as u64
}

/// Unix time in milliseconds.
pub fn unix_ms() -> u64 {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    shifted(ms, 1)
}

/// Unix time in microseconds.
pub fn unix_us() -> u64 {
    let us = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0);
    shifted(us, 1000)
}

/// A connection's command clock. Reading the time costs as much as a small
/// command, so one reading serves as the end of a command and the start of
/// the next; the wall clock is read once per batch of pipelined commands.
#[derive(Debug, Clone, Copy)]
pub struct CommandClock {
    base: std::time::Instant,
    base_unix_ms: u64,
    /// When the previous command ended (the next one's start).
    pub last: std::time::Instant,
}

impl CommandClock {
    /// A clock read now.
    pub fn new() -> Self {
        let now = std::time::Instant::now();
        CommandClock {
            base: now,
            base_unix_ms: unix_ms(),
            last: now,
        }
    }

    /// Reads both clocks again (before a batch, after waiting).
    pub fn reset(&mut self) {
        *self = CommandClock::new();
    }

    /// Unix milliseconds at `at` (an instant after the last reset).
    pub fn unix_ms_at(&self, at: std::time::Instant) -> u64 {
        self.base_unix_ms + at.saturating_duration_since(self.base).as_millis() as u64
    }
}

impl Default for CommandClock {
    fn default() -> Self {
        Self::new()
    }
}
