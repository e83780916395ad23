//! Each command's argument syntax, as COMMAND DOCS reports it (and
//! redis-cli turns into hints and `HELP` lines), and its command tips, as
//! COMMAND INFO reports them.
//!
//! The command table (`table.rs`) holds what dispatch needs; this table,
//! keyed by full name (`zadd`, `config|get`), holds only what COMMAND
//! describes, so the families' lists stay short. A command missing here
//! has no `arguments` field, as in Redis for commands without arguments.
//!
//! # The syntax strings
//!
//! One line per command, written like Redis's syntax lines, with the names
//! Redis gives each argument:
//!
//! ```text
//! key [condition(NX | XX)@3.0.2] [CH=change@3.0.2] score_member(score:double member)...
//! ```
//!
//! - `name` is an argument of type string; `name:type` gives another type
//!   (`key`, `integer`, `double`, `pattern`, `unix-time`, `string`). An
//!   argument named `key` is of type key unless it says otherwise.
//!   Names outside `[a-z0-9_-]` are quoted: `'ip:port'`.
//! - `TOKEN` is a pure token named after itself in lower case; `TOKEN=name`
//!   names it otherwise. Tokens outside `[A-Z0-9_-]` are quoted: `"*"`.
//! - `TOKEN value` is one argument introduced by a token (`EX seconds:integer`,
//!   `LIMIT limit(offset:integer count:integer)`).
//! - `name(a b c)` is a block (arguments that come together),
//!   `name(a | b | c)` a oneof (exactly one of them).
//! - `[...]` makes an argument optional.
//! - Suffixes, in this order: `...` multiple; `^` the token repeats with
//!   each value (`GET pattern [GET pattern ...]`); `@7.0.0` the version
//!   the argument appeared in; `!2.8.12` the version that deprecated it;
//!   `#2` the key spec the argument belongs to (a key argument's default is
//!   the count of key arguments before it; a pattern naming keys, SORT's
//!   `BY`, says it).
//!
//! Strings are parsed once, on first use; a unit test parses every one.

use std::collections::HashMap;
use std::sync::OnceLock;

/// An argument's type, as COMMAND DOCS names it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ArgType {
    /// A key name.
    Key,
    /// Any string.
    String,
    /// An integer.
    Integer,
    /// A floating point number.
    Double,
    /// A glob-style pattern.
    Pattern,
    /// A Unix time (seconds or milliseconds).
    UnixTime,
    /// A fixed word and nothing else.
    PureToken,
    /// Exactly one of the nested arguments.
    OneOf,
    /// The nested arguments, together.
    Block,
}

impl ArgType {
    /// The name COMMAND DOCS gives the type.
    pub fn name(self) -> &'static str {
        match self {
            ArgType::Key => "key",
            ArgType::String => "string",
            ArgType::Integer => "integer",
            ArgType::Double => "double",
            ArgType::Pattern => "pattern",
            ArgType::UnixTime => "unix-time",
            ArgType::PureToken => "pure-token",
            ArgType::OneOf => "oneof",
            ArgType::Block => "block",
        }
    }

    fn parse(s: &str) -> Option<ArgType> {
        Some(match s {
            "key" => ArgType::Key,
            "string" => ArgType::String,
            "integer" => ArgType::Integer,
            "double" => ArgType::Double,
            "pattern" => ArgType::Pattern,
            "unix-time" => ArgType::UnixTime,
            _ => return None,
        })
    }
}

/// One argument of a command's syntax.
#[derive(Debug, PartialEq)]
pub struct Arg {
    /// The argument's name (`key`, `condition`, `nx`).
    pub name: String,
    /// Its type.
    pub kind: ArgType,
    /// For a key: the key spec it belongs to.
    pub key_spec_index: Option<u32>,
    /// The word that introduces it (`EX`), or that it is (`NX`).
    pub token: Option<&'static str>,
    /// The version it appeared in, where it came after the command.
    pub since: Option<&'static str>,
    /// The version that deprecated it.
    pub deprecated_since: Option<&'static str>,
    /// It may be left out.
    pub optional: bool,
    /// It may repeat.
    pub multiple: bool,
    /// Its token repeats with each repetition.
    pub multiple_token: bool,
    /// A block's or oneof's nested arguments.
    pub args: Vec<Arg>,
}

impl Arg {
    /// Its flags as COMMAND DOCS lists them.
    pub fn flag_names(&self) -> impl Iterator<Item = &'static str> + '_ {
        [
            (self.optional, "optional"),
            (self.multiple, "multiple"),
            (self.multiple_token, "multiple_token"),
        ]
        .into_iter()
        .filter(|f| f.0)
        .map(|f| f.1)
    }
}

/// A command's parsed arguments, by full name; `None` where the table has
/// no line for it.
pub fn arguments(full_name: &str) -> Option<&'static [Arg]> {
    static PARSED: OnceLock<HashMap<&'static str, Vec<Arg>>> = OnceLock::new();
    let parsed = PARSED.get_or_init(|| {
        SYNTAX
            .iter()
            // A line that does not parse is caught by the unit test; at run
            // time the command is shown without arguments.
            .filter_map(|&(name, line)| Some((name, parse(line).ok()?)))
            .collect()
    });
    parsed.get(full_name).map(|v| v.as_slice())
}

/// A command's tips (COMMAND INFO's eighth field), by full name.
pub fn tips(full_name: &str) -> &'static [&'static str] {
    static PARSED: OnceLock<HashMap<&'static str, Vec<&'static str>>> = OnceLock::new();
    let parsed = PARSED.get_or_init(|| {
        TIPS.iter()
            .map(|&(name, tips)| (name, tips.split(' ').collect()))
            .collect()
    });
    parsed.get(full_name).map(|v| v.as_slice()).unwrap_or(&[])
}

/// Where one key spec's keys begin.
#[derive(Debug, PartialEq, Clone, Copy)]
pub enum BeginSearch {
    /// At this argument index.
    Index(i64),
    /// After this keyword, searched from `startfrom` (negative: from the end).
    Keyword(&'static str, i64),
    /// Not known from the arguments' positions.
    Unknown,
}

/// How one key spec's keys run on from where they begin.
#[derive(Debug, PartialEq, Clone, Copy)]
pub enum FindKeys {
    /// `lastkey` (relative; negative from the end), `keystep`, `limit`.
    Range(i64, i64, i64),
    /// The key count at `keynumidx`, the first key at `firstkey`, `keystep`.
    Keynum(i64, i64, i64),
    /// Not known from the arguments' positions.
    Unknown,
}

/// One of COMMAND INFO's key specs.
#[derive(Debug, PartialEq)]
pub struct KeySpecDoc {
    /// Why the flags are what they are, where Redis says.
    pub notes: Option<&'static str>,
    /// `RW`, `access`, `update`, ...
    pub flags: Vec<&'static str>,
    /// Where the keys begin.
    pub begin: BeginSearch,
    /// How they run on.
    pub find: FindKeys,
}

/// A command's key specs, by full name; `None` where the table has none
/// (COMMAND INFO then describes the command table's key positions).
pub fn key_specs(full_name: &str) -> Option<&'static [KeySpecDoc]> {
    static PARSED: OnceLock<HashMap<&'static str, Vec<KeySpecDoc>>> = OnceLock::new();
    let parsed = PARSED.get_or_init(|| {
        KEY_SPECS
            .iter()
            .filter_map(|&(name, line)| Some((name, parse_key_specs(line).ok()?)))
            .collect()
    });
    parsed.get(full_name).map(|v| v.as_slice())
}

