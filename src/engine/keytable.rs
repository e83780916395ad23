//! The table of one [`Db`](super::Db): key → [`Entry`], built for memory.
//!
//! Each key is one heap node holding its [`Entry`] (value, expiry time,
//! access clock) and the key; the table's slots hold only a pointer to the
//! node (8 bytes and hashbrown's control byte). Nodes come in three sizes,
//! each jemalloc size class filled to the byte, and each size has its own
//! hashbrown table (a key's length picks the table, so a lookup still
//! probes one):
//!
//! - a key of up to [`SHORT_KEY`] (15) bytes: a 64-byte node;
//! - up to [`MID_KEY`] (31) bytes: an 80-byte node;
//! - longer: a 64-byte node pointing to the key's own allocation.
//!
//! Where a `HashMap<Bytes, Entry>` slot took 80 bytes (a 32-byte `Bytes`
//! beside the 48-byte entry) and the key's bytes a second allocation, a key
//! such as `user:1234567` costs one 64-byte node and 9 bytes per slot:
//! about 83 bytes a key at the table's usual load (2,000,000 keys over 64
//! shards: 65,536 slots a shard, half full).
//!
//! The slot's hash is not stored: it is computed again from the node's key
//! when the table grows. The [`Db`](super::Db)'s expiry index names a key
//! by its expiry time and slot hash ([`KeyTable::hash`]), and finds the key
//! again through [`KeyTable::find_expiring`] and friends. Watches and the
//! index itself are the [`Db`](super::Db)'s; this is only the map.
//!
//! Slots are numbered (the three parts' buckets one after the other) for
//! eviction's sampling and a snapshot's walk. While a snapshot walks them
//! the table is frozen ([`KeyTable::freeze`]): no part grows (growing
//! moves every entry to another slot); a key added to a full part goes
//! into a spill table numbered after the parts, moved in when thawed.

use hashbrown::hash_table::Entry as Slot;
use hashbrown::HashTable;

use super::keyspace::{Entry, KeyHasher};
use super::prefetch;

/// Longest key stored in a 64-byte node.
pub const SHORT_KEY: usize = 15;
/// Longest key stored in an 80-byte node; a longer one gets its own
/// allocation.
pub const MID_KEY: usize = 31;

/// A key's bytes as a node holds them.
trait NodeKey: Sized {
    fn new(key: &[u8]) -> Self;
    fn as_bytes(&self) -> &[u8];
}

/// Up to `N` bytes of key inside the node (the caller picks `N` by the
/// key's length).
#[derive(Debug)]
struct Inline<const N: usize> {
    len: u8,
    bytes: [u8; N],
}

impl<const N: usize> NodeKey for Inline<N> {
    fn new(key: &[u8]) -> Self {
        let mut bytes = [0; N];
        let len = key.len().min(N);
        bytes[..len].copy_from_slice(&key[..len]);
        Inline {
            len: len as u8,
            bytes,
        }
    }

    fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..self.len as usize).unwrap_or(&[])
    }
}

/// A long key, in its own allocation.
#[derive(Debug)]
struct Heap(Box<[u8]>);

impl NodeKey for Heap {
    fn new(key: &[u8]) -> Self {
        Heap(key.into())
    }

    fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// One key and its entry, in one allocation.
#[derive(Debug)]
struct Node<K> {
    entry: Entry,
    key: K,
}

/// Stored buckets whose nodes a walk starts loading together
/// ([`Part::scan`]).
const SCAN_GROUP: usize = 8;

type Short = Node<Inline<SHORT_KEY>>;
type Mid = Node<Inline<MID_KEY>>;
type Long = Node<Heap>;

/// The slot hash of a key whose keyspace hash is `h`. The shard is the top
/// bits of `h`, so within a shard those bits are all alike; hashbrown takes
/// its 7-bit control tag from the top bits, so they are mixed in from the
/// rest (an odd multiplier carries every lower bit up) to keep the tag a
/// filter. The low bits, which pick the bucket, stay as random as `h`'s.
fn slot_hash(h: u64) -> u64 {
    h.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// The nodes of one size.
#[derive(Debug)]
struct Part<K> {
    table: HashTable<Box<Node<K>>>,
}

impl<K: NodeKey> Part<K> {
    fn new() -> Self {
        Part {
            table: HashTable::new(),
        }
    }

    #[inline]
    fn get(&self, h: u64, key: &[u8]) -> Option<&Entry> {
        self.table
            .find(h, |n| n.key.as_bytes() == key)
            .map(|n| &n.entry)
    }

    /// Starts loading the nodes a lookup of slot hash `h` would compare
    /// (those whose tag matches in its bucket group) without reading them:
    /// the lookup's own misses on the control bytes and slots happen here.
    #[inline]
    fn prefetch(&self, h: u64) {
        let _ = self.table.find(h, |n| {
            prefetch::read::<Node<K>>(&**n);
            false
        });
    }

    #[inline]
    fn get_mut(&mut self, h: u64, key: &[u8]) -> Option<&mut Entry> {
        self.table
            .find_mut(h, |n| n.key.as_bytes() == key)
            .map(|n| &mut n.entry)
    }

    #[inline]
    fn get_or_vacant<'a>(
        &'a mut self,
        hasher: &KeyHasher,
        h: u64,
        key: &[u8],
    ) -> Result<&'a mut Entry, hashbrown::hash_table::VacantEntry<'a, Box<Node<K>>>> {
        match self.table.entry(
            h,
            |n| n.key.as_bytes() == key,
            |n| slot_hash(hasher.hash_one(n.key.as_bytes())),
        ) {
            Slot::Occupied(o) => Ok(&mut o.into_mut().entry),
            Slot::Vacant(slot) => Err(slot),
        }
    }

    fn remove(&mut self, h: u64, key: &[u8]) -> Option<Entry> {
        let found = self.table.find_entry(h, |n| n.key.as_bytes() == key).ok()?;
        let (node, _) = found.remove();
        Some(node.entry)
    }

    fn iter(&self) -> impl Iterator<Item = (&[u8], &Entry)> {
        self.table.iter().map(|n| (n.key.as_bytes(), &n.entry))
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = (&[u8], &mut Entry)> {
        self.table.iter_mut().map(|n| {
            let n = &mut **n;
            (n.key.as_bytes(), &mut n.entry)
        })
    }

    /// Visits every node whose slot hash is `h` (its bucket and tag) until
    /// `f` returns false.
    fn visit_hash(&self, h: u64, f: &mut dyn FnMut(&[u8], &Entry) -> bool) {
        let mut more = true;
        let _ = self.table.find(h, |n| {
            more = more && f(n.key.as_bytes(), &n.entry);
            false
        });
    }

    /// `hash` tells a key's own slot hash: the probe for `h` also meets
    /// keys of other hashes whose short tag matches.
    fn find_expiring(
        &self,
        h: u64,
        at: u64,
        hash: &dyn Fn(&[u8]) -> u64,
    ) -> Option<(&[u8], &Entry)> {
        self.table
            .find(h, |n| {
                n.entry.expire_at() == Some(at) && hash(n.key.as_bytes()) == h
            })
            .map(|n| (n.key.as_bytes(), &n.entry))
    }

    // A walk by slot: [`KeyTable`] numbers this part's buckets after the
    // smaller node sizes' parts.

    fn buckets(&self) -> usize {
        self.table.num_buckets()
    }

    fn get_at(&self, b: usize) -> Option<(&[u8], &Entry)> {
        self.table
            .get_bucket(b)
            .map(|n| (n.key.as_bytes(), &n.entry))
    }

    /// Offers `f` the stored buckets among `from..to` (numbered from
    /// `base` on) until it returns false; returns whether it never did.
    /// The nodes of the next [`SCAN_GROUP`] stored buckets start loading
    /// before `f` sees the first of them: a node is a cache miss (its
    /// key's length and the entry are read), and eviction's sample of 5
    /// keys took them one after another.
    #[inline]
    fn scan(
        &self,
        from: usize,
        to: usize,
        base: usize,
        f: &mut dyn FnMut(usize, &[u8], &Entry) -> bool,
    ) -> bool {
        let mut b = from;
        while b < to {
            let mut group = [0usize; SCAN_GROUP];
            let mut len = 0;
            while b < to && len < SCAN_GROUP {
                if let Some(n) = self.table.get_bucket(b) {
                    // Only addresses: the node is not read here.
                    prefetch::read(&n.entry);
                    prefetch::read(&n.key);
                    group[len] = b;
                    len += 1;
                }
                b += 1;
            }
            for &at in &group[..len] {
                if let Some(n) = self.table.get_bucket(at) {
                    if !f(base + at, n.key.as_bytes(), &n.entry) {
                        return false;
                    }
                }
            }
        }
        true
    }

    fn remove_at(&mut self, b: usize) -> Option<Entry> {
        let (node, _) = self.table.get_bucket_entry(b).ok()?.remove();
        Some(node.entry)
    }

    fn slot_mut(&mut self, b: usize) -> Option<(&[u8], &mut Entry)> {
        self.table.get_bucket_mut(b).map(|n| {
            let n = &mut **n;
            (n.key.as_bytes(), &mut n.entry)
        })
    }

    fn bucket_of(&self, h: u64, key: &[u8]) -> Option<usize> {
        self.table.find_bucket_index(h, |n| n.key.as_bytes() == key)
    }

    /// Whether one more key makes the table grow, moving every entry.
    fn full(&self) -> bool {
        self.table.len() >= self.table.capacity()
    }

    /// Moves every node of `other` (whose keys are not here) into this
    /// part, which grows as it must.
    fn take_all(&mut self, hasher: &KeyHasher, other: &mut Part<K>) {
        let rehash = |n: &Node<K>| slot_hash(hasher.hash_one(n.key.as_bytes()));
        self.table.reserve(other.table.len(), |n| rehash(n));
        for n in other.table.drain() {
            let h = rehash(&n);
            self.table.insert_unique(h, n, |n| rehash(n));
        }
    }
}

/// The map of one database part: keys to entries, one node per key.
#[derive(Debug)]
pub struct KeyTable {
    short: Part<Inline<SHORT_KEY>>,
    mid: Part<Inline<MID_KEY>>,
    long: Part<Heap>,
    hasher: KeyHasher,
    /// Set while a snapshot walks the slots ([`KeyTable::freeze`]): no
    /// part may grow (growing moves every entry to another slot).
    walking: bool,
    /// Whether an insertion takes the slow path: while `walking`, or
    /// after it while spilled keys wait to move into the parts.
    frozen: bool,
    /// While frozen, the keys added when their part was full: a small
    /// table of its own (never frozen, so it grows freely), numbered after
    /// this table's slots. A key is here or in the parts, never both.
    /// Moved into the parts by the first insertion after the walk (which
    /// grows the part then, as it would have with no walk) or by the next
    /// freeze.
    spill: Option<Box<KeyTable>>,
}

/// Which node size holds a key.
enum Size {
    Short,
    Mid,
    Long,
}

impl Size {
    #[inline]
    fn of(key: &[u8]) -> Size {
        if key.len() <= SHORT_KEY {
            Size::Short
        } else if key.len() <= MID_KEY {
            Size::Mid
        } else {
            Size::Long
        }
    }
}

/// Runs `$body` with `$p` bound to the part that holds keys as long as
/// `$key`.
macro_rules! by_len {
    ($self:expr, $key:expr, |$p:ident| $body:expr) => {
        match Size::of($key) {
            Size::Short => {
                let $p = &$self.short;
                $body
            }
            Size::Mid => {
                let $p = &$self.mid;
                $body
            }
            Size::Long => {
                let $p = &$self.long;
                $body
            }
        }
    };
    (mut $self:expr, $key:expr, |$p:ident| $body:expr) => {
        match Size::of($key) {
            Size::Short => {
                let $p = &mut $self.short;
                $body
            }
            Size::Mid => {
                let $p = &mut $self.mid;
                $body
            }
            Size::Long => {
                let $p = &mut $self.long;
                $body
            }
        }
    };
}

impl KeyTable {
    /// An empty table placing keys with `hasher` (the keyspace's).
    pub fn new(hasher: KeyHasher) -> KeyTable {
        KeyTable {
            short: Part::new(),
            mid: Part::new(),
            long: Part::new(),
            hasher,
            walking: false,
            frozen: false,
            spill: None,
        }
    }

    /// From now on until [`KeyTable::thaw`], no slot of the table moves:
    /// a key added when its part is full (the part would grow) goes into a
    /// spill table instead, whose slots are numbered after the table's.
    /// Lookups, removals, iteration and walks by slot see both. A
    /// snapshot's walk by slot (`keycapture`) freezes the table it walks:
    /// the keys it spills were added after the snapshot point, so the walk
    /// never needs them.
    pub fn freeze(&mut self) {
        if !self.walking {
            self.merge_spill();
        }
        self.walking = true;
        self.frozen = true;
    }

    /// Ends [`KeyTable::freeze`]: the parts may grow again. The spilled
    /// keys stay where they are until the next insertion, which moves them
    /// into the parts (growing them: O(spilled keys) and the growth's own
    /// cost, what those insertions would have cost with no walk), so that
    /// the end of a snapshot's walk costs nothing.
    pub fn thaw(&mut self) {
        self.walking = false;
        self.frozen = self.spill.is_some();
    }

    /// Moves the spilled keys, if any, into the parts.
    fn merge_spill(&mut self) {
        if let Some(mut sp) = self.spill.take() {
            let hasher = &self.hasher;
            self.short.take_all(hasher, &mut sp.short);
            self.mid.take_all(hasher, &mut sp.mid);
            self.long.take_all(hasher, &mut sp.long);
        }
        self.frozen = self.walking;
    }

    /// Slots of the spill table (0 unless frozen): the last ones of
    /// [`KeyTable::slots`].
    #[cfg(test)]
    pub fn spilled_slots(&self) -> usize {
        self.spill.as_deref().map_or(0, KeyTable::part_slots)
    }

    /// Keys in the spill table (0 unless a walk ran since the last
    /// insertion).
    pub fn spilled(&self) -> usize {
        self.spill.as_deref().map_or(0, KeyTable::len)
    }

    /// The slot hash of `key`: what the [`Db`](super::Db)'s expiry index
    /// names it by.
    #[inline]
    pub fn hash(&self, key: &[u8]) -> u64 {
        slot_hash(self.hasher.hash_one(key))
    }

    /// Keys stored.
    pub fn len(&self) -> usize {
        self.short.table.len() + self.mid.table.len() + self.long.table.len() + self.spilled()
    }

    /// Whether no key is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entry under `key`.
    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<&Entry> {
        let h = self.hash(key);
        match by_len!(self, key, |p| p.get(h, key)) {
            Some(e) => Some(e),
            None => self.spill.as_deref()?.get(key),
        }
    }

    /// First step of reading `key` ahead (see
    /// [`Keyspace::prefetch`](super::Keyspace::prefetch)): loads its
    /// bucket's control bytes and slots and starts loading the nodes it
    /// could be in; `ks_hash` is the keyspace's hash of `key`. Not the
    /// spill table (a snapshot's, rarely used). Changes nothing.
    #[inline]
    pub fn prefetch_node(&self, key: &[u8], ks_hash: u64) {
        let h = slot_hash(ks_hash);
        by_len!(self, key, |p| p.prefetch(h))
    }

    /// [`KeyTable::get`] for a key whose keyspace hash is `ks_hash`, not
    /// in the spill table: the second step of reading it ahead.
    #[inline]
    pub fn get_hashed(&self, key: &[u8], ks_hash: u64) -> Option<&Entry> {
        let h = slot_hash(ks_hash);
        by_len!(self, key, |p| p.get(h, key))
    }

    /// The entry under `key`, for change.
    #[inline]
    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let h = self.hash(key);
        match by_len!(mut self, key, |p| p.get_mut(h, key)) {
            Some(e) => Some(e),
            None => self.spill.as_deref_mut()?.get_mut(key),
        }
    }

    /// The entry under `key`, or `Err` with a place to put one: a single
    /// lookup for "change it if present, add it if not".
    pub fn get_or_vacant(&mut self, key: &[u8]) -> Result<&mut Entry, Vacant<'_>> {
        if self.frozen {
            return self.get_or_vacant_frozen(key);
        }
        self.get_or_vacant_here(key)
    }

