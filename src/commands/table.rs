//! The command table: every command's name, arity, flags and key positions,
//! in one place. Dispatch (arity and unknown-command errors), COMMAND and its
//! subcommands, key extraction for locking and the AOF all read it.
//!
//! Each family module lists its commands in a `COMMANDS` slice; [`table`]
//! gathers them once at start-up.

use std::collections::HashMap;
use std::sync::OnceLock;

use smallvec::SmallVec;

use super::Ctx;
use crate::error::CmdResult;
use crate::state::acl::category;

/// A command handler: parse the arguments, apply, write the reply.
pub type Handler = fn(&mut Ctx<'_, '_>, &[&[u8]]) -> CmdResult;

/// How a run of pipelined calls of one command on one key is handled
/// together (`commands::run`). Each call is in the command's shortest form
/// (`|arity|` arguments); a handler gets the key and the calls' other
/// arguments (after the key), back to back.
#[derive(Clone, Copy)]
pub enum RunHandler {
    /// A read: writes one reply per call and returns true, or returns
    /// false, having written and counted nothing, to have the calls run one
    /// at a time.
    Answer(fn(&mut Ctx<'_, '_>, &[u8], &[&[u8]]) -> bool),
    /// A write: reads ahead what the calls will read (changing nothing),
    /// then they run one at a time as usual.
    Prepare(fn(&mut Ctx<'_, '_>, &[u8], &[&[u8]])),
    /// A write applied in one go (given the number of calls too): makes
    /// the changes of the first calls and writes their replies, as the
    /// calls one at a time would, and returns how many calls it did; the
    /// others (all of them when it returns 0, having changed, written and
    /// counted nothing) then run one at a time. Used only while nothing
    /// observes the single changes (`commands::run`).
    Apply(ApplyRun),
}

/// A [`RunHandler::Apply`] handler: the key, the number of calls, and the
/// calls' arguments after the key, back to back; returns the number of
/// calls applied (from the first).
pub type ApplyRun = fn(&mut Ctx<'_, '_>, &[u8], usize, &[&[u8]]) -> usize;

/// Extracts the indexes of the key arguments of a command whose keys are not
/// at fixed positions (ZUNIONSTORE, EVAL, ...). Indexes must be in range.
pub type KeyFinder = fn(&[&[u8]]) -> SmallVec<[usize; 4]>;

/// Command flags, as COMMAND INFO reports them.
pub mod flags {
    /// May change data.
    pub const WRITE: u32 = 1 << 0;
    /// Only reads data.
    pub const READONLY: u32 = 1 << 1;
    /// May grow memory use.
    pub const DENYOOM: u32 = 1 << 2;
    /// Administrative.
    pub const ADMIN: u32 = 1 << 3;
    /// Pub/sub related.
    pub const PUBSUB: u32 = 1 << 4;
    /// Not allowed inside scripts.
    pub const NOSCRIPT: u32 = 1 << 5;
    /// May block the client.
    pub const BLOCKING: u32 = 1 << 6;
    /// Allowed while loading.
    pub const LOADING: u32 = 1 << 7;
    /// Allowed on a stale replica.
    pub const STALE: u32 = 1 << 8;
    /// Not shown to MONITOR.
    pub const SKIP_MONITOR: u32 = 1 << 9;
    /// Not logged in the slow log.
    pub const SKIP_SLOWLOG: u32 = 1 << 10;
    /// O(1) or O(log n).
    pub const FAST: u32 = 1 << 11;
    /// Allowed before AUTH.
    pub const NO_AUTH: u32 = 1 << 12;
    /// May be replicated.
    pub const MAY_REPLICATE: u32 = 1 << 13;
    /// Not allowed inside MULTI.
    pub const NO_MULTI: u32 = 1 << 14;
    /// Allowed while a script is busy.
    pub const ALLOW_BUSY: u32 = 1 << 15;

    /// Names in COMMAND INFO order.
    pub const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (SKIP_MONITOR, "skip_monitor"),
        (SKIP_SLOWLOG, "skip_slowlog"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (MAY_REPLICATE, "may_replicate"),
        (NO_MULTI, "no_multi"),
        (ALLOW_BUSY, "allow_busy"),
    ];
}

