//! Numbers as Redis reads and writes them: `string2ll` integers, `strtod`
//! doubles, and `%.17g` score formatting.
//!
//! Rust's own parsers accept and reject different strings than libc's
//! (`+5`, `0x1p3`, `1e400`), and `f64::to_string` prints the shortest form
//! while Redis 7.0 prints 17 significant digits, so every number that crosses
//! the wire goes through here.

use std::io::Write;

/// Parses a signed 64-bit integer exactly as Redis's `string2ll`: an optional
/// `-`, no `+`, no leading zeros, no spaces, no overflow.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.first()? {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    match digits {
        [] => return None,
        [b'0'] if !neg => return Some(0),
        [b'0', ..] => return None,
        _ => {}
    }
    if digits.len() > 19 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    if neg {
        if v > i64::MAX as u64 + 1 {
            None
        } else {
            Some((v as i64).wrapping_neg())
        }
    } else if v > i64::MAX as u64 {
        None
    } else {
        Some(v as i64)
    }
}

/// Parses an unsigned 64-bit integer with `string2ull`'s rules.
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.first() == Some(&b'-') {
        return None;
    }
    match s {
        [] => None,
        [b'0'] => Some(0),
        [b'0', ..] => None,
        _ => {
            let mut v: u64 = 0;
            for &c in s {
                if !c.is_ascii_digit() {
                    return None;
                }
                v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
            }
            Some(v)
        }
    }
}

/// What `strtod` read from the front of a string.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Strtod {
    /// The value (may be NaN or infinite).
    pub value: f64,
    /// Bytes consumed; 0 when nothing could be read.
    pub consumed: usize,
    /// libc would set `errno = ERANGE` (overflow, or underflow to zero).
    pub range_error: bool,
}

/// Reads the longest prefix of `s` that C's `strtod` would read (after
/// optional leading white space): decimal with exponent, `inf`, `infinity`,
/// `nan`, and hexadecimal floats.
pub fn strtod(s: &[u8]) -> Strtod {
    let none = Strtod {
        value: 0.0,
        consumed: 0,
        range_error: false,
    };
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let start = i;
    let mut neg = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        neg = s[i] == b'-';
        i += 1;
    }
    let sign = if neg { -1.0 } else { 1.0 };
    let rest = &s[i..];
    if starts_with_ci(rest, b"infinity") {
        return Strtod {
            value: sign * f64::INFINITY,
            consumed: i + 8,
            range_error: false,
        };
    }
    if starts_with_ci(rest, b"inf") {
        return Strtod {
            value: sign * f64::INFINITY,
            consumed: i + 3,
            range_error: false,
        };
    }
    if starts_with_ci(rest, b"nan") {
        let mut end = i + 3;
        // nan(n-char-sequence)
        if s.get(end) == Some(&b'(') {
            let mut j = end + 1;
            while j < s.len() && (s[j].is_ascii_alphanumeric() || s[j] == b'_') {
                j += 1;
            }
            if s.get(j) == Some(&b')') {
                end = j + 1;
            }
        }
        return Strtod {
            value: f64::NAN,
            consumed: end,
            range_error: false,
        };
    }
    if rest.len() >= 2 && rest[0] == b'0' && (rest[1] == b'x' || rest[1] == b'X') {
        if let Some((v, used, re)) = parse_hex_float(&rest[2..]) {
            return Strtod {
                value: sign * v,
                consumed: i + 2 + used,
                range_error: re,
            };
        }
        // "0x" with no hex digits: strtod reads the "0".
        return Strtod {
            value: sign * 0.0,
            consumed: i + 1,
            range_error: false,
        };
    }
    // Decimal: digits [. digits] [e [+-] digits]
    let mut j = i;
    let mut mant_digits = 0;
    let mut nonzero = false;
    while j < s.len() && s[j].is_ascii_digit() {
        nonzero |= s[j] != b'0';
        j += 1;
        mant_digits += 1;
    }
    if j < s.len() && s[j] == b'.' {
        j += 1;
        while j < s.len() && s[j].is_ascii_digit() {
            nonzero |= s[j] != b'0';
            j += 1;
            mant_digits += 1;
        }
    }
    if mant_digits == 0 {
        return none;
    }
    if j < s.len() && (s[j] == b'e' || s[j] == b'E') {
        let mut k = j + 1;
        if k < s.len() && (s[k] == b'+' || s[k] == b'-') {
            k += 1;
        }
        let exp_start = k;
        while k < s.len() && s[k].is_ascii_digit() {
            k += 1;
        }
        if k > exp_start {
            j = k;
        }
    }
    let text = match std::str::from_utf8(&s[start..j]) {
        Ok(t) => t,
        Err(_) => return none,
    };
    // Rust's parser rejects a trailing '.', libc accepts it.
    let value = text.strip_suffix('.').unwrap_or(text).parse::<f64>();
    let Ok(value) = value else { return none };
    let range_error = value.is_infinite()
        || (value == 0.0 && nonzero)
        || (value != 0.0 && value.abs() < f64::MIN_POSITIVE);
    Strtod {
        value,
        consumed: j,
        range_error,
    }
}

