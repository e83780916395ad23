//! Live boards (issue 18): who watches the top n of which leaderboard, and
//! the messages they get (LB.WATCH, and the HTTP listener's WebSockets).
//!
//! Watchers of the same (database, key, n, interval) share one [`Group`].
//! A group registers a flag in its key's WATCH list (the one MULTI's WATCH
//! uses, so every change of the key, its expiry, DEL, FLUSHALL and SWAPDB
//! raise it); the live-boards task (`server`) calls [`LiveBoards::run_due`],
//! which, once per interval, reads the top n of each group whose flag was
//! raised, compares it with what the group last sent, and encodes the net
//! difference once per protocol (RESP2, RESP3, JSON). Each watcher gets
//! the encoded bytes appended to its bounded queue (its connection's
//! [`Outbox`](super::outbox::Outbox), under the `pubsub` class of
//! `client-output-buffer-limit`), so a slow watcher never slows the board,
//! the task or the others: past its limit it is cut off.
//!
//! Not here: the commands' arguments and replies (`commands::lbwatch`),
//! the task's timer (`server`), the WebSocket transport (`server::http`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::client::ClientInfo;
use super::outbox::{Outbox, OutputLimit, Pushed};
use crate::engine::leaderboard::Leaderboard;
use crate::engine::Value;

/// Default coalescing interval of LB.WATCH, in ms.
pub const DEFAULT_INTERVAL_MS: u64 = 100;
/// Shortest interval accepted, in ms.
pub const MIN_INTERVAL_MS: u64 = 10;
/// Longest top a watcher may ask for (a snapshot is one message).
pub const MAX_N: u64 = 1000;

/// One place of a top n.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub member: Bytes,
    pub score: i64,
}

/// The first `n` entries of `board`.
pub fn top_of(board: &Leaderboard, n: u64) -> Vec<Entry> {
    board
        .range(1, n)
        .map(|(_, e)| Entry {
            member: Bytes::copy_from_slice(e.member),
            score: e.score,
        })
        .collect()
}

/// What a group reads of its board: the top n, and the period it is of.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BoardTop {
    pub entries: Vec<Entry>,
    /// The current period's number (a board with seasons or reset by
    /// LB.RESET; None otherwise): when it changes, watchers get a snapshot
    /// of the new period instead of a diff.
    pub period: Option<u64>,
}

/// The top n of the value under a key at `now_ms` (nothing, or another
/// type, is an empty top: the key may become a board later). A board
/// whose period ended but was not rolled yet reads as its new, empty
/// period, as the LB.* reads see it.
pub fn top_of_value(value: Option<&Value>, n: u64, now_ms: u64) -> BoardTop {
    let Some(Value::Leaderboard(b)) = value else {
        return BoardTop::default();
    };
    let Some(season) = b.season() else {
        return BoardTop {
            entries: top_of(b, n),
            period: None,
        };
    };
    let passed = b.due(now_ms, true).count;
    BoardTop {
        entries: if passed == 0 {
            top_of(b, n)
        } else {
            Vec::new()
        },
        period: Some(season.number + passed),
    }
}

/// The net difference between two tops: each place (1-based) whose entry
/// changed, with its new entry, or `None` where the new top is shorter.
pub fn diff<'a>(old: &[Entry], new: &'a [Entry]) -> Vec<(u64, Option<&'a Entry>)> {
    let mut out = Vec::new();
    for i in 0..old.len().max(new.len()) {
        match (old.get(i), new.get(i)) {
            (Some(a), Some(b)) if a == b => {}
            (_, Some(b)) => out.push((i as u64 + 1, Some(b))),
            (Some(_), None) => out.push((i as u64 + 1, None)),
            (None, None) => {}
        }
    }
    out
}

/// The encodings of one message, made once and shared by every watcher.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Encoded {
    /// The RESP frame without its first byte (`*` in RESP2, `>` in RESP3),
    /// as RESP2 writes a removed place (`$-1`).
    pub resp2: Vec<u8>,
    /// The same for RESP3 (`_`).
    pub resp3: Vec<u8>,
    /// One line of JSON (no newline inside).
    pub json: Vec<u8>,
    /// The JSON as a whole WebSocket text frame from a server (unmasked),
    /// written as it is to every WebSocket watcher.
    pub ws: Vec<u8>,
}

