//! A pending entries list (PEL) kept in small sorted chunks shared with
//! copy-on-write: a consumer group's pending entries by id, and each
//! consumer's pending ids.
//!
//! A snapshot copies a stream at its capture ([`super::Stream::share`]);
//! with the PEL in one `BTreeMap` that copied every pending entry under the
//! shard lock. Here the copy takes one pointer per chunk of up to
//! [`CHUNK`] entries (as the stream's blocks are shared), and a write to a
//! chunk still shared copies that chunk first ([`Arc::make_mut`]): a few
//! hundred bytes, never the whole list.
//!
//! Chunks are keyed by a lower bound of their ids: a chunk's key is at most
//! its first id and greater than every id of the chunk before it. A
//! removal leaves the key as it is; an id below every key re-keys the
//! first chunk.

use std::collections::btree_map;
use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use super::id::StreamId;

/// Most entries in a chunk: a full one splits in two.
pub const CHUNK: usize = 32;

type Chunk<V> = Arc<Vec<(StreamId, V)>>;

/// Ids mapped to `V`, in id order, in shared chunks.
#[derive(Debug, Clone)]
pub struct PelMap<V> {
    chunks: BTreeMap<StreamId, Chunk<V>>,
    len: usize,
}

impl<V> Default for PelMap<V> {
    fn default() -> Self {
        PelMap {
            chunks: BTreeMap::new(),
            len: 0,
        }
    }
}

impl<V: Clone> PelMap<V> {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The key of the chunk that holds `id` if anyone does: the last key
    /// at or below it.
    fn chunk_key(&self, id: StreamId) -> Option<StreamId> {
        self.chunks.range(..=id).next_back().map(|(k, _)| *k)
    }

    /// The value of `id`.
    pub fn get(&self, id: &StreamId) -> Option<&V> {
        let (_, c) = self.chunks.range(..=*id).next_back()?;
        let i = c.binary_search_by(|(k, _)| k.cmp(id)).ok()?;
        c.get(i).map(|(_, v)| v)
    }

    /// Whether `id` is held.
    pub fn contains_key(&self, id: &StreamId) -> bool {
        self.get(id).is_some()
    }

    /// The value of `id`, for change (its chunk is copied first if a
    /// snapshot shares it).
    pub fn get_mut(&mut self, id: &StreamId) -> Option<&mut V> {
        let (_, c) = self.chunks.range_mut(..=*id).next_back()?;
        let i = c.binary_search_by(|(k, _)| k.cmp(id)).ok()?;
        Arc::make_mut(c).get_mut(i).map(|(_, v)| v)
    }

    /// Sets `id` to `v`; returns the value it replaces.
    pub fn insert(&mut self, id: StreamId, v: V) -> Option<V> {
        let key = match self.chunk_key(id) {
            Some(k) => k,
            None => match self.chunks.pop_first() {
                // Below every key: the first chunk takes it (re-keyed).
                Some((_, c)) => {
                    self.chunks.insert(id, c);
                    id
                }
                None => {
                    self.chunks.insert(id, Arc::new(vec![(id, v)]));
                    self.len += 1;
                    return None;
                }
            },
        };
        let c = self.chunks.get_mut(&key)?;
        let i = match c.binary_search_by(|(k, _)| k.cmp(&id)) {
            Ok(i) => {
                let c = Arc::make_mut(c);
                return c.get_mut(i).map(|slot| std::mem::replace(&mut slot.1, v));
            }
            Err(i) => i,
        };
        self.len += 1;
        if c.len() < CHUNK {
            Arc::make_mut(c).insert(i, (id, v));
            return None;
        }
        // Full. Past its last id (ids delivered in order, the usual case):
        // a new chunk, so chunks filled in order are full; else it splits.
        // A chunk never holds more than CHUNK (its capacity stays CHUNK).
        if i == CHUNK {
            let mut fresh = Vec::with_capacity(CHUNK);
            fresh.push((id, v));
            self.chunks.insert(id, Arc::new(fresh));
            return None;
        }
        let c = Arc::make_mut(c);
        let mut back = Vec::with_capacity(CHUNK);
        back.extend(c.drain(CHUNK / 2..));
        if i <= CHUNK / 2 {
            c.insert(i, (id, v));
        } else {
            back.insert(i - CHUNK / 2, (id, v));
        }
        if let Some((first, _)) = back.first() {
            self.chunks.insert(*first, Arc::new(back));
        }
        None
    }