    /// [`KeyTable::get_or_vacant`] in the parts (which may grow).
    #[inline]
    fn get_or_vacant_here(&mut self, key: &[u8]) -> Result<&mut Entry, Vacant<'_>> {
        let h = self.hash(key);
        let hasher = &self.hasher;
        match Size::of(key) {
            Size::Short => self
                .short
                .get_or_vacant(hasher, h, key)
                .map_err(|s| Vacant(VacantIn::Short(s))),
            Size::Mid => self
                .mid
                .get_or_vacant(hasher, h, key)
                .map_err(|s| Vacant(VacantIn::Mid(s))),
            Size::Long => self
                .long
                .get_or_vacant(hasher, h, key)
                .map_err(|s| Vacant(VacantIn::Long(s))),
        }
    }

    /// [`KeyTable::get_or_vacant`] while frozen: the parts do not grow;
    /// a new key whose part is full gets a place in the spill table.
    #[cold]
    fn get_or_vacant_frozen(&mut self, key: &[u8]) -> Result<&mut Entry, Vacant<'_>> {
        if !self.walking {
            // The walk is over: the spilled keys move in first.
            self.merge_spill();
            return self.get_or_vacant_here(key);
        }
        let h = self.hash(key);
        let in_parts = by_len!(self, key, |p| p.get(h, key).is_some());
        let spill = self
            .spill
            .as_deref()
            .is_some_and(|sp| sp.get(key).is_some());
        if spill || (!in_parts && self.grows_on_insert(key)) {
            let hasher = &self.hasher;
            let sp = self
                .spill
                .get_or_insert_with(|| Box::new(KeyTable::new(hasher.clone())));
            return sp.get_or_vacant_here(key);
        }
        if !in_parts {
            // A free slot in a part that is not full: it does not grow.
            return self.get_or_vacant_here(key);
        }
        // Present: a lookup for change (an entry lookup of a full part
        // would grow it first).
        let KeyTable {
            short,
            mid,
            long,
            spill,
            hasher,
            ..
        } = self;
        let found = match Size::of(key) {
            Size::Short => short.get_mut(h, key),
            Size::Mid => mid.get_mut(h, key),
            Size::Long => long.get_mut(h, key),
        };
        match found {
            Some(e) => Ok(e),
            // Not reached: the key was found above.
            None => spill
                .get_or_insert_with(|| Box::new(KeyTable::new(hasher.clone())))
                .get_or_vacant_here(key),
        }
    }

    /// Removes `key`, returning its entry.
    pub fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let h = self.hash(key);
        match by_len!(mut self, key, |p| p.remove(h, key)) {
            Some(e) => Some(e),
            None => self.spill.as_deref_mut()?.remove(key),
        }
    }

    /// Every key and its entry of the parts (not the spill table).
    fn iter_parts(&self) -> impl Iterator<Item = (&[u8], &Entry)> {
        self.short
            .iter()
            .chain(self.mid.iter())
            .chain(self.long.iter())
    }

    /// Every key and its entry, in table order (the spilled ones last).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &Entry)> {
        self.iter_parts()
            .chain(self.spill.iter().flat_map(|sp| sp.iter_parts()))
    }

    /// [`KeyTable::iter_parts`] for change.
    fn iter_parts_mut(&mut self) -> impl Iterator<Item = (&[u8], &mut Entry)> {
        self.short
            .iter_mut()
            .chain(self.mid.iter_mut())
            .chain(self.long.iter_mut())
    }

    /// Every key and its entry, for change, in table order.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&[u8], &mut Entry)> {
        let KeyTable {
            short,
            mid,
            long,
            spill,
            ..
        } = self;
        short
            .iter_mut()
            .chain(mid.iter_mut())
            .chain(long.iter_mut())
            .chain(spill.iter_mut().flat_map(|sp| sp.iter_parts_mut()))
    }

    /// A key whose slot hash is `h` and whose expiry time is `at`, if any
    /// (nearly always the one key the expiry index entry `(at, h)` names).
    pub fn find_expiring(&self, h: u64, at: u64) -> Option<(&[u8], &Entry)> {
        let hash = |k: &[u8]| self.hash(k);
        self.short
            .find_expiring(h, at, &hash)
            .or_else(|| self.mid.find_expiring(h, at, &hash))
            .or_else(|| self.long.find_expiring(h, at, &hash))
            .or_else(|| self.spill.as_deref()?.find_expiring(h, at))
    }

    /// How many keys have slot hash `h` and expiry time `at`.
    pub fn count_expiring(&self, h: u64, at: u64) -> usize {
        let mut n = 0;
        // The table's probe for `h` also visits keys of other hashes whose
        // short tag matches: only this hash's keys are counted (another
        // key expiring at the same time would be counted twice, under its
        // own index entry too).
        let mut count = |k: &[u8], e: &Entry| {
            n += usize::from(e.expire_at() == Some(at) && self.hash(k) == h);
            true
        };
        self.short.visit_hash(h, &mut count);
        self.mid.visit_hash(h, &mut count);
        self.long.visit_hash(h, &mut count);
        n + self
            .spill
            .as_deref()
            .map_or(0, |sp| sp.count_expiring(h, at))
    }

    /// Bucket numbers where the middle and the long nodes' parts start:
    /// slots number the three parts' buckets one after the other.
    fn offsets(&self) -> (usize, usize) {
        let a = self.short.buckets();
        (a, a + self.mid.buckets())
    }

    /// Slots in the table, occupied or not: slot numbers run from 0 to
    /// this less one. A slot names the same key until a part grows (which
    /// renumbers the parts after it) or the table is cleared.
    pub fn slots(&self) -> usize {
        self.part_slots() + self.spill.as_deref().map_or(0, KeyTable::part_slots)
    }

    /// Slots of the parts: the spill table's are numbered from here on.
    #[inline]
    fn part_slots(&self) -> usize {
        self.short.buckets() + self.mid.buckets() + self.long.buckets()
    }

    /// The key and entry in slot `slot`, if it holds one. Walking slots
    /// from a random one is the sampling eviction needs (O(1) a key at
    /// the table's usual load), as Redis's `dictGetSomeKeys` walks
    /// buckets.
    #[inline]
    pub fn get_at(&self, slot: usize) -> Option<(&[u8], &Entry)> {
        let (a, b) = self.offsets();
        if slot < a {
            self.short.get_at(slot)
        } else if slot < b {
            self.mid.get_at(slot - a)
        } else if slot - b < self.long.buckets() {
            self.long.get_at(slot - b)
        } else {
            self.spilled_at(slot)
        }
    }

    /// The spill table's slot numbered `slot` here, if it holds a key.
    #[cold]
    fn spilled_at(&self, slot: usize) -> Option<(&[u8], &Entry)> {
        let n = self.part_slots();
        self.spill.as_deref()?.get_at(slot.checked_sub(n)?)
    }

    /// Removes the key in slot `slot`, if it holds one, without hashing
    /// or comparing the key (eviction, which sampled the slot).
    pub fn remove_at(&mut self, slot: usize) -> Option<Entry> {
        let (a, b) = self.offsets();
        let n = b + self.long.buckets();
        if slot < a {
            self.short.remove_at(slot)
        } else if slot < b {
            self.mid.remove_at(slot - a)
        } else if slot < n {
            self.long.remove_at(slot - b)
        } else {
            self.spill.as_deref_mut()?.remove_at(slot - n)
        }
    }

    /// Offers `f` the stored slots among the `count` slots from `start`
    /// on (wrapping to slot 0), in order, until it returns false: the
    /// walk eviction's sampling makes, each part's buckets in one loop.
    pub fn walk(
        &self,
        start: usize,
        count: usize,
        f: &mut dyn FnMut(usize, &[u8], &Entry) -> bool,
    ) {
        let total = self.slots();
        if total == 0 {
            return;
        }
        let (a, b) = self.offsets();
        let n = self.part_slots();
        let mut slot = start % total;
        let mut left = count.min(total);
        while left > 0 {
            let (end, more) = if slot < a {
                let end = a.min(slot + left);
                (end, self.short.scan(slot, end, 0, f))
            } else if slot < b {
                let end = b.min(slot + left);
                (end, self.mid.scan(slot - a, end - a, a, f))
            } else if slot < n {
                let end = n.min(slot + left);
                (end, self.long.scan(slot - b, end - b, b, f))
            } else {
                let end = total.min(slot + left);
                let more = match self.spill.as_deref() {
                    Some(sp) => sp.scan_parts(slot - n, end - n, n, f),
                    None => true,
                };
                (end, more)
            };
            if !more {
                return;
            }
            left -= end - slot;
            slot = if end == total { 0 } else { end };
        }
    }

    /// Offers `f` the stored slots of the parts among `from..to`
    /// (numbered from `base` on) until it returns false; returns whether
    /// it never did.
    fn scan_parts(
        &self,
        from: usize,
        to: usize,
        base: usize,
        f: &mut dyn FnMut(usize, &[u8], &Entry) -> bool,
    ) -> bool {
        let (a, b) = self.offsets();
        let n = self.part_slots();
        let clip = |lo: usize, hi: usize| (from.clamp(lo, hi), to.clamp(lo, hi));
        let (s0, s1) = clip(0, a);
        let (m0, m1) = clip(a, b);
        let (l0, l1) = clip(b, n);
        self.short.scan(s0, s1, base, f)
            && self.mid.scan(m0 - a, m1 - a, base + a, f)
            && self.long.scan(l0 - b, l1 - b, base + b, f)
    }

    /// The key and entry stored in slot `slot`, for change.
    pub fn slot_mut(&mut self, slot: usize) -> Option<(&[u8], &mut Entry)> {
        let (a, b) = self.offsets();
        let n = b + self.long.buckets();
        if slot < a {
            self.short.slot_mut(slot)
        } else if slot < b {
            self.mid.slot_mut(slot - a)
        } else if slot < n {
            self.long.slot_mut(slot - b)
        } else {
            self.spill.as_deref_mut()?.slot_mut(slot - n)
        }
    }

    /// The slot holding `key` and its entry.
    pub fn slot_of(&self, key: &[u8]) -> Option<(usize, &Entry)> {
        let h = self.hash(key);
        let (a, b) = self.offsets();
        let slot = match Size::of(key) {
            Size::Short => self.short.bucket_of(h, key),
            Size::Mid => self.mid.bucket_of(h, key).map(|i| a + i),
            Size::Long => self.long.bucket_of(h, key).map(|i| b + i),
        };
        match slot {
            Some(slot) => self.get_at(slot).map(|(_, e)| (slot, e)),
            None => {
                let n = self.part_slots();
                let (i, e) = self.spill.as_deref()?.slot_of(key)?;
                Some((n + i, e))
            }
        }
    }

    /// The slot of the `n`th entry in table order (O(n / 16): it skips
    /// empty groups of slots; the fallback for tables too sparse to walk).
    pub fn nth_slot(&self, n: usize) -> Option<usize> {
        let (a, b) = self.offsets();
        let c = self.part_slots();
        let spilled = self.spill.iter().flat_map(|sp| {
            let (sa, sb) = sp.offsets();
            sp.short
                .table
                .iter_buckets()
                .chain(sp.mid.table.iter_buckets().map(move |i| i + sa))
                .chain(sp.long.table.iter_buckets().map(move |i| i + sb))
                .map(move |i| i + c)
        });
        self.short
            .table
            .iter_buckets()
            .chain(self.mid.table.iter_buckets().map(|i| i + a))
            .chain(self.long.table.iter_buckets().map(|i| i + b))
            .chain(spilled)
            .nth(n)
    }

    /// Whether adding `key` (absent) may renumber slots: its part is full
    /// and grows first, moving its entries and those of the parts after it.
    pub fn grows_on_insert(&self, key: &[u8]) -> bool {
        match Size::of(key) {
            Size::Short => self.short.full(),
            Size::Mid => self.mid.full(),
            Size::Long => self.long.full(),
        }
    }

    /// Removes every key and gives the table's memory back.
    pub fn clear(&mut self) {
        self.short = Part::new();
        self.mid = Part::new();
        self.long = Part::new();
        self.spill = None;
        self.frozen = self.walking;
    }
}

