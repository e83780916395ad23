//! The table of one [`Db`](super::Db): key → [`Entry`], built for memory.
//!
//! Each key is one heap node holding its [`Entry`] (value, expiry time,
//! access clock) and, when it has at most [`INLINE_KEY`] bytes, the key
//! itself; the table's slots hold only a pointer to the node (8 bytes and
//! hashbrown's control byte). Where a `HashMap<Bytes, Entry>` slot took 80
//! bytes (a 32-byte `Bytes` beside the 48-byte entry) and the key's bytes a
//! second allocation, a key of up to 30 bytes now costs one 80-byte node
//! and 9 bytes per slot: about 100 bytes a key at the table's usual load
//! instead of about 200 (1,000,000 keys of 20 bytes over 64 shards: 32,768
//! slots a shard, half full). A lookup reads the slot, then the node, which
//! holds both the key it compares and the entry it returns.
//!
//! The slot's hash is not stored: it is computed again from the node's key
//! when the table grows. Expiry, watches and the expiry index are the
//! [`Db`](super::Db)'s; this is only the map.

use hashbrown::hash_table::Entry as Slot;
use hashbrown::HashTable;

use super::keyspace::{Entry, KeyHasher};

/// Longest key stored inside its node; a longer one gets its own allocation.
pub const INLINE_KEY: usize = 30;

/// A key's bytes, inside the node when short.
#[derive(Debug)]
enum Key {
    Inline { len: u8, bytes: [u8; INLINE_KEY] },
    Heap(Box<[u8]>),
}

impl Key {
    fn new(key: &[u8]) -> Key {
        match key.len() {
            len @ 0..=INLINE_KEY => {
                let mut bytes = [0; INLINE_KEY];
                bytes[..len].copy_from_slice(key);
                Key::Inline {
                    len: len as u8,
                    bytes,
                }
            }
            _ => Key::Heap(key.into()),
        }
    }

    fn as_bytes(&self) -> &[u8] {
        match self {
            Key::Inline { len, bytes } => bytes.get(..*len as usize).unwrap_or(&[]),
            Key::Heap(b) => b,
        }
    }
}

/// One key and its entry, in one allocation (80 bytes for a short key).
#[derive(Debug)]
struct Node {
    entry: Entry,
    key: Key,
}

/// The map of one database part: keys to entries, one node per key.
#[derive(Debug)]
pub struct KeyTable {
    table: HashTable<Box<Node>>,
    hasher: KeyHasher,
}

/// The slot hash of a key whose keyspace hash is `h`. The shard is the top
/// bits of `h`, so within a shard those bits are all alike; hashbrown takes
/// its 7-bit control tag from the top bits, so they are mixed in from the
/// rest (an odd multiplier carries every lower bit up) to keep the tag a
/// filter. The low bits, which pick the bucket, stay as random as `h`'s.
fn slot_hash(h: u64) -> u64 {
    h.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

impl KeyTable {
    /// An empty table placing keys with `hasher` (the keyspace's).
    pub fn new(hasher: KeyHasher) -> KeyTable {
        KeyTable {
            table: HashTable::new(),
            hasher,
        }
    }

    fn hash(&self, key: &[u8]) -> u64 {
        slot_hash(self.hasher.hash_one(key))
    }

    /// Keys stored.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether no key is stored.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// The entry under `key`.
    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<&Entry> {
        self.table
            .find(self.hash(key), |n| n.key.as_bytes() == key)
            .map(|n| &n.entry)
    }

    /// The entry under `key`, for change.
    #[inline]
    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let h = self.hash(key);
        self.table
            .find_mut(h, |n| n.key.as_bytes() == key)
            .map(|n| &mut n.entry)
    }

    /// The entry under `key`, or `Err` with a place to put one: a single
    /// lookup for "change it if present, add it if not".
    pub fn get_or_vacant(&mut self, key: &[u8]) -> Result<&mut Entry, Vacant<'_>> {
        let h = self.hash(key);
        let hasher = &self.hasher;
        match self.table.entry(
            h,
            |n| n.key.as_bytes() == key,
            |n| slot_hash(hasher.hash_one(n.key.as_bytes())),
        ) {
            Slot::Occupied(o) => Ok(&mut o.into_mut().entry),
            Slot::Vacant(slot) => Err(Vacant { slot }),
        }
    }

    /// Removes `key`, returning its entry.
    pub fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let h = self.hash(key);
        let found = self.table.find_entry(h, |n| n.key.as_bytes() == key).ok()?;
        let (node, _) = found.remove();
        Some(node.entry)
    }

    /// Every key and its entry, in table order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &Entry)> {
        self.table.iter().map(|n| (n.key.as_bytes(), &n.entry))
    }

    /// Every key and its entry, for change, in table order.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&[u8], &mut Entry)> {
        self.table.iter_mut().map(|n| {
            let n = &mut **n;
            (n.key.as_bytes(), &mut n.entry)
        })
    }

    /// Slots in the table, occupied or not: slot numbers run from 0 to
    /// this less one (a power of two, or 0 for an empty table).
    pub fn slots(&self) -> usize {
        self.table.num_buckets()
    }

    /// The key and entry in slot `slot`, if it holds one. Walking slots
    /// from a random one is the sampling eviction needs (O(1) a key at
    /// the table's usual load), as Redis's `dictGetSomeKeys` walks
    /// buckets; a slot number names the same key until the table changes.
    #[inline]
    pub fn get_at(&self, slot: usize) -> Option<(&[u8], &Entry)> {
        self.table
            .get_bucket(slot)
            .map(|n| (n.key.as_bytes(), &n.entry))
    }

    /// The slot holding `key` and its entry.
    pub fn slot_of(&self, key: &[u8]) -> Option<(usize, &Entry)> {
        let slot = self
            .table
            .find_bucket_index(self.hash(key), |n| n.key.as_bytes() == key)?;
        self.table.get_bucket(slot).map(|n| (slot, &n.entry))
    }

    /// Removes the entry in slot `slot`, if it holds one.
    pub fn remove_at(&mut self, slot: usize) -> Option<Entry> {
        let (node, _) = self.table.get_bucket_entry(slot).ok()?.remove();
        Some(node.entry)
    }

    /// The slot of the `n`th entry in table order (O(n / 16): it skips
    /// empty groups of slots; the fallback for tables too sparse to walk).
    pub fn nth_slot(&self, n: usize) -> Option<usize> {
        self.table.iter_buckets().nth(n)
    }

    /// Removes every key and gives the table's memory back.
    pub fn clear(&mut self) {
        self.table = HashTable::new();
    }

    // A walk by slot (a snapshot's, `keycapture`, with `slots` and
    // `slot_of` above): an entry keeps its slot from insertion to removal
    // unless the table grows (a removal only marks its slot free; an
    // insertion takes a free slot and moves no other entry) or is cleared.

    /// The key and entry stored in slot `i`, for change.
    pub fn slot_mut(&mut self, i: usize) -> Option<(&[u8], &mut Entry)> {
        self.table.get_bucket_mut(i).map(|n| {
            let n = &mut **n;
            (n.key.as_bytes(), &mut n.entry)
        })
    }

    /// Whether the next [`KeyTable::get_or_vacant`] may move every entry
    /// to another slot: the table is full and grows (or rehashes) first.
    pub fn grows_on_insert(&self) -> bool {
        self.table.len() >= self.table.capacity()
    }
}