/// Parses a key-spec line: specs separated by ` ; `, each
/// `FLAG,FLAG begin find [-- notes]` with begin `index:N`,
/// `keyword:WORD,startfrom` or `unknown`, and find `range:lastkey,step,limit`,
/// `keynum:keynumidx,firstkey,step` or `unknown`.
pub fn parse_key_specs(line: &'static str) -> Result<Vec<KeySpecDoc>, String> {
    let bad = || format!("bad key spec line {line:?}");
    let nums = |s: &str| -> Result<Vec<i64>, String> {
        s.split(',').map(|n| n.parse().map_err(|_| bad())).collect()
    };
    let mut out = Vec::new();
    for spec in line.split(" ; ") {
        let (spec, notes) = match spec.split_once(" -- ") {
            Some((s, n)) => (s, Some(n)),
            None => (spec, None),
        };
        let mut words = spec.split(' ');
        let (Some(flags), Some(begin), Some(find), None) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            return Err(bad());
        };
        let begin = match begin.split_once(':') {
            None if begin == "unknown" => BeginSearch::Unknown,
            Some(("index", n)) => BeginSearch::Index(n.parse().map_err(|_| bad())?),
            Some(("keyword", kw)) => {
                let (word, from) = kw.split_once(',').ok_or_else(bad)?;
                BeginSearch::Keyword(word, from.parse().map_err(|_| bad())?)
            }
            _ => return Err(bad()),
        };
        let find = match find.split_once(':') {
            None if find == "unknown" => FindKeys::Unknown,
            Some(("range", n)) => match nums(n)?[..] {
                [a, b, c] => FindKeys::Range(a, b, c),
                _ => return Err(bad()),
            },
            Some(("keynum", n)) => match nums(n)?[..] {
                [a, b, c] => FindKeys::Keynum(a, b, c),
                _ => return Err(bad()),
            },
            _ => return Err(bad()),
        };
        out.push(KeySpecDoc {
            notes,
            flags: flags.split(',').collect(),
            begin,
            find,
        });
    }
    Ok(out)
}

/// COMMAND INFO's legacy (first key, last key, step) from key specs, and
/// whether they make the command `movablekeys`: one index+range spec is
/// the triple itself; otherwise the contiguous index+range specs with step
/// 1 are merged, and any other spec makes the keys movable (Redis's rule).
pub fn legacy_range(specs: &[KeySpecDoc]) -> ((i64, i64, i64), bool) {
    let incomplete = |s: &KeySpecDoc| s.flags.contains(&"incomplete");
    if let [one] = specs {
        if let (BeginSearch::Index(pos), FindKeys::Range(last, step, _)) = (one.begin, one.find) {
            let last = if last >= 0 { last + pos } else { last };
            return ((pos, last, step), incomplete(one));
        }
    }
    let mut movable = false;
    let (mut first, mut last, mut prev_last) = (i64::MAX, 0i64, 0i64);
    for s in specs {
        let (BeginSearch::Index(pos), FindKeys::Range(l, step, _)) = (s.begin, s.find) else {
            movable = true;
            continue;
        };
        if step != 1 || (prev_last != 0 && prev_last != pos - 1) {
            movable = true;
            continue;
        }
        movable |= incomplete(s);
        first = first.min(pos);
        let abs = if l >= 0 { l + pos } else { l };
        // Compared as unsigned: a count from the end is past any index.
        last = if (abs as u64) > (last as u64) {
            abs
        } else {
            last
        };
        prev_last = last;
    }
    if first == i64::MAX {
        return ((0, 0, 0), movable);
    }
    ((first, last, 1), movable)
}

/// Flags COMMAND INFO shows that dispatch has no use for, by full name.
pub fn extra_flags(full_name: &str) -> &'static [&'static str] {
    const NO_ASYNC_LOADING: &[&str] = &["no_async_loading"];
    const NO_MANDATORY_KEYS: &[&str] = &["no_mandatory_keys"];
    match full_name {
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" => NO_MANDATORY_KEYS,
        "bgrewriteaof" | "bgsave" | "save" | "sync" | "psync" | "replicaof" | "slaveof"
        | "module|load" | "module|loadex" | "module|unload" => NO_ASYNC_LOADING,
        n if n.starts_with("cluster|")
            && matches!(
                &n[8..],
                "addslots"
                    | "addslotsrange"
                    | "bumpepoch"
                    | "delslots"
                    | "delslotsrange"
                    | "failover"
                    | "flushslots"
                    | "forget"
                    | "meet"
                    | "replicate"
                    | "saveconfig"
                    | "set-config-epoch"
                    | "setslot"
            ) =>
        {
            NO_ASYNC_LOADING
        }
        _ => &[],
    }
}

/// Parses one syntax line (see the module's documentation).
pub fn parse(line: &'static str) -> Result<Vec<Arg>, String> {
    let mut p = Parser {
        s: line,
        at: 0,
        keys: 0,
    };
    let args = p.sequence()?;
    if p.at != line.len() {
        return Err(p.error("unexpected character"));
    }
    Ok(args)
}

struct Parser {
    s: &'static str,
    at: usize,
    /// Key arguments seen so far (the default key spec index).
    keys: u32,
}

impl Parser {
    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.at).copied()
    }

    fn error(&self, what: &str) -> String {
        format!("{what} at {} in {:?}", self.at, self.s)
    }

    fn eat(&mut self, c: u8) -> bool {
        let yes = self.peek() == Some(c);
        if yes {
            self.at += 1;
        }
        yes
    }

    fn skip_spaces(&mut self) {
        while self.eat(b' ') {}
    }

    /// A run of characters allowed by `ok`, or a quoted string.
    fn word(&mut self, ok: fn(u8) -> bool, quote: u8) -> Result<&'static str, String> {
        let s = self.s;
        if self.eat(quote) {
            let start = self.at;
            let len = s[start..]
                .find(quote as char)
                .ok_or_else(|| self.error("unclosed quote"))?;
            self.at = start + len + 1;
            return Ok(&s[start..start + len]);
        }
        let start = self.at;
        while self.peek().is_some_and(ok) {
            self.at += 1;
        }
        if start == self.at {
            return Err(self.error("expected a word"));
        }
        Ok(&s[start..self.at])
    }

    /// Arguments separated by spaces, up to `)`, `|`, `]` or the end.
    fn sequence(&mut self) -> Result<Vec<Arg>, String> {
        let mut v = Vec::new();
        loop {
            self.skip_spaces();
            match self.peek() {
                None | Some(b')' | b'|' | b']') => return Ok(v),
                _ => v.push(self.item()?),
            }
        }
    }

    /// One argument, perhaps optional.
    fn item(&mut self) -> Result<Arg, String> {
        if self.eat(b'[') {
            let mut a = self.item()?;
            self.skip_spaces();
            if !self.eat(b']') {
                return Err(self.error("expected ]"));
            }
            a.optional = true;
            return Ok(a);
        }
        let mut a = self.body()?;
        self.suffixes(&mut a)?;
        Ok(a)
    }

    fn body(&mut self) -> Result<Arg, String> {
        let mut token = None;
        if self.peek().is_some_and(|c| is_token_start(c) || c == b'"') {
            let t = self.word(is_token_char, b'"')?;
            if self.eat(b'=') {
                let name = self.word(is_name_char, b'\'')?;
                return Ok(pure_token(t, name.to_string()));
            }
            // A token binds to the value right after it.
            let value_follows = self.peek() == Some(b' ')
                && self
                    .s
                    .as_bytes()
                    .get(self.at + 1)
                    .is_some_and(|&c| c.is_ascii_lowercase() || c == b'\'');
            if !value_follows {
                return Ok(pure_token(t, t.to_ascii_lowercase()));
            }
            self.skip_spaces();
            token = Some(t);
        }
        let name = self.word(is_name_char, b'\'')?;
        let mut a = pure_token("", name.to_string());
        a.token = token;
        if self.eat(b'(') {
            let mut alternatives = vec![self.sequence()?];
            while self.eat(b'|') {
                alternatives.push(self.sequence()?);
            }
            if !self.eat(b')') {
                return Err(self.error("expected )"));
            }
            if alternatives.len() == 1 {
                a.kind = ArgType::Block;
                a.args = alternatives.pop().unwrap_or_default();
            } else {
                a.kind = ArgType::OneOf;
                for mut alt in alternatives {
                    if alt.len() != 1 {
                        return Err(self.error("a oneof alternative is one argument"));
                    }
                    a.args.extend(alt.pop());
                }
            }
        } else if self.eat(b':') {
            let t = self.word(is_name_char, b'\'')?;
            a.kind = ArgType::parse(t).ok_or_else(|| self.error("unknown type"))?;
        } else {
            a.kind = if name == "key" {
                ArgType::Key
            } else {
                ArgType::String
            };
        }
        if a.kind == ArgType::Key {
            a.key_spec_index = Some(self.keys);
            self.keys += 1;
        }
        Ok(a)
    }

    fn suffixes(&mut self, a: &mut Arg) -> Result<(), String> {
        let version = |c: u8| c.is_ascii_digit() || c == b'.';
        loop {
            if self.s[self.at..].starts_with("...") {
                self.at += 3;
                a.multiple = true;
            } else if self.eat(b'^') {
                a.multiple_token = true;
            } else if self.eat(b'@') {
                a.since = Some(self.word(version, 0)?);
            } else if self.eat(b'!') {
                a.deprecated_since = Some(self.word(version, 0)?);
            } else if self.eat(b'#') {
                let n = self.word(|c| c.is_ascii_digit(), 0)?;
                a.key_spec_index = Some(n.parse().map_err(|_| self.error("bad index"))?);
            } else {
                return Ok(());
            }
        }
    }
}