/// `payload` as one unmasked WebSocket text frame (RFC 6455 5.2).
pub fn ws_text_frame(payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut out = Vec::with_capacity(len + 10);
    out.push(0x81); // FIN, text
    if len < 126 {
        out.push(len as u8);
    } else if let Ok(short) = u16::try_from(len) {
        out.push(126);
        out.extend_from_slice(&short.to_be_bytes());
    } else {
        out.push(127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    out.extend_from_slice(payload);
    out
}

fn header(out: &mut Vec<u8>, kind: u8, n: usize) {
    out.push(kind);
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn bulk(out: &mut Vec<u8>, b: &[u8]) {
    header(out, b'$', b.len());
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

fn int(out: &mut Vec<u8>, n: i64) {
    out.push(b':');
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// A JSON string of `b` (invalid UTF-8 replaced, as the page shows it).
fn json_string(out: &mut Vec<u8>, b: &[u8]) {
    out.push(b'"');
    for c in String::from_utf8_lossy(b).chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            c if (c as u32) < 0x20 => {
                out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes());
            }
            c => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out.push(b'"');
}

/// Encodes `[word, key, version, [[place, member, score] | [place, nil] ...]]`
/// in the three forms.
fn encode(
    word: &str,
    key: &[u8],
    version: u64,
    period: Option<u64>,
    items: &[(u64, Option<&Entry>)],
) -> Encoded {
    let mut resp2 = Vec::with_capacity(64 + items.len() * 32);
    // Without the first byte: the head is added per reader.
    resp2.extend_from_slice(b"4\r\n");
    bulk(&mut resp2, word.as_bytes());
    bulk(&mut resp2, key);
    int(&mut resp2, version as i64);
    header(&mut resp2, b'*', items.len());
    let mut resp3 = resp2.clone();
    for (place, e) in items {
        for out in [&mut resp2, &mut resp3] {
            match e {
                Some(e) => {
                    header(out, b'*', 3);
                    int(out, *place as i64);
                    bulk(out, &e.member);
                    int(out, e.score);
                }
                None => {
                    header(out, b'*', 2);
                    int(out, *place as i64);
                }
            }
        }
        if e.is_none() {
            resp2.extend_from_slice(b"$-1\r\n");
            resp3.extend_from_slice(b"_\r\n");
        }
    }
    let mut json = Vec::with_capacity(64 + items.len() * 32);
    json.extend_from_slice(b"{\"type\":");
    json_string(&mut json, word.trim_start_matches("lb.").as_bytes());
    json.extend_from_slice(b",\"key\":");
    json_string(&mut json, key);
    json.extend_from_slice(format!(",\"version\":{version}").as_bytes());
    if let Some(p) = period {
        json.extend_from_slice(format!(",\"period\":{p}").as_bytes());
    }
    json.extend_from_slice(b",\"entries\":[");
    for (i, (place, e)) in items.iter().enumerate() {
        if i > 0 {
            json.push(b',');
        }
        json.extend_from_slice(format!("[{place},").as_bytes());
        match e {
            Some(e) => {
                json_string(&mut json, &e.member);
                json.extend_from_slice(format!(",{}]", e.score).as_bytes());
            }
            None => json.extend_from_slice(b"null]"),
        }
    }
    json.extend_from_slice(b"]}");
    let ws = ws_text_frame(&json);
    Encoded {
        resp2,
        resp3,
        json,
        ws,
    }
}

/// A snapshot message: every place of `top` (its JSON names the period,
/// when the board has one).
pub fn encode_snapshot(key: &[u8], version: u64, top: &BoardTop) -> Encoded {
    let items: Vec<(u64, Option<&Entry>)> = top
        .entries
        .iter()
        .enumerate()
        .map(|(i, e)| (i as u64 + 1, Some(e)))
        .collect();
    encode("lb.snapshot", key, version, top.period, &items)
}

/// A diff message.
pub fn encode_diff(key: &[u8], version: u64, items: &[(u64, Option<&Entry>)]) -> Encoded {
    encode("lb.diff", key, version, None, items)
}

/// A socket written without waiting: a WebSocket's TCP stream, which the
/// live-boards task writes a message to itself when the socket can take
/// it (no task woken, no copy).
pub trait TryWrite: Send + Sync + std::fmt::Debug {
    /// Writes what the socket takes now (`WouldBlock` when nothing).
    fn try_write(&self, buf: &[u8]) -> std::io::Result<usize>;
}

/// A watcher that is not a RESP client (a WebSocket): each message is its
/// WebSocket frame ([`Encoded::ws`]), written straight to its socket when
/// nothing waits before it, else appended to its queue, which its
/// connection's task writes out.
#[derive(Debug, Default)]
pub struct JsonWatcher {
    /// Unique among JSON watchers.
    pub id: u64,
    /// Its queue of WebSocket frames.
    pub outbox: Outbox,
    /// Set when it was cut off at its limit: its transport closes.
    pub killed: AtomicBool,
    /// Signalled when `killed` is set.
    pub cut: Notify,
    /// Its socket, set (before it joins a group) where the transport lets
    /// messages be written straight to it.
    pub socket: std::sync::OnceLock<Arc<dyn TryWrite>>,
}

/// Who receives a group's messages.
#[derive(Debug, Clone)]
pub enum Watcher {
    /// A RESP connection (LB.WATCH).
    Client(Arc<ClientInfo>),
    /// A WebSocket.
    Json(Arc<JsonWatcher>),
    /// A RESP connection subscribed to the board's channel (the pub/sub
    /// face, `__lbwatch@<db>__:<n>:<key>`): each message is a Pub/Sub
    /// `message` on that channel whose payload is the JSON line.
    Channel {
        client: Arc<ClientInfo>,
        channel: Arc<[u8]>,
    },
}

/// A Pub/Sub `message` frame on `channel` carrying `payload`, without its
/// first byte (`*` or `>`).
fn message_frame(channel: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + channel.len() + payload.len());
    out.extend_from_slice(b"3\r\n");
    bulk(&mut out, b"message");
    bulk(&mut out, channel);
    bulk(&mut out, payload);
    out
}

impl Watcher {
    fn same(&self, other: &Watcher) -> bool {
        match (self, other) {
            (Watcher::Client(a), Watcher::Client(b)) => a.id == b.id,
            (Watcher::Json(a), Watcher::Json(b)) => Arc::ptr_eq(a, b),
            (
                Watcher::Channel {
                    client: a,
                    channel: x,
                },
                Watcher::Channel {
                    client: b,
                    channel: y,
                },
            ) => a.id == b.id && x == y,
            _ => false,
        }
    }

    /// Appends `msg`; false when the watcher is gone or was cut off at its
    /// limit (it is then told to go away).
    fn send(&self, msg: &Encoded, limit: &OutputLimit) -> bool {
        match self {
            Watcher::Client(c) => {
                if c.killed.load(Ordering::Acquire) {
                    return false;
                }
                let (head, body) = if c.resp.load(Ordering::Relaxed) == 3 {
                    (b'>', &msg.resp3)
                } else {
                    (b'*', &msg.resp2)
                };
                match c.outbox.push(head, body, limit) {
                    Pushed::Queued => true,
                    Pushed::Dropped => false,
                    Pushed::OverLimit => {
                        c.close_for_output_limit();
                        false
                    }
                }
            }
            Watcher::Channel { client: c, channel } => {
                if c.killed.load(Ordering::Acquire) {
                    return false;
                }
                let head = if c.resp.load(Ordering::Relaxed) == 3 {
                    b'>'
                } else {
                    b'*'
                };
                match c
                    .outbox
                    .push(head, &message_frame(channel, &msg.json), limit)
                {
                    Pushed::Queued => true,
                    Pushed::Dropped => false,
                    Pushed::OverLimit => {
                        c.close_for_output_limit();
                        false
                    }
                }
            }
            Watcher::Json(j) => {
                if j.killed.load(Ordering::Acquire) {
                    return false;
                }
                let pushed = match j.socket.get() {
                    Some(s) => j.outbox.write_or_push(&msg.ws, limit, |b| s.try_write(b)),
                    None => j.outbox.push_frame(&msg.ws, limit),
                };
                match pushed {
                    Pushed::Queued => true,
                    Pushed::Dropped => false,
                    Pushed::OverLimit => {
                        j.killed.store(true, Ordering::Release);
                        j.cut.notify_one();
                        false
                    }
                }
            }
        }
    }
}

/// What identifies a group: watchers of the same one share its messages.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupKey {
    pub db: usize,
    pub key: Bytes,
    pub n: u64,
    pub interval_ms: u64,
}

#[derive(Debug)]
struct GroupState {
    version: u64,
    top: BoardTop,
    watchers: Vec<Watcher>,
    due: Instant,
    /// Whether `dirty` is in the key's WATCH list and `top` was read
    /// then: a group made by [`LiveBoards::join_later`] is not until the
    /// live-boards task (or an LB.WATCH, which holds the key) registers it.
    registered: bool,
    /// Watchers still to get their snapshot (from the task, once the
    /// group is registered); they get no diff before it.
    waiting: Vec<Watcher>,
}

/// Watchers of one (database, key, n, interval).
#[derive(Debug)]
pub struct Group {
    /// What it watches.
    pub id: GroupKey,
    /// Raised by any change of the key (it sits in the key's WATCH list).
    pub dirty: Arc<AtomicBool>,
    state: Mutex<GroupState>,
}

impl Group {
    /// Watchers now.
    pub fn watchers(&self) -> usize {
        self.state.lock().watchers.len()
    }

    /// The version last sent.
    pub fn version(&self) -> u64 {
        self.state.lock().version
    }

    /// Registers a group made by [`LiveBoards::join_later`]: `top` is its
    /// board read while the caller holds the key's shard. True when the
    /// caller is to put `dirty` in the key's WATCH list (false: it was
    /// registered already).
    pub fn register(&self, top: BoardTop) -> bool {
        let mut st = self.state.lock();
        if st.registered {
            return false;
        }
        st.top = top;
        st.registered = true;
        true
    }
}

/// What [`LiveBoards::join`] gives a new watcher.
pub struct Joined {
    /// The group it joined.
    pub group: Arc<Group>,
    /// Whether the group was made for it: the caller registers
    /// `group.dirty` in the key's WATCH list (it holds the key's shard).
    pub created: bool,
    /// The snapshot to send it (the group's current version and top); a
    /// JSON watcher finds it queued already, before any diff.
    pub snapshot: Encoded,
}

/// The live boards' figures (INFO, /metrics).
#[derive(Debug, Default)]
pub struct Counters {
    /// Diff messages computed (once per group, whatever its watchers).
    pub diffs: AtomicU64,
    /// Messages queued to watchers (snapshots and diffs).
    pub deliveries: AtomicU64,
    /// Watchers cut off at their output limit.
    pub limit_disconnections: AtomicU64,
}

/// Every group, and the task's wake-up.
#[derive(Debug, Default)]
pub struct LiveBoards {
    groups: Mutex<HashMap<GroupKey, Arc<Group>, ahash::RandomState>>,
    /// Wakes the live-boards task when a group is made.
    pub wake: Notify,
    /// See [`Counters`].
    pub counters: Counters,
    next_json_id: AtomicU64,
}

/// Reads the top `n` of (`db`, `key`) now: `read_top(db, key, n)`.
pub type ReadTop<'a> = dyn FnMut(usize, &[u8], u64) -> BoardTop + 'a;

/// A group left without watchers: its flag is to be removed from its key's
/// WATCH list by the caller of [`LiveBoards::run_due`].
pub struct Retired {
    pub db: usize,
    pub key: Bytes,
    pub dirty: Arc<AtomicBool>,
}

impl LiveBoards {
    /// No groups.
    pub fn new() -> Self {
        LiveBoards::default()
    }

    /// A new JSON watcher (not yet in a group).
    pub fn json_watcher(&self) -> Arc<JsonWatcher> {
        Arc::new(JsonWatcher {
            id: self.next_json_id.fetch_add(1, Ordering::Relaxed),
            ..JsonWatcher::default()
        })
    }

    /// Adds `watcher` to the group of `id`, making it (with `fresh()` as
    /// its first top) if there is none. The snapshot is the group's
    /// current version, so that its next diff applies to it.
    pub fn join(&self, id: GroupKey, watcher: Watcher, fresh: impl FnOnce() -> BoardTop) -> Joined {
        let mut groups = self.groups.lock();
        let group = match groups.get(&id) {
            Some(g) => g.clone(),
            None => {
                let g = self.new_group(&id);
                groups.insert(id.clone(), g.clone());
                g
            }
        };
        let mut created = false;
        let snapshot = {
            let mut st = group.state.lock();
            if !st.registered {
                // New, or made by join_later and not registered yet: this
                // caller holds the key, so it registers it now.
                st.top = fresh();
                st.registered = true;
                created = true;
            }
            let snapshot = encode_snapshot(&id.key, st.version, &st.top);
            if let Watcher::Json(j) = &watcher {
                // Queued under the group's lock: no diff can be written to
                // its socket before it.
                j.outbox.push_frame(&snapshot.ws, &OutputLimit::default());
            }
            st.watchers.push(watcher);
            snapshot
        };
        drop(groups);
        self.counters.deliveries.fetch_add(1, Ordering::Relaxed);
        if created {
            self.wake.notify_one();
        }
        Joined {
            group,
            created,
            snapshot,
        }
    }

    /// A group not registered yet (see [`GroupState::registered`]).
    fn new_group(&self, id: &GroupKey) -> Arc<Group> {
        Arc::new(Group {
            id: id.clone(),
            dirty: Arc::new(AtomicBool::new(false)),
            state: Mutex::new(GroupState {
                version: 1,
                top: BoardTop::default(),
                watchers: Vec::new(),
                due: Instant::now() + Duration::from_millis(id.interval_ms),
                registered: false,
                waiting: Vec::new(),
            }),
        })
    }

    /// Adds `watcher` to the group of `id` from where the key is not held
    /// (SUBSCRIBE of a board's channel): it gets its snapshot from the
    /// live-boards task, which registers a new group first
    /// ([`LiveBoards::unregistered`], [`Group::register`]).
    pub fn join_later(&self, id: GroupKey, watcher: Watcher) -> Arc<Group> {
        let mut groups = self.groups.lock();
        let group = match groups.get(&id) {
            Some(g) => g.clone(),
            None => {
                let g = self.new_group(&id);
                groups.insert(id, g.clone());
                g
            }
        };
        group.state.lock().waiting.push(watcher);
        drop(groups);
        self.wake.notify_one();
        group
    }

    /// Groups made by [`LiveBoards::join_later`] and not registered yet.
    pub fn unregistered(&self) -> Vec<Arc<Group>> {
        self.groups
            .lock()
            .values()
            .filter(|g| !g.state.lock().registered)
            .cloned()
            .collect()
    }

    /// Removes `watcher` from `group` (the task retires an empty group).
    pub fn leave(&self, group: &Group, watcher: &Watcher) {
        let mut st = group.state.lock();
        st.watchers.retain(|w| !w.same(watcher));
        st.waiting.retain(|w| !w.same(watcher));
    }

    /// Watchers of every group on (`db`, `key`) (the metrics).
    pub fn watchers_by_board(&self) -> Vec<(usize, Bytes, usize)> {
        let groups = self.groups.lock();
        let mut by: HashMap<(usize, Bytes), usize> = HashMap::new();
        for g in groups.values() {
            *by.entry((g.id.db, g.id.key.clone())).or_default() += g.watchers();
        }
        let mut out: Vec<(usize, Bytes, usize)> =
            by.into_iter().map(|((d, k), n)| (d, k, n)).collect();
        out.sort();
        out
    }

    /// Groups now.
    pub fn groups(&self) -> usize {
        self.groups.lock().len()
    }

    /// Runs every group whose interval ended by `now`: reads its top with
    /// `read_top(db, key, n)` if its key changed, and sends the net
    /// difference, if any, to its watchers. Returns when the next group is
    /// due (None: no groups) and the groups retired for want of watchers.
    /// The caller holds no lock (`read_top` takes the key's shard).
    pub fn run_due(
        &self,
        now: Instant,
        limit: &OutputLimit,
        read_top: &mut ReadTop<'_>,
    ) -> (Option<Instant>, Vec<Retired>) {
        let mut due = Vec::new();
        let mut retired = Vec::new();
        let mut next: Option<Instant> = None;
        {
            let mut groups = self.groups.lock();
            groups.retain(|_, g| {
                let mut st = g.state.lock();
                if st.registered && !st.waiting.is_empty() {
                    // Snapshots of what the others were last sent, so that
                    // the next diff applies to them too.
                    let snap = encode_snapshot(&g.id.key, st.version, &st.top);
                    let mut sent = 0u64;
                    for w in std::mem::take(&mut st.waiting) {
                        if w.send(&snap, limit) {
                            st.watchers.push(w);
                            sent += 1;
                        }
                    }
                    self.counters.deliveries.fetch_add(sent, Ordering::Relaxed);
                }
                if st.watchers.is_empty() && st.waiting.is_empty() {
                    retired.push(Retired {
                        db: g.id.db,
                        key: g.id.key.clone(),
                        dirty: g.dirty.clone(),
                    });
                    return false;
                }
                if st.due <= now {
                    due.push(g.clone());
                    // Ticks keep their rhythm; a late task does not bunch them.
                    let step = Duration::from_millis(g.id.interval_ms);
                    st.due += step;
                    if st.due <= now {
                        st.due = now + step;
                    }
                }
                next = Some(next.map_or(st.due, |t: Instant| t.min(st.due)));
                true
            });
        }
        for g in due {
            if !g.dirty.swap(false, Ordering::AcqRel) {
                continue;
            }
            // Read before locking the group: the shard lock is never taken
            // while a group's is held.
            let top = read_top(g.id.db, &g.id.key, g.id.n);
            let mut st = g.state.lock();
            // A new period (a season rolled over, LB.RESET) is sent whole:
            // a watcher then knows the old period's entries are gone.
            let msg = if top.period != st.top.period {
                encode_snapshot(&g.id.key, st.version + 1, &top)
            } else {
                let items = diff(&st.top.entries, &top.entries);
                if items.is_empty() {
                    continue;
                }
                encode_diff(&g.id.key, st.version + 1, &items)
            };
            st.version += 1;
            self.counters.diffs.fetch_add(1, Ordering::Relaxed);
            let mut sent = 0u64;
            let mut cut = 0u64;
            st.watchers.retain(|w| {
                if w.send(&msg, limit) {
                    sent += 1;
                    true
                } else {
                    cut += 1;
                    false
                }
            });
            st.top = top;
            self.counters.deliveries.fetch_add(sent, Ordering::Relaxed);
            self.counters
                .limit_disconnections
                .fetch_add(cut, Ordering::Relaxed);
        }
        (next, retired)
    }
}

/// A connection's watches (kept in its `ClientState`): one per (db, key).
#[derive(Debug, Default)]
pub struct ClientWatches {
    pub list: Vec<Arc<Group>>,
    /// Boards' channels it subscribed to (the pub/sub face), with their
    /// groups.
    pub channels: Vec<(Arc<[u8]>, Arc<Group>)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(m: &str, s: i64) -> Entry {
        Entry {
            member: Bytes::copy_from_slice(m.as_bytes()),
            score: s,
        }
    }

    #[test]
    fn diff_lists_changed_places_and_removals() {
        let old = vec![e("a", 30), e("b", 20), e("c", 10)];
        let new = vec![e("b", 40), e("a", 30)];
        let d = diff(&old, &new);
        assert_eq!(
            d,
            vec![(1, Some(&new[0])), (2, Some(&new[1])), (3, None)],
            "a swap lists both places, a shorter top the removed place"
        );
        assert!(diff(&new, &new).is_empty());
        let grown = vec![e("b", 40), e("a", 30), e("z", 1)];
        assert_eq!(diff(&new, &grown), vec![(3, Some(&grown[2]))]);
        // A score change in place is a change of that place.
        let bumped = vec![e("b", 41), e("a", 30)];
        assert_eq!(diff(&new, &bumped), vec![(1, Some(&bumped[0]))]);
    }

    #[test]
    fn messages_encode_once_per_protocol() {
        let top = [e("al\"ice", 5)];
        let items = [(1, Some(&top[0])), (2, None)];
        let m = encode_diff(b"k", 7, &items);
        let want2 = b"4\r\n$7\r\nlb.diff\r\n$1\r\nk\r\n:7\r\n*2\r\n*3\r\n:1\r\n$6\r\nal\"ice\r\n:5\r\n*2\r\n:2\r\n$-1\r\n";
        assert_eq!(m.resp2, want2.to_vec());
        let want3 = b"4\r\n$7\r\nlb.diff\r\n$1\r\nk\r\n:7\r\n*2\r\n*3\r\n:1\r\n$6\r\nal\"ice\r\n:5\r\n*2\r\n:2\r\n_\r\n";
        assert_eq!(m.resp3, want3.to_vec());
        assert_eq!(
            String::from_utf8_lossy(&m.json),
            r#"{"type":"diff","key":"k","version":7,"entries":[[1,"al\"ice",5],[2,null]]}"#
        );
        assert_eq!(m.ws[..2], [0x81, m.json.len() as u8]);
        assert_eq!(m.ws[2..], m.json[..]);
        let s = encode_snapshot(b"k", 1, &BoardTop::default());
        assert_eq!(
            String::from_utf8_lossy(&s.json),
            r#"{"type":"snapshot","key":"k","version":1,"entries":[]}"#
        );
    }

    #[test]
    fn websocket_frames_carry_their_length() {
        let f = ws_text_frame(&[b'x'; 126]);
        assert_eq!(f[..4], [0x81, 126, 0, 126]);
        assert_eq!(f.len(), 4 + 126);
        let f = ws_text_frame(&[b'x'; 70_000]);
        assert_eq!(f[..2], [0x81, 127]);
        assert_eq!(f[2..10], 70_000u64.to_be_bytes());
        assert_eq!(f.len(), 10 + 70_000);
    }

    fn top(entries: Vec<Entry>) -> BoardTop {
        BoardTop {
            entries,
            period: None,
        }
    }

    #[test]
    fn a_new_period_is_sent_as_a_snapshot() {
        let lb = LiveBoards::new();
        let a = client(1);
        let first = BoardTop {
            entries: vec![e("x", 1)],
            period: Some(4),
        };
        let j = lb.join(id(2), Watcher::Client(a.clone()), || first.clone());
        let limit = OutputLimit::default();
        let mut t = Instant::now();
        // The period rolls over, empty: a snapshot, not a removal diff.
        j.group.dirty.store(true, Ordering::Release);
        t += Duration::from_secs(1);
        lb.run_due(t, &limit, &mut |_, _, _| BoardTop {
            entries: vec![],
            period: Some(5),
        });
        let got = drain(&a);
        assert_eq!(got[0], b'*');
        assert_eq!(
            &got[1..],
            &encode_snapshot(
                b"k",
                2,
                &BoardTop {
                    entries: vec![],
                    period: Some(5),
                }
            )
            .resp2[..]
        );
        let j5 = encode_snapshot(
            b"k",
            2,
            &BoardTop {
                entries: vec![],
                period: Some(5),
            },
        );
        assert_eq!(
            String::from_utf8_lossy(&j5.json),
            r#"{"type":"snapshot","key":"k","version":2,"period":5,"entries":[]}"#
        );
        // Same entries, another period (both empty): still a snapshot.
        j.group.dirty.store(true, Ordering::Release);
        t += Duration::from_secs(1);
        lb.run_due(t, &limit, &mut |_, _, _| BoardTop {
            entries: vec![],
            period: Some(6),
        });
        assert!(drain(&a).starts_with(b"*4\r\n$11\r\nlb.snapshot"));
        assert_eq!(j.group.version(), 3);
    }

    fn client(id: u64) -> Arc<ClientInfo> {
        Arc::new(ClientInfo::new(id, String::new(), String::new(), 0))
    }

    fn drain(c: &ClientInfo) -> Vec<u8> {
        let mut out = Vec::new();
        let n = c.outbox.take_into(&mut out);
        c.outbox.written(n);
        out
    }

    fn id(n: u64) -> GroupKey {
        GroupKey {
            db: 0,
            key: Bytes::from_static(b"k"),
            n,
            interval_ms: 10,
        }
    }

    #[test]
    fn a_group_coalesces_and_shares_one_diff() {
        let lb = LiveBoards::new();
        let (a, b) = (client(1), client(2));
        b.resp.store(3, Ordering::Relaxed);
        let j = lb.join(id(2), Watcher::Client(a.clone()), || top(vec![e("x", 1)]));
        assert!(j.created);
        let j2 = lb.join(id(2), Watcher::Client(b.clone()), || unreachable!());
        assert!(!j2.created);
        assert_eq!(j2.snapshot, encode_snapshot(b"k", 1, &top(vec![e("x", 1)])));
        let limit = OutputLimit::default();
        let later = Instant::now() + Duration::from_secs(1);
        // Not dirty: nothing read, nothing sent.
        let mut reads = 0;
        lb.run_due(later, &limit, &mut |_, _, _| {
            reads += 1;
            BoardTop::default()
        });
        assert_eq!(reads, 0);
        j.group.dirty.store(true, Ordering::Release);
        let later = later + Duration::from_secs(1);
        lb.run_due(later, &limit, &mut |_, _, n| {
            reads += 1;
            assert_eq!(n, 2);
            top(vec![e("y", 2), e("x", 1)])
        });
        assert_eq!(reads, 1, "one read for both watchers");
        let got_a = drain(&a);
        assert!(got_a.starts_with(b"*4\r\n$7\r\nlb.diff"));
        assert!(drain(&b).starts_with(b">4\r\n$7\r\nlb.diff"));
        assert_eq!(j.group.version(), 2);
        assert_eq!(lb.counters.diffs.load(Ordering::Relaxed), 1);
        // Both leave: the next run retires the group.
        lb.leave(&j.group, &Watcher::Client(a.clone()));
        lb.leave(&j.group, &Watcher::Client(b.clone()));
        let (next, retired) = lb.run_due(later, &limit, &mut |_, _, _| BoardTop::default());
        assert!(next.is_none());
        assert_eq!(retired.len(), 1);
        assert_eq!(lb.groups(), 0);
    }

    #[test]
    fn a_watcher_past_its_limit_is_cut_off_others_keep_receiving() {
        let lb = LiveBoards::new();
        let (slow, fast) = (client(1), client(2));
        let j = lb.join(id(1), Watcher::Client(slow.clone()), BoardTop::default);
        lb.join(id(1), Watcher::Client(fast.clone()), BoardTop::default);
        let limit = OutputLimit {
            hard: 300,
            soft: 0,
            soft_secs: 0,
        };
        let mut t = Instant::now();
        for i in 0..20 {
            j.group.dirty.store(true, Ordering::Release);
            t += Duration::from_secs(1);
            lb.run_due(t, &limit, &mut |_, _, _| top(vec![e("m", i)]));
            drain(&fast);
        }
        assert!(slow.killed.load(Ordering::Acquire));
        assert!(!fast.killed.load(Ordering::Acquire));
        assert_eq!(j.group.watchers(), 1);
        assert_eq!(lb.counters.limit_disconnections.load(Ordering::Relaxed), 1);
    }
}
