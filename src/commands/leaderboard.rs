//! Leaderboard commands (issue 16): LB.CREATE, LB.SUBMIT, LB.INCR,
//! LB.MSUBMIT, LB.REM, LB.GET, LB.SCORE, LB.RANK, LB.MRANK, LB.TOP,
//! LB.RANGE, LB.AROUND, LB.AMONG, LB.FRIENDS, LB.PERCENT, LB.COUNT and
//! LB.INFO, and LB.SEEN (the AOF rewrite's form of a dedup window); the
//! seasons of issue 17: LB.RESET, LB.CONFIG, LB.PERIODS and `PERIOD -k`
//! on the reads. Argument parsing and replies live here; the board itself
//! (its periods and the schedules' boundaries included) is
//! `engine::leaderboard`.
//!
//! Seasons, decided here:
//! - A boundary is checked on every access, against the command's time:
//!   a read sees the board as rolled (`period_at`, no change), a write
//!   rolls it first and logs `LB.RESET key UNTIL now` before itself; the
//!   server's timer rolls boards nobody touches the same way. While the
//!   AOF is replayed nothing rolls by the clock: the rolls are in the file.
//! - LB.CREATE of a seasonal board is logged with its `SINCE`, LB.CONFIG
//!   SET with its `AT`, LB.RESET with its `AT`, so a reload ends every
//!   period where it ended.
//!
//! Decided here:
//! - A board first written by LB.SUBMIT / LB.INCR gets the default options.
//! - A board emptied by LB.REM stays (it keeps its options); DEL removes it.
//! - Every write is recorded in the AOF as LB.SUBMIT / LB.INCR with the
//!   `AT` the server used, so a reload rebuilds the same order.
//! - `ID event-id` on LB.SUBMIT / LB.INCR: an id the board remembers
//!   (its last `lb-dedup-window` ids, read at every write) answers the
//!   current state with changed 0 and applies nothing; the ids are in the
//!   AOF (logged with the writes, LB.SEEN in a rewrite).
//! - Metadata is limited by `lb-max-meta-bytes` (default 4096), read at
//!   every write.
//! - Keyspace events are of class `d` (module): `lb.create`, `lb.submit`,
//!   `lb.incr`, `lb.rem`, `lb.reset` (a period ended: LB.RESET, a
//!   write or the timer rolling the board).
//! - LB.MSUBMIT checks every triple first (score syntax, WRONGTYPE, an
//!   INCR board's overflow) so that an error changes no board; a member
//!   given twice for one INCR board is checked against the score the
//!   earlier triple leaves. It is logged as one LB.SUBMIT per triple that changed a
//!   board (in MULTI/EXEC when several).
//! - LB.AMONG reads its trailing option words (WITHGLOBAL, WITH...) from
//!   the end, so a member cannot be named like one of them there.

use std::borrow::Cow;
use std::collections::HashMap;

use super::args;
use super::set::read_set;
use super::table::{flags::*, CommandSpec, Handler, KeySpec, RunHandler};
use super::{Ctx, Keys};
use crate::engine::leaderboard::disk::{self, DiskArchive, OwnedEntry, Unavailable};
use crate::engine::leaderboard::{
    ArchiveData, ArchiveMode, Cron, EntryRef, LbError, Leaderboard, Options, Order, PeriodView,
    Policy, Ranking, Schedule, SeasonOptions, Source, SubmitOutcome, Tiebreak, Zone,
};
use crate::engine::Value;
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::state::notify::Class;

const fn lb_cmd(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: KeySpec,
    handler: Handler,
    summary: &'static str,
    complexity: &'static str,
) -> CommandSpec {
    CommandSpec::new(name, arity, flags, keys, handler).documented(
        "leaderboard",
        summary,
        "0.1.0",
        complexity,
    )
}

const LOG_N: &str = "O(log N) where N is the number of entries of the board.";
const LOG_N_M: &str = "O(log N + M) where M is the number of entries returned.";

/// The keys of LB.MSUBMIT: the first of every (key, member, score) triple.
const TRIPLES: KeySpec = KeySpec::Range {
    first: 1,
    last: -1,
    step: 3,
};

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    lb_cmd(
        "lb.create",
        -2,
        WRITE | DENYOOM | FAST,
        KeySpec::FIRST,
        lb_create,
        "Create a leaderboard with its options",
        "O(1)",
    ),
    lb_cmd(
        "lb.submit",
        -4,
        WRITE | DENYOOM | FAST,
        KeySpec::FIRST,
        lb_submit,
        "Submit a member's score, per the board's policy",
        LOG_N,
    )
    .batched(RunHandler::Apply(lb_submit_run)),
    lb_cmd(
        "lb.incr",
        -4,
        WRITE | DENYOOM | FAST,
        KeySpec::FIRST,
        lb_incr,
        "Add to a member's score",
        LOG_N,
    )
    .batched(RunHandler::Apply(lb_incr_run)),
    lb_cmd(
        "lb.msubmit",
        -4,
        WRITE | DENYOOM,
        TRIPLES,
        lb_msubmit,
        "Submit scores to several boards atomically",
        "O(K log N) for K triples.",
    ),
    lb_cmd(
        "lb.seen",
        -3,
        WRITE | FAST,
        KeySpec::FIRST,
        lb_seen,
        "Record event ids as seen, applying nothing (the AOF rewrite's form of the dedup window)",
        "O(K) for K ids.",
    ),
    lb_cmd(
        "lb.rem",
        -3,
        WRITE | FAST,
        KeySpec::FIRST,
        lb_rem,
        "Remove members from a leaderboard",
        "O(K log N) for K members.",
    ),
    lb_cmd(
        "lb.get",
        -3,
        READONLY | FAST,
        KeySpec::FIRST,
        lb_get,
        "Get a member's full entry",
        LOG_N,
    ),
    lb_cmd(
        "lb.score",
        -3,
        READONLY | FAST,
        KeySpec::FIRST,
        lb_score,
        "Get a member's score",
        "O(1)",
    ),
    lb_cmd(
        "lb.rank",
        -3,
        READONLY | FAST,
        KeySpec::FIRST,
        lb_rank,
        "Get a member's rank",
        LOG_N,
    )
    .batched(RunHandler::Answer(lb_rank_run)),
    lb_cmd(
        "lb.mrank",
        -3,
        READONLY | FAST,
        KeySpec::FIRST,
        lb_mrank,
        "Get several members' ranks",
        "O(K log N) for K members.",
    ),
    lb_cmd(
        "lb.top",
        -3,
        READONLY,
        KeySpec::FIRST,
        lb_top,
        "Get the best entries",
        LOG_N_M,
    ),
    lb_cmd(
        "lb.range",
        -4,
        READONLY,
        KeySpec::FIRST,
        lb_range,
        "Get the entries between two places",
        LOG_N_M,
    ),
    lb_cmd(
        "lb.around",
        -4,
        READONLY,
        KeySpec::FIRST,
        lb_around,
        "Get a window of entries around a member",
        LOG_N_M,
    ),
    lb_cmd(
        "lb.among",
        -3,
        READONLY,
        KeySpec::FIRST,
        lb_among,
        "Rank the given members among themselves",
        "O(K log K + K log N) for K members.",
    ),
    lb_cmd(
        "lb.friends",
        -3,
        READONLY,
        KeySpec::FIRST_TWO,
        lb_friends,
        "Rank the members of a set among themselves",
        "O(K log K + K log N) for K members of the set.",
    ),
    lb_cmd(
        "lb.percent",
        -3,
        READONLY | FAST,
        KeySpec::FIRST,
        lb_percent,
        "How far up the board a member is, in percent",
        LOG_N,
    ),
    lb_cmd(
        "lb.count",
        -2,
        READONLY | FAST,
        KeySpec::FIRST,
        lb_count,
        "Count entries, or entries with a score in [min, max]",
        LOG_N,
    ),
    lb_cmd(
        "lb.reset",
        -2,
        WRITE | FAST,
        KeySpec::FIRST,
        lb_reset,
        "End a board's current period now (or apply its due boundaries: UNTIL)",
        "O(1) (the period is moved, not copied).",
    ),
    lb_cmd(
        "lb.config",
        -3,
        WRITE | FAST,
        KeySpec::FIRST,
        lb_config,
        "Get or change a board's season settings (RESET TZ HISTORY ARCHIVE)",
        "O(1)",
    ),
    lb_cmd(
        "lb.periods",
        2,
        READONLY | FAST,
        KeySpec::FIRST,
        lb_periods,
        "A board's kept periods: number, start, end, size, where it lives",
        "O(H) for H kept periods.",
    ),
    lb_cmd(
        "lb.attach",
        -7,
        WRITE,
        KeySpec::FIRST,
        lb_attach,
        "Close a board's current period with the entries of an archive file (the AOF's form of a period on disk)",
        "O(S) for a file of S bytes (its checksum is checked).",
    ),
    lb_cmd(
        "lb.info",
        2,
        READONLY | FAST,
        KeySpec::FIRST,
        lb_info,
        "A leaderboard's options, size and memory",
        "O(1)",
    ),
];