fn pure_token(token: &'static str, name: String) -> Arg {
    Arg {
        name,
        kind: ArgType::PureToken,
        key_spec_index: None,
        token: Some(token),
        since: None,
        deprecated_since: None,
        optional: false,
        multiple: false,
        multiple_token: false,
        args: Vec::new(),
    }
}

fn is_token_start(c: u8) -> bool {
    c.is_ascii_uppercase()
}

fn is_token_char(c: u8) -> bool {
    c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_' || c == b'-'
}

fn is_name_char(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-'
}

/// Command tips (space-separated), by full name.
const TIPS: &[(&str, &str)] = &[
    ("client|info", "nondeterministic_output"),
    ("client|list", "nondeterministic_output"),
    ("cluster|bumpepoch", "nondeterministic_output"),
    ("cluster|count-failure-reports", "nondeterministic_output"),
    ("cluster|getkeysinslot", "nondeterministic_output"),
    ("cluster|info", "nondeterministic_output"),
    ("cluster|links", "nondeterministic_output"),
    ("cluster|nodes", "nondeterministic_output"),
    ("cluster|replicas", "nondeterministic_output"),
    ("cluster|shards", "nondeterministic_output"),
    ("cluster|slaves", "nondeterministic_output"),
    ("cluster|slots", "nondeterministic_output"),
    ("command", "nondeterministic_output_order"),
    ("command|docs", "nondeterministic_output_order"),
    ("command|info", "nondeterministic_output_order"),
    ("command|list", "nondeterministic_output_order"),
    (
        "config|set",
        "request_policy:all_nodes response_policy:all_succeeded",
    ),
    (
        "dbsize",
        "request_policy:all_shards response_policy:agg_sum",
    ),
    ("del", "request_policy:multi_shard response_policy:agg_sum"),
    ("dump", "nondeterministic_output"),
    (
        "exists",
        "request_policy:multi_shard response_policy:agg_sum",
    ),
    (
        "flushall",
        "request_policy:all_shards response_policy:all_succeeded",
    ),
    (
        "flushdb",
        "request_policy:all_shards response_policy:all_succeeded",
    ),
    (
        "function|delete",
        "request_policy:all_shards response_policy:all_succeeded",
    ),
    (
        "function|flush",
        "request_policy:all_shards response_policy:all_succeeded",
    ),
    (
        "function|kill",
        "request_policy:all_shards response_policy:one_succeeded",
    ),
    ("function|list", "nondeterministic_output_order"),
    (
        "function|load",
        "request_policy:all_shards response_policy:all_succeeded",
    ),
    (
        "function|restore",
        "request_policy:all_shards response_policy:all_succeeded",
    ),
    (
        "function|stats",
        "nondeterministic_output request_policy:all_shards response_policy:special",
    ),
    ("hgetall", "nondeterministic_output_order"),
    ("hkeys", "nondeterministic_output_order"),
    ("hrandfield", "nondeterministic_output"),
    ("hscan", "nondeterministic_output"),
    ("hvals", "nondeterministic_output_order"),
    (
        "info",
        "nondeterministic_output request_policy:all_shards response_policy:special",
    ),
    (
        "keys",
        "request_policy:all_shards nondeterministic_output_order",
    ),
    ("lastsave", "nondeterministic_output"),
    (
        "latency|doctor",
        "nondeterministic_output request_policy:all_nodes response_policy:special",
    ),
    (
        "latency|graph",
        "nondeterministic_output request_policy:all_nodes response_policy:special",
    ),
    (
        "latency|histogram",
        "nondeterministic_output request_policy:all_nodes response_policy:special",
    ),
    (
        "latency|history",
        "nondeterministic_output request_policy:all_nodes response_policy:special",
    ),
    (
        "latency|latest",
        "nondeterministic_output request_policy:all_nodes response_policy:special",
    ),
    (
        "latency|reset",
        "request_policy:all_nodes response_policy:all_succeeded",
    ),
    (
        "memory|doctor",
        "nondeterministic_output request_policy:all_shards response_policy:special",
    ),
    (
        "memory|malloc-stats",
        "nondeterministic_output request_policy:all_shards response_policy:special",
    ),
    (
        "memory|purge",
        "request_policy:all_shards response_policy:all_succeeded",
    ),
    (
        "memory|stats",
        "nondeterministic_output request_policy:all_shards response_policy:special",
    ),
    ("mget", "request_policy:multi_shard"),
    ("migrate", "nondeterministic_output"),
    ("module|list", "nondeterministic_output_order"),
    (
        "mset",
        "request_policy:multi_shard response_policy:all_succeeded",
    ),
    (
        "msetnx",
        "request_policy:multi_shard response_policy:agg_min",
    ),
    ("object|encoding", "nondeterministic_output"),
    ("object|freq", "nondeterministic_output"),
    ("object|idletime", "nondeterministic_output"),
    ("object|refcount", "nondeterministic_output"),
    (
        "ping",
        "request_policy:all_shards response_policy:all_succeeded",
    ),
    ("pttl", "nondeterministic_output"),
    (
        "randomkey",
        "request_policy:all_shards nondeterministic_output",
    ),
    ("scan", "nondeterministic_output request_policy:special"),
    (
        "script|exists",
        "request_policy:all_shards response_policy:agg_logical_and",
    ),
    (
        "script|flush",
        "request_policy:all_nodes response_policy:all_succeeded",
    ),
    (
        "script|kill",
        "request_policy:all_shards response_policy:one_succeeded",
    ),
    (
        "script|load",
        "request_policy:all_nodes response_policy:all_succeeded",
    ),
    ("sdiff", "nondeterministic_output_order"),
    ("sinter", "nondeterministic_output_order"),
    (
        "slowlog|get",
        "request_policy:all_nodes nondeterministic_output",
    ),
    (
        "slowlog|len",
        "request_policy:all_nodes response_policy:agg_sum nondeterministic_output",
    ),
    (
        "slowlog|reset",
        "request_policy:all_nodes response_policy:all_succeeded",
    ),
    ("smembers", "nondeterministic_output_order"),
    ("spop", "nondeterministic_output"),
    ("srandmember", "nondeterministic_output"),
    ("sscan", "nondeterministic_output"),
    ("sunion", "nondeterministic_output_order"),
    ("time", "nondeterministic_output"),
    (
        "touch",
        "request_policy:multi_shard response_policy:agg_sum",
    ),
    ("ttl", "nondeterministic_output"),
    (
        "unlink",
        "request_policy:multi_shard response_policy:agg_sum",
    ),
    ("wait", "request_policy:all_shards response_policy:agg_min"),
    ("xadd", "nondeterministic_output"),
    ("xautoclaim", "nondeterministic_output"),
    ("xclaim", "nondeterministic_output"),
    ("xinfo|consumers", "nondeterministic_output"),
    ("xpending", "nondeterministic_output"),
    ("xtrim", "nondeterministic_output"),
    ("zrandmember", "nondeterministic_output"),
    ("zscan", "nondeterministic_output"),
];