/// Where a command's keys are.
#[derive(Clone, Copy)]
pub enum KeySpec {
    /// No keys.
    None,
    /// Keys at `first`, `first + step`, ... up to `last` (negative `last`
    /// counts from the end, -1 being the last argument).
    Range { first: i32, last: i32, step: i32 },
    /// Keys found by a function (the command has "movablekeys").
    Find(KeyFinder),
    /// The command needs every shard locked for its whole run (EXEC,
    /// scripts, KEYS, SWAPDB, FLUSHALL, ...).
    All,
}

impl KeySpec {
    /// The first argument is the key (GET, ZADD, SADD, ...).
    pub const FIRST: KeySpec = KeySpec::Range {
        first: 1,
        last: 1,
        step: 1,
    };
    /// The first two arguments are keys (RENAME, SMOVE, ZRANGESTORE, ...).
    pub const FIRST_TWO: KeySpec = KeySpec::Range {
        first: 1,
        last: 2,
        step: 1,
    };
    /// The second argument is the key (OBJECT ENCODING key, ...).
    pub const SECOND: KeySpec = KeySpec::Range {
        first: 2,
        last: 2,
        step: 1,
    };
}

/// One command (or subcommand) of the table.
pub struct CommandSpec {
    /// Lower-case name (`get`, or `get` under `config` for CONFIG GET).
    pub name: &'static str,
    /// Redis arity: exact argument count if positive, minimum if negative
    /// (the name counts).
    pub arity: i32,
    /// [`flags`] bits.
    pub flags: u32,
    /// Key positions.
    pub keys: KeySpec,
    /// The implementation.
    pub handler: Handler,
    /// Group, as COMMAND DOCS reports it (`string`, `sorted-set`, ...).
    pub group: &'static str,
    /// One-line summary for COMMAND DOCS.
    pub summary: &'static str,
    /// Redis version the command appeared in.
    pub since: &'static str,
    /// Time complexity for COMMAND DOCS.
    pub complexity: &'static str,
    /// Subcommands (CONFIG GET, CLIENT LIST, ...): empty for plain commands.
    pub subcommands: &'static [CommandSpec],
    /// Lock the keys' shards for writing even without the WRITE flag (WATCH
    /// registers itself in the shard).
    pub lock_write: bool,
    /// How a run of pipelined calls on one key is handled together.
    pub batch: Option<RunHandler>,
    /// Lock every shard (for writing) although the key spec names the
    /// keys: the command reads keys its arguments do not name (SORT's BY
    /// and GET patterns), while COMMAND GETKEYS still answers its keys.
    pub lock_all: bool,
}

impl CommandSpec {
    /// A command with default documentation fields; fill in with struct
    /// update syntax in the family modules.
    pub const fn new(
        name: &'static str,
        arity: i32,
        flags: u32,
        keys: KeySpec,
        handler: Handler,
    ) -> Self {
        CommandSpec {
            name,
            arity,
            flags,
            keys,
            handler,
            group: "generic",
            summary: "",
            since: "1.0.0",
            complexity: "",
            subcommands: &[],
            lock_write: false,
            batch: None,
            lock_all: false,
        }
    }

    /// This spec with its COMMAND DOCS fields (the families' builders).
    pub const fn documented(
        self,
        group: &'static str,
        summary: &'static str,
        since: &'static str,
        complexity: &'static str,
    ) -> Self {
        CommandSpec {
            group,
            summary,
            since,
            complexity,
            ..self
        }
    }

    /// This spec locking every shard ([`CommandSpec::lock_all`]).
    pub const fn locking_all(self) -> Self {
        CommandSpec {
            lock_all: true,
            ..self
        }
    }

    /// This spec handling runs of pipelined calls with `batch`.
    pub const fn batched(self, batch: RunHandler) -> Self {
        CommandSpec {
            batch: Some(batch),
            ..self
        }
    }

    /// Whether the flag bits are all set.
    pub fn has(&self, f: u32) -> bool {
        self.flags & f == f
    }