// ---------------------------------------------------------------------------
// Shared helpers

/// The board under `key` for reading; `WRONGTYPE` if another type.
fn read_board<'k>(keys: &'k mut Keys<'_>, key: &[u8]) -> Result<Option<&'k Leaderboard>, CmdError> {
    keys.typed(key, |v| match v {
        Value::Leaderboard(x) => Some(x),
        _ => None,
    })
}

/// The board under `key` for change; `WRONGTYPE` if another type.
fn write_board<'k>(
    keys: &'k mut Keys<'_>,
    key: &[u8],
) -> Result<Option<&'k mut Leaderboard>, CmdError> {
    keys.typed_mut(key, |v| match v {
        Value::Leaderboard(x) => Some(x),
        _ => None,
    })
}

/// Options of a board created by its first submit. The metadata limit is
/// `lb-max-meta-bytes`, checked by the commands at every write (so that
/// CONFIG SET applies to every board at once), not by the board.
fn default_options() -> Options {
    Options {
        max_meta_len: usize::MAX,
        ..Options::default()
    }
}

/// `lb-dedup-window`: how many event ids each board remembers.
fn dedup_window(ctx: &Ctx) -> usize {
    usize::try_from(ctx.server.config.read().lb_dedup_window).unwrap_or(usize::MAX)
}

/// What a write reads from the configuration (one lock): the dedup window,
/// and an error when `meta` is longer than `lb-max-meta-bytes` (not when
/// replaying the AOF: what was accepted once loads whatever the limit is
/// now).
fn write_limits(ctx: &Ctx, meta: Option<&[u8]>) -> Result<usize, CmdError> {
    let config = ctx.server.config.read();
    let limit = config.lb_max_meta_bytes;
    if !ctx.client.replaying && meta.is_some_and(|m| m.len() as u64 > limit) {
        return Err(lb_error(LbError::MetaTooLong));
    }
    Ok(usize::try_from(config.lb_dedup_window).unwrap_or(usize::MAX))
}

/// The error line of a refused write.
fn lb_error(e: LbError) -> CmdError {
    CmdError::err(e.to_string())
}

fn unknown_option(arg: &[u8]) -> CmdError {
    CmdError::err(format!("unknown option '{}'", args::text(arg)))
}

/// A score, subscore or delta argument.
fn score_arg(arg: &[u8]) -> Result<i64, CmdError> {
    args::int_with(arg, || CmdError::err("score is not a 64-bit integer"))
}

/// A count or place argument (non-negative).
fn count_arg(arg: &[u8]) -> Result<u64, CmdError> {
    let n = args::int(arg)?;
    u64::try_from(n).map_err(|_| CmdError::err("value is out of range, must be positive"))
}

/// The value after option `a[i]`, or a syntax error.
fn option_value<'a>(a: &[&'a [u8]], i: usize) -> Result<&'a [u8], CmdError> {
    a.get(i + 1).copied().ok_or(CmdError::Syntax)
}

/// Which optional fields an entry reply carries.
#[derive(Clone, Copy, Default)]
struct With {
    subscore: bool,
    time: bool,
    meta: bool,
    global: bool,
}

impl With {
    /// Every field (LB.GET).
    const ALL: With = With {
        subscore: true,
        time: true,
        meta: true,
        global: false,
    };

    /// Sets the flag `arg` names; false if it names none.
    fn take(&mut self, arg: &[u8], allow_global: bool) -> bool {
        let flag = if args::is(arg, "WITHSUBSCORE") {
            &mut self.subscore
        } else if args::is(arg, "WITHTIME") {
            &mut self.time
        } else if args::is(arg, "WITHMETA") {
            &mut self.meta
        } else if allow_global && args::is(arg, "WITHGLOBAL") {
            &mut self.global
        } else {
            return false;
        };
        *flag = true;
        true
    }

    /// Parses every argument of `opts` as a WITH flag.
    fn parse(opts: &[&[u8]], allow_global: bool) -> Result<With, CmdError> {
        let mut w = With::default();
        for o in opts {
            if !w.take(o, allow_global) {
                return Err(unknown_option(o));
            }
        }
        Ok(w)
    }

    fn len(self) -> usize {
        3 + self.subscore as usize + self.time as usize + self.meta as usize + self.global as usize
    }
}

/// One entry: `[rank, member, score, (subscore), (time), (meta), (global)]`.
fn entry_reply(out: &mut Reply, rank: u64, e: &EntryRef<'_>, w: With, global: u64) {
    out.array(w.len());
    out.int(rank as i64);
    out.bulk(e.member);
    out.int(e.score);
    if w.subscore {
        out.int(e.subscore);
    }
    if w.time {
        out.int(e.time as i64);
    }
    if w.meta {
        match e.meta {
            Some(m) => out.bulk(m),
            None => out.null(),
        }
    }
    if w.global {
        out.int(global as i64);
    }
}

/// A list of ranged entries.
fn entries_reply<'e>(
    out: &mut Reply,
    entries: impl ExactSizeIterator<Item = (u64, EntryRef<'e>)>,
    w: With,
) {
    // Written as they are walked, under the length the walk announces.
    let start = out.len();
    let announced = entries.len();
    out.array(announced);
    let body = out.len();
    let mut n = 0;
    for (rank, e) in entries {
        entry_reply(out, rank, &e, w, 0);
        n += 1;
    }
    if n != announced {
        // A walk that ends early (it should not) still gets a true header.
        let written = out.buf[body..].to_vec();
        out.truncate(start);
        out.array(n);
        out.raw(&written);
    }
}

fn rank_or_null(out: &mut Reply, rank: Option<u64>) {
    match rank {
        Some(r) => out.int(r as i64),
        None => out.null(),
    }
}

/// `[score, rank, changed]`.
fn outcome_reply(out: &mut Reply, o: &SubmitOutcome) {
    out.array(3);
    out.int(o.score);
    rank_or_null(out, o.rank);
    out.int(o.changed as i64);
}

