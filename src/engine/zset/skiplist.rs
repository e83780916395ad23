//! The large-set encoding (OBJECT ENCODING `skiplist`): a skiplist whose
//! links carry spans (so rank, element-at-rank and range counts are
//! O(log n)), plus a hash index from member to node for O(1) score lookups.
//!
//! Layout, chosen for memory (see the module docs of `zset` for figures):
//! - nodes live in one arena (a [`ChunkedVec`] of 32-byte nodes: 1 MiB
//!   chunks, so growing neither copies nor leaves much room unused)
//!   addressed by `u32` indexes; node 0 is the header. Freed slots are reused through a free
//!   list, and the whole structure is rebuilt (compacted) when it becomes
//!   mostly holes;
//! - a node holds its score, backward link, level-0 forward link (level-0
//!   spans are always 1, so they are not stored) and its member: inline when
//!   at most 14 bytes, else as (offset, length) into a byte heap;
//! - links of levels 1 and up live in a second arena, in one block per node
//!   sized to its level (a quarter of the nodes have any), recycled by block
//!   size. Each link (20 bytes) holds the forward node, the span, and a copy
//!   of the forward node's score and link-block index, so the upper levels
//!   of a walk touch one link block per step and never the nodes (as
//!   Redis's nodes keep their level array inline); only ties on the score
//!   read the forward node's member;
//! - the index ([`MemberIndex`]) holds node indexes (with a tag of their
//!   member's hash) and hashes the member bytes stored in the node, so each
//!   member's bytes exist once.
//!
//! The order can be deferred for bulk changes (AOF loading): the index
//! alone then serves lookups and updates, and the nodes are sorted and
//! linked again in place when the order is restored.
//!
//! The search, insert, delete and rank walks are those of Redis's `zsl*`
//! functions (p = 1/4, at most 32 levels), so range lookups on sets whose
//! order is not monotonic in the range's key (lex ranges over mixed scores)
//! behave as Redis's do.

use std::fmt;

use smallvec::SmallVec;

use super::alloc_size;
use super::arena::ChunkedVec;
use super::index::MemberIndex;
use super::listpack::Listpack;
use super::range::Bounds;

/// "No node".
pub(super) const NIL: u32 = u32::MAX;
/// The header node.
const HEAD: u32 = 0;
/// Most levels a node can have.
const MAX_LEVEL: usize = 32;
/// Most neighbours a node of one level is moved past by relinking level 0
/// alone ([`SkipList::shift_short`]); longer moves search.
const SHORT_MOVE: usize = 8;
/// Longest member stored inside its node (`m:` and 12 digits fit).
const INLINE_MAX: usize = 14;
/// First byte of a member slot whose bytes are in the heap.
const HEAP_TAG: u8 = 0xFF;

/// A forward link of level 1 or more. It caches the forward node's score
/// and link block, so a walk at the upper levels compares and moves without
/// reading the forward node itself (one cache miss per step instead of two).
/// Packed to 4-byte alignment: 20 bytes instead of 24.
#[derive(Debug, Clone, Copy)]
#[repr(C, packed(4))]
struct Link {
    next: u32,
    span: u32,
    /// Index in `links` of `next`'s level-1 link (NIL when it has one level).
    next_upper: u32,
    /// `nodes[next].score`.
    next_score: f64,
}

const EMPTY_LINK: Link = Link {
    next: NIL,
    span: 0,
    next_upper: NIL,
    next_score: 0.0,
};

/// One element (or the header, or a free slot when `level == 0`): 32 bytes,
/// with room for a 14-byte member inline.
#[derive(Debug, Clone, Copy)]
struct Node {
    score: f64,
    /// Backward link; NIL for the first element.
    prev: u32,
    /// Level-0 forward link; NIL for the last element.
    next: u32,
    /// Number of levels; 0 marks a free slot.
    level: u8,
    /// `[len, bytes..]` when len <= 14, else `[HEAP_TAG, offset: 6 bytes,
    /// len: 4 bytes, unused]`.
    member: [u8; 1 + INLINE_MAX],
}

/// A node and the index in `links` of its level-1 link (levels 1..level
/// follow; NIL for a node of one level). Nodes do not store the index: a
/// walk learns it from the link that led to the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pos {
    node: u32,
    upper: u32,
}

/// The header, whose links come first in `links`.
const HEAD_POS: Pos = Pos {
    node: HEAD,
    upper: 0,
};

/// Predecessors of a position at every level.
type Update = [Pos; MAX_LEVEL];

#[inline]
fn member_of<'a>(nodes: &'a ChunkedVec<Node>, heap: &'a [u8], x: u32) -> &'a [u8] {
    let m = &nodes[x as usize].member;
    let tag = m[0] as usize;
    if tag <= INLINE_MAX {
        &m[1..1 + tag]
    } else {
        let off = u64::from_le_bytes([m[1], m[2], m[3], m[4], m[5], m[6], 0, 0]) as usize;
        let len = u32::from_le_bytes([m[7], m[8], m[9], m[10]]) as usize;
        heap.get(off..off + len).unwrap_or(&[])
    }
}

/// Makes room for `extra` more items, growing to the next jemalloc size
/// class (an eighth to a quarter more at large sizes) instead of doubling, so
/// a big set's arenas waste at most ~20%.
fn reserve<T>(v: &mut Vec<T>, extra: usize) {
    let need = v.len() + extra;
    if need <= v.capacity() {
        return;
    }
    let size = std::mem::size_of::<T>().max(1);
    let want = need.max(v.capacity() + v.capacity() / 8).max(8);
    let cap = alloc_size(want * size) / size;
    v.reserve_exact(cap - v.len());
}

/// The skiplist + hash index.
#[derive(Clone)]
pub(super) struct SkipList {
    nodes: ChunkedVec<Node>,
    links: Vec<Link>,
    heap: Vec<u8>,
    /// Heap bytes of removed members.
    heap_garbage: usize,
    /// Head of the free node slots (linked through `next`).
    free_node: u32,
    /// Heads of free link blocks by block size (linked through `next`).
    free_links: [u32; MAX_LEVEL],
    index: MemberIndex,
    hasher: ahash::RandomState,
    tail: u32,
    len: usize,
    level: usize,
    rng: u64,
    /// The order is not kept (see [`SkipList::defer_order`]): the nodes
    /// hold members and scores, the index finds them, the links are stale.
    unordered: bool,
}

impl fmt::Debug for SkipList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SkipList")
            .field("len", &self.len)
            .field("level", &self.level)
            .finish_non_exhaustive()
    }
}

