//! [`Keys`]: a command's view of the keyspace while it runs (the shards it
//! locked, its database and clock), and what it changed, for the journal,
//! WATCH, blocked clients and client-side caching.

use bytes::Bytes;

use super::notify::{self, Class, Event};
use crate::engine::keyspace::{Db, Entry, Keyspace, Locked};
use crate::engine::value::Value;
use crate::error::CmdError;

/// A command's access to the keyspace: the shards it locked, the selected
/// database and the command's clock (fixed for its whole run, as in Redis, so
/// a key cannot expire half-way through a command, transaction or script).
pub struct Keys<'a> {
    /// The keyspace.
    pub ks: &'a Keyspace,
    /// The shards held.
    pub locked: Locked<'a>,
    /// Selected database.
    pub db: usize,
    /// The command's time, unix ms.
    pub now_ms: u64,
    /// Changes made (Redis's `server.dirty`): non-zero means the command is
    /// propagated to the AOF.
    pub dirty: u64,
    /// Keys changed while clients were blocked on keys, to wake them.
    pub ready: Vec<(usize, Bytes)>,
    /// Whether to collect [`Keys::ready`] (some client is blocked).
    pub track_ready: bool,
    /// What to write to the AOF instead of the command itself, when the
    /// command's effect is not deterministic from its arguments (SPOP writes
    /// the SREM of what it popped), and what EXEC's and a script's commands
    /// logged. `None`: the command as received.
    pub propagate: Option<Propagation>,
    /// Keys changed, for client-side caching's invalidations; `None` while
    /// no client tracks keys.
    pub tracked: Option<Vec<Bytes>>,
    /// Lookups that found / did not find their key (INFO keyspace_hits).
    pub hits: u64,
    /// See [`Keys::hits`].
    pub misses: u64,
    /// `notify-keyspace-events` when the command started (see `notify`).
    pub notify_flags: u32,
    /// Keyspace events raised, for the dispatcher to publish.
    pub events: Vec<Event>,
    /// Keys a read found past their expiry time: the dispatcher removes
    /// them once the command's locks are released (Redis's lazy expiry;
    /// `expired` is raised at the read).
    pub stale: Vec<(usize, Bytes)>,
    /// Whether reads update the keys' access time (OBJECT IDLETIME): not
    /// for a client under CLIENT NO-TOUCH ON, except its TOUCH.
    pub touch: bool,
}

/// The commands a command logs instead of itself (see [`Keys::propagate`]):
/// `SELECT n` entries mark database changes; some go to the replication
/// stream only.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Propagation {
    /// The commands in order, each one argument list, name first.
    pub cmds: Vec<Vec<Vec<u8>>>,
    /// Indices in `cmds`, ascending, of those for replicas only (PUBLISH).
    pub repl_only: Vec<usize>,
    /// The database the last `SELECT` entry selects, kept as entries are
    /// pushed so that adding one is O(1) however long the list (a script
    /// of 100,000 writes).
    last_db: Option<usize>,
}

/// The database a `SELECT n` command selects; `None` for other commands.
pub fn select_target(cmd: &[Vec<u8>]) -> Option<usize> {
    match cmd {
        [name, db] if name.eq_ignore_ascii_case(b"select") => {
            crate::protocol::parse_i64(db).and_then(|n| usize::try_from(n).ok())
        }
        _ => None,
    }
}

impl Propagation {
    /// A list of these commands (all for the AOF and the replicas).
    pub fn from_cmds(cmds: Vec<Vec<Vec<u8>>>) -> Self {
        let last_db = cmds.iter().rev().find_map(|c| select_target(c));
        Propagation {
            cmds,
            repl_only: Vec::new(),
            last_db,
        }
    }

    /// Appends a command (a `SELECT n` marks a database change).
    pub fn push(&mut self, command: Vec<Vec<u8>>) {
        if let Some(d) = select_target(&command) {
            self.last_db = Some(d);
        }
        self.cmds.push(command);
    }

    /// Appends a command for the replication stream only.
    pub fn push_repl_only(&mut self, command: Vec<Vec<u8>>) {
        self.repl_only.push(self.cmds.len());
        self.push(command);
    }

