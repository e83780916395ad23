//! COMMAND and its subcommands: the command table as clients see it.
//!
//! The table knows names, arities, flags, key positions and documentation
//! lines, and ACL categories (derived from the flags and group, see
//! `table::categories_of`). Key-spec flags and command tips are not in it:
//! COMMAND INFO describes each key range as one key spec.

use super::super::args::{is, text};
use super::super::table::{flags, table, Command, CommandSpec, KeySpec};
use super::super::Ctx;
use super::srv;
use super::syntax::{self, Arg, BeginSearch, FindKeys, KeySpecDoc};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::state::acl::category;
use smallvec::SmallVec;

use flags::{LOADING, STALE};

const fn sub(
    name: &'static str,
    arity: i32,
    handler: super::Handler,
    summary: &'static str,
    since: &'static str,
    complexity: &'static str,
) -> CommandSpec {
    srv(
        name,
        arity,
        LOADING | STALE,
        handler,
        summary,
        since,
        complexity,
    )
}

/// COMMAND, which also runs bare (every command's info).
pub const COMMAND: CommandSpec = CommandSpec {
    subcommands: SUBCOMMANDS,
    ..srv(
        "command",
        -1,
        LOADING | STALE,
        command,
        "Get array of Redis command details",
        "2.8.13",
        "O(N) where N is the total number of Redis commands",
    )
};

const SUBCOMMANDS: &[CommandSpec] = &[
    sub(
        "count",
        2,
        count,
        "Get total number of Redis commands",
        "2.8.13",
        "O(1)",
    ),
    sub(
        "list",
        -2,
        list,
        "Get an array of Redis command names",
        "7.0.0",
        "O(N) where N is the total number of Redis commands",
    ),
    sub(
        "info",
        -2,
        info,
        "Get array of specific Redis command details, or all when no argument is given.",
        "2.8.13",
        "O(N) where N is the number of commands to look up",
    ),
    sub(
        "docs",
        -2,
        docs,
        "Get array of specific Redis command documentation",
        "7.0.0",
        "O(N) where N is the number of commands to look up",
    ),
    sub(
        "getkeys",
        -4,
        getkeys,
        "Extract keys given a full Redis command",
        "2.8.13",
        "O(N) where N is the number of arguments to the command",
    ),
    sub(
        "getkeysandflags",
        -4,
        getkeysandflags,
        "Extract keys and access flags given a full Redis command",
        "7.0.0",
        "O(N) where N is the number of arguments to the command",
    ),
    sub(
        "help",
        2,
        command_help,
        "Show helpful text about the different subcommands",
        "5.0.0",
        "O(1)",
    ),
];

/// Every top-level command clients can call (not hidden by
/// `rename-command`; a renamed one under its original name, as Redis), in
/// table order (stable between calls).
fn top_level() -> Vec<&'static Command> {
    let mut v: Vec<&Command> = table().callable().collect();
    v.sort_by_key(|c| c.id);
    v
}

pub(super) fn subs_of(c: &Command) -> Vec<&Command> {
    let mut v: Vec<&Command> = c.subs.values().collect();
    v.sort_by_key(|c| c.id);
    v
}

fn command(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    let all = top_level();
    ctx.out.array(all.len());
    for c in all {
        write_info(ctx.out, c);
    }
    Ok(())
}

fn count(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    ctx.out.int(table().callable().count() as i64);
    Ok(())
}

fn info(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    if a.len() == 2 {
        return command(ctx, a);
    }
    ctx.out.array(a.len() - 2);
    for name in &a[2..] {
        match table().get_full_callable(name) {
            Some(c) => write_info(ctx.out, c),
            None => ctx.out.null(),
        }
    }
    Ok(())
}

fn docs(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let found: Vec<&Command> = if a.len() == 2 {
        top_level()
    } else {
        a[2..]
            .iter()
            .filter_map(|n| table().get_full_callable(n))
            .collect()
    };
    ctx.out.map(found.len());
    for c in found {
        ctx.out.bulk(c.full_name.as_bytes());
        write_docs(ctx.out, c);
    }
    Ok(())
}