/// State of an in-order bulk build: the last node at every level.
struct Appender {
    last: Update,
    last_rank: [usize; MAX_LEVEL],
}

impl Appender {
    fn new() -> Appender {
        Appender {
            last: [HEAD_POS; MAX_LEVEL],
            last_rank: [0; MAX_LEVEL],
        }
    }
}

/// One search by (score, member) in progress, a comparison at a time, so
/// that searches can run interleaved ([`SkipList::search_two`],
/// [`SkipList::rank_many`]): their cache misses then overlap instead of
/// adding up.
struct Walk<'k> {
    score: f64,
    member: &'k [u8],
    /// Last node reached, its rank, and the level being walked.
    x: Pos,
    r: usize,
    level: usize,
    /// The walk ends after this level.
    floor: usize,
    done: bool,
}

impl<'k> Walk<'k> {
    /// A walk from the header down from level `top` to level `floor`.
    fn new(score: f64, member: &'k [u8], top: usize, floor: usize) -> Walk<'k> {
        Walk {
            score,
            member,
            x: HEAD_POS,
            r: 0,
            level: top,
            floor,
            done: top < floor,
        }
    }
}

/// What a walk that changes the list records: the predecessor it found at
/// every level, and their ranks.
struct Trail {
    update: Update,
    rank: [usize; MAX_LEVEL],
}

impl Trail {
    fn new() -> Trail {
        Trail {
            update: [HEAD_POS; MAX_LEVEL],
            rank: [0; MAX_LEVEL],
        }
    }
}

/// One [`SkipList::rank_of`] in progress: a walk of the upper levels and,
/// beside it, a walk back at level 0 to the first node with upper levels.
struct Ranking<'k> {
    up: Walk<'k>,
    back: u32,
    d: usize,
    back_done: bool,
}

impl SkipList {
    /// An empty skiplist with room for `capacity` members.
    pub fn with_capacity(capacity: usize) -> SkipList {
        SkipList::build(
            capacity,
            ahash::RandomState::new(),
            rand::random::<u64>() | 1,
        )
    }

    fn build(capacity: usize, hasher: ahash::RandomState, rng: u64) -> SkipList {
        let mut nodes = ChunkedVec::new();
        nodes.push(Node {
            score: 0.0,
            prev: NIL,
            next: NIL,
            level: MAX_LEVEL as u8,
            member: [0; 1 + INLINE_MAX],
        });
        let mut links = Vec::with_capacity(MAX_LEVEL - 1 + capacity / 3);
        links.resize(MAX_LEVEL - 1, EMPTY_LINK);
        SkipList {
            nodes,
            links,
            heap: Vec::new(),
            heap_garbage: 0,
            free_node: NIL,
            free_links: [NIL; MAX_LEVEL],
            index: MemberIndex::with_capacity(capacity),
            hasher,
            tail: NIL,
            len: 0,
            level: 1,
            rng,
            unordered: false,
        }
    }

