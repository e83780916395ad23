//! Consumer groups: the last delivered id, the entries-read counter, and
//! the pending entries list (PEL) indexed by id (the group's) and per
//! consumer (each consumer's set of ids). Both lists are kept in small
//! chunks shared with copy-on-write ([`super::pel`]), so a snapshot's copy
//! of a group costs a pointer per chunk, not a copy of each entry.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::id::StreamId;
use super::pel::{IdSet, PelMap};

/// A delivered, not yet acknowledged entry.
#[derive(Debug, Clone)]
pub struct Pending {
    /// The consumer it was delivered to.
    pub consumer: Arc<[u8]>,
    /// Unix ms of the last delivery.
    pub delivery_time: u64,
    /// Deliveries so far.
    pub delivery_count: u64,
}

/// A consumer of a group.
#[derive(Debug, Clone, Default)]
pub struct Consumer {
    /// Unix ms it was last seen (read or claimed).
    pub seen_time: u64,
    /// Its pending ids.
    pub pel: IdSet,
}

/// A consumer group.
#[derive(Debug, Clone, Default)]
pub struct Group {
    /// The last id delivered.
    pub last_id: StreamId,
    /// Entries the group has read, when known (`entries-read`).
    pub entries_read: Option<u64>,
    /// Pending entries by id.
    pub pel: PelMap<Pending>,
    /// Consumers by name (sorted, as XINFO CONSUMERS lists them).
    pub consumers: BTreeMap<Arc<[u8]>, Consumer>,
}

impl Group {
    /// A group starting after `last_id`.
    pub fn new(last_id: StreamId, entries_read: Option<u64>) -> Self {
        Group {
            last_id,
            entries_read,
            ..Group::default()
        }
    }

    /// Creates consumer `name` if absent; returns whether it did.
    pub fn create_consumer(&mut self, name: &[u8], now: u64) -> bool {
        if self.consumers.contains_key(name) {
            return false;
        }
        self.consumers.insert(
            Arc::from(name),
            Consumer {
                seen_time: now,
                pel: IdSet::new(),
            },
        );
        true
    }

    /// The shared name of consumer `name` (created first if absent).
    fn consumer_key(&mut self, name: &[u8], now: u64) -> Arc<[u8]> {
        self.create_consumer(name, now);
        match self.consumers.get_key_value(name) {
            Some((k, _)) => k.clone(),
            None => Arc::from(name),
        }
    }

    /// Records `id` as delivered to `consumer` at `time` with `count`
    /// deliveries, taking it from any consumer that held it.
    pub fn assign(&mut self, id: StreamId, consumer: &[u8], time: u64, count: u64) {
        let key = self.consumer_key(consumer, time);
        if let Some(old) = self.pel.get(&id) {
            if let Some(c) = self.consumers.get_mut(&old.consumer) {
                c.pel.remove(&id);
            }
        }
        self.pel.insert(
            id,
            Pending {
                consumer: key.clone(),
                delivery_time: time,
                delivery_count: count,
            },
        );
        if let Some(c) = self.consumers.get_mut(&key) {
            c.pel.insert(id);
        }
    }

    /// Acknowledges `id`; returns whether it was pending.
    pub fn ack(&mut self, id: StreamId) -> bool {
        match self.pel.remove(&id) {
            Some(p) => {
                if let Some(c) = self.consumers.get_mut(&p.consumer) {
                    c.pel.remove(&id);
                }
                true
            }
            None => false,
        }
    }

    /// Deletes consumer `name`, dropping its pending entries; returns how
    /// many it had, or None if it did not exist.
    pub fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let c = self.consumers.remove(name)?;
        for id in &c.pel {
            self.pel.remove(id);
        }
        Some(c.pel.len())
    }

    /// Bytes of the PEL chunks this group holds alone (for a snapshot's
    /// copy: the chunks the group copied before changing them).
    pub fn unshared_bytes(&self) -> usize {
        self.pel.unshared_bytes()
            + self
                .consumers
                .values()
                .map(|c| c.pel.unshared_bytes())
                .sum::<usize>()
    }

    /// Approximate bytes used.
    pub fn memory_usage(&self) -> usize {
        let pel = self.pel.len() * 64;
        let consumers: usize = self
            .consumers
            .iter()
            .map(|(n, c)| n.len() + 48 + c.pel.len() * 24)
            .sum();
        std::mem::size_of::<Group>() + pel + consumers
    }
}
