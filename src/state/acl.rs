//! ACL users and their rules (Redis 7.0's `ACL SETUSER` language), the ACL
//! log, and the checks the dispatcher asks before a command runs.
//!
//! Below `commands`: a user's command rules are a bit set over the command
//! table's slots, but this module does not know the table; whoever parses a
//! rule hands it a [`Catalog`] that resolves command and category names.

/// ACL categories as bits, in Redis's `ACL CAT` order (with Rostrum's own
/// `leaderboard` last).
pub mod category {
    pub const KEYSPACE: u64 = 1 << 0;
    pub const READ: u64 = 1 << 1;
    pub const WRITE: u64 = 1 << 2;
    pub const SET: u64 = 1 << 3;
    pub const SORTEDSET: u64 = 1 << 4;
    pub const LIST: u64 = 1 << 5;
    pub const HASH: u64 = 1 << 6;
    pub const STRING: u64 = 1 << 7;
    pub const BITMAP: u64 = 1 << 8;
    pub const HYPERLOGLOG: u64 = 1 << 9;
    pub const GEO: u64 = 1 << 10;
    pub const STREAM: u64 = 1 << 11;
    pub const PUBSUB: u64 = 1 << 12;
    pub const ADMIN: u64 = 1 << 13;
    pub const FAST: u64 = 1 << 14;
    pub const SLOW: u64 = 1 << 15;
    pub const BLOCKING: u64 = 1 << 16;
    pub const DANGEROUS: u64 = 1 << 17;
    pub const CONNECTION: u64 = 1 << 18;
    pub const TRANSACTION: u64 = 1 << 19;
    pub const SCRIPTING: u64 = 1 << 20;
    /// Rostrum's LB.* family, as a Redis module adds one for its type.
    pub const LEADERBOARD: u64 = 1 << 21;

    /// Names in `ACL CAT` order.
    pub const NAMES: &[(u64, &str)] = &[
        (KEYSPACE, "keyspace"),
        (READ, "read"),
        (WRITE, "write"),
        (SET, "set"),
        (SORTEDSET, "sortedset"),
        (LIST, "list"),
        (HASH, "hash"),
        (STRING, "string"),
        (BITMAP, "bitmap"),
        (HYPERLOGLOG, "hyperloglog"),
        (GEO, "geo"),
        (STREAM, "stream"),
        (PUBSUB, "pubsub"),
        (ADMIN, "admin"),
        (FAST, "fast"),
        (SLOW, "slow"),
        (BLOCKING, "blocking"),
        (DANGEROUS, "dangerous"),
        (CONNECTION, "connection"),
        (TRANSACTION, "transaction"),
        (SCRIPTING, "scripting"),
        (LEADERBOARD, "leaderboard"),
    ];

    /// The COMMAND INFO order, where Rostrum's `leaderboard` sits with the
    /// data types (after `stream`).
    pub const INFO_ORDER: &[u64] = &[
        KEYSPACE,
        READ,
        WRITE,
        SET,
        SORTEDSET,
        LIST,
        HASH,
        STRING,
        BITMAP,
        HYPERLOGLOG,
        GEO,
        STREAM,
        LEADERBOARD,
        PUBSUB,
        ADMIN,
        FAST,
        SLOW,
        BLOCKING,
        DANGEROUS,
        CONNECTION,
        TRANSACTION,
        SCRIPTING,
    ];

    /// The bit of a category name (without `@`, any case).
    pub fn by_name(name: &[u8]) -> Option<u64> {
        NAMES
            .iter()
            .find(|(_, n)| n.as_bytes().eq_ignore_ascii_case(name))
            .map(|(b, _)| *b)
    }

    /// The name of one category bit.
    pub fn name(bit: u64) -> &'static str {
        NAMES
            .iter()
            .find(|(b, _)| *b == bit)
            .map(|(_, n)| *n)
            .unwrap_or("")
    }
}

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use sha2::{Digest, Sha256};
use smallvec::SmallVec;

use crate::engine::glob;

/// The commands ACL rules can name: every command and subcommand of the
/// table with its slot (`id`), as the commands layer builds it once.
pub struct Catalog {
    /// Entries by id.
    pub entries: Vec<CatalogEntry>,
    by_name: HashMap<String, usize>,
}

/// One command or subcommand in a [`Catalog`].
pub struct CatalogEntry {
    /// The table's slot.
    pub id: usize,
    /// `get`, or `config|get`.
    pub full_name: String,
    /// [`category`] bits.
    pub categories: u64,
    /// Subcommands' ids (for a container).
    pub subs: Vec<usize>,
    /// Whether this is a subcommand.
    pub is_sub: bool,
}

