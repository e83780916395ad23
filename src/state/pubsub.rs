//! The Pub/Sub registry: which clients listen on which channels, patterns
//! and shard channels, and delivery of a published message to them.
//!
//! Each subscriber is a handle to its connection ([`ClientInfo`]), whose
//! [`Outbox`](super::outbox::Outbox) receives the encoded message: a
//! message is encoded once (once per matching pattern for `pmessage`) and
//! appended to every subscriber's bounded queue, so PUBLISH never waits on
//! a slow reader; one past `client-output-buffer-limit pubsub` is
//! disconnected. Keyspace notifications, tracking invalidations and
//! MONITOR are publishers too and go through [`PubSub::publish`] or an
//! outbox directly.
//!
//! A client's own list of what it subscribed to is [`Subscriptions`], in
//! its `ClientState`; the registry holds the reverse maps. Not here: the
//! commands' arguments and replies (`commands::pubsub`).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use smallvec::SmallVec;

use super::client::ClientInfo;
use super::outbox::{OutputLimit, Pushed};
use crate::engine::glob;
use crate::protocol::write_bulk_frame;

/// A channel or pattern name, shared by the registry and the subscribers'
/// own lists.
pub type Name = Arc<[u8]>;

type Map<V> = HashMap<Name, V, ahash::RandomState>;

/// The clients on one channel or pattern, in the order they subscribed.
type Subscribers = SmallVec<[Arc<ClientInfo>; 1]>;

/// The three namespaces of Pub/Sub.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// SUBSCRIBE / PUBLISH.
    Channel,
    /// PSUBSCRIBE: glob patterns matched against PUBLISH's channel.
    Pattern,
    /// SSUBSCRIBE / SPUBLISH (shard channels).
    Shard,
}

impl Kind {
    /// The kind of subscription confirmation (`subscribe`, ...).
    pub fn subscribe_word(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"subscribe",
            Kind::Pattern => b"psubscribe",
            Kind::Shard => b"ssubscribe",
        }
    }

    /// The kind of unsubscription confirmation (`unsubscribe`, ...).
    pub fn unsubscribe_word(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"unsubscribe",
            Kind::Pattern => b"punsubscribe",
            Kind::Shard => b"sunsubscribe",
        }
    }
}

/// What one client is subscribed to (kept in its `ClientState`).
#[derive(Debug, Default)]
pub struct Subscriptions {
    channels: HashSet<Name, ahash::RandomState>,
    /// In subscription order: PUNSUBSCRIBE without arguments answers in it.
    patterns: Vec<Name>,
    shard: HashSet<Name, ahash::RandomState>,
    /// Boards watched with LB.WATCH (`state::watch`): they count for
    /// subscribe mode and the `pubsub` output class, as Redis counts
    /// every kind of subscription.
    watching: usize,
}

impl Subscriptions {
    /// Channels and patterns: the count SUBSCRIBE / PSUBSCRIBE replies
    /// carry (Redis's `clientSubscriptionsCount`).
    pub fn count(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }

    /// Shard channels: the count SSUBSCRIBE replies carry.
    pub fn shard_count(&self) -> usize {
        self.shard.len()
    }

    /// Subscriptions of one kind (CLIENT LIST `sub`, `psub`, `ssub`).
    pub fn of(&self, kind: Kind) -> usize {
        match kind {
            Kind::Channel => self.channels.len(),
            Kind::Pattern => self.patterns.len(),
            Kind::Shard => self.shard.len(),
        }
    }

    /// Whether the client is subscribed to anything (Redis's
    /// `CLIENT_PUBSUB` flag: RESP2 subscribe mode, the `pubsub` class).
    pub fn active(&self) -> bool {
        self.count() + self.shard.len() + self.watching > 0
    }

    /// Records how many boards the client watches (LB.WATCH).
    pub fn set_watching(&mut self, n: usize) {
        self.watching = n;
    }

    /// The count a confirmation of `kind` carries.
    pub fn count_for(&self, kind: Kind) -> usize {
        match kind {
            Kind::Shard => self.shard_count(),
            _ => self.count(),
        }
    }

    fn names(&self, kind: Kind) -> Vec<Name> {
        match kind {
            Kind::Channel => self.channels.iter().cloned().collect(),
            Kind::Pattern => self.patterns.clone(),
            Kind::Shard => self.shard.iter().cloned().collect(),
        }
    }

