//! The skiplist's member index: member hash → node index, in one array of
//! `u32` slots (open addressing, linear probing).
//!
//! A slot holds a node index in its low `idx_bits` bits and, above them, the
//! top bits of the member's hash as a tag. A lookup reads the slots of one
//! probe run (16 to a cache line) and loads a node only when the tag matches,
//! so finding a member costs two cache misses (slot, node) where a table with
//! separate control bytes costs three. The tag shrinks as the node indexes
//! need more bits: 8 bits for a million-member set, none past 2^29 slots
//! (still correct, every probe then compares the node).
//!
//! Removal leaves a tombstone (the slot's neighbours cannot be moved without
//! hashing their members again); tombstones count towards the load and are
//! cleared whenever the table is rebuilt.

/// An unused slot; ends every probe run.
const EMPTY: u32 = u32::MAX;
/// A removed entry; probes step over it, inserts reuse it.
const TOMB: u32 = u32::MAX - 1;
/// Fewest bits a node index gets (the rest of the slot is tag).
const MIN_IDX_BITS: u32 = 16;

/// Member hash → node index.
#[derive(Debug, Clone)]
pub(crate) struct MemberIndex {
    /// Power-of-two length (or empty).
    slots: Vec<u32>,
    len: usize,
    tombs: usize,
    /// Bits of a slot holding the node index; the tag takes the rest.
    idx_bits: u32,
}

/// Slots needed so that `n` entries stay within the load limit (7/8).
fn slots_for(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        (n.saturating_mul(8) / 7 + 1).next_power_of_two().max(8)
    }
}

/// Index bits for a table of `slots` (room for node indexes up to about
/// eight times its capacity: the node arena holds freed slots too, up to
/// four times the live members before it is compacted).
fn idx_bits_for(slots: usize) -> u32 {
    (slots.max(1).trailing_zeros() + 3).clamp(MIN_IDX_BITS, 32)
}

impl MemberIndex {
    /// An index with room for `n` members before it grows.
    pub fn with_capacity(n: usize) -> MemberIndex {
        let cap = slots_for(n);
        MemberIndex {
            slots: vec![EMPTY; cap],
            len: 0,
            tombs: 0,
            idx_bits: idx_bits_for(cap),
        }
    }

    /// Number of entries.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Bytes allocated for the slots.
    pub fn allocation_size(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<u32>()
    }

    /// Mask of the node index bits of a slot.
    #[inline]
    fn idx_mask(&self) -> u32 {
        ((1u64 << self.idx_bits) - 1) as u32
    }

    /// The tag bits of hash `h`, in place (the index bits zero).
    #[inline]
    fn tag(&self, h: u64) -> u32 {
        ((h >> 32) as u32) & !self.idx_mask()
    }

