//! Reset schedules of seasonal boards (issue 17): when a period ends.
//! Pure functions of a time in unix ms; no clock here.
//!
//! - `EVERY ms`: boundaries at the multiples of `ms` since the epoch.
//! - `DAILY`, `WEEKLY` (Monday), `MONTHLY` (the 1st): local midnight in the
//!   board's zone; `CRON`: the minutes a 5-field cron line names, local.
//! - Zones: a fixed UTC offset (`+08:00`) or an IANA name, whose
//!   daylight-saving changes are followed: a local time that does not
//!   exist (spring forward) moves to the first minute after the gap that
//!   does; one that exists twice (fall back) is its first occurrence.
//! - [`next_boundary`]: the first boundary strictly after a time; `NEVER`
//!   has none.

use std::fmt;

use chrono::{DateTime, Datelike, FixedOffset, NaiveDate, NaiveDateTime, TimeZone, Timelike};

/// A board's time zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zone {
    /// A fixed offset east of UTC, in seconds.
    Offset(i32),
    /// An IANA zone (daylight saving followed).
    Named(chrono_tz::Tz),
}

impl Default for Zone {
    fn default() -> Self {
        Zone::Offset(0)
    }
}

impl Zone {
    /// `+08:00`, `-05:30`, `UTC`, `Z` or an IANA name (as spelled in the
    /// tz database: `America/New_York`).
    pub fn parse(s: &str) -> Option<Zone> {
        if s.eq_ignore_ascii_case("UTC") || s == "Z" {
            return Some(Zone::Offset(0));
        }
        let b = s.as_bytes();
        if b.len() == 6 && (b[0] == b'+' || b[0] == b'-') && b[3] == b':' {
            let h: i32 = s.get(1..3)?.parse().ok()?;
            let m: i32 = s.get(4..6)?.parse().ok()?;
            if !s[1..3].bytes().all(|c| c.is_ascii_digit())
                || !s[4..6].bytes().all(|c| c.is_ascii_digit())
                || h > 14
                || m > 59
            {
                return None;
            }
            let secs = h * 3600 + m * 60;
            return Some(Zone::Offset(if b[0] == b'-' { -secs } else { secs }));
        }
        s.parse::<chrono_tz::Tz>().ok().map(Zone::Named)
    }

    /// The local wall-clock time at `t` (unix ms).
    fn local(self, t: u64) -> Option<NaiveDateTime> {
        let utc = DateTime::from_timestamp_millis(i64::try_from(t).ok()?)?;
        Some(match self {
            Zone::Offset(s) => utc.with_timezone(&FixedOffset::east_opt(s)?).naive_local(),
            Zone::Named(tz) => utc.with_timezone(&tz).naive_local(),
        })
    }

    /// The first instant (unix ms) whose local time is `local`, or, in a
    /// daylight-saving gap, the first minute after the gap.
    fn instant(self, local: NaiveDateTime) -> Option<u64> {
        let mut l = local;
        // A gap is at most a few hours; a day of minutes is plenty.
        for _ in 0..=1440 {
            let found = match self {
                Zone::Offset(s) => FixedOffset::east_opt(s)?
                    .from_local_datetime(&l)
                    .earliest()
                    .map(|d| d.timestamp_millis()),
                Zone::Named(tz) => tz
                    .from_local_datetime(&l)
                    .earliest()
                    .map(|d| d.timestamp_millis()),
            };
            if let Some(ms) = found {
                return u64::try_from(ms).ok();
            }
            l += chrono::TimeDelta::minutes(1);
        }
        None
    }
}

impl fmt::Display for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Zone::Offset(s) => {
                let sign = if *s < 0 { '-' } else { '+' };
                let a = s.unsigned_abs();
                write!(f, "{sign}{:02}:{:02}", a / 3600, a % 3600 / 60)
            }
            Zone::Named(tz) => f.write_str(tz.name()),
        }
    }
}

/// A 5-field cron line: minute hour day-of-month month day-of-week, each a
/// set of allowed values (bit i: value i).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    minutes: u64,
    hours: u32,
    days: u32,
    months: u16,
    weekdays: u8,
    /// Day-of-month and day-of-week both restricted: a day matching
    /// either matches (as in cron).
    either_day: bool,
    text: String,
}

impl Cron {
    /// Parses `*`, `n`, `a-b`, `*/s`, `a-b/s` and comma lists; day of
    /// week 0-7 (0 and 7: Sunday). None when malformed.
    pub fn parse(line: &str) -> Option<Cron> {
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        if f.len() != 5 {
            return None;
        }
        let minutes = field(f[0], 0, 59)?;
        let hours = field(f[1], 0, 23)? as u32;
        let days = field(f[2], 1, 31)? as u32;
        let months = field(f[3], 1, 12)? as u16;
        let mut wd = field(f[4], 0, 7)?;
        if wd & (1 << 7) != 0 {
            wd |= 1;
        }
        Some(Cron {
            minutes,
            hours,
            days,
            months,
            weekdays: (wd & 0x7f) as u8,
            either_day: !f[2].starts_with('*') && !f[4].starts_with('*'),
            text: f.join(" "),
        })
    }

