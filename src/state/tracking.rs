//! Client-side caching (CLIENT TRACKING): the table of which clients read
//! which keys, the prefixes broadcast clients listen on, and delivery of
//! invalidation messages when a key changes.
//!
//! As in Redis, the table knows key names only (not databases) and client
//! ids: a key read by a client is remembered until it changes, then every
//! client that remembered it gets one invalidation and the key is
//! forgotten. Broadcast (BCAST) clients are not in the table; keys changed
//! under their prefixes are gathered and sent, one message per prefix, when
//! a connection finishes a batch of commands ([`Tracking::after_batch`],
//! Redis's `beforeSleep`), which also trims the table to
//! `tracking-table-max-keys`.
//!
//! A message for the client whose command caused it goes into that
//! client's [`Me::out`], which the dispatcher writes after the command's
//! reply (where Redis 7.0 puts it); others go to the recipient's outbox.
//!
//! Not here: the CLIENT subcommands' arguments and error lines
//! (`commands::server::tracking`), and which keys a command reads (the
//! command table's key specs, read by the dispatcher).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use smallvec::SmallVec;

use super::client::ClientInfo;
use super::outbox::{OutputLimit, Pushed};
use super::server::Server;
use crate::protocol::write_bulk_frame;

/// Bits of [`TrackingFlags`].
pub mod flag {
    /// Tracking is on.
    pub const ON: u32 = 1;
    /// Broadcast mode.
    pub const BCAST: u32 = 1 << 1;
    /// Only keys read right after CLIENT CACHING YES are remembered.
    pub const OPTIN: u32 = 1 << 2;
    /// Keys read right after CLIENT CACHING NO are not remembered.
    pub const OPTOUT: u32 = 1 << 3;
    /// No messages for the client's own changes.
    pub const NOLOOP: u32 = 1 << 4;
    /// The redirect client went away.
    pub const BROKEN_REDIR: u32 = 1 << 5;
}

/// What other connections may read of a client's tracking settings (kept
/// in its `ClientInfo`): the [`flag`] bits and the redirect client id.
#[derive(Debug, Default)]
pub struct TrackingFlags {
    flags: AtomicU32,
    redirect: AtomicU64,
}

impl TrackingFlags {
    /// The [`flag`] bits.
    pub fn get(&self) -> u32 {
        self.flags.load(Ordering::Relaxed)
    }

    /// Whether flag `f` is set.
    pub fn has(&self, f: u32) -> bool {
        self.get() & f != 0
    }

    /// The client messages are redirected to, 0 for none.
    pub fn redirect(&self) -> u64 {
        self.redirect.load(Ordering::Relaxed)
    }

    /// CLIENT GETREDIR / the `redir` field of CLIENT LIST: the redirect
    /// id while tracking is on (0 for none), -1 when it is off.
    pub fn redirect_shown(&self) -> i64 {
        if self.has(flag::ON) {
            self.redirect() as i64
        } else {
            -1
        }
    }

    /// CLIENT LIST's flag letters for tracking (`t`, `R`, `B`).
    pub fn letters(&self) -> String {
        let f = self.get();
        [
            (flag::ON, 't'),
            (flag::BROKEN_REDIR, 'R'),
            (flag::BCAST, 'B'),
        ]
        .iter()
        .filter(|(b, _)| f & b != 0)
        .map(|&(_, c)| c)
        .collect()
    }

    fn set_bits(&self, f: u32) {
        self.flags.fetch_or(f, Ordering::Relaxed);
    }
}

/// A connection's own tracking state (kept in its `ClientState`).
#[derive(Debug, Default)]
pub struct ClientTracking {
    /// Tracking is on (a copy of [`flag::ON`] for the owner).
    pub on: bool,
    /// CLIENT CACHING YES / NO was given for the next command.
    pub caching: bool,
    /// The keys of the script now running: a read-only command inside it
    /// remembers these, not its own (as Redis 7.0 does).
    pub script_keys: Vec<Bytes>,
    /// Messages for this client caused by its own command, written after
    /// that command's reply.
    pub own: Vec<u8>,
}