    /// The listpack's entries (already sorted and unique) as a skiplist.
    pub fn from_listpack(lp: &Listpack) -> SkipList {
        let mut sl = SkipList::with_capacity(lp.len());
        let mut app = Appender::new();
        for (_, e) in lp.entries() {
            sl.push_sorted(&mut app, e.member, e.score);
        }
        sl.finish(&app);
        sl
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Estimated bytes allocated, rounded to the allocator's size classes.
    pub fn memory_usage(&self) -> usize {
        alloc_size(std::mem::size_of::<SkipList>())
            + self.nodes.allocated()
            + alloc_size(self.links.capacity() * std::mem::size_of::<Link>())
            + alloc_size(self.heap.capacity())
            + alloc_size(self.index.allocation_size())
    }

    // ----- node accessors -------------------------------------------------

    #[inline]
    fn member(&self, x: u32) -> &[u8] {
        member_of(&self.nodes, &self.heap, x)
    }

    #[inline]
    fn score_of(&self, x: u32) -> f64 {
        self.nodes[x as usize].score
    }

    /// The member and score of node `x`.
    #[inline]
    pub fn entry(&self, x: u32) -> (&[u8], f64) {
        (self.member(x), self.score_of(x))
    }

    /// The first element, or NIL.
    #[inline]
    pub fn first(&self) -> u32 {
        debug_assert!(!self.unordered, "order read while deferred");
        self.nodes[HEAD as usize].next
    }

    /// The element after `x`, or NIL.
    #[inline]
    pub fn next(&self, x: u32) -> u32 {
        self.nodes[x as usize].next
    }

    /// The element before `x`, or NIL.
    #[inline]
    pub fn prev(&self, x: u32) -> u32 {
        self.nodes[x as usize].prev
    }

    /// The last (highest) element, or NIL.
    #[inline]
    pub fn last(&self) -> u32 {
        debug_assert!(!self.unordered, "order read while deferred");
        self.tail
    }

    /// The last element ordered before (score, member), or NIL: where a
    /// walk from the highest down resumes after (score, member), whether
    /// or not that member is still there (O(log n)).
    pub fn seek_before(&self, score: f64, member: &[u8]) -> u32 {
        let (update, _) = self.search(score, member);
        match update[0].node {
            HEAD => NIL,
            x => x,
        }
    }

    #[inline]
    fn link_at(p: Pos, i: usize) -> usize {
        p.upper as usize + i - 1
    }

    #[inline]
    fn fwd(&self, p: Pos, i: usize) -> u32 {
        if i == 0 {
            self.nodes[p.node as usize].next
        } else {
            self.links[Self::link_at(p, i)].next
        }
    }

    #[inline]
    fn span(&self, p: Pos, i: usize) -> usize {
        if i == 0 {
            1
        } else {
            self.links[Self::link_at(p, i)].span as usize
        }
    }

    #[inline]
    fn set_span(&mut self, p: Pos, i: usize, span: usize) {
        if i > 0 {
            self.links[Self::link_at(p, i)].span = span as u32;
        }
    }

    /// Where node `x` is, given its predecessors `update` (whose level-1 link
    /// leads to x when x has upper levels).
    #[inline]
    fn pos_of(&self, x: u32, update: &Update) -> Pos {
        let upper = if self.nodes[x as usize].level > 1 {
            self.links[Self::link_at(update[1], 1)].next_upper
        } else {
            NIL
        };
        Pos { node: x, upper }
    }

    fn hash(&self, member: &[u8]) -> u64 {
        self.hasher.hash_one(member)
    }

    fn random_level(&mut self) -> usize {
        // xorshift64*; two zero bits per extra level gives p = 1/4.
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (1 + (r.trailing_zeros() / 2) as usize).min(MAX_LEVEL)
    }

    // ----- allocation -----------------------------------------------------

    fn store_member(&mut self, member: &[u8]) -> [u8; 1 + INLINE_MAX] {
        let mut slot = [0u8; 1 + INLINE_MAX];
        if member.len() <= INLINE_MAX {
            slot[0] = member.len() as u8;
            slot[1..1 + member.len()].copy_from_slice(member);
        } else {
            let off = self.heap.len() as u64;
            reserve(&mut self.heap, member.len());
            self.heap.extend_from_slice(member);
            slot[0] = HEAP_TAG;
            slot[1..7].copy_from_slice(&off.to_le_bytes()[..6]);
            slot[7..11].copy_from_slice(&(member.len() as u32).to_le_bytes());
        }
        slot
    }

    fn alloc_node(&mut self, member: &[u8], score: f64, level: usize) -> Pos {
        let slot = self.store_member(member);
        let upper = if level > 1 {
            self.alloc_links(level - 1)
        } else {
            NIL
        };
        let node = Node {
            score,
            prev: NIL,
            next: NIL,
            level: level as u8,
            member: slot,
        };
        let x = if self.free_node != NIL {
            let x = self.free_node;
            self.free_node = self.nodes[x as usize].next;
            self.nodes[x as usize] = node;
            x
        } else {
            // Node indexes are u32: 4 billion members would need ~130 GB.
            let x = self.nodes.len() as u32;
            self.nodes.push(node);
            x
        };
        Pos { node: x, upper }
    }

    fn alloc_links(&mut self, n: usize) -> u32 {
        let head = self.free_links[n];
        if head != NIL {
            self.free_links[n] = self.links[head as usize].next;
            for l in &mut self.links[head as usize..head as usize + n] {
                *l = EMPTY_LINK;
            }
            head
        } else {
            let at = self.links.len() as u32;
            reserve(&mut self.links, n);
            self.links.resize(self.links.len() + n, EMPTY_LINK);
            at
        }
    }

    fn free_node(&mut self, p: Pos) {
        let x = p.node;
        let n = self.nodes[x as usize];
        if n.member[0] == HEAP_TAG {
            self.heap_garbage +=
                u32::from_le_bytes([n.member[7], n.member[8], n.member[9], n.member[10]]) as usize;
        }
        if n.level > 1 {
            let k = n.level as usize - 1;
            self.links[p.upper as usize].next = self.free_links[k];
            self.free_links[k] = p.upper;
        }
        let slot = &mut self.nodes[x as usize];
        slot.level = 0;
        slot.next = self.free_node;
        self.free_node = x;
    }

    fn unindex(&mut self, x: u32) {
        let h = self.hash(self.member(x));
        self.index.remove(h, x);
    }

    fn index_insert(&mut self, x: u32) {
        let h = self.hash(self.member(x));
        let (nodes, heap, hasher) = (&self.nodes, &self.heap, &self.hasher);
        self.index
            .insert_unique(h, x, |y| hasher.hash_one(member_of(nodes, heap, y)));
    }

    // ----- structure ------------------------------------------------------

    /// The walk every lookup shares: from the header, level by level from
    /// the top, steps forward while `ahead(node, score, rank)` holds for the
    /// next node (its score, its 1-based rank); after each level calls
    /// `level_done(level, x, rank)` with the last node reached, which stops
    /// the walk by returning false. Returns the last node reached and its rank.
    #[inline(always)]
    fn descend(
        &self,
        mut ahead: impl FnMut(u32, f64, usize) -> bool,
        mut level_done: impl FnMut(usize, Pos, usize) -> bool,
    ) -> (u32, usize) {
        debug_assert!(!self.unordered, "order read while deferred");
        let mut x = HEAD_POS;
        let mut r = 0;
        for i in (1..self.level).rev() {
            loop {
                let l = self.links[Self::link_at(x, i)];
                let span = l.span as usize;
                if l.next == NIL || !ahead(l.next, l.next_score, r + span) {
                    break;
                }
                r += span;
                x = Pos {
                    node: l.next,
                    upper: l.next_upper,
                };
            }
            if !level_done(i, x, r) {
                return (x.node, r);
            }
        }
        loop {
            let n = self.nodes[x.node as usize].next;
            if n == NIL || !ahead(n, self.nodes[n as usize].score, r + 1) {
                break;
            }
            r += 1;
            // Level 0 needs no link block.
            x = Pos {
                node: n,
                upper: NIL,
            };
        }
        level_done(0, x, r);
        (x.node, r)
    }

    /// Predecessors of (score, member) at every level, with their ranks.
    fn search(&self, score: f64, member: &[u8]) -> (Update, [usize; MAX_LEVEL]) {
        debug_assert!(!self.unordered, "order read while deferred");
        let mut w = Walk::new(score, member, self.level - 1, 0);
        let mut t = Trail::new();
        while !w.done {
            self.step(&mut w, Some(&mut t));
        }
        (t.update, t.rank)
    }

    /// Two searches at once ([`SkipList::search`] for each key), one
    /// comparison of each in turn, recorded in `ta` and `tb` (from
    /// [`Trail::new`]: written in place, as a returned pair of trails would
    /// be a kilobyte copied per move).
    fn search_two(&self, a: (f64, &[u8]), b: (f64, &[u8]), ta: &mut Trail, tb: &mut Trail) {
        debug_assert!(!self.unordered, "order read while deferred");
        let top = self.level - 1;
        let (mut wa, mut wb) = (Walk::new(a.0, a.1, top, 0), Walk::new(b.0, b.1, top, 0));
        while !(wa.done && wb.done) {
            self.step(&mut wa, Some(&mut *ta));
            self.step(&mut wb, Some(&mut *tb));
        }
    }

    /// One comparison of a search: moves forward, or goes down (recording
    /// the predecessor at this level in `trail`) or ends after its floor.
    #[inline(always)]
    fn step(&self, w: &mut Walk<'_>, trail: Option<&mut Trail>) {
        if w.done {
            return;
        }
        let i = w.level;
        let (next, next_score, span, upper) = if i == 0 {
            let n = self.nodes[w.x.node as usize].next;
            let s = if n == NIL {
                0.0
            } else {
                self.nodes[n as usize].score
            };
            (n, s, 1, NIL)
        } else {
            let l = self.links[Self::link_at(w.x, i)];
            (l.next, l.next_score, l.span as usize, l.next_upper)
        };
        if next != NIL
            && (next_score < w.score || (next_score == w.score && self.member(next) < w.member))
        {
            w.r += span;
            w.x = Pos { node: next, upper };
        } else {
            if let Some(t) = trail {
                t.update[i] = w.x;
                t.rank[i] = w.r;
            }
            if i == w.floor {
                w.done = true;
            } else {
                w.level -= 1;
            }
        }
    }

    /// Links the unlinked node at `p` (score, member and level set) in place.
    fn link(&mut self, p: Pos) {
        let (mut update, mut rank) = self.search(self.score_of(p.node), self.member(p.node));
        self.link_after(p, &mut update, &mut rank);
    }

    /// Links the unlinked node at `p` after its predecessors `update` (of
    /// ranks `rank`) at every level.
    /// Levels above the list's are set to the header here (hence `&mut`).
    fn link_after(&mut self, p: Pos, update: &mut Update, rank: &mut [usize; MAX_LEVEL]) {
        let x = p.node;
        let score = self.score_of(x);
        let level = self.nodes[x as usize].level as usize;
        if level > self.level {
            for i in self.level..level {
                rank[i] = 0;
                update[i] = HEAD_POS;
                self.set_span(HEAD_POS, i, self.len);
            }
            self.level = level;
        }
        for i in 0..level {
            let u = update[i];
            if i == 0 {
                self.nodes[x as usize].next = self.nodes[u.node as usize].next;
                self.nodes[u.node as usize].next = x;
            } else {
                // x takes over u's link (and its cached forward node), u
                // now points at x.
                let d = rank[0] - rank[i];
                let (ua, xa) = (Self::link_at(u, i), Self::link_at(p, i));
                let old = self.links[ua];
                self.links[xa] = Link {
                    span: (old.span as usize).saturating_sub(d) as u32,
                    ..old
                };
                self.links[ua] = Link {
                    next: x,
                    span: (d + 1) as u32,
                    next_upper: p.upper,
                    next_score: score,
                };
            }
        }
        for (i, &u) in update.iter().enumerate().take(self.level).skip(level) {
            let s = self.span(u, i);
            self.set_span(u, i, s + 1);
        }
        let before = update[0].node;
        self.nodes[x as usize].prev = if before == HEAD { NIL } else { before };
        let n = self.nodes[x as usize].next;
        if n != NIL {
            self.nodes[n as usize].prev = x;
        } else {
            self.tail = x;
        }
        self.len += 1;
    }

    /// Unlinks the node at `p` given its predecessors; does not free it.
    fn unlink(&mut self, p: Pos, update: &Update) {
        let x = p.node;
        for (i, &u) in update.iter().enumerate().take(self.level) {
            if self.fwd(u, i) == x {
                if i == 0 {
                    self.nodes[u.node as usize].next = self.nodes[x as usize].next;
                } else {
                    // u takes over x's link and its cached forward node.
                    let (ua, xa) = (Self::link_at(u, i), Self::link_at(p, i));
                    let (us, xl) = (self.links[ua].span, self.links[xa]);
                    self.links[ua] = Link {
                        span: (us + xl.span).saturating_sub(1),
                        ..xl
                    };
                }
            } else {
                let s = self.span(u, i).saturating_sub(1);
                self.set_span(u, i, s);
            }
        }
        let (before, after) = (self.prev(x), self.next(x));
        if after != NIL {
            self.nodes[after as usize].prev = before;
        } else {
            self.tail = before;
        }
        while self.level > 1 && self.fwd(HEAD_POS, self.level - 1) == NIL {
            self.level -= 1;
        }
        self.len -= 1;
    }

    /// Unlinks, unindexes and frees node `x`.
    fn delete_node(&mut self, x: u32) {
        let (update, _) = self.search(self.score_of(x), self.member(x));
        let p = self.pos_of(x, &update);
        self.unlink(p, &update);
        self.unindex(x);
        self.free_node(p);
    }

    fn push_sorted(&mut self, app: &mut Appender, member: &[u8], score: f64) {
        let level = self.random_level();
        let x = self.alloc_node(member, score, level);
        self.append(app, x);
        self.index_insert(x.node);
    }

    /// Links the node at `x` (score and level set) after every other one.
    fn append(&mut self, app: &mut Appender, x: Pos) {
        let score = self.score_of(x.node);
        let level = self.nodes[x.node as usize].level as usize;
        let r = self.len + 1;
        self.level = self.level.max(level);
        for i in 0..level {
            let p = app.last[i];
            if i == 0 {
                self.nodes[p.node as usize].next = x.node;
            } else {
                self.links[Self::link_at(p, i)] = Link {
                    next: x.node,
                    span: (r - app.last_rank[i]) as u32,
                    next_upper: x.upper,
                    next_score: score,
                };
            }
            app.last[i] = x;
            app.last_rank[i] = r;
        }
        let x = x.node;
        self.nodes[x as usize].prev = if self.len == 0 { NIL } else { self.tail };
        self.nodes[x as usize].next = NIL;
        self.tail = x;
        self.len += 1;
    }

    fn finish(&mut self, app: &Appender) {
        for i in 1..self.level {
            self.set_span(app.last[i], i, self.len - app.last_rank[i]);
        }
    }

    /// Rebuilds into fresh, dense arenas (after many removals).
    fn rebuild(&mut self) {
        let mut fresh = SkipList::build(self.len, self.hasher.clone(), self.rng);
        let mut app = Appender::new();
        let mut x = self.first();
        while x != NIL {
            let (m, s) = self.entry(x);
            fresh.push_sorted(&mut app, m, s);
            x = self.next(x);
        }
        fresh.finish(&app);
        *self = fresh;
    }

    /// Compacts when most slots are free or most heap bytes are garbage.
    fn maybe_compact(&mut self) {
        let slots = self.nodes.len();
        if self.len == 0 && slots > 1 {
            *self = SkipList::build(0, self.hasher.clone(), self.rng);
        } else if (slots > 1024 && self.len < slots / 4)
            || (self.heap_garbage > 4096 && self.heap_garbage > self.heap.len() / 2)
        {
            self.rebuild();
        }
    }

    // ----- public operations ----------------------------------------------

    /// The node holding `member`.
    #[inline]
    pub fn find(&self, member: &[u8]) -> Option<u32> {
        let h = self.hash(member);
        self.index
            .find(h, |x| member_of(&self.nodes, &self.heap, x) == member)
    }

    /// [`SkipList::find`] of every member of `members`, pushed to `out` in
    /// order. The first index slot of every member, then the node it
    /// names, are loaded for all members before any find runs: loads that
    /// do not depend on each other, so their cache misses overlap, and the
    /// finds then read from cache.
    pub fn find_many(&self, members: &[&[u8]], out: &mut impl Extend<Option<u32>>) {
        let hashes: SmallVec<[u64; 16]> = members.iter().map(|m| self.hash(m)).collect();
        let guesses: SmallVec<[Option<u32>; 16]> = hashes
            .iter()
            .map(|&h| self.index.first_candidate(h))
            .collect();
        for x in guesses.into_iter().flatten() {
            // A load whose value is used, so that it is not optimised away.
            std::hint::black_box(self.nodes[x as usize].member[0]);
        }
        out.extend(members.iter().zip(hashes).map(|(m, h)| {
            self.index
                .find(h, |x| member_of(&self.nodes, &self.heap, x) == *m)
        }));
    }

    /// Reads ahead what giving each member of `calls` its score will read
    /// (with `incr`, what adding it to the member's score will), so that
    /// the changes that follow, one at a time, find it in cache: the
    /// member's node and neighbours, and the walks to its old and new
    /// places, interleaved as in [`SkipList::rank_many`]. Changes nothing;
    /// a hint for a pipeline of ZADDs to one board.
    pub fn prepare_scores(&self, calls: &[(&[u8], f64)], incr: bool) {
        debug_assert!(!self.unordered, "order read while deferred");
        let members: SmallVec<[&[u8]; 16]> = calls.iter().map(|c| c.0).collect();
        let mut found: SmallVec<[Option<u32>; 16]> = SmallVec::new();
        self.find_many(&members, &mut found);
        let top = self.level - 1;
        let mut walks: SmallVec<[Walk<'_>; 32]> = SmallVec::new();
        for (&(member, score), x) in calls.iter().zip(found) {
            let Some(x) = x else {
                walks.push(Walk::new(score, member, top, 0));
                continue;
            };
            let old = self.score_of(x);
            let new = if incr { old + score } else { score };
            // Its neighbours, which any change reads; and the walks only
            // when the move is long (short ones relink level 0 alone, and
            // none past an end).
            let (p, n) = (self.prev(x), self.next(x));
            let near = if new > old { n } else { p };
            std::hint::black_box(if p == NIL { 0.0 } else { self.score_of(p) });
            if near != NIL && !self.looks_short(near, old, new) {
                walks.push(Walk::new(old, self.member(x), top, 0));
                walks.push(Walk::new(new, self.member(x), top, 0));
            }
        }
        let mut running = true;
        while running {
            running = false;
            for w in &mut walks {
                self.step(w, None);
                running |= !w.done;
            }
        }
        // The node after each new place, whose backward link changes.
        for w in &walks {
            let n = self.next(w.x.node);
            std::hint::black_box(if n == NIL { 0 } else { self.prev(n) });
        }
    }

    /// Stops keeping the order, to apply many changes cheaply (AOF loading):
    /// until [`SkipList::restore_order`], only `len`, `find`, `entry`,
    /// `insert_new`, `update_score`, `remove` and `memory_usage` may be
    /// called. A change then costs a hash lookup instead of two walks.
    pub fn defer_order(&mut self) {
        self.unordered = true;
    }

    /// Whether the order is deferred.
    pub fn order_deferred(&self) -> bool {
        self.unordered
    }

    /// Puts the members back in order after [`SkipList::defer_order`]:
    /// sorts them (O(n log n)) and links the nodes where they are, with
    /// fresh levels and link blocks; the index and members stay as they are.
    pub fn restore_order(&mut self) {
        if !self.unordered {
            return;
        }
        let mut live: Vec<(f64, u32)> = Vec::with_capacity(self.len);
        for x in 1..self.nodes.len() {
            let n = &self.nodes[x];
            if n.level != 0 {
                live.push((n.score, x as u32));
            }
        }
        // Scores are never NaN; -0 and 0 tie, then members order (memcmp).
        live.sort_unstable_by(|a, b| {
            a.0.partial_cmp(&b.0)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then_with(|| self.member(a.1).cmp(self.member(b.1)))
        });
        self.links = Vec::new();
        self.links = Vec::with_capacity(MAX_LEVEL - 1 + live.len() / 3);
        self.links.resize(MAX_LEVEL - 1, EMPTY_LINK);
        self.free_links = [NIL; MAX_LEVEL];
        self.nodes[HEAD as usize].next = NIL;
        self.tail = NIL;
        self.len = 0;
        self.level = 1;
        self.unordered = false;
        let mut app = Appender::new();
        for &(_, x) in &live {
            let level = self.random_level();
            self.nodes[x as usize].level = level as u8;
            let upper = if level > 1 {
                self.alloc_links(level - 1)
            } else {
                NIL
            };
            self.append(&mut app, Pos { node: x, upper });
        }
        self.finish(&app);
    }

    /// Adds a member that is not in the set.
    pub fn insert_new(&mut self, member: &[u8], score: f64) {
        if self.unordered {
            // Levels are drawn when the order is restored.
            let p = self.alloc_node(member, score, 1);
            self.index_insert(p.node);
            self.len += 1;
            return;
        }
        let level = self.random_level();
        let p = self.alloc_node(member, score, level);
        self.link(p);
        self.index_insert(p.node);
    }

    /// Changes the score of node `x`, moving it if its order changes.
    pub fn update_score(&mut self, x: u32, score: f64) {
        if self.unordered {
            self.nodes[x as usize].score = score;
            return;
        }
        let level = self.nodes[x as usize].level as usize;
        if level == 1 {
            if self.shift_short(x, score) {
                return;
            }
        } else if self.order_holds(x, score) {
            // Only the copies of the score in the links pointing at x (one
            // per upper level) need the new value.
            let (update, _) = self.search(self.score_of(x), self.member(x));
            for (i, &u) in update.iter().enumerate().take(level).skip(1) {
                self.links[Self::link_at(u, i)].next_score = score;
            }
            self.nodes[x as usize].score = score;
            return;
        }
        self.move_node(x, score);
    }

    /// Whether node `x` stays between its neighbours with `score`.
    fn order_holds(&self, x: u32, score: f64) -> bool {
        let (p, n) = (self.prev(x), self.next(x));
        (p == NIL || self.score_of(p) < score) && (n == NIL || self.score_of(n) > score)
    }

    /// Gives node `x`, which has one level, the score `score` when its new
    /// place is at most [`SHORT_MOVE`] neighbours away, all of one level:
    /// only level-0 links change then, as every upper link spans the same
    /// nodes before and after. False, changing nothing, otherwise, and
    /// without walking when the score gap to the neighbour says the move is
    /// long (a walk that gives up costs a cache miss a step).
    fn shift_short(&mut self, x: u32, score: f64) -> bool {
        debug_assert_eq!(self.nodes[x as usize].level, 1);
        let old = self.score_of(x);
        // Whether node n comes before x's new place.
        let before = |n: u32| {
            let s = self.score_of(n);
            s < score || (s == score && self.member(n) < self.member(x))
        };
        let (p, n) = (self.prev(x), self.next(x));
        // The move goes forward past n or backward past p, or nowhere.
        let forward = n != NIL && before(n);
        if !forward && (p == NIL || before(p)) {
            self.nodes[x as usize].score = score;
            return true;
        }
        let first = if forward { n } else { p };
        if !self.looks_short(first, old, score) {
            return false;
        }
        // Cross neighbours while they are on the wrong side of the new
        // place; x goes after `after` (NIL: the front).
        let (mut m, mut steps) = (first, 1);
        let after = loop {
            let beyond = if forward { self.next(m) } else { self.prev(m) };
            if self.nodes[m as usize].level > 1 || steps > SHORT_MOVE {
                return false;
            }
            if beyond == NIL || before(beyond) != forward {
                break if forward { m } else { beyond };
            }
            m = beyond;
            steps += 1;
        };
        // Out of the level-0 list...
        if p == NIL {
            self.nodes[HEAD as usize].next = n;
        } else {
            self.nodes[p as usize].next = n;
        }
        if n == NIL {
            self.tail = p;
        } else {
            self.nodes[n as usize].prev = p;
        }
        // ...and back in after `after`.
        let next = if after == NIL {
            std::mem::replace(&mut self.nodes[HEAD as usize].next, x)
        } else {
            std::mem::replace(&mut self.nodes[after as usize].next, x)
        };
        let node = &mut self.nodes[x as usize];
        node.prev = after;
        node.next = next;
        node.score = score;
        if next == NIL {
            self.tail = x;
        } else {
            self.nodes[next as usize].prev = x;
        }
        true
    }

    /// Whether a node moving from score `old` to `score` past its neighbour
    /// `first` (on the side it moves to) likely stays within
    /// [`SHORT_MOVE`] neighbours: the distance beyond `first` is at most
    /// that many times the gap to it.
    fn looks_short(&self, first: u32, old: f64, score: f64) -> bool {
        let s = self.score_of(first);
        (score - s).abs() <= (s - old).abs() * SHORT_MOVE as f64
    }

    /// Moves node `x` to where `score` puts it: the paths to its old and new
    /// places are searched together, and the new one is corrected for x's
    /// removal (x as a predecessor gives way to its own; ranks after x drop
    /// by one).
    fn move_node(&mut self, x: u32, score: f64) {
        let (mut del, mut ins) = (Trail::new(), Trail::new());
        let member = self.member(x);
        self.search_two(
            (self.score_of(x), member),
            (score, member),
            &mut del,
            &mut ins,
        );
        // Levels at and above the list's are the header's in both trails.
        let level = self.level;
        let p = self.pos_of(x, &del.update);
        let rank_x = del.rank[0] + 1;
        self.unlink(p, &del.update);
        for i in 0..level {
            if ins.update[i].node == x {
                ins.update[i] = del.update[i];
                ins.rank[i] = del.rank[i];
            } else if ins.rank[i] > rank_x {
                ins.rank[i] -= 1;
            }
        }
        self.nodes[x as usize].score = score;
        self.link_after(p, &mut ins.update, &mut ins.rank);
    }

    /// Removes `member`; true when it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self.find(member) {
            Some(x) if self.unordered => {
                self.unindex(x);
                // Its link block (if it had upper levels before the order
                // was deferred) is dropped with the old arenas on restore.
                self.nodes[x as usize].level = 1;
                self.free_node(Pos {
                    node: x,
                    upper: NIL,
                });
                self.len -= 1;
                true
            }
            Some(x) => {
                self.delete_node(x);
                self.maybe_compact();
                true
            }
            None => false,
        }
    }

