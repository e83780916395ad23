//! Small argument parsers shared by every family: integers and floats with
//! Redis's error lines, option words matched case-insensitively.

use crate::error::CmdError;
use crate::protocol::number;

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

#[cfg(test)]
mod tests {
    use super::scan_cursor;

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
}