/// The options of CLIENT TRACKING ON.
#[derive(Debug, Default, Clone)]
pub struct Options {
    /// Client to send the messages to, 0 for none.
    pub redirect: u64,
    /// Bits of [`flag`]: BCAST, OPTIN, OPTOUT, NOLOOP.
    pub flags: u32,
    /// BCAST prefixes.
    pub prefixes: Vec<Vec<u8>>,
}

/// The client running the command that causes messages: what it is sent
/// goes after its reply.
pub struct Me<'a> {
    /// Its id.
    pub id: u64,
    /// Where its messages go.
    pub out: &'a mut Vec<u8>,
}

/// The table's figures (INFO).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Figures {
    /// Clients with tracking on.
    pub clients: usize,
    /// Keys remembered.
    pub keys: usize,
    /// (key, client) pairs remembered.
    pub items: usize,
    /// BCAST prefixes.
    pub prefixes: usize,
}

/// The clients listening on one BCAST prefix, and the keys under it
/// changed since the last batch ended (with the first client that changed
/// each, for NOLOOP).
#[derive(Default)]
struct Prefix {
    clients: BTreeMap<u64, Arc<ClientInfo>>,
    changed: BTreeMap<Bytes, u64>,
}

/// One prefix's message: its clients, and the keys changed under it.
type Broadcast = (Vec<Arc<ClientInfo>>, BTreeMap<Bytes, u64>);

#[derive(Default)]
struct Table {
    keys: HashMap<Bytes, SmallVec<[u64; 2]>, ahash::RandomState>,
    items: usize,
    prefixes: BTreeMap<Bytes, Prefix>,
    /// Each BCAST client's prefixes.
    by_client: HashMap<u64, BTreeSet<Bytes>>,
}

/// See the module documentation.
pub struct Tracking {
    /// Clients with tracking on; 0 makes every hook a no-op.
    clients: AtomicUsize,
    /// Hot copy of `tracking-table-max-keys` (0: no limit).
    max_keys: AtomicU64,
    /// Broadcast keys wait, or the table may be over its limit.
    pending: AtomicBool,
    table: Mutex<Table>,
}

impl Tracking {
    /// An empty table limited to `max_keys` keys (0: no limit).
    pub fn new(max_keys: u64) -> Self {
        Tracking {
            clients: AtomicUsize::new(0),
            max_keys: AtomicU64::new(max_keys),
            pending: AtomicBool::new(false),
            table: Mutex::new(Table::default()),
        }
    }

    /// Whether some client has tracking on.
    pub fn active(&self) -> bool {
        self.clients.load(Ordering::Relaxed) > 0
    }

    /// Sets `tracking-table-max-keys`.
    pub fn set_max_keys(&self, n: u64) {
        self.max_keys.store(n, Ordering::Relaxed);
        self.pending.store(true, Ordering::Relaxed);
    }

    /// The figures INFO shows.
    pub fn figures(&self) -> Figures {
        let t = self.table.lock();
        Figures {
            clients: self.clients.load(Ordering::Relaxed),
            keys: t.keys.len(),
            items: t.items,
            prefixes: t.prefixes.len(),
        }
    }