    /// 1-based rank of node `x`: the rank of its predecessor at level 1
    /// (a walk of the upper levels) plus its distance from that node, found
    /// by stepping back from x to the first node with upper levels. The two
    /// walks are independent and run interleaved, so their misses overlap.
    pub fn rank_of(&self, x: u32) -> usize {
        let mut walk = [self.ranking(x)];
        self.run_rankings(&mut walk);
        walk[0].up.r + walk[0].d
    }

    /// [`SkipList::rank_of`] of every node of `xs`, pushed to `out` in
    /// order. The walks run interleaved, a step of each in turn, so that the
    /// cache misses of different walks overlap instead of adding up: with 16
    /// walks on a million members a rank costs about half as much.
    pub fn rank_many(&self, xs: &[u32], out: &mut impl Extend<usize>) {
        let mut walks: SmallVec<[Ranking<'_>; 16]> = xs.iter().map(|&x| self.ranking(x)).collect();
        self.run_rankings(&mut walks);
        out.extend(walks.iter().map(|w| w.up.r + w.d));
    }

    /// The rank walks of node `x`, not started.
    fn ranking(&self, x: u32) -> Ranking<'_> {
        debug_assert!(!self.unordered, "order read while deferred");
        Ranking {
            up: Walk::new(self.score_of(x), self.member(x), self.level - 1, 1),
            back: x,
            d: 0,
            back_done: false,
        }
    }

