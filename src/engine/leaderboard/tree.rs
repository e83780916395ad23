//! The order of a board's entries: a B+tree of entry ids (`u32`), counted
//! so that place lookups, ranks and range counts are O(log n).
//!
//! - A leaf holds up to `LEAF_CAP` ids in order, linked to its neighbours
//!   (range walks follow the links). The top bit of an id's slot is its
//!   *group end* flag: set when the next entry in the board's order has
//!   another (score, subscore), or when it is the last. The flags before a
//!   place count the distinct (score, subscore) values strictly better than
//!   the entry there, which is its DENSE rank minus one.
//! - An inner node holds, per child: the child's node id, its number of
//!   entries, its number of group ends, and its first entry (id and the
//!   ordering key of its score, so a descent compares against the cache and
//!   reads an entry only on a score tie).
//! - Nodes live in arenas addressed by `u32`, freed nodes are reused.
//!   Under-full nodes are merged with or refilled from a sibling; a tree
//!   built from ids already in order ([`Tree::from_sorted`]) has full ones.
//! - An entry already in the tree is found by its key through the inner
//!   nodes, then by its id in the leaf (a scan of 64 `u32`s, no entry
//!   reads); an insert's place by a binary search of the leaf.
//!
//! The tree knows nothing of scores beyond what [`Store`] tells it: every
//! descent is driven by a predicate that holds for a prefix of the order.

use super::store::Store;
use crate::engine::zset::alloc_size;
use crate::engine::zset::arena::ChunkedVec;

/// "No node".
pub(super) const NIL: u32 = u32::MAX;
/// The group end flag of a leaf slot.
pub(super) const GROUP_END: u32 = 1 << 31;
/// The entry id bits of a leaf slot.
pub(super) const ID_MASK: u32 = GROUP_END - 1;

// Small nodes in tests, so that a few dozen entries build a deep tree.
#[cfg(not(test))]
const LEAF_CAP: usize = 64;
#[cfg(test)]
const LEAF_CAP: usize = 4;
#[cfg(not(test))]
const FAN: usize = 32;
#[cfg(test)]
const FAN: usize = 4;
/// Fewer ids than this and a leaf is merged or refilled.
const LEAF_MIN: usize = if LEAF_CAP / 4 > 1 { LEAF_CAP / 4 } else { 1 };
/// Fewer children than this and an inner node is merged or refilled.
const FAN_MIN: usize = if FAN / 4 > 2 { FAN / 4 } else { 2 };
/// Deepest tree: every inner node but the root has at least two children,
/// so 2^31 entries need fewer levels.
const MAX_DEPTH: usize = 40;

#[derive(Debug, Clone, Copy)]
struct Leaf {
    slots: [u32; LEAF_CAP],
    len: u32,
    prev: u32,
    /// The next leaf; the free list's link in a free leaf.
    next: u32,
}

const EMPTY_LEAF: Leaf = Leaf {
    slots: [0; LEAF_CAP],
    len: 0,
    prev: NIL,
    next: NIL,
};

/// One child of an inner node and what its subtree holds.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    child: u32,
    count: u32,
    groups: u32,
    /// The subtree's first entry.
    first: u32,
    /// [`Store::order_score`] of `first`.
    first_ks: i64,
}

#[derive(Debug, Clone, Copy)]
struct Inner {
    slots: [Slot; FAN],
    /// Number of children; the free list's link (in `slots[0].child`)
    /// when 0.
    len: u32,
}

const EMPTY_INNER: Inner = Inner {
    slots: [Slot {
        child: 0,
        count: 0,
        groups: 0,
        first: 0,
        first_ks: 0,
    }; FAN],
    len: 0,
};

/// The inner nodes a descent went through, and the child taken in each.
struct Path {
    /// Node and child index, both `u32` and zeroed at first (only the
    /// first `depth` are read): a path is made for every insert and
    /// removal, and zeroing 320 bytes costs a fraction of filling 640
    /// with a pattern.
    steps: [(u32, u32); MAX_DEPTH],
    depth: usize,
}

impl Path {
    fn new() -> Path {
        Path {
            steps: [(0, 0); MAX_DEPTH],
            depth: 0,
        }
    }

    fn push(&mut self, node: u32, i: usize) {
        if let Some(s) = self.steps.get_mut(self.depth) {
            // A child index is below FAN.
            *s = (node, i as u32);
            self.depth += 1;
        }
    }

