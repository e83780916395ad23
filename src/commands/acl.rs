//! ACL: the ACL command and its subcommands, and the permission check the
//! dispatcher runs before every command (command, keys with read or write
//! access, Pub/Sub channels), with its NOPERM lines and ACL LOG entries.
//!
//! Users and their rules live in `state::acl`; this family hands that
//! module the command table as a [`Catalog`].

use std::sync::{Arc, OnceLock};

use smallvec::SmallVec;

use super::args::{is, text};
use super::table::{flags::*, table, Command, CommandSpec, KeySpec};
use super::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::state::acl::{
    category, genpass, Acl, Catalog, CatalogEntry, Denied, KeyAccess, LogEntry, Request, User,
};
use crate::state::client::ClientState;
use crate::state::{unix_ms, Server};

const fn sub(
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: super::table::Handler,
    summary: &'static str,
) -> CommandSpec {
    CommandSpec {
        group: "server",
        summary,
        since: "6.0.0",
        ..CommandSpec::new(name, arity, flags, KeySpec::None, handler)
    }
}

const A: u32 = ADMIN | NOSCRIPT | LOADING | STALE;
const N: u32 = NOSCRIPT | LOADING | STALE;

const SUBCOMMANDS: &[CommandSpec] = &[
    sub(
        "cat",
        -2,
        N,
        cat,
        "List the ACL categories or the commands inside a category",
    ),
    sub(
        "deluser",
        -3,
        A,
        deluser,
        "Remove the specified ACL users and the associated rules",
    ),
    sub(
        "dryrun",
        -4,
        A,
        dryrun,
        "Returns whether the user can execute the given command without executing the command.",
    ),
    sub(
        "genpass",
        -2,
        N,
        genpass_cmd,
        "Generate a pseudorandom secure password to use for ACL users",
    ),
    sub(
        "getuser",
        3,
        A,
        getuser,
        "Get the rules for a specific ACL user",
    ),
    sub(
        "help",
        2,
        LOADING | STALE,
        help,
        "Show helpful text about the different subcommands",
    ),
    sub(
        "list",
        2,
        A,
        list,
        "List the current ACL rules in ACL config file format",
    ),
    sub(
        "load",
        2,
        A,
        load,
        "Reload the ACLs from the configured ACL file",
    ),
    sub(
        "log",
        -2,
        A,
        log,
        "List latest events denied because of ACLs in place",
    ),
    sub(
        "save",
        2,
        A,
        save,
        "Save the current ACL rules in the configured ACL file",
    ),
    sub(
        "setuser",
        -3,
        A,
        setuser,
        "Modify or create the rules for a specific ACL user",
    ),
    sub(
        "users",
        2,
        A,
        users,
        "List the username of all the configured ACL rules",
    ),
    sub(
        "whoami",
        2,
        N,
        whoami,
        "Return the name of the user associated to the current connection",
    ),
];

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[CommandSpec {
    group: "server",
    summary: "A container for Access List Control commands ",
    since: "6.0.0",
    complexity: "Depends on subcommand.",
    subcommands: SUBCOMMANDS,
    ..CommandSpec::new("acl", -2, 0, KeySpec::None, no_subcommand)
}];

fn no_subcommand(_ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    Err(CmdError::WrongArity(text(a[0]).to_lowercase()))
}

/// The command table as ACL rules see it, built once.
pub fn catalog() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(|| {
        let t = table();
        let entries = t
            .all_slots()
            .into_iter()
            .map(|c| CatalogEntry {
                id: c.id,
                full_name: c.full_name.clone(),
                categories: c.categories,
                subs: {
                    let mut v: Vec<usize> = c.subs.values().map(|s| s.id).collect();
                    v.sort_unstable();
                    v
                },
                is_sub: c.full_name.contains('|'),
            })
            .collect();
        Catalog::new(entries)
    })
}

/// The server's users, made on first use: the `default` user (with
/// `requirepass` as its password), then the config file's `user` lines.
pub fn acl(server: &Server) -> &Acl {
    server.acl.get_or_init(|| {
        let acl = Acl::new(catalog());
        let cfg = server.config.read();
        let all = all_channels_default(&cfg);
        let mut users = vec![default_user(&cfg)];
        for line in &cfg.acl_users {
            // Bad lines were refused at start-up (`check_config_users`).
            if let Ok(u) = parse_user_line(line, all) {
                users.retain(|o| o.name != u.name);
                users.push(u);
            }
        }
        drop(cfg);
        acl.replace_all(users);
        let file = stored(server, "aclfile");
        if !file.is_empty() {
            if let Ok(users) = read_acl_file(&file, all_channels(server)) {
                acl.replace_all(users);
            }
        }
        acl
    })
}