impl Catalog {
    /// A catalog of `entries`, whose ids must be `0..entries.len()` in
    /// order.
    pub fn new(entries: Vec<CatalogEntry>) -> Self {
        let by_name = entries
            .iter()
            .map(|e| (e.full_name.clone(), e.id))
            .collect();
        Catalog { entries, by_name }
    }

    fn find(&self, name: &str) -> Option<&CatalogEntry> {
        self.by_name
            .get(&name.to_ascii_lowercase())
            .and_then(|&i| self.entries.get(i))
    }
}

/// Why a rule was refused (the text after `ACL SETUSER modifier '...': `).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleError {
    UnknownName,
    Syntax,
    AfterAllKeys,
    AfterAllChannels,
    NoSuchPassword,
    BadHash,
}

impl std::fmt::Display for RuleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RuleError::UnknownName => "Unknown command or category name in ACL",
            RuleError::Syntax => "Syntax error",
            RuleError::AfterAllKeys => "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
            RuleError::AfterAllChannels => "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
            RuleError::NoSuchPassword => "The password you are trying to remove from the user does not exist",
            RuleError::BadHash => "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
        })
    }
}

/// A key pattern with the access it grants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPattern {
    pub pattern: Vec<u8>,
    pub read: bool,
    pub write: bool,
    /// How many bytes the pattern starts with that match only themselves
    /// (before the first `*`, `?`, `[` or `\\`): a key that does not start
    /// with them is refused without running the glob.
    literal: usize,
}

impl KeyPattern {
    fn new(pattern: &[u8], read: bool, write: bool) -> Self {
        let literal = pattern
            .iter()
            .position(|b| matches!(b, b'*' | b'?' | b'[' | b'\\'))
            .unwrap_or(pattern.len());
        KeyPattern {
            pattern: pattern.to_vec(),
            read,
            write,
            literal,
        }
    }

    /// Whether `key` matches the pattern (Redis's `stringmatchlen`).
    #[inline]
    fn matches(&self, key: &[u8]) -> bool {
        let lit = &self.pattern[..self.literal.min(self.pattern.len())];
        if self.literal >= self.pattern.len() {
            return key == lit;
        }
        key.starts_with(lit) && glob::matches(&self.pattern, key, false)
    }
}

/// What a command does with one key, for the key patterns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyAccess {
    pub read: bool,
    pub write: bool,
}

impl KeyAccess {
    pub const READ: KeyAccess = KeyAccess {
        read: true,
        write: false,
    };
    pub const WRITE: KeyAccess = KeyAccess {
        read: false,
        write: true,
    };
    pub const READ_WRITE: KeyAccess = KeyAccess {
        read: true,
        write: true,
    };
    pub const NONE: KeyAccess = KeyAccess {
        read: false,
        write: false,
    };
}

/// One set of permissions: the root one of a user, or a `(...)` selector.
#[derive(Clone, Debug, Default)]
pub struct Selector {
    allowed: Vec<u64>,
    /// Set by `+@all`: the user may run commands added later.
    future: bool,
    firstargs: HashMap<usize, Vec<String>>,
    keys: Vec<KeyPattern>,
    /// `keys` arranged for the check, rebuilt whenever they change.
    key_index: KeyIndex,
    pub allkeys: bool,
    pub channels: Vec<Vec<u8>>,
    pub allchannels: bool,
}

/// A selector's key patterns arranged so that a key is matched only against
/// the patterns that could match it: those whose literal prefix starts with
/// the key's first byte, and those that start with a wildcard. With 20
/// patterns of different prefixes a key costs a table look-up and one
/// comparison instead of 20 (the check runs before every command). The
/// patterns are copies of the selector's, held in check order so that the
/// look-up reads them without a second indirection.
#[derive(Clone, Debug, Default)]
struct KeyIndex {
    /// By first byte: the range of `by_first` holding the patterns whose
    /// literal prefix starts with it (256 entries; empty when every
    /// pattern is `wild`).
    ranges: Vec<(u32, u32)>,
    /// The patterns with a literal first byte, grouped by that byte.
    by_first: Vec<KeyPattern>,
    /// The patterns starting with `*`, `?`, `[` or `\\`, which any key
    /// may match (and the empty pattern).
    wild: Vec<KeyPattern>,
}