    fn day_matches(&self, d: NaiveDate) -> bool {
        let dom = self.days & (1 << d.day()) != 0;
        let dow = self.weekdays & (1 << d.weekday().num_days_from_sunday()) != 0;
        if self.either_day {
            dom || dow
        } else {
            dom && dow
        }
    }

    /// The first local minute at or after `from` that the line names,
    /// searching at most about eight years ahead.
    fn next_local(&self, from: NaiveDateTime) -> Option<NaiveDateTime> {
        let mut day = from.date();
        let mut minute = from.hour() * 60 + from.minute();
        for _ in 0..(8 * 366) {
            if self.months & (1 << day.month()) != 0 && self.day_matches(day) {
                while minute < 1440 {
                    let (h, m) = (minute / 60, minute % 60);
                    if self.hours & (1 << h) == 0 {
                        minute = (h + 1) * 60;
                        continue;
                    }
                    if self.minutes & (1 << m) != 0 {
                        return day.and_hms_opt(h, m, 0);
                    }
                    minute += 1;
                }
            }
            day = day.succ_opt()?;
            minute = 0;
        }
        None
    }
}

/// One cron field as a bit set of the values in `lo..=hi`.
fn field(s: &str, lo: u32, hi: u32) -> Option<u64> {
    let mut bits = 0u64;
    for part in s.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, st)) => (r, st.parse::<u32>().ok().filter(|&x| x > 0)?),
            None => (part, 1),
        };
        let (a, b) = if range == "*" {
            (lo, hi)
        } else if let Some((a, b)) = range.split_once('-') {
            (a.parse().ok()?, b.parse().ok()?)
        } else {
            let a: u32 = range.parse().ok()?;
            (a, if part.contains('/') { hi } else { a })
        };
        if a < lo || b > hi || a > b {
            return None;
        }
        let mut v = a;
        while v <= b {
            bits |= 1 << v;
            v += step;
        }
    }
    Some(bits)
}

/// When a board's periods end.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Schedule {
    /// Only LB.RESET ends a period.
    #[default]
    Never,
    /// Every `ms` milliseconds (at the multiples of `ms` since the epoch).
    Every(u64),
    /// Local midnight.
    Daily,
    /// Monday, local midnight.
    Weekly,
    /// The 1st of the month, local midnight.
    Monthly,
    /// The minutes a cron line names, local time.
    Cron(Box<Cron>),
}

impl Schedule {
    /// The words LB.CREATE takes for it (and the AOF rewrite writes).
    pub fn words(&self) -> Vec<String> {
        match self {
            Schedule::Never => vec!["NEVER".into()],
            Schedule::Every(ms) => vec!["EVERY".into(), ms.to_string()],
            Schedule::Daily => vec!["DAILY".into()],
            Schedule::Weekly => vec!["WEEKLY".into()],
            Schedule::Monthly => vec!["MONTHLY".into()],
            Schedule::Cron(c) => vec!["CRON".into(), c.text.clone()],
        }
    }
}

