//! Values kept once per thread slot: the counters every request adds to
//! (INFO stats, commandstats, latencystats). A counter shared by every
//! worker has its cache line pass from core to core on each request, and
//! the workers queue for it: a GET makes nine adds to about six such
//! lines (the server's commands, hits, bytes in and out, reads and writes;
//! its command's calls and time; its latency bucket and total). Each thread adds to its own slot's copy,
//! alone on its cache lines; readers (INFO, /metrics, CONFIG RESETSTAT)
//! add up every slot. (On the 2-core machine, whose two cores pass a line
//! in a few nanoseconds, the gain is within the noise; it is for the
//! machines with many workers, README "Counters kept per thread".)
//! Threads take slots in turn as they first add; past [`SLOTS`] threads
//! share them (still correct: the values are atomics).

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Slots: more than the workers of the machines Rostrum runs on, so that
/// each worker has its own; the threads that come and go (blocking tasks)
/// take the ones after them. (A power of two: a slot is masked, not
/// divided, into range.)
pub const SLOTS: usize = 32;
const _: () = assert!(SLOTS.is_power_of_two());

/// Threads that took a slot so far.
static TAKEN: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's slot (`usize::MAX` until it first needs one).
    static SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// This thread's slot, below [`SLOTS`].
#[inline]
pub fn slot() -> usize {
    let s = SLOT.get();
    if s < SLOTS {
        s
    } else {
        take_slot()
    }
}

#[cold]
#[inline(never)]
fn take_slot() -> usize {
    let s = TAKEN.fetch_add(1, Ordering::Relaxed) & (SLOTS - 1);
    SLOT.set(s);
    s
}

/// One copy on cache lines of its own (two: some cores fetch lines in
/// adjacent pairs).
#[repr(align(128))]
#[derive(Debug, Default)]
struct Padded<T>(T);

/// A `T` per slot; a thread works on [`PerThread::local`].
#[derive(Debug)]
pub struct PerThread<T> {
    slots: Box<[Padded<T>; SLOTS]>,
}

impl<T: Default> Default for PerThread<T> {
    fn default() -> Self {
        PerThread {
            slots: Box::new(std::array::from_fn(|_| Padded::default())),
        }
    }
}

impl<T> PerThread<T> {
    /// This thread's copy.
    #[inline]
    pub fn local(&self) -> &T {
        &self.slots[slot() & (SLOTS - 1)].0
    }

    /// Every slot's copy.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().map(|p| &p.0)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;

    use super::*;

    /// Threads add to their own copies; the sum over the slots is every
    /// add, and a thread keeps its slot.
    #[test]
    fn the_slots_sum_to_every_add() {
        let counts: PerThread<AtomicU64> = PerThread::default();
        std::thread::scope(|s| {
            for _ in 0..40 {
                s.spawn(|| {
                    let mine = slot();
                    for _ in 0..1000 {
                        counts.local().fetch_add(1, Ordering::Relaxed);
                    }
                    assert_eq!(slot(), mine);
                });
            }
        });
        let total: u64 = counts.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        assert_eq!(total, 40_000);
        assert_eq!(counts.iter().count(), SLOTS);
    }

    /// Each copy starts on a line of its own.
    #[test]
    fn copies_do_not_share_cache_lines() {
        let counts: PerThread<AtomicU64> = PerThread::default();
        let at: Vec<usize> = counts.iter().map(|c| c as *const _ as usize).collect();
        for w in at.windows(2) {
            assert!(w[1] - w[0] >= 128);
            assert_eq!(w[0] % 128, 0);
        }
    }
}