impl KeyIndex {
    fn new(keys: &[KeyPattern]) -> Self {
        let mut ix = KeyIndex::default();
        let mut literal: Vec<(u8, usize)> = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            match k.pattern.first() {
                Some(&b) if k.literal > 0 => literal.push((b, i)),
                // The empty pattern matches only the empty key, which no
                // first byte finds.
                _ => ix.wild.push(k.clone()),
            }
        }
        if literal.is_empty() {
            return ix;
        }
        // Stable: patterns of one first byte keep the selector's order.
        literal.sort_by_key(|&(b, _)| b);
        ix.ranges = vec![(0, 0); 256];
        for (n, &(b, i)) in literal.iter().enumerate() {
            if let Some(r) = ix.ranges.get_mut(usize::from(b)) {
                if r.0 == r.1 {
                    *r = (n as u32, n as u32);
                }
                r.1 += 1;
            }
            if let Some(k) = keys.get(i) {
                ix.by_first.push(k.clone());
            }
        }
        ix
    }

    /// The patterns whose literal prefix starts with `b`.
    #[inline]
    fn starting_with(&self, b: u8) -> &[KeyPattern] {
        match self.ranges.get(usize::from(b)) {
            Some(&(from, to)) => self.by_first.get(from as usize..to as usize).unwrap_or(&[]),
            None => &[],
        }
    }
}

impl Selector {
    #[inline]
    fn bit(&self, id: usize) -> bool {
        self.allowed
            .get(id / 64)
            .is_some_and(|w| w & (1 << (id % 64)) != 0)
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        if self.allowed.len() <= id / 64 {
            self.allowed.resize(id / 64 + 1, 0);
        }
        if on {
            self.allowed[id / 64] |= 1 << (id % 64);
        } else {
            self.allowed[id / 64] &= !(1 << (id % 64));
        }
    }

    /// A command and its subcommands on or off (Redis's
    /// `ACLChangeSelectorPerm`).
    fn change(&mut self, cat: &Catalog, e: &CatalogEntry, on: bool) {
        self.firstargs.remove(&e.id);
        self.set_bit(e.id, on);
        for &s in &e.subs {
            if let Some(se) = cat.entries.get(s) {
                self.change(cat, se, on);
            }
        }
    }

    fn set_category(&mut self, cat: &Catalog, bit: u64, on: bool) {
        for e in &cat.entries {
            if e.categories & bit != 0 {
                self.firstargs.remove(&e.id);
                self.set_bit(e.id, on);
            }
        }
    }

    fn all(&mut self, cat: &Catalog, on: bool) {
        self.future = on;
        self.firstargs.clear();
        self.allowed = vec![if on { u64::MAX } else { 0 }; cat.entries.len().div_ceil(64)];
    }

    fn count(&self, cat: &Catalog, bit: u64) -> (usize, usize) {
        let (mut on, mut off) = (0, 0);
        for e in cat.entries.iter().filter(|e| e.categories & bit != 0) {
            if self.bit(e.id) {
                on += 1;
            } else {
                off += 1;
            }
        }
        (on, off)
    }

    /// Applies one selector rule (Redis's `ACLSetSelector`).
    fn apply(&mut self, cat: &Catalog, op: &[u8]) -> Result<(), RuleError> {
        let lower = String::from_utf8_lossy(op).to_ascii_lowercase();
        match lower.as_str() {
            "allkeys" | "~*" => {
                self.allkeys = true;
                self.keys.clear();
                self.key_index = KeyIndex::default();
                return Ok(());
            }
            "resetkeys" => {
                self.allkeys = false;
                self.keys.clear();
                self.key_index = KeyIndex::default();
                return Ok(());
            }
            "allchannels" | "&*" => {
                self.allchannels = true;
                self.channels.clear();
                return Ok(());
            }
            "resetchannels" => {
                self.allchannels = false;
                self.channels.clear();
                return Ok(());
            }
            "allcommands" | "+@all" => {
                self.all(cat, true);
                return Ok(());
            }
            "nocommands" | "-@all" => {
                self.all(cat, false);
                return Ok(());
            }
            _ => {}
        }
        match op.first() {
            Some(b'~') | Some(b'%') => {
                if self.allkeys {
                    return Err(RuleError::AfterAllKeys);
                }
                let (read, write, pattern) = if op[0] == b'%' {
                    let tilde = op
                        .iter()
                        .position(|&b| b == b'~')
                        .ok_or(RuleError::Syntax)?;
                    let (mut r, mut w) = (false, false);
                    for &b in &op[1..tilde] {
                        match b.to_ascii_uppercase() {
                            b'R' => r = true,
                            b'W' => w = true,
                            _ => return Err(RuleError::Syntax),
                        }
                    }
                    if !r && !w {
                        return Err(RuleError::Syntax);
                    }
                    (r, w, &op[tilde + 1..])
                } else {
                    (true, true, &op[1..])
                };
                if let Some(k) = self.keys.iter_mut().find(|k| k.pattern == pattern) {
                    k.read |= read;
                    k.write |= write;
                } else {
                    self.keys.push(KeyPattern::new(pattern, read, write));
                    self.key_index = KeyIndex::new(&self.keys);
                }
                Ok(())
            }
            Some(b'&') => {
                if self.allchannels {
                    return Err(RuleError::AfterAllChannels);
                }
                let p = op[1..].to_vec();
                if !self.channels.contains(&p) {
                    self.channels.push(p);
                }
                Ok(())
            }
            Some(&sign @ (b'+' | b'-')) => {
                let on = sign == b'+';
                let rest = &lower[1..];
                if let Some(c) = rest.strip_prefix('@') {
                    let bit = category::by_name(c.as_bytes()).ok_or(RuleError::UnknownName)?;
                    self.set_category(cat, bit, on);
                    return Ok(());
                }
                if let Some(e) = cat.find(rest) {
                    self.change(cat, e, on);
                    return Ok(());
                }
                // `+cmd|first-arg` of a command without subcommands.
                let (parent, arg) = rest.split_once('|').ok_or(RuleError::UnknownName)?;
                let e = cat.find(parent).ok_or(RuleError::UnknownName)?;
                if !on || !e.subs.is_empty() || arg.is_empty() || arg.contains('|') {
                    return Err(RuleError::UnknownName);
                }
                if !self.bit(e.id) {
                    let args = self.firstargs.entry(e.id).or_default();
                    if !args.iter().any(|a| a == arg) {
                        args.push(arg.to_string());
                    }
                }
                Ok(())
            }
            _ => Err(RuleError::Syntax),
        }
    }