fn default_user(cfg: &crate::state::Config) -> User {
    let mut u = User::default_user(catalog());
    if let Some(p) = &cfg.requirepass {
        u.nopass = false;
        u.passwords = vec![crate::state::acl::hash_password(p)];
    }
    u
}

/// After CONFIG SET requirepass: the default user's password follows it.
pub fn requirepass_changed(server: &Server) {
    let acl = acl(server);
    let Some(cur) = acl.user("default") else {
        return;
    };
    let mut u = (*cur).clone();
    match &server.config.read().requirepass {
        Some(p) => {
            u.nopass = false;
            u.passwords = vec![crate::state::acl::hash_password(p)];
        }
        None => {
            u.nopass = true;
            u.passwords.clear();
        }
    }
    acl.put(u);
}

fn stored(server: &Server, name: &str) -> String {
    let cfg = server.config.read();
    crate::state::config::find(name)
        .map(|p| p.value(&cfg))
        .unwrap_or_default()
}

fn all_channels_default(cfg: &crate::state::Config) -> bool {
    crate::state::config::find("acl-pubsub-default").map(|p| p.value(cfg))
        == Some("allchannels".to_string())
}

fn all_channels(server: &Server) -> bool {
    all_channels_default(&server.config.read())
}

/// Checks the config file's `user` lines and `aclfile` at start-up: the
/// error Redis prints, if any.
pub fn check_config_users(cfg: &crate::state::Config) -> Result<(), String> {
    let file = crate::state::config::find("aclfile")
        .map(|p| p.value(cfg))
        .unwrap_or_default();
    if !file.is_empty() && !cfg.acl_users.is_empty() {
        return Err("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.".into());
    }
    let all = all_channels_default(cfg);
    let mut seen = Vec::new();
    for line in &cfg.acl_users {
        let u = parse_user_line(line, all)
            .map_err(|e| format!("Error in user declaration '{line}': {e}"))?;
        if seen.contains(&u.name) {
            return Err(format!("Error in user declaration '{line}': Duplicate user found. A user can only be defined once in config files"));
        }
        seen.push(u.name);
    }
    if !file.is_empty() {
        read_acl_file(&file, all)
            .map_err(|e| format!("Aborting Redis startup because of ACL errors: {e}"))?;
    }
    Ok(())
}

/// One `name rule rule...` user description (a `user` line without `user`).
fn parse_user_line(line: &str, all_channels: bool) -> Result<User, String> {
    let words = crate::protocol::request::split_args(line.as_bytes()).ok_or("Syntax error")?;
    let (name, rules) = words.split_first().ok_or("Syntax error")?;
    let name = String::from_utf8_lossy(name).into_owned();
    let mut u = User::new(&name, all_channels);
    for rule in merge_selectors(rules)? {
        u.apply(catalog(), &rule, all_channels)
            .map_err(|e| format!("Error in applying operation '{}': {e}", text(&rule)))?;
    }
    Ok(u)
}