    /// The node whose entry has hash `h` and for which `eq` holds.
    #[inline]
    pub fn find(&self, h: u64, mut eq: impl FnMut(u32) -> bool) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let (idx_mask, tag) = (self.idx_mask(), self.tag(h));
        let mut i = h as usize & mask;
        loop {
            let s = self.slots[i];
            if s == EMPTY {
                return None;
            }
            if s != TOMB && s & !idx_mask == tag && eq(s & idx_mask) {
                return Some(s & idx_mask);
            }
            i = (i + 1) & mask;
        }
    }

    /// The node named by the first slot of hash `h`'s probe run when its
    /// tag matches (most likely the entry [`MemberIndex::find`] returns),
    /// else None: a guess to load ahead of the find.
    #[inline]
    pub fn first_candidate(&self, h: u64) -> Option<u32> {
        let mask = self.slots.len().checked_sub(1)?;
        let s = self.slots[h as usize & mask];
        let idx_mask = self.idx_mask();
        (s != EMPTY && s != TOMB && s & !idx_mask == self.tag(h)).then_some(s & idx_mask)
    }

    /// Removes node `x`'s entry, whose hash is `h`; false when absent.
    pub fn remove(&mut self, h: u64, x: u32) -> bool {
        if self.slots.is_empty() {
            return false;
        }
        let mask = self.slots.len() - 1;
        let idx_mask = self.idx_mask();
        let mut i = h as usize & mask;
        loop {
            let s = self.slots[i];
            if s == EMPTY {
                return false;
            }
            if s != TOMB && s & idx_mask == x {
                // A slot followed by an empty one ends no other probe run.
                if self.slots[(i + 1) & mask] == EMPTY {
                    self.slots[i] = EMPTY;
                } else {
                    self.slots[i] = TOMB;
                    self.tombs += 1;
                }
                self.len -= 1;
                return true;
            }
            i = (i + 1) & mask;
        }
    }

    /// Adds node `x` with hash `h`; it must not be in the index. `hash_of`
    /// gives the hash of any node already in it (for rebuilding).
    pub fn insert_unique(&mut self, h: u64, x: u32, hash_of: impl Fn(u32) -> u64) {
        let cap = self.slots.len();
        if (self.len + self.tombs + 1) * 8 > cap * 7 {
            // Full of tombstones: drop them in place. Full of live entries
            // (more than half the load limit): double. Either way at least
            // cap * 7/16 inserts come before the next rebuild.
            let grown = if (self.len + 1) * 16 <= cap * 7 {
                cap
            } else {
                slots_for(self.len + 1).max(cap * 2)
            };
            self.rebuild(grown, self.idx_bits.max(idx_bits_for(grown)), &hash_of);
        }
        if x >= self.idx_mask().saturating_sub(1) {
            // Node indexes below u32::MAX - 2 fit once the tag is gone (the
            // node arena would need over 100 GB before that matters).
            let bits = (u64::from(x) + 3).next_power_of_two().trailing_zeros();
            self.rebuild(self.slots.len(), bits, &hash_of);
        }
        self.place(h, x);
        self.len += 1;
    }

    /// Puts `x` in the first free slot of `h`'s probe run.
    fn place(&mut self, h: u64, x: u32) {
        let mask = self.slots.len() - 1;
        let entry = self.tag(h) | x;
        let mut i = h as usize & mask;
        loop {
            match self.slots[i] {
                EMPTY => break,
                TOMB => {
                    self.tombs -= 1;
                    break;
                }
                _ => i = (i + 1) & mask,
            }
        }
        self.slots[i] = entry;
    }

    /// Re-places every entry into `cap` slots with `idx_bits` index bits.
    fn rebuild(&mut self, cap: usize, idx_bits: u32, hash_of: &impl Fn(u32) -> u64) {
        let old = std::mem::replace(&mut self.slots, vec![EMPTY; cap]);
        let old_mask = self.idx_mask();
        self.idx_bits = idx_bits.min(32);
        self.tombs = 0;
        for s in old {
            if s != EMPTY && s != TOMB {
                let x = s & old_mask;
                self.place(hash_of(x), x);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    /// A deliberately weak hash (few distinct values) so probe runs collide,
    /// wrap around and cross tombstones.
    fn weak(x: u32) -> u64 {
        let h = u64::from(x % 13).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        h ^ (u64::from(x % 5) << 40)
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u32),
        Remove(u32),
    }

    proptest! {
        #[test]
        fn behaves_as_a_set(ops in prop::collection::vec(
            prop_oneof![
                (0u32..300).prop_map(Op::Insert),
                (0u32..300).prop_map(Op::Remove),
            ],
            0..600,
        )) {
            let mut index = MemberIndex::with_capacity(0);
            let mut model = HashSet::new();
            for op in ops {
                match op {
                    Op::Insert(x) => {
                        if model.insert(x) {
                            index.insert_unique(weak(x), x, weak);
                        }
                    }
                    Op::Remove(x) => {
                        prop_assert_eq!(index.remove(weak(x), x), model.remove(&x));
                    }
                }
                prop_assert_eq!(index.len(), model.len());
                prop_assert!(index.len() + index.tombs < index.slots.len().max(1));
            }
            for x in 0..300u32 {
                let found = index.find(weak(x), |y| y == x);
                prop_assert_eq!(found, model.contains(&x).then_some(x));
            }
        }
    }

    #[test]
    fn large_node_indexes_widen_the_index_bits() {
        let mut index = MemberIndex::with_capacity(4);
        let hash = |x: u32| u64::from(x).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let xs = [1u32, 70_000, 5_000_000, u32::MAX - 3];
        for &x in &xs {
            index.insert_unique(hash(x), x, hash);
        }
        assert_eq!(index.idx_bits, 32);
        for &x in &xs {
            assert_eq!(index.find(hash(x), |y| y == x), Some(x));
        }
        assert_eq!(index.find(hash(2), |y| y == 2), None);
    }

    #[test]
    fn a_million_entries_use_four_bytes_a_slot() {
        let index = MemberIndex::with_capacity(1_000_000);
        assert_eq!(index.allocation_size(), (1 << 21) * 4);
        assert_eq!(index.idx_bits, 24);
    }
}