fn starts_with_ci(s: &[u8], word: &[u8]) -> bool {
    s.len() >= word.len() && s[..word.len()].eq_ignore_ascii_case(word)
}

/// Hexadecimal float body after `0x`: returns value, bytes used, range error.
fn parse_hex_float(s: &[u8]) -> Option<(f64, usize, bool)> {
    let mut i = 0;
    let mut mant: u64 = 0;
    let mut exp: i64 = 0;
    let mut digits = 0;
    let mut dropped_nonzero = false;
    let mut seen_point = false;
    while i < s.len() {
        let c = s[i];
        if c == b'.' && !seen_point {
            seen_point = true;
            i += 1;
            continue;
        }
        let Some(d) = (c as char).to_digit(16) else {
            break;
        };
        digits += 1;
        if mant >> 56 == 0 {
            mant = mant * 16 + d as u64;
            if seen_point {
                exp -= 4;
            }
        } else {
            dropped_nonzero |= d != 0;
            if !seen_point {
                exp += 4;
            }
        }
        i += 1;
    }
    if digits == 0 {
        return None;
    }
    if i < s.len() && (s[i] == b'p' || s[i] == b'P') {
        let mut k = i + 1;
        let mut eneg = false;
        if k < s.len() && (s[k] == b'+' || s[k] == b'-') {
            eneg = s[k] == b'-';
            k += 1;
        }
        let es = k;
        let mut e: i64 = 0;
        while k < s.len() && s[k].is_ascii_digit() {
            e = (e * 10 + (s[k] - b'0') as i64).min(100_000);
            k += 1;
        }
        if k > es {
            exp += if eneg { -e } else { e };
            i = k;
        }
    }
    if dropped_nonzero {
        mant |= 1; // sticky bit for rounding
    }
    let v = (mant as f64) * 2f64.powi(exp.clamp(-2000, 2000) as i32);
    let re = v.is_infinite() || (v == 0.0 && mant != 0);
    Some((v, i, re))
}

/// Parses a double argument as Redis's `getDoubleFromObject`: the whole string
/// must be read, no leading space, no NaN, no overflow or underflow to zero.
pub fn parse_f64(s: &[u8]) -> Option<f64> {
    if let Some(v) = parse_small_integer_f64(s) {
        return Some(v);
    }
    if s.is_empty() || s[0].is_ascii_whitespace() {
        return None;
    }
    let r = strtod(s);
    if r.consumed != s.len() || r.value.is_nan() {
        return None;
    }
    if r.range_error && (r.value.is_infinite() || r.value == 0.0) {
        return None;
    }
    Some(r.value)
}