    /// Runs rank walks to their ends, a step of each in turn.
    fn run_rankings(&self, walks: &mut [Ranking<'_>]) {
        let mut running = true;
        while running {
            running = false;
            for w in walks.iter_mut() {
                self.step(&mut w.up, None);
                if !w.back_done {
                    (w.back, w.back_done) = self.step_back(w.back);
                    w.d += 1;
                }
                running |= !(w.up.done && w.back_done);
            }
        }
    }

    /// One step of a rank's walk back at level 0: the node before `x`, and
    /// whether the walk ends there (it has upper levels, or x was first).
    #[inline(always)]
    fn step_back(&self, x: u32) -> (u32, bool) {
        let p = self.nodes[x as usize].prev;
        (p, p == NIL || self.nodes[p as usize].level > 1)
    }

    /// The node at 1-based `rank`, or NIL.
    pub fn node_at(&self, rank: usize) -> u32 {
        if rank == 0 || rank > self.len {
            return NIL;
        }
        if rank == 1 {
            return self.first();
        }
        if rank == self.len {
            return self.tail;
        }
        let (x, t) = self.descend(|_, _, after| after <= rank, |_, _, t| t != rank);
        if t == rank {
            x
        } else {
            NIL
        }
    }

    /// Redis's `zslIsInRange` / `zslIsInLexRange`.
    fn may_hold<B: Bounds>(&self, range: &B) -> bool {
        if range.is_empty() || self.len == 0 {
            return false;
        }
        let (lm, ls) = self.entry(self.tail);
        let (fm, fs) = self.entry(self.first());
        range.gte_min(ls, lm) && range.lte_max(fs, fm)
    }

    /// The first node in `range` and its 1-based rank.
    pub fn first_in_range<B: Bounds>(&self, range: &B) -> Option<(u32, usize)> {
        if !self.may_hold(range) {
            return None;
        }
        let (x, r) = self.descend(|n, s, _| !range.gte_min(s, self.member(n)), |_, _, _| true);
        let x = self.next(x);
        if x == NIL || !range.lte_max(self.score_of(x), self.member(x)) {
            return None;
        }
        Some((x, r + 1))
    }

    /// The last node in `range` and its 1-based rank.
    pub fn last_in_range<B: Bounds>(&self, range: &B) -> Option<(u32, usize)> {
        if !self.may_hold(range) {
            return None;
        }
        let (x, r) = self.descend(|n, s, _| range.lte_max(s, self.member(n)), |_, _, _| true);
        if x == HEAD || !range.gte_min(self.score_of(x), self.member(x)) {
            return None;
        }
        Some((x, r))
    }

    /// Number of members in `range` (ranks of the first and last in it).
    pub fn count_in_range<B: Bounds>(&self, range: &B) -> usize {
        let Some((_, first)) = self.first_in_range(range) else {
            return 0;
        };
        let mut count = self.len - (first - 1);
        if let Some((_, last)) = self.last_in_range(range) {
            count = count.saturating_sub(self.len - last);
        }
        count
    }

    /// Removes the members in `range`; returns how many.
    pub fn remove_range<B: Bounds>(&mut self, range: &B) -> usize {
        let mut update = [HEAD_POS; MAX_LEVEL];
        let (x, _) = self.descend(
            |n, s, _| !range.gte_min(s, self.member(n)),
            |i, x, _| {
                update[i] = x;
                true
            },
        );
        let mut x = self.next(x);
        let mut removed = 0;
        while x != NIL && range.lte_max(self.score_of(x), self.member(x)) {
            let n = self.next(x);
            let p = self.pos_of(x, &update);
            self.unlink(p, &update);
            self.unindex(x);
            self.free_node(p);
            removed += 1;
            x = n;
        }
        self.maybe_compact();
        removed
    }

    /// Removes 0-based ranks `start..=end`; returns how many.
    pub fn remove_range_by_rank(&mut self, start: usize, end: usize) -> usize {
        let mut update = [HEAD_POS; MAX_LEVEL];
        let (x, _) = self.descend(
            |_, _, after| after <= start,
            |i, x, _| {
                update[i] = x;
                true
            },
        );
        let mut x = self.next(x);
        let mut removed = 0;
        let mut at = start;
        while x != NIL && at <= end {
            let n = self.next(x);
            let p = self.pos_of(x, &update);
            self.unlink(p, &update);
            self.unindex(x);
            self.free_node(p);
            removed += 1;
            at += 1;
            x = n;
        }
        self.maybe_compact();
        removed
    }

    /// Calls `f` on up to `count` lowest members, lowest first, and removes them.
    pub fn pop_min(&mut self, count: usize, mut f: impl FnMut(&[u8], f64)) -> usize {
        let heads = [HEAD_POS; MAX_LEVEL];
        let mut n = 0;
        while n < count {
            let x = self.first();
            if x == NIL {
                break;
            }
            let (m, s) = self.entry(x);
            f(m, s);
            let p = self.pos_of(x, &heads);
            self.unlink(p, &heads);
            self.unindex(x);
            self.free_node(p);
            n += 1;
        }
        self.maybe_compact();
        n
    }

    /// Calls `f` on up to `count` highest members, highest first, and removes them.
    pub fn pop_max(&mut self, count: usize, mut f: impl FnMut(&[u8], f64)) -> usize {
        let mut n = 0;
        while n < count {
            let x = self.tail;
            if x == NIL {
                break;
            }
            let (m, s) = self.entry(x);
            f(m, s);
            self.delete_node(x);
            n += 1;
        }
        self.maybe_compact();
        n
    }

    /// Visits up to `count` members from slot `cursor` on; returns the next
    /// cursor, 0 when the walk is complete.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8], f64)) -> u64 {
        let mut i = usize::try_from(cursor.max(1)).unwrap_or(usize::MAX);
        let mut seen = 0;
        let count = count.max(1);
        while i < self.nodes.len() && seen < count {
            if self.nodes[i].level != 0 {
                let (m, s) = self.entry(i as u32);
                f(m, s);
                seen += 1;
            }
            i += 1;
        }
        if i >= self.nodes.len() {
            0
        } else {
            i as u64
        }
    }

