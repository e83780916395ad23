//! Small argument parsers shared by every family: integers and floats with
//! Redis's error lines, option words matched case-insensitively.

use std::time::Duration;

use super::long_double::LongDouble;
use crate::error::CmdError;
use crate::protocol::number;
use crate::protocol::number::strtod;

/// An integer argument (`ERR value is not an integer or out of range`).
pub fn int(arg: &[u8]) -> Result<i64, CmdError> {
    number::parse_i64(arg).ok_or(CmdError::NotInteger)
}

/// A non-negative integer argument with a custom error.
pub fn int_with(arg: &[u8], err: impl FnOnce() -> CmdError) -> Result<i64, CmdError> {
    number::parse_i64(arg).ok_or_else(err)
}

/// A double argument (`ERR value is not a valid float`).
pub fn float(arg: &[u8]) -> Result<f64, CmdError> {
    number::parse_f64(arg).ok_or(CmdError::NotFloat)
}

/// Whether `arg` is the option word `word` (ASCII case-insensitive).
pub fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// A lossy UTF-8 rendering for error messages.
pub fn text(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).into_owned()
}

/// The options of SCAN / SSCAN / ZSCAN after the cursor.
pub struct ScanOptions<'a> {
    /// COUNT: at least 1, 10 when not given.
    pub count: usize,
    /// MATCH; `None` for `*` too, as Redis then skips matching.
    pub pattern: Option<&'a [u8]>,
    /// TYPE (SCAN only).
    pub type_name: Option<&'a [u8]>,
}