    /// The command rules (Redis 7.0's `ACLDescribeSelectorCommandRules`:
    /// `+@all` or `-@all`, the categories that fit best, then single
    /// commands).
    fn describe_commands(&self, cat: &Catalog) -> String {
        let mut rules = String::new();
        let additive = !self.future;
        let mut fake = Selector::default();
        fake.all(cat, !additive);
        rules.push_str(if additive { "-@all " } else { "+@all " });
        let mut temp = self.clone();
        let mut applied = [false; 64];
        loop {
            let mut best = None;
            let (mut mindiff, mut maxsame) = (usize::MAX, 0);
            for (j, &(bit, _)) in category::NAMES.iter().enumerate() {
                if applied[j] {
                    continue;
                }
                let (on, off) = temp.count(cat, bit);
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                if same > diff && (diff < mindiff || (diff == mindiff && same > maxsame)) {
                    best = Some(j);
                    mindiff = diff;
                    maxsame = same;
                }
            }
            let Some(j) = best else { break };
            let (bit, name) = category::NAMES[j];
            fake.set_category(cat, bit, additive);
            temp.set_category(cat, bit, !additive);
            rules.push_str(if additive { "+@" } else { "-@" });
            rules.push_str(name);
            rules.push(' ');
            applied[j] = true;
        }
        for e in &cat.entries {
            let user = self.bit(e.id);
            if user != fake.bit(e.id) {
                rules.push(if user { '+' } else { '-' });
                rules.push_str(&e.full_name);
                rules.push(' ');
                fake.change(cat, e, user);
            }
            if !user {
                for a in self.firstargs.get(&e.id).into_iter().flatten() {
                    rules.push_str(&format!("+{}|{} ", e.full_name, a));
                }
            }
        }
        rules.pop();
        rules
    }

    /// The key patterns as rules (`~*`, `%R~a*`, ...), space separated.
    pub fn describe_keys(&self) -> String {
        if self.allkeys {
            return "~*".into();
        }
        let v: Vec<String> = self.keys.iter().map(describe_key).collect();
        v.join(" ")
    }

    /// The channel patterns as rules.
    pub fn describe_channels(&self) -> String {
        if self.allchannels {
            return "&*".into();
        }
        let v: Vec<String> = self
            .channels
            .iter()
            .map(|c| format!("&{}", String::from_utf8_lossy(c)))
            .collect();
        v.join(" ")
    }

    /// The whole selector as rules (Redis's `ACLDescribeSelector`).
    fn describe(&self, cat: &Catalog) -> String {
        let mut s = String::new();
        if self.allkeys {
            s.push_str("~* ");
        } else {
            for k in &self.keys {
                s.push_str(&describe_key(k));
                s.push(' ');
            }
        }
        if self.allchannels {
            s.push_str("&* ");
        } else {
            s.push_str("resetchannels ");
            for c in &self.channels {
                s.push('&');
                s.push_str(&String::from_utf8_lossy(c));
                s.push(' ');
            }
        }
        s.push_str(&self.describe_commands(cat));
        s
    }

    /// The command rules, for ACL GETUSER.
    pub fn commands(&self, cat: &Catalog) -> String {
        self.describe_commands(cat)
    }