fn list(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let keep: Box<dyn Fn(&Command) -> bool> = match a {
        [_, _] => Box::new(|_| true),
        [_, _, by, kind, value] if is(by, "filterby") => {
            let value = value.to_vec();
            if is(kind, "module") {
                Box::new(|_| false)
            } else if is(kind, "aclcat") {
                let cat = text(&value).to_ascii_lowercase();
                Box::new(move |c| acl_categories(c).iter().any(|k| k[1..] == cat))
            } else if is(kind, "pattern") {
                Box::new(move |c| {
                    crate::engine::glob::matches(&value, c.full_name.as_bytes(), true)
                })
            } else {
                return Err(CmdError::Syntax);
            }
        }
        _ => return Err(CmdError::Syntax),
    };
    let mut names = Vec::new();
    for c in top_level() {
        for c in std::iter::once(c).chain(subs_of(c)) {
            if keep(c) {
                names.push(c.full_name.as_str());
            }
        }
    }
    ctx.out.array(names.len());
    for n in names {
        ctx.out.bulk(n.as_bytes());
    }
    Ok(())
}

/// Commands whose keys are all optional (a key count of 0 is valid).
const NO_MANDATORY_KEYS: &[&str] = &[
    "eval",
    "evalsha",
    "eval_ro",
    "evalsha_ro",
    "fcall",
    "fcall_ro",
];

fn getkeys(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let args = &a[2..];
    let (_, idx) = keys_of(args)?;
    ctx.out.array(idx.len());
    for i in idx {
        ctx.out.bulk(args[i]);
    }
    Ok(())
}

/// COMMAND GETKEYSANDFLAGS: GETKEYS's keys, each with its flags
/// ([`key_flags`]) as a set.
fn getkeysandflags(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let args = &a[2..];
    let (cmd, idx) = keys_of(args)?;
    ctx.out.array(idx.len());
    for i in idx {
        ctx.out.array(2);
        ctx.out.bulk(args[i]);
        let flags = key_flags(cmd, args, i);
        ctx.out.set(flags.len());
        for f in flags {
            ctx.out.simple(f.as_bytes());
        }
    }
    Ok(())
}

/// The flags of the key at `args[i]` of `cmd`: for the commands whose key
/// specs cannot tell (flags that depend on the arguments, keys at
/// positions the specs leave unknown or incomplete), what Redis's own key
/// finders say; otherwise the flags of the first key spec (COMMAND INFO's)
/// that covers position `i`; for a command without specs, COMMAND INFO's
/// single one.
fn key_flags(cmd: &Command, args: &[&[u8]], i: usize) -> &'static [&'static str] {
    const RO_ACCESS: &[&str] = &["RO", "access"];
    const RW_ACCESS_UPDATE: &[&str] = &["RW", "access", "update"];
    match cmd.full_name.as_str() {
        // GET makes SET read the old value.
        "set" if args[3..].iter().any(|a| is(a, "get")) => RW_ACCESS_UPDATE,
        "set" => &["OW", "update"],
        "bitfield" if crate::commands::acl::bitfield_only_reads(args) => RO_ACCESS,
        "bitfield" => RW_ACCESS_UPDATE,
        "migrate" => &["RW", "access", "delete"],
        // The key sorted, then STORE's.
        "sort" if i != 1 => &["OW", "update"],
        "sort" | "sort_ro" => RO_ACCESS,
        name => match syntax::key_specs(name) {
            Some(specs) => specs
                .iter()
                .find(|s| spec_covers(s, args, i))
                .or(specs.first())
                .map_or(&[], |s| &s.flags[..]),
            None if cmd.spec.has(flags::WRITE) => &["RW", "update"],
            None => RO_ACCESS,
        },
    }
}

/// Whether key spec `s` names `args[i]`.
fn spec_covers(s: &KeySpecDoc, args: &[&[u8]], i: usize) -> bool {
    let i = i as i64;
    spec_range(s, args)
        .is_some_and(|(first, last, step)| (first..=last).contains(&i) && (i - first) % step == 0)
}

