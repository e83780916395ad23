//! Time: unix clocks, and the per-connection command clock that reads the
//! time once per command.

use std::time::{SystemTime, UNIX_EPOCH};

/// Unix time in milliseconds.
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Unix time in microseconds.
pub fn unix_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
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
