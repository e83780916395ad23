//! Seasons (issue 17): a board's periods. The board a [`Leaderboard`]
//! holds is its current period; its [`Season`] keeps the schedule, the
//! current period's number and start, and the closed periods (archives,
//! read-only, the `history` most recent).
//!
//! Two ways to see boundaries, one computation ([`Leaderboard::due`]):
//! - a write rolls the board over ([`Leaderboard::roll_until`]): the
//!   current period is archived and an empty one starts, once per
//!   boundary passed, with each period's own start and end;
//! - a read does not change the board: [`Leaderboard::periods_at`] shows
//!   the periods as they would be after rolling at the read's time, so a
//!   read after a boundary sees the new period before any write or timer
//!   rolled the board.
//!
//! Numbers: the first period is 1 (or what LB.CREATE's NUMBER says), each
//! boundary adds 1; missed boundaries count, and their periods are
//! archived empty.

use std::collections::VecDeque;

use std::path::Path;

use super::disk::{self, DiskArchive, Unavailable};
use super::schedule::{next_boundary, Schedule, Zone};
use super::Leaderboard;
use crate::engine::zset::alloc_size;

/// Most boundaries one roll walks one by one (a per-minute CRON board
/// down for a year walks 525,600); past it, the rest is left to the next
/// roll. EVERY boards jump arithmetically.
const MAX_WALK: u64 = 2_000_000;

/// A board's season settings.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SeasonOptions {
    pub schedule: Schedule,
    pub zone: Zone,
    /// Closed periods kept (the most recent).
    pub history: u64,
    /// Where closed periods live.
    pub archive: ArchiveMode,
}

/// Where a board's closed periods live (`ARCHIVE MEMORY|DISK`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ArchiveMode {
    #[default]
    Memory,
    /// In files under the archive folder ([`disk`]).
    Disk,
}

impl ArchiveMode {
    /// The option word.
    pub fn name(self) -> &'static str {
        match self {
            ArchiveMode::Memory => "MEMORY",
            ArchiveMode::Disk => "DISK",
        }
    }
}

/// A closed period's entries.
#[derive(Debug, Clone)]
pub enum ArchiveData {
    /// Boxed: a period on disk then costs a pointer, not a board.
    Memory(Box<Leaderboard>),
    Disk(DiskArchive),
    /// Its file could not be opened (reads answer an error).
    Unavailable(Unavailable),
}

/// A closed period.
#[derive(Debug, Clone)]
pub struct Archive {
    pub number: u64,
    pub start: u64,
    pub end: u64,
    pub data: ArchiveData,
}

impl Archive {
    /// Entries in the period (0 when unavailable).
    pub fn count(&self) -> u64 {
        match &self.data {
            ArchiveData::Memory(b) => b.count(),
            ArchiveData::Disk(d) => d.count(),
            ArchiveData::Unavailable(_) => 0,
        }
    }

    /// Bytes held in memory for it.
    pub fn memory_usage(&self) -> usize {
        match &self.data {
            ArchiveData::Memory(b) => b.memory_usage(),
            ArchiveData::Disk(d) => d.memory_usage(),
            ArchiveData::Unavailable(u) => alloc_size(u.name.len()) + alloc_size(u.reason.len()),
        }
    }
}

/// A board's periods apart from the current entries.
#[derive(Debug, Clone)]
pub struct Season {
    pub opts: SeasonOptions,
    /// The current period's number.
    pub number: u64,
    /// When the current period started (unix ms; 0: not known, a board
    /// that got a season after it was created).
    pub start: u64,
    /// The current period's end: the first boundary after `start`.
    end: Option<u64>,
    /// Closed periods, oldest first.
    archives: VecDeque<Archive>,
}

impl Season {
    /// The current period's end (None: NEVER).
    pub fn end(&self) -> Option<u64> {
        self.end
    }

    /// The closed periods, oldest first.
    pub fn archives(&self) -> impl DoubleEndedIterator<Item = &Archive> + ExactSizeIterator {
        self.archives.iter()
    }

    fn trim(&mut self) {
        while self.archives.len() as u64 > self.opts.history {
            self.archives.pop_front();
        }
    }
}

/// Boundaries due: how many, and the last ones (ascending, at most
/// `history + 1`, preceded by the start they follow when there are
/// fewer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    pub count: u64,
    /// `count` boundaries b1..bk with b0 the current start: the last
    /// `min(count, history + 1) + 1` of b0..bk.
    pub tail: Vec<u64>,
}