/// The common score, an integer of at most 15 digits (leading zeros
/// allowed) with an optional `-`, read without `strtod`: every such value
/// is exact in a double, so this is the value `strtod` reads, at a tenth
/// of the instructions. None for anything else.
fn parse_small_integer_f64(s: &[u8]) -> Option<f64> {
    let (neg, digits) = match s.first()? {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 15 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + (c - b'0') as u64;
    }
    // Below 10^15 < 2^53: the conversion is exact; -0 stays -0.
    let v = v as f64;
    Some(if neg { -v } else { v })
}

/// Longest output of [`format_double`].
pub const MAX_DOUBLE_CHARS: usize = 32;

/// Formats a double as C's `%.17g` (what Redis 7.0 sends for scores), with
/// `inf` / `-inf` for infinities. Returns the bytes written into `buf`.
pub fn format_double(d: f64, buf: &mut [u8; MAX_DOUBLE_CHARS]) -> usize {
    if d.is_nan() {
        buf[..3].copy_from_slice(b"nan");
        return 3;
    }
    if d.is_infinite() {
        let s: &[u8] = if d > 0.0 { b"inf" } else { b"-inf" };
        buf[..s.len()].copy_from_slice(s);
        return s.len();
    }
    // Fast path: integral values below 1e17 print as plain integers.
    if d == d.trunc() && d.abs() < 1e17 {
        if d == 0.0 && d.is_sign_negative() {
            buf[..2].copy_from_slice(b"-0");
            return 2;
        }
        let mut ib = itoa::Buffer::new();
        let s = ib.format(d as i64).as_bytes();
        buf[..s.len()].copy_from_slice(s);
        return s.len();
    }
    let mut sci = [0u8; 40];
    let sci_len = {
        let mut w = &mut sci[..];
        let before = w.len();
        if write!(w, "{:.16e}", d).is_err() {
            return 0;
        }
        before - w.len()
    };
    let sci = &sci[..sci_len];
    let (neg, body) = if sci[0] == b'-' {
        (true, &sci[1..])
    } else {
        (false, sci)
    };
    let epos = body.iter().position(|&c| c == b'e').unwrap_or(body.len());
    let mut digits = [0u8; 17];
    let mut nd = 0;
    for &c in &body[..epos] {
        if c.is_ascii_digit() && nd < 17 {
            digits[nd] = c;
            nd += 1;
        }
    }
    let exp: i32 = std::str::from_utf8(&body[(epos + 1).min(body.len())..])
        .ok()
        .and_then(|e| e.parse().ok())
        .unwrap_or(0);
    // %g strips trailing zeros of the significand.
    while nd > 1 && digits[nd - 1] == b'0' {
        nd -= 1;
    }
    let digits = &digits[..nd];
    let mut n = 0;
    let mut put = |b: u8, n: &mut usize| {
        buf[*n] = b;
        *n += 1;
    };
    if neg {
        put(b'-', &mut n);
    }
    if !(-4..17).contains(&exp) {
        put(digits[0], &mut n);
        if digits.len() > 1 {
            put(b'.', &mut n);
            for &c in &digits[1..] {
                put(c, &mut n);
            }
        }
        put(b'e', &mut n);
        put(if exp < 0 { b'-' } else { b'+' }, &mut n);
        let ea = exp.unsigned_abs();
        if ea < 10 {
            put(b'0', &mut n);
        }
        let mut ib = itoa::Buffer::new();
        for &c in ib.format(ea).as_bytes() {
            put(c, &mut n);
        }
    } else if exp >= 0 {
        let int_len = exp as usize + 1;
        for k in 0..int_len {
            put(*digits.get(k).unwrap_or(&b'0'), &mut n);
        }
        if digits.len() > int_len {
            put(b'.', &mut n);
            for &c in &digits[int_len..] {
                put(c, &mut n);
            }
        }
    } else {
        put(b'0', &mut n);
        put(b'.', &mut n);
        for _ in 0..(-exp - 1) {
            put(b'0', &mut n);
        }
        for &c in digits {
            put(c, &mut n);
        }
    }
    n
}