    fn check(&self, req: &Request) -> Result<(), Denied> {
        if !self.bit(req.id) {
            let first = req
                .first_arg
                .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase());
            let ok = match (self.firstargs.get(&req.id), first) {
                (Some(args), Some(f)) => args.contains(&f),
                _ => false,
            };
            if !ok {
                return Err(Denied::Command);
            }
        }
        if !self.allkeys {
            for &(pos, key, access) in &req.keys {
                if !self.key_allowed(key, access) {
                    return Err(Denied::Key(pos));
                }
            }
        }
        if !self.allchannels {
            for &(pos, ch) in &req.channels {
                if !self.channel_allowed(ch, req.channel_patterns) {
                    return Err(Denied::Channel(pos));
                }
            }
        }
        Ok(())
    }

    /// Whether the command's own rules (not `+cmd|first-arg`) allow it.
    #[inline]
    pub fn command_allowed(&self, id: usize) -> bool {
        self.bit(id)
    }

    /// Whether the key patterns give `access` to `key`.
    #[inline]
    pub fn key_allowed(&self, key: &[u8], access: KeyAccess) -> bool {
        if self.allkeys {
            return true;
        }
        let grants = |k: &KeyPattern| {
            (k.read || !access.read) && (k.write || !access.write) && k.matches(key)
        };
        let ix = &self.key_index;
        let literal = match key.first() {
            Some(&b) => ix.starting_with(b).iter().any(grants),
            None => false,
        };
        literal || ix.wild.iter().any(grants)
    }

    /// Whether `ch` may be used; a pattern (PSUBSCRIBE) must be one of the
    /// user's patterns literally, as in Redis.
    pub fn channel_allowed(&self, ch: &[u8], is_pattern: bool) -> bool {
        self.allchannels
            || self.channels.iter().any(|p| {
                if is_pattern {
                    p == ch
                } else {
                    glob::matches(p, ch, false)
                }
            })
    }
}

fn describe_key(k: &KeyPattern) -> String {
    let p = String::from_utf8_lossy(&k.pattern);
    match (k.read, k.write) {
        (true, true) => format!("~{p}"),
        (true, false) => format!("%R~{p}"),
        _ => format!("%W~{p}"),
    }
}

/// A user.
#[derive(Clone, Debug)]
pub struct User {
    pub name: String,
    pub enabled: bool,
    pub nopass: bool,
    /// `skip-sanitize-payload` (Some(true)) or `sanitize-payload`
    /// (Some(false)) when one was given.
    pub skip_sanitize: Option<bool>,
    /// SHA-256 hashes (lower-case hex), in the order they were added.
    pub passwords: Vec<String>,
    /// The root permissions.
    pub root: Selector,
    /// `(...)` selectors.
    pub selectors: Vec<Selector>,
}

