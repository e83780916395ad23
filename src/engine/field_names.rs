//! Field names shared by every `listpack` hash of the process: a name
//! written often (`name`, `country`, `created` in a million profiles) is
//! stored once here and as a one-byte id in each hash, instead of once per
//! hash (and the values of such pairs that are integers are kept in
//! binary): the 10-field profiles of `benches/key_memory.sh` take 96-byte
//! buffers instead of 160-byte ones this way.
//!
//! The dictionary only grows: a name, once in, keeps its id for the life of
//! the process, so a stored id never goes stale and a hash never needs
//! rewriting. It holds at most [`MAX_NAMES`] names of 2 to
//! [`MAX_NAME_LEN`] bytes (a few KiB at most). A name gets in after it has
//! been offered about [`ADMIT_AFTER`] times (counted in a small sketch whose
//! counters halve as offers go by), so the names a workload repeats get the
//! ids, not the first ones it happens to write; names that come once (user
//! ids as fields) get in only when they share a counter with busier ones.
//! When the dictionary is full, new names are stored in their hashes as
//! before. Which names got in changes only memory, never a reply.
//!
//! Lookups are lock-free reads of a fixed table of `OnceLock`s (the id is
//! the slot), so HGET reads a name without a lock or a shared write; only a
//! name not yet in writes (its sketch counter).

use std::cell::Cell;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::OnceLock;

use ahash::RandomState;

/// Slots of the table; an id is a slot index, so it fits a byte.
const SLOTS: usize = 256;
/// Most names the dictionary takes (three quarters of the slots, so that a
/// probe is short).
pub const MAX_NAMES: usize = 192;
/// Longest name taken (a `listpack` field is at most
/// `hash-max-listpack-value` bytes, 64 by default).
pub const MAX_NAME_LEN: usize = 64;
/// Offers of a name (as counted by the sketch) before it gets in.
pub const ADMIT_AFTER: u8 = 16;
/// Counters of the sketch.
const SKETCH: usize = 4096;
/// Offers a thread counts before it halves every counter of the sketch.
const DECAY_EVERY: u32 = 1 << 16;

static NAMES: [OnceLock<Box<[u8]>>; SLOTS] = [const { OnceLock::new() }; SLOTS];
static COUNT: AtomicUsize = AtomicUsize::new(0);
static SEEN: [AtomicU8; SKETCH] = [const { AtomicU8::new(0) }; SKETCH];

thread_local! {
    static OFFERS: Cell<u32> = const { Cell::new(0) };
}

fn hash_of(name: &[u8]) -> u64 {
    static STATE: OnceLock<RandomState> = OnceLock::new();
    STATE.get_or_init(RandomState::new).hash_one(name)
}

/// The name of `id`, if an id was given to one.
#[inline]
pub fn name(id: u8) -> Option<&'static [u8]> {
    NAMES.get(id as usize)?.get().map(|b| &b[..])
}

/// The id of `name`, if it has one.
pub fn lookup(name: &[u8]) -> Option<u8> {
    if !(2..=MAX_NAME_LEN).contains(&name.len()) {
        return None;
    }
    match probe(name, hash_of(name)) {
        Probe::Found(id) => Some(id),
        Probe::Vacant(_) | Probe::Full => None,
    }
}

/// The id of `name` for a pair about to be written: its id if it has one,
/// else one given now if the name has been offered often enough and there
/// is room, else `None` (the name is then stored in the hash).
pub fn offer(name: &[u8]) -> Option<u8> {
    if !(2..=MAX_NAME_LEN).contains(&name.len()) {
        return None;
    }
    let h = hash_of(name);
    match probe(name, h) {
        Probe::Found(id) => return Some(id),
        Probe::Full => return None,
        Probe::Vacant(_) => {}
    }
    if COUNT.load(Ordering::Relaxed) >= MAX_NAMES {
        return None;
    }
    // Lossy counting (a load and a store, no read-modify-write): a lost
    // increment only delays a name.
    let counter = &SEEN[((h >> 32) as usize) % SKETCH];
    let seen = counter.load(Ordering::Relaxed);
    if seen < ADMIT_AFTER {
        counter.store(seen + 1, Ordering::Relaxed);
        decay();
        return None;
    }
    // The name will not count here again: start the counter over, or the
    // next name that lands on it would get in on its first offer.
    counter.store(0, Ordering::Relaxed);
    insert(name, h)
}