// ---------------------------------------------------------------------------
// Seasons (issue 17)

/// A period's entries, where a read finds them.
enum Period<'k> {
    Memory(MemoryPeriod<'k>),
    Disk(&'k DiskArchive),
}

/// A period held in memory: the board's own, or an empty board made for
/// a period whose boundary passed but is not applied yet (boxed, so that
/// a `Period` is two words to move, not a whole board).
enum MemoryPeriod<'k> {
    Borrowed(&'k Leaderboard),
    Empty(Box<Leaderboard>),
}

impl std::ops::Deref for MemoryPeriod<'_> {
    type Target = Leaderboard;

    fn deref(&self) -> &Leaderboard {
        match self {
            MemoryPeriod::Borrowed(b) => b,
            MemoryPeriod::Empty(b) => b,
        }
    }
}

/// A read error on a period's file.
fn disk_error(d: &DiskArchive, e: std::io::Error) -> CmdError {
    CmdError::err(format!("archive file {} can't be read: {e}", d.name()))
}

impl Period<'_> {
    fn count(&self) -> u64 {
        match self {
            Period::Memory(b) => b.count(),
            Period::Disk(d) => d.count(),
        }
    }

    /// The member's rank and entry.
    fn find(&self, member: &[u8]) -> Result<Option<(u64, Entry<'_>)>, CmdError> {
        Ok(match self {
            Period::Memory(b) => b
                .get(member)
                .and_then(|e| Some((b.rank(member)?, Entry::Memory(e)))),
            Period::Disk(d) => d
                .find(member)
                .map_err(|e| disk_error(d, e))?
                .map(|(_, e)| (e.rank, Entry::Disk(e))),
        })
    }

    fn rank(&self, member: &[u8]) -> Result<Option<u64>, CmdError> {
        match self {
            Period::Memory(b) => Ok(b.rank(member)),
            _ => Ok(self.find(member)?.map(|(r, _)| r)),
        }
    }

    fn score(&self, member: &[u8]) -> Result<Option<i64>, CmdError> {
        match self {
            Period::Memory(b) => Ok(b.score(member)),
            _ => Ok(self.find(member)?.map(|(_, e)| e.get().score)),
        }
    }

    fn count_between(&self, min: i64, max: i64) -> Result<u64, CmdError> {
        match self {
            Period::Memory(b) => Ok(b.count_between(min, max)),
            Period::Disk(d) => d.count_between(min, max).map_err(|e| disk_error(d, e)),
        }
    }

    /// Replies with the entries at places `from..=to` (`around`: the
    /// window around that member instead).
    fn reply_range(
        &self,
        out: &mut Reply,
        from: u64,
        to: u64,
        around: Option<&[u8]>,
        w: With,
    ) -> CmdResult {
        match (self, around) {
            (Period::Memory(b), None) => entries_reply(out, b.range(from, to), w),
            (Period::Memory(b), Some(m)) => entries_reply(out, b.around(m, to), w),
            (Period::Disk(d), _) => {
                let v = match around {
                    None => d.range(from, to),
                    Some(m) => d.around(m, to),
                }
                .map_err(|e| disk_error(d, e))?;
                entries_reply(out, v.iter().map(|e| (e.rank, e.as_ref())), w);
            }
        }
        Ok(())
    }

    /// Replies with the members among themselves (LB.AMONG, LB.FRIENDS).
    fn reply_among(&self, out: &mut Reply, members: &[&[u8]], w: With) -> CmdResult {
        match self {
            Period::Memory(b) => {
                let entries = b.among(members.iter().copied(), w.global);
                out.array(entries.len());
                for e in &entries {
                    entry_reply(out, e.rank, &e.entry, w, e.global_rank.unwrap_or(0));
                }
            }
            Period::Disk(d) => {
                let entries = d
                    .among(members.iter().copied(), w.global)
                    .map_err(|e| disk_error(d, e))?;
                out.array(entries.len());
                for (rank, global, e) in &entries {
                    entry_reply(out, *rank, &e.as_ref(), w, global.unwrap_or(0));
                }
            }
        }
        Ok(())
    }
}

/// An entry of a period, borrowed from memory or read from a file.
enum Entry<'a> {
    Memory(EntryRef<'a>),
    Disk(OwnedEntry),
}

impl Entry<'_> {
    fn get(&self) -> EntryRef<'_> {
        match self {
            Entry::Memory(e) => *e,
            Entry::Disk(e) => e.as_ref(),
        }
    }
}

/// The error of a read on a period whose file could not be opened.
fn unavailable_error(key: &[u8], number: u64, u: &Unavailable) -> CmdError {
    CmdError::err(format!(
        "period {number} of '{}' is unavailable: archive file {}: {}",
        args::text(key),
        u.name,
        u.reason
    ))
}

/// The board under `key` as it is at `keys.now_ms` in period `back` (0:
/// the current one, k: the k-th closed one); None when absent or not kept.
/// A boundary passed but not yet applied is seen as applied: the new
/// period is empty (a read does not change the board). A period whose
/// file could not be opened is an error.
fn read_board_at<'k>(
    keys: &'k mut Keys<'_>,
    key: &[u8],
    back: u64,
) -> Result<Option<Period<'k>>, CmdError> {
    let now = keys.now_ms;
    let Some(b) = read_board(keys, key)? else {
        return Ok(None);
    };
    Ok(match b.period_at(now, back) {
        None => None,
        Some(p) => Some(match p.source {
            Source::Board(x) => Period::Memory(MemoryPeriod::Borrowed(x)),
            Source::Disk(d) => Period::Disk(d),
            Source::Unavailable(u) => return Err(unavailable_error(key, p.number, u)),
            Source::Empty => Period::Memory(MemoryPeriod::Empty(Box::new(Leaderboard::new(
                *b.options(),
            )))),
        }),
    })
}

/// A command's arguments with `PERIOD -k` taken out, and k.
type WithoutPeriod<'b, 'a> = (Cow<'b, [&'a [u8]]>, u64);

/// `PERIOD -k` among the options from `a[first]` on: the arguments
/// without it, and k.
fn strip_period<'b, 'a>(
    a: &'b [&'a [u8]],
    first: usize,
) -> Result<WithoutPeriod<'b, 'a>, CmdError> {
    let Some(i) = (first..a.len().saturating_sub(1)).find(|&i| args::is(a[i], "PERIOD")) else {
        return Ok((Cow::Borrowed(a), 0));
    };
    let back = period_arg(a[i + 1])?;
    let mut rest = a.to_vec();
    rest.drain(i..i + 2);
    Ok((Cow::Owned(rest), back))
}

/// A trailing `PERIOD -k` (commands whose arguments end with members).
fn strip_trailing_period<'b, 'a>(
    a: &'b [&'a [u8]],
    min_len: usize,
) -> Result<(&'b [&'a [u8]], u64), CmdError> {
    let n = a.len();
    if n >= min_len + 2 && args::is(a[n - 2], "PERIOD") {
        return Ok((&a[..n - 2], period_arg(a[n - 1])?));
    }
    Ok((a, 0))
}

/// `-k` or `0`: how many periods back.
fn period_arg(arg: &[u8]) -> Result<u64, CmdError> {
    let k = args::int(arg)?;
    if k > 0 {
        return Err(CmdError::err("PERIOD must be 0 or negative"));
    }
    Ok(k.unsigned_abs())
}