/// The SHA-256 of a password, lower-case hex.
pub fn hash_password(pass: &[u8]) -> String {
    let digest = Sha256::digest(pass);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A command about to run, as the ACL check sees it.
pub struct Request<'a> {
    /// The command's (or subcommand's) id.
    pub id: usize,
    /// The first argument after the command name (for `+cmd|first-arg`).
    pub first_arg: Option<&'a [u8]>,
    /// Keys: argument position, key, access needed.
    pub keys: SmallVec<[(usize, &'a [u8], KeyAccess); 4]>,
    /// Channels: argument position, channel.
    pub channels: SmallVec<[(usize, &'a [u8]); 2]>,
    /// Whether the channels are patterns (PSUBSCRIBE).
    pub channel_patterns: bool,
}

/// Why a command was refused, with the argument position of the key or
/// channel (Redis's ordering: a later reason is more relevant).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    Command,
    Key(usize),
    Channel(usize),
}

impl Denied {
    fn rank(self) -> (u8, usize) {
        match self {
            Denied::Command => (1, 0),
            Denied::Key(p) => (2, p),
            Denied::Channel(p) => (4, p),
        }
    }
}

impl User {
    /// A new user as ACL SETUSER creates it: off, no passwords, no
    /// commands, no keys, channels as `acl-pubsub-default` says.
    pub fn new(name: &str, all_channels: bool) -> Self {
        User {
            name: name.to_string(),
            enabled: false,
            nopass: false,
            skip_sanitize: None,
            passwords: Vec::new(),
            root: Selector {
                allchannels: all_channels,
                ..Selector::default()
            },
            selectors: Vec::new(),
        }
    }

    /// The `default` user of a fresh server: on, nopass, everything.
    pub fn default_user(cat: &Catalog) -> Self {
        let mut u = User::new("default", true);
        u.enabled = true;
        u.nopass = true;
        u.root.allkeys = true;
        u.root.all(cat, true);
        u
    }

    /// Applies one rule (Redis's `ACLSetUser`).
    pub fn apply(&mut self, cat: &Catalog, op: &[u8], all_channels: bool) -> Result<(), RuleError> {
        let lower = String::from_utf8_lossy(op).to_ascii_lowercase();
        match lower.as_str() {
            "on" => self.enabled = true,
            "off" => self.enabled = false,
            "skip-sanitize-payload" => self.skip_sanitize = Some(true),
            "sanitize-payload" => self.skip_sanitize = Some(false),
            "nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            "resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            "clearselectors" => self.selectors.clear(),
            "reset" => {
                for r in ["resetpass", "resetkeys", "resetchannels"] {
                    self.apply(cat, r.as_bytes(), all_channels)?;
                }
                if all_channels {
                    self.apply(cat, b"allchannels", all_channels)?;
                }
                for r in ["off", "sanitize-payload", "clearselectors", "-@all"] {
                    self.apply(cat, r.as_bytes(), all_channels)?;
                }
            }
            _ => match op.first() {
                Some(b'>') => {
                    let h = hash_password(&op[1..]);
                    if !self.passwords.contains(&h) {
                        self.passwords.push(h);
                    }
                    self.nopass = false;
                }
                Some(b'#') => {
                    let h = &op[1..];
                    if h.len() != 64 || !h.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
                        return Err(RuleError::BadHash);
                    }
                    let h = String::from_utf8_lossy(h).into_owned();
                    if !self.passwords.contains(&h) {
                        self.passwords.push(h);
                    }
                    self.nopass = false;
                }
                Some(b'<') | Some(b'!') => {
                    let h = if op[0] == b'<' {
                        hash_password(&op[1..])
                    } else {
                        let h = &op[1..];
                        if h.len() != 64
                            || !h.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
                        {
                            return Err(RuleError::BadHash);
                        }
                        String::from_utf8_lossy(h).into_owned()
                    };
                    let before = self.passwords.len();
                    self.passwords.retain(|p| *p != h);
                    if self.passwords.len() == before {
                        return Err(RuleError::NoSuchPassword);
                    }
                }
                Some(b'(') if op.last() == Some(&b')') && op.len() >= 2 => {
                    let mut s = Selector {
                        allchannels: all_channels,
                        ..Selector::default()
                    };
                    let inner = String::from_utf8_lossy(&op[1..op.len() - 1]).into_owned();
                    for r in inner.split_ascii_whitespace() {
                        s.apply(cat, r.as_bytes())?;
                    }
                    self.selectors.push(s);
                }
                _ => self.root.apply(cat, op)?,
            },
        }
        Ok(())
    }

    /// Whether `pass` is one of the user's passwords (any, with nopass).
    pub fn password_ok(&self, pass: &[u8]) -> bool {
        self.nopass || self.passwords.contains(&hash_password(pass))
    }

    /// Whether every command, key and channel is allowed (the check can be
    /// skipped).
    pub fn unrestricted(&self) -> bool {
        self.root.future
            && self.root.allkeys
            && self.root.allchannels
            && self.root.firstargs.is_empty()
            && self.root.allowed.iter().all(|&w| w == u64::MAX)
    }

    /// Checks a command against the root permissions and each selector
    /// (Redis's `ACLCheckAllUserCommandPerm`).
    pub fn check(&self, req: &Request) -> Result<(), Denied> {
        let mut worst: Option<Denied> = None;
        for s in std::iter::once(&self.root).chain(self.selectors.iter()) {
            match s.check(req) {
                Ok(()) => return Ok(()),
                Err(d) => {
                    if worst.is_none_or(|w| d.rank() > w.rank()) {
                        worst = Some(d);
                    }
                }
            }
        }
        Err(worst.unwrap_or(Denied::Command))
    }

    /// Whether the user may still use channel `ch` (a pattern when
    /// `pattern`), for subscriptions kept across a change of rules.
    pub fn channel_allowed(&self, ch: &[u8], pattern: bool) -> bool {
        std::iter::once(&self.root)
            .chain(self.selectors.iter())
            .any(|s| s.channel_allowed(ch, pattern))
    }

    /// The user as one ACL LIST / aclfile line (without `user `).
    pub fn describe(&self, cat: &Catalog) -> String {
        let mut s = format!("{} ", self.name);
        s.push_str(if self.enabled { "on " } else { "off " });
        if self.nopass {
            s.push_str("nopass ");
        }
        match self.skip_sanitize {
            Some(true) => s.push_str("skip-sanitize-payload "),
            Some(false) => s.push_str("sanitize-payload "),
            None => {}
        }
        for p in &self.passwords {
            s.push('#');
            s.push_str(p);
            s.push(' ');
        }
        s.push_str(&self.root.describe(cat));
        for sel in &self.selectors {
            s.push_str(" (");
            s.push_str(&sel.describe(cat));
            s.push(')');
        }
        s
    }

    /// ACL GETUSER's flags.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut f = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        match self.skip_sanitize {
            Some(true) => f.push("skip-sanitize-payload"),
            Some(false) => f.push("sanitize-payload"),
            None => {}
        }
        f
    }
}