/// Counts an offer of this thread; every [`DECAY_EVERY`] of them halves the
/// sketch, so counts reflect recent offers.
fn decay() {
    let n = OFFERS.with(|c| {
        let n = c.get().wrapping_add(1);
        c.set(n);
        n
    });
    if n.is_multiple_of(DECAY_EVERY) {
        for c in &SEEN {
            c.store(c.load(Ordering::Relaxed) / 2, Ordering::Relaxed);
        }
    }
}

enum Probe {
    /// The name's id.
    Found(u8),
    /// Not in; the first empty slot of its probe sequence.
    Vacant(usize),
    /// Not in, and no empty slot (cannot happen below [`MAX_NAMES`]).
    Full,
}

fn probe(name: &[u8], h: u64) -> Probe {
    let start = h as usize % SLOTS;
    for step in 0..SLOTS {
        let slot = (start + step) % SLOTS;
        match NAMES[slot].get() {
            None => return Probe::Vacant(slot),
            Some(n) if &n[..] == name => return Probe::Found(slot as u8),
            Some(_) => {}
        }
    }
    Probe::Full
}

/// Puts `name` in the first empty slot of its probe sequence (`h` is its
/// hash). Slots only ever go from empty to set, and every thread probes a
/// name's slots in the same order, so a name is only ever put in the first
/// empty slot after every slot that could hold it: when two threads race
/// for that slot, the loser probes again and finds the winner's name there
/// (same name: it takes that id) or goes on past it. A name never gets two
/// ids. Each lost race fills a slot, so this ends within [`SLOTS`] rounds.
fn insert(name: &[u8], h: u64) -> Option<u8> {
    for _ in 0..SLOTS {
        match probe(name, h) {
            Probe::Found(id) => return Some(id),
            Probe::Full => return None,
            Probe::Vacant(slot) => {
                if NAMES[slot].set(name.into()).is_ok() {
                    COUNT.fetch_add(1, Ordering::Relaxed);
                    return Some(slot as u8);
                }
            }
        }
    }
    None
}

/// Offers `name` until it gets an id, as a workload writing it often would
/// (for tests elsewhere).
#[cfg(test)]
pub fn admit(name: &[u8]) -> Option<u8> {
    (0..1000).find_map(|_| offer(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_offered_often_gets_one_id_for_good() {
        let name = b"field_names::test::often";
        assert_eq!(lookup(name), None);
        let id = admit(name).expect("admitted");
        assert_eq!(lookup(name), Some(id));
        assert_eq!(self::name(id), Some(&name[..]));
        assert_eq!(offer(name), Some(id));
    }

    #[test]
    fn names_out_of_range_never_get_in() {
        assert_eq!(admit(b"x"), None);
        assert_eq!(admit(&[b'y'; MAX_NAME_LEN + 1]), None);
    }

    #[test]
    fn threads_racing_for_names_agree_on_their_ids() {
        let names: Vec<Vec<u8>> = (0..8)
            .map(|i| format!("field_names::test::race{i}").into_bytes())
            .collect();
        let ids: Vec<Vec<Option<u8>>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| s.spawn(|| names.iter().map(|n| admit(n)).collect::<Vec<_>>()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for per_thread in &ids[1..] {
            assert_eq!(per_thread, &ids[0]);
        }
        for (n, id) in names.iter().zip(&ids[0]) {
            let id = id.expect("admitted");
            assert_eq!(name(id), Some(&n[..]));
        }
    }
}