/// Applies the boundaries the board under `key` passed by now (not while
/// replaying the AOF, which holds the rolls as `LB.RESET key UNTIL t`),
/// logging the roll before what the command logs. True when it rolled.
fn roll(ctx: &mut Ctx, key: &[u8]) -> Result<bool, CmdError> {
    if ctx.client.replaying {
        return Ok(false);
    }
    let now = ctx.keys.now_ms;
    let db = ctx.keys.db;
    let Some(b) = write_board(&mut ctx.keys, key)? else {
        return Ok(false);
    };
    if !roll_due(b, now) {
        return Ok(false);
    }
    b.roll_until(now);
    ctx.server.season_timers.arm_board(b, db, key);
    place_archives(ctx, key)?;
    ctx.keys.modified(key)?;
    ctx.keys.notify(Class::MODULE, "lb.reset", key);
    ctx.keys.propagate_as(vec![
        b"LB.RESET".to_vec(),
        key.to_vec(),
        b"UNTIL".to_vec(),
        now.to_string().into_bytes(),
    ]);
    Ok(true)
}

/// Whether the board passed its current period's end by `now` (a write
/// rolls it first).
fn roll_due(b: &Leaderboard, now: u64) -> bool {
    b.season().and_then(|s| s.end()).is_some_and(|e| e <= now)
}

/// Whether this command's changes are recorded (the AOF on or being
/// rewritten, or a replication backlog: `journal::feeding`): when not, a
/// write's logged form (with its time) is not built, as the journal would
/// drop it unread. (A backlog started by a first replica between this
/// check and the feed gets the command as received, as for XADD.)
fn logging(ctx: &Ctx) -> bool {
    crate::state::journal::feeding(&ctx.server.aof)
}

/// Moves the board's closed periods where its ARCHIVE setting says (to
/// files under `dir`/lb-archives for DISK); a period that cannot be moved
/// stays where it is, logged.
fn place_archives(ctx: &mut Ctx, key: &[u8]) -> Result<(), CmdError> {
    let folder = disk::folder(std::path::Path::new(&ctx.server.config.read().dir));
    let db = ctx.keys.db as u64;
    if let Some(b) = write_board(&mut ctx.keys, key)? {
        for e in b.place_archives(&folder, key, db, false) {
            tracing::warn!("{e}");
        }
    }
    Ok(())
}

/// The season settings a board has (or a board without a season would
/// get: NEVER, UTC, HISTORY 1).
fn season_options(b: &Leaderboard) -> SeasonOptions {
    b.season().map_or(
        SeasonOptions {
            history: 1,
            ..SeasonOptions::default()
        },
        |s| s.opts.clone(),
    )
}

/// Most closed periods a board keeps (a daily board's 27 years): each
/// one, even empty, is a board in memory, and a long-missed EVERY
/// schedule would otherwise make as many.
const MAX_HISTORY: u64 = 10_000;

/// The season option at `a[i]`, if it is one (RESET, TZ, HISTORY,
/// ARCHIVE), applied to `o`: the index after its values.
fn season_option(a: &[&[u8]], i: usize, o: &mut SeasonOptions) -> Result<Option<usize>, CmdError> {
    let w = a[i];
    let v = option_value(a, i)?;
    let bad = || CmdError::err(format!("invalid value '{}'", args::text(v)));
    if args::is(w, "RESET") {
        let (schedule, next) = if args::is(v, "NEVER") {
            (Schedule::Never, i + 2)
        } else if args::is(v, "DAILY") {
            (Schedule::Daily, i + 2)
        } else if args::is(v, "WEEKLY") {
            (Schedule::Weekly, i + 2)
        } else if args::is(v, "MONTHLY") {
            (Schedule::Monthly, i + 2)
        } else if args::is(v, "EVERY") {
            let ms = count_arg(option_value(a, i + 1)?)?;
            if ms == 0 {
                return Err(CmdError::err(
                    "EVERY must be a positive number of milliseconds",
                ));
            }
            (Schedule::Every(ms), i + 3)
        } else if args::is(v, "CRON") {
            let line = args::text(option_value(a, i + 1)?);
            let cron = Cron::parse(&line)
                .ok_or_else(|| CmdError::err(format!("invalid cron line '{line}'")))?;
            (Schedule::Cron(Box::new(cron)), i + 3)
        } else {
            return Err(bad());
        };
        o.schedule = schedule;
        return Ok(Some(next));
    }
    if args::is(w, "TZ") {
        let name = args::text(v);
        o.zone = Zone::parse(&name)
            .ok_or_else(|| CmdError::err(format!("unknown time zone '{name}'")))?;
    } else if args::is(w, "HISTORY") {
        o.history = count_arg(v)?;
        if o.history > MAX_HISTORY {
            return Err(CmdError::err(format!(
                "HISTORY must be between 0 and {MAX_HISTORY}"
            )));
        }
    } else if args::is(w, "ARCHIVE") {
        o.archive = if args::is(v, "DISK") {
            ArchiveMode::Disk
        } else if args::is(v, "MEMORY") {
            ArchiveMode::Memory
        } else {
            return Err(bad());
        };
    } else {
        return Ok(None);
    }
    Ok(Some(i + 2))
}

/// LB.RESET key [AT ms | UNTIL ms]: ends the current period at `ms`
/// (default now), or applies the boundaries due by `ms` (the AOF's form
/// of a scheduled roll). Answers the current period's number.
fn lb_reset(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let key = a[1];
    let (mut at, mut until) = (None, None);
    let mut i = 2;
    while i < a.len() {
        let v = count_arg(option_value(a, i)?)?;
        match a[i] {
            w if args::is(w, "AT") => at = Some(v),
            w if args::is(w, "UNTIL") => until = Some(v),
            w => return Err(unknown_option(w)),
        }
        i += 2;
    }
    if at.is_some() && until.is_some() {
        return Err(CmdError::Syntax);
    }
    let now = ctx.keys.now_ms;
    // A client cannot end periods in the future (the AOF can: its times
    // are those of the server that wrote it).
    if !ctx.client.replaying && at.or(until).is_some_and(|t| t > now) {
        return Err(CmdError::err("AT and UNTIL cannot be in the future"));
    }
    let db = ctx.keys.db;
    let Some(b) = write_board(&mut ctx.keys, key)? else {
        return Err(CmdError::NoSuchKey);
    };
    let changed = match until {
        Some(t) => b.roll_until(t) > 0,
        None => {
            let t = at.unwrap_or(now);
            if !b.reset_at(t) {
                return Err(CmdError::err("AT is before the current period's start"));
            }
            true
        }
    };
    let number = b.season().map_or(1, |s| s.number);
    if changed {
        ctx.server.season_timers.arm_board(b, db, key);
        place_archives(ctx, key)?;
        if until.is_none() {
            let t = at.unwrap_or(now);
            ctx.keys.propagate_as(vec![
                b"LB.RESET".to_vec(),
                key.to_vec(),
                b"AT".to_vec(),
                t.to_string().into_bytes(),
            ]);
        }
        ctx.keys.modified(key)?;
        ctx.keys.notify(Class::MODULE, "lb.reset", key);
    }
    ctx.out.int(number as i64);
    Ok(())
}