/// [`format_double`] into a new vector (for places off the hot path).
pub fn double_to_vec(d: f64) -> Vec<u8> {
    let mut b = [0u8; MAX_DOUBLE_CHARS];
    let n = format_double(d, &mut b);
    b[..n].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(d: f64) -> String {
        String::from_utf8(double_to_vec(d)).unwrap()
    }

    #[test]
    #[allow(clippy::excessive_precision)] // the literals are the point
    fn formats_like_printf_17g() {
        assert_eq!(g(0.1), "0.10000000000000001");
        assert_eq!(g(1e21), "1e+21");
        assert_eq!(g(1.5e-7), "1.4999999999999999e-07");
        assert_eq!(g(-0.0), "-0");
        assert_eq!(g(f64::INFINITY), "inf");
        assert_eq!(g(f64::NEG_INFINITY), "-inf");
        assert_eq!(g(1987770.9947070549), "1987770.9947070549");
        assert_eq!(g(1000000001999999.0), "1000000001999999");
        assert_eq!(g(9007199254740992.0), "9007199254740992");
        assert_eq!(g(1e17), "1e+17");
        assert_eq!(g(123456789012345678.0), "1.2345678901234568e+17");
        assert_eq!(g(0.0001), "0.0001");
        assert_eq!(g(0.00001), "1.0000000000000001e-05");
        assert_eq!(g(-2.5), "-2.5");
        assert_eq!(g(1234567890123456.25), "1234567890123456.2");
        assert_eq!(g(5e-324), "4.9406564584124654e-324");
        assert_eq!(g(f64::MAX), "1.7976931348623157e+308");
    }

    #[test]
    fn integers_like_string2ll() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-0"), None);
        assert_eq!(parse_i64(b"012"), None);
        assert_eq!(parse_i64(b"+1"), None);
        assert_eq!(parse_i64(b" 1"), None);
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        assert_eq!(parse_i64(b""), None);
        assert_eq!(parse_i64(b"-"), None);
    }

    #[test]
    fn small_integers_read_as_strtod_reads_them() {
        for s in [
            &b"0"[..],
            b"-0",
            b"7",
            b"-7",
            b"000000012345",
            b"-000000012345",
            b"999999999999999",
            b"-999999999999999",
            b"123456789012345",
        ] {
            let fast = parse_small_integer_f64(s).map(f64::to_bits);
            let text = std::str::from_utf8(s).unwrap();
            assert_eq!(fast, Some(strtod(s).value.to_bits()), "{text}");
            assert_eq!(parse_f64(s).map(f64::to_bits), fast, "{text}");
        }
        // Longer, signed with +, or not all digits: left to strtod.
        for s in [
            &b"1234567890123456"[..],
            b"+5",
            b"-",
            b"",
            b"1.5",
            b"1e3",
            b"--1",
            b" 1",
        ] {
            assert_eq!(parse_small_integer_f64(s), None);
        }
        assert_eq!(parse_f64(b"1234567890123456"), Some(1234567890123456.0));
        assert_eq!(parse_f64(b"+5"), Some(5.0));
    }

    #[test]
    fn doubles_like_strtod() {
        assert_eq!(parse_f64(b"0012"), Some(12.0));
        assert_eq!(parse_f64(b"+inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"-Infinity"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"nan"), None);
        assert_eq!(parse_f64(b"1e400"), None);
        assert_eq!(parse_f64(b"1e-400"), None);
        assert_eq!(parse_f64(b" 1"), None);
        assert_eq!(parse_f64(b"1 "), None);
        assert_eq!(parse_f64(b""), None);
        assert_eq!(parse_f64(b"5."), Some(5.0));
        assert_eq!(parse_f64(b".5"), Some(0.5));
        assert_eq!(parse_f64(b"0x10"), Some(16.0));
        assert_eq!(parse_f64(b"1e"), None);
        assert_eq!(parse_f64(b"abc"), None);
        assert_eq!(strtod(b"(1.5").consumed, 0);
        assert_eq!(strtod(b"1.5x").consumed, 3);
    }
}