/// Joins the words of `(...)` selectors split on spaces back into one
/// rule each (Redis's `ACLMergeSelectorArguments`).
fn merge_selectors(rules: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, String> {
    let mut out = Vec::new();
    let mut open: Option<Vec<u8>> = None;
    for r in rules {
        match open.as_mut() {
            Some(sel) => {
                sel.push(b' ');
                sel.extend_from_slice(r);
                if r.last() == Some(&b')') {
                    out.extend(open.take());
                }
            }
            None if r.first() == Some(&b'(') && r.last() != Some(&b')') => open = Some(r.clone()),
            None => out.push(r.clone()),
        }
    }
    if let Some(sel) = open {
        return Err(format!(
            "Unmatched parenthesis in acl selector starting at '{}'.",
            text(&sel)
        ));
    }
    Ok(out)
}

/// The users of an aclfile, or Redis's error: every bad line and rule
/// (`file:line: ...`), then the warning that nothing changed, as Redis's
/// `ACLLoadFromFile` lists them.
fn read_acl_file(path: &str, all_channels: bool) -> Result<Vec<User>, String> {
    let body = std::fs::read_to_string(path)
        .map_err(|e| format!("Error loading ACLs, opening file '{path}': {e}"))?;
    let mut users: Vec<User> = Vec::new();
    let mut errors = String::new();
    for (no, line) in body.lines().enumerate() {
        let n = no + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some(words) = crate::protocol::request::split_args(line.as_bytes()) else {
            errors.push_str(&format!("{path}:{n}: unbalanced quotes in acl line. "));
            continue;
        };
        let (Some(b"user"), Some(name)) = (words.first().map(Vec::as_slice), words.get(1)) else {
            errors.push_str(&format!(
                "{path}:{n} should start with user keyword followed by the username. "
            ));
            continue;
        };
        let name = String::from_utf8_lossy(name).into_owned();
        if users.iter().any(|o| o.name == name) {
            errors.push_str(&format!(
                "WARNING: Duplicate user '{name}' found on line {n}. "
            ));
            continue;
        }
        let mut u = User::new(&name, all_channels);
        match merge_selectors(&words[2..]) {
            Ok(rules) => {
                for rule in rules {
                    if let Err(e) = u.apply(catalog(), &rule, all_channels) {
                        errors.push_str(&format!(
                            "{path}:{n}: Error in applying operation '{}': {e}. ",
                            text(&rule)
                        ));
                    }
                }
            }
            Err(e) => errors.push_str(&format!("{path}:{n}: {e} ")),
        }
        users.push(u);
    }
    if !errors.is_empty() {
        errors.push_str(
            "WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
        );
        return Err(errors);
    }
    if !users.iter().any(|u| u.name == "default") {
        let mut d = User::default_user(catalog());
        d.root.allchannels = true;
        users.push(d);
    }
    Ok(users)
}

/// Where a command is checked from, for ACL LOG.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Context {
    Toplevel,
    Multi,
    Lua,
}

impl Context {
    fn name(self) -> &'static str {
        match self {
            Context::Toplevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

/// The client's user's rules, re-read when any user changed (the ACL
/// version moved): a borrow of the connection's cached copy, so that the
/// check costs no reference count per command.
fn refresh<'c>(server: &Server, client: &'c mut ClientState) -> &'c User {
    let acl = acl(server);
    let v = acl.version();
    let stale = client.acl_user.as_ref().is_none_or(|(_, at)| *at != v);
    if stale {
        let name = client.info.user.lock().clone();
        let u = acl
            .user(&name)
            .unwrap_or_else(|| Arc::new(User::new(&name, false)));
        client.acl_user = Some((u, v));
    }
    match &client.acl_user {
        Some((u, _)) => u,
        None => no_rights(),
    }
}

/// A user with no rights (never reached: `refresh` has just cached one).
fn no_rights() -> &'static User {
    static NOBODY: OnceLock<User> = OnceLock::new();
    NOBODY.get_or_init(|| User::new("", false))
}

/// Whether this client's user may run `args`; a refusal is logged in
/// ACL LOG.
fn allowed(
    server: &Server,
    client: &mut ClientState,
    cmd: &Command,
    args: &[&[u8]],
    context: Context,
) -> Result<(), Denied> {
    let user = refresh(server, client);
    if user.unrestricted() {
        return Ok(());
    }
    // Commands every connection may run before authenticating (AUTH,
    // HELLO, RESET) are not checked against the user's commands, as in
    // Redis.
    if cmd.spec.has(crate::commands::table::flags::NO_AUTH) {
        return Ok(());
    }
    if root_allows(user, cmd, args) {
        return Ok(());
    }
    let Err(d) = user.check(&request(cmd, args)) else {
        return Ok(());
    };
    let username = user.name.clone();
    let (reason, object) = match d {
        Denied::Command => ("command", cmd.full_name.clone()),
        Denied::Key(p) => ("key", text(args.get(p).copied().unwrap_or(b""))),
        Denied::Channel(p) => ("channel", text(args.get(p).copied().unwrap_or(b""))),
    };
    let current = if context == Context::Lua {
        // The script's command, not the one it calls.
        String::new()
    } else {
        cmd.full_name.clone()
    };
    add_log(server, client, reason, context, object, username, &current);
    Err(d)
}

/// The dispatcher's check (and EXEC's, for each queued command): Redis's
/// NOPERM line when this client's user may not run `args`.
pub fn check(
    server: &Server,
    client: &mut ClientState,
    cmd: &Command,
    args: &[&[u8]],
    context: Context,
) -> Result<(), CmdError> {
    allowed(server, client, cmd, args, context).map_err(|d| {
        CmdError::line(match d {
            Denied::Command => format!(
                "NOPERM this user has no permissions to run the '{}' command",
                cmd.full_name
            ),
            Denied::Key(_) => {
                "NOPERM this user has no permissions to access one of the keys used as arguments"
                    .into()
            }
            Denied::Channel(_) => {
                "NOPERM this user has no permissions to access one of the channels used as arguments".into()
            }
        })
    })
}