    /// Appends `SELECT db` unless the last database selected is `db`.
    pub fn select(&mut self, db: usize) {
        if self.last_db != Some(db) {
            self.push(vec![b"SELECT".to_vec(), db.to_string().into_bytes()]);
        }
    }

    /// Appends another list's commands (`only_repl`: only its commands for
    /// the replication stream, with the SELECTs that place them).
    pub fn append(&mut self, other: Propagation, only_repl: bool) {
        let mut repl = other.repl_only.iter().copied().peekable();
        for (i, c) in other.cmds.into_iter().enumerate() {
            if repl.next_if_eq(&i).is_some() {
                self.push_repl_only(c);
            } else if let Some(d) = select_target(&c) {
                self.select(d);
            } else if !only_repl {
                self.push(c);
            }
        }
    }

    /// Whether any command goes to the replication stream only.
    pub fn has_repl_only(&self) -> bool {
        !self.repl_only.is_empty()
    }
}

fn not_locked() -> CmdError {
    CmdError::err("internal error: key outside the command's locked shards")
}

impl<'a> Keys<'a> {
    /// Replaces what the AOF records for this command by `commands` (each
    /// one argument list, name first). Several calls accumulate.
    pub fn propagate_as(&mut self, command: Vec<Vec<u8>>) {
        self.propagate
            .get_or_insert_with(Propagation::default)
            .push(command);
    }

    /// Adds `command` to the replication stream only (not the AOF), in
    /// order with what this command logs: PUBLISH, as Redis propagates it
    /// (inside EXEC's or a script's MULTI/EXEC when run by them).
    pub fn propagate_to_replicas(&mut self, command: Vec<Vec<u8>>) {
        self.propagate
            .get_or_insert_with(Propagation::default)
            .push_repl_only(command);
    }

    /// The part of database `db` that holds `key`, for reading.
    pub fn part_in(&self, key: &[u8], db: usize) -> Result<&Db, CmdError> {
        Self::part_of(&self.locked, self.ks, key, db)
    }