/// LB.ATTACH key AT end FILE name CRC crc: what the AOF rewrite writes
/// for a period on disk. Closes the current period at `end` (as LB.RESET
/// AT) and gives it the entries of archive file `name` (in
/// `dir`/lb-archives), whose checksum must be `crc` (16 hex digits) and
/// whose period must be the one closed. A file that is missing, corrupt
/// or another period's leaves the period unavailable (its reads answer an
/// error naming the file; start-up reports it), and the load goes on.
/// Only read from the AOF: a client cannot attach files.
fn lb_attach(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    if !ctx.client.replaying {
        return Err(CmdError::err(
            "LB.ATTACH is written by the AOF rewrite and only read from the AOF",
        ));
    }
    if a.len() != 8 || !args::is(a[2], "AT") || !args::is(a[4], "FILE") || !args::is(a[6], "CRC") {
        return Err(CmdError::Syntax);
    }
    let key = a[1];
    let end = count_arg(a[3])?;
    let name = args::text(a[5]);
    let crc = u64::from_str_radix(&args::text(a[7]), 16).map_err(|_| CmdError::Syntax)?;
    if !disk::plain_name(&name) {
        return Err(CmdError::err(format!("invalid archive file name '{name}'")));
    }
    let folder = disk::folder(std::path::Path::new(&ctx.server.config.read().dir));
    let Some(b) = write_board(&mut ctx.keys, key)? else {
        return Err(CmdError::NoSuchKey);
    };
    if !b.reset_at(end) {
        return Err(CmdError::err("AT is before the current period's start"));
    }
    let Some((number, start)) = b
        .season()
        .and_then(|s| s.archives().next_back())
        .map(|p| (p.number, p.start))
    else {
        return Err(CmdError::err("no period was closed"));
    };
    let data = match disk::open_shared(&folder.join(&name)) {
        Err(e) => Err(e.to_string()),
        Ok(d) if d.crc() != crc => Err(format!(
            "checksum {:016x}, the AOF says {crc:016x}",
            d.crc()
        )),
        Ok(d) if (d.header().number, d.header().start, d.header().end) != (number, start, end) => {
            Err(format!(
                "holds period {} ({}..{}), the AOF says period {number} ({start}..{end})",
                d.header().number,
                d.header().start,
                d.header().end
            ))
        }
        Ok(d) => Ok(d),
    };
    let data = match data {
        Ok(d) => ArchiveData::Disk(d),
        Err(reason) => ArchiveData::Unavailable(Unavailable {
            name,
            reason,
            crc: None,
        }),
    };
    b.attach_newest(data);
    ctx.keys.modified(key)?;
    ctx.out.ok();
    Ok(())
}

/// LB.CONFIG key GET | SET option value ... [AT ms]: a board's season
/// settings. SET takes RESET, TZ, HISTORY and ARCHIVE as LB.CREATE does;
/// the current period then ends at the new schedule's first boundary
/// after now (AT: after `ms`, the AOF's form).
fn lb_config(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let key = a[1];
    if args::is(a[2], "GET") {
        if a.len() != 3 {
            return Err(CmdError::Syntax);
        }
        let now = ctx.keys.now_ms;
        let Some(b) = read_board(&mut ctx.keys, key)? else {
            return Err(CmdError::NoSuchKey);
        };
        let o = season_options(b);
        let current = b.period_at(now, 0);
        config_reply(ctx.out, &o, current);
        return Ok(());
    }
    if !args::is(a[2], "SET") {
        return Err(CmdError::err(format!(
            "unknown subcommand '{}'. Try LB.CONFIG key GET or SET",
            args::text(a[2])
        )));
    }
    if a.len() < 5 {
        return Err(CmdError::WrongArity("lb.config".to_string()));
    }
    let mut o = match read_board(&mut ctx.keys, key)? {
        Some(b) => season_options(b),
        None => return Err(CmdError::NoSuchKey),
    };
    let mut at = None;
    let mut i = 3;
    while i < a.len() {
        if args::is(a[i], "AT") {
            at = Some(count_arg(option_value(a, i)?)?);
            i += 2;
            continue;
        }
        match season_option(a, i, &mut o)? {
            Some(next) => i = next,
            None => return Err(unknown_option(a[i])),
        }
    }
    roll(ctx, key)?;
    let from = at.unwrap_or(ctx.keys.now_ms);
    let db = ctx.keys.db;
    let Some(b) = write_board(&mut ctx.keys, key)? else {
        return Err(CmdError::NoSuchKey);
    };
    b.set_season(o, None, None, from);
    ctx.server.season_timers.arm_board(b, db, key);
    place_archives(ctx, key)?;
    ctx.keys.modified(key)?;
    let mut logged: Vec<Vec<u8>> = a.iter().map(|x| x.to_vec()).collect();
    if at.is_none() {
        logged.push(b"AT".to_vec());
        logged.push(from.to_string().into_bytes());
    }
    ctx.keys.propagate_as(logged);
    ctx.out.ok();
    Ok(())
}

/// `reset`, `tz`, `history`, `archive`, `period`, `start`, `next` (a map in
/// RESP3).
fn config_reply(out: &mut Reply, o: &SeasonOptions, current: Option<PeriodView<'_>>) {
    out.map(7);
    season_fields(out, o, current);
}

/// The seven season fields of LB.CONFIG GET and LB.INFO.
fn season_fields(out: &mut Reply, o: &SeasonOptions, current: Option<PeriodView<'_>>) {
    out.bulk(b"reset");
    out.bulk(o.schedule.words().join(" ").as_bytes());
    out.bulk(b"tz");
    out.bulk(o.zone.to_string().as_bytes());
    out.bulk(b"history");
    out.int(o.history as i64);
    out.bulk(b"archive");
    out.bulk(o.archive.name().as_bytes());
    out.bulk(b"period");
    out.int(current.map_or(1, |p| p.number) as i64);
    out.bulk(b"start");
    out.int(current.map_or(0, |p| p.start) as i64);
    out.bulk(b"next");
    match current.and_then(|p| p.end) {
        Some(e) => out.int(e as i64),
        None => out.null(),
    }
}

