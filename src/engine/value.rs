//! The typed values a key can hold.

use super::hash::HashValue;
use super::leaderboard::Leaderboard;
use super::list::ListValue;
use super::set::SetValue;
use super::stream::Stream;
use super::string::StrValue;
use super::zset::ZSet;

/// A key's value. Each type's structure lives in its own module.
#[derive(Debug)]
pub enum Value {
    /// A string (also the storage of bitmaps).
    Str(StrValue),
    /// A sorted set. Not boxed (it is no bigger than a string): a small
    /// one is then a single allocation, its listpack's bytes, which matters
    /// for a million keys of a few members each (issue 20).
    ZSet(ZSet),
    /// A set.
    Set(Box<SetValue>),
    /// A list.
    List(Box<ListValue>),
    /// A hash. Not boxed: it is no bigger than a string, and a profile
    /// store holds millions of small hashes.
    Hash(HashValue),
    /// A leaderboard (issue 16, the LB.* commands).
    Leaderboard(Box<Leaderboard>),
    /// A stream (issue 15, the X* commands).
    Stream(Box<Stream>),
}

impl Value {
    /// Ends a snapshot's stepwise capture of this value, if one runs (see
    /// `engine::cow`): what it has not written yet is saved now.
    pub fn end_snapshot(&mut self) {
        match self {
            Value::ZSet(z) => z.end_snapshot(),
            Value::Leaderboard(b) => b.end_snapshot(),
            Value::Hash(h) => h.end_snapshot(),
            Value::Set(s) => s.end_snapshot(),
            // Lists and streams share their nodes with a capture: nothing
            // of theirs is to end.
            Value::Str(_) | Value::List(_) | Value::Stream(_) => {}
        }
    }

    /// Starts loading what a command reads first from the value, for the
    /// kinds whose first read is a cache miss away (a small hash's
    /// `listpack`, a string's bytes). Changes nothing.
    #[inline]
    pub fn prefetch(&self) {
        match self {
            Value::Hash(h) => h.prefetch(),
            Value::Str(s) => s.prefetch(),
            _ => {}
        }
    }

    /// The name TYPE answers.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::ZSet(_) => "zset",
            Value::Set(_) => "set",
            Value::List(_) => "list",
            Value::Hash(_) => "hash",
            Value::Leaderboard(_) => "leaderboard",
            Value::Stream(_) => "stream",
        }
    }

    /// The name OBJECT ENCODING answers.
    pub fn encoding(&self) -> &'static str {
        match self {
            Value::Str(s) => s.encoding(),
            Value::ZSet(z) => z.encoding(),
            Value::Set(s) => s.encoding(),
            Value::List(l) => l.encoding(),
            Value::Hash(h) => h.encoding(),
            // One encoding: the counted B+tree over an entry arena.
            Value::Leaderboard(_) => "btree",
            Value::Stream(_) => "stream",
        }
    }

    /// A deep copy (COPY).
    pub fn duplicate(&self) -> Value {
        match self {
            Value::Str(s) => Value::Str(s.clone()),
            Value::ZSet(z) => Value::ZSet(z.duplicate()),
            Value::Set(s) => Value::Set(Box::new(s.duplicate())),
            Value::List(l) => Value::List(Box::new(l.duplicate())),
            Value::Hash(h) => Value::Hash(h.duplicate()),
            Value::Leaderboard(b) => Value::Leaderboard(b.clone()),
            Value::Stream(s) => Value::Stream(Box::new(s.duplicate())),
        }
    }

    /// Approximate bytes used by the value (MEMORY USAGE).
    pub fn memory_usage(&self) -> usize {
        match self {
            Value::Str(s) => s.memory_usage(),
            Value::ZSet(z) => z.memory_usage(),
            Value::Set(s) => s.memory_usage(),
            Value::List(l) => l.memory_usage(),
            Value::Hash(h) => h.memory_usage(),
            Value::Leaderboard(b) => b.memory_usage(),
            Value::Stream(s) => s.memory_usage(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unboxed_hashes_and_zsets_do_not_grow_values() {
        use std::mem::size_of;
        assert!(size_of::<HashValue>() <= size_of::<StrValue>());
        assert!(size_of::<ZSet>() <= size_of::<StrValue>());
        assert_eq!(size_of::<Value>(), size_of::<StrValue>());
    }
}