/// Where a period shown by [`Leaderboard::periods_at`] is.
#[derive(Debug, Clone, Copy)]
pub enum Source<'a> {
    /// Its entries are on this board.
    Board(&'a Leaderboard),
    /// Its entries are in this file.
    Disk(&'a DiskArchive),
    /// Its file could not be opened.
    Unavailable(&'a Unavailable),
    /// A period that began after the board's last roll: no entries.
    Empty,
}

/// One period as [`Leaderboard::periods_at`] shows it.
#[derive(Debug, Clone, Copy)]
pub struct PeriodView<'a> {
    pub number: u64,
    pub start: u64,
    /// None: the current period of a board that never resets by itself.
    pub end: Option<u64>,
    pub source: Source<'a>,
}

impl PeriodView<'_> {
    /// Entries in the period.
    pub fn size(&self) -> u64 {
        match self.source {
            Source::Board(b) => b.count(),
            Source::Disk(d) => d.count(),
            Source::Empty | Source::Unavailable(_) => 0,
        }
    }
}

impl Leaderboard {
    /// The board's season, when it has one.
    pub fn season(&self) -> Option<&Season> {
        self.season.as_deref()
    }

    /// Sets the season options (a board without a season gets one, its
    /// current period numbered `number`, started at `start`; a board with
    /// one keeps its periods, and `number` / `start` are used only when
    /// given). The current period now ends at the schedule's first
    /// boundary after `from` (or after its start, if later): a changed
    /// schedule takes effect from the change, not from the period's
    /// start. Archives past the new history are dropped.
    pub fn set_season(
        &mut self,
        opts: SeasonOptions,
        number: Option<u64>,
        start: Option<u64>,
        from: u64,
    ) {
        let s = self.season.get_or_insert_with(|| {
            Box::new(Season {
                opts: SeasonOptions::default(),
                number: 1,
                start: 0,
                end: None,
                archives: VecDeque::new(),
            })
        });
        s.opts = opts;
        if let Some(n) = number {
            s.number = n;
        }
        if let Some(t) = start {
            s.start = t;
        }
        s.end = next_boundary(&s.opts.schedule, s.opts.zone, s.start.max(from));
        s.trim();
    }

    /// The boundaries passed by time `t` since the current period began
    /// (`inclusive`: a boundary at `t` counts).
    pub fn due(&self, t: u64, inclusive: bool) -> Due {
        let Some(s) = self.season.as_deref() else {
            return Due {
                count: 0,
                tail: Vec::new(),
            };
        };
        let passed = |b: u64| if inclusive { b <= t } else { b < t };
        let keep = (s.opts.history + 2) as usize;
        let mut tail = VecDeque::with_capacity(keep.min(64));
        tail.push_back(s.start);
        let mut count = 0u64;
        let mut next = s.end;
        if let (Schedule::Every(ms), Some(b1)) = (&s.opts.schedule, s.end) {
            let ms = (*ms).max(1);
            if passed(b1) {
                // b1 + (k - 1) * ms passed: k boundaries.
                let last = if inclusive { t } else { t - 1 };
                let k = (last - b1) / ms + 1;
                let skip = k.saturating_sub(keep as u64);
                if skip > 0 {
                    count = skip;
                    tail[0] = b1 + (skip - 1) * ms;
                    next = Some(tail[0] + ms);
                }
            }
        }
        let mut walked = 0;
        while let Some(b) = next.filter(|&b| passed(b)) {
            if walked >= MAX_WALK {
                break;
            }
            walked += 1;
            count += 1;
            tail.push_back(b);
            if tail.len() > keep {
                tail.pop_front();
            }
            next = next_boundary(&s.opts.schedule, s.opts.zone, b);
        }
        Due {
            count,
            tail: tail.into(),
        }
    }

    /// Applies every boundary at or before `t`: the current period is
    /// archived and an empty one starts, once per boundary (the periods
    /// past HISTORY dropped). Returns how many boundaries passed.
    pub fn roll_until(&mut self, t: u64) -> u64 {
        let due = self.due(t, true);
        self.apply_due(&due);
        due.count
    }

    /// LB.RESET at `t`: applies the boundaries before `t`, then ends the
    /// current period at `t`. False (nothing changed) when `t` is before
    /// the current period's start.
    pub fn reset_at(&mut self, t: u64) -> bool {
        if self.season.as_deref().is_some_and(|s| t < s.start) {
            return false;
        }
        let due = self.due(t, false);
        self.apply_due(&due);
        if self.season.is_none() {
            self.set_season(
                SeasonOptions {
                    history: 1,
                    ..SeasonOptions::default()
                },
                None,
                None,
                0,
            );
        }
        let start = self.season.as_deref().map_or(0, |s| s.start);
        self.apply_due(&Due {
            count: 1,
            tail: vec![start, t],
        });
        true
    }