/// Where [`KeyTable::get_or_vacant`] found no entry: a key added here
/// needs no second lookup.
pub struct Vacant<'a> {
    slot: hashbrown::hash_table::VacantEntry<'a, Box<Node>>,
}

impl<'a> Vacant<'a> {
    /// Stores `entry` under `key`, which must be the key looked up.
    pub fn insert(self, key: &[u8], entry: Entry) -> &'a mut Entry {
        let key = Key::new(key);
        &mut self
            .slot
            .insert(Box::new(Node { entry, key }))
            .into_mut()
            .entry
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
    fn a_short_key_and_its_entry_fill_one_80_byte_node() {
        // 80 is a jemalloc size class: the inline key takes what the entry
        // leaves of it.
        assert_eq!(size_of::<Entry>(), 48);
        assert_eq!(size_of::<Key>(), 32);
        assert_eq!(size_of::<Node>(), 80);
        assert_eq!(size_of::<Box<Node>>(), 8);
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
        let short = vec![b's'; INLINE_KEY];
        let long = vec![b'l'; INLINE_KEY + 1];
        for (i, k) in [&b""[..], &short, &long].into_iter().enumerate() {
            assert!(insert(&mut t, k, entry(i as u64)).is_none());
        }
        assert!(matches!(Key::new(&short), Key::Inline { .. }));
        assert!(matches!(Key::new(&long), Key::Heap(_)));
        assert_eq!(t.get(b"").map(tag), Some(0));
        assert_eq!(t.get(&short).map(tag), Some(1));
        assert_eq!(t.get(&long).map(tag), Some(2));
        assert_eq!(insert(&mut t, &long, entry(5)).as_ref().map(tag), Some(2));
        assert_eq!(t.remove(&short).as_ref().map(tag), Some(1));
        assert_eq!(t.len(), 2);
        t.clear();
        assert!(t.is_empty() && t.get(b"").is_none());
    }

    #[test]
    fn slots_hold_every_key_once() {
        let mut t = KeyTable::new(KeyHasher::new());
        for i in 0..5000u64 {
            insert(&mut t, format!("k{i}").as_bytes(), entry(i));
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
        let slot = t.slot_of(b"k7").map(|(s, _)| s).unwrap_or(usize::MAX);
        assert_eq!(t.remove_at(slot).as_ref().map(tag), Some(7));
        assert!(t.get(b"k7").is_none() && t.remove_at(slot).is_none());
        assert_eq!(t.len(), 4999);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(Vec<u8>, u64),
        /// Changes the entry if present, adds it if not (one lookup).
        Upsert(Vec<u8>, u64),
        Remove(Vec<u8>),
        GetMut(Vec<u8>, u64),
        Clear,
    }

    fn key() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            6 => "[a-d]{0,2}".prop_map(String::into_bytes),
            // Enough distinct keys for the table to grow several times.
            3 => "k[0-9]{1,3}".prop_map(String::into_bytes),
            // Lengths around the inline limit.
            1 => (0u8..3, 28usize..34).prop_map(|(c, n)| vec![b'x' + c; n]),
            1 => proptest::collection::vec(any::<u8>(), 0..40),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => (key(), any::<u64>()).prop_map(|(k, v)| Op::Insert(k, v)),
            4 => (key(), any::<u64>()).prop_map(|(k, v)| Op::Upsert(k, v)),
            4 => key().prop_map(Op::Remove),
            2 => (key(), any::<u64>()).prop_map(|(k, v)| Op::GetMut(k, v)),
            1 => Just(Op::Clear),
        ]
    }

    proptest! {
        #[test]
        fn matches_a_hashmap(ops in proptest::collection::vec(op(), 1..400)) {
            let mut t = KeyTable::new(KeyHasher::new());
            let mut model: HashMap<Vec<u8>, u64> = HashMap::new();
            for op in ops {
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
                    Op::Clear => {
                        t.clear();
                        model.clear();
                    }
                }
                prop_assert_eq!(t.len(), model.len());
                prop_assert_eq!(t.is_empty(), model.is_empty());
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