    fn contains(&self, kind: Kind, name: &[u8]) -> bool {
        match kind {
            Kind::Channel => self.channels.contains(name),
            Kind::Pattern => self.patterns.iter().any(|p| &**p == name),
            Kind::Shard => self.shard.contains(name),
        }
    }

    fn insert(&mut self, kind: Kind, name: Name) {
        match kind {
            Kind::Channel => {
                self.channels.insert(name);
            }
            Kind::Pattern => self.patterns.push(name),
            Kind::Shard => {
                self.shard.insert(name);
            }
        }
    }

    fn remove(&mut self, kind: Kind, name: &[u8]) -> bool {
        match kind {
            Kind::Channel => self.channels.remove(name),
            Kind::Pattern => match self.patterns.iter().position(|p| &**p == name) {
                Some(i) => {
                    self.patterns.remove(i);
                    true
                }
                None => false,
            },
            Kind::Shard => self.shard.remove(name),
        }
    }
}

/// Where a publishing client's own copy of a message goes: its replies,
/// so that it arrives where Redis puts it (before the PUBLISH reply, or
/// inside EXEC's), in the client's protocol.
pub struct Own<'a> {
    /// The publishing client.
    pub id: u64,
    /// Whether it speaks RESP3.
    pub resp3: bool,
    /// Where its frames go.
    pub out: &'a mut Vec<u8>,
}

#[derive(Default)]
struct Registry {
    channels: Map<Subscribers>,
    patterns: Map<Subscribers>,
    shard: Map<Subscribers>,
}

impl Registry {
    fn map(&self, kind: Kind) -> &Map<Subscribers> {
        match kind {
            Kind::Channel => &self.channels,
            Kind::Pattern => &self.patterns,
            Kind::Shard => &self.shard,
        }
    }

    fn map_mut(&mut self, kind: Kind) -> &mut Map<Subscribers> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    fn remove(&mut self, kind: Kind, name: &[u8], id: u64) {
        let map = self.map_mut(kind);
        if let Some(subs) = map.get_mut(name) {
            if let Some(i) = subs.iter().position(|c| c.id == id) {
                subs.remove(i);
            }
            if subs.is_empty() {
                map.remove(name);
            }
        }
    }
}

/// See the module documentation.
#[derive(Default)]
pub struct PubSub {
    registry: RwLock<Registry>,
    /// Hot copy of `client-output-buffer-limit`'s pubsub class: hard,
    /// soft, seconds.
    limit: [AtomicU64; 3],
    /// Subscribers disconnected for their output buffer.
    pub limit_disconnections: AtomicU64,
}

impl PubSub {
    /// An empty registry.
    pub fn new() -> Self {
        PubSub::default()
    }

    /// Sets the output limit of subscribers.
    pub fn set_limit(&self, l: OutputLimit) {
        self.limit[0].store(l.hard, Ordering::Relaxed);
        self.limit[1].store(l.soft, Ordering::Relaxed);
        self.limit[2].store(l.soft_secs, Ordering::Relaxed);
    }

    /// The output limit of subscribers.
    pub fn limit(&self) -> OutputLimit {
        OutputLimit {
            hard: self.limit[0].load(Ordering::Relaxed),
            soft: self.limit[1].load(Ordering::Relaxed),
            soft_secs: self.limit[2].load(Ordering::Relaxed),
        }
    }

    /// Subscribes `client` to `name`; false if it already was.
    pub fn subscribe(
        &self,
        kind: Kind,
        client: &Arc<ClientInfo>,
        subs: &mut Subscriptions,
        name: &[u8],
    ) -> bool {
        if subs.contains(kind, name) {
            return false;
        }
        let mut reg = self.registry.write();
        let map = reg.map_mut(kind);
        // One allocation of the name, shared with the client's list.
        let shared = match map.get_key_value(name) {
            Some((k, _)) => k.clone(),
            None => Name::from(name),
        };
        map.entry(shared.clone()).or_default().push(client.clone());
        drop(reg);
        subs.insert(kind, shared);
        client.set_subscriptions(kind, subs.of(kind));
        true
    }

    /// Unsubscribes client `client` from `name`; false if it was not.
    pub fn unsubscribe(
        &self,
        kind: Kind,
        client: &ClientInfo,
        subs: &mut Subscriptions,
        name: &[u8],
    ) -> bool {
        if !subs.remove(kind, name) {
            return false;
        }
        self.registry.write().remove(kind, name, client.id);
        client.set_subscriptions(kind, subs.of(kind));
        true
    }