/// The positions key spec `s` names in `args`: the first, the last and the
/// step; None for a spec with unknown positions, a key count that is not
/// one, or keys past the arguments.
fn spec_range(s: &KeySpecDoc, args: &[&[u8]]) -> Option<(i64, i64, i64)> {
    let argc = args.len() as i64;
    let start = match s.begin {
        BeginSearch::Index(n) => n,
        BeginSearch::Keyword(word, from) => {
            let at = |j: &i64| is(args[*j as usize], word);
            let found = if from >= 0 {
                (from..argc).find(at)
            } else {
                (1..=argc + from).rev().find(at)
            };
            found? + 1
        }
        BeginSearch::Unknown => return None,
    };
    let (first, last, step) = match s.find {
        FindKeys::Range(last, step, _) if last >= 0 => (start, start + last, step),
        FindKeys::Range(last, step, 0) => (start, argc + last, step),
        FindKeys::Range(last, step, limit) => (start, start + (argc - start) / limit + last, step),
        FindKeys::Keynum(at, firstkey, step) => {
            let n = args
                .get(usize::try_from(start + at).ok()?)
                .and_then(|n| std::str::from_utf8(n).ok()?.parse::<i64>().ok())
                .filter(|&n| n >= 0)?;
            let first = start + firstkey;
            (first, first + (n - 1) * step, step)
        }
        FindKeys::Unknown => return None,
    };
    (step > 0 && first >= 1 && last < argc).then_some((first, last, step))
}

/// GETKEYS's checks and key positions for the command `args` names.
fn keys_of<'t>(args: &[&[u8]]) -> Result<(&'t Command, SmallVec<[usize; 4]>), CmdError> {
    let t = table();
    let cmd = match t.lookup(args) {
        super::super::table::Lookup::Found(c) => c,
        // A container named alone or with an unknown subcommand: Redis
        // looks up the container itself, which has no keys.
        super::super::table::Lookup::UnknownSub(c) | super::super::table::Lookup::MissingSub(c) => {
            c
        }
        super::super::table::Lookup::Unknown => {
            return Err(CmdError::err("Invalid command specified"))
        }
    };
    // Scripts lock the whole keyspace; their keys are where their key
    // specs say (none when the key count is not one, or runs past the
    // arguments). So are XREAD's and XREADGROUP's, whose spec takes half the
    // arguments after STREAMS: Redis answers from it even when the IDs do
    // not pair up with the keys (`XREAD STREAMS a b 0` names `a`), where
    // the command itself would refuse the arguments.
    let documented = syntax::key_specs(&cmd.full_name).filter(|specs| {
        matches!(cmd.spec.keys, KeySpec::All)
            || specs
                .iter()
                .any(|s| matches!(s.find, FindKeys::Range(_, _, limit) if limit > 0))
    });
    if (matches!(cmd.spec.keys, KeySpec::None | KeySpec::All) && documented.is_none())
        || cmd.spec.keys_are_channels()
    {
        return Err(CmdError::err("The command has no key arguments"));
    }
    if !cmd.spec.arity_ok(args.len()) {
        return Err(CmdError::err(
            "Invalid number of arguments specified for command",
        ));
    }
    let idx = match documented {
        Some(specs) => specs
            .iter()
            .filter_map(|s| spec_range(s, args))
            .flat_map(|(first, last, step)| (first..=last).step_by(step as usize))
            .map(|i| i as usize)
            .collect(),
        None => cmd.spec.key_indexes(args),
    };
    if idx.is_empty() && !NO_MANDATORY_KEYS.contains(&cmd.spec.name) {
        return Err(CmdError::err("Invalid arguments specified for command"));
    }
    Ok((cmd, idx))
}

fn command_help(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    ctx.out.help(
        "COMMAND",
        &[
            "(no subcommand)",
            "    Return details about all Redis commands.",
            "COUNT",
            "    Return the total number of commands in this Redis server.",
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full Redis command.",
        ],
    );
    Ok(())
}