    /// The BCAST prefixes of client `id`, in byte order.
    pub fn prefixes_of(&self, id: u64) -> Vec<Bytes> {
        let t = self.table.lock();
        t.by_client
            .get(&id)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Turns tracking on (or changes its options while on), as CLIENT
    /// TRACKING ON does once its options are checked. BCAST prefixes add
    /// to those already set; no prefix means every key.
    pub fn enable(&self, c: &Arc<ClientInfo>, own: &mut ClientTracking, o: &Options) {
        if !own.on {
            self.clients.fetch_add(1, Ordering::Relaxed);
        }
        own.on = true;
        let keep = flag::BCAST | flag::OPTIN | flag::OPTOUT | flag::NOLOOP;
        c.tracking
            .flags
            .store(flag::ON | (o.flags & keep), Ordering::Relaxed);
        c.tracking.redirect.store(o.redirect, Ordering::Relaxed);
        if o.flags & flag::BCAST == 0 {
            return;
        }
        let empty = [Vec::new()];
        let prefixes = if o.prefixes.is_empty() {
            &empty[..]
        } else {
            &o.prefixes[..]
        };
        let mut t = self.table.lock();
        for p in prefixes {
            let p = Bytes::copy_from_slice(p);
            t.prefixes
                .entry(p.clone())
                .or_default()
                .clients
                .insert(c.id, c.clone());
            t.by_client.entry(c.id).or_default().insert(p);
        }
    }

    /// Turns tracking off (CLIENT TRACKING OFF, RESET, disconnection).
    /// Keys the client read stay in the table until they change, as in
    /// Redis.
    pub fn disable(&self, c: &ClientInfo, own: &mut ClientTracking) {
        if !own.on {
            return;
        }
        own.on = false;
        own.caching = false;
        c.tracking.flags.store(0, Ordering::Relaxed);
        self.clients.fetch_sub(1, Ordering::Relaxed);
        let mut t = self.table.lock();
        let Some(mine) = t.by_client.remove(&c.id) else {
            return;
        };
        for p in mine {
            if let Some(state) = t.prefixes.get_mut(&p) {
                state.clients.remove(&c.id);
                if state.clients.is_empty() {
                    t.prefixes.remove(&p);
                }
            }
        }
    }

    /// Remembers that client `id` read `keys`.
    pub fn remember<'k>(&self, id: u64, keys: impl Iterator<Item = &'k [u8]>) {
        let mut t = self.table.lock();
        for k in keys {
            let ids = t.keys.entry(Bytes::copy_from_slice(k)).or_default();
            if !ids.contains(&id) {
                ids.push(id);
                t.items += 1;
            }
        }
        let max = self.max_keys.load(Ordering::Relaxed);
        if max > 0 && t.keys.len() as u64 > max {
            self.pending.store(true, Ordering::Relaxed);
        }
    }

    /// Sends the invalidations for `keys`, changed by the command `me` is
    /// running (None: expiry). Broadcast clients get them when a batch
    /// ends.
    pub fn invalidate(&self, server: &Server, keys: &[Bytes], me: Option<&mut Me>) {
        let sends = self.take_readers(keys, me.as_ref().map_or(0, |m| m.id), true);
        self.send_to_readers(server, sends, me);
    }

    /// Removes `keys` from the table; returns (reader, key) pairs. With
    /// `bcast`, records the keys under the prefixes they fall in.
    fn take_readers(&self, keys: &[Bytes], by: u64, bcast: bool) -> Vec<(u64, Bytes)> {
        let mut sends = Vec::new();
        let mut t = self.table.lock();
        for k in keys {
            if bcast && !t.prefixes.is_empty() {
                let mut any = false;
                for (p, state) in t.prefixes.iter_mut() {
                    if k.starts_with(p) {
                        state.changed.entry(k.clone()).or_insert(by);
                        any = true;
                    }
                }
                if any {
                    self.pending.store(true, Ordering::Relaxed);
                }
            }
            if let Some(ids) = t.keys.remove(k) {
                t.items -= ids.len();
                sends.extend(ids.into_iter().map(|id| (id, k.clone())));
            }
        }
        sends
    }

    fn send_to_readers(&self, server: &Server, sends: Vec<(u64, Bytes)>, mut me: Option<&mut Me>) {
        let me_id = me.as_ref().map_or(0, |m| m.id);
        for (id, key) in sends {
            let Some(target) = server.clients.get(&id).map(|e| e.clone()) else {
                continue;
            };
            let f = target.tracking.get();
            if f & flag::ON == 0 || f & flag::BCAST != 0 {
                continue;
            }
            if f & flag::NOLOOP != 0 && id == me_id {
                continue;
            }
            send(server, &target, &keys_array(&[&key]), me.as_deref_mut());
        }
    }