    /// Removes `id`; returns its value.
    pub fn remove(&mut self, id: &StreamId) -> Option<V> {
        let key = self.chunk_key(*id)?;
        let c = self.chunks.get_mut(&key)?;
        let i = c.binary_search_by(|(k, _)| k.cmp(id)).ok()?;
        let c = Arc::make_mut(c);
        let (_, v) = c.remove(i);
        self.len -= 1;
        if c.is_empty() {
            self.chunks.remove(&key);
        }
        Some(v)
    }

    /// Every entry in id order.
    pub fn iter(&self) -> Range<'_, V> {
        self.range(..)
    }

    /// The entries whose ids are in `r`, in id order.
    pub fn range(&self, r: impl RangeBounds<StreamId>) -> Range<'_, V> {
        let start = r.start_bound().cloned();
        let end = r.end_bound().cloned();
        // The chunk that may hold the first id in range, then the rest.
        let from = match start {
            Bound::Included(s) | Bound::Excluded(s) => self.chunk_key(s),
            Bound::Unbounded => None,
        };
        let chunks = match from {
            Some(k) => self.chunks.range(k..),
            None => self.chunks.range(..),
        };
        Range {
            chunks,
            cur: [].iter(),
            start,
            end,
            done: false,
        }
    }

    /// The lowest id held.
    pub fn first_key(&self) -> Option<StreamId> {
        self.chunks
            .values()
            .next()
            .and_then(|c| c.first())
            .map(|(k, _)| *k)
    }

    /// The highest id held.
    pub fn last_key(&self) -> Option<StreamId> {
        self.chunks
            .values()
            .next_back()
            .and_then(|c| c.last())
            .map(|(k, _)| *k)
    }

    /// Bytes of the chunks this map holds alone (for a snapshot's copy:
    /// the chunks the group copied since the copy was made).
    pub fn unshared_bytes(&self) -> usize {
        self.chunks
            .values()
            .filter(|c| Arc::strong_count(c) == 1)
            .map(|c| c.capacity() * std::mem::size_of::<(StreamId, V)>() + 48)
            .sum()
    }
}

/// Entries of a [`PelMap`] in id order within bounds.
pub struct Range<'a, V> {
    chunks: btree_map::Range<'a, StreamId, Chunk<V>>,
    cur: std::slice::Iter<'a, (StreamId, V)>,
    start: Bound<StreamId>,
    end: Bound<StreamId>,
    done: bool,
}

impl<'a, V> Iterator for Range<'a, V> {
    type Item = (&'a StreamId, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        loop {
            if let Some((k, v)) = self.cur.next() {
                let after_start = match self.start {
                    Bound::Included(s) => *k >= s,
                    Bound::Excluded(s) => *k > s,
                    Bound::Unbounded => true,
                };
                if !after_start {
                    continue;
                }
                let before_end = match self.end {
                    Bound::Included(e) => *k <= e,
                    Bound::Excluded(e) => *k < e,
                    Bound::Unbounded => true,
                };
                if !before_end {
                    // Ends the walk for good.
                    self.done = true;
                    return None;
                }
                return Some((k, v));
            }
            let (_, c) = self.chunks.next()?;
            self.cur = c.iter();
        }
    }
}

/// A set of ids in shared chunks (a consumer's pending ids).
#[derive(Debug, Clone, Default)]
pub struct IdSet(PelMap<()>);

impl IdSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Ids held.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds `id`; returns whether it was absent.
    pub fn insert(&mut self, id: StreamId) -> bool {
        self.0.insert(id, ()).is_none()
    }

    /// Removes `id`; returns whether it was held.
    pub fn remove(&mut self, id: &StreamId) -> bool {
        self.0.remove(id).is_some()
    }

    /// Whether `id` is held.
    pub fn contains(&self, id: &StreamId) -> bool {
        self.0.contains_key(id)
    }

    /// The ids in order.
    pub fn iter(&self) -> impl Iterator<Item = &StreamId> {
        self.0.iter().map(|(k, _)| k)
    }

    /// The ids in `r`, in order.
    pub fn range(&self, r: impl RangeBounds<StreamId>) -> impl Iterator<Item = &StreamId> {
        self.0.range(r).map(|(k, _)| k)
    }

    /// Bytes of the chunks this set holds alone (see
    /// [`PelMap::unshared_bytes`]).
    pub fn unshared_bytes(&self) -> usize {
        self.0.unshared_bytes()
    }
}