    /// Rolls over `due.count` times (see [`Leaderboard::due`]).
    fn apply_due(&mut self, due: &Due) {
        if due.count == 0 {
            return;
        }
        let Some(mut season) = self.season.take() else {
            return;
        };
        // The entries move into a closed period: a capture walking them
        // saves the rest now.
        self.end_snapshot();
        let (n, k) = (season.number, due.count);
        let tail = &due.tail;
        // Periods n .. n+k-1 close; the one numbered n holds the entries.
        // The tail gives the boundaries of the last tail.len()-1 of them.
        let shown = (tail.len() - 1) as u64;
        let first_number = n + k - shown;
        let mut current = Leaderboard::new(self.opts);
        current.ids = std::mem::take(&mut self.ids);
        let closed = std::mem::replace(self, current);
        let mut closed = Some(closed);
        for (i, w) in tail.windows(2).enumerate() {
            let number = first_number + i as u64;
            let board = if number == n {
                closed.take().unwrap_or_else(|| Leaderboard::new(self.opts))
            } else {
                Leaderboard::new(self.opts)
            };
            season.archives.push_back(Archive {
                number,
                start: w[0],
                end: w[1],
                data: ArchiveData::Memory(Box::new(board)),
            });
        }
        season.number = n + k;
        season.start = tail.last().copied().unwrap_or(season.start);
        season.end = next_boundary(&season.opts.schedule, season.opts.zone, season.start);
        season.trim();
        self.season = Some(season);
    }

    /// Gives the board a season exactly as saved (an RDB file or a DUMP
    /// payload): its options, the current period's number, start and end,
    /// and the closed periods, oldest first (those past `history` are
    /// dropped).
    pub fn restore_season(
        &mut self,
        opts: SeasonOptions,
        number: u64,
        start: u64,
        end: Option<u64>,
        archives: Vec<Archive>,
    ) {
        let mut season = Season {
            opts,
            number,
            start,
            end,
            archives: archives.into(),
        };
        season.trim();
        self.season = Some(Box::new(season));
    }