/// The flags COMMAND INFO reports for a command: the table's, except for
/// the few commands whose table flags steer dispatch differently from
/// Redis's (which rules it enforces elsewhere, or not yet): those report
/// redis-server 7.0's set, and dispatch keeps reading the table's.
fn reported_flags(full_name: &str, table_flags: u32) -> u32 {
    use flags::{LOADING, MAY_REPLICATE, NOSCRIPT, STALE};
    // (command, flags added, flags removed). The table's bits are what
    // dispatch enforces today: ECHO refused while loading and on a stale
    // replica, PING and SCRIPT EXISTS answered on a stale replica, QUIT
    // not refused in scripts by the NOSCRIPT check, scripts' writes
    // propagated through the MAY_REPLICATE bit.
    const DIFFER: &[(&str, u32, u32)] = &[
        ("echo", LOADING | STALE, 0),
        ("ping", 0, STALE),
        ("quit", NOSCRIPT, 0),
        ("script|exists", 0, STALE),
        ("eval", 0, MAY_REPLICATE),
        ("evalsha", 0, MAY_REPLICATE),
        ("fcall", 0, MAY_REPLICATE),
    ];
    match DIFFER.iter().find(|(n, _, _)| *n == full_name) {
        Some(&(_, add, remove)) => (table_flags | add) & !remove,
        None => table_flags,
    }
}

/// Flag names as COMMAND INFO lists them: the reported flags
/// ([`reported_flags`]), with the ones only COMMAND INFO shows
/// (`syntax::extra_flags`) just before `no_multi` and `movablekeys` just
/// before `allow_busy`, in Redis's order.
fn flag_names(c: &Command) -> Vec<&'static str> {
    let spec = c.spec;
    let reported = reported_flags(&c.full_name, spec.flags);
    let movable = match syntax::key_specs(&c.full_name) {
        Some(specs) => syntax::legacy_range(specs).1,
        None => matches!(spec.keys, KeySpec::Find(_)),
    };
    let mut v = Vec::new();
    for &(bit, name) in flags::NAMES {
        if bit == flags::NO_MULTI {
            v.extend(syntax::extra_flags(&c.full_name));
        }
        if bit == flags::ALLOW_BUSY && movable {
            v.push("movablekeys");
        }
        if reported & bit != 0 {
            v.push(name);
        }
    }
    v
}

/// A command's ACL categories with their `@`, in COMMAND INFO's order.
fn acl_categories(c: &Command) -> Vec<String> {
    category::INFO_ORDER
        .iter()
        .filter(|&&bit| c.categories & bit != 0)
        .map(|&bit| format!("@{}", category::name(bit)))
        .collect()
}

/// The legacy (first key, last key, step) triple: from the key specs
/// where the syntax table has them, else from the command table.
fn key_range(c: &Command) -> (i64, i64, i64) {
    if let Some(specs) = syntax::key_specs(&c.full_name) {
        return syntax::legacy_range(specs).0;
    }
    match c.spec.keys {
        KeySpec::Range { first, last, step } => (first as i64, last as i64, step as i64),
        _ => (0, 0, 0),
    }
}

/// One COMMAND INFO entry.
fn write_info(out: &mut Reply, c: &Command) {
    let spec = c.spec;
    out.array(10);
    out.bulk(c.full_name.as_bytes());
    out.int(spec.arity as i64);
    let names = flag_names(c);
    out.set(names.len());
    for n in names {
        out.simple(n.as_bytes());
    }
    let (first, last, step) = key_range(c);
    out.int(first);
    out.int(last);
    out.int(step);
    let cats = acl_categories(c);
    out.set(cats.len());
    for cat in cats {
        out.simple(cat.as_bytes());
    }
    let tips = syntax::tips(&c.full_name);
    out.set(tips.len());
    for t in tips {
        out.bulk(t.as_bytes());
    }
    match syntax::key_specs(&c.full_name) {
        Some(specs) => write_key_spec_docs(out, specs),
        None => write_key_specs(out, spec),
    }
    let subs = subs_of(c);
    if subs.is_empty() {
        out.set(0);
    } else {
        out.array(subs.len());
        for s in subs {
            write_info(out, s);
        }
    }
}