impl<'a> IntoIterator for &'a IdSet {
    type Item = &'a StreamId;
    type IntoIter = std::iter::Map<Range<'a, ()>, fn((&'a StreamId, &'a ())) -> &'a StreamId>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, _)| k)
    }
}

impl<'a, V: Clone> IntoIterator for &'a PelMap<V> {
    type Item = (&'a StreamId, &'a V);
    type IntoIter = Range<'a, V>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    fn id(n: u8) -> StreamId {
        StreamId {
            ms: u64::from(n / 16),
            seq: u64::from(n % 16),
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u8, u32),
        Remove(u8),
        Change(u8, u32),
        /// A snapshot's copy taken now: it must keep what it saw.
        Share,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (any::<u8>(), any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
            4 => any::<u8>().prop_map(Op::Remove),
            2 => (any::<u8>(), any::<u32>()).prop_map(|(k, v)| Op::Change(k, v)),
            1 => Just(Op::Share),
        ]
    }

    /// A copy taken by a snapshot and what it held then.
    type Copy = (PelMap<u32>, Vec<(StreamId, u32)>);

    fn all(m: &PelMap<u32>) -> Vec<(StreamId, u32)> {
        m.iter().map(|(k, v)| (*k, *v)).collect()
    }

    proptest! {
        #[test]
        fn matches_a_btreemap_and_copies_keep_their_entries(
            ops in proptest::collection::vec(op(), 1..600),
            lo in any::<u8>(),
            hi in any::<u8>(),
        ) {
            let mut m = PelMap::new();
            let mut model: BTreeMap<StreamId, u32> = BTreeMap::new();
            let mut copies: Vec<Copy> = Vec::new();
            for op in ops {
                match op {
                    Op::Insert(k, v) => prop_assert_eq!(m.insert(id(k), v), model.insert(id(k), v)),
                    Op::Remove(k) => prop_assert_eq!(m.remove(&id(k)), model.remove(&id(k))),
                    Op::Change(k, v) => {
                        match (m.get_mut(&id(k)), model.get_mut(&id(k))) {
                            (Some(a), Some(b)) => {
                                *a = v;
                                *b = v;
                            }
                            (None, None) => {}
                            (a, b) => prop_assert!(false, "{:?} vs {:?}", a, b),
                        }
                    }
                    Op::Share => {
                        let copy = m.clone();
                        let seen = all(&copy);
                        copies.push((copy, seen));
                    }
                }
                prop_assert_eq!(m.len(), model.len());
                prop_assert!(m.chunks.values().all(|c| !c.is_empty() && c.len() <= CHUNK));
            }
            let want: Vec<(StreamId, u32)> = model.iter().map(|(k, v)| (*k, *v)).collect();
            prop_assert_eq!(all(&m), want);
            for k in 0..=255u8 {
                prop_assert_eq!(m.get(&id(k)), model.get(&id(k)));
            }
            prop_assert_eq!(m.first_key(), model.keys().next().copied());
            prop_assert_eq!(m.last_key(), model.keys().next_back().copied());
            let (a, b) = (id(lo.min(hi)), id(lo.max(hi)));
            let got: Vec<_> = m.range(a..=b).map(|(k, v)| (*k, *v)).collect();
            let want: Vec<_> = model.range(a..=b).map(|(k, v)| (*k, *v)).collect();
            prop_assert_eq!(got, want);
            let got: Vec<_> = m.range(a..).map(|(k, v)| (*k, *v)).collect();
            let want: Vec<_> = model.range(a..).map(|(k, v)| (*k, *v)).collect();
            prop_assert_eq!(got, want);
            let got: Vec<_> = m.range((Bound::Excluded(a), Bound::Excluded(b))).map(|(k, _)| *k).collect();
            let want: Vec<_> = model.range((Bound::Excluded(a), Bound::Unbounded)).map(|(k, _)| *k).filter(|k| *k < b).collect();
            prop_assert_eq!(got, want);
            for (copy, seen) in &copies {
                prop_assert_eq!(&all(copy), seen);
            }
        }
    }
}