    /// Whether the arguments its key spec names are Pub/Sub channels, not
    /// keys (SSUBSCRIBE, SPUBLISH): nothing is locked for them, COMMAND
    /// calls them `not_key`, and COMMAND GETKEYS finds no keys.
    pub fn keys_are_channels(&self) -> bool {
        self.flags & flags::PUBSUB != 0
    }

    /// Whether arity accepts `argc` arguments (name included).
    pub fn arity_ok(&self, argc: usize) -> bool {
        let a = self.arity;
        (a > 0 && argc == a as usize) || (a < 0 && argc >= (-a) as usize)
    }

    /// The indexes of this command's key arguments in `args`.
    pub fn key_indexes(&self, args: &[&[u8]]) -> SmallVec<[usize; 4]> {
        match self.keys {
            KeySpec::None | KeySpec::All => SmallVec::new(),
            KeySpec::Range { first, last, step } => range_keys(args.len(), first, last, step),
            KeySpec::Find(f) => f(args).into_iter().filter(|&i| i < args.len()).collect(),
        }
    }
}

fn range_keys(argc: usize, first: i32, last: i32, step: i32) -> SmallVec<[usize; 4]> {
    let mut out = SmallVec::new();
    if first <= 0 || step <= 0 {
        return out;
    }
    let last = if last < 0 { argc as i32 + last } else { last };
    let mut i = first;
    while i <= last && (i as usize) < argc {
        out.push(i as usize);
        i += step;
    }
    out
}

/// A registered command with its stats slot.
pub struct Command {
    /// The static description.
    pub spec: &'static CommandSpec,
    /// Full name: `get`, or `config|get` for a subcommand.
    pub full_name: String,
    /// Index into the per-command statistics.
    pub id: usize,
    /// Registered subcommands, by lower-case name.
    pub subs: HashMap<&'static str, Command, ahash::RandomState>,
    /// ACL categories ([`category`] bits), as COMMAND INFO and ACL CAT
    /// report them and ACL rules use them.
    pub categories: u64,
}

/// The whole command table.
pub struct CommandTable {
    by_name: HashMap<&'static str, Command, ahash::RandomState>,
    count: usize,
    /// The names clients call commands by, when `rename-command` changed
    /// any (lower case, to the original name); `None`: every command by
    /// its own name. As Redis's `server.commands` beside
    /// `server.orig_commands`: dispatch, `redis.call`, COMMAND INFO / DOCS
    /// / GETKEYS and ACL DRYRUN look names up here; ACL rules, ACL CAT,
    /// NOPERM lines, statistics and COMMAND LIST's names keep the originals.
    renamed: Option<HashMap<String, &'static str, ahash::RandomState>>,
}

/// One `rename-command FROM TO` directive (`TO` empty: the command is
/// hidden), in the order of the config file.
pub type Rename = (String, String);

