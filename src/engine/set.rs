//! Sets: an intset for small sets of integers, a hash set otherwise.
//!
//! (Placeholder until the set engine lands: the type exists so the keyspace
//! can name it.)

/// A set.
#[derive(Debug, Default)]
pub struct SetValue {
    members: Vec<Vec<u8>>,
}

impl SetValue {
    /// The name OBJECT ENCODING answers.
    pub fn encoding(&self) -> &'static str {
        "hashtable"
    }

    /// A deep copy.
    pub fn duplicate(&self) -> SetValue {
        SetValue {
            members: self.members.clone(),
        }
    }

    /// Every member, in no particular order (AOF rewrite).
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.members.iter().map(|m| m.as_slice())
    }

    /// Approximate bytes used.
    pub fn memory_usage(&self) -> usize {
        self.members.iter().map(|m| m.len() + 16).sum()
    }
}