/// Parses `opts` (what follows the cursor) as SCAN's options, TYPE only
/// when `allow_type`; a bad word or a missing value is a syntax error.
pub fn scan_options<'a>(opts: &[&'a [u8]], allow_type: bool) -> Result<ScanOptions<'a>, CmdError> {
    let mut o = ScanOptions {
        count: 10,
        pattern: None,
        type_name: None,
    };
    for pair in opts.chunks(2) {
        let &[name, value] = pair else {
            return Err(CmdError::Syntax);
        };
        if is(name, "count") {
            let n = int(value)?;
            if n < 1 {
                return Err(CmdError::Syntax);
            }
            o.count = usize::try_from(n).unwrap_or(usize::MAX);
        } else if is(name, "match") {
            o.pattern = (value != b"*").then_some(value);
        } else if allow_type && is(name, "type") {
            o.type_name = Some(value);
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(o)
}

/// A SCAN / SSCAN / ZSCAN cursor as Redis reads it (`strtoul` base 10): an
/// optional sign and decimal digits only (`+5` is 5, `-1` wraps to 2^64-1,
/// `007` is 7), nothing else; the empty string reads as 0.
pub fn scan_cursor(arg: &[u8]) -> Option<u64> {
    let (neg, digits) = match arg.split_first() {
        None => return Some(0),
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        Some(_) => (false, arg),
    };
    if digits.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// A blocking command's timeout in seconds, read as Redis 7.0's
/// `getTimeoutFromObjectOrReply` does: a long double, times 1000, truncated
/// to whole milliseconds. `None` waits forever (0, or anything under a
/// millisecond).
pub fn timeout(arg: &[u8]) -> Result<Option<Duration>, CmdError> {
    if LongDouble::string2ld(arg).is_none() {
        return Err(CmdError::line("ERR timeout is not a float or out of range"));
    }
    let secs = strtod(arg).value;
    let ms = secs * 1000.0;
    // C's conversion to long long of a value out of its range (infinity
    // included) gives LLONG_MIN on x86-64: a "negative" timeout. Redis
    // multiplies in long double, exact up to 9223372036854775 s, where a
    // double already rounds up to 2^63 ms: those still count as in range.
    const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
    const LAST_SECOND: f64 = 9_223_372_036_854_775.0;
    let ms = if (-TWO_POW_63..TWO_POW_63).contains(&ms) {
        ms.trunc() as i64
    } else if secs > 0.0 && secs <= LAST_SECOND {
        i64::MAX
    } else {
        i64::MIN
    };
    if ms < 0 {
        return Err(CmdError::line("ERR timeout is negative"));
    }
    // Beyond a century is forever in practice (and keeps Instant arithmetic
    // from overflowing).
    const CENTURY_MS: i64 = 100 * 366 * 24 * 3600 * 1000;
    Ok(match ms {
        0 => None,
        ms if ms > CENTURY_MS => None,
        ms => Some(Duration::from_millis(ms as u64)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_cursor_reads_like_strtoul() {
        assert_eq!(scan_cursor(b"0"), Some(0));
        assert_eq!(scan_cursor(b""), Some(0));
        assert_eq!(scan_cursor(b"+7"), Some(7));
        assert_eq!(scan_cursor(b"007"), Some(7));
        assert_eq!(scan_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(scan_cursor(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(scan_cursor(b"18446744073709551616"), None);
        assert_eq!(scan_cursor(b" 0"), None);
        assert_eq!(scan_cursor(b"1 "), None);
        assert_eq!(scan_cursor(b"0x"), None);
        assert_eq!(scan_cursor(b"-"), None);
        assert_eq!(scan_cursor(b"x"), None);
    }

    #[test]
    fn timeouts_as_redis_reads_them() {
        assert_eq!(timeout(b"0"), Ok(None));
        assert_eq!(timeout(b"0.0001"), Ok(None));
        assert_eq!(timeout(b"-0.0001"), Ok(None));
        assert_eq!(timeout(b"1.5"), Ok(Some(Duration::from_millis(1500))));
        assert_eq!(timeout(b"0x10"), Ok(Some(Duration::from_secs(16))));
        let negative = Err(CmdError::line("ERR timeout is negative"));
        assert_eq!(timeout(b"-1"), negative);
        assert_eq!(timeout(b"inf"), negative);
        assert_eq!(timeout(b"1e30"), negative);
        let junk = Err(CmdError::line("ERR timeout is not a float or out of range"));
        for arg in [&b"abc"[..], b"nan", b" 1", b"1 ", b""] {
            assert_eq!(timeout(arg), junk);
        }
        assert_eq!(timeout(b"9223372036854775"), Ok(None));
    }
}

/// The parsed `numkeys key... <end> [COUNT count]` of ZMPOP, BZMPOP, LMPOP
/// and BLMPOP; `E` is the family's end (MIN|MAX, LEFT|RIGHT).
#[derive(Debug)]
pub struct MPop<'a, E> {
    /// The keys, in order.
    pub keys: &'a [&'a [u8]],
    /// Which end to pop from.
    pub end: E,
    /// How many to pop (1 without COUNT).
    pub count: usize,
}

/// Parses the `MPop` arguments from the numkeys at `numkeys_idx`, with
/// Redis's checks in Redis's order; `parse_end` reads the end word.
pub fn mpop<'a, E>(
    a: &'a [&'a [u8]],
    numkeys_idx: usize,
    parse_end: impl Fn(&[u8]) -> Result<E, CmdError>,
) -> Result<MPop<'a, E>, CmdError> {
    let numkeys = int(a[numkeys_idx])
        .ok()
        .filter(|&n| n >= 1)
        .ok_or_else(|| CmdError::line("ERR numkeys should be greater than 0"))?;
    let first = numkeys_idx + 1;
    let where_idx = usize::try_from(numkeys)
        .ok()
        .and_then(|n| first.checked_add(n))
        .filter(|&i| i < a.len())
        .ok_or(CmdError::Syntax)?;
    let end = parse_end(a[where_idx])?;
    let mut count = None;
    let mut j = where_idx + 1;
    while j < a.len() {
        match a.get(j + 1) {
            Some(v) if count.is_none() && is(a[j], "count") => {
                let n = int(v)
                    .ok()
                    .filter(|&n| n >= 1)
                    .ok_or_else(|| CmdError::line("ERR count should be greater than 0"))?;
                count = Some(usize::try_from(n).unwrap_or(usize::MAX));
                j += 2;
            }
            _ => return Err(CmdError::Syntax),
        }
    }
    Ok(MPop {
        keys: &a[first..where_idx],
        end,
        count: count.unwrap_or(1),
    })
}