    /// [`Keys::part_in`] as a function of the fields it reads, so that a
    /// caller can count a keyspace hit while holding what it returns.
    fn part_of<'l>(
        locked: &'l Locked<'_>,
        ks: &Keyspace,
        key: &[u8],
        db: usize,
    ) -> Result<&'l Db, CmdError> {
        let g = locked.guard(ks.shard_of(key)).ok_or_else(not_locked)?;
        g.shard().dbs.get(db).ok_or(CmdError::DbIndexOutOfRange)
    }

    /// The part of database `db` that holds `key`, for change.
    pub fn part_in_mut(&mut self, key: &[u8], db: usize) -> Result<&mut Db, CmdError> {
        let idx = self.ks.shard_of(key);
        let g = self.locked.guard_mut(idx).ok_or_else(not_locked)?;
        let shard = g.shard_mut().ok_or_else(not_locked)?;
        shard.dbs.get_mut(db).ok_or(CmdError::DbIndexOutOfRange)
    }

    /// The part of the selected database that holds `key`, for reading.
    pub fn part(&self, key: &[u8]) -> Result<&Db, CmdError> {
        self.part_in(key, self.db)
    }

    /// The part of the selected database that holds `key`, for change.
    pub fn part_mut(&mut self, key: &[u8]) -> Result<&mut Db, CmdError> {
        let db = self.db;
        self.part_in_mut(key, db)
    }

    /// Raises keyspace event `name` of `class` on `key` of the selected
    /// database (nothing when the class is off).
    pub fn notify(&mut self, class: Class, name: &'static str, key: &[u8]) {
        raise(
            &mut self.events,
            self.notify_flags,
            class,
            name,
            key,
            self.db,
        );
    }

    /// [`Keys::notify`] for a key of database `db`.
    pub fn notify_in(&mut self, class: Class, name: &'static str, key: &[u8], db: usize) {
        raise(&mut self.events, self.notify_flags, class, name, key, db);
    }

    /// The live entry under `key` (counts a keyspace hit or miss; a miss
    /// raises `keymiss`).
    pub fn entry(&mut self, key: &[u8]) -> Result<Option<&Entry>, CmdError> {
        let part = Self::part_of(&self.locked, self.ks, key, self.db)?;
        let found = if self.touch {
            part.get(key, self.now_ms)
        } else {
            part.peek(key, self.now_ms)
        };
        if found.is_some() {
            self.hits += 1;
        } else {
            self.misses += 1;
            let part = Self::part_of(&self.locked, self.ks, key, self.db)?;
            note_miss(
                part,
                key,
                self.db,
                self.now_ms,
                self.notify_flags,
                &mut self.events,
                &mut self.stale,
            );
        }
        Ok(found)
    }

    /// [`Keys::entry`]'s miss for a caller that looked `key` up itself
    /// (counts the miss, notes a stale key, raises the events).
    pub fn note_miss(&mut self, key: &[u8]) -> Result<(), CmdError> {
        self.misses += 1;
        let part = Self::part_of(&self.locked, self.ks, key, self.db)?;
        note_miss(
            part,
            key,
            self.db,
            self.now_ms,
            self.notify_flags,
            &mut self.events,
            &mut self.stale,
        );
        Ok(())
    }

    /// Raises `expired` for a key a write removes because it expired,
    /// unless a read of this command already did.
    fn raise_expired(&mut self, key: &[u8]) {
        let db = self.db;
        if !self.stale.iter().any(|(d, k)| *d == db && k == key) {
            self.notify(Class::EXPIRED, "expired", key);
        }
    }

    /// Raises `new` when `key` (of database `db`) does not exist yet: for a
    /// caller about to create it.
    pub fn notify_if_new(&mut self, key: &[u8], db: usize) {
        if notify::enabled(self.notify_flags, Class::NEW)
            && self
                .part_in(key, db)
                .is_ok_and(|p| !p.contains(key, self.now_ms))
        {
            self.notify_in(Class::NEW, "new", key, db);
        }
    }

    /// The live value under `key`, for `calls` reads at once (counts as
    /// many keyspace hits: none for a look ahead); None, counting nothing,
    /// when the key is absent.
    pub fn value_read_by(&mut self, key: &[u8], calls: usize) -> Option<&Value> {
        let part = Self::part_of(&self.locked, self.ks, key, self.db).ok()?;
        let found = if self.touch {
            part.get(key, self.now_ms)?
        } else {
            part.peek(key, self.now_ms)?
        };
        self.hits += calls as u64;
        Some(&found.value)
    }

    /// The live value under `key`, for reading.
    pub fn value(&mut self, key: &[u8]) -> Result<Option<&Value>, CmdError> {
        Ok(self.entry(key)?.map(|e| &e.value))
    }

    /// The live value under `key` as the type `pick` takes out of a
    /// [`Value`] (counts a keyspace hit or miss): `None` when absent,
    /// `WRONGTYPE` when the key holds another type. Each family's typed
    /// reader is this with its variant.
    pub fn typed<T: ?Sized>(
        &mut self,
        key: &[u8],
        pick: fn(&Value) -> Option<&T>,
    ) -> Result<Option<&T>, CmdError> {
        match self.value(key)? {
            None => Ok(None),
            Some(v) => pick(v).map(Some).ok_or(CmdError::WrongType),
        }
    }

    /// [`Keys::typed`] for change (an expired key is removed first).
    pub fn typed_mut<T: ?Sized>(
        &mut self,
        key: &[u8],
        pick: fn(&mut Value) -> Option<&mut T>,
    ) -> Result<Option<&mut T>, CmdError> {
        match self.value_mut(key)? {
            None => Ok(None),
            Some(v) => pick(v).map(Some).ok_or(CmdError::WrongType),
        }
    }

    /// The live entry under `key`, for change (an expired key is removed).
    pub fn entry_mut(&mut self, key: &[u8]) -> Result<Option<&mut Entry>, CmdError> {
        let now = self.now_ms;
        // The key's shard found once (hashing the key) for all three steps.
        let idx = self.ks.shard_of(key);
        if self.shard_part_mut(idx)?.expire_if_needed(key, now) {
            self.shard_part_mut(idx)?.touch_watched(key);
            self.raise_expired(key);
        }
        Ok(self.shard_part_mut(idx)?.get_mut(key, now))
    }

    /// The part of the selected database in shard `idx`, for change.
    fn shard_part_mut(&mut self, idx: usize) -> Result<&mut Db, CmdError> {
        let db = self.db;
        let g = self.locked.guard_mut(idx).ok_or_else(not_locked)?;
        let shard = g.shard_mut().ok_or_else(not_locked)?;
        shard.dbs.get_mut(db).ok_or(CmdError::DbIndexOutOfRange)
    }

    /// The live value under `key`, for change.
    pub fn value_mut(&mut self, key: &[u8]) -> Result<Option<&mut Value>, CmdError> {
        Ok(self.entry_mut(key)?.map(|e| &mut e.value))
    }

    /// Whether a live key exists (no hit/miss counted, no access time).
    pub fn exists(&self, key: &[u8]) -> Result<bool, CmdError> {
        Ok(self.part(key)?.contains(key, self.now_ms))
    }

    /// Stores `value` under `key`; the expiry is kept only when `keep_ttl`.
    /// Counts as a change of `key`.
    pub fn set(&mut self, key: &[u8], value: Value, keep_ttl: bool) -> Result<(), CmdError> {
        let now = self.now_ms;
        let db = self.db;
        self.notify_if_new(key, db);
        self.part_mut(key)?.insert(key, value, keep_ttl, now);
        self.modified(key)
    }

    /// Removes `key`; returns its entry if it was live. Counts as a change.
    pub fn remove(&mut self, key: &[u8]) -> Result<Option<Entry>, CmdError> {
        let now = self.now_ms;
        let part = self.part_mut(key)?;
        // An expired key goes the lazy-expiry way (the AOF logs its DEL).
        if part.expire_if_needed(key, now) {
            part.touch_watched(key);
            self.raise_expired(key);
            return Ok(None);
        }
        match part.remove(key) {
            Some(e) => {
                self.modified(key)?;
                Ok(Some(e))
            }
            None => Ok(None),
        }
    }

    /// Records that `key` in the selected database changed: bumps the dirty
    /// counter, invalidates WATCHes, wakes clients blocked on it, and
    /// notes it for client-side caching.
    pub fn modified(&mut self, key: &[u8]) -> Result<(), CmdError> {
        let db = self.db;
        self.modified_in(key, db)
    }

    /// [`Keys::modified`] for `n` changes of `key` at once (a run of
    /// pipelined writes): counts them all; WATCHes, blocked clients and
    /// client-side caching hear of the key once, as they would of the last.
    pub fn modified_times(&mut self, key: &[u8], n: usize) -> Result<(), CmdError> {
        if n == 0 {
            return Ok(());
        }
        self.modified(key)?;
        self.dirty += n as u64 - 1;
        Ok(())
    }

    /// [`Keys::modified`] for a key of another database.
    pub fn modified_in(&mut self, key: &[u8], db: usize) -> Result<(), CmdError> {
        self.dirty += 1;
        self.part_in(key, db)?.touch_watched(key);
        if self.track_ready {
            self.ready.push((db, Bytes::copy_from_slice(key)));
        }
        if let Some(t) = &mut self.tracked {
            t.push(Bytes::copy_from_slice(key));
        }
        Ok(())
    }
}

/// Records event `name` of `class` on `key` in `events` when `flags`
/// enable it.
fn raise(
    events: &mut Vec<Event>,
    flags: u32,
    class: Class,
    name: &'static str,
    key: &[u8],
    db: usize,
) {
    if notify::enabled(flags, class) {
        events.push(Event {
            name,
            db,
            key: Bytes::copy_from_slice(key),
        });
    }
}

/// A read of `key` in `part` (database `db`) found nothing live: a key
/// there past its time goes to `stale` with `expired` raised, then
/// `keymiss`, in Redis's order.
fn note_miss(
    part: &Db,
    key: &[u8],
    db: usize,
    now_ms: u64,
    flags: u32,
    events: &mut Vec<Event>,
    stale: &mut Vec<(usize, Bytes)>,
) {
    if part.holds_expired(key, now_ms) {
        stale.push((db, Bytes::copy_from_slice(key)));
        raise(events, flags, Class::EXPIRED, "expired", key, db);
    }
    raise(events, flags, Class::KEY_MISS, "keymiss", key, db);
}