    /// Unsubscribes the client from every name of `kind`; returns them (in
    /// subscription order for patterns).
    pub fn unsubscribe_all(
        &self,
        kind: Kind,
        client: &ClientInfo,
        subs: &mut Subscriptions,
    ) -> Vec<Name> {
        let names = subs.names(kind);
        if names.is_empty() {
            return names;
        }
        let mut reg = self.registry.write();
        for n in &names {
            reg.remove(kind, n, client.id);
            subs.remove(kind, n);
        }
        drop(reg);
        client.set_subscriptions(kind, 0);
        names
    }

    /// Removes every subscription of a client (disconnect, RESET).
    pub fn forget(&self, client: &ClientInfo, subs: &mut Subscriptions) {
        for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
            self.unsubscribe_all(kind, client, subs);
        }
    }

    /// Delivers `message` on `channel` (a plain or a shard channel) to its
    /// subscribers and, for a plain channel, to the clients whose patterns
    /// match it. Returns the number of receivers (a client counted once
    /// per channel or pattern it receives through), as PUBLISH replies.
    pub fn publish(&self, kind: Kind, channel: &[u8], message: &[u8], own: &mut Own) -> usize {
        let reg = self.registry.read();
        let limit = self.limit();
        let mut receivers = 0;
        if let Some(subs) = reg.map(kind).get(channel) {
            let word: &[u8] = if kind == Kind::Shard {
                b"smessage"
            } else {
                b"message"
            };
            let body = encode_body(&[word, channel, message]);
            receivers += subs.len();
            self.deliver(subs, &body, &limit, own);
        }
        if kind == Kind::Channel && !reg.patterns.is_empty() {
            for (pattern, subs) in reg.patterns.iter() {
                if !glob::matches(pattern, channel, false) {
                    continue;
                }
                let body = encode_body(&[b"pmessage", pattern, channel, message]);
                receivers += subs.len();
                self.deliver(subs, &body, &limit, own);
            }
        }
        receivers
    }

    fn deliver(&self, subs: &[Arc<ClientInfo>], body: &[u8], limit: &OutputLimit, own: &mut Own) {
        for c in subs {
            if c.id == own.id {
                own.out.push(if own.resp3 { b'>' } else { b'*' });
                own.out.extend_from_slice(body);
                continue;
            }
            let head = if c.resp.load(Ordering::Relaxed) == 3 {
                b'>'
            } else {
                b'*'
            };
            if c.outbox.push(head, body, limit) == Pushed::OverLimit {
                self.limit_disconnections.fetch_add(1, Ordering::Relaxed);
                c.close_for_output_limit();
            }
        }
    }

    /// The names of `kind` with at least one subscriber, matching
    /// `pattern` if given (PUBSUB CHANNELS / SHARDCHANNELS).
    pub fn names(&self, kind: Kind, pattern: Option<&[u8]>) -> Vec<Name> {
        let reg = self.registry.read();
        reg.map(kind)
            .keys()
            .filter(|n| pattern.is_none_or(|p| glob::matches(p, n, false)))
            .cloned()
            .collect()
    }

    /// Subscribers of one channel (PUBSUB NUMSUB / SHARDNUMSUB).
    pub fn subscribers(&self, kind: Kind, name: &[u8]) -> usize {
        self.registry
            .read()
            .map(kind)
            .get(name)
            .map_or(0, |s| s.len())
    }

    /// Every subscription of the clients `pick` chooses: the client,
    /// whether the name is a pattern, the name (for ACL rules that change).
    pub fn subscriptions_where(
        &self,
        pick: impl Fn(&ClientInfo) -> bool,
    ) -> Vec<(Arc<ClientInfo>, bool, Name)> {
        let reg = self.registry.read();
        let mut out = Vec::new();
        for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
            for (name, subs) in reg.map(kind) {
                for c in subs.iter().filter(|c| pick(c)) {
                    out.push((c.clone(), kind == Kind::Pattern, name.clone()));
                }
            }
        }
        out
    }

    /// Names of `kind` with at least one subscriber (PUBSUB NUMPAT, INFO).
    pub fn len(&self, kind: Kind) -> usize {
        self.registry.read().map(kind).len()
    }

    /// Whether nobody subscribes to anything.
    pub fn is_empty(&self) -> bool {
        let reg = self.registry.read();
        reg.channels.is_empty() && reg.patterns.is_empty() && reg.shard.is_empty()
    }
}