/// One ACL LOG entry.
#[derive(Clone, Debug)]
pub struct LogEntry {
    pub count: u64,
    /// `command`, `key`, `channel` or `auth`.
    pub reason: &'static str,
    /// `toplevel`, `multi` or `lua`.
    pub context: &'static str,
    pub object: String,
    pub username: String,
    pub created_ms: u64,
    pub client_info: String,
}

/// The users and the ACL log, shared by every connection.
pub struct Acl {
    users: RwLock<HashMap<String, Arc<User>>>,
    /// Bumped whenever a user changes: connections re-read their user.
    version: AtomicU64,
    /// Newest first.
    pub log: Mutex<VecDeque<LogEntry>>,
}

impl Acl {
    /// A registry with only the `default` user.
    pub fn new(cat: &Catalog) -> Self {
        let mut users = HashMap::new();
        users.insert("default".to_string(), Arc::new(User::default_user(cat)));
        Acl {
            users: RwLock::new(users),
            version: AtomicU64::new(1),
            log: Mutex::new(VecDeque::new()),
        }
    }

    /// The current version (changes with any user).
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// A user by name.
    pub fn user(&self, name: &str) -> Option<Arc<User>> {
        self.users.read().get(name).cloned()
    }

    /// Every user, sorted by name.
    pub fn users(&self) -> Vec<Arc<User>> {
        let mut v: Vec<_> = self.users.read().values().cloned().collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// Stores a user (new or changed).
    pub fn put(&self, user: User) {
        self.users.write().insert(user.name.clone(), Arc::new(user));
        self.version.fetch_add(1, Ordering::AcqRel);
    }

    /// Removes a user; whether it existed.
    pub fn remove(&self, name: &str) -> bool {
        let had = self.users.write().remove(name).is_some();
        self.version.fetch_add(1, Ordering::AcqRel);
        had
    }

    /// Replaces every user (ACL LOAD).
    pub fn replace_all(&self, users: Vec<User>) {
        let mut map = self.users.write();
        map.clear();
        for u in users {
            map.insert(u.name.clone(), Arc::new(u));
        }
        drop(map);
        self.version.fetch_add(1, Ordering::AcqRel);
    }

    /// Adds an entry to the log, or counts it on a like one from the last
    /// minute (as Redis groups them); keeps at most `max_len`.
    pub fn log_denial(&self, mut e: LogEntry, max_len: usize) {
        let mut log = self.log.lock();
        let like = log.iter().position(|o| {
            o.reason == e.reason
                && o.context == e.context
                && o.object == e.object
                && o.username == e.username
                && e.created_ms.saturating_sub(o.created_ms) < 60_000
        });
        if let Some(i) = like {
            if let Some(mut o) = log.remove(i) {
                o.count += 1;
                o.created_ms = e.created_ms;
                o.client_info = std::mem::take(&mut e.client_info);
                log.push_front(o);
            }
        } else {
            log.push_front(e);
        }
        log.truncate(max_len);
    }
}

/// A random password of `bits` bits, as lower-case hex (ACL GENPASS).
pub fn genpass(bits: usize) -> String {
    let chars = bits.div_ceil(4);
    let mut s = String::with_capacity(chars);
    while s.len() < chars {
        let r: u64 = rand::random();
        s.push_str(&format!("{r:016x}"));
    }
    s.truncate(chars);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> Catalog {
        let e = |id, name: &str, categories, subs: Vec<usize>, is_sub| CatalogEntry {
            id,
            full_name: name.into(),
            categories,
            subs,
            is_sub,
        };
        Catalog::new(vec![
            e(0, "get", category::READ | category::STRING, vec![], false),
            e(1, "set", category::WRITE | category::STRING, vec![], false),
            e(2, "config", category::SLOW, vec![3, 4], false),
            e(3, "config|get", category::ADMIN, vec![], true),
            e(4, "config|set", category::ADMIN, vec![], true),
        ])
    }

    fn req(id: usize, keys: Vec<(usize, &[u8], KeyAccess)>) -> Request<'_> {
        Request {
            id,
            first_arg: None,
            keys: keys.into_iter().collect(),
            channels: SmallVec::new(),
            channel_patterns: false,
        }
    }

    const R: KeyAccess = KeyAccess::READ;
    const W: KeyAccess = KeyAccess::WRITE;

