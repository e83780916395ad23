//! Client-side caching from the command side: CLIENT TRACKING, CACHING,
//! GETREDIR and TRACKINGINFO (their arguments and error lines), and the
//! dispatcher's hooks that tell the tracking table which keys a command
//! read and changed.
//!
//! Not here: the table itself and the delivery of invalidations
//! (`state::tracking`).

use bytes::Bytes;

use super::super::args::{is, text};
use super::super::table::{flags::READONLY, Command};
use super::super::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::protocol::number::parse_i64;
use crate::protocol::Reply;
use crate::state::client::{ClientState, ReplyMode};
use crate::state::tracking::{flag, Me, Options};

/// CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN]
/// [OPTOUT] [NOLOOP].
pub fn tracking(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let o = parse_options(ctx, &a[3..])?;
    if is(a[2], "off") {
        ctx.server
            .tracking
            .disable(&ctx.client.info, &mut ctx.client.tracking);
    } else if is(a[2], "on") {
        check_options(ctx, &o)?;
        let info = ctx.client.info.clone();
        ctx.server
            .tracking
            .enable(&info, &mut ctx.client.tracking, &o);
    } else {
        return Err(CmdError::Syntax);
    }
    ctx.out.ok();
    Ok(())
}

/// Reads the options after ON / OFF; checks only what Redis checks while
/// reading them (a redirect client must exist, and be given once).
fn parse_options(ctx: &Ctx, a: &[&[u8]]) -> Result<Options, CmdError> {
    let mut o = Options::default();
    let mut i = 0;
    while i < a.len() {
        let (word, more) = (a[i], i + 1 < a.len());
        if is(word, "redirect") && more {
            i += 1;
            if o.redirect != 0 {
                return Err(CmdError::err(
                    "A client can only redirect to a single other client",
                ));
            }
            let id = parse_i64(a[i]).ok_or(CmdError::NotInteger)?;
            if id <= 0 || !ctx.server.clients.contains_key(&(id as u64)) {
                return Err(CmdError::err(
                    "The client ID you want redirect to does not exist",
                ));
            }
            o.redirect = id as u64;
        } else if is(word, "prefix") && more {
            i += 1;
            o.prefixes.push(a[i].to_vec());
        } else if is(word, "bcast") {
            o.flags |= flag::BCAST;
        } else if is(word, "optin") {
            o.flags |= flag::OPTIN;
        } else if is(word, "optout") {
            o.flags |= flag::OPTOUT;
        } else if is(word, "noloop") {
            o.flags |= flag::NOLOOP;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    Ok(o)
}

/// The checks of TRACKING ON: options that cannot go together, modes that
/// cannot change while tracking is on, overlapping prefixes.
fn check_options(ctx: &Ctx, o: &Options) -> Result<(), CmdError> {
    let new = o.flags;
    let old = ctx.client.info.tracking.get();
    let on = old & flag::ON != 0;
    if new & flag::BCAST == 0 && !o.prefixes.is_empty() {
        return Err(CmdError::err(
            "PREFIX option requires BCAST mode to be enabled",
        ));
    }
    if on && (old ^ new) & flag::BCAST != 0 {
        return Err(CmdError::err(
            "You can't switch BCAST mode on/off before disabling tracking for this client, \
             and then re-enabling it with a different mode.",
        ));
    }
    if new & flag::BCAST != 0 && new & (flag::OPTIN | flag::OPTOUT) != 0 {
        return Err(CmdError::err(
            "OPTIN and OPTOUT are not compatible with BCAST",
        ));
    }
    if new & flag::OPTIN != 0 && new & flag::OPTOUT != 0 {
        return Err(CmdError::err(
            "You can't specify both OPTIN mode and OPTOUT mode",
        ));
    }
    let switch = (new & flag::OPTIN != 0 && old & flag::OPTOUT != 0)
        || (new & flag::OPTOUT != 0 && old & flag::OPTIN != 0);
    if switch {
        return Err(CmdError::err(
            "You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, \
             and then re-enabling it with a different mode.",
        ));
    }
    if new & flag::BCAST != 0 {
        check_prefixes(ctx, &o.prefixes)?;
    }
    Ok(())
}

/// BCAST prefixes of one client must not overlap (one a prefix of the
/// other), neither with those it has nor among those given.
fn check_prefixes(ctx: &Ctx, given: &[Vec<u8>]) -> Result<(), CmdError> {
    let existing = ctx.server.tracking.prefixes_of(ctx.client.id());
    let overlap = |a: &[u8], b: &[u8]| a.starts_with(b) || b.starts_with(a);
    for (i, p) in given.iter().enumerate() {
        if let Some(e) = existing.iter().find(|e| overlap(p, e)) {
            return Err(overlap_error(p, "an existing", e));
        }
        if let Some(q) = given[i + 1..].iter().find(|q| overlap(p, q)) {
            return Err(overlap_error(p, "another provided", q));
        }
    }
    Ok(())
}

fn overlap_error(p: &[u8], which: &str, other: &[u8]) -> CmdError {
    CmdError::err(format!(
        "Prefix '{}' overlaps with {which} prefix '{}'. \
         Prefixes for a single client must not overlap.",
        text(p),
        text(other)
    ))
}

/// CLIENT CACHING YES|NO: whether the next command's keys are remembered
/// (OPTIN / OPTOUT modes).
pub fn caching(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let f = ctx.client.info.tracking.get();
    if f & flag::ON == 0 {
        return Err(CmdError::err(
            "CLIENT CACHING can be called only when the client is in tracking mode \
             with OPTIN or OPTOUT mode enabled",
        ));
    }
    let (mode, word) = if is(a[2], "yes") {
        (flag::OPTIN, "YES")
    } else if is(a[2], "no") {
        (flag::OPTOUT, "NO")
    } else {
        return Err(CmdError::Syntax);
    };
    if f & mode == 0 {
        let name = if mode == flag::OPTIN {
            "OPTIN"
        } else {
            "OPTOUT"
        };
        return Err(CmdError::err(format!(
            "CLIENT CACHING {word} is only valid when tracking is enabled in {name} mode."
        )));
    }
    ctx.client.tracking.caching = true;
    ctx.out.ok();
    Ok(())
}

/// CLIENT GETREDIR.
pub fn getredir(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    ctx.out.int(ctx.client.info.tracking.redirect_shown());
    Ok(())
}

/// CLIENT TRACKINGINFO: a map of `flags` (a set), `redirect` and
/// `prefixes`.
pub fn trackinginfo(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    let t = &ctx.client.info.tracking;
    let f = t.get();
    let mut names: Vec<&[u8]> = vec![if f & flag::ON != 0 { b"on" } else { b"off" }];
    let caching = ctx.client.tracking.caching;
    for (bit, name, cached) in [
        (flag::BCAST, &b"bcast"[..], None),
        (flag::OPTIN, b"optin", Some(&b"caching-yes"[..])),
        (flag::OPTOUT, b"optout", Some(b"caching-no")),
        (flag::NOLOOP, b"noloop", None),
        (flag::BROKEN_REDIR, b"broken_redirect", None),
    ] {
        if f & bit != 0 {
            names.push(name);
            if let Some(c) = cached.filter(|_| caching) {
                names.push(c);
            }
        }
    }
    let redirect = t.redirect_shown();
    let prefixes = ctx.server.tracking.prefixes_of(ctx.client.id());
    let out = &mut *ctx.out;
    out.map(3);
    out.bulk(b"flags");
    out.set(names.len());
    for n in names {
        out.bulk(n);
    }
    out.bulk(b"redirect");
    out.int(redirect);
    out.bulk(b"prefixes");
    out.array(prefixes.len());
    for p in prefixes {
        out.bulk(&p);
    }
    Ok(())
}

/// The dispatcher's hook before a command runs: a script notes its keys,
/// which the read-only commands it calls remember. Called only while some
/// client tracks.
pub fn before_command(ctx: &mut Ctx, cmd: &Command, args: &[&[u8]]) {
    if ctx.client.tracking.on && cmd.spec.group == "scripting" {
        ctx.client.tracking.script_keys = script_keys(args)
            .into_iter()
            .filter_map(|i| args.get(i).map(|k| Bytes::copy_from_slice(k)))
            .collect();
    }
}

/// The dispatcher's hook after a command ran (its locks still held): sends
/// the invalidations of the keys it changed, remembers the keys it read,
/// writes the client's own messages after the reply, and ends CLIENT
/// CACHING's effect. Called only while some client tracks.
pub fn after_command(ctx: &mut Ctx, cmd: &Command, args: &[&[u8]]) {
    invalidate_changed(ctx);
    ctx.client.tracking.script_keys.clear();
    // A read-only script's keys count only through the reads it makes.
    if ctx.client.tracking.on && cmd.spec.has(READONLY) && cmd.spec.group != "scripting" {
        remember(ctx, &read_keys(cmd, args));
    }
    write_own(ctx);
    if ctx.client.multi.is_none() && !cmd.full_name.starts_with("client|") {
        ctx.client.tracking.caching = false;
    }
}

/// Writes the client's own messages after the reply. With CLIENT REPLY
/// OFF / SKIP they wait in `own` for the dispatcher to write once it has
/// dropped the reply ([`write_pending`]): pushes are not replies.
fn write_own(ctx: &mut Ctx) {
    if ctx.client.reply_mode == ReplyMode::On {
        write_pending(ctx.client, ctx.out);
    }
}

/// Writes the client's own messages still waiting.
pub fn write_pending(client: &mut ClientState, out: &mut Reply) {
    if !client.tracking.own.is_empty() {
        out.raw(&client.tracking.own);
        client.tracking.own.clear();
    }
}

/// The hook after a command run by EXEC or a script: its changes are
/// invalidated at once, and the keys of a read are remembered (inside a
/// script, Redis 7.0 remembers the script's own keys).
pub fn after_call(ctx: &mut Ctx, cmd: &Command, args: &[&[u8]]) {
    if ctx.keys.tracked.is_none() {
        return;
    }
    invalidate_changed(ctx);
    if !ctx.client.tracking.on || !cmd.spec.has(READONLY) {
        return;
    }
    if ctx.client.in_script {
        let keys = std::mem::take(&mut ctx.client.tracking.script_keys);
        remember(ctx, &keys.iter().map(|k| &k[..]).collect::<Vec<_>>());
        ctx.client.tracking.script_keys = keys;
    } else {
        remember(ctx, &read_keys(cmd, args));
    }
}

/// Sends the invalidations of the keys changed so far.
fn invalidate_changed(ctx: &mut Ctx) {
    let Some(changed) = ctx.keys.tracked.as_mut().filter(|c| !c.is_empty()) else {
        return;
    };
    let changed = std::mem::take(changed);
    let mut me = Me {
        id: ctx.client.id(),
        out: &mut ctx.client.tracking.own,
    };
    ctx.server
        .tracking
        .invalidate(ctx.server, &changed, Some(&mut me));
}

/// The keys a read-only command read: its key positions.
fn read_keys<'a>(cmd: &Command, args: &[&'a [u8]]) -> Vec<&'a [u8]> {
    let idx = cmd.spec.key_indexes(args);
    idx.into_iter()
        .filter_map(|i| args.get(i).copied())
        .collect()
}

