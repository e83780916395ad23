//! Each key's access clock: 32 bits in its [`Entry`](super::Entry) that
//! say when it was last used (LRU policies, OBJECT IDLETIME) or how often
//! (LFU policies, OBJECT FREQ), as the 24 bits of Redis's `robj.lru` do.
//!
//! - LRU: the unix time of the last access in seconds (wraps after 136
//!   years, where Redis's 24-bit clock wraps after 194 days).
//! - LFU: the unix time of the last decrement in minutes (16 bits, as
//!   Redis) above an 8-bit logarithmic counter: an access increments it
//!   with probability `1 / ((counter - 5) * lfu-log-factor + 1)`, and every
//!   `lfu-decay-time` minutes without access take one off it.
//!
//! Which of the two the clock holds is process-wide ([`set_mode`]): the
//! keyspace reads it at every access, and a change of policy reinterprets
//! the old clocks, which then take some time to adjust (as in Redis).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// A new key's LFU counter (Redis's LFU_INIT_VAL): a key read once is not
/// evicted before keys never read.
pub const LFU_INIT_VAL: u32 = 5;

/// 0: LRU; otherwise LFU with `lfu-log-factor` in bits 0..32 and
/// `lfu-decay-time` in bits 32..63, bit 63 set.
static MODE: AtomicU64 = AtomicU64::new(0);

const LFU_BIT: u64 = 1 << 63;

/// How the access clocks count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Last access time.
    Lru,
    /// Logarithmic access counter.
    Lfu {
        /// `lfu-log-factor`.
        log_factor: u32,
        /// `lfu-decay-time`, minutes (0: never decays).
        decay_minutes: u32,
    },
}

/// Sets how every key's access clock counts from now on.
pub fn set_mode(mode: Mode) {
    let bits = match mode {
        Mode::Lru => 0,
        Mode::Lfu {
            log_factor,
            decay_minutes,
        } => LFU_BIT | (decay_minutes as u64 & 0x7fff_ffff) << 32 | log_factor as u64,
    };
    MODE.store(bits, Ordering::Relaxed);
}

/// How the access clocks count now.
pub fn mode() -> Mode {
    let bits = MODE.load(Ordering::Relaxed);
    if bits & LFU_BIT == 0 {
        Mode::Lru
    } else {
        Mode::Lfu {
            log_factor: bits as u32,
            decay_minutes: ((bits >> 32) & 0x7fff_ffff) as u32,
        }
    }
}

fn minutes(now_ms: u64) -> u32 {
    ((now_ms / 60_000) & 0xffff) as u32
}

/// A new key's clock at `now_ms`.
pub fn initial(now_ms: u64) -> u32 {
    match mode() {
        Mode::Lru => (now_ms / 1000) as u32,
        Mode::Lfu { .. } => minutes(now_ms) << 8 | LFU_INIT_VAL,
    }
}

/// The counter of an LFU clock, less one per `decay_minutes` elapsed since
/// its last decrement (Redis's LFUDecrAndReturn).
pub fn lfu_decayed(clock: u32, now_ms: u64, decay_minutes: u32) -> u32 {
    let counter = clock & 0xff;
    if decay_minutes == 0 {
        return counter;
    }
    let last = clock >> 8 & 0xffff;
    let now = minutes(now_ms);
    // The 16-bit minute clock wraps every 45 days.
    let elapsed = if now >= last {
        now - last
    } else {
        0x10000 - last + now
    };
    counter.saturating_sub(elapsed / decay_minutes)
}

/// The frequency OBJECT FREQ reports: the decayed counter.
pub fn frequency(clock: &AtomicU32, now_ms: u64) -> u32 {
    let decay = match mode() {
        Mode::Lfu { decay_minutes, .. } => decay_minutes,
        Mode::Lru => 1,
    };
    lfu_decayed(clock.load(Ordering::Relaxed), now_ms, decay)
}

/// Seconds since the last access of an LRU clock.
pub fn idle_secs(clock: &AtomicU32, now_ms: u64) -> u64 {
    let now = (now_ms / 1000) as u32;
    now.wrapping_sub(clock.load(Ordering::Relaxed)) as u64
}