    /// FLUSHALL / FLUSHDB: every tracking client gets the null
    /// invalidation, and the table is emptied.
    pub fn flush(&self, server: &Server, mut me: Option<&mut Me>) {
        if self.active() {
            let mut targets: Vec<Arc<ClientInfo>> = server
                .clients
                .iter()
                .filter(|e| e.value().tracking.has(flag::ON))
                .map(|e| e.value().clone())
                .collect();
            targets.sort_by_key(|c| c.id);
            for c in targets {
                let null: &[u8] = if c.resp.load(Ordering::Relaxed) == 3 {
                    b"_\r\n"
                } else {
                    b"$-1\r\n"
                };
                send(server, &c, null, me.as_deref_mut());
            }
        }
        let mut t = self.table.lock();
        t.keys = HashMap::default();
        t.items = 0;
    }

    /// When a connection has run a batch of commands (and after active
    /// expiry): trims the table to `tracking-table-max-keys`, then sends
    /// the broadcast messages gathered since the last batch.
    pub fn after_batch(&self, server: &Server) {
        if !self.pending.load(Ordering::Relaxed) {
            return;
        }
        self.pending.store(false, Ordering::Relaxed);
        let victims = self.over_limit();
        if !victims.is_empty() {
            let sends = self.take_readers(&victims, 0, false);
            self.send_to_readers(server, sends, None);
        }
        for (clients, changed) in self.take_broadcasts() {
            for c in clients {
                let noloop = c.tracking.has(flag::NOLOOP);
                let keys: Vec<&[u8]> = changed
                    .iter()
                    .filter(|(_, &by)| !(noloop && by == c.id))
                    .map(|(k, _)| &k[..])
                    .collect();
                if !keys.is_empty() {
                    send(server, &c, &keys_array(&keys), None);
                }
            }
        }
    }

    /// Keys to evict for the table to be back within its limit: from a
    /// random place near the start of the map's (hash) order, so the cost
    /// does not grow with the table.
    fn over_limit(&self) -> Vec<Bytes> {
        let max = self.max_keys.load(Ordering::Relaxed) as usize;
        let t = self.table.lock();
        let len = t.keys.len();
        if max == 0 || len <= max {
            return Vec::new();
        }
        let excess = len - max;
        let start = rand::random_range(0..len.min(1024));
        t.keys
            .keys()
            .skip(start)
            .chain(t.keys.keys())
            .take(excess)
            .cloned()
            .collect()
    }

    fn take_broadcasts(&self) -> Vec<Broadcast> {
        let mut t = self.table.lock();
        t.prefixes
            .values_mut()
            .filter(|p| !p.changed.is_empty())
            .map(|p| {
                let clients = p.clients.values().cloned().collect();
                (clients, std::mem::take(&mut p.changed))
            })
            .collect()
    }
}

/// Sends one invalidation (`array`: the keys' RESP array, or a null) for
/// tracking client `target`: to it, or to its redirect client (a RESP3
/// push, or a Pub/Sub message on `__redis__:invalidate` to a RESP2
/// subscriber). A RESP2 client without redirect gets nothing.
fn send(server: &Server, target: &Arc<ClientInfo>, array: &[u8], me: Option<&mut Me>) {
    let redirect = target.tracking.redirect();
    let recipient = if redirect == 0 {
        target.clone()
    } else if let Some(r) = server.clients.get(&redirect).map(|e| e.clone()) {
        r
    } else {
        target.tracking.set_bits(flag::BROKEN_REDIR);
        if target.resp.load(Ordering::Relaxed) == 3 {
            let mut body = b"2\r\n$21\r\ntracking-redir-broken\r\n:".to_vec();
            body.extend_from_slice(itoa::Buffer::new().format(redirect).as_bytes());
            body.extend_from_slice(b"\r\n");
            deliver(server, target, b'>', &body, me);
        }
        return;
    };
    let (head, word): (u8, &[u8]) = if recipient.resp.load(Ordering::Relaxed) == 3 {
        (b'>', b"2\r\n$10\r\ninvalidate\r\n")
    } else if redirect != 0 && recipient.is_subscriber() {
        (
            b'*',
            b"3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n",
        )
    } else {
        return;
    };
    let mut body = Vec::with_capacity(word.len() + array.len());
    body.extend_from_slice(word);
    body.extend_from_slice(array);
    deliver(server, &recipient, head, &body, me);
}