/// The check for `redis.call` (the caller's permissions), with the error
/// a script sees.
pub fn check_script(
    server: &Server,
    client: &mut ClientState,
    cmd: &Command,
    args: &[&[u8]],
) -> Result<(), &'static [u8]> {
    allowed(server, client, cmd, args, Context::Lua).map_err(|d| match d {
        Denied::Command => {
            &b"ERR The user executing the script can't run this command or subcommand"[..]
        }
        Denied::Key(_) => b"ERR The user executing the script can't access at least one of the keys mentioned in the command arguments",
        Denied::Channel(_) => b"ERR The user executing the script can't publish to the channel mentioned in the command",
    })
}

fn add_log(
    server: &Server,
    client: &ClientState,
    reason: &'static str,
    context: Context,
    object: String,
    username: String,
    current: &str,
) {
    let max = stored(server, "acllog-max-len").parse().unwrap_or(128);
    let client_info = super::server::client_info_line(&client.info, current);
    acl(server).log_denial(
        LogEntry {
            count: 1,
            reason,
            context: context.name(),
            object,
            username,
            created_ms: unix_ms(),
            client_info,
        },
        max,
    );
}

/// A failed AUTH, for ACL LOG.
pub fn log_auth_failure(server: &Server, client: &ClientState, username: &[u8]) {
    let ctx = if client.multi.is_some() {
        Context::Multi
    } else {
        Context::Toplevel
    };
    add_log(
        server,
        client,
        "auth",
        ctx,
        "AUTH".into(),
        text(username),
        "auth",
    );
}

/// The common case decided without building a [`Request`]: the root
/// rules allow the command by its bit and give every key the access it
/// needs, and the command has no channels. Exact when it says yes (the
/// root allowing is enough, as in [`User::check`]); a no goes to the full
/// check, which also tries the selectors and finds the reason.
#[inline]
fn root_allows(user: &User, cmd: &Command, args: &[&[u8]]) -> bool {
    let root = &user.root;
    let spec = cmd.spec;
    if !root.command_allowed(cmd.id) || spec.keys_are_channels() {
        return false;
    }
    let rule = match key_rules().get(cmd.id) {
        Some(
            r @ (KeyRule::Each(_) | KeyRule::FirstThenRest(..) | KeyRule::Set | KeyRule::Bitfield),
        ) => *r,
        _ => return false,
    };
    if root.allkeys {
        return true;
    }
    match spec.keys {
        KeySpec::None | KeySpec::All => true,
        // The usual one key (or the first few) without collecting them.
        KeySpec::Range { first, last, step } if first > 0 && step > 0 => {
            let last = if last < 0 {
                args.len() as i64 + i64::from(last)
            } else {
                i64::from(last)
            };
            let mut i = first as usize;
            let mut n = 0;
            while (i as i64) <= last && i < args.len() {
                if !root.key_allowed(args[i], rule.access(args, n)) {
                    return false;
                }
                i += step as usize;
                n += 1;
            }
            true
        }
        _ => spec
            .key_indexes(args)
            .into_iter()
            .enumerate()
            .all(|(n, i)| root.key_allowed(args[i], rule.access(args, n))),
    }
}

/// What a command does with its keys and channels, for the check.
fn request<'a>(cmd: &Command, args: &[&'a [u8]]) -> Request<'a> {
    let spec = cmd.spec;
    let rule = key_rules().get(cmd.id).copied().unwrap_or(KeyRule::Each(R));
    let mut keys = SmallVec::new();
    let mut channels = SmallVec::new();
    let mut channel_patterns = false;
    if spec.keys_are_channels() {
        for i in spec.key_indexes(args) {
            channels.push((i, args[i]));
        }
    } else if let KeyRule::Script(access) = rule {
        // The table locks every key for a script (`KeySpec::All`); the
        // check reads the declared keys, as Redis's `evalGetKeys` does.
        for i in script_keys(args) {
            keys.push((i, args[i], access));
        }
    } else {
        for (n, i) in spec.key_indexes(args).into_iter().enumerate() {
            keys.push((i, args[i], rule.access(args, n)));
        }
    }
    match rule {
        KeyRule::Publish => channels.push((1, args.get(1).copied().unwrap_or(b""))),
        KeyRule::Subscribe { patterns } => {
            channel_patterns = patterns;
            for (i, a) in args.iter().enumerate().skip(1) {
                channels.push((i, *a));
            }
        }
        _ => {}
    }
    Request {
        id: cmd.id,
        first_arg: args.get(1).copied(),
        keys,
        channels,
        channel_patterns,
    }
}