/// Key specs, by full name (see [`parse_key_specs`]).
const KEY_SPECS: &[(&str, &str)] = &[
    ("append", "RW,insert index:1 range:0,1,0"),
    ("bitcount", "RO,access index:1 range:0,1,0"),
    ("bitfield", "RW,access,update,variable_flags index:1 range:0,1,0 -- This command allows both access and modification of the key"),
    ("bitfield_ro", "RO,access index:1 range:0,1,0"),
    ("bitop", "OW,update index:2 range:0,1,0 ; RO,access index:3 range:-1,1,0"),
    ("bitpos", "RO,access index:1 range:0,1,0"),
    ("blmove", "RW,access,delete index:1 range:0,1,0 ; RW,insert index:2 range:0,1,0"),
    ("blmpop", "RW,access,delete index:2 keynum:0,1,1"),
    ("blpop", "RW,access,delete index:1 range:-2,1,0"),
    ("brpop", "RW,access,delete index:1 range:-2,1,0"),
    ("brpoplpush", "RW,access,delete index:1 range:0,1,0 ; RW,insert index:2 range:0,1,0"),
    ("bzmpop", "RW,access,delete index:2 keynum:0,1,1"),
    ("bzpopmax", "RW,access,delete index:1 range:-2,1,0"),
    ("bzpopmin", "RW,access,delete index:1 range:-2,1,0"),
    ("copy", "RO,access index:1 range:0,1,0 ; OW,update index:2 range:0,1,0"),
    ("decr", "RW,access,update index:1 range:0,1,0"),
    ("decrby", "RW,access,update index:1 range:0,1,0"),
    ("del", "RM,delete index:1 range:-1,1,0"),
    ("dump", "RO,access index:1 range:0,1,0"),
    ("eval", "RW,access,update index:2 keynum:0,1,1 -- We cannot tell how the keys will be used so we assume the worst, RW and UPDATE"),
    ("eval_ro", "RO,access index:2 keynum:0,1,1 -- We cannot tell how the keys will be used so we assume the worst, RO and ACCESS"),
    ("evalsha", "RW,access,update index:2 keynum:0,1,1"),
    ("evalsha_ro", "RO,access index:2 keynum:0,1,1"),
    ("exists", "RO index:1 range:-1,1,0"),
    ("expire", "RW,update index:1 range:0,1,0"),
    ("expireat", "RW,update index:1 range:0,1,0"),
    ("expiretime", "RO,access index:1 range:0,1,0"),
    ("fcall", "RW,access,update index:2 keynum:0,1,1 -- We cannot tell how the keys will be used so we assume the worst, RW and UPDATE"),
    ("fcall_ro", "RO,access index:2 keynum:0,1,1 -- We cannot tell how the keys will be used so we assume the worst, RO and ACCESS"),
    ("geoadd", "RW,update index:1 range:0,1,0"),
    ("geodist", "RO,access index:1 range:0,1,0"),
    ("geohash", "RO,access index:1 range:0,1,0"),
    ("geopos", "RO,access index:1 range:0,1,0"),
    ("georadius", "RO,access index:1 range:0,1,0 ; OW,update keyword:STORE,6 range:0,1,0 ; OW,update keyword:STOREDIST,6 range:0,1,0"),
    ("georadius_ro", "RO,access index:1 range:0,1,0"),
    ("georadiusbymember", "RO,access index:1 range:0,1,0 ; OW,update keyword:STORE,5 range:0,1,0 ; OW,update keyword:STOREDIST,5 range:0,1,0"),
    ("georadiusbymember_ro", "RO,access index:1 range:0,1,0"),
    ("geosearch", "RO,access index:1 range:0,1,0"),
    ("geosearchstore", "OW,update index:1 range:0,1,0 ; RO,access index:2 range:0,1,0"),
    ("get", "RO,access index:1 range:0,1,0"),
    ("getbit", "RO,access index:1 range:0,1,0"),
    ("getdel", "RW,access,delete index:1 range:0,1,0"),
    ("getex", "RW,access,update index:1 range:0,1,0 -- RW and UPDATE because it changes the TTL"),
    ("getrange", "RO,access index:1 range:0,1,0"),
    ("getset", "RW,access,update index:1 range:0,1,0"),
    ("hdel", "RW,delete index:1 range:0,1,0"),
    ("hexists", "RO index:1 range:0,1,0"),
    ("hget", "RO,access index:1 range:0,1,0"),
    ("hgetall", "RO,access index:1 range:0,1,0"),
    ("hincrby", "RW,access,update index:1 range:0,1,0"),
    ("hincrbyfloat", "RW,access,update index:1 range:0,1,0"),
    ("hkeys", "RO,access index:1 range:0,1,0"),
    ("hlen", "RO index:1 range:0,1,0"),
    ("hmget", "RO,access index:1 range:0,1,0"),
    ("hmset", "RW,update index:1 range:0,1,0"),
    ("hrandfield", "RO,access index:1 range:0,1,0"),
    ("hscan", "RO,access index:1 range:0,1,0"),
    ("hset", "RW,update index:1 range:0,1,0"),
    ("hsetnx", "RW,insert index:1 range:0,1,0"),
    ("hstrlen", "RO index:1 range:0,1,0"),
    ("hvals", "RO,access index:1 range:0,1,0"),
    ("incr", "RW,access,update index:1 range:0,1,0"),
    ("incrby", "RW,access,update index:1 range:0,1,0"),
    ("incrbyfloat", "RW,access,update index:1 range:0,1,0"),
    ("lcs", "RO,access index:1 range:1,1,0"),
    ("lindex", "RO,access index:1 range:0,1,0"),
    ("linsert", "RW,insert index:1 range:0,1,0"),
    ("llen", "RO index:1 range:0,1,0"),
    ("lmove", "RW,access,delete index:1 range:0,1,0 ; RW,insert index:2 range:0,1,0"),
    ("lmpop", "RW,access,delete index:1 keynum:0,1,1"),
    ("lpop", "RW,access,delete index:1 range:0,1,0"),
    ("lpos", "RO,access index:1 range:0,1,0"),
    ("lpush", "RW,insert index:1 range:0,1,0"),
    ("lpushx", "RW,insert index:1 range:0,1,0"),
    ("lrange", "RO,access index:1 range:0,1,0"),
    ("lrem", "RW,delete index:1 range:0,1,0"),
    ("lset", "RW,update index:1 range:0,1,0"),
    ("ltrim", "RW,delete index:1 range:0,1,0"),
    ("memory|usage", "RO index:2 range:0,1,0"),
    ("mget", "RO,access index:1 range:-1,1,0"),
    ("migrate", "RW,access,delete index:3 range:0,1,0 ; RW,access,delete,incomplete keyword:KEYS,-2 range:-1,1,0"),
    ("move", "RW,access,update index:1 range:0,1,0"),
    ("mset", "OW,update index:1 range:-1,2,0"),
    ("msetnx", "OW,insert index:1 range:-1,2,0"),
    ("object|encoding", "RO index:2 range:0,1,0"),
    ("object|freq", "RO index:2 range:0,1,0"),
    ("object|idletime", "RO index:2 range:0,1,0"),
    ("object|refcount", "RO index:2 range:0,1,0"),
    ("persist", "RW,update index:1 range:0,1,0"),
    ("pexpire", "RW,update index:1 range:0,1,0"),
    ("pexpireat", "RW,update index:1 range:0,1,0"),
    ("pexpiretime", "RO,access index:1 range:0,1,0"),
    ("pfadd", "RW,insert index:1 range:0,1,0"),
    ("pfcount", "RW,access index:1 range:-1,1,0 -- RW because it may change the internal representation of the key, and propagate to replicas"),
    ("pfdebug", "RW,access index:2 range:0,1,0"),
    ("pfmerge", "RW,access,insert index:1 range:0,1,0 ; RO,access index:2 range:-1,1,0"),
    ("psetex", "OW,update index:1 range:0,1,0"),
    ("pttl", "RO,access index:1 range:0,1,0"),
    ("rename", "RW,access,delete index:1 range:0,1,0 ; OW,update index:2 range:0,1,0"),
    ("renamenx", "RW,access,delete index:1 range:0,1,0 ; OW,insert index:2 range:0,1,0"),
    ("restore", "OW,update index:1 range:0,1,0"),
    ("restore-asking", "OW,update index:1 range:0,1,0"),
    ("rpop", "RW,access,delete index:1 range:0,1,0"),
    ("rpoplpush", "RW,access,delete index:1 range:0,1,0 ; RW,insert index:2 range:0,1,0"),
    ("rpush", "RW,insert index:1 range:0,1,0"),
    ("rpushx", "RW,insert index:1 range:0,1,0"),
    ("sadd", "RW,insert index:1 range:0,1,0"),
    ("scard", "RO index:1 range:0,1,0"),
    ("sdiff", "RO,access index:1 range:-1,1,0"),
    ("sdiffstore", "OW,update index:1 range:0,1,0 ; RO,access index:2 range:-1,1,0"),
    ("set", "RW,access,update,variable_flags index:1 range:0,1,0 -- RW and ACCESS due to the optional `GET` argument"),
    ("setbit", "RW,access,update index:1 range:0,1,0"),
    ("setex", "OW,update index:1 range:0,1,0"),
    ("setnx", "OW,insert index:1 range:0,1,0"),
    ("setrange", "RW,update index:1 range:0,1,0"),
    ("sinter", "RO,access index:1 range:-1,1,0"),
    ("sintercard", "RO,access index:1 keynum:0,1,1"),
    ("sinterstore", "RW,update index:1 range:0,1,0 ; RO,access index:2 range:-1,1,0"),
    ("sismember", "RO index:1 range:0,1,0"),
    ("smembers", "RO,access index:1 range:0,1,0"),
    ("smismember", "RO,access index:1 range:0,1,0"),
    ("smove", "RW,access,delete index:1 range:0,1,0 ; RW,insert index:2 range:0,1,0"),
    ("sort", "RO,access index:1 range:0,1,0 ; RO,access unknown unknown -- For the optional BY/GET keyword. It is marked 'unknown' because the key names derive from the content of the key we sort ; OW,update unknown unknown -- For the optional STORE keyword. It is marked 'unknown' because the keyword can appear anywhere in the argument array"),
    ("sort_ro", "RO,access index:1 range:0,1,0 ; RO,access unknown unknown -- For the optional BY/GET keyword. It is marked 'unknown' because the key names derive from the content of the key we sort"),
    ("spop", "RW,access,delete index:1 range:0,1,0"),
    ("spublish", "not_key index:1 range:0,1,0"),
    ("srandmember", "RO,access index:1 range:0,1,0"),
    ("srem", "RW,delete index:1 range:0,1,0"),
    ("sscan", "RO,access index:1 range:0,1,0"),
    ("ssubscribe", "not_key index:1 range:-1,1,0"),
    ("strlen", "RO index:1 range:0,1,0"),
    ("substr", "RO,access index:1 range:0,1,0"),
    ("sunion", "RO,access index:1 range:-1,1,0"),
    ("sunionstore", "OW,update index:1 range:0,1,0 ; RO,access index:2 range:-1,1,0"),
    ("sunsubscribe", "not_key index:1 range:-1,1,0"),
    ("touch", "RO index:1 range:-1,1,0"),
    ("ttl", "RO,access index:1 range:0,1,0"),
    ("type", "RO index:1 range:0,1,0"),
    ("unlink", "RM,delete index:1 range:-1,1,0"),
    ("watch", "RO index:1 range:-1,1,0"),
    ("xack", "RW,update index:1 range:0,1,0"),
    ("xadd", "RW,update index:1 range:0,1,0 -- UPDATE instead of INSERT because of the optional trimming feature"),
    ("xautoclaim", "RW,delete index:1 range:0,1,0"),
    ("xclaim", "RW,update index:1 range:0,1,0"),
    ("xdel", "RW,delete index:1 range:0,1,0"),
    ("xgroup|create", "RW,insert index:2 range:0,1,0"),
    ("xgroup|createconsumer", "RW,insert index:2 range:0,1,0"),
    ("xgroup|delconsumer", "RW,delete index:2 range:0,1,0"),
    ("xgroup|destroy", "RW,delete index:2 range:0,1,0"),
    ("xgroup|setid", "RW,update index:2 range:0,1,0"),
    ("xinfo|consumers", "RO,access index:2 range:0,1,0"),
    ("xinfo|groups", "RO,access index:2 range:0,1,0"),
    ("xinfo|stream", "RO,access index:2 range:0,1,0"),
    ("xlen", "RO index:1 range:0,1,0"),
    ("xpending", "RO,access index:1 range:0,1,0"),
    ("xrange", "RO,access index:1 range:0,1,0"),
    ("xread", "RO,access keyword:STREAMS,1 range:-1,1,2"),
    ("xreadgroup", "RO,access keyword:STREAMS,4 range:-1,1,2"),
    ("xrevrange", "RO,access index:1 range:0,1,0"),
    ("xsetid", "RW,update index:1 range:0,1,0"),
    ("xtrim", "RW,delete index:1 range:0,1,0"),
    ("zadd", "RW,update index:1 range:0,1,0"),
    ("zcard", "RO index:1 range:0,1,0"),
    ("zcount", "RO,access index:1 range:0,1,0"),
    ("zdiff", "RO,access index:1 keynum:0,1,1"),
    ("zdiffstore", "OW,update index:1 range:0,1,0 ; RO,access index:2 keynum:0,1,1"),
    ("zincrby", "RW,access,update index:1 range:0,1,0"),
    ("zinter", "RO,access index:1 keynum:0,1,1"),
    ("zintercard", "RO,access index:1 keynum:0,1,1"),
    ("zinterstore", "OW,update index:1 range:0,1,0 ; RO,access index:2 keynum:0,1,1"),
    ("zlexcount", "RO,access index:1 range:0,1,0"),
    ("zmpop", "RW,access,delete index:1 keynum:0,1,1"),
    ("zmscore", "RO,access index:1 range:0,1,0"),
    ("zpopmax", "RW,access,delete index:1 range:0,1,0"),
    ("zpopmin", "RW,access,delete index:1 range:0,1,0"),
    ("zrandmember", "RO,access index:1 range:0,1,0"),
    ("zrange", "RO,access index:1 range:0,1,0"),
    ("zrangebylex", "RO,access index:1 range:0,1,0"),
    ("zrangebyscore", "RO,access index:1 range:0,1,0"),
    ("zrangestore", "OW,update index:1 range:0,1,0 ; RO,access index:2 range:0,1,0"),
    ("zrank", "RO,access index:1 range:0,1,0"),
    ("zrem", "RW,delete index:1 range:0,1,0"),
    ("zremrangebylex", "RW,delete index:1 range:0,1,0"),
    ("zremrangebyrank", "RW,delete index:1 range:0,1,0"),
    ("zremrangebyscore", "RW,delete index:1 range:0,1,0"),
    ("zrevrange", "RO,access index:1 range:0,1,0"),
    ("zrevrangebylex", "RO,access index:1 range:0,1,0"),
    ("zrevrangebyscore", "RO,access index:1 range:0,1,0"),
    ("zrevrank", "RO,access index:1 range:0,1,0"),
    ("zscan", "RO,access index:1 range:0,1,0"),
    ("zscore", "RO,access index:1 range:0,1,0"),
    ("zunion", "RO,access index:1 keynum:0,1,1"),
    ("zunionstore", "OW,update index:1 range:0,1,0 ; RO,access index:2 keynum:0,1,1"),
];