    fn pop(&mut self) -> Option<(u32, usize)> {
        self.depth = self.depth.checked_sub(1)?;
        let (node, i) = self.steps[self.depth];
        Some((node, i as usize))
    }
}

/// Where a descent ended: a leaf, a slot in it, the place of that slot in
/// the whole order (0-based) and the group ends before it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Found {
    pub leaf: u32,
    pub idx: usize,
    pub pos: u64,
    pub groups: u64,
}

/// Where [`Tree::insert`] put an entry: its 0-based place, the group ends
/// before it, and whether it starts its (score, subscore) group.
#[derive(Debug, Clone, Copy)]
pub(super) struct Placed {
    pub pos: u64,
    pub groups: u64,
    pub group_start: bool,
}

/// The counted B+tree.
#[derive(Debug, Clone)]
pub(super) struct Tree {
    leaves: ChunkedVec<Leaf>,
    inners: Vec<Inner>,
    free_leaf: u32,
    free_inner: u32,
    root: u32,
    /// Inner levels above the leaves (0: the root is a leaf).
    height: usize,
    len: usize,
}

impl Tree {
    /// An empty tree (one empty leaf).
    pub fn new() -> Tree {
        let mut leaves = ChunkedVec::new();
        leaves.push_growing_from(EMPTY_LEAF, 1);
        Tree {
            leaves,
            inners: Vec::new(),
            free_leaf: NIL,
            free_inner: NIL,
            root: 0,
            height: 0,
            len: 0,
        }
    }