/// LB.PERIODS key: the kept periods, the current one first, each
/// `number, start, end (nil: none scheduled), size, location` (a map in
/// RESP3).
fn lb_periods(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let now = ctx.keys.now_ms;
    let Some(b) = read_board(&mut ctx.keys, a[1])? else {
        ctx.out.array(0);
        return Ok(());
    };
    let periods = b.periods_at(now);
    let out = &mut *ctx.out;
    out.array(periods.len());
    for p in &periods {
        out.map(5);
        out.bulk(b"number");
        out.int(p.number as i64);
        out.bulk(b"start");
        out.int(p.start as i64);
        out.bulk(b"end");
        match p.end {
            Some(e) => out.int(e as i64),
            None => out.null(),
        }
        out.bulk(b"size");
        out.int(p.size() as i64);
        out.bulk(b"location");
        out.bulk(match p.source {
            Source::Board(_) | Source::Empty => &b"memory"[..],
            Source::Disk(_) => b"disk",
            Source::Unavailable(_) => b"unavailable",
        });
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// LB.CREATE

/// LB.CREATE's options: the board's, and its season's when any season
/// word was given (with the rewrite's NUMBER, SINCE and ENDS).
struct Create {
    opts: Options,
    season: Option<SeasonOptions>,
    number: Option<u64>,
    since: Option<u64>,
    ends: Option<u64>,
}

fn parse_create(a: &[&[u8]]) -> Result<Create, CmdError> {
    let mut c = Create {
        opts: default_options(),
        season: None,
        number: None,
        since: None,
        ends: None,
    };
    let mut season = SeasonOptions {
        history: 1,
        ..SeasonOptions::default()
    };
    let mut seasonal = false;
    let o = &mut c.opts;
    let mut i = 2;
    while i < a.len() {
        if let Some(next) = season_option(a, i, &mut season)? {
            seasonal = true;
            i = next;
            continue;
        }
        let v = option_value(a, i)?;
        let bad = || CmdError::err(format!("invalid value '{}'", args::text(v)));
        match a[i] {
            w if args::is(w, "ORDER") => o.order = Order::from_name(v).ok_or_else(bad)?,
            w if args::is(w, "POLICY") => o.policy = Policy::from_name(v).ok_or_else(bad)?,
            w if args::is(w, "TIEBREAK") => o.tiebreak = Tiebreak::from_name(v).ok_or_else(bad)?,
            w if args::is(w, "RANKING") => o.ranking = Ranking::from_name(v).ok_or_else(bad)?,
            w if args::is(w, "CAPACITY") => o.capacity = count_arg(v)?,
            w if args::is(w, "NUMBER") => c.number = Some(count_arg(v)?.max(1)),
            w if args::is(w, "SINCE") => c.since = Some(count_arg(v)?),
            w if args::is(w, "ENDS") => c.ends = Some(count_arg(v)?),
            w => return Err(unknown_option(w)),
        }
        i += 2;
    }
    if seasonal || c.number.is_some() || c.since.is_some() {
        c.season = Some(season);
    }
    Ok(c)
}

fn lb_create(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let c = parse_create(a)?;
    let key = a[1];
    if ctx.keys.exists(key)? {
        return Err(CmdError::err(format!(
            "key '{}' already exists",
            args::text(key)
        )));
    }
    let mut b = Leaderboard::new(c.opts);
    if let Some(season) = c.season {
        let since = c.since.unwrap_or(ctx.keys.now_ms);
        let from = c.ends.map_or(since, |e| e.saturating_sub(1));
        b.set_season(season, c.number, Some(since), from);
        if c.since.is_none() {
            // The AOF holds the start, so that a reload ends the period
            // where this one ends.
            let mut logged: Vec<Vec<u8>> = a.iter().map(|x| x.to_vec()).collect();
            logged.push(b"SINCE".to_vec());
            logged.push(since.to_string().into_bytes());
            ctx.keys.propagate_as(logged);
        }
    }
    ctx.server.season_timers.arm_board(&b, ctx.keys.db, key);
    ctx.keys.set(key, Value::Leaderboard(Box::new(b)), false)?;
    ctx.keys.notify(Class::MODULE, "lb.create", key);
    ctx.out.ok();
    Ok(())
}

// ---------------------------------------------------------------------------
// LB.SUBMIT, LB.INCR, LB.MSUBMIT

/// A parsed submit or incr.
struct Write<'a> {
    incr: bool,
    member: &'a [u8],
    score: i64,
    subscore: i64,
    at: Option<u64>,
    meta: Option<&'a [u8]>,
    /// `ID event-id`: applied once per id within the board's window.
    id: Option<&'a [u8]>,
}

fn parse_write<'a>(a: &[&'a [u8]], incr: bool) -> Result<Write<'a>, CmdError> {
    let mut w = Write {
        incr,
        member: a[2],
        score: score_arg(a[3])?,
        subscore: 0,
        at: None,
        meta: None,
        id: None,
    };
    let mut i = 4;
    while i < a.len() {
        let v = option_value(a, i)?;
        match a[i] {
            o if !incr && args::is(o, "SUBSCORE") => w.subscore = score_arg(v)?,
            o if args::is(o, "AT") => w.at = Some(count_arg(v)?),
            o if args::is(o, "META") => w.meta = Some(v),
            o if args::is(o, "ID") => w.id = Some(v),
            o => return Err(unknown_option(o)),
        }
        i += 2;
    }
    Ok(w)
}

impl Write<'_> {
    /// Applies the write to `b`; a repeated id answers the current state
    /// (changed 0) and applies nothing. The second value: the board's id
    /// window changed.
    fn apply(
        &self,
        b: &mut Leaderboard,
        at: u64,
        window: usize,
    ) -> Result<(SubmitOutcome, bool), CmdError> {
        // A window made smaller by CONFIG SET applies from here on.
        b.ids.trim(window);
        if self.id.is_some_and(|id| b.ids.contains(id)) {
            return Ok((self.current(b), false));
        }
        let r = if self.incr {
            b.incr(self.member, self.score, at, self.meta)
        } else {
            b.submit(self.member, self.score, self.subscore, at, self.meta)
        };
        let out = r.map_err(lb_error)?;
        let recorded = self.id.is_some_and(|id| b.ids.insert(id, window));
        Ok((out, recorded))
    }

    /// The member's state, unchanged (a repeated id).
    fn current(&self, b: &Leaderboard) -> SubmitOutcome {
        SubmitOutcome {
            score: b.score(self.member).unwrap_or(self.score),
            rank: b.rank(self.member),
            changed: false,
            evicted: None,
        }
    }

    /// What the AOF records: the same write with its time.
    fn logged(&self, key: &[u8], at: u64) -> Vec<Vec<u8>> {
        let name: &[u8] = if self.incr { b"LB.INCR" } else { b"LB.SUBMIT" };
        let int = |n: i64| itoa::Buffer::new().format(n).as_bytes().to_vec();
        // Sized for every option, so that it never grows.
        let mut cmd = Vec::with_capacity(12);
        cmd.extend([
            name.to_vec(),
            key.to_vec(),
            self.member.to_vec(),
            int(self.score),
        ]);
        if !self.incr {
            cmd.push(b"SUBSCORE".to_vec());
            cmd.push(int(self.subscore));
        }
        cmd.push(b"AT".to_vec());
        cmd.push(itoa::Buffer::new().format(at).as_bytes().to_vec());
        if let Some(m) = self.meta {
            cmd.push(b"META".to_vec());
            cmd.push(m.to_vec());
        }
        if let Some(id) = self.id {
            cmd.push(b"ID".to_vec());
            cmd.push(id.to_vec());
        }
        cmd
    }

    fn event(&self) -> &'static str {
        if self.incr {
            "lb.incr"
        } else {
            "lb.submit"
        }
    }
}

/// Applies `w` to the board under `key` (created with the defaults when
/// absent); a refused write changes nothing, not even the keyspace.
fn apply_write(ctx: &mut Ctx, key: &[u8], w: &Write<'_>) -> Result<SubmitOutcome, CmdError> {
    let window = write_limits(ctx, w.meta)?;
    let now = ctx.keys.now_ms;
    let at = w.at.unwrap_or(now);
    let replaying = ctx.client.replaying;
    // The usual case in one lookup: a board with no boundary due (what
    // `roll` checks first).
    let applied = match write_board(&mut ctx.keys, key)? {
        Some(b) if replaying || !roll_due(b, now) => Some(w.apply(b, at, window)?),
        _ => None,
    };
    let (out, recorded) = match applied {
        Some(r) => r,
        None => {
            roll(ctx, key)?;
            match write_board(&mut ctx.keys, key)? {
                Some(b) => w.apply(b, at, window)?,
                None => {
                    let mut b = Leaderboard::new(default_options());
                    let out = w.apply(&mut b, at, window)?;
                    ctx.keys.set(key, Value::Leaderboard(Box::new(b)), false)?;
                    out
                }
            }
        }
    };
    let changed = out.changed || out.evicted.is_some();
    if changed {
        ctx.keys.notify(Class::MODULE, w.event(), key);
    }
    // A write that changed nothing is not logged (the AOF skips it anyway).
    if changed || recorded {
        ctx.keys.modified(key)?;
        if logging(ctx) {
            ctx.keys.propagate_as(w.logged(key, at));
        }
    }
    Ok(out)
}

