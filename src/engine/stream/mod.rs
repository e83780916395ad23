//! Streams: an append-only log of entries keyed by [`StreamId`], stored in
//! compact [`block::Block`]s held in a sorted map by base id, with consumer
//! groups ([`Group`]) whose pending entries list is indexed by id and per
//! consumer. No RESP here: the commands (`commands::stream`) parse ids
//! with Redis's rules and write the replies.

pub mod block;
mod group;
pub mod id;
pub mod pel;

#[cfg(test)]
mod model_tests;

use std::collections::BTreeMap;
use std::sync::Arc;

use block::Block;
pub use block::EntryRef;
pub use group::{Consumer, Group, Pending};
pub use id::StreamId;
use smallvec::SmallVec;

/// How XADD / XTRIM trim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trim {
    /// Keep at most this many entries.
    MaxLen(u64),
    /// Drop entries below this id.
    MinId(StreamId),
}

/// A stream value.
#[derive(Debug, Clone, Default)]
pub struct Stream {
    /// Shared with a snapshot's capture while one reads them: a write
    /// copies a shared block first ([`Arc::make_mut`]).
    blocks: BTreeMap<StreamId, Arc<Block>>,
    len: u64,
    /// The last id generated (XADD's floor; XSETID moves it).
    pub last_id: StreamId,
    /// The largest id XDEL removed (`max-deleted-entry-id`).
    pub max_deleted_id: StreamId,
    /// Entries ever added (`entries-added`).
    pub entries_added: u64,
    /// Consumer groups by name (sorted, as XINFO GROUPS lists them).
    pub groups: BTreeMap<Vec<u8>, Group>,
}

impl Stream {
    /// An empty stream.
    pub fn new() -> Self {
        Stream::default()
    }

    /// Entries in the stream.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it holds no entries (an empty stream is still a key).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Blocks in use (XINFO's `radix-tree-keys`).
    pub fn block_count(&self) -> usize {
        self.blocks.len()
    }

    /// Appends an entry with `id`, which the caller checked is above
    /// [`Stream::last_id`]; `fields` interleaves names and values.
    pub fn append(&mut self, id: StreamId, fields: &[&[u8]]) {
        match self.blocks.iter_mut().next_back() {
            Some((base, b)) if !b.is_full() => Arc::make_mut(b).push(*base, id, fields),
            last => {
                if let Some((_, b)) = last {
                    Arc::make_mut(b).seal();
                }
                self.blocks.insert(id, Arc::new(Block::new(id, id, fields)));
            }
        }
        self.len += 1;
        self.last_id = id;
        self.entries_added += 1;
    }

    /// Calls `f` with each entry's id and fields between `start` and `end`
    /// (inclusive), in id order or reversed, until it returns false.
    pub fn for_each_in(
        &self,
        start: StreamId,
        end: StreamId,
        rev: bool,
        mut f: impl FnMut(StreamId, &[&[u8]]) -> bool,
    ) {
        self.for_each_entry(start, end, rev, |e| f(e.id, &e.fields));
    }

    /// Calls `f` with each entry between `start` and `end` (inclusive), in
    /// id order or reversed, until it returns false.
    pub fn for_each_entry<'s>(
        &'s self,
        start: StreamId,
        end: StreamId,
        rev: bool,
        mut f: impl FnMut(EntryRef<'s>) -> bool,
    ) {
        if start > end {
            return;
        }
        // The block holding `start` has the greatest base not above it.
        let from = self
            .blocks
            .range(..=start)
            .next_back()
            .map_or(start, |(k, _)| *k);
        let blocks = self.blocks.range(from..=end);
        if rev {
            for (base, b) in blocks.rev() {
                // Entries decode forwards only: the block's are taken
                // first, then given back to front.
                let mut entries: SmallVec<[EntryRef<'s>; 16]> = b
                    .iter(*base)
                    .take_while(|e| e.id <= end)
                    .filter(|e| e.id >= start)
                    .collect();
                while let Some(e) = entries.pop() {
                    if !f(e) {
                        return;
                    }
                }
            }
        } else {
            for (base, b) in blocks {
                for e in b.iter(*base) {
                    if e.id < start {
                        continue;
                    }
                    if e.id > end || !f(e) {
                        return;
                    }
                }
            }
        }
    }

    /// Up to `count` entries between `start` and `end`, borrowed.
    pub fn range_refs(
        &self,
        start: StreamId,
        end: StreamId,
        rev: bool,
        count: Option<usize>,
    ) -> Vec<EntryRef<'_>> {
        let mut out = Vec::new();
        if count == Some(0) {
            return out;
        }
        if let Some(c) = count {
            out.reserve(c.min(128));
        }
        self.for_each_entry(start, end, rev, |e| {
            out.push(e);
            count.is_none_or(|c| out.len() < c)
        });
        out
    }