/// Queues a frame for `to`: after the reply of the running command when
/// `to` runs it, else in its outbox (waking a connection that does not
/// wait on it).
fn deliver(server: &Server, to: &Arc<ClientInfo>, head: u8, body: &[u8], me: Option<&mut Me>) {
    if let Some(m) = me.filter(|m| m.id == to.id) {
        m.out.push(head);
        m.out.extend_from_slice(body);
        return;
    }
    let subscriber = to.is_subscriber();
    let limit = if subscriber {
        server.pubsub.limit()
    } else {
        OutputLimit::default()
    };
    match to.outbox.push(head, body, &limit) {
        Pushed::OverLimit => {
            tracing::warn!(
                "Client id={} addr={} scheduled to be closed ASAP for overcoming of output buffer limits.",
                to.id,
                to.addr
            );
            to.kill();
        }
        Pushed::Queued if !subscriber && !to.tracking.has(flag::ON) => to.wake.notify_one(),
        _ => {}
    }
}

/// The RESP array of `keys` as bulk strings.
fn keys_array(keys: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + keys.iter().map(|k| k.len() + 16).sum::<usize>());
    write_bulk_frame(&mut out, Some(b'*'), keys.iter().copied());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::pubsub::{Kind, Subscriptions};
    use crate::state::Config;

    fn server() -> Arc<Server> {
        Server::new(Config::default(), None)
    }

    /// A connected client speaking `resp`.
    fn client(s: &Server, id: u64, resp: usize) -> Arc<ClientInfo> {
        let c = Arc::new(ClientInfo::new(id, String::new(), String::new(), 0));
        c.resp.store(resp, Ordering::Relaxed);
        s.clients.insert(id, c.clone());
        c
    }

    fn drain(c: &ClientInfo) -> Vec<u8> {
        let mut out = Vec::new();
        let n = c.outbox.take_into(&mut out);
        c.outbox.written(n);
        out
    }

    fn on(s: &Server, c: &Arc<ClientInfo>, flags: u32, redirect: u64, prefixes: &[&[u8]]) {
        let o = Options {
            redirect,
            flags,
            prefixes: prefixes.iter().map(|p| p.to_vec()).collect(),
        };
        s.tracking.enable(c, &mut ClientTracking::default(), &o);
    }

    const INV_K: &[u8] = b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n";

    #[test]
    fn readers_get_one_invalidation_then_forget_the_key() {
        let s = server();
        let (a, b, w) = (client(&s, 1, 3), client(&s, 2, 3), client(&s, 3, 2));
        on(&s, &a, 0, 0, &[]);
        on(&s, &b, flag::NOLOOP, 0, &[]);
        s.tracking.remember(1, [&b"k"[..]].into_iter());
        s.tracking.remember(2, [&b"k"[..], b"j"].into_iter());
        s.tracking.remember(1, [&b"k"[..]].into_iter());
        assert_eq!(
            (s.tracking.figures().keys, s.tracking.figures().items),
            (2, 3)
        );
        // b changes k itself: NOLOOP spares it; a's message is queued.
        let mut mine = Vec::new();
        let mut me = Me {
            id: 2,
            out: &mut mine,
        };
        s.tracking
            .invalidate(&s, &[Bytes::from_static(b"k")], Some(&mut me));
        assert!(mine.is_empty());
        assert_eq!(drain(&a), INV_K);
        assert_eq!(s.tracking.figures().items, 1);
        // Forgotten: a second change sends nothing.
        s.tracking.invalidate(&s, &[Bytes::from_static(b"k")], None);
        assert!(drain(&a).is_empty());
        // A client's own change to a key it read goes after its reply.
        s.tracking.remember(1, [&b"k"[..]].into_iter());
        let mut me = Me {
            id: 1,
            out: &mut mine,
        };
        s.tracking
            .invalidate(&s, &[Bytes::from_static(b"k")], Some(&mut me));
        assert_eq!(mine, INV_K);
        assert!(drain(&a).is_empty());
        // RESP2 without redirect: forgotten, nothing sent.
        on(&s, &w, 0, 0, &[]);
        s.tracking.remember(3, [&b"k"[..]].into_iter());
        s.tracking.invalidate(&s, &[Bytes::from_static(b"k")], None);
        assert!(drain(&w).is_empty());
        assert_eq!(s.tracking.figures().clients, 3);
    }

    #[test]
    fn redirect_to_a_subscriber_and_a_broken_redirect() {
        let s = server();
        let (a, b) = (client(&s, 1, 2), client(&s, 2, 2));
        let mut subs = Subscriptions::default();
        s.pubsub
            .subscribe(Kind::Channel, &b, &mut subs, b"__redis__:invalidate");
        on(&s, &a, 0, 2, &[]);
        s.tracking.remember(1, [&b"k"[..]].into_iter());
        s.tracking.invalidate(&s, &[Bytes::from_static(b"k")], None);
        assert_eq!(
            drain(&b),
            b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$1\r\nk\r\n"
        );
        s.tracking.flush(&s, None);
        assert_eq!(
            drain(&b),
            b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n$-1\r\n"
        );
        // The redirect client goes away: a RESP3 tracker hears of it at
        // every invalidation.
        s.clients.remove(&2);
        a.resp.store(3, Ordering::Relaxed);
        s.tracking.remember(1, [&b"k"[..]].into_iter());
        s.tracking.invalidate(&s, &[Bytes::from_static(b"k")], None);
        assert_eq!(drain(&a), b">2\r\n$21\r\ntracking-redir-broken\r\n:2\r\n");
        assert_eq!(a.tracking.letters(), "tR");
        assert_eq!(a.tracking.redirect_shown(), 2);
    }

    #[test]
    fn broadcasts_go_per_prefix_when_a_batch_ends() {
        let s = server();
        let (a, n) = (client(&s, 1, 3), client(&s, 2, 3));
        on(&s, &a, flag::BCAST, 0, &[b"user:", b"obj:"]);
        on(&s, &n, flag::BCAST | flag::NOLOOP, 0, &[]);
        assert_eq!(s.tracking.prefixes_of(1), [&b"obj:"[..], b"user:"]);
        assert_eq!(s.tracking.figures().prefixes, 3);
        let keys = [&b"user:3"[..], b"obj:2", b"other", b"user:1"].map(Bytes::copy_from_slice);
        let mut mine = Vec::new();
        s.tracking.invalidate(
            &s,
            &keys,
            Some(&mut Me {
                id: 2,
                out: &mut mine,
            }),
        );
        assert!(drain(&a).is_empty(), "nothing before the batch ends");
        s.tracking.after_batch(&s);
        assert_eq!(
            drain(&a),
            b">2\r\n$10\r\ninvalidate\r\n*1\r\n$5\r\nobj:2\r\n\
              >2\r\n$10\r\ninvalidate\r\n*2\r\n$6\r\nuser:1\r\n$6\r\nuser:3\r\n"
        );
        assert!(drain(&n).is_empty(), "NOLOOP: all were n's own");
        assert!(mine.is_empty());
        s.tracking.disable(
            &a,
            &mut ClientTracking {
                on: true,
                ..Default::default()
            },
        );
        assert_eq!(s.tracking.figures().prefixes, 1);
        assert!(s.tracking.prefixes_of(1).is_empty());
    }

    #[test]
    fn the_table_is_trimmed_to_its_limit() {
        let s = server();
        let a = client(&s, 1, 3);
        on(&s, &a, 0, 0, &[]);
        s.tracking.set_max_keys(2);
        s.tracking
            .remember(1, [&b"a"[..], b"b", b"c", b"d", b"e"].into_iter());
        s.tracking.after_batch(&s);
        assert_eq!(s.tracking.figures().keys, 2);
        let out = drain(&a);
        assert_eq!(out.windows(10).filter(|w| w == b"invalidate").count(), 3);
        s.tracking.set_max_keys(0);
        s.tracking.remember(1, [&b"f"[..], b"g", b"h"].into_iter());
        s.tracking.after_batch(&s);
        assert_eq!(s.tracking.figures().keys, 5);
    }
}