fn lb_submit(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let w = parse_write(a, false)?;
    let out = apply_write(ctx, a[1], &w)?;
    outcome_reply(ctx.out, &out);
    Ok(())
}

/// LB.SUBMIT (LB.INCR: `incr`) for a run of pipelined calls on one key
/// without options (`key member score`), applied in one go
/// (`commands::run`): the board is looked up, its boundary checked and its
/// id window trimmed once, and the changes counted together; each call's
/// reply is the one it gets alone. Every call takes the run's time. Returns how many calls it
/// applied: it stops before a call that would fail (a score that is not
/// an integer, an overflow or a full board), which then runs alone with
/// the rest and answers its error, and does none when the key holds no
/// board or another type, a boundary is due or the AOF is replayed.
fn write_run(ctx: &mut Ctx, key: &[u8], rest: &[&[u8]], incr: bool) -> usize {
    if ctx.client.replaying {
        return 0;
    }
    let window = dedup_window(ctx);
    let now = ctx.keys.now_ms;
    let Ok(Some(b)) = write_board(&mut ctx.keys, key) else {
        return 0;
    };
    if roll_due(b, now) {
        return 0;
    }
    // (What each call's `Write::apply` does first: the same every time.)
    b.ids.trim(window);
    let (mut done, mut changed) = (0, 0);
    for call in rest.chunks_exact(2) {
        let Ok(score) = score_arg(call[1]) else {
            break;
        };
        let applied = if incr {
            b.incr(call[0], score, now, None)
        } else {
            b.submit(call[0], score, 0, now, None)
        };
        let Ok(out) = applied else {
            break;
        };
        changed += (out.changed || out.evicted.is_some()) as usize;
        outcome_reply(ctx.out, &out);
        done += 1;
    }
    // Cannot fail: the board's shard was just written under the same lock.
    let _ = ctx.keys.modified_times(key, changed);
    done
}

fn lb_submit_run(ctx: &mut Ctx, key: &[u8], _calls: usize, rest: &[&[u8]]) -> usize {
    write_run(ctx, key, rest, false)
}

fn lb_incr_run(ctx: &mut Ctx, key: &[u8], _calls: usize, rest: &[&[u8]]) -> usize {
    write_run(ctx, key, rest, true)
}

fn lb_incr(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let w = parse_write(a, true)?;
    let out = apply_write(ctx, a[1], &w)?;
    outcome_reply(ctx.out, &out);
    Ok(())
}

/// Whether a submit of `score` for `member` would overflow (a board with
/// POLICY INCR), checked before anything changes.
fn lb_msubmit(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    if !(a.len() - 1).is_multiple_of(3) {
        return Err(CmdError::WrongArity("lb.msubmit".to_string()));
    }
    let mut writes = Vec::with_capacity((a.len() - 1) / 3);
    for t in a[1..].chunks_exact(3) {
        let w = Write {
            incr: false,
            member: t[1],
            score: score_arg(t[2])?,
            subscore: 0,
            at: None,
            meta: None,
            id: None,
        };
        writes.push((t[0], w));
    }
    // Boundaries first, so that the checks see the periods written to.
    for (key, _) in &writes {
        roll(ctx, key)?;
    }
    // Checked first so that an error changes no board: the scores of
    // members of INCR boards are followed through the call, so a member
    // named twice is checked against what the first triple leaves.
    let mut sums: HashMap<(&[u8], &[u8]), Option<i64>> = HashMap::new();
    for (key, w) in &writes {
        let Some(b) = read_board(&mut ctx.keys, key)? else {
            continue;
        };
        if b.options().policy != Policy::Incr {
            continue;
        }
        let cur = sums
            .entry((key, w.member))
            .or_insert_with(|| b.score(w.member));
        *cur = match *cur {
            None => Some(w.score),
            Some(old) => match old.checked_add(w.score) {
                Some(sum) => Some(sum),
                None => return Err(lb_error(LbError::Overflow)),
            },
        };
    }
    let mut outs = Vec::with_capacity(writes.len());
    for (key, w) in &writes {
        outs.push(apply_write(ctx, key, w)?);
    }
    ctx.out.array(outs.len());
    for o in &outs {
        outcome_reply(ctx.out, o);
    }
    Ok(())
}

/// LB.SEEN key id [id ...]: what the AOF rewrite writes for a board's
/// dedup window, oldest id first.
fn lb_seen(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let key = a[1];
    let window = dedup_window(ctx);
    let rolled = roll(ctx, key)?;
    let Some(b) = write_board(&mut ctx.keys, key)? else {
        return Err(CmdError::NoSuchKey);
    };
    let added = a[2..].iter().filter(|id| b.ids.insert(id, window)).count();
    if added > 0 {
        ctx.keys.modified(key)?;
        if rolled {
            ctx.keys
                .propagate_as(a.iter().map(|x| x.to_vec()).collect());
        }
    }
    ctx.out.int(added as i64);
    Ok(())
}

// ---------------------------------------------------------------------------
// LB.REM

fn lb_rem(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let key = a[1];
    let rolled = roll(ctx, key)?;
    let Some(b) = write_board(&mut ctx.keys, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let removed = a[2..].iter().filter(|m| b.remove(m)).count();
    if removed > 0 {
        ctx.keys.modified(key)?;
        ctx.keys.notify(Class::MODULE, "lb.rem", key);
        if rolled {
            // The roll is logged; the command must be too.
            ctx.keys
                .propagate_as(a.iter().map(|x| x.to_vec()).collect());
        }
    }
    ctx.out.int(removed as i64);
    Ok(())
}

// ---------------------------------------------------------------------------
// Point reads

/// A point read's arguments: `key member [PERIOD -k]`.
fn point_args<'b, 'a>(a: &'b [&'a [u8]]) -> Result<WithoutPeriod<'b, 'a>, CmdError> {
    let (a, back) = strip_period(a, 3)?;
    if a.len() != 3 {
        return Err(CmdError::Syntax);
    }
    Ok((a, back))
}

fn lb_get(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (a, back) = point_args(a)?;
    let b = read_board_at(&mut ctx.keys, a[1], back)?;
    let found = match &b {
        Some(b) => b.find(a[2])?,
        None => None,
    };
    match found {
        Some((rank, e)) => entry_reply(ctx.out, rank, &e.get(), With::ALL, 0),
        None => ctx.out.null(),
    }
    Ok(())
}

fn lb_score(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (a, back) = point_args(a)?;
    let score = match read_board_at(&mut ctx.keys, a[1], back)? {
        Some(b) => b.score(a[2])?,
        None => None,
    };
    match score {
        Some(s) => ctx.out.int(s),
        None => ctx.out.null(),
    }
    Ok(())
}

fn lb_rank(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (a, back) = point_args(a)?;
    let rank = match read_board_at(&mut ctx.keys, a[1], back)? {
        Some(b) => b.rank(a[2])?,
        None => None,
    };
    rank_or_null(ctx.out, rank);
    Ok(())
}