/// The first boundary of `schedule` in `zone` strictly after `t` (unix
/// ms); None for NEVER (or past the year 262143).
pub fn next_boundary(schedule: &Schedule, zone: Zone, t: u64) -> Option<u64> {
    let midnight = |d: NaiveDate| zone.instant(d.and_hms_opt(0, 0, 0)?);
    match schedule {
        Schedule::Never => None,
        Schedule::Every(ms) => (t / ms.max(&1)).checked_add(1)?.checked_mul(*ms.max(&1)),
        Schedule::Daily | Schedule::Weekly | Schedule::Monthly => {
            let today = zone.local(t)?.date();
            // The day that starts the calendar period holding t, then the
            // following ones: the first whose local midnight is after t
            // (usually the second; the first when its midnight fell in a
            // daylight-saving gap that t is in).
            let mut d = match schedule {
                Schedule::Daily => today,
                Schedule::Weekly => today.checked_sub_days(chrono::Days::new(
                    today.weekday().num_days_from_monday() as u64,
                ))?,
                _ => today.with_day(1)?,
            };
            for _ in 0..3 {
                if let Some(b) = midnight(d).filter(|&b| b > t) {
                    return Some(b);
                }
                d = match schedule {
                    Schedule::Daily => d.succ_opt()?,
                    Schedule::Weekly => d.checked_add_days(chrono::Days::new(7))?,
                    _ => d.checked_add_months(chrono::Months::new(1))?,
                };
            }
            None
        }
        Schedule::Cron(c) => {
            let mut from = zone.local(t)?.with_second(0)?.with_nanosecond(0)?;
            for _ in 0..4 {
                from += chrono::TimeDelta::minutes(1);
                let local = c.next_local(from)?;
                let b = zone.instant(local)?;
                if b > t {
                    return Some(b);
                }
                from = local;
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use proptest::prelude::*;

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> u64 {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0)
            .single()
            .map(|x| x.timestamp_millis() as u64)
            .unwrap_or(0)
    }

    fn ny() -> Zone {
        Zone::parse("America/New_York").unwrap_or_default()
    }

    const H: u64 = 3_600_000;

    #[test]
    fn zones_parse_and_print() {
        assert_eq!(Zone::parse("+08:00"), Some(Zone::Offset(8 * 3600)));
        assert_eq!(
            Zone::parse("-05:30"),
            Some(Zone::Offset(-(5 * 3600 + 1800)))
        );
        assert_eq!(Zone::parse("UTC"), Some(Zone::Offset(0)));
        assert_eq!(Zone::parse("+8:00"), None);
        assert_eq!(Zone::parse("+15:00"), None);
        assert_eq!(Zone::parse("+08:60"), None);
        assert_eq!(Zone::parse("Mars/Olympus"), None);
        assert_eq!(ny().to_string(), "America/New_York");
        assert_eq!(Zone::Offset(-(5 * 3600 + 1800)).to_string(), "-05:30");
    }

    #[test]
    fn daily_in_a_fixed_offset() {
        let z = Zone::parse("+08:00").unwrap_or_default();
        // 2025-03-09 10:00 UTC is 18:00 in +08:00; the next local midnight
        // is 2025-03-09 16:00 UTC.
        let t = utc(2025, 3, 9, 10, 0);
        assert_eq!(
            next_boundary(&Schedule::Daily, z, t),
            Some(utc(2025, 3, 9, 16, 0))
        );
        // A boundary is not after itself.
        let b = utc(2025, 3, 9, 16, 0);
        assert_eq!(next_boundary(&Schedule::Daily, z, b), Some(b + 24 * H));
        assert_eq!(next_boundary(&Schedule::Daily, z, b - 1), Some(b));
    }

    #[test]
    fn daily_across_new_york_spring_forward_and_fall_back() {
        let z = ny();
        // 2025-03-09: clocks go from 02:00 EST to 03:00 EDT; that day is
        // 23 hours long (midnight 05:00 UTC to midnight 04:00 UTC).
        let mar9 = utc(2025, 3, 9, 5, 0);
        let mar10 = utc(2025, 3, 10, 4, 0);
        assert_eq!(next_boundary(&Schedule::Daily, z, mar9 - 1), Some(mar9));
        assert_eq!(next_boundary(&Schedule::Daily, z, mar9), Some(mar10));
        assert_eq!(mar10 - mar9, 23 * H);
        // 2025-11-02: 02:00 EDT back to 01:00 EST; 25 hours.
        let nov2 = utc(2025, 11, 2, 4, 0);
        let nov3 = utc(2025, 11, 3, 5, 0);
        assert_eq!(next_boundary(&Schedule::Daily, z, nov2), Some(nov3));
        assert_eq!(nov3 - nov2, 25 * H);
        // From inside the repeated hour (01:30 EST, the second one).
        assert_eq!(
            next_boundary(&Schedule::Daily, z, utc(2025, 11, 2, 6, 30)),
            Some(nov3)
        );
    }

    #[test]
    fn a_midnight_in_a_gap_moves_past_it() {
        // America/Havana springs forward at midnight (2025-03-09 00:00
        // CST becomes 01:00 CDT): that day starts at 01:00 local.
        let z = Zone::parse("America/Havana").unwrap_or_default();
        let b = next_boundary(&Schedule::Daily, z, utc(2025, 3, 8, 12, 0));
        assert_eq!(b, Some(utc(2025, 3, 9, 5, 0)));
    }

    #[test]
    fn weekly_and_monthly() {
        // 2025-11-26 is a Wednesday; the next Monday is 2025-12-01.
        let t = utc(2025, 11, 26, 12, 0);
        assert_eq!(
            next_boundary(&Schedule::Weekly, Zone::default(), t),
            Some(utc(2025, 12, 1, 0, 0))
        );
        assert_eq!(
            next_boundary(&Schedule::Monthly, Zone::default(), t),
            Some(utc(2025, 12, 1, 0, 0))
        );
        // New York, across the fall-back day: the next month starts at
        // 05:00 UTC (EST).
        assert_eq!(
            next_boundary(&Schedule::Monthly, ny(), utc(2025, 10, 15, 0, 0)),
            Some(utc(2025, 11, 1, 4, 0))
        );
        assert_eq!(
            next_boundary(&Schedule::Monthly, ny(), utc(2025, 11, 1, 4, 0)),
            Some(utc(2025, 12, 1, 5, 0))
        );
    }

    #[test]
    fn every_and_never() {
        assert_eq!(
            next_boundary(&Schedule::Every(2000), Zone::default(), 0),
            Some(2000)
        );
        assert_eq!(
            next_boundary(&Schedule::Every(2000), Zone::default(), 1999),
            Some(2000)
        );
        assert_eq!(
            next_boundary(&Schedule::Every(2000), Zone::default(), 2000),
            Some(4000)
        );
        assert_eq!(next_boundary(&Schedule::Never, Zone::default(), 5), None);
    }

    #[test]
    fn cron_lines() {
        assert!(Cron::parse("* * * *").is_none());
        assert!(Cron::parse("60 * * * *").is_none());
        assert!(Cron::parse("*/0 * * * *").is_none());
        assert!(Cron::parse("5-1 * * * *").is_none());
        let c = |s: &str| Schedule::Cron(Box::new(Cron::parse(s).unwrap_or_else(|| panic!("{s}"))));
        let t = utc(2025, 11, 26, 12, 7); // a Wednesday
        assert_eq!(
            next_boundary(&c("*/15 * * * *"), Zone::default(), t),
            Some(utc(2025, 11, 26, 12, 15))
        );
        assert_eq!(
            next_boundary(&c("30 9 * * 1-5"), Zone::default(), t),
            Some(utc(2025, 11, 27, 9, 30))
        );
        // Sunday as 0 or 7.
        assert_eq!(
            next_boundary(&c("0 0 * * 7"), Zone::default(), t),
            Some(utc(2025, 11, 30, 0, 0))
        );
        assert_eq!(
            next_boundary(&c("0 0 * * 0"), Zone::default(), t),
            Some(utc(2025, 11, 30, 0, 0))
        );
        // Day of month or day of week when both are given.
        assert_eq!(
            next_boundary(&c("0 0 1 * 5"), Zone::default(), t),
            Some(utc(2025, 11, 28, 0, 0))
        );
        // Local time in a zone; 02:30 does not exist on 2025-03-09 in New
        // York: the first minute after the gap (03:00 EDT).
        assert_eq!(
            next_boundary(&c("30 2 * * *"), ny(), utc(2025, 3, 9, 5, 0)),
            Some(utc(2025, 3, 9, 7, 0))
        );
        assert_eq!(next_boundary(&c("0 0 30 2 *"), Zone::default(), t), None);
    }

    fn schedules() -> impl Strategy<Value = (Schedule, Zone)> {
        let sched = prop_oneof![
            (1u64..100_000_000).prop_map(Schedule::Every),
            Just(Schedule::Daily),
            Just(Schedule::Weekly),
            Just(Schedule::Monthly),
            Just(Schedule::Cron(Box::new(
                Cron::parse("15 */6 * * *").unwrap_or_else(|| panic!())
            ))),
        ];
        let zone = prop_oneof![
            Just(Zone::default()),
            Just(Zone::Offset(8 * 3600)),
            Just(Zone::Offset(-(9 * 3600 + 1800))),
            Just(ny()),
            Just(Zone::parse("Europe/London").unwrap_or_default()),
            Just(Zone::parse("Australia/Lord_Howe").unwrap_or_default()),
        ];
        (sched, zone)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// The next boundary is after t, and no boundary lies between:
        /// from any time in (t, b) the next one is still b; calendar
        /// boundaries fall on the local day's start.
        #[test]
        fn next_boundary_is_the_first_after(
            (s, z) in schedules(),
            t in 946_684_800_000u64..4_102_444_800_000,
            frac in 0.0f64..1.0,
        ) {
            let b = next_boundary(&s, z, t);
            prop_assert!(b.is_some());
            let b = b.unwrap_or(0);
            prop_assert!(b > t);
            let u = t + ((b - t - 1) as f64 * frac) as u64;
            prop_assert_eq!(next_boundary(&s, z, u), Some(b));
            prop_assert_eq!(next_boundary(&s, z, b - 1), Some(b));
            if matches!(s, Schedule::Daily | Schedule::Weekly | Schedule::Monthly) {
                let local = z.local(b).unwrap_or_default();
                // Midnight, or the end of a gap that swallowed it.
                prop_assert!(local.hour() <= 1 && (local.minute() == 0 || local.minute() == 30));
                let days = (b - t) / 86_400_000;
                let limit = match s { Schedule::Daily => 1, Schedule::Weekly => 7, _ => 31 };
                prop_assert!(days <= limit);
            }
        }
    }
}