/// Argument syntax, by full name (see the module's documentation).
const SYNTAX: &[(&str, &str)] = &[
    // Rostrum's own commands and subcommands.
    ("client|no-touch", "enabled(ON | OFF)"),
    ("client|setinfo", "attr(LIB-NAME libname | LIB-VER libver)"),
    ("lb.among", "key member... [WITHGLOBAL] [WITHSUBSCORE] [WITHTIME] [WITHMETA] [PERIOD period:integer]"),
    ("lb.around", "key member count:integer [WITHSUBSCORE] [WITHTIME] [WITHMETA] [PERIOD period:integer]"),
    ("lb.attach", "key AT end:unix-time FILE file CRC crc"),
    ("lb.config", "key action(GET | SET settings([RESET reset(NEVER | DAILY | WEEKLY | MONTHLY | EVERY milliseconds:integer | CRON cron)] [TZ tz] [HISTORY history:integer] [ARCHIVE archive(MEMORY | DISK)] [AT unix-time-milliseconds:unix-time]))"),
    ("lb.count", "key [range(min:double max:double)] [PERIOD period:integer]"),
    ("lb.create", "key [ORDER order(DESC | ASC)] [POLICY policy(BEST | SET | INCR)] [TIEBREAK tiebreak(EARLIEST | LATEST)] [RANKING ranking(ORDINAL | COMPETITION | DENSE)] [CAPACITY capacity:integer] [RESET reset(NEVER | DAILY | WEEKLY | MONTHLY | EVERY milliseconds:integer | CRON cron)] [TZ tz] [HISTORY history:integer] [ARCHIVE archive(MEMORY | DISK)] [NUMBER number:integer] [SINCE since:unix-time] [ENDS ends:unix-time]"),
    ("lb.friends", "key set-key:key [INCLUDE member] [WITHGLOBAL] [WITHSUBSCORE] [WITHTIME] [WITHMETA] [PERIOD period:integer]"),
    ("lb.get", "key member [PERIOD period:integer]"),
    ("lb.incr", "key member delta:double [AT unix-time-milliseconds:unix-time] [META meta] [ID event-id]"),
    ("lb.info", "key"),
    ("lb.mrank", "key member... [PERIOD period:integer]"),
    ("lb.msubmit", "key_member_score(key member score:double)..."),
    ("lb.percent", "key member [PERIOD period:integer]"),
    ("lb.periods", "key"),
    ("lb.range", "key from:integer to:integer [WITHSUBSCORE] [WITHTIME] [WITHMETA] [PERIOD period:integer]"),
    ("lb.rank", "key member [PERIOD period:integer]"),
    ("lb.rem", "key member..."),
    ("lb.reset", "key [boundary(AT unix-time-milliseconds:unix-time | UNTIL unix-time-milliseconds:unix-time)]"),
    ("lb.score", "key member [PERIOD period:integer]"),
    ("lb.seen", "key event-id..."),
    ("lb.submit", "key member score:double [SUBSCORE subscore:double] [AT unix-time-milliseconds:unix-time] [META meta] [ID event-id]"),
    ("lb.top", "key limit(count:integer | PERCENT percent:double) [OFFSET offset:integer] [WITHSUBSCORE] [WITHTIME] [WITHMETA] [PERIOD period:integer]"),
    ("lb.unwatch", "[key...]"),
    ("lb.watch", "key n:integer [INTERVAL milliseconds:integer]"),
    ("acl|cat", "[categoryname]"),
    ("acl|deluser", "username..."),
    ("acl|dryrun", "username command [arg...]"),
    ("acl|genpass", "[bits:integer]"),
    ("acl|getuser", "username"),
    ("acl|log", "[operation(count:integer | RESET)]"),
    ("acl|setuser", "username [rule...]"),
    ("append", "key value"),
    ("auth", "[username@6.0.0] password"),
    ("bgsave", "[SCHEDULE@3.2.2]"),
    ("bitcount", "key [index(start:integer end:integer [index_unit(BYTE | BIT)@7.0.0])]"),
    ("bitfield", "key [operation(GET encoding_offset(encoding offset:integer) | write([OVERFLOW wrap_sat_fail(WRAP | SAT | FAIL)] write_operation(SET encoding_offset_value(encoding offset:integer value:integer) | INCRBY encoding_offset_increment(encoding offset:integer increment:integer))))...]"),
    ("bitfield_ro", "key [GET encoding_offset(encoding offset:integer)...^]"),
    ("bitop", "operation destkey:key key..."),
    ("bitpos", "key bit:integer [index(start:integer [end_index(end:integer [index_unit(BYTE | BIT)@7.0.0])])]"),
    ("blmove", "source:key destination:key wherefrom(LEFT | RIGHT) whereto(LEFT | RIGHT) timeout:double"),
    ("blmpop", "timeout:double numkeys:integer key... where(LEFT | RIGHT) [COUNT count:integer]"),
    ("blpop", "key... timeout:double"),
    ("brpop", "key... timeout:double"),
    ("brpoplpush", "source:key destination:key timeout:double"),
    ("bzmpop", "timeout:double numkeys:integer key... where(MIN | MAX) [COUNT count:integer]"),
    ("bzpopmax", "key... timeout:double"),
    ("bzpopmin", "key... timeout:double"),
    ("client|caching", "mode(YES | NO)"),
    ("client|kill", "filter('ip:port'!2.8.12 | new-format([ID client-id:integer@2.8.12] | [TYPE normal_master_slave_pubsub(NORMAL | MASTER@3.2.0 | SLAVE | REPLICA@5.0.0 | PUBSUB)@2.8.12] | [USER username] | [ADDR 'ip:port'] | [LADDR 'ip:port'@6.2.0] | [SKIPME 'yes/no'])...)"),
    ("client|list", "[TYPE normal_master_replica_pubsub(NORMAL | MASTER | REPLICA | PUBSUB)@5.0.0] [ID id(client-id:integer...)@6.2.0]"),
    ("client|no-evict", "enabled(ON | OFF)"),
    ("client|pause", "timeout:integer [mode(WRITE | ALL)@6.2.0]"),
    ("client|reply", "on_off_skip(ON | OFF | SKIP)"),
    ("client|setname", "connection-name"),
    ("client|tracking", "status(ON | OFF) [REDIRECT client-id:integer] [PREFIX prefix...^] [BCAST] [OPTIN] [OPTOUT] [NOLOOP]"),
    ("client|unblock", "client-id:integer [timeout_error(TIMEOUT | ERROR)]"),
    ("cluster|addslots", "slot:integer..."),
    ("cluster|addslotsrange", "start-slot_end-slot(start-slot:integer end-slot:integer)..."),
    ("cluster|count-failure-reports", "node-id"),
    ("cluster|countkeysinslot", "slot:integer"),
    ("cluster|delslots", "slot:integer..."),
    ("cluster|delslotsrange", "start-slot_end-slot(start-slot:integer end-slot:integer)..."),
    ("cluster|failover", "[options(FORCE | TAKEOVER)]"),
    ("cluster|forget", "node-id"),
    ("cluster|getkeysinslot", "slot:integer count:integer"),
    ("cluster|keyslot", "key:string"),
    ("cluster|meet", "ip port:integer [cluster_bus_port:integer@4.0.0]"),
    ("cluster|replicas", "node-id"),
    ("cluster|replicate", "node-id"),
    ("cluster|reset", "[hard_soft(HARD | SOFT)]"),
    ("cluster|set-config-epoch", "config-epoch:integer"),
    ("cluster|setslot", "slot:integer subcommand(IMPORTING node-id | MIGRATING node-id | NODE node-id | STABLE)"),
    ("cluster|slaves", "node-id"),
    ("command|docs", "[command-name...]"),
    ("command|info", "[command-name...]"),
    ("command|list", "[FILTERBY filterby(MODULE module-name | ACLCAT category | PATTERN pattern:pattern)]"),
    ("config|get", "parameter(parameter)..."),
    ("config|set", "parameter_value(parameter value)..."),
    ("copy", "source:key destination:key [DB destination-db:integer] [REPLACE]"),
    ("decr", "key"),
    ("decrby", "key decrement:integer"),
    ("del", "key..."),
    ("dump", "key"),
    ("echo", "message"),
    ("eval", "script numkeys:integer [key...] [arg...]"),
    ("eval_ro", "script numkeys:integer [key...] [arg...]"),
    ("evalsha", "sha1 numkeys:integer [key...] [arg...]"),
    ("evalsha_ro", "sha1 numkeys:integer [key...] [arg...]"),
    ("exists", "key..."),
    ("expire", "key seconds:integer [condition(NX | XX | GT | LT)@7.0.0]"),
    ("expireat", "key unix-time-seconds:unix-time [condition(NX | XX | GT | LT)@7.0.0]"),
    ("expiretime", "key"),
    ("failover", "[TO target(host port:integer [FORCE])] [ABORT] [TIMEOUT milliseconds:integer]"),
    ("fcall", "function numkeys:integer [key...] [arg...]"),
    ("fcall_ro", "function numkeys:integer [key...] [arg...]"),
    ("flushall", "[async(ASYNC@4.0.0 | SYNC@6.2.0)]"),
    ("flushdb", "[async(ASYNC@4.0.0 | SYNC@6.2.0)]"),
    ("function|delete", "library-name"),
    ("function|flush", "[async(ASYNC | SYNC)]"),
    ("function|list", "[LIBRARYNAME library-name-pattern] [WITHCODE]"),
    ("function|load", "[REPLACE=replace] function-code"),
    ("function|restore", "serialized-value [policy(FLUSH | APPEND | REPLACE)]"),
    ("geoadd", "key [condition(NX | XX)@6.2.0] [CH=change@6.2.0] longitude_latitude_member(longitude:double latitude:double member)..."),
    ("geodist", "key member1 member2 [unit(M | KM | FT | MI)]"),
    ("geohash", "key member..."),
    ("geopos", "key member..."),
    ("georadius", "key longitude:double latitude:double radius:double unit(M | KM | FT | MI) [WITHCOORD] [WITHDIST] [WITHHASH] [count(COUNT count:integer [ANY@6.2.0])] [order(ASC | DESC)] [STORE key] [STOREDIST key]"),
    ("georadius_ro", "key longitude:double latitude:double radius:double unit(M | KM | FT | MI) [WITHCOORD] [WITHDIST] [WITHHASH] [count(COUNT count:integer [ANY@6.2.0])] [order(ASC | DESC)]"),
    ("georadiusbymember", "key member radius:double unit(M | KM | FT | MI) [WITHCOORD] [WITHDIST] [WITHHASH] [count(COUNT count:integer [ANY])] [order(ASC | DESC)] [STORE key] [STOREDIST key]"),
    ("georadiusbymember_ro", "key member radius:double unit(M | KM | FT | MI) [WITHCOORD] [WITHDIST] [WITHHASH] [count(COUNT count:integer [ANY])] [order(ASC | DESC)]"),
    ("geosearch", "key from(FROMMEMBER member | FROMLONLAT longitude_latitude(longitude:double latitude:double)) by(circle(BYRADIUS radius:double unit(M | KM | FT | MI)) | box(BYBOX width:double height:double unit(M | KM | FT | MI))) [order(ASC | DESC)] [count(COUNT count:integer [ANY])] [WITHCOORD] [WITHDIST] [WITHHASH]"),
    ("geosearchstore", "destination:key source:key from(FROMMEMBER member | FROMLONLAT longitude_latitude(longitude:double latitude:double)) by(circle(BYRADIUS radius:double unit(M | KM | FT | MI)) | box(BYBOX width:double height:double unit(M | KM | FT | MI))) [order(ASC | DESC)] [count(COUNT count:integer [ANY])] [STOREDIST]"),
    ("get", "key"),
    ("getbit", "key offset:integer"),
    ("getdel", "key"),
    ("getex", "key [expiration(EX seconds:integer | PX milliseconds:integer | EXAT unix-time-seconds:unix-time | PXAT unix-time-milliseconds:unix-time | PERSIST)]"),
    ("getrange", "key start:integer end:integer"),
    ("getset", "key value"),
    ("hdel", "key field..."),
    ("hello", "[arguments(protover:integer [AUTH username_password(username password)] [SETNAME clientname])]"),
    ("hexists", "key field"),
    ("hget", "key field"),
    ("hgetall", "key"),
    ("hincrby", "key field increment:integer"),
    ("hincrbyfloat", "key field increment:double"),
    ("hkeys", "key"),
    ("hlen", "key"),
    ("hmget", "key field..."),
    ("hmset", "key field_value(field value)..."),
    ("hrandfield", "key [options(count:integer [WITHVALUES])]"),
    ("hscan", "key cursor:integer [MATCH pattern:pattern] [COUNT count:integer]"),
    ("hset", "key field_value(field value)..."),
    ("hsetnx", "key field value"),
    ("hstrlen", "key field"),
    ("hvals", "key"),
    ("incr", "key"),
    ("incrby", "key increment:integer"),
    ("incrbyfloat", "key increment:double"),
    ("info", "[section...]"),
    ("keys", "pattern:pattern"),
    ("latency|graph", "event"),
    ("latency|histogram", "[command...]"),
    ("latency|history", "event"),
    ("latency|reset", "[event...]"),
    ("lcs", "key1:key key2:key#0 [LEN] [IDX] [MINMATCHLEN len:integer] [WITHMATCHLEN]"),
    ("lindex", "key index:integer"),
    ("linsert", "key where(BEFORE | AFTER) pivot element"),
    ("llen", "key"),
    ("lmove", "source:key destination:key wherefrom(LEFT | RIGHT) whereto(LEFT | RIGHT)"),
    ("lmpop", "numkeys:integer key... where(LEFT | RIGHT) [COUNT count:integer]"),
    ("lolwut", "[VERSION version:integer]"),
    ("lpop", "key [count:integer@6.2.0]"),
    ("lpos", "key element [RANK rank:integer] [COUNT num-matches:integer] [MAXLEN len:integer]"),
    ("lpush", "key element..."),
    ("lpushx", "key element..."),
    ("lrange", "key start:integer stop:integer"),
    ("lrem", "key count:integer element"),
    ("lset", "key index:integer element"),
    ("ltrim", "key start:integer stop:integer"),
    ("memory|usage", "key [SAMPLES count:integer]"),
    ("mget", "key..."),
    ("migrate", "host port:integer key_or_empty_string(key | \"\"=empty_string) destination-db:integer timeout:integer [COPY@3.0.0] [REPLACE@3.0.0] [authentication([AUTH password@4.0.7] | [AUTH2 username_password(username password)@6.0.0])] [KEYS key...@3.0.6]"),
    ("module|load", "path [arg...]"),
    ("module|loadex", "path [CONFIG configs(name value)...^] [ARGS args(arg)...]"),
    ("module|unload", "name"),
    ("move", "key db:integer"),
    ("mset", "key_value(key value)..."),
    ("msetnx", "key_value(key value)..."),
    ("object|encoding", "key"),
    ("object|freq", "key"),
    ("object|idletime", "key"),
    ("object|refcount", "key"),
    ("persist", "key"),
    ("pexpire", "key milliseconds:integer [condition(NX | XX | GT | LT)@7.0.0]"),
    ("pexpireat", "key unix-time-milliseconds:unix-time [condition(NX | XX | GT | LT)@7.0.0]"),
    ("pexpiretime", "key"),
    ("pfadd", "key [element...]"),
    ("pfcount", "key..."),
    ("pfdebug", "subcommand key"),
    ("pfmerge", "destkey:key sourcekey:key..."),
    ("ping", "[message]"),
    ("psetex", "key milliseconds:integer value"),
    ("psubscribe", "pattern(pattern:pattern)..."),
    ("psync", "replicationid offset:integer"),
    ("pttl", "key"),
    ("publish", "channel message"),
    ("pubsub|channels", "[pattern:pattern]"),
    ("pubsub|numsub", "[channel...]"),
    ("pubsub|shardchannels", "[pattern:pattern]"),
    ("pubsub|shardnumsub", "[shardchannel...]"),
    ("punsubscribe", "[pattern:pattern...]"),
    ("rename", "key newkey:key"),
    ("renamenx", "key newkey:key"),
    ("replicaof", "args(host-port(host port:integer) | no-one(NO ONE))"),
    ("restore", "key ttl:integer serialized-value [REPLACE@3.0.0] [ABSTTL@5.0.0] [IDLETIME seconds:integer@5.0.0] [FREQ frequency:integer@5.0.0]"),
    ("restore-asking", "key ttl:integer serialized-value [REPLACE@3.0.0] [ABSTTL@5.0.0] [IDLETIME seconds:integer@5.0.0] [FREQ frequency:integer@5.0.0]"),
    ("rpop", "key [count:integer@6.2.0]"),
    ("rpoplpush", "source:key destination:key"),
    ("rpush", "key element..."),
    ("rpushx", "key element..."),
    ("sadd", "key member..."),
    ("scan", "cursor:integer [MATCH pattern:pattern] [COUNT count:integer] [TYPE type@6.0.0]"),
    ("scard", "key"),
    ("script|debug", "mode(YES | SYNC | NO)"),
    ("script|exists", "sha1..."),
    ("script|flush", "[async(ASYNC | SYNC)@6.2.0]"),
    ("script|load", "script"),
    ("sdiff", "key..."),
    ("sdiffstore", "destination:key key..."),
    ("select", "index:integer"),
    ("set", "key value [condition(NX | XX)@2.6.12] [GET@6.2.0] [expiration(EX seconds:integer@2.6.12 | PX milliseconds:integer@2.6.12 | EXAT unix-time-seconds:unix-time@6.2.0 | PXAT unix-time-milliseconds:unix-time@6.2.0 | KEEPTTL@6.0.0)]"),
    ("setbit", "key offset:integer value:integer"),
    ("setex", "key seconds:integer value"),
    ("setnx", "key value"),
    ("setrange", "key offset:integer value"),
    ("shutdown", "[nosave_save(NOSAVE | SAVE)] [NOW@7.0.0] [FORCE@7.0.0] [ABORT@7.0.0]"),
    ("sinter", "key..."),
    ("sintercard", "numkeys:integer key... [LIMIT limit:integer]"),
    ("sinterstore", "destination:key key..."),
    ("sismember", "key member"),
    ("slaveof", "args(host-port(host port:integer) | no-one(NO ONE))"),
    ("slowlog|get", "[count:integer]"),
    ("smembers", "key"),
    ("smismember", "key member..."),
    ("smove", "source:key destination:key member"),
    ("sort", "key [BY pattern:pattern#1] [LIMIT offset_count(offset:integer count:integer)] [GET pattern:pattern...^#1] [order(ASC | DESC)] [ALPHA=sorting] [STORE destination:key#2]"),
    ("sort_ro", "key [BY pattern:pattern#1] [LIMIT offset_count(offset:integer count:integer)] [GET pattern:pattern...^#1] [order(ASC | DESC)] [ALPHA=sorting]"),
    ("spop", "key [count:integer@3.2.0]"),
    ("spublish", "shardchannel message"),
    ("srandmember", "key [count:integer@2.6.0]"),
    ("srem", "key member..."),
    ("sscan", "key cursor:integer [MATCH pattern:pattern] [COUNT count:integer]"),
    ("ssubscribe", "shardchannel..."),
    ("strlen", "key"),
    ("subscribe", "channel..."),
    ("substr", "key start:integer end:integer"),
    ("sunion", "key..."),
    ("sunionstore", "destination:key key..."),
    ("sunsubscribe", "[shardchannel...]"),
    ("swapdb", "index1:integer index2:integer"),
    ("touch", "key..."),
    ("ttl", "key"),
    ("type", "key"),
    ("unlink", "key..."),
    ("unsubscribe", "[channel...]"),
    ("wait", "numreplicas:integer timeout:integer"),
    ("watch", "key..."),
    ("xack", "key group id..."),
    ("xadd", "key [NOMKSTREAM@6.2.0] [trim(strategy(MAXLEN | MINID@6.2.0) [operator(\"=\"=equal | \"~\"=approximately)] threshold [LIMIT count:integer@6.2.0])] id_or_auto(\"*\"=auto_id | id) field_value(field value)..."),
    ("xautoclaim", "key group consumer min-idle-time start [COUNT count:integer] [JUSTID]"),
    ("xclaim", "key group consumer min-idle-time id... [IDLE ms:integer] [TIME unix-time-milliseconds:unix-time] [RETRYCOUNT count:integer] [FORCE] [JUSTID] [LASTID id]"),
    ("xdel", "key id..."),
    ("xgroup|create", "key groupname id(id | \"$\"=new_id) [MKSTREAM] [ENTRIESREAD entries_read:integer]"),
    ("xgroup|createconsumer", "key groupname consumername"),
    ("xgroup|delconsumer", "key groupname consumername"),
    ("xgroup|destroy", "key groupname"),
    ("xgroup|setid", "key groupname id(id | \"$\"=new_id) [ENTRIESREAD entries_read:integer]"),
    ("xinfo|consumers", "key groupname"),
    ("xinfo|groups", "key"),
    ("xinfo|stream", "key [FULL full([COUNT count:integer])]"),
    ("xlen", "key"),
    ("xpending", "key group [filters([IDLE min-idle-time:integer@6.2.0] start end count:integer [consumer])]"),
    ("xrange", "key start end [COUNT count:integer]"),
    ("xread", "[COUNT count:integer] [BLOCK milliseconds:integer] STREAMS streams(key... id...)"),
    ("xreadgroup", "GROUP group_consumer(group consumer) [COUNT count:integer] [BLOCK milliseconds:integer] [NOACK] STREAMS streams(key... id...)"),
    ("xrevrange", "key end start [COUNT count:integer]"),
    ("xsetid", "key last-id [ENTRIESADDED entries_added:integer@7.0.0] [MAXDELETEDID max_deleted_entry_id@7.0.0]"),
    ("xtrim", "key trim(strategy(MAXLEN | MINID@6.2.0) [operator(\"=\"=equal | \"~\"=approximately)] threshold [LIMIT count:integer@6.2.0])"),
    ("zadd", "key [condition(NX | XX)@3.0.2] [comparison(GT | LT)@6.2.0] [CH=change@3.0.2] [INCR=increment@3.0.2] score_member(score:double member)..."),
    ("zcard", "key"),
    ("zcount", "key min:double max:double"),
    ("zdiff", "numkeys:integer key... [WITHSCORES]"),
    ("zdiffstore", "destination:key numkeys:integer key..."),
    ("zincrby", "key increment:integer member"),
    ("zinter", "numkeys:integer key... [WEIGHTS weight:integer...] [AGGREGATE aggregate(SUM | MIN | MAX)] [WITHSCORES]"),
    ("zintercard", "numkeys:integer key... [LIMIT limit:integer]"),
    ("zinterstore", "destination:key numkeys:integer key... [WEIGHTS weight:integer...] [AGGREGATE aggregate(SUM | MIN | MAX)]"),
    ("zlexcount", "key min max"),
    ("zmpop", "numkeys:integer key... where(MIN | MAX) [COUNT count:integer]"),
    ("zmscore", "key member..."),
    ("zpopmax", "key [count:integer]"),
    ("zpopmin", "key [count:integer]"),
    ("zrandmember", "key [options(count:integer [WITHSCORES])]"),
    ("zrange", "key start stop [sortby(BYSCORE | BYLEX)@6.2.0] [REV@6.2.0] [LIMIT offset_count(offset:integer count:integer)@6.2.0] [WITHSCORES]"),
    ("zrangebylex", "key min max [LIMIT offset_count(offset:integer count:integer)]"),
    ("zrangebyscore", "key min:double max:double [WITHSCORES@2.0.0] [LIMIT offset_count(offset:integer count:integer)]"),
    ("zrangestore", "dst:key src:key min max [sortby(BYSCORE | BYLEX)] [REV] [LIMIT offset_count(offset:integer count:integer)]"),
    ("zrank", "key member"),
    ("zrem", "key member..."),
    ("zremrangebylex", "key min max"),
    ("zremrangebyrank", "key start:integer stop:integer"),
    ("zremrangebyscore", "key min:double max:double"),
    ("zrevrange", "key start:integer stop:integer [WITHSCORES]"),
    ("zrevrangebylex", "key max min [LIMIT offset_count(offset:integer count:integer)]"),
    ("zrevrangebyscore", "key max:double min:double [WITHSCORES] [LIMIT offset_count(offset:integer count:integer)]"),
    ("zrevrank", "key member"),
    ("zscan", "key cursor:integer [MATCH pattern:pattern] [COUNT count:integer]"),
    ("zscore", "key member"),
    ("zunion", "numkeys:integer key... [WEIGHTS weight:integer...] [AGGREGATE aggregate(SUM | MIN | MAX)] [WITHSCORES]"),
    ("zunionstore", "destination:key numkeys:integer key... [WEIGHTS weight:integer...] [AGGREGATE aggregate(SUM | MIN | MAX)]"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_parses() {
        for (name, line) in SYNTAX {
            if let Err(e) = parse(line) {
                panic!("{name}: {e}");
            }
        }
    }

    #[test]
    fn every_key_spec_line_parses() {
        for (name, line) in KEY_SPECS {
            if let Err(e) = parse_key_specs(line) {
                panic!("{name}: {e}");
            }
        }
        let migrate = key_specs("migrate").map(legacy_range);
        assert_eq!(migrate, Some(((3, 3, 1), true)));
        let zunionstore = key_specs("zunionstore").map(legacy_range);
        assert_eq!(zunionstore, Some(((1, 1, 1), true)));
    }

    #[test]
    fn the_grammar() {
        let a = parse("key [c(NX | XX)@3.0.2] [CH=change] EX s:integer sm(score:double m)...")
            .unwrap_or_default();
        assert_eq!(a.len(), 5);
        assert_eq!((a[0].kind, a[0].key_spec_index), (ArgType::Key, Some(0)));
        assert_eq!((a[1].kind, a[1].optional), (ArgType::OneOf, true));
        assert_eq!(a[1].since, Some("3.0.2"));
        assert_eq!(a[1].args[0].token, Some("NX"));
        assert_eq!(a[1].args[0].name, "nx");
        assert_eq!((a[2].name.as_str(), a[2].token), ("change", Some("CH")));
        assert_eq!((a[3].name.as_str(), a[3].token), ("s", Some("EX")));
        assert_eq!(a[3].kind, ArgType::Integer);
        assert_eq!((a[4].kind, a[4].multiple), (ArgType::Block, true));
        assert_eq!(a[4].args[0].kind, ArgType::Double);
        let q = parse("\"*\"=auto 'ip:port' GET p:pattern...^ k2:key#0").unwrap_or_default();
        assert_eq!((q[0].token, q[0].name.as_str()), (Some("*"), "auto"));
        assert_eq!(q[1].name, "ip:port");
        assert!(q[2].multiple && q[2].multiple_token);
        assert_eq!(q[3].key_spec_index, Some(0));
        assert!(parse("a(b c | d)").is_err());
        assert!(parse("[a").is_err());
        assert!(parse("a:nosuch").is_err());
    }
}