/// What a lookup of the arguments found.
pub enum Lookup<'t> {
    /// The command to run.
    Found(&'t Command),
    /// No such command.
    Unknown,
    /// A container command whose subcommand is unknown.
    UnknownSub(&'t Command),
    /// A container command given without a subcommand.
    MissingSub(&'t Command),
}

impl CommandTable {
    fn build(families: &[&'static [CommandSpec]]) -> Self {
        let mut by_name = HashMap::default();
        let mut count = 0;
        for family in families {
            for spec in family.iter() {
                let mut subs = HashMap::default();
                let id = count;
                count += 1;
                for sub in spec.subcommands {
                    let full_name = format!("{}|{}", spec.name, sub.name);
                    subs.insert(
                        sub.name,
                        Command {
                            spec: sub,
                            categories: categories_of(&full_name, sub),
                            full_name,
                            id: count,
                            subs: HashMap::default(),
                        },
                    );
                    count += 1;
                }
                by_name.insert(
                    spec.name,
                    Command {
                        spec,
                        full_name: spec.name.to_string(),
                        id,
                        subs,
                        categories: categories_of(spec.name, spec),
                    },
                );
            }
        }
        CommandTable {
            by_name,
            count,
            renamed: None,
        }
    }

    /// Applies `rename-command` directives in order, as Redis's config
    /// loader does: `FROM` is looked up among the names in force (so a
    /// renamed command can be renamed again), removed, and added back as
    /// `TO` unless `TO` is empty. Errors are Redis's lines, with the index
    /// of the directive that failed.
    fn rename(&mut self, renames: &[Rename]) -> Result<(), (usize, &'static str)> {
        if renames.is_empty() {
            return Ok(());
        }
        let mut names: HashMap<String, &'static str, ahash::RandomState> = self
            .by_name
            .values()
            .map(|c| (c.spec.name.to_string(), c.spec.name))
            .collect();
        for (i, (from, to)) in renames.iter().enumerate() {
            let from = from.to_ascii_lowercase();
            let Some(original) = names.remove(&from) else {
                return Err((i, "No such command in rename-command"));
            };
            if to.is_empty() {
                continue;
            }
            let to = to.to_ascii_lowercase();
            if names.contains_key(&to) {
                return Err((i, "Target command name already exists"));
            }
            names.insert(to, original);
        }
        self.renamed = Some(names);
        Ok(())
    }

    /// Whether `rename-command` changed any name.
    pub fn has_renames(&self) -> bool {
        self.renamed.is_some()
    }

    /// Number of commands and subcommands (the size of stats arrays).
    pub fn slots(&self) -> usize {
        self.count
    }

    /// Number of top-level commands (COMMAND COUNT).
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Top-level commands, in no particular order, hidden ones included
    /// (ACL rules know every command by its original name).
    pub fn iter(&self) -> impl Iterator<Item = &Command> {
        self.by_name.values()
    }

    /// Top-level commands clients can call (all but those `rename-command`
    /// hid), in no particular order: COMMAND, COMMAND LIST and COUNT.
    pub fn callable(&self) -> impl Iterator<Item = &Command> {
        let hidden = |c: &&Command| match &self.renamed {
            None => false,
            Some(names) => !names.values().any(|n| *n == c.spec.name),
        };
        self.by_name.values().filter(move |c| !hidden(c))
    }

    /// Finds a top-level command by its original name, in any case (rules
    /// and internal callers; clients' names go through [`Self::lookup`]).
    pub fn get(&self, name: &[u8]) -> Option<&Command> {
        let mut buf = [0u8; 32];
        if name.len() > buf.len() {
            return None;
        }
        let lower = &mut buf[..name.len()];
        lower.copy_from_slice(name);
        lower.make_ascii_lowercase();
        let s = std::str::from_utf8(lower).ok()?;
        self.by_name.get(s)
    }

    /// Finds a top-level command by the name clients call it by (after
    /// `rename-command`), in any case.
    pub fn get_callable(&self, name: &[u8]) -> Option<&Command> {
        match &self.renamed {
            None => self.get(name),
            Some(names) => {
                let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
                self.by_name.get(names.get(&lower)?)
            }
        }
    }

    /// [`Self::get_full`] by the names clients call commands by.
    pub fn get_full_callable(&self, full: &[u8]) -> Option<&Command> {
        match full.iter().position(|&b| b == b'|') {
            Some(p) => {
                let cmd = self.get_callable(&full[..p])?;
                let sub = String::from_utf8_lossy(&full[p + 1..]).to_ascii_lowercase();
                cmd.subs.get(sub.as_str())
            }
            None => self.get_callable(full),
        }
    }

    /// Finds a command (or `cmd|sub`) by its full name, in any case.
    pub fn get_full(&self, full: &[u8]) -> Option<&Command> {
        match full.iter().position(|&b| b == b'|') {
            Some(p) => {
                let cmd = self.get(&full[..p])?;
                let sub = String::from_utf8_lossy(&full[p + 1..]).to_ascii_lowercase();
                cmd.subs.get(sub.as_str())
            }
            None => self.get(full),
        }
    }

    /// Resolves the command (and subcommand) named by `args`, by the
    /// names clients call commands by.
    pub fn lookup(&self, args: &[&[u8]]) -> Lookup<'_> {
        self.lookup_in(args.first().and_then(|n| self.get_callable(n)), args)
    }

    /// [`Self::lookup`] by the commands' original names (the server's own
    /// commands when `rename-command` changed some).
    pub fn lookup_original(&self, args: &[&[u8]]) -> Lookup<'_> {
        self.lookup_in(args.first().and_then(|n| self.get(n)), args)
    }

    fn lookup_in<'t>(&'t self, found: Option<&'t Command>, args: &[&[u8]]) -> Lookup<'t> {
        let Some(cmd) = found else {
            return Lookup::Unknown;
        };
        if cmd.subs.is_empty() {
            return Lookup::Found(cmd);
        }
        let Some(sub) = args.get(1) else {
            // A container that also runs bare (COMMAND) is its own handler.
            return if cmd.spec.arity_ok(1) {
                Lookup::Found(cmd)
            } else {
                Lookup::MissingSub(cmd)
            };
        };
        let lower = String::from_utf8_lossy(sub).to_ascii_lowercase();
        match cmd.subs.get(lower.as_str()) {
            Some(s) => Lookup::Found(s),
            None => Lookup::UnknownSub(cmd),
        }
    }

    /// Every command and subcommand with its stats slot.
    pub fn all_slots(&self) -> Vec<&Command> {
        let mut v = Vec::with_capacity(self.count);
        for c in self.by_name.values() {
            v.push(c);
            v.extend(c.subs.values());
        }
        v.sort_by_key(|c| c.id);
        v
    }
}

/// ACL categories that neither the flags nor the group give (Redis lists
/// them per command): full name (`cmd|*` for every subcommand of `cmd`),
/// categories added, categories removed.
const CATEGORY_EXCEPTIONS: &[(&str, u64, u64)] = {
    use category::*;
    &[
        ("asking", CONNECTION, 0),
        ("readonly", CONNECTION, 0),
        ("readwrite", CONNECTION, 0),
        ("role", ADMIN | DANGEROUS, 0),
        ("wait", CONNECTION, 0),
        ("command", CONNECTION, 0),
        ("command|*", CONNECTION, 0),
        ("dbsize", KEYSPACE, 0),
        ("flushall", KEYSPACE | DANGEROUS, 0),
        ("flushdb", KEYSPACE | DANGEROUS, 0),
        ("info", DANGEROUS, 0),
        ("keys", DANGEROUS, 0),
        ("lastsave", ADMIN | DANGEROUS, 0),
        ("migrate", DANGEROUS, 0),
        ("restore", DANGEROUS, 0),
        ("swapdb", DANGEROUS, 0),
        ("sort", SET | SORTEDSET | LIST | DANGEROUS, KEYSPACE),
        ("sort_ro", SET | SORTEDSET | LIST | DANGEROUS, KEYSPACE),
        // A watch reads the board it streams.
        ("lb.watch", READ, 0),
    ]
};

/// A command's ACL categories: from its flags (as Redis's
/// `setImplicitACLCategories`), its group, and [`CATEGORY_EXCEPTIONS`].
fn categories_of(full_name: &str, spec: &CommandSpec) -> u64 {
    use category::*;
    let mut c = 0;
    if spec.subcommands.is_empty() || full_name.contains('|') {
        c |= match spec.group {
            "generic" => KEYSPACE,
            "string" => STRING,
            "sorted-set" => SORTEDSET,
            "set" => SET,
            "bitmap" => BITMAP,
            "hash" => HASH,
            "list" => LIST,
            "hyperloglog" => HYPERLOGLOG,
            "geo" => GEO,
            "stream" => STREAM,
            "connection" => CONNECTION,
            "transactions" => TRANSACTION,
            "scripting" => SCRIPTING,
            "leaderboard" => LEADERBOARD,
            _ => 0,
        };
        if spec.has(flags::WRITE) {
            c |= WRITE;
        }
        // Scripts that only read are not @read, as in Redis.
        if spec.has(flags::READONLY) && c & SCRIPTING == 0 {
            c |= READ;
        }
        if spec.has(flags::ADMIN) {
            c |= ADMIN | DANGEROUS;
        }
        if spec.has(flags::PUBSUB) {
            c |= PUBSUB;
        }
        if spec.has(flags::FAST) {
            c |= FAST;
        }
        if spec.has(flags::BLOCKING) {
            c |= BLOCKING;
        }
    }
    if c & FAST == 0 {
        c |= SLOW;
    }
    let exception = CATEGORY_EXCEPTIONS
        .iter()
        .find(|e| match e.0.strip_suffix('*') {
            Some(parent) => full_name.starts_with(parent),
            None => e.0 == full_name,
        });
    if let Some((_, add, remove)) = exception {
        c = (c | add) & !remove;
    }
    c
}

static TABLE: OnceLock<CommandTable> = OnceLock::new();

/// The command table, built on first use from every family's list.
pub fn table() -> &'static CommandTable {
    TABLE.get_or_init(|| CommandTable::build(super::FAMILIES))
}

