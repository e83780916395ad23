//! Sorted sets: a compact array for small sets, a skiplist with spans plus a
//! member index for large ones, converted in one place.
//!
//! (Placeholder until the sorted-set engine lands: the type exists so the
//! keyspace can name it.)

/// A sorted set.
#[derive(Debug, Default)]
pub struct ZSet {
    entries: Vec<(Vec<u8>, f64)>,
}

impl ZSet {
    /// The name OBJECT ENCODING answers.
    pub fn encoding(&self) -> &'static str {
        "listpack"
    }

    /// A deep copy.
    pub fn duplicate(&self) -> ZSet {
        ZSet {
            entries: self.entries.clone(),
        }
    }

    /// Every (member, score) pair, in no particular order (AOF rewrite).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], f64)> {
        self.entries.iter().map(|(m, s)| (m.as_slice(), *s))
    }

    /// Approximate bytes used.
    pub fn memory_usage(&self) -> usize {
        self.entries.iter().map(|(m, _)| m.len() + 16).sum()
    }
}