    #[test]
    fn rules_and_checks() {
        let cat = catalog();
        let mut u = User::new("u", false);
        for r in [
            "on",
            ">pw",
            "+@string",
            "-set",
            "+config|get",
            "%R~r*",
            "~k*",
        ] {
            u.apply(&cat, r.as_bytes(), false)
                .unwrap_or_else(|e| panic!("{r}: {e}"));
        }
        assert!(u.password_ok(b"pw") && !u.password_ok(b"x"));
        assert_eq!(u.check(&req(0, vec![(1, b"k1", R)])), Ok(()));
        assert_eq!(u.check(&req(1, vec![])), Err(Denied::Command));
        assert_eq!(u.check(&req(3, vec![])), Ok(()));
        assert_eq!(u.check(&req(4, vec![])), Err(Denied::Command));
        assert_eq!(u.check(&req(0, vec![(1, b"x", R)])), Err(Denied::Key(1)));
        assert_eq!(u.root.describe_keys(), "%R~r* ~k*");
        assert_eq!(
            u.apply(&cat, b"~*", false)
                .and_then(|_| u.apply(&cat, b"~x", false)),
            Err(RuleError::AfterAllKeys)
        );
        assert_eq!(
            u.apply(&cat, b"+nosuch", false),
            Err(RuleError::UnknownName)
        );
        assert_eq!(
            u.apply(&cat, b"<nope", false),
            Err(RuleError::NoSuchPassword)
        );
        assert_eq!(u.root.describe_commands(&cat), "-@all +@read +config|get");
        let mut w = User::new("w", false);
        w.apply(&cat, b"%W~w*", false).unwrap_or_default();
        w.apply(&cat, b"+@all", false).unwrap_or_default();
        assert_eq!(w.check(&req(0, vec![(1, b"w1", R)])), Err(Denied::Key(1)));
        assert_eq!(w.check(&req(1, vec![(1, b"w1", W)])), Ok(()));
    }

    #[test]
    fn key_patterns_match_as_the_glob_does() {
        let patterns: [&[u8]; 8] = [
            b"board", b"lb:*", b"lb:?x", b"a\\*b", b"[ab]*", b"*", b"", b"x*y",
        ];
        let keys: [&[u8]; 10] = [
            b"board", b"boards", b"lb:", b"lb:1x", b"a*b", b"axb", b"b1", b"", b"xy", b"lb",
        ];
        for p in patterns {
            let k = KeyPattern::new(p, true, true);
            for key in keys {
                assert_eq!(
                    k.matches(key),
                    glob::matches(p, key, false),
                    "{p:?} {key:?}"
                );
            }
        }
    }

    #[test]
    fn key_index_agrees_with_every_pattern_in_turn() {
        let cat = catalog();
        let mut s = Selector::default();
        let rules: [&[u8]; 12] = [
            b"~svc1:*",
            b"~svc2:*",
            b"%R~board",
            b"%W~b*",
            b"~*x",
            b"~?y",
            b"~[ab]z",
            b"~",
            b"~\\*q",
            b"~lb:*",
            b"~lb:?",
            b"%R~\xff*",
        ];
        for r in rules {
            s.apply(&cat, r).unwrap_or_else(|e| panic!("{r:?}: {e}"));
        }
        let keys: [&[u8]; 15] = [
            b"board",
            b"boards",
            b"b",
            b"",
            b"svc1:a",
            b"svc3:a",
            b"ax",
            b"yy",
            b"az",
            b"*q",
            b"lb:1",
            b"lb:",
            b"\xff\x01",
            b"\xfe",
            b"zz",
        ];
        for key in keys {
            for access in [
                KeyAccess::READ,
                KeyAccess::WRITE,
                KeyAccess::READ_WRITE,
                KeyAccess::NONE,
            ] {
                let want = s.keys.iter().any(|k| {
                    (k.read || !access.read) && (k.write || !access.write) && k.matches(key)
                });
                assert_eq!(s.key_allowed(key, access), want, "{key:?} {access:?}");
            }
        }
        s.apply(&cat, b"resetkeys").unwrap_or_default();
        assert!(!s.key_allowed(b"board", KeyAccess::READ));
        s.apply(&cat, b"allkeys").unwrap_or_default();
        assert!(s.key_allowed(b"board", KeyAccess::READ));
    }

    #[test]
    fn selectors_allow_what_root_does_not() {
        let cat = catalog();
        let mut u = User::new("u", false);
        u.apply(&cat, b"(+get ~s*)", false).unwrap_or_default();
        assert_eq!(u.check(&req(0, vec![(1, b"s1", R)])), Ok(()));
        assert_eq!(u.check(&req(0, vec![(1, b"t1", R)])), Err(Denied::Key(1)));
    }
}