    /// A tree of `ids`, already in order, with full nodes (the last two of
    /// a level share their contents when the last would be under-full).
    pub fn from_sorted(store: &Store, ids: &[u32]) -> Tree {
        let mut t = Tree::new();
        let mut level = Vec::new();
        let (mut at, mut prev) = (0, NIL);
        for size in node_sizes(ids.len(), LEAF_CAP, LEAF_MIN) {
            let mut leaf = EMPTY_LEAF;
            for (j, slot) in leaf.slots[..size].iter_mut().enumerate() {
                let id = ids[at + j];
                let end = ids
                    .get(at + j + 1)
                    .is_none_or(|&b| !store.same_group(id, b));
                *slot = id | if end { GROUP_END } else { 0 };
            }
            leaf.len = size as u32;
            leaf.prev = prev;
            // The new tree's empty root leaf becomes the first leaf.
            let x = if prev == NIL {
                t.leaves[0] = leaf;
                0
            } else {
                t.alloc_leaf(leaf)
            };
            if prev != NIL {
                t.leaves[prev as usize].next = x;
            }
            prev = x;
            level.push(x);
            at += size;
        }
        let mut is_leaf = true;
        while level.len() > 1 {
            let mut up = Vec::new();
            let mut at = 0;
            for size in node_sizes(level.len(), FAN, FAN_MIN) {
                let mut n = EMPTY_INNER;
                for (j, slot) in n.slots[..size].iter_mut().enumerate() {
                    *slot = t.summary(store, level[at + j], is_leaf);
                }
                n.len = size as u32;
                up.push(t.alloc_inner(n));
                at += size;
            }
            level = up;
            is_leaf = false;
            t.height += 1;
        }
        t.root = level.first().copied().unwrap_or(0);
        t.len = ids.len();
        t
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Bytes allocated, rounded to the allocator's size classes.
    pub fn memory_usage(&self) -> usize {
        self.leaves.allocated() + alloc_size(self.inners.capacity() * std::mem::size_of::<Inner>())
    }

    // ----- reading --------------------------------------------------------

    /// Descends to the first entry for which `before(order_score, id)` does
    /// not hold (`before` holds for a prefix of the order), recording the
    /// inner nodes in `path`.
    fn descend(
        &self,
        store: &Store,
        before: impl Fn(i64, u32) -> bool,
        path: Option<&mut Path>,
    ) -> Found {
        let f = self.descend_inner(&before, path);
        let leaf = &self.leaves[f.leaf as usize];
        let (mut lo, mut hi) = (0, leaf.len as usize);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let id = leaf.slots[mid] & ID_MASK;
            if before(store.order_score(id), id) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Found {
            idx: lo,
            pos: f.pos + lo as u64,
            groups: f.groups + count_ends(&leaf.slots[..lo]),
            ..f
        }
    }

    /// The inner levels of [`Tree::descend`]: the leaf it goes to, with
    /// the entries and group ends of the leaves before it (`idx` 0).
    fn descend_inner(
        &self,
        before: &impl Fn(i64, u32) -> bool,
        mut path: Option<&mut Path>,
    ) -> Found {
        let mut node = self.root;
        let (mut pos, mut groups) = (0u64, 0u64);
        for _ in 0..self.height {
            let n = &self.inners[node as usize];
            let len = n.len as usize;
            // The last child whose first entry is before (or the first).
            let (mut lo, mut hi) = (1, len);
            while lo < hi {
                let mid = (lo + hi) / 2;
                let s = &n.slots[mid];
                if before(s.first_ks, s.first) {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            let i = lo - 1;
            for s in &n.slots[..i] {
                pos += u64::from(s.count);
                groups += u64::from(s.groups);
            }
            if let Some(p) = path.as_deref_mut() {
                p.push(node, i);
            }
            node = n.slots[i].child;
        }
        Found {
            leaf: node,
            idx: 0,
            pos,
            groups,
        }
    }

    /// How many entries `before` holds for (a prefix of the order), and
    /// the group ends among them.
    pub fn partition(&self, store: &Store, before: impl Fn(i64, u32) -> bool) -> (u64, u64) {
        let f = self.descend(store, before, None);
        (f.pos, f.groups)
    }

    /// Where entry `id` is (None when it is not in the tree).
    pub fn find(&self, store: &Store, id: u32) -> Option<Found> {
        self.locate(store, id, None)
    }

    /// Where entry `id` is, recording the inner nodes in `path`. The inner
    /// levels take the entries up to and including `id` as their prefix
    /// (so the descent reaches the leaf holding `id` even when it is that
    /// leaf's first); the leaf is searched for the id itself, which reads
    /// no entries.
    fn locate(&self, store: &Store, id: u32, path: Option<&mut Path>) -> Option<Found> {
        let key = store.key(id);
        let f = self.descend_inner(&|ks, e| store.not_after(ks, e, &key), path);
        let leaf = &self.leaves[f.leaf as usize];
        let idx = slot_of(&leaf.slots, leaf.len as usize, id)?;
        let slots = &leaf.slots[..leaf.len as usize];
        Some(Found {
            idx,
            pos: f.pos + idx as u64,
            groups: f.groups + count_ends(&slots[..idx]),
            ..f
        })
    }

    /// The 0-based place of the first entry of `f`'s group (the entries
    /// with its (score, subscore)), when the group starts in `f`'s leaf or
    /// right at its start; None when it starts in an earlier leaf.
    pub fn group_start(&self, f: &Found) -> Option<u64> {
        let leaf = &self.leaves[f.leaf as usize];
        let mut j = f.idx.min(leaf.len as usize);
        while j > 0 && leaf.slots[j - 1] & GROUP_END == 0 {
            j -= 1;
        }
        if j == 0 && leaf.prev != NIL {
            let p = &self.leaves[leaf.prev as usize];
            let last = p.slots[..p.len as usize].last()?;
            if last & GROUP_END == 0 {
                return None;
            }
        }
        Some(f.pos - (f.idx - j) as u64)
    }

    /// The entry at 0-based place `pos`.
    pub fn at(&self, mut pos: u64) -> Option<Found> {
        if pos >= self.len as u64 {
            return None;
        }
        let start = pos;
        let mut groups = 0u64;
        let mut node = self.root;
        for _ in 0..self.height {
            let n = &self.inners[node as usize];
            let mut i = 0;
            while i + 1 < n.len as usize && pos >= u64::from(n.slots[i].count) {
                pos -= u64::from(n.slots[i].count);
                groups += u64::from(n.slots[i].groups);
                i += 1;
            }
            node = n.slots[i].child;
        }
        let leaf = &self.leaves[node as usize];
        let idx = usize::try_from(pos).ok()?.min(leaf.len as usize);
        groups += count_ends(&leaf.slots[..idx]);
        Some(Found {
            leaf: node,
            idx,
            pos: start,
            groups,
        })
    }

    /// The slot (id and group end flag) at `idx` of `leaf`.
    #[inline]
    pub fn slot(&self, leaf: u32, idx: usize) -> Option<u32> {
        let l = &self.leaves[leaf as usize];
        (idx < l.len as usize).then(|| l.slots[idx])
    }

    /// The leaf after `leaf`, or NIL.
    #[inline]
    pub fn next_leaf(&self, leaf: u32) -> u32 {
        self.leaves[leaf as usize].next
    }

    /// The last entry's id.
    pub fn last(&self) -> Option<u32> {
        let mut node = self.root;
        for _ in 0..self.height {
            let n = &self.inners[node as usize];
            node = n.slots[(n.len as usize).checked_sub(1)?].child;
        }
        let l = &self.leaves[node as usize];
        Some(l.slots[(l.len as usize).checked_sub(1)?] & ID_MASK)
    }

    /// The first entry of the leaf after `leaf`.
    fn first_after(&self, leaf: u32) -> Option<u32> {
        let next = self.leaves[leaf as usize].next;
        if next == NIL {
            return None;
        }
        self.slot(next, 0).map(|s| s & ID_MASK)
    }

    // ----- writing --------------------------------------------------------

    /// Adds entry `id` (already in the store, not in the tree).
    pub fn insert(&mut self, store: &Store, id: u32) -> Placed {
        let key = store.key(id);
        let mut path = Path::new();
        let f = self.descend(store, |ks, e| store.before(ks, e, &key), Some(&mut path));
        let (leaf, idx) = (f.leaf, f.idx);
        let next = match self.slot(leaf, idx) {
            Some(s) => Some(s & ID_MASK),
            None => self.first_after(leaf),
        };
        let x_end = next.is_none_or(|b| !store.same_group(id, b));
        let slot = id | if x_end { GROUP_END } else { 0 };
        // The predecessor is in this leaf (a descent stops in the leaf
        // whose first entry is before the new one), unless the new entry
        // comes first of all.
        let mut placed = Placed {
            pos: f.pos,
            groups: f.groups,
            group_start: true,
        };
        if idx > 0 {
            let a = self.leaves[leaf as usize].slots[idx - 1];
            let a_end = !store.same_group(a & ID_MASK, id);
            self.leaves[leaf as usize].slots[idx - 1] =
                (a & ID_MASK) | if a_end { GROUP_END } else { 0 };
            placed.groups = placed.groups - u64::from(a & GROUP_END != 0) + u64::from(a_end);
            placed.group_start = a_end;
        }
        let mut split = self.leaf_insert(leaf, idx, slot);
        if split.is_none() {
            self.update_counts(store, leaf, &mut path);
            self.len += 1;
            return placed;
        }
        let mut child = leaf;
        let mut child_is_leaf = true;
        while let Some((p, ci)) = path.pop() {
            let s = self.summary(store, child, child_is_leaf);
            self.inners[p as usize].slots[ci] = s;
            if let Some(r) = split {
                let rs = self.summary(store, r, child_is_leaf);
                split = self.inner_insert(p, ci + 1, rs);
            }
            child = p;
            child_is_leaf = false;
        }
        if let Some(r) = split {
            let ls = self.summary(store, child, child_is_leaf);
            let rs = self.summary(store, r, child_is_leaf);
            let mut n = EMPTY_INNER;
            n.slots[0] = ls;
            n.slots[1] = rs;
            n.len = 2;
            self.root = self.alloc_inner(n);
            self.height += 1;
        }
        self.len += 1;
        placed
    }

    /// Removes entry `id` (still in the store unchanged); false when it is
    /// not in the tree.
    pub fn remove(&mut self, store: &Store, id: u32) -> bool {
        let mut path = Path::new();
        let Some(f) = self.locate(store, id, Some(&mut path)) else {
            return false;
        };
        let (leaf, idx) = (f.leaf, f.idx);
        let x = self.leaves[leaf as usize].slots[idx];
        // The predecessor now ends its group if it did or the removed one
        // did (the order sorts by (score, subscore) first).
        let mut fix_prev = None;
        if idx > 0 {
            self.leaves[leaf as usize].slots[idx - 1] |= x & GROUP_END;
        } else if x & GROUP_END != 0 {
            let prev = self.leaves[leaf as usize].prev;
            if prev != NIL {
                let pl = &self.leaves[prev as usize];
                if let Some(&a) = pl.slots[..pl.len as usize].last() {
                    if a & GROUP_END == 0 {
                        fix_prev = Some(a & ID_MASK);
                    }
                }
            }
        }
        {
            let l = &mut self.leaves[leaf as usize];
            let len = l.len as usize;
            l.slots.copy_within(idx + 1..len, idx);
            l.len -= 1;
        }
        let mut child = leaf;
        let mut child_is_leaf = true;
        if !self.merges(leaf, &path) {
            self.update_counts(store, leaf, &mut path);
        }
        while let Some((p, ci)) = path.pop() {
            let under = if child_is_leaf {
                (self.leaves[child as usize].len as usize) < LEAF_MIN
            } else {
                (self.inners[child as usize].len as usize) < FAN_MIN
            };
            if under && self.inners[p as usize].len > 1 {
                let (li, ri) = if ci > 0 { (ci - 1, ci) } else { (ci, ci + 1) };
                self.rebalance(store, p, li, ri, child_is_leaf);
            } else {
                let s = self.summary(store, child, child_is_leaf);
                self.inners[p as usize].slots[ci] = s;
            }
            child = p;
            child_is_leaf = false;
        }
        while self.height > 0 && self.inners[self.root as usize].len == 1 {
            let old = self.root;
            self.root = self.inners[old as usize].slots[0].child;
            self.free_inner_node(old);
            self.height -= 1;
        }
        self.len -= 1;
        if let Some(a) = fix_prev {
            self.mark_group_end(store, a);
        }
        true
    }

    /// Sets the group end flag of entry `a` (in a leaf other than the one
    /// a removal changed) and the counts above it.
    fn mark_group_end(&mut self, store: &Store, a: u32) {
        let mut path = Path::new();
        let Some(f) = self.locate(store, a, Some(&mut path)) else {
            return;
        };
        self.leaves[f.leaf as usize].slots[f.idx] |= GROUP_END;
        let mut child = f.leaf;
        let mut child_is_leaf = true;
        while let Some((p, ci)) = path.pop() {
            let s = self.summary(store, child, child_is_leaf);
            self.inners[p as usize].slots[ci] = s;
            child = p;
            child_is_leaf = false;
        }
    }

    /// Whether a removal from `leaf`, reached through `path`, leaves a node
    /// under-full that its parent would merge or refill (the leaf, or an
    /// inner node below the root).
    fn merges(&self, leaf: u32, path: &Path) -> bool {
        (self.leaves[leaf as usize].len as usize) < LEAF_MIN
            || path.steps[1..path.depth.max(1)]
                .iter()
                .any(|&(n, _)| (self.inners[n as usize].len as usize) < FAN_MIN)
    }

    /// Brings the slots above `leaf` (along `path`, which it empties) up to
    /// date after a change inside it that split and merged nothing: the
    /// leaf's summary replaces its slot, and each slot above takes the
    /// same change of counts (and the leaf's new first entry, while the
    /// node is its parent's first child). The same slots as
    /// [`Tree::summary`] level by level, without summing every child.
    fn update_counts(&mut self, store: &Store, leaf: u32, path: &mut Path) {
        let Some((p, ci)) = path.pop() else {
            return;
        };
        let old = self.inners[p as usize].slots[ci];
        let s = self.leaf_summary(store, leaf, Some(&old));
        self.inners[p as usize].slots[ci] = s;
        let count = s.count.wrapping_sub(old.count);
        let groups = s.groups.wrapping_sub(old.groups);
        let mut first = (ci == 0 && (s.first, s.first_ks) != (old.first, old.first_ks))
            .then_some((s.first, s.first_ks));
        while let Some((p, ci)) = path.pop() {
            let slot = &mut self.inners[p as usize].slots[ci];
            slot.count = slot.count.wrapping_add(count);
            slot.groups = slot.groups.wrapping_add(groups);
            if let Some((f, ks)) = first {
                slot.first = f;
                slot.first_ks = ks;
            }
            if ci != 0 {
                first = None;
            }
        }
    }

    /// What node `node` holds, for its parent.
    fn summary(&self, store: &Store, node: u32, is_leaf: bool) -> Slot {
        if is_leaf {
            self.leaf_summary(store, node, None)
        } else {
            let n = &self.inners[node as usize];
            let slots = &n.slots[..n.len as usize];
            let first = slots.first().copied().unwrap_or_default();
            Slot {
                child: node,
                count: slots.iter().map(|s| s.count).sum(),
                groups: slots.iter().map(|s| s.groups).sum(),
                first: first.first,
                first_ks: first.first_ks,
            }
        }
    }

    /// What leaf `leaf` holds, for its parent. `was`: its parent's slot for
    /// it before one insertion or removal inside it; when its first entry
    /// is still the same one, that entry's score is taken from there
    /// instead of from the store (an entry's score never changes while it
    /// is in the tree, and an inserted entry was not in it before), which
    /// spares a removal from a random leaf a cache miss on its first entry.
    fn leaf_summary(&self, store: &Store, leaf: u32, was: Option<&Slot>) -> Slot {
        let l = &self.leaves[leaf as usize];
        let slots = &l.slots[..l.len as usize];
        let first = slots.first().map_or(0, |s| s & ID_MASK);
        let first_ks = match was {
            _ if slots.is_empty() => 0,
            Some(w) if w.count > 0 && w.first == first => w.first_ks,
            _ => store.order_score(first),
        };
        Slot {
            child: leaf,
            count: l.len,
            groups: count_ends(slots) as u32,
            first,
            first_ks,
        }
    }

    /// Inserts `slot` at `idx` of `leaf`; when full, splits it and returns
    /// the new right leaf.
    fn leaf_insert(&mut self, leaf: u32, idx: usize, slot: u32) -> Option<u32> {
        let m = &mut self.leaves[leaf as usize];
        let len = m.len as usize;
        if len < LEAF_CAP {
            m.slots.copy_within(idx..len, idx + 1);
            m.slots[idx] = slot;
            m.len += 1;
            return None;
        }
        // A copy only to split: every insert made one (a memcpy of the
        // leaf) before.
        let l = *m;
        let mut all = [0u32; LEAF_CAP + 1];
        all[..idx].copy_from_slice(&l.slots[..idx]);
        all[idx] = slot;
        all[idx + 1..].copy_from_slice(&l.slots[idx..]);
        // Appending at the very end (or start) keeps the full side full, so
        // boards filled in order end with full leaves.
        let at = if idx == LEAF_CAP && l.next == NIL {
            LEAF_CAP
        } else if idx == 0 && l.prev == NIL {
            1
        } else {
            LEAF_CAP.div_ceil(2)
        };
        let mut right = EMPTY_LEAF;
        right.slots[..LEAF_CAP + 1 - at].copy_from_slice(&all[at..]);
        right.len = (LEAF_CAP + 1 - at) as u32;
        right.prev = leaf;
        right.next = l.next;
        let r = self.alloc_leaf(right);
        if l.next != NIL {
            self.leaves[l.next as usize].prev = r;
        }
        let m = &mut self.leaves[leaf as usize];
        m.slots[..at].copy_from_slice(&all[..at]);
        m.len = at as u32;
        m.next = r;
        Some(r)
    }

    /// Inserts `slot` at `idx` of inner node `p`; when full, splits it and
    /// returns the new right node.
    fn inner_insert(&mut self, p: u32, idx: usize, slot: Slot) -> Option<u32> {
        let n = self.inners[p as usize];
        let len = n.len as usize;
        if len < FAN {
            let m = &mut self.inners[p as usize];
            m.slots.copy_within(idx..len, idx + 1);
            m.slots[idx] = slot;
            m.len += 1;
            return None;
        }
        let mut all = [Slot::default(); FAN + 1];
        all[..idx].copy_from_slice(&n.slots[..idx]);
        all[idx] = slot;
        all[idx + 1..].copy_from_slice(&n.slots[idx..]);
        let at = FAN.div_ceil(2);
        let mut right = EMPTY_INNER;
        right.slots[..FAN + 1 - at].copy_from_slice(&all[at..]);
        right.len = (FAN + 1 - at) as u32;
        let r = self.alloc_inner(right);
        let m = &mut self.inners[p as usize];
        m.slots[..at].copy_from_slice(&all[..at]);
        m.len = at as u32;
        Some(r)
    }

    /// Merges children `li` and `ri = li + 1` of `p` when they fit in one
    /// node, else shares their contents evenly; updates `p`'s slots.
    fn rebalance(&mut self, store: &Store, p: u32, li: usize, ri: usize, is_leaf: bool) {
        let (l, r) = {
            let n = &self.inners[p as usize];
            (n.slots[li].child, n.slots[ri].child)
        };
        let merged = if is_leaf {
            self.rebalance_leaves(l, r)
        } else {
            self.rebalance_inners(l, r)
        };
        let ls = self.summary(store, l, is_leaf);
        self.inners[p as usize].slots[li] = ls;
        if merged {
            let n = &mut self.inners[p as usize];
            let len = n.len as usize;
            n.slots.copy_within(ri + 1..len, ri);
            n.len -= 1;
        } else {
            let rs = self.summary(store, r, is_leaf);
            self.inners[p as usize].slots[ri] = rs;
        }
    }

    /// See [`Tree::rebalance`]; true when `r` was merged into `l` and freed.
    fn rebalance_leaves(&mut self, l: u32, r: u32) -> bool {
        let (a, b) = (self.leaves[l as usize], self.leaves[r as usize]);
        let (al, bl) = (a.len as usize, b.len as usize);
        let mut all = [0u32; 2 * LEAF_CAP];
        all[..al].copy_from_slice(&a.slots[..al]);
        all[al..al + bl].copy_from_slice(&b.slots[..bl]);
        let total = al + bl;
        if total <= LEAF_CAP {
            let m = &mut self.leaves[l as usize];
            m.slots[..total].copy_from_slice(&all[..total]);
            m.len = total as u32;
            m.next = b.next;
            if b.next != NIL {
                self.leaves[b.next as usize].prev = l;
            }
            self.free_leaf_node(r);
            true
        } else {
            let at = total / 2;
            let m = &mut self.leaves[l as usize];
            m.slots[..at].copy_from_slice(&all[..at]);
            m.len = at as u32;
            let m = &mut self.leaves[r as usize];
            m.slots[..total - at].copy_from_slice(&all[at..total]);
            m.len = (total - at) as u32;
            false
        }
    }

    /// See [`Tree::rebalance`]; true when `r` was merged into `l` and freed.
    fn rebalance_inners(&mut self, l: u32, r: u32) -> bool {
        let (a, b) = (self.inners[l as usize], self.inners[r as usize]);
        let (al, bl) = (a.len as usize, b.len as usize);
        let mut all = [Slot::default(); 2 * FAN];
        all[..al].copy_from_slice(&a.slots[..al]);
        all[al..al + bl].copy_from_slice(&b.slots[..bl]);
        let total = al + bl;
        if total <= FAN {
            let m = &mut self.inners[l as usize];
            m.slots[..total].copy_from_slice(&all[..total]);
            m.len = total as u32;
            self.free_inner_node(r);
            true
        } else {
            let at = total / 2;
            let m = &mut self.inners[l as usize];
            m.slots[..at].copy_from_slice(&all[..at]);
            m.len = at as u32;
            let m = &mut self.inners[r as usize];
            m.slots[..total - at].copy_from_slice(&all[at..total]);
            m.len = (total - at) as u32;
            false
        }
    }

    fn alloc_leaf(&mut self, leaf: Leaf) -> u32 {
        if self.free_leaf != NIL {
            let x = self.free_leaf;
            self.free_leaf = self.leaves[x as usize].next;
            self.leaves[x as usize] = leaf;
            x
        } else {
            // Leaf ids stay far below u32::MAX: each leaf holds at least
            // one of fewer than 2^31 entries.
            let x = self.leaves.len() as u32;
            self.leaves.push_growing_from(leaf, 1);
            x
        }
    }

    fn free_leaf_node(&mut self, x: u32) {
        let l = &mut self.leaves[x as usize];
        l.len = 0;
        l.next = self.free_leaf;
        l.prev = NIL;
        self.free_leaf = x;
    }

    fn alloc_inner(&mut self, inner: Inner) -> u32 {
        if self.free_inner != NIL {
            let x = self.free_inner;
            self.free_inner = self.inners[x as usize].slots[0].child;
            self.inners[x as usize] = inner;
            x
        } else {
            let x = self.inners.len() as u32;
            reserve(&mut self.inners, 1);
            self.inners.push(inner);
            x
        }
    }

    fn free_inner_node(&mut self, x: u32) {
        let n = &mut self.inners[x as usize];
        n.len = 0;
        n.slots[0].child = self.free_inner;
        self.free_inner = x;
    }

    /// Checks every invariant (tests only): order, counts, group ends,
    /// first entries, links, fill.
    #[cfg(test)]
    pub fn check(&self, store: &Store) {
        let mut ids = Vec::new();
        let mut leaves = Vec::new();
        self.check_node(store, self.root, self.height, true, &mut ids, &mut leaves);
        assert_eq!(ids.len(), self.len);
        for w in ids.windows(2) {
            let (a, b) = (w[0] & ID_MASK, w[1] & ID_MASK);
            let ka = store.key(a);
            assert!(ka < store.key(b), "order");
            assert_eq!(w[0] & GROUP_END != 0, !store.same_group(a, b), "group end");
        }
        if let Some(l) = ids.last() {
            assert!(l & GROUP_END != 0, "last ends its group");
        }
        for (i, &lf) in leaves.iter().enumerate() {
            let l = &self.leaves[lf as usize];
            let want_prev = if i == 0 { NIL } else { leaves[i - 1] };
            let want_next = leaves.get(i + 1).copied().unwrap_or(NIL);
            assert_eq!((l.prev, l.next), (want_prev, want_next), "links");
        }
    }

    #[cfg(test)]
    fn check_node(
        &self,
        store: &Store,
        node: u32,
        height: usize,
        root: bool,
        ids: &mut Vec<u32>,
        leaves: &mut Vec<u32>,
    ) -> Slot {
        if height == 0 {
            let l = &self.leaves[node as usize];
            assert!(root || l.len as usize >= LEAF_MIN, "leaf fill");
            ids.extend_from_slice(&l.slots[..l.len as usize]);
            leaves.push(node);
            return self.summary(store, node, true);
        }
        let n = &self.inners[node as usize];
        assert!(
            n.len as usize >= if root { 2 } else { FAN_MIN },
            "inner fill"
        );
        for s in &n.slots[..n.len as usize] {
            let got = self.check_node(store, s.child, height - 1, false, ids, leaves);
            assert_eq!(
                (s.child, s.count, s.groups, s.first, s.first_ks),
                (got.child, got.count, got.groups, got.first, got.first_ks),
                "slot summary"
            );
        }
        self.summary(store, node, false)
    }
}

/// Sizes of the nodes holding `n` items in order: full (`cap`), but the
/// last two share their items when the last would hold fewer than `min`.
fn node_sizes(n: usize, cap: usize, min: usize) -> Vec<usize> {
    let mut v = vec![cap; n / cap];
    let rest = n % cap;
    if rest > 0 {
        v.push(rest);
        let k = v.len();
        if k >= 2 && rest < min {
            let total = cap + rest;
            v[k - 2] = total - total / 2;
            v[k - 1] = total / 2;
        }
    }
    v
}

/// Number of group end flags among `slots` (the top bits summed, which
/// the compiler turns into vector shifts and adds).
#[inline]
fn count_ends(slots: &[u32]) -> u64 {
    slots.iter().map(|&s| u64::from(s >> 31)).sum()
}

/// Slots compared at once by [`slot_of`].
const SCAN: usize = if LEAF_CAP < 8 { LEAF_CAP } else { 8 };

/// Where entry `id` is among the first `len` of a leaf's `slots`. The
/// slots are compared `SCAN` at a time over the whole array (each group
/// one vector compare; slots past `len` hold stale ids, so a match there
/// is no match), which costs a fraction of a slot-by-slot scan.
#[inline]
fn slot_of(slots: &[u32; LEAF_CAP], len: usize, id: u32) -> Option<usize> {
    let mut start = 0;
    while start < len {
        let group = &slots[start..start + SCAN];
        if group
            .iter()
            .fold(false, |hit, &s| hit | (s & ID_MASK == id))
        {
            let idx = start + group.iter().position(|&s| s & ID_MASK == id)?;
            return (idx < len).then_some(idx);
        }
        start += SCAN;
    }
    None
}

/// Makes room for `extra` more items, growing by size classes instead of
/// doubling (from 64 bytes, or one item when bigger: a small board's one
/// inner node should not bring room for four).
pub(super) fn reserve<T>(v: &mut Vec<T>, extra: usize) {
    let need = v.len() + extra;
    if need <= v.capacity() {
        return;
    }
    let size = std::mem::size_of::<T>().max(1);
    let want = need.max(v.capacity() + v.capacity() / 8).max(64 / size);
    let cap = alloc_size(want * size) / size;
    v.reserve_exact(cap.max(need) - v.len());
}