    /// Up to `count` entries between `start` and `end` (owned copies).
    pub fn range(
        &self,
        start: StreamId,
        end: StreamId,
        rev: bool,
        count: Option<usize>,
    ) -> Vec<(StreamId, Vec<Vec<u8>>)> {
        self.range_refs(start, end, rev, count)
            .into_iter()
            .map(|e| (e.id, e.fields.iter().map(|f| f.to_vec()).collect()))
            .collect()
    }

    /// Calls `f` with each of `ids` (ascending) and its fields, or None
    /// where the stream has no such entry. A block is decoded once for
    /// all the ids in it, from its start to the last of them (a group's
    /// pending entries are mostly neighbours).
    pub fn for_each_of<'s>(
        &'s self,
        ids: &[StreamId],
        mut f: impl FnMut(StreamId, Option<&EntryRef<'s>>),
    ) {
        let mut cur: Option<(StreamId, std::iter::Peekable<block::Iter<'s>>)> = None;
        for &id in ids {
            let Some((&base, b)) = self.blocks.range(..=id).next_back() else {
                f(id, None);
                continue;
            };
            let reuse = match cur.as_mut() {
                Some((cb, it)) => *cb == base && it.peek().is_none_or(|e| e.id <= id),
                None => false,
            };
            if !reuse {
                cur = Some((base, b.iter(base).peekable()));
            }
            let Some((_, it)) = cur.as_mut() else {
                continue;
            };
            while it.next_if(|e| e.id < id).is_some() {}
            match it.peek() {
                Some(e) if e.id == id => f(id, Some(e)),
                _ => f(id, None),
            }
        }
    }

    /// The fields of the entry with `id`.
    pub fn get(&self, id: StreamId) -> Option<Vec<Vec<u8>>> {
        let mut out = None;
        self.for_each_of(&[id], |_, e| {
            out = e.map(|e| e.fields.iter().map(|f| f.to_vec()).collect());
        });
        out
    }

    /// Whether an entry with `id` exists.
    pub fn contains(&self, id: StreamId) -> bool {
        let mut found = false;
        self.for_each_of(&[id], |_, e| found = e.is_some());
        found
    }

    /// The first entry's id (0-0 when empty: `recorded-first-entry-id`).
    pub fn first_id(&self) -> StreamId {
        self.blocks
            .iter()
            .find_map(|(base, b)| b.iter(*base).next())
            .map_or(StreamId::MIN, |e| e.id)
    }

    /// The last entry's id (0-0 when empty).
    pub fn last_entry_id(&self) -> StreamId {
        self.blocks
            .iter()
            .rev()
            .find_map(|(base, b)| b.last_id(*base))
            .unwrap_or(StreamId::MIN)
    }

    /// Deletes the entry with `id` (XDEL); returns whether it existed.
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some((&base, b)) = self.blocks.range_mut(..=id).next_back() else {
            return false;
        };
        if !Arc::make_mut(b).remove(base, id) {
            return false;
        }
        if b.count() == 0 {
            self.blocks.remove(&base);
        }
        self.len -= 1;
        if id > self.max_deleted_id {
            self.max_deleted_id = id;
        }
        true
    }