const R: KeyAccess = KeyAccess::READ;
const W: KeyAccess = KeyAccess::WRITE;
const RW: KeyAccess = KeyAccess::READ_WRITE;
const NONE: KeyAccess = KeyAccess::NONE;

/// What a command needs of its keys (and which arguments are channels),
/// as Redis 7.0's key specs give it: a key flagged ACCESS needs a read
/// pattern, INSERT, DELETE or UPDATE a write pattern, both both, neither
/// any. Decided once per command (`key_rules`), so that the check does not
/// compare names on every call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KeyRule {
    /// Every key alike.
    Each(KeyAccess),
    /// The first key, then every other.
    FirstThenRest(KeyAccess, KeyAccess),
    /// SET: read and write with GET, write without.
    Set,
    /// BITFIELD: read with GETs only, read and write otherwise.
    Bitfield,
    /// EVAL, FCALL and their kin: `numkeys` declared keys, alike.
    Script(KeyAccess),
    /// PUBLISH: no keys, argument 1 a channel.
    Publish,
    /// SUBSCRIBE, PSUBSCRIBE: every argument a channel (or a pattern).
    Subscribe { patterns: bool },
}

impl KeyRule {
    /// The access the `n`th key of `args` needs.
    fn access(self, args: &[&[u8]], n: usize) -> KeyAccess {
        match self {
            KeyRule::Each(a) | KeyRule::Script(a) => a,
            KeyRule::FirstThenRest(first, rest) => {
                if n == 0 {
                    first
                } else {
                    rest
                }
            }
            KeyRule::Set => {
                if args.iter().skip(3).any(|a| is(a, "get")) {
                    RW
                } else {
                    W
                }
            }
            KeyRule::Bitfield => {
                if bitfield_only_reads(args) {
                    R
                } else {
                    RW
                }
            }
            KeyRule::Publish | KeyRule::Subscribe { .. } => NONE,
        }
    }
}

/// Every command's `KeyRule`, by command id, built once.
fn key_rules() -> &'static [KeyRule] {
    static RULES: OnceLock<Vec<KeyRule>> = OnceLock::new();
    RULES.get_or_init(|| {
        let slots = table().all_slots();
        let mut rules = vec![KeyRule::Each(R); slots.iter().map(|c| c.id + 1).max().unwrap_or(0)];
        for c in slots {
            rules[c.id] = key_rule(&c.full_name, c.spec.has(WRITE));
        }
        rules
    })
}

/// A command's `KeyRule`, from its name (`write`: the command is flagged
/// write): read-only commands read, writes write; the exceptions below.
fn key_rule(name: &str, write: bool) -> KeyRule {
    use KeyRule::{Each, FirstThenRest};
    match name {
        // Only the key's existence, type or size: any pattern will do.
        "exists" | "hexists" | "hlen" | "hstrlen" | "llen" | "scard" | "sismember" | "strlen"
        | "touch" | "type" | "watch" | "xlen" | "zcard" | "memory|usage" => Each(NONE),
        _ if name.starts_with("object|") => Each(NONE),
        "bitfield" => KeyRule::Bitfield,
        "set" => KeyRule::Set,
        "eval" | "evalsha" | "fcall" => KeyRule::Script(RW),
        "eval_ro" | "evalsha_ro" | "fcall_ro" => KeyRule::Script(R),
        "publish" => KeyRule::Publish,
        "subscribe" => KeyRule::Subscribe { patterns: false },
        "psubscribe" => KeyRule::Subscribe { patterns: true },
        // Writes that read the value first.
        "blmpop" | "blpop" | "brpop" | "bzmpop" | "bzpopmax" | "bzpopmin" | "decr" | "decrby"
        | "getdel" | "getex" | "getset" | "hincrby" | "hincrbyfloat" | "incr" | "incrby"
        | "incrbyfloat" | "lmpop" | "lpop" | "migrate" | "move" | "rpop" | "setbit" | "spop"
        | "zincrby" | "zmpop" | "zpopmax" | "zpopmin" => Each(RW),
        // A source read and emptied, a destination written.
        "blmove" | "brpoplpush" | "lmove" | "rename" | "renamenx" | "rpoplpush" | "smove" => {
            FirstThenRest(RW, W)
        }
        "copy" | "sort" | "georadius" | "georadiusbymember" => FirstThenRest(R, W),
        // A destination first, then sources.
        "bitop" | "geosearchstore" | "sdiffstore" | "sinterstore" | "sunionstore"
        | "zdiffstore" | "zinterstore" | "zunionstore" | "zrangestore" => FirstThenRest(W, R),
        "pfmerge" => FirstThenRest(RW, R),
        "xreadgroup" | "pfdebug" => Each(R),
        _ if write => Each(W),
        _ => Each(R),
    }
}