/// A push frame of bulk strings without its first byte (`*` in RESP2,
/// `>` in RESP3): `3\r\n$7\r\nmessage\r\n...`.
fn encode_body(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + parts.iter().map(|p| p.len() + 16).sum::<usize>());
    write_bulk_frame(&mut out, None, parts.iter().copied());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(id: u64) -> Arc<ClientInfo> {
        Arc::new(ClientInfo::new(id, String::new(), String::new(), 0))
    }

    fn drain(c: &ClientInfo) -> Vec<u8> {
        let mut out = Vec::new();
        let n = c.outbox.take_into(&mut out);
        c.outbox.written(n);
        out
    }

    #[test]
    fn publish_reaches_channels_and_patterns_once_encoded() {
        let ps = PubSub::new();
        let (a, b) = (client(1), client(2));
        b.resp.store(3, Ordering::Relaxed);
        let (mut sa, mut sb) = (Subscriptions::default(), Subscriptions::default());
        assert!(ps.subscribe(Kind::Channel, &a, &mut sa, b"news"));
        assert!(!ps.subscribe(Kind::Channel, &a, &mut sa, b"news"));
        assert!(ps.subscribe(Kind::Pattern, &a, &mut sa, b"n*"));
        assert!(ps.subscribe(Kind::Channel, &b, &mut sb, b"news"));
        assert_eq!(sa.count(), 2);
        let mut mine = Vec::new();
        let mut own = Own {
            id: 99,
            resp3: false,
            out: &mut mine,
        };
        assert_eq!(ps.publish(Kind::Channel, b"news", b"hi", &mut own), 3);
        assert_eq!(
            drain(&a),
            b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n\
              *4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$2\r\nhi\r\n"
        );
        assert_eq!(
            drain(&b),
            b">3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n"
        );
        // Shard channels are their own namespace.
        assert_eq!(ps.publish(Kind::Shard, b"news", b"hi", &mut own), 0);
        assert_eq!(ps.len(Kind::Channel), 1);
        assert_eq!(ps.subscribers(Kind::Channel, b"news"), 2);
        ps.forget(&a, &mut sa);
        assert_eq!(ps.subscribers(Kind::Channel, b"news"), 1);
        assert_eq!(ps.len(Kind::Pattern), 0);
        assert!(!sa.active());
    }

    #[test]
    fn own_copy_goes_to_the_publisher_replies() {
        let ps = PubSub::new();
        let a = client(7);
        let mut sa = Subscriptions::default();
        ps.subscribe(Kind::Shard, &a, &mut sa, b"s");
        let mut mine = Vec::new();
        let mut own = Own {
            id: 7,
            resp3: true,
            out: &mut mine,
        };
        assert_eq!(ps.publish(Kind::Shard, b"s", b"m", &mut own), 1);
        assert_eq!(mine, b">3\r\n$8\r\nsmessage\r\n$1\r\ns\r\n$1\r\nm\r\n");
        assert_eq!(a.outbox.pending(), 0);
    }

    #[test]
    fn a_subscriber_past_its_limit_is_killed_others_keep_receiving() {
        let ps = PubSub::new();
        ps.set_limit(OutputLimit {
            hard: 200,
            soft: 0,
            soft_secs: 0,
        });
        let (slow, fast) = (client(1), client(2));
        let (mut s1, mut s2) = (Subscriptions::default(), Subscriptions::default());
        ps.subscribe(Kind::Channel, &slow, &mut s1, b"c");
        ps.subscribe(Kind::Channel, &fast, &mut s2, b"c");
        let mut mine = Vec::new();
        let mut own = Own {
            id: 0,
            resp3: false,
            out: &mut mine,
        };
        for _ in 0..20 {
            ps.publish(Kind::Channel, b"c", b"0123456789", &mut own);
            drain(&fast);
        }
        assert!(slow.killed.load(Ordering::Acquire));
        assert!(!fast.killed.load(Ordering::Acquire));
        assert_eq!(slow.outbox.pending(), 0);
        assert_eq!(ps.limit_disconnections.load(Ordering::Relaxed), 1);
    }
}