/// Where [`KeyTable::get_or_vacant`] found no entry: a key added here
/// needs no second lookup.
pub struct Vacant<'a>(VacantIn<'a>);

/// A free slot in the table of one node size.
enum VacantIn<'a> {
    Short(hashbrown::hash_table::VacantEntry<'a, Box<Short>>),
    Mid(hashbrown::hash_table::VacantEntry<'a, Box<Mid>>),
    Long(hashbrown::hash_table::VacantEntry<'a, Box<Long>>),
}

impl<'a> Vacant<'a> {
    /// Stores `entry` under `key`, which must be the key looked up.
    pub fn insert(self, key: &[u8], entry: Entry) -> &'a mut Entry {
        match self.0 {
            VacantIn::Short(slot) => {
                let key = NodeKey::new(key);
                &mut slot.insert(Box::new(Node { entry, key })).into_mut().entry
            }
            VacantIn::Mid(slot) => {
                let key = NodeKey::new(key);
                &mut slot.insert(Box::new(Node { entry, key })).into_mut().entry
            }
            VacantIn::Long(slot) => {
                let key = NodeKey::new(key);
                &mut slot.insert(Box::new(Node { entry, key })).into_mut().entry
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::mem::size_of;

    use proptest::prelude::*;

    use super::*;
    use crate::engine::string::StrValue;
    use crate::engine::value::Value;

    fn entry(v: u64) -> Entry {
        Entry::new(
            Value::Str(StrValue::from_bytes(v.to_string().as_bytes())),
            0,
        )
    }

    /// Stores `entry` under `key`, returning the entry it replaces.
    fn insert(t: &mut KeyTable, key: &[u8], entry: Entry) -> Option<Entry> {
        match t.get_or_vacant(key) {
            Ok(e) => Some(std::mem::replace(e, entry)),
            Err(v) => {
                v.insert(key, entry);
                None
            }
        }
    }

    fn tag(e: &Entry) -> u64 {
        match &e.value {
            Value::Str(s) => std::str::from_utf8(&s.as_bytes())
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(u64::MAX),
            _ => u64::MAX,
        }
    }

    #[test]
    fn nodes_fill_their_jemalloc_size_classes() {
        // 64 and 80 are jemalloc size classes: the inline key takes what
        // the entry leaves of them.
        assert_eq!(size_of::<Entry>(), 48);
        assert_eq!(size_of::<Short>(), 64);
        assert_eq!(size_of::<Mid>(), 80);
        assert_eq!(size_of::<Long>(), 64);
        assert_eq!(size_of::<Box<Short>>(), 8);
    }

    #[test]
    fn keys_of_one_shard_get_varied_tags() {
        // The keys of one shard share their hash's top bits; their slot
        // hashes' top 7 bits (hashbrown's tag) must not.
        let hasher = KeyHasher::new();
        let shard_of = |k: &[u8]| hasher.hash_one(k) >> crate::engine::keyspace::SHARD_SHIFT;
        let mut tags = std::collections::HashSet::new();
        let keys = (0..20_000).map(|i| format!("key:{i}").into_bytes());
        for k in keys.filter(|k| shard_of(k) == 0) {
            tags.insert(slot_hash(hasher.hash_one(&k[..])) >> 57);
        }
        assert!(tags.len() > 100, "{} tags", tags.len());
    }

    #[test]
    fn keys_inline_and_on_the_heap() {
        let mut t = KeyTable::new(KeyHasher::new());
        let short = vec![b's'; SHORT_KEY];
        let mid = vec![b'm'; MID_KEY];
        let mid2 = vec![b'n'; SHORT_KEY + 1];
        let long = vec![b'l'; MID_KEY + 1];
        for (i, k) in [&b""[..], &short, &mid, &mid2, &long]
            .into_iter()
            .enumerate()
        {
            assert!(insert(&mut t, k, entry(i as u64)).is_none());
        }
        assert_eq!(
            (t.short.table.len(), t.mid.table.len(), t.long.table.len()),
            (2, 2, 1)
        );
        assert_eq!(t.get(b"").map(tag), Some(0));
        assert_eq!(t.get(&short).map(tag), Some(1));
        assert_eq!(t.get(&mid).map(tag), Some(2));
        assert_eq!(t.get(&mid2).map(tag), Some(3));
        assert_eq!(t.get(&long).map(tag), Some(4));
        assert_eq!(insert(&mut t, &long, entry(5)).as_ref().map(tag), Some(4));
        assert_eq!(t.remove(&short).as_ref().map(tag), Some(1));
        assert_eq!(t.len(), 4);
        t.clear();
        assert!(t.is_empty() && t.get(b"").is_none());
    }

    #[test]
    fn slots_hold_every_key_once() {
        let mut t = KeyTable::new(KeyHasher::new());
        // Keys of every node size: short, middle and long parts.
        let key = |i: u64| match i % 3 {
            0 => format!("k{i}"),
            1 => format!("middle-sized-key:{i:08}"),
            _ => format!("a-key-too-long-to-sit-inside-its-node:{i:012}"),
        };
        for i in 0..5000u64 {
            insert(&mut t, key(i).as_bytes(), entry(i));
        }
        let mut seen = std::collections::HashSet::new();
        for slot in 0..t.slots() {
            if let Some((k, e)) = t.get_at(slot) {
                assert_eq!(t.get(k).map(tag), Some(tag(e)));
                assert_eq!(t.slot_of(k).map(|(s, e)| (s, tag(e))), Some((slot, tag(e))));
                assert!(seen.insert(k.to_vec()));
            }
        }
        assert_eq!(seen.len(), 5000);
        assert!(t.get_at(t.slots()).is_none());
        let last = t
            .nth_slot(4999)
            .and_then(|s| t.get_at(s))
            .map(|(k, _)| k.to_vec());
        assert!(last.is_some() && t.nth_slot(5000).is_none());
        let slot = t.slot_of(key(7).as_bytes()).map(|(s, _)| s);
        let changed = slot.and_then(|s| t.slot_mut(s)).map(|(k, _)| k.to_vec());
        assert_eq!(changed, Some(key(7).into_bytes()));
        // A walk offers what `get_at` holds, in slot order, wrapping to 0,
        // across the parts, and stops when told.
        let total = t.slots();
        for (start, count) in [
            (0, total),
            (total - 3, 10),
            (17, 5000),
            (total / 2, total + 5),
        ] {
            let want: Vec<usize> = (0..count.min(total))
                .map(|i| (start + i) % total)
                .filter(|&s| t.get_at(s).is_some())
                .collect();
            let mut got = Vec::new();
            t.walk(start, count, &mut |s, k, e| {
                assert_eq!(t.get_at(s).map(|(k, e)| (k, tag(e))), Some((k, tag(e))));
                got.push(s);
                true
            });
            assert_eq!(got, want);
        }
        let mut offered = 0;
        t.walk(0, total, &mut |_, _, _| {
            offered += 1;
            offered < 3
        });
        assert_eq!(offered, 3);
        // Removal by slot.
        for i in [8u64, 9, 10] {
            let slot = t.slot_of(key(i).as_bytes()).map(|(s, _)| s).unwrap();
            assert_eq!(t.remove_at(slot).as_ref().map(tag), Some(tag(&entry(i))));
            assert!(t.get(key(i).as_bytes()).is_none() && t.get_at(slot).is_none());
            assert!(t.remove_at(slot).is_none());
        }
        assert_eq!(t.len(), 4997);
    }

    /// The slots holding a key when the table was frozen, and their keys.
    type Held = Vec<(usize, Vec<u8>)>;

    #[derive(Debug, Clone)]
    enum Op {
        Insert(Vec<u8>, u64),
        /// Changes the entry if present, adds it if not (one lookup).
        Upsert(Vec<u8>, u64),
        Remove(Vec<u8>),
        GetMut(Vec<u8>, u64),
        /// Removal by slot (eviction), of the key's slot.
        RemoveAt(Vec<u8>),
        Clear,
        /// A snapshot's walk starts: no slot of the parts may move.
        Freeze,
        Thaw,
    }

    fn key() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            6 => "[a-d]{0,2}".prop_map(String::into_bytes),
            // Enough distinct keys for the table to grow several times.
            3 => "k[0-9]{1,3}".prop_map(String::into_bytes),
            // Lengths around the node sizes' limits.
            1 => (0u8..3, 14usize..18).prop_map(|(c, n)| vec![b'x' + c; n]),
            1 => (0u8..3, 30usize..34).prop_map(|(c, n)| vec![b'x' + c; n]),
            1 => proptest::collection::vec(any::<u8>(), 0..40),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => (key(), any::<u64>()).prop_map(|(k, v)| Op::Insert(k, v)),
            4 => (key(), any::<u64>()).prop_map(|(k, v)| Op::Upsert(k, v)),
            4 => key().prop_map(Op::Remove),
            2 => (key(), any::<u64>()).prop_map(|(k, v)| Op::GetMut(k, v)),
            2 => key().prop_map(Op::RemoveAt),
            1 => Just(Op::Clear),
            2 => Just(Op::Freeze),
            1 => Just(Op::Thaw),
        ]
    }

    proptest! {
        #[test]
        fn matches_a_hashmap(ops in proptest::collection::vec(op(), 1..400)) {
            let mut t = KeyTable::new(KeyHasher::new());
            let mut model: HashMap<Vec<u8>, u64> = HashMap::new();
            // While frozen: the parts' slots and the key each held then
            // that is still stored (none may move).
            let mut frozen: Option<(usize, Held)> = None;
            for op in ops {
                let inserted = matches!(op, Op::Insert(..) | Op::Upsert(..));
                match op {
                    Op::Insert(k, v) => {
                        let old = insert(&mut t, &k, entry(v)).as_ref().map(tag);
                        prop_assert_eq!(old, model.insert(k, v));
                    }
                    Op::Upsert(k, v) => {
                        match t.get_or_vacant(&k) {
                            Ok(e) => {
                                prop_assert!(model.contains_key(&k));
                                *e = entry(v);
                            }
                            Err(slot) => {
                                prop_assert!(!model.contains_key(&k));
                                prop_assert_eq!(tag(slot.insert(&k, entry(v))), v);
                            }
                        }
                        model.insert(k, v);
                    }
                    Op::Remove(k) => {
                        let old = t.remove(&k).as_ref().map(tag);
                        prop_assert_eq!(old, model.remove(&k));
                        // Added again, it may take any free slot.
                        if let Some((_, held)) = &mut frozen {
                            held.retain(|(_, h)| *h != k);
                        }
                    }
                    Op::GetMut(k, v) => {
                        match (t.get_mut(&k), model.get_mut(&k)) {
                            (Some(e), Some(m)) => {
                                *e = entry(v);
                                *m = v;
                            }
                            (None, None) => {}
                            (got, want) => prop_assert!(false, "{:?} vs {:?}", got, want),
                        }
                    }
                    Op::RemoveAt(k) => {
                        let slot = t.slot_of(&k).map(|(s, _)| s);
                        prop_assert_eq!(slot.is_some(), model.contains_key(&k));
                        if let Some(s) = slot {
                            prop_assert_eq!(t.get_at(s).map(|(k, _)| k.to_vec()), Some(k.clone()));
                            let old = t.remove_at(s).as_ref().map(tag);
                            prop_assert_eq!(old, model.remove(&k));
                            if let Some((_, held)) = &mut frozen {
                                held.retain(|(_, h)| *h != k);
                            }
                        }
                    }
                    Op::Clear => {
                        t.clear();
                        model.clear();
                        // A table cleared while frozen stays frozen (its
                        // parts now empty).
                        if frozen.is_some() {
                            frozen = Some((t.part_slots(), Vec::new()));
                        }
                    }
                    Op::Freeze => {
                        t.freeze();
                        // Frozen again while frozen: nothing moves.
                        if frozen.is_none() {
                            let held = (0..t.slots())
                                .filter_map(|s| t.get_at(s).map(|(k, _)| (s, k.to_vec())))
                                .collect();
                            frozen = Some((t.slots(), held));
                        }
                    }
                    Op::Thaw => {
                        t.thaw();
                        frozen = None;
                    }
                }
                prop_assert_eq!(t.len(), model.len());
                prop_assert_eq!(t.is_empty(), model.is_empty());
                if let Some((slots, held)) = &frozen {
                    prop_assert_eq!(t.part_slots(), *slots);
                    for (s, k) in held {
                        if model.contains_key(k) {
                            prop_assert_eq!(t.get_at(*s).map(|(k, _)| k.to_vec()), Some(k.clone()));
                        }
                    }
                } else if inserted {
                    // The first insertion after a walk moves the spilled
                    // keys in.
                    prop_assert_eq!(t.spilled(), 0);
                }
                // Every slot holds a stored key, each once.
                let mut by_slot: Vec<Vec<u8>> = (0..t.slots())
                    .filter_map(|s| t.get_at(s).map(|(k, _)| k.to_vec()))
                    .collect();
                let mut walked = Vec::new();
                t.walk(0, t.slots(), &mut |_, k, _| {
                    walked.push(k.to_vec());
                    true
                });
                prop_assert_eq!(&walked, &by_slot);
                prop_assert_eq!(t.nth_slot(model.len()), None);
                by_slot.sort();
                by_slot.dedup();
                prop_assert_eq!(by_slot.len(), model.len());
            }
            for (k, v) in &model {
                prop_assert_eq!(t.get(k).map(tag), Some(*v));
            }
            let mut seen: Vec<(Vec<u8>, u64)> = t.iter().map(|(k, e)| (k.to_vec(), tag(e))).collect();
            let mut want: Vec<(Vec<u8>, u64)> = model.into_iter().collect();
            seen.sort();
            want.sort();
            prop_assert_eq!(seen, want);
        }
    }
}
