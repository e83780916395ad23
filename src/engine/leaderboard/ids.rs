//! A board's dedup window: the event ids of its last writes (`ID
//! event-id`), oldest first, so that a retried write is applied once.

use std::collections::{HashSet, VecDeque};

/// The ids a board remembers, at most a window's worth.
#[derive(Debug, Clone, Default)]
pub struct IdWindow {
    order: VecDeque<Box<[u8]>>,
    seen: HashSet<Box<[u8]>, ahash::RandomState>,
}

impl IdWindow {
    /// Whether `id` is remembered.
    pub fn contains(&self, id: &[u8]) -> bool {
        self.seen.contains(id)
    }

    /// Remembers `id` (false if it already was), forgetting the oldest ids
    /// beyond `window` (0: remembers nothing).
    pub fn insert(&mut self, id: &[u8], window: usize) -> bool {
        if self.contains(id) {
            return false;
        }
        self.order.push_back(id.into());
        self.seen.insert(id.into());
        self.trim(window);
        true
    }

    /// Forgets the oldest ids beyond `window`.
    pub fn trim(&mut self, window: usize) {
        while self.order.len() > window {
            if let Some(old) = self.order.pop_front() {
                self.seen.remove(&old);
            }
        }
    }

    /// How many ids are remembered.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether no id is remembered.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The ids, oldest first (for the AOF rewrite).
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.order.iter().map(|b| &b[..])
    }

    /// Approximate bytes used: each id twice plus the slots.
    pub fn memory_usage(&self) -> usize {
        let bytes: usize = self.order.iter().map(|b| b.len()).sum();
        2 * bytes
            + self.order.capacity() * std::mem::size_of::<Box<[u8]>>()
            + self.seen.capacity() * (std::mem::size_of::<Box<[u8]>>() + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_window_of_ids() {
        let mut w = IdWindow::default();
        assert!(w.insert(b"a", 2));
        assert!(!w.insert(b"a", 2));
        assert!(w.insert(b"b", 2));
        assert!(w.insert(b"c", 2));
        assert!(!w.contains(b"a"));
        assert_eq!(w.iter().collect::<Vec<_>>(), vec![&b"b"[..], b"c"]);
        w.trim(0);
        assert!(w.is_empty() && !w.contains(b"c"));
    }
}