/// The positions of a script's keys: `numkeys` at argument 2, the keys
/// after it (none when `numkeys` is not a number or runs past the end:
/// the command refuses it itself).
fn script_keys(args: &[&[u8]]) -> std::ops::Range<usize> {
    let n = args
        .get(2)
        .and_then(|a| std::str::from_utf8(a).ok())
        .and_then(|a| a.parse::<usize>().ok())
        .unwrap_or(0);
    if n == 0 || 3 + n > args.len() {
        return 0..0;
    }
    3..3 + n
}

/// Whether a BITFIELD call is GETs (and OVERFLOWs) only, as Redis's
/// `bitfieldGetKeys` parses it: such a call needs read access only; SET,
/// INCRBY or anything it cannot parse needs read and write (and COMMAND
/// GETKEYSANDFLAGS says so).
pub(crate) fn bitfield_only_reads(args: &[&[u8]]) -> bool {
    let mut i = 2;
    while i < args.len() {
        let left = args.len() - i - 1;
        if is(args[i], "get") && left >= 2 {
            i += 3;
        } else if is(args[i], "overflow") && left >= 1 {
            i += 2;
        } else {
            return false;
        }
    }
    true
}

/// Logs in as `user` with `pass` (AUTH, HELLO AUTH): the WRONGPASS error,
/// logged, when the user is unknown, off or the password wrong.
pub fn authenticate(
    server: &Server,
    client: &mut ClientState,
    user: &[u8],
    pass: &[u8],
) -> Result<(), CmdError> {
    let name = text(user);
    let ok = acl(server)
        .user(&name)
        .is_some_and(|u| u.enabled && u.password_ok(pass));
    if !ok {
        log_auth_failure(server, client, user);
        return Err(CmdError::line(
            "WRONGPASS invalid username-password pair or user is disabled.",
        ));
    }
    *client.info.user.lock() = name;
    client.acl_user = None;
    client.authenticated = true;
    Ok(())
}

/// Whether a new connection is authenticated at once: the default user is
/// on and has nopass.
pub fn default_needs_auth(server: &Server) -> bool {
    acl(server)
        .user("default")
        .is_none_or(|u| !(u.enabled && u.nopass))
}

/// Disconnects the clients authenticated as one of `names` (a user
/// deleted or changed), except the caller, as Redis does.
fn kill_clients_of(ctx: &mut Ctx, names: &[String]) {
    let me = ctx.client.id();
    for c in ctx.server.clients.iter() {
        if c.id != me && names.iter().any(|n| *n == *c.user.lock()) {
            c.kill();
        }
    }
    if names.iter().any(|n| *n == *ctx.client.info.user.lock()) {
        ctx.client.close_after_reply = true;
    }
}

/// Redis's reply to ACL CAT or LOG with too many arguments.
fn acl_syntax(sub: &[u8]) -> CmdError {
    CmdError::err(format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try ACL HELP.",
        text(sub)
    ))
}

fn cat(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    if a.len() > 3 {
        return Err(acl_syntax(a[1]));
    }
    match a.get(2) {
        None => {
            ctx.out.array(category::NAMES.len());
            for (_, n) in category::NAMES {
                ctx.out.bulk(n.as_bytes());
            }
        }
        Some(name) => {
            let bit = category::by_name(name)
                .ok_or_else(|| CmdError::err(format!("Unknown category '{}'", text(name))))?;
            let names: Vec<&str> = catalog()
                .entries
                .iter()
                .filter(|e| e.categories & bit != 0)
                .map(|e| e.full_name.as_str())
                .collect();
            ctx.out.array(names.len());
            for n in names {
                ctx.out.bulk(n.as_bytes());
            }
        }
    }
    Ok(())
}

fn whoami(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    let name = ctx.client.info.user.lock().clone();
    ctx.out.bulk(name.as_bytes());
    Ok(())
}

fn users(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    let users = acl(ctx.server).users();
    ctx.out.array(users.len());
    for u in users {
        ctx.out.bulk(u.name.as_bytes());
    }
    Ok(())
}

fn list(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    let users = acl(ctx.server).users();
    ctx.out.array(users.len());
    for u in users {
        ctx.out
            .bulk(format!("user {}", u.describe(catalog())).as_bytes());
    }
    Ok(())
}