fn write_key_specs(out: &mut Reply, spec: &CommandSpec) {
    let access: &[&str] = if spec.keys_are_channels() {
        &["not_key"]
    } else if spec.has(flags::WRITE) {
        &["RW", "update"]
    } else {
        &["RO", "access"]
    };
    let write_flags = |out: &mut Reply| {
        out.bulk(b"flags");
        out.set(access.len());
        for f in access {
            out.simple(f.as_bytes());
        }
    };
    match spec.keys {
        KeySpec::None | KeySpec::All => out.set(0),
        KeySpec::Range { first, last, step } => {
            out.set(1);
            out.map(3);
            write_flags(out);
            out.bulk(b"begin_search");
            out.map(2);
            out.bulk(b"type");
            out.bulk(b"index");
            out.bulk(b"spec");
            out.map(1);
            out.bulk(b"index");
            out.int(first as i64);
            out.bulk(b"find_keys");
            out.map(2);
            out.bulk(b"type");
            out.bulk(b"range");
            out.bulk(b"spec");
            out.map(3);
            out.bulk(b"lastkey");
            out.int(if last < 0 { last } else { last - first } as i64);
            out.bulk(b"keystep");
            out.int(step as i64);
            out.bulk(b"limit");
            out.int(0);
        }
        KeySpec::Find(_) => {
            out.set(1);
            out.map(3);
            write_flags(out);
            for part in ["begin_search", "find_keys"] {
                out.bulk(part.as_bytes());
                out.map(2);
                out.bulk(b"type");
                out.bulk(b"unknown");
                out.bulk(b"spec");
                out.map(0);
            }
        }
    }
}

/// Key specs from the syntax table, fields in Redis's order.
fn write_key_spec_docs(out: &mut Reply, specs: &[KeySpecDoc]) {
    out.set(specs.len());
    for k in specs {
        out.map(3 + usize::from(k.notes.is_some()));
        if let Some(n) = k.notes {
            out.bulk(b"notes");
            out.bulk(n.as_bytes());
        }
        out.bulk(b"flags");
        out.set(k.flags.len());
        for f in &k.flags {
            out.simple(f.as_bytes());
        }
        out.bulk(b"begin_search");
        out.map(2);
        out.bulk(b"type");
        match k.begin {
            BeginSearch::Index(i) => {
                out.bulk(b"index");
                out.bulk(b"spec");
                out.map(1);
                out.bulk(b"index");
                out.int(i);
            }
            BeginSearch::Keyword(word, from) => {
                out.bulk(b"keyword");
                out.bulk(b"spec");
                out.map(2);
                out.bulk(b"keyword");
                out.bulk(word.as_bytes());
                out.bulk(b"startfrom");
                out.int(from);
            }
            BeginSearch::Unknown => {
                out.bulk(b"unknown");
                out.bulk(b"spec");
                out.map(0);
            }
        }
        out.bulk(b"find_keys");
        out.map(2);
        out.bulk(b"type");
        let (kind, fields) = match k.find {
            FindKeys::Range(a, b, c) => ("range", [("lastkey", a), ("keystep", b), ("limit", c)]),
            FindKeys::Keynum(a, b, c) => (
                "keynum",
                [("keynumidx", a), ("firstkey", b), ("keystep", c)],
            ),
            FindKeys::Unknown => ("unknown", [("", 0); 3]),
        };
        out.bulk(kind.as_bytes());
        out.bulk(b"spec");
        if kind == "unknown" {
            out.map(0);
        } else {
            out.map(3);
            for (name, value) in fields {
                out.bulk(name.as_bytes());
                out.int(value);
            }
        }
    }
}

/// One COMMAND DOCS entry (the value under the command's name).
fn write_docs(out: &mut Reply, c: &Command) {
    let spec = c.spec;
    let subs = subs_of(c);
    // A command without a complexity (MONITOR) has no such field.
    let has_complexity = !spec.complexity.is_empty();
    let args = syntax::arguments(&c.full_name);
    out.map(
        3 + usize::from(has_complexity)
            + usize::from(args.is_some())
            + usize::from(!subs.is_empty()),
    );
    for (k, v) in [
        ("summary", spec.summary),
        ("since", spec.since),
        ("group", spec.group),
        ("complexity", spec.complexity),
    ] {
        if !v.is_empty() || k != "complexity" {
            out.bulk(k.as_bytes());
            out.bulk(v.as_bytes());
        }
    }
    if let Some(args) = args {
        out.bulk(b"arguments");
        write_args(out, args);
    }
    if !subs.is_empty() {
        out.bulk(b"subcommands");
        out.map(subs.len());
        for s in subs {
            out.bulk(s.full_name.as_bytes());
            write_docs(out, s);
        }
    }
}