    /// The periods kept at time `now`, the current one first, then the
    /// archives newest first, as they are once the boundaries up to `now`
    /// are applied (without applying them).
    pub fn periods_at(&self, now: u64) -> Vec<PeriodView<'_>> {
        let Some(s) = self.season.as_deref() else {
            return vec![PeriodView {
                number: 1,
                start: 0,
                end: None,
                source: Source::Board(self),
            }];
        };
        let due = self.due(now, true);
        let k = due.count;
        if k == 0 {
            let mut out = Vec::with_capacity(s.archives.len() + 1);
            out.push(PeriodView {
                number: s.number,
                start: s.start,
                end: s.end,
                source: Source::Board(self),
            });
            out.extend(s.archives.iter().rev().map(archive_view));
            return out;
        }
        let tail = &due.tail;
        let last = tail.last().copied().unwrap_or(s.start);
        let mut out = vec![PeriodView {
            number: s.number + k,
            start: last,
            end: next_boundary(&s.opts.schedule, s.opts.zone, last),
            source: Source::Empty,
        }];
        let shown = (tail.len() - 1) as u64;
        let first_number = s.number + k - shown;
        for (i, w) in tail.windows(2).enumerate().rev() {
            let number = first_number + i as u64;
            out.push(PeriodView {
                number,
                start: w[0],
                end: Some(w[1]),
                source: if number == s.number {
                    Source::Board(self)
                } else {
                    Source::Empty
                },
            });
        }
        if first_number == s.number {
            out.extend(s.archives.iter().rev().map(archive_view));
        }
        out.truncate(s.opts.history as usize + 1);
        out
    }

    /// The period `back` periods before the current one at time `now`
    /// (0: the current one); None when it is not kept.
    pub fn period_at(&self, now: u64, back: u64) -> Option<PeriodView<'_>> {
        if back == 0 {
            // The common case without building the list.
            let fresh = self
                .season
                .as_deref()
                .is_none_or(|s| s.end.is_none_or(|e| e > now));
            if fresh {
                let s = self.season.as_deref();
                return Some(PeriodView {
                    number: s.map_or(1, |s| s.number),
                    start: s.map_or(0, |s| s.start),
                    end: s.and_then(|s| s.end),
                    source: Source::Board(self),
                });
            }
        }
        let i = usize::try_from(back).ok()?;
        self.periods_at(now).get(i).copied()
    }

    /// Bytes of the archives (in [`Leaderboard::memory_usage`]).
    pub(super) fn season_memory(&self) -> usize {
        self.season.as_deref().map_or(0, |s| {
            alloc_size(std::mem::size_of::<Season>())
                + alloc_size(s.archives.capacity() * std::mem::size_of::<Archive>())
                + s.archives.iter().map(Archive::memory_usage).sum::<usize>()
        })
    }

    /// Entries held in memory: the current period and the archives in
    /// memory.
    pub fn entries_all_periods(&self) -> u64 {
        self.count()
            + self.season.as_deref().map_or(0, |s| {
                s.archives
                    .iter()
                    .filter_map(|a| match &a.data {
                        ArchiveData::Memory(b) => Some(b.count()),
                        _ => None,
                    })
                    .sum()
            })
    }

    /// Archives in files: how many, and their bytes.
    pub fn disk_usage(&self) -> (u64, u64) {
        let mut out = (0, 0);
        for a in self.season.as_deref().into_iter().flat_map(|s| &s.archives) {
            if let ArchiveData::Disk(d) = &a.data {
                out.0 += 1;
                out.1 += d.file_size();
            }
        }
        out
    }

    /// Moves the closed periods where the board's ARCHIVE setting says:
    /// with DISK, each one in memory is written to a file in `folder`
    /// (for `key` in database `db`) and leaves memory; with MEMORY, each
    /// one in a file is read back (the file is deleted when no copy of the
    /// board refers to it). A period that cannot be moved stays where it
    /// is; the errors are returned (to be logged). First, with
    /// `open_refs` (loading an AOF base), the periods read as references
    /// to their files are opened: a file that is missing, corrupt, another
    /// period's or not of the checksum named leaves its period
    /// unavailable; without it (a DUMP payload) a reference is refused.
    pub fn place_archives(
        &mut self,
        folder: &Path,
        key: &[u8],
        db: u64,
        open_refs: bool,
    ) -> Vec<String> {
        let opts = self.opts;
        let Some(s) = self.season.as_deref_mut() else {
            return Vec::new();
        };
        let mut errors = Vec::new();
        for a in s.archives.iter_mut() {
            if let ArchiveData::Unavailable(u) = &mut a.data {
                if let Some(crc) = u.crc.take() {
                    u.reason = if !open_refs {
                        "a reference to an archive file is only read from the AOF".into()
                    } else if !disk::plain_name(&u.name) {
                        format!("invalid archive file name '{}'", u.name)
                    } else {
                        match disk::open_shared(&folder.join(&u.name)) {
                            Err(e) => e.to_string(),
                            Ok(d) if d.crc() != crc => {
                                format!("checksum {:016x}, the AOF says {crc:016x}", d.crc())
                            }
                            Ok(d)
                                if (d.header().number, d.header().start, d.header().end)
                                    != (a.number, a.start, a.end) =>
                            {
                                format!(
                                    "holds period {} ({}..{}), the AOF says period {} ({}..{})",
                                    d.header().number,
                                    d.header().start,
                                    d.header().end,
                                    a.number,
                                    a.start,
                                    a.end
                                )
                            }
                            Ok(d) => {
                                a.data = ArchiveData::Disk(d);
                                continue;
                            }
                        }
                    };
                }
            }
            let moved = match (&a.data, s.opts.archive) {
                (ArchiveData::Memory(b), ArchiveMode::Disk) => {
                    disk::write(folder, key, db, a.number, a.start, a.end, b)
                        .map(ArchiveData::Disk)
                        .map_err(|e| {
                            format!(
                                "can't write period {} of '{}' to {}: {e}",
                                a.number,
                                String::from_utf8_lossy(key),
                                folder.display()
                            )
                        })
                }
                (ArchiveData::Disk(d), ArchiveMode::Memory) => d
                    .to_board(opts)
                    .map(|b| ArchiveData::Memory(Box::new(b)))
                    .map_err(|e| {
                        format!(
                            "can't read period {} of '{}' from {}: {e}",
                            a.number,
                            String::from_utf8_lossy(key),
                            d.path().display()
                        )
                    }),
                _ => continue,
            };
            match moved {
                Ok(d) => a.data = d,
                Err(e) => errors.push(e),
            }
        }
        errors
    }

    /// Replaces the newest closed period's entries by `data` (the AOF's
    /// LB.ATTACH, right after the period was closed empty); false when the
    /// board has no closed period.
    pub fn attach_newest(&mut self, data: ArchiveData) -> bool {
        match self
            .season
            .as_deref_mut()
            .and_then(|s| s.archives.back_mut())
        {
            Some(a) => {
                a.data = data;
                true
            }
            None => false,
        }
    }
}

fn archive_view(a: &Archive) -> PeriodView<'_> {
    PeriodView {
        number: a.number,
        start: a.start,
        end: Some(a.end),
        source: match &a.data {
            ArchiveData::Memory(b) => Source::Board(b),
            ArchiveData::Disk(d) => Source::Disk(d),
            ArchiveData::Unavailable(u) => Source::Unavailable(u),
        },
    }
}