fn setuser(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let name = text(a[2]);
    let acl = acl(ctx.server);
    let all = all_channels(ctx.server);
    let before = acl.user(&name);
    let mut u = before
        .as_deref()
        .cloned()
        .unwrap_or_else(|| User::new(&name, all));
    let rules: Vec<Vec<u8>> = a[3..].iter().map(|r| r.to_vec()).collect();
    let rules = merge_selectors(&rules).map_err(CmdError::err)?;
    for r in &rules {
        u.apply(catalog(), r, all).map_err(|e| {
            CmdError::err(format!("Error in ACL SETUSER modifier '{}': {e}", text(r)))
        })?;
    }
    // Clients of the user subscribed to a channel the new rules refuse
    // are disconnected, as Redis 7.0 does.
    if before.is_some() {
        let me = ctx.client.id();
        for (c, pattern, ch) in ctx
            .server
            .pubsub
            .subscriptions_where(|c| *c.user.lock() == name)
        {
            if !u.channel_allowed(&ch, pattern) {
                if c.id == me {
                    ctx.client.close_after_reply = true;
                } else {
                    c.kill();
                }
            }
        }
    }
    acl.put(u);
    ctx.out.ok();
    Ok(())
}

fn deluser(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let mut names = Vec::new();
    for n in &a[2..] {
        if is(n, "default") {
            return Err(CmdError::err("The 'default' user cannot be removed"));
        }
    }
    let acl = acl(ctx.server);
    for n in &a[2..] {
        let name = text(n);
        if acl.user(&name).is_some() && !names.contains(&name) {
            acl.remove(&name);
            names.push(name);
        }
    }
    kill_clients_of(ctx, &names);
    ctx.out.int(names.len() as i64);
    Ok(())
}

fn getuser(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let Some(u) = acl(ctx.server).user(&text(a[2])) else {
        ctx.out.null();
        return Ok(());
    };
    let cat = catalog();
    let out = &mut *ctx.out;
    out.map(6);
    out.bulk(b"flags");
    let flags = u.flags();
    // A set in RESP3, as Redis answers.
    out.set(flags.len());
    for f in flags {
        out.bulk(f.as_bytes());
    }
    out.bulk(b"passwords");
    out.array(u.passwords.len());
    for p in &u.passwords {
        out.bulk(p.as_bytes());
    }
    out.bulk(b"commands");
    out.bulk(u.root.commands(cat).as_bytes());
    out.bulk(b"keys");
    out.bulk(u.root.describe_keys().as_bytes());
    out.bulk(b"channels");
    out.bulk(u.root.describe_channels().as_bytes());
    out.bulk(b"selectors");
    out.array(u.selectors.len());
    for s in &u.selectors {
        out.map(3);
        out.bulk(b"commands");
        out.bulk(s.commands(cat).as_bytes());
        out.bulk(b"keys");
        out.bulk(s.describe_keys().as_bytes());
        out.bulk(b"channels");
        out.bulk(s.describe_channels().as_bytes());
    }
    Ok(())
}

fn genpass_cmd(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let bits = match a.get(2) {
        None => 256,
        Some(b) => match super::args::int(b) {
            Ok(n) if (1..=4096).contains(&n) => n as usize,
            _ => {
                return Err(CmdError::err(
                    "ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096",
                ))
            }
        },
    };
    ctx.out.bulk(genpass(bits).as_bytes());
    Ok(())
}

fn dryrun(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let name = text(a[2]);
    let Some(u) = acl(ctx.server).user(&name) else {
        return Err(CmdError::err(format!("User '{name}' not found")));
    };
    let args = &a[3..];
    let cmd = match table().lookup(args) {
        super::table::Lookup::Found(c) => c,
        _ => {
            return Err(CmdError::err(format!(
                "Command '{}' not found",
                text(args[0])
            )))
        }
    };
    if !cmd.spec.arity_ok(args.len()) {
        return Err(CmdError::err(format!(
            "wrong number of arguments for '{}' command",
            cmd.full_name
        )));
    }
    match u.check(&request(cmd, args)) {
        Ok(()) => ctx.out.ok(),
        Err(Denied::Command) => ctx.out.bulk(
            format!(
                "This user has no permissions to run the '{}' command",
                cmd.full_name
            )
            .as_bytes(),
        ),
        Err(Denied::Key(p)) => ctx.out.bulk(
            format!(
                "This user has no permissions to access the '{}' key",
                text(args.get(p).copied().unwrap_or(b""))
            )
            .as_bytes(),
        ),
        Err(Denied::Channel(p)) => ctx.out.bulk(
            format!(
                "This user has no permissions to access the '{}' channel",
                text(args.get(p).copied().unwrap_or(b""))
            )
            .as_bytes(),
        ),
    }
    Ok(())
}