/// Remembers that the client read `keys`, unless its mode says not to
/// (BCAST; OPTIN without CACHING YES; OPTOUT after CACHING NO).
fn remember(ctx: &mut Ctx, keys: &[&[u8]]) {
    if keys.is_empty() {
        return;
    }
    let f = ctx.client.info.tracking.get();
    let caching = ctx.client.tracking.caching;
    if f & flag::ON == 0
        || f & flag::BCAST != 0
        || (f & flag::OPTIN != 0 && !caching)
        || (f & flag::OPTOUT != 0 && caching)
    {
        return;
    }
    ctx.server
        .tracking
        .remember(ctx.client.id(), keys.iter().copied());
}

/// The key positions of EVAL / FCALL and their variants: `numkeys` at 2.
fn script_keys(args: &[&[u8]]) -> Vec<usize> {
    let n = args
        .get(2)
        .and_then(|n| parse_i64(n))
        .filter(|&n| n > 0)
        .unwrap_or(0) as usize;
    (3..args.len().min(3 + n)).collect()
}

/// FLUSHALL / FLUSHDB: the null invalidation for every tracking client.
pub fn flushed(ctx: &mut Ctx) {
    let mut me = Me {
        id: ctx.client.id(),
        out: &mut ctx.client.tracking.own,
    };
    ctx.server.tracking.flush(ctx.server, Some(&mut me));
}

/// RESET and disconnection: tracking off.
pub fn reset(ctx: &mut Ctx) {
    ctx.server
        .tracking
        .disable(&ctx.client.info, &mut ctx.client.tracking);
}