    /// Checks every invariant (tests only).
    #[cfg(test)]
    pub fn check(&self) {
        // Level 0 chain: order, backward links, count.
        let mut x = self.first();
        let mut prev = NIL;
        let mut n = 0;
        let mut ranks = std::collections::HashMap::new();
        while x != NIL {
            n += 1;
            ranks.insert(x, n);
            assert_eq!(self.prev(x), prev);
            if prev != NIL {
                let (pm, ps) = self.entry(prev);
                let (m, s) = self.entry(x);
                assert!(ps < s || (ps == s && pm < m), "order");
            }
            assert_eq!(self.find(self.member(x)), Some(x), "index");
            prev = x;
            x = self.next(x);
        }
        assert_eq!(self.tail, prev);
        assert_eq!(n, self.len);
        assert_eq!(self.index.len(), self.len);
        // Higher levels: spans equal rank differences, the cached scores are
        // the nodes' and every link to a node names the same link block.
        let mut blocks = std::collections::HashMap::new();
        for i in 1..self.level {
            let mut x = HEAD_POS;
            let mut r = 0usize;
            loop {
                let l = self.links[Self::link_at(x, i)];
                let nx = l.next;
                if nx == NIL {
                    break;
                }
                let nr = ranks[&nx];
                assert_eq!(l.span as usize, nr - r, "span at level {i}");
                let score = self.score_of(nx);
                assert_eq!({ l.next_score }.to_bits(), score.to_bits(), "cached score");
                let upper = *blocks.entry(nx).or_insert(l.next_upper);
                assert_eq!({ l.next_upper }, upper, "cached block at level {i}");
                assert!(self.nodes[nx as usize].level as usize > i);
                r = nr;
                x = Pos {
                    node: nx,
                    upper: l.next_upper,
                };
            }
        }
        assert!(self.level == 1 || self.fwd(HEAD_POS, self.level - 1) != NIL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_and_link_sizes() {
        assert_eq!(std::mem::size_of::<Node>(), 32);
        assert_eq!(std::mem::size_of::<Link>(), 20);
    }

    #[test]
    fn levels_follow_p_one_quarter() {
        let mut sl = SkipList::with_capacity(0);
        let mut counts = [0usize; MAX_LEVEL + 1];
        for _ in 0..40_000 {
            counts[sl.random_level()] += 1;
        }
        assert_eq!(counts[0], 0);
        // Expected 30_000 / 7_500 / 1_875; allow wide margins.
        assert!((28_000..32_000).contains(&counts[1]), "{counts:?}");
        assert!((6_500..8_500).contains(&counts[2]), "{counts:?}");
    }

    #[test]
    fn insert_rank_remove_keep_invariants() {
        let mut sl = SkipList::with_capacity(0);
        let long = |i: u32| format!("a-rather-long-member-{i:05}").into_bytes();
        for i in 0..2000u32 {
            let m = if i % 3 == 0 {
                long(i)
            } else {
                format!("m{i}").into_bytes()
            };
            sl.insert_new(&m, (i % 97) as f64);
        }
        sl.check();
        for r in 1..=sl.len() {
            assert_eq!(sl.rank_of(sl.node_at(r)), r);
        }
        for i in (0..2000u32).step_by(2) {
            let m = if i % 3 == 0 {
                long(i)
            } else {
                format!("m{i}").into_bytes()
            };
            assert!(sl.remove(&m));
        }
        sl.check();
        assert_eq!(sl.len(), 1000);
        // Updates that move and that stay.
        let x = sl.find(b"m1").unwrap();
        sl.update_score(x, 1e9);
        assert_eq!(sl.tail, x);
        sl.update_score(x, 1e9 + 1.0);
        sl.check();
        assert_eq!(sl.remove_range_by_rank(10, 19), 10);
        sl.check();
        assert_eq!(sl.len(), 990);
    }

    #[test]
    fn small_and_large_score_changes_keep_order_and_ranks() {
        // Increments of a few points (short moves past one-level nodes,
        // ties broken by member, moves to either end) mixed with jumps.
        let mut sl = SkipList::with_capacity(0);
        let mut model = std::collections::BTreeMap::new();
        let mut rng = 0x2545_F491_4F6C_DD1Du64;
        let mut next = |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let member = |i: u64| format!("m:{i:04}").into_bytes();
        for i in 0..1500u64 {
            sl.insert_new(&member(i), (i % 300) as f64);
            model.insert(member(i), (i % 300) as f64);
        }
        for step in 0..6000 {
            let m = member(next(1500));
            let x = sl.find(&m).unwrap();
            let old = sl.score_of(x);
            let score = match next(10) {
                0 => old + (next(2000) as f64) - 1000.0,
                1 => -1.0 - next(3) as f64,
                2 => 400.0 + next(3) as f64,
                _ => old + (next(7) as f64) - 3.0,
            };
            sl.update_score(x, score);
            model.insert(m, score);
            if step % 500 == 0 {
                sl.check();
            }
        }
        sl.check();
        let mut want: Vec<(f64, Vec<u8>)> = model.into_iter().map(|(m, s)| (s, m)).collect();
        want.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        let mut x = sl.first();
        for (r, (s, m)) in want.iter().enumerate() {
            assert_eq!(sl.entry(x), (m.as_slice(), *s));
            assert_eq!(sl.rank_of(x), r + 1);
            x = sl.next(x);
        }
        assert_eq!(x, NIL);
    }

    #[test]
    fn deferred_order_gives_the_same_set() {
        // The same changes applied to a set kept in order and to one whose
        // order is deferred, then restored: same members, scores and order.
        let mut kept = SkipList::with_capacity(0);
        let mut deferred = SkipList::with_capacity(0);
        let name = |i: u64| {
            if i.is_multiple_of(5) {
                format!("a-long-member-past-the-inline-size-{i}").into_bytes()
            } else {
                format!("m:{i:012}").into_bytes()
            }
        };
        for i in 0..3000u64 {
            kept.insert_new(&name(i), (i % 50) as f64);
            deferred.insert_new(&name(i), (i % 50) as f64);
        }
        deferred.defer_order();
        let mut rng = 7u64;
        for step in 0..20_000u64 {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let m = name((rng >> 33) % 4000);
            // Ties, -0 and 0, infinities and big moves.
            let score = match step % 7 {
                0 => -0.0,
                1 => f64::INFINITY,
                2 => ((rng >> 20) % 1000) as f64 * 1e6,
                _ => ((rng >> 40) % 60) as f64,
            };
            for sl in [&mut kept, &mut deferred] {
                match (step % 4, sl.find(&m)) {
                    (0, Some(_)) => assert!(sl.remove(&m)),
                    (_, Some(x)) => sl.update_score(x, score),
                    (_, None) => sl.insert_new(&m, score),
                }
            }
            assert_eq!(kept.len(), deferred.len());
        }
        assert!(deferred.order_deferred());
        deferred.restore_order();
        assert!(!deferred.order_deferred());
        deferred.check();
        let (mut a, mut b) = (kept.first(), deferred.first());
        while a != NIL {
            let ((ma, sa), (mb, sb)) = (kept.entry(a), deferred.entry(b));
            assert_eq!((ma, sa.to_bits()), (mb, sb.to_bits()));
            (a, b) = (kept.next(a), deferred.next(b));
        }
        assert_eq!(b, NIL);
    }

    #[test]
    fn heavy_removal_compacts() {
        let mut sl = SkipList::with_capacity(0);
        for i in 0..5000u32 {
            sl.insert_new(format!("member-number-{i}").as_bytes(), i as f64);
        }
        let before = sl.memory_usage();
        assert_eq!(sl.pop_min(4900, |_, _| {}), 4900);
        sl.check();
        assert!(sl.nodes.len() < 1000, "{}", sl.nodes.len());
        assert!(sl.memory_usage() < before / 4);
        assert_eq!(sl.entry(sl.first()).0, b"member-number-4900");
    }
}