fn log(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let acl = acl(ctx.server);
    let count = match a.get(2) {
        None => 10,
        Some(r) if is(r, "reset") && a.len() == 3 => {
            acl.log.lock().clear();
            ctx.out.ok();
            return Ok(());
        }
        Some(n) if a.len() == 3 => match super::args::int(n) {
            Ok(n) if n >= 0 => n as usize,
            Ok(_) => return Err(CmdError::err("value is out of range, must be positive")),
            Err(_) => return Err(CmdError::NotInteger),
        },
        _ => return Err(acl_syntax(a[1])),
    };
    let entries: Vec<LogEntry> = acl.log.lock().iter().take(count).cloned().collect();
    let now = unix_ms();
    let out = &mut *ctx.out;
    out.array(entries.len());
    for e in entries {
        out.map(7);
        out.bulk(b"count");
        out.int(e.count as i64);
        out.bulk(b"reason");
        out.bulk(e.reason.as_bytes());
        out.bulk(b"context");
        out.bulk(e.context.as_bytes());
        out.bulk(b"object");
        out.bulk(e.object.as_bytes());
        out.bulk(b"username");
        out.bulk(e.username.as_bytes());
        out.bulk(b"age-seconds");
        out.double(now.saturating_sub(e.created_ms) as f64 / 1000.0);
        out.bulk(b"client-info");
        out.bulk(e.client_info.as_bytes());
    }
    Ok(())
}

fn save(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    let file = stored(ctx.server, "aclfile");
    if file.is_empty() {
        return Err(CmdError::err(
            "This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.",
        ));
    }
    let mut body = String::new();
    for u in acl(ctx.server).users() {
        body.push_str("user ");
        body.push_str(&u.describe(catalog()));
        body.push('\n');
    }
    let tmp = format!("{file}.tmp-{}", std::process::id());
    std::fs::write(&tmp, body)
        .and_then(|_| std::fs::rename(&tmp, &file))
        .map_err(|_| CmdError::err("There was an error trying to save the ACLs. Please check the server logs for more information"))?;
    ctx.out.ok();
    Ok(())
}

fn load(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    let file = stored(ctx.server, "aclfile");
    if file.is_empty() {
        return Err(CmdError::err(
            "This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.",
        ));
    }
    let users = read_acl_file(&file, all_channels(ctx.server)).map_err(CmdError::err)?;
    let acl = acl(ctx.server);
    // Clients whose user is gone or changed are disconnected, as Redis's
    // ACL LOAD frees every client of a replaced user.
    let names: Vec<String> = acl.users().iter().map(|u| u.name.clone()).collect();
    acl.replace_all(users);
    let me = ctx.client.id();
    for c in ctx.server.clients.iter() {
        if c.id != me && names.contains(&*c.user.lock()) {
            c.kill();
        }
    }
    ctx.client
        .info
        .user
        .lock()
        .clone_from(&"default".to_string());
    ctx.out.ok();
    Ok(())
}

fn help(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    const LINES: &[&str] = &[
        "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CAT [<category>]",
        "    List all commands that belong to <category>, or all command categories",
        "    when no category is specified.",
        "DELUSER <username> [<username> ...]",
        "    Delete a list of users.",
        "DRYRUN <username> <command> [<arg> ...]",
        "    Returns whether the user can execute the given command without executing the command.",
        "GETUSER <username>",
        "    Get the user's details.",
        "GENPASS [<bits>]",
        "    Generate a secure 256-bit user password. The optional `bits` argument can",
        "    be used to specify a different size.",
        "LIST",
        "    Show users details in config file format.",
        "LOAD",
        "    Reload users from the ACL file.",
        "LOG [<count> | RESET]",
        "    Show the ACL log entries.",
        "SAVE",
        "    Save the current config to the ACL file.",
        "SETUSER <username> <attribute> [<attribute> ...]",
        "    Create or modify a user with the specified attributes.",
        "USERS",
        "    List all the registered usernames.",
        "WHOAMI",
        "    Return the current connection username.",
        "HELP",
        "    Prints this help.",
    ];
    ctx.out.array(LINES.len());
    for l in LINES {
        ctx.out.simple(l.as_bytes());
    }
    Ok(())
}