thread_local! {
    /// Set while a command that must not touch runs on this thread.
    static NO_TOUCH: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// While alive, accesses on this thread leave the clocks alone: what a
/// command of a client in CLIENT NO-TOUCH mode runs under (the dispatcher
/// holds one for the command's whole run, which stays on one thread).
#[must_use]
pub struct NoTouch {
    prev: bool,
}

impl NoTouch {
    /// Stops (`on`) or allows accesses touching the clocks until dropped.
    pub fn new(on: bool) -> NoTouch {
        NoTouch {
            prev: NO_TOUCH.with(|t| t.replace(on)),
        }
    }
}

impl Drop for NoTouch {
    fn drop(&mut self) {
        let prev = self.prev;
        NO_TOUCH.with(|t| t.set(prev));
    }
}

/// Records an access at `now_ms`: the time (LRU) or a probabilistic
/// increment of the decayed counter (LFU); nothing under a [`NoTouch`].
#[inline]
pub fn touch(clock: &AtomicU32, now_ms: u64) {
    if NO_TOUCH.with(|t| t.get()) {
        return;
    }
    match mode() {
        Mode::Lru => clock.store((now_ms / 1000) as u32, Ordering::Relaxed),
        Mode::Lfu {
            log_factor,
            decay_minutes,
        } => {
            let old = clock.load(Ordering::Relaxed);
            let counter = log_incr(lfu_decayed(old, now_ms, decay_minutes), log_factor);
            clock.store(minutes(now_ms) << 8 | counter, Ordering::Relaxed);
        }
    }
}

/// Redis's LFULogIncr: the higher the counter, the less likely a step up.
fn log_incr(counter: u32, log_factor: u32) -> u32 {
    if counter >= 255 {
        return 255;
    }
    let base = counter.saturating_sub(LFU_INIT_VAL) as f64;
    let p = 1.0 / (base * log_factor as f64 + 1.0);
    if unit_random() < p {
        counter + 1
    } else {
        counter
    }
}

/// A cheap uniform number in [0, 1) (xorshift, one state per thread).
fn unit_random() -> f64 {
    (random_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// A cheap random number (xorshift64*, one state per thread, seeded from
/// the thread's address space).
pub fn random_u64() -> u64 {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            let seed = &STATE as *const _ as u64;
            (seed ^ 0x9E37_79B9_7F4A_7C15).max(1)
        });
    }
    STATE.with(|s| {
        let mut x = s.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        s.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lfu_counter_grows_logarithmically_and_decays() {
        // Redis's table for lfu-log-factor 10: ~10 at 100 hits, ~18 at
        // 1,000, ~142 at 100,000 (each the counter from 5).
        let mut c = LFU_INIT_VAL;
        for _ in 0..1000 {
            c = log_incr(c, 10);
        }
        assert!((12..=30).contains(&c), "{c}");
        let mut c0 = LFU_INIT_VAL;
        for _ in 0..1000 {
            c0 = log_incr(c0, 0);
        }
        assert_eq!(c0, 255);
        // 3 minutes idle with a 1-minute decay take 3 off.
        let clock = minutes(60_000) << 8 | 20;
        assert_eq!(lfu_decayed(clock, 4 * 60_000, 1), 17);
        assert_eq!(lfu_decayed(clock, 4 * 60_000, 2), 19);
        assert_eq!(lfu_decayed(clock, 4 * 60_000, 0), 20);
        assert_eq!(lfu_decayed(clock, 1000 * 60_000, 1), 0);
    }

    #[test]
    fn no_touch_leaves_the_clock() {
        let clock = AtomicU32::new(7);
        {
            let _g = NoTouch::new(true);
            touch(&clock, 3_600_000);
            assert_eq!(clock.load(Ordering::Relaxed), 7);
        }
        touch(&clock, 3_600_000);
        assert_ne!(clock.load(Ordering::Relaxed), 7);
    }

    #[test]
    fn random_is_spread() {
        let n = 10_000;
        let below = (0..n).filter(|_| unit_random() < 0.25).count();
        assert!((2000..3000).contains(&below), "{below}");
    }
}