/// LB.RANK for a run of pipelined calls on one key (`commands::run`): the
/// board is looked up once. False, having written and counted nothing,
/// when the key holds no board or a boundary is due (the calls then run
/// one at a time).
fn lb_rank_run(ctx: &mut Ctx, key: &[u8], members: &[&[u8]]) -> bool {
    let now = ctx.keys.now_ms;
    let Some(Value::Leaderboard(b)) = ctx.keys.value_read_by(key, members.len()) else {
        return false;
    };
    let Some(PeriodView {
        source: Source::Board(x),
        ..
    }) = b.period_at(now, 0)
    else {
        return false;
    };
    for m in members {
        rank_or_null(ctx.out, x.rank(m));
    }
    true
}

fn lb_mrank(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (a, back) = strip_trailing_period(a, 3)?;
    let b = read_board_at(&mut ctx.keys, a[1], back)?;
    let mut ranks = Vec::with_capacity(a.len() - 2);
    for m in &a[2..] {
        ranks.push(match &b {
            Some(b) => b.rank(m)?,
            None => None,
        });
    }
    ctx.out.array(ranks.len());
    for r in ranks {
        rank_or_null(ctx.out, r);
    }
    Ok(())
}

fn lb_percent(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (a, back) = point_args(a)?;
    let b = read_board_at(&mut ctx.keys, a[1], back)?;
    let pct = match &b {
        Some(b) => b.rank(a[2])?.map(|r| 100.0 * r as f64 / b.count() as f64),
        None => None,
    };
    match pct {
        Some(p) => ctx.out.double(p),
        None => ctx.out.null(),
    }
    Ok(())
}

fn lb_count(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (a, back) = strip_period(a, 2)?;
    let bounds = match a.len() {
        2 => None,
        4 => Some((score_arg(a[2])?, score_arg(a[3])?)),
        _ => return Err(CmdError::Syntax),
    };
    let b = read_board_at(&mut ctx.keys, a[1], back)?;
    let n = match (&b, bounds) {
        (None, _) => 0,
        (Some(b), None) => b.count(),
        (Some(b), Some((min, max))) => b.count_between(min, max)?,
    };
    ctx.out.int(n as i64);
    Ok(())
}

fn lb_info(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let now = ctx.keys.now_ms;
    let Some(b) = read_board(&mut ctx.keys, a[1])? else {
        ctx.out.null();
        return Ok(());
    };
    let o = *b.options();
    let current = b.period_at(now, 0);
    let (size, memory) = (current.map_or(0, |p| p.size()), b.memory_usage());
    let season = season_options(b);
    let out = &mut *ctx.out;
    out.map(14);
    for (name, word) in [
        ("order", o.order.name()),
        ("policy", o.policy.name()),
        ("tiebreak", o.tiebreak.name()),
        ("ranking", o.ranking.name()),
    ] {
        out.bulk(name.as_bytes());
        out.bulk(word.as_bytes());
    }
    for (name, n) in [
        ("capacity", o.capacity),
        ("size", size),
        ("memory", memory as u64),
    ] {
        out.bulk(name.as_bytes());
        out.int(n as i64);
    }
    season_fields(out, &season, current);
    Ok(())
}

// ---------------------------------------------------------------------------
// Ranges

/// LB.TOP's arguments: how many entries, from which place.
struct Top {
    count: Option<u64>,
    percent: Option<f64>,
    offset: u64,
    with: With,
}

fn parse_top(a: &[&[u8]]) -> Result<Top, CmdError> {
    let mut t = Top {
        count: None,
        percent: None,
        offset: 0,
        with: With::default(),
    };
    let mut i = 2;
    if args::is(a[2], "PERCENT") {
        let p = args::float(option_value(a, 2)?)?;
        if !(0.0..=100.0).contains(&p) {
            return Err(CmdError::err("percent must be between 0 and 100"));
        }
        t.percent = Some(p);
        i = 4;
    } else {
        t.count = Some(count_arg(a[2])?);
        i += 1;
    }
    while i < a.len() {
        if args::is(a[i], "OFFSET") {
            t.offset = count_arg(option_value(a, i)?)?;
            i += 2;
        } else if t.with.take(a[i], false) {
            i += 1;
        } else {
            return Err(unknown_option(a[i]));
        }
    }
    Ok(t)
}

fn lb_top(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (a, back) = strip_period(a, 3)?;
    if a.len() < 3 {
        return Err(CmdError::Syntax);
    }
    let t = parse_top(&a)?;
    let Some(b) = read_board_at(&mut ctx.keys, a[1], back)? else {
        ctx.out.array(0);
        return Ok(());
    };
    let count = match (t.count, t.percent) {
        (Some(c), _) => c,
        (None, Some(p)) => (b.count() as f64 * p / 100.0).ceil() as u64,
        (None, None) => 0,
    };
    if count == 0 {
        ctx.out.array(0);
        return Ok(());
    }
    let from = t.offset.saturating_add(1);
    b.reply_range(ctx.out, from, from.saturating_add(count - 1), None, t.with)
}

/// A place argument: 1-based, or negative counting from the end (-1: the
/// last entry); 0 and places before the first clamp to 1.
fn place(arg: &[u8], len: u64) -> Result<u64, CmdError> {
    let n = args::int(arg)?;
    Ok(if n < 0 {
        (len as i64 + 1 + n).max(0) as u64
    } else {
        n as u64
    })
}

fn lb_range(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (a, back) = strip_period(a, 4)?;
    args::int(a[2])?;
    args::int(a[3])?;
    let with = With::parse(&a[4..], false)?;
    let Some(b) = read_board_at(&mut ctx.keys, a[1], back)? else {
        ctx.out.array(0);
        return Ok(());
    };
    let (from, to) = (place(a[2], b.count())?, place(a[3], b.count())?);
    b.reply_range(ctx.out, from.max(1), to, None, with)
}

fn lb_around(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (a, back) = strip_period(a, 4)?;
    let count = count_arg(a[3])?;
    let with = With::parse(&a[4..], false)?;
    match read_board_at(&mut ctx.keys, a[1], back)? {
        Some(b) => b.reply_range(ctx.out, 0, count, Some(a[2]), with)?,
        None => ctx.out.array(0),
    }
    Ok(())
}

/// The board restricted to `members`, ranked among themselves.
fn among_reply(ctx: &mut Ctx, key: &[u8], members: &[&[u8]], with: With, back: u64) -> CmdResult {
    let Some(b) = read_board_at(&mut ctx.keys, key, back)? else {
        ctx.out.array(0);
        return Ok(());
    };
    b.reply_among(ctx.out, members, with)
}

fn lb_among(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (a, back) = strip_trailing_period(a, 3)?;
    let mut with = With::default();
    let mut end = a.len();
    while end > 3 && with.take(a[end - 1], true) {
        end -= 1;
    }
    among_reply(ctx, a[1], &a[2..end], with, back)
}

fn lb_friends(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    let (a, back) = strip_period(a, 3)?;
    let mut with = With::default();
    let mut include = None;
    let mut i = 3;
    while i < a.len() {
        if args::is(a[i], "INCLUDE") {
            include = Some(option_value(&a, i)?);
            i += 2;
        } else if with.take(a[i], true) {
            i += 1;
        } else {
            return Err(unknown_option(a[i]));
        }
    }
    // Type errors on the board come first, as for any other read.
    read_board(&mut ctx.keys, a[1])?;
    let owned: Vec<Vec<u8>> = read_set(&mut ctx.keys, a[2])?
        .map(|s| s.iter().map(|m| m.to_vec()).collect())
        .unwrap_or_default();
    let mut members: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
    members.extend(include);
    among_reply(ctx, a[1], &members, with, back)
}