    /// Trims from the oldest end (XADD's and XTRIM's MAXLEN / MINID).
    /// `approx` removes whole blocks only; `limit` (0: none) bounds the
    /// entries removed, counted by whole blocks as Redis does. Returns the
    /// number of entries removed.
    pub fn trim(&mut self, how: Trim, approx: bool, limit: u64) -> u64 {
        let mut deleted = 0u64;
        loop {
            if let Trim::MaxLen(max) = how {
                if self.len <= max {
                    break;
                }
            }
            let Some((&base, b)) = self.blocks.iter_mut().next() else {
                break;
            };
            let n = u64::from(b.count());
            if limit != 0 && deleted + n > limit {
                break;
            }
            let whole = match how {
                Trim::MaxLen(max) => self.len - n >= max,
                Trim::MinId(min) => b.last_id(base).is_none_or(|l| l < min),
            };
            if whole {
                self.blocks.remove(&base);
                self.len -= n;
                deleted += n;
                continue;
            }
            if approx {
                break;
            }
            let k = match how {
                Trim::MaxLen(max) => (self.len - max) as usize,
                Trim::MinId(min) => b.entries(base).iter().take_while(|e| e.id < min).count(),
            };
            Arc::make_mut(b).remove_first(base, k);
            self.len -= k as u64;
            deleted += k as u64;
            break;
        }
        deleted
    }

    /// Whether an entry between `start` and `end` may have been deleted
    /// (Redis's `streamRangeHasTombstones`): the group counters can only
    /// be trusted when not.
    pub fn range_has_tombstones(&self, start: StreamId, end: StreamId) -> bool {
        if self.len == 0 || self.max_deleted_id.is_zero() {
            return false;
        }
        if self.first_id() > self.max_deleted_id {
            return false;
        }
        start <= self.max_deleted_id && self.max_deleted_id <= end
    }

    /// How many entries were added up to `id` when that can be known
    /// (Redis's `streamEstimateDistanceFromFirstEverEntry`).
    pub fn entries_read_at(&self, id: StreamId) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.len == 0 && id <= self.last_id {
            return Some(self.entries_added);
        }
        if id == self.last_id {
            return Some(self.entries_added);
        } else if id > self.last_id {
            return None;
        }
        let first = self.first_id();
        if self.max_deleted_id.is_zero() || self.max_deleted_id < first {
            if id < first {
                return Some(self.entries_added - self.len);
            } else if id == first {
                return Some(self.entries_added - self.len + 1);
            }
        }
        None
    }

    /// A group's lag (XINFO): entries not yet delivered to it, when known.
    /// Negative when ENTRIESREAD / XSETID set counters past each other, as
    /// Redis reports it.
    pub fn lag(&self, g: &Group) -> Option<i64> {
        let added = self.entries_added as i64;
        if self.entries_added == 0 {
            return Some(0);
        }
        if let Some(read) = g.entries_read {
            if !self.range_has_tombstones(g.last_id, StreamId::MAX) {
                return Some(added.wrapping_sub(read as i64));
            }
        }
        self.entries_read_at(g.last_id)
            .map(|read| added.wrapping_sub(read as i64))
    }

    /// Moves a group's last-delivered id to `id` on delivering it, keeping
    /// its entries-read counter as Redis does.
    pub fn deliver_to(&self, g: &mut Group, id: StreamId) {
        if id <= g.last_id {
            return;
        }
        match g.entries_read {
            Some(n) if !self.range_has_tombstones(id, StreamId::MAX) => {
                g.entries_read = Some(n + 1)
            }
            _ if self.entries_added > 0 => g.entries_read = self.entries_read_at(id),
            _ => {}
        }
        g.last_id = id;
    }

    /// A deep copy (COPY).
    pub fn duplicate(&self) -> Stream {
        self.clone()
    }

    /// A point-in-time copy for a snapshot: the blocks and the groups'
    /// pending entries lists shared (O(blocks + PEL chunks + consumers);
    /// see `engine::cow` and [`pel`]).
    pub fn share(&self) -> Stream {
        self.clone()
    }

    /// Bytes of the blocks only this value holds (for a snapshot's copy:
    /// what the stream copied or let go of since the copy was made).
    pub fn unshared_bytes(&self) -> usize {
        let blocks: usize = self
            .blocks
            .values()
            .filter(|b| Arc::strong_count(b) == 1)
            .map(|b| b.capacity() + 48)
            .sum();
        blocks
            + self
                .groups
                .values()
                .map(Group::unshared_bytes)
                .sum::<usize>()
    }

    /// Approximate bytes used (MEMORY USAGE).
    pub fn memory_usage(&self) -> usize {
        let blocks: usize = self.blocks.values().map(|b| b.capacity() + 48).sum();
        let groups: usize = self
            .groups
            .iter()
            .map(|(n, g)| n.len() + g.memory_usage())
            .sum();
        std::mem::size_of::<Stream>() + blocks + groups
    }
}