/// A COMMAND DOCS argument list: each argument a map, its fields in
/// Redis's order.
fn write_args(out: &mut Reply, args: &[Arg]) {
    out.array(args.len());
    for a in args {
        let flags: Vec<&str> = a.flag_names().collect();
        let fields = 2
            + usize::from(a.key_spec_index.is_some())
            + usize::from(a.token.is_some())
            + usize::from(a.since.is_some())
            + usize::from(a.deprecated_since.is_some())
            + usize::from(!flags.is_empty())
            + usize::from(!a.args.is_empty());
        out.map(fields);
        out.bulk(b"name");
        out.bulk(a.name.as_bytes());
        out.bulk(b"type");
        out.bulk(a.kind.name().as_bytes());
        if let Some(i) = a.key_spec_index {
            out.bulk(b"key_spec_index");
            out.int(i64::from(i));
        }
        for (field, value) in [
            ("token", a.token),
            ("since", a.since),
            ("deprecated_since", a.deprecated_since),
        ] {
            if let Some(v) = value {
                out.bulk(field.as_bytes());
                out.bulk(v.as_bytes());
            }
        }
        if !flags.is_empty() {
            out.bulk(b"flags");
            out.set(flags.len());
            for f in flags {
                out.simple(f.as_bytes());
            }
        }
        if !a.args.is_empty() {
            out.bulk(b"arguments");
            write_args(out, &a.args);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_follow_flags_and_group() {
        let get = table().get(b"dbsize");
        let cats = get.map(acl_categories).unwrap_or_default();
        assert_eq!(cats, vec!["@keyspace", "@read", "@fast"]);
        let flush = table().get(b"flushall");
        assert_eq!(
            flush.map(acl_categories).unwrap_or_default(),
            vec!["@keyspace", "@write", "@slow", "@dangerous"]
        );
        let top = table().get(b"lb.submit");
        assert!(top
            .map(acl_categories)
            .unwrap_or_default()
            .contains(&"@leaderboard".to_string()));
    }

    /// The length of the one RESP2/RESP3 frame at the start of `b`.
    /// (redis-protocol's decoder refuses sets of maps, which key specs are.)
    fn frame_len(b: &[u8]) -> Option<usize> {
        let eol = b.windows(2).position(|w| w == b"\r\n")?;
        let head = std::str::from_utf8(b.get(1..eol)?).ok()?;
        let after = eol + 2;
        let items = |n: usize, b: &[u8]| {
            let mut at = after;
            for _ in 0..n {
                at += frame_len(b.get(at..)?)?;
            }
            Some(at)
        };
        match b.first()? {
            b'+' | b'-' | b':' | b',' | b'#' | b'_' => Some(after),
            b'$' | b'=' => {
                let n: i64 = head.parse().ok()?;
                if n < 0 {
                    return Some(after);
                }
                let end = after + n as usize;
                (b.get(end..end + 2)? == b"\r\n").then_some(end + 2)
            }
            b'*' | b'~' => items(head.parse().ok()?, b),
            b'%' => items(2 * head.parse::<usize>().ok()?, b),
            _ => None,
        }
    }

    #[test]
    fn every_command_writes_valid_info_and_docs() {
        for resp3 in [false, true] {
            let mut out = Reply::new(resp3);
            for c in top_level() {
                write_info(&mut out, c);
                write_docs(&mut out, c);
            }
            let mut rest = &out.buf[..];
            let mut n = 0;
            while !rest.is_empty() {
                let used = frame_len(rest).unwrap_or(0);
                assert!(used > 0, "invalid frame after {n} frames");
                if !resp3 {
                    // An independent decoder agrees in RESP2.
                    let decoded = redis_protocol::resp2::decode::decode(rest);
                    assert_eq!(decoded.ok().flatten().map(|(_, u)| u), Some(used));
                }
                rest = &rest[used..];
                n += 1;
            }
            assert_eq!(n, 2 * table().len());
        }
    }
}
