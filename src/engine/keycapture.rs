//! A snapshot's capture of the keys of one database part ([`Db`]) in
//! steps, so that no shard of many small keys is written out under its
//! lock in one go. Big values are walked by their own logs (`cow`); this
//! walk only decides *which entries* belong to the snapshot point and
//! hands each one, once, to a [`KeySink`] (the snapshot's encoder).
//!
//! The walk goes through the [`KeyTable`]'s slots in index order, a few
//! hundred a step, with the shard lock let go between steps. It relies on
//! the table keeping every entry in its slot from insertion to removal
//! (hashbrown moves entries only when it grows or is cleared):
//! - before a write changes or removes an entry whose slot the walk has
//!   not reached, the entry is handed to the sink as it is (it has not
//!   changed since the snapshot point: this is its first write) and its
//!   slot is marked to be skipped;
//! - a key added in a slot the walk has not reached marks that slot to be
//!   skipped (it was free at the snapshot point, or its entry of then was
//!   handed on when it was removed);
//! - the walk hands on every entry of a slot it reaches that is not marked;
//! - the table is frozen while the walk runs ([`KeyTable::freeze`]): a key
//!   added when its part is full (the part would grow, moving every
//!   entry to another slot) goes into a small spill table numbered after
//!   the walk's slots, which lookups, removals and iteration see too; the
//!   walk never reads it (every key there was added after the snapshot
//!   point); the first insertion after the walk ends moves the spilled
//!   keys into the table (growing it then, as it would have grown);
//! - a FLUSHDB / FLUSHALL or the part being dropped first walks the rest
//!   of the table in one go. SWAPDB moves the capture with the table.
//!
//! So the sink gets each key of the snapshot point exactly once, as it was
//! then, and no key added after it (a proptest against a model checks it:
//! `walk_plus_writes_is_the_part_at_the_start` in `keyspace`).
//!
//! [`Db`]: super::keyspace::Db

use hashbrown::HashSet;

use super::keyspace::Entry;
use super::keytable::KeyTable;

/// Where a capture hands the entries of its snapshot point.
pub trait KeySink: Send + Sync {
    /// Takes `key` and its entry as they were at the snapshot point (once
    /// per key of then: when the walk reaches it, or before a write
    /// changes or removes it). The entry is lent for change only so that a
    /// big value may start its own capture; the sink must not change what
    /// the key holds.
    fn capture(&mut self, key: &[u8], entry: &mut Entry);

    /// A step (or the capture) is over: hand on what was taken so far.
    fn flush(&mut self);

    /// The capture's own bookkeeping (its set of slots to skip) now holds
    /// `bytes` of memory: INFO's `current_cow_size` counts it. Called when
    /// the figure changes, and with 0 when the capture ends.
    fn held(&mut self, _bytes: usize) {}
}

/// Slots a step may read for each entry it may hand on (a step over a
/// sparse table still ends in bounded time).
const SLOTS_PER_ENTRY: usize = 8;

/// The walk over one part's table and the slots it must skip.
pub struct KeyCapture {
    /// Which snapshot this is (a step asked for by another one finds none).
    id: u64,
    /// Slots in the table when the walk began: the table is frozen
    /// ([`KeyTable::freeze`]) while it walks, so they keep their keys;
    /// slots numbered from here on are its spill table's.
    slots: usize,
    /// The next slot the walk reads; every slot before it is done.
    cursor: usize,
    /// Slots at or after the cursor whose entry is not the snapshot
    /// point's: handed on before a write, or filled by a key added since.
    skip: HashSet<usize, ahash::RandomState>,
    /// The memory of `skip` last told to the sink ([`KeySink::held`]).
    told: usize,
    sink: Box<dyn KeySink>,
}

impl Drop for KeyCapture {
    fn drop(&mut self) {
        if self.told != 0 {
            self.sink.held(0);
        }
    }
}

impl std::fmt::Debug for KeyCapture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyCapture")
            .field("id", &self.id)
            .field("slots", &self.slots)
            .field("cursor", &self.cursor)
            .field("skip", &self.skip.len())
            .finish()
    }
}

impl KeyCapture {
    /// A walk of snapshot `id` over `map`, which has read nothing.
    pub(super) fn new(id: u64, map: &KeyTable, sink: Box<dyn KeySink>) -> KeyCapture {
        KeyCapture {
            id,
            slots: map.slots(),
            cursor: 0,
            skip: HashSet::default(),
            told: 0,
            sink,
        }
    }

    /// Which snapshot this walk is for.
    pub(super) fn id(&self) -> u64 {
        self.id
    }

    /// Marks slot `i` to be skipped; tells the sink when the set's memory
    /// grows (it never shrinks before the capture ends).
    fn skip(&mut self, i: usize) -> bool {
        let new = self.skip.insert(i);
        let bytes = self.skip.allocation_size();
        if bytes != self.told {
            self.told = bytes;
            self.sink.held(bytes);
        }
        new
    }

    /// Hands on the entry in slot `i` unless the walk is past it or has
    /// handed it on (or skips it) already.
    fn take_slot(&mut self, map: &mut KeyTable, i: usize) {
        // Slots past the walk's are the spill table's: keys added since.
        if i >= self.cursor && i < self.slots && self.skip(i) {
            if let Some((k, e)) = map.slot_mut(i) {
                self.sink.capture(k, e);
            }
        }
    }

    /// Called before `key`'s entry, if any, is changed or removed.
    #[inline]
    pub(super) fn before_write(&mut self, map: &mut KeyTable, key: &[u8]) {
        if let Some((i, _)) = map.slot_of(key) {
            self.take_slot(map, i);
        }
    }

    /// Called after `key` was added to `map` (it was absent): the walk
    /// must not hand it on.
    pub(super) fn after_insert(&mut self, map: &KeyTable, key: &[u8]) {
        if let Some((i, _)) = map.slot_of(key) {
            if i >= self.cursor && i < self.slots {
                self.skip(i);
            }
        }
    }

    /// One step: hands on up to `budget` entries from the cursor. True
    /// when the walk is over.
    pub(super) fn step(&mut self, map: &mut KeyTable, budget: usize) -> bool {
        let end = self.slots.min(map.slots());
        let mut taken = 0usize;
        let mut read = 0usize;
        let most_read = budget.saturating_mul(SLOTS_PER_ENTRY);
        while self.cursor < end && taken < budget && read < most_read {
            let i = self.cursor;
            self.cursor += 1;
            read += 1;
            if self.skip.remove(&i) {
                continue;
            }
            if let Some((k, e)) = map.slot_mut(i) {
                self.sink.capture(k, e);
                taken += 1;
            }
        }
        self.sink.flush();
        self.cursor >= end
    }

    /// Walks the rest of the table now (it is about to move or go).
    pub(super) fn finish(&mut self, map: &mut KeyTable) {
        self.step(map, usize::MAX);
    }
}