/// Builds the table with the config file's `rename-command` directives,
/// before anything uses it (start-up). Fails, with the index of the
/// directive and Redis's line, on an unknown command or a name taken; or
/// when the table was already built (a bug: renames come first).
pub fn build_with_renames(renames: &[Rename]) -> Result<(), (usize, &'static str)> {
    let mut t = CommandTable::build(super::FAMILIES);
    t.rename(renames)?;
    TABLE
        .set(t)
        .map_err(|_| (0, "rename-command: the command table was already in use"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_is_well_formed() {
        let t = table();
        assert!(t.len() > 10);
        for c in t.all_slots() {
            let s = c.spec;
            assert_eq!(
                s.name,
                s.name.to_ascii_lowercase(),
                "{} not lower case",
                s.name
            );
            assert!(s.arity != 0, "{} has arity 0", c.full_name);
            assert!(
                !(s.has(flags::WRITE) && s.has(flags::READONLY)),
                "{}",
                c.full_name
            );
        }
    }

    #[test]
    fn renames_hide_and_rename_as_redis() {
        let mut t = CommandTable::build(crate::commands::FAMILIES);
        let n = |a: &str, b: &str| (a.to_string(), b.to_string());
        let renames = [
            n("FLUSHALL", ""),
            n("CONFIG", "x1"),
            n("X1", "somethingelse"),
            n("set", "MYSET"),
        ];
        assert!(t.rename(&renames).is_ok());
        assert!(t.get_callable(b"flushall").is_none());
        assert!(t.get(b"flushall").is_some());
        assert!(t.get_callable(b"config").is_none() && t.get_callable(b"x1").is_none());
        let c = t
            .get_callable(b"SomethingElse")
            .map(|c| c.full_name.as_str());
        assert_eq!(c, Some("config"));
        let sub = t
            .get_full_callable(b"somethingelse|get")
            .map(|c| c.full_name.as_str());
        assert_eq!(sub, Some("config|get"));
        assert_eq!(t.callable().count(), t.len() - 1);
        let mut t = CommandTable::build(crate::commands::FAMILIES);
        assert_eq!(
            t.rename(&[n("nosuch", "x")]),
            Err((0, "No such command in rename-command"))
        );
        let mut t = CommandTable::build(crate::commands::FAMILIES);
        let taken = t.rename(&[n("get", "x"), n("config", "set")]);
        assert_eq!(taken, Err((1, "Target command name already exists")));
        let mut t = CommandTable::build(crate::commands::FAMILIES);
        assert!(t.rename(&[n("config", "CONFIG")]).is_ok());
        assert!(t.get_callable(b"config").is_some());
    }

    #[test]
    fn range_key_positions() {
        assert_eq!(range_keys(3, 1, 1, 1).as_slice(), &[1]);
        assert_eq!(range_keys(5, 1, -1, 2).as_slice(), &[1, 3]);
        assert_eq!(range_keys(4, 1, -1, 1).as_slice(), &[1, 2, 3]);
        assert_eq!(range_keys(1, 1, 1, 1).as_slice(), &[] as &[usize]);
    }
}
