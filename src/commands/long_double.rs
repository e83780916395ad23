//! The x87 80-bit extended float ("long double") in software: what Redis's
//! INCRBYFLOAT computes with on x86-64 Linux. Parsing follows Redis's
//! `string2ld` over glibc's `strtold` (correctly rounded, ties to even),
//! addition is correctly rounded to a 64-bit mantissa, and formatting is
//! Redis's human-friendly `%.17Lf` with trailing zeros removed.
//!
//! A tiny big integer ([`Big`]) carries the exact arithmetic that decimal
//! conversion needs. Nothing here knows about commands or RESP.

use std::cmp::Ordering;
use std::ops::Add;

use crate::engine::hash::HashFloat;

/// Exponent of the least significant mantissa bit of the smallest values
/// (denormals): 2^(-16382-63).
const MIN_LSB_EXP: i64 = -16445;
/// Exponent of the most significant bit of the largest finite values.
const MAX_TOP_EXP: i64 = 16383;
/// Longest string Redis's `string2ld` reads (`MAX_LONG_DOUBLE_CHARS`).
const MAX_LONG_DOUBLE_CHARS: usize = 5 * 1024;

/// What kind of number a [`LongDouble`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Finite,
    Infinite,
    Nan,
}

/// An 80-bit extended precision float: sign, 64-bit mantissa with explicit
/// integer bit, and a 15-bit exponent range (denormals included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongDouble {
    class: Class,
    neg: bool,
    /// The value is `mant * 2^exp`. The mantissa has its top bit set unless
    /// `exp` is [`MIN_LSB_EXP`] (denormals and zero).
    mant: u64,
    exp: i32,
}

impl LongDouble {
    /// Zero with the given sign.
    pub const fn zero(neg: bool) -> Self {
        LongDouble {
            class: Class::Finite,
            neg,
            mant: 0,
            exp: MIN_LSB_EXP as i32,
        }
    }

    const fn infinity(neg: bool) -> Self {
        LongDouble {
            class: Class::Infinite,
            neg,
            mant: 0,
            exp: 0,
        }
    }

    const NAN: LongDouble = LongDouble {
        class: Class::Nan,
        neg: false,
        mant: 0,
        exp: 0,
    };

    /// Whether the value is neither infinite nor NaN.
    pub fn is_finite(&self) -> bool {
        self.class == Class::Finite
    }

    /// Whether the value is zero (of either sign).
    pub fn is_zero(&self) -> bool {
        self.class == Class::Finite && self.mant == 0
    }

    /// Parses a whole string as Redis's `string2ld`: glibc `strtold` syntax
    /// (decimal, hexadecimal, `inf`, `infinity`), no leading space, nothing
    /// left over, no NaN, no overflow and no underflow to zero (a denormal
    /// result is accepted), at most 5119 bytes.
    pub fn string2ld(s: &[u8]) -> Option<Self> {
        if s.is_empty() || s.len() >= MAX_LONG_DOUBLE_CHARS {
            return None;
        }
        let (neg, body) = match s[0] {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        if body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity") {
            return Some(Self::infinity(neg));
        }
        if body.len() >= 2 && body[0] == b'0' && (body[1] | 0x20) == b'x' {
            parse_hex(neg, &body[2..])
        } else {
            parse_decimal(neg, body)
        }
    }
}

impl Add for LongDouble {
    type Output = LongDouble;

    /// The correctly rounded sum (round to nearest, ties to even), as the x87
    /// unit computes `a + b` in extended precision.
    fn add(self, other: Self) -> Self {
        match (self.class, other.class) {
            (Class::Nan, _) | (_, Class::Nan) => return Self::NAN,
            (Class::Infinite, Class::Infinite) => {
                return if self.neg == other.neg {
                    self
                } else {
                    Self::NAN
                };
            }
            (Class::Infinite, _) => return self,
            (_, Class::Infinite) => return other,
            _ => {}
        }
        if self.mant == 0 && other.mant == 0 {
            return Self::zero(self.neg && other.neg);
        }
        if self.mant == 0 {
            return other;
        }
        if other.mant == 0 {
            return self;
        }
        // (exp, mant) orders magnitudes: see the invariant on `mant`.
        let (x, y) = if (self.exp, self.mant) >= (other.exp, other.mant) {
            (self, other)
        } else {
            (other, self)
        };
        let d = x.exp as i64 - y.exp as i64;
        let big = (x.mant as u128) << 62;
        // `y` in units of 2^(x.exp - 62); bits shifted out make the sticky bit.
        let (small, sticky) = if d <= 62 {
            ((y.mant as u128) << (62 - d), false)
        } else if d - 62 >= 64 {
            (0, true)
        } else {
            let sh = (d - 62) as u32;
            ((y.mant >> sh) as u128, y.mant & ((1u64 << sh) - 1) != 0)
        };
        let scale = x.exp as i64 - 62;
        if x.neg == y.neg {
            return round(x.neg, big + small, scale, sticky);
        }
        // `x` is at least as large as `y`, so the difference keeps x's sign;
        // with sticky bits the true difference is just below `big - small`.
        let diff = big - small - sticky as u128;
        if diff == 0 && !sticky {
            return Self::zero(false);
        }
        round(x.neg, diff, scale, sticky)
    }
}

impl LongDouble {
    /// Formats as Redis's `ld2string(..., LD_STR_HUMAN)`: `%.17Lf`, then
    /// trailing zeros and a trailing `.` removed, and `-0` printed as `0`.
    pub fn to_human_string(&self) -> String {
        match self.class {
            Class::Nan => return "nan".to_string(),
            Class::Infinite => return if self.neg { "-inf" } else { "inf" }.to_string(),
            Class::Finite => {}
        }
        let digits = fixed_17_digits(self.mant, self.exp as i64);
        // At least one integer digit before the 17 decimals.
        let padded = if digits.len() < 18 {
            let mut p = "0".repeat(18 - digits.len());
            p.push_str(&digits);
            p
        } else {
            digits
        };
        let (int_part, frac) = padded.split_at(padded.len() - 17);
        let mut s = String::with_capacity(padded.len() + 2);
        if self.neg {
            s.push('-');
        }
        s.push_str(int_part);
        let frac = frac.trim_end_matches('0');
        if !frac.is_empty() {
            s.push('.');
            s.push_str(frac);
        }
        if s == "-0" {
            s = "0".to_string();
        }
        s
    }
}

/// The decimal digits of `round_half_even(mant * 2^exp * 10^17)`.
fn fixed_17_digits(mant: u64, exp: i64) -> String {
    const E17: u128 = 100_000_000_000_000_000;
    let scaled = mant as u128 * E17; // < 2^121
    if exp >= 0 {
        return Big::from_u128(scaled).shl(exp as u64).to_decimal();
    }
    let k = (-exp) as u32;
    let n = if k >= 128 {
        // Half a unit, 2^(k-1), is above `scaled`.
        0
    } else {
        let q = scaled >> k;
        let rem = scaled & ((1u128 << k) - 1);
        let half = 1u128 << (k - 1);
        if rem > half || (rem == half && q & 1 == 1) {
            q + 1
        } else {
            q
        }
    };
    n.to_string()
}

/// Rounds `(q + s) * 2^exp2` to the nearest long double, ties to even, where
/// `s` is 0 when `!sticky` and strictly between 0 and 1 otherwise. Needs
/// `q` to carry more than 64 bits whenever `sticky`.
fn round(neg: bool, q: u128, exp2: i64, sticky: bool) -> LongDouble {
    if q == 0 {
        return LongDouble::zero(neg);
    }
    let bits = 128 - q.leading_zeros() as i64;
    let top = bits - 1 + exp2;
    let mut lsb = (top - 63).max(MIN_LSB_EXP);
    let drop = lsb - exp2;
    let mut m: u128 = if drop <= 0 {
        q << (-drop) as u32
    } else if drop > 128 {
        0
    } else {
        let (kept, rem) = if drop == 128 {
            (0, q)
        } else {
            (q >> drop as u32, q & ((1u128 << drop as u32) - 1))
        };
        let half = 1u128 << (drop - 1) as u32;
        let up = rem > half || (rem == half && (sticky || kept & 1 == 1));
        kept + up as u128
    };
    if m == 1u128 << 64 {
        m >>= 1;
        lsb += 1;
    }
    if m == 0 {
        return LongDouble::zero(neg);
    }
    if lsb + 63 > MAX_TOP_EXP {
        return LongDouble::infinity(neg);
    }
    LongDouble {
        class: Class::Finite,
        neg,
        mant: m as u64,
        exp: lsb as i32,
    }
}

/// Reads an exponent (after `e` or `p`), saturating far beyond any exponent
/// that matters. `None` without a digit or with anything after the digits.
fn parse_exponent(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() {
        return None;
    }
    let mut e: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        e = (e * 10 + (c - b'0') as i64).min(1_000_000_000);
    }
    Some(if neg { -e } else { e })
}

/// A number's parts: its mantissa digits (point removed), how many of
/// them follow the point, and the exponent.
struct Parts {
    digits: Vec<u8>,
    frac: i64,
    exp: i64,
}

/// Splits the whole of `digits [. digits] [marker exponent]`.
fn split_number(s: &[u8], is_digit: fn(u8) -> bool, marker: u8) -> Option<Parts> {
    let mut digits = Vec::with_capacity(s.len());
    let mut frac = 0i64;
    let mut seen_point = false;
    let mut i = 0;
    while let Some(&c) = s.get(i) {
        if is_digit(c) {
            digits.push(c);
            frac += seen_point as i64;
        } else if c == b'.' && !seen_point {
            seen_point = true;
        } else {
            break;
        }
        i += 1;
    }
    if digits.is_empty() {
        return None;
    }
    let exp = match s.get(i) {
        None => 0,
        Some(&c) if c | 0x20 == marker => parse_exponent(&s[i + 1..])?,
        Some(_) => return None,
    };
    Some(Parts { digits, frac, exp })
}

/// Keeps a parsed value unless it overflowed or a non-zero input rounded to
/// zero (strtold's ERANGE cases that `string2ld` refuses).
fn in_range(v: LongDouble) -> Option<LongDouble> {
    (v.is_finite() && v.mant != 0).then_some(v)
}

/// A decimal body (sign already read), correctly rounded.
fn parse_decimal(neg: bool, s: &[u8]) -> Option<LongDouble> {
    let Parts { digits, frac, exp } = split_number(s, |c| c.is_ascii_digit(), b'e')?;
    let Some(first) = digits.iter().position(|&c| c != b'0') else {
        return Some(LongDouble::zero(neg));
    };
    let last = digits.iter().rposition(|&c| c != b'0').unwrap_or(first);
    let sig = &digits[first..=last];
    // value = sig * 10^e10, and value < 10^magnitude.
    let e10 = exp - frac + (digits.len() - 1 - last) as i64;
    let magnitude = sig.len() as i64 + e10;
    // Above 1e4935 every value overflows; below 1e-4953 every value rounds
    // to zero (the smallest denormal is about 3.6e-4951).
    if !(-4953..=4935).contains(&magnitude) {
        return None;
    }
    let d = Big::from_decimal(sig);
    let (q, exp2, sticky) = if e10 >= 0 {
        d.mul(&Big::pow10(e10 as u32)).top_bits(66)
    } else {
        let den = Big::pow10((-e10) as u32);
        // Scale so that the quotient has 66 or 67 bits.
        let shift = 66 - (d.bit_len() as i64 - den.bit_len() as i64);
        let (num, den) = if shift >= 0 {
            (d.shl(shift as u64), den)
        } else {
            (d, den.shl((-shift) as u64))
        };
        let (q, inexact) = div_small_quotient(num, &den);
        (q, -shift, inexact)
    };
    in_range(round(neg, q, exp2, sticky))
}

/// A hexadecimal body after `0x` (`1.8p3`), correctly rounded.
fn parse_hex(neg: bool, s: &[u8]) -> Option<LongDouble> {
    let Parts { digits, frac, exp } = split_number(s, |c| c.is_ascii_hexdigit(), b'p')?;
    let mut q: u128 = 0;
    let mut exp2 = exp - 4 * frac;
    let mut sticky = false;
    for &c in &digits {
        let v = (c as char).to_digit(16).unwrap_or(0) as u128;
        if q >> 120 == 0 {
            q = q * 16 + v;
        } else {
            sticky |= v != 0;
            exp2 += 4;
        }
    }
    if q == 0 {
        return Some(LongDouble::zero(neg));
    }
    in_range(round(neg, q, exp2, sticky))
}

/// `num / den` for a quotient below 2^70: the quotient and whether a
/// remainder was left.
fn div_small_quotient(mut num: Big, den: &Big) -> (u128, bool) {
    let mut q: u128 = 0;
    for i in (0..70u64).rev() {
        let shifted = den.shl(i);
        if num.cmp(&shifted) != Ordering::Less {
            num.sub_assign(&shifted);
            q |= 1u128 << i;
        }
    }
    (q, !num.is_zero())
}

/// A non-negative big integer: little-endian 32-bit limbs, no high zero limb.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Big {
    limbs: Vec<u32>,
}

impl Big {
    fn from_u128(mut v: u128) -> Self {
        let mut limbs = Vec::new();
        while v != 0 {
            limbs.push(v as u32);
            v >>= 32;
        }
        Big { limbs }
    }

    fn is_zero(&self) -> bool {
        self.limbs.is_empty()
    }

    fn trim(&mut self) {
        while self.limbs.last() == Some(&0) {
            self.limbs.pop();
        }
    }

    /// `self = self * m + add`.
    fn mul_add_small(&mut self, m: u32, add: u32) {
        let mut carry = add as u64;
        for l in self.limbs.iter_mut() {
            let t = *l as u64 * m as u64 + carry;
            *l = t as u32;
            carry = t >> 32;
        }
        if carry != 0 {
            self.limbs.push(carry as u32);
        }
        self.trim();
    }

    /// The number written by ASCII decimal digits.
    fn from_decimal(digits: &[u8]) -> Self {
        let mut n = Big { limbs: Vec::new() };
        for chunk in digits.chunks(9) {
            let v = chunk
                .iter()
                .fold(0u32, |v, &c| v * 10 + (c.wrapping_sub(b'0') as u32 % 10));
            n.mul_add_small(10u32.pow(chunk.len() as u32), v);
        }
        n
    }

    fn pow10(mut n: u32) -> Self {
        let mut r = Big { limbs: vec![1] };
        while n >= 9 {
            r.mul_add_small(1_000_000_000, 0);
            n -= 9;
        }
        r.mul_add_small(10u32.pow(n), 0);
        r
    }

    fn mul(&self, other: &Big) -> Big {
        let mut out = vec![0u32; self.limbs.len() + other.limbs.len() + 1];
        for (i, &a) in self.limbs.iter().enumerate() {
            let mut carry = 0u64;
            for (j, &b) in other.limbs.iter().enumerate() {
                let slot = &mut out[i + j];
                let t = *slot as u64 + a as u64 * b as u64 + carry;
                *slot = t as u32;
                carry = t >> 32;
            }
            let mut k = i + other.limbs.len();
            while carry != 0 {
                let slot = &mut out[k];
                let t = *slot as u64 + carry;
                *slot = t as u32;
                carry = t >> 32;
                k += 1;
            }
        }
        let mut r = Big { limbs: out };
        r.trim();
        r
    }

    fn shl(&self, bits: u64) -> Big {
        if self.is_zero() {
            return self.clone();
        }
        let words = (bits / 32) as usize;
        let sh = (bits % 32) as u32;
        let mut limbs = vec![0u32; words];
        limbs.reserve(self.limbs.len() + 1);
        if sh == 0 {
            limbs.extend_from_slice(&self.limbs);
        } else {
            let mut carry = 0u32;
            for &l in &self.limbs {
                limbs.push((l << sh) | carry);
                carry = l >> (32 - sh);
            }
            limbs.push(carry);
        }
        let mut r = Big { limbs };
        r.trim();
        r
    }

    fn bit_len(&self) -> u64 {
        match self.limbs.last() {
            None => 0,
            Some(&top) => (self.limbs.len() as u64 - 1) * 32 + (32 - top.leading_zeros()) as u64,
        }
    }

    fn bit(&self, i: u64) -> bool {
        self.limbs
            .get((i / 32) as usize)
            .is_some_and(|l| (l >> (i % 32)) & 1 == 1)
    }

    /// The top `n` (at most 127) bits as an integer, the exponent of its
    /// last bit, and whether any lower bit is set.
    fn top_bits(&self, n: u64) -> (u128, i64, bool) {
        let len = self.bit_len();
        let low = len.saturating_sub(n);
        let q = (low..len)
            .rev()
            .fold(0u128, |q, i| (q << 1) | self.bit(i) as u128);
        let sticky = (0..low).any(|i| self.bit(i));
        (q, low as i64, sticky)
    }

    fn cmp(&self, other: &Big) -> Ordering {
        self.limbs
            .len()
            .cmp(&other.limbs.len())
            .then_with(|| self.limbs.iter().rev().cmp(other.limbs.iter().rev()))
    }

    /// `self -= other`, for `self >= other`.
    fn sub_assign(&mut self, other: &Big) {
        let mut borrow = 0u64;
        for (i, l) in self.limbs.iter_mut().enumerate() {
            let b = other.limbs.get(i).copied().unwrap_or(0) as u64 + borrow;
            let (v, under) = (*l as u64).overflowing_sub(b);
            *l = v as u32;
            borrow = under as u64;
        }
        self.trim();
    }

    /// `self /= d`, returning the remainder.
    fn div_rem_small(&mut self, d: u32) -> u32 {
        let mut rem = 0u64;
        for l in self.limbs.iter_mut().rev() {
            let cur = (rem << 32) | *l as u64;
            *l = (cur / d as u64) as u32;
            rem = cur % d as u64;
        }
        self.trim();
        rem as u32
    }

    fn to_decimal(&self) -> String {
        let mut n = self.clone();
        let mut chunks = Vec::new();
        while !n.is_zero() {
            chunks.push(n.div_rem_small(1_000_000_000));
        }
        let Some(first) = chunks.pop() else {
            return "0".to_string();
        };
        let mut s = first.to_string();
        for c in chunks.iter().rev() {
            s.push_str(&format!("{c:09}"));
        }
        s
    }
}

/// HINCRBYFLOAT adds in long double, as Redis does, so its replies and
/// stored values match Redis's digit for digit (`engine::hash` provides
/// only an `f64` version, whose last digits differ).
impl HashFloat for LongDouble {
    fn zero() -> Self {
        LongDouble::zero(false)
    }

    fn parse(bytes: &[u8]) -> Option<Self> {
        LongDouble::string2ld(bytes)
    }

    fn add(self, other: Self) -> Self {
        self + other
    }

    fn is_finite(self) -> bool {
        LongDouble::is_finite(&self)
    }

    fn format(self) -> Vec<u8> {
        self.to_human_string().into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ld(s: &str) -> LongDouble {
        LongDouble::string2ld(s.as_bytes()).unwrap_or_else(|| panic!("{s} should parse"))
    }

    /// `SET k a; INCRBYFLOAT k b`, as Rostrum computes it.
    fn incr(a: &str, b: &str) -> String {
        (ld(a) + ld(b)).to_human_string()
    }

    #[test]
    fn big_integers() {
        assert_eq!(Big::pow10(30).to_decimal(), format!("1{}", "0".repeat(30)));
        let a = Big::from_decimal(b"123456789012345678901234567890");
        let b = Big::from_decimal(b"987654321098765432109876543210");
        assert_eq!(
            a.mul(&b).to_decimal(),
            "121932631137021795226185032733622923332237463801111263526900"
        );
        assert_eq!(Big::from_u128(1).shl(100).bit_len(), 101);
        assert_eq!(Big::from_u128(0).to_decimal(), "0");
        assert_eq!(
            div_small_quotient(Big::from_u128(1000), &Big::from_u128(7)),
            (142, true)
        );
        assert_eq!(
            div_small_quotient(Big::from_u128(1001), &Big::from_u128(7)),
            (143, false)
        );
        let mut n = Big::from_u128(1 << 40);
        n.sub_assign(&Big::from_u128(1));
        assert_eq!(n, Big::from_u128((1 << 40) - 1));
        assert_eq!(
            Big::from_u128(0b1011_0000_0001).top_bits(4),
            (0b1011, 8, true)
        );
        assert_eq!(Big::from_u128(0b1011).top_bits(66), (0b1011, 0, false));
    }

    #[test]
    fn parses_like_redis_string2ld() {
        for bad in [
            "",
            " 1",
            "1 ",
            "\t1",
            "abc",
            "nan",
            "-nan",
            "NaN",
            "nan(123)",
            "1e",
            "1e+",
            ".",
            "-",
            "+",
            "e5",
            "0x",
            "0x1p",
            "0xg",
            "infin",
            "infinityx",
            "1e5000",
            "-1e5000",
            "1e-5000",
            "1e4933",
            "0x1p16384",
            "0x1p-16446",
            "1.2.3",
            "1e1.5",
            "--1",
            "+-1",
            "1\0",
            "1e99999999999999999999",
            "0,5",
            "１",
        ] {
            assert!(LongDouble::string2ld(bad.as_bytes()).is_none(), "{bad:?}");
        }
        for good in [
            "0",
            "-0",
            "+1",
            "5.",
            ".5",
            "1.e5",
            "0x10",
            "0x.8",
            "0X1P3",
            "inf",
            "-Infinity",
            "INF",
            "1e400",
            "1e-4940",
            "0x1p-16445",
            "0x1.8p-16446",
            "0e999999999999",
            "0e-99999999999999999999",
            "00012",
            "1.18e4932",
            "-0x1p16383",
        ] {
            assert!(LongDouble::string2ld(good.as_bytes()).is_some(), "{good:?}");
        }
        assert!(!ld("inf").is_finite());
        assert!(ld("-0").is_zero());
        assert!(ld("0x0p99").is_zero());
        // Redis's buffer is 5 KiB including the terminating NUL.
        let long = "1".repeat(MAX_LONG_DOUBLE_CHARS);
        assert!(LongDouble::string2ld(long.as_bytes()).is_none());
        let long = format!("0.{}", "1".repeat(MAX_LONG_DOUBLE_CHARS - 3));
        assert_eq!(ld(&long).to_human_string(), "0.11111111111111111");
    }

    #[test]
    fn sums_as_redis_prints_them() {
        // Every expected string was read from redis-server 7.0.15 on x86-64
        // (SET k a, then INCRBYFLOAT k b).
        let cases: &[(&str, &str, &str)] = &[
            ("0", "0.1", "0.1"),
            ("0.1", "0.2", "0.3"),
            ("0.3", "1", "1.3"),
            ("1.3", "-1.3", "0"),
            ("0", "3", "3"),
            ("10.50", "0.1", "10.6"),
            ("10.6", "1e-20", "10.6"),
            ("3.0e3", "1.0e1", "3010"),
            ("3010", "-0.0", "3010"),
            ("3010", "1e17", "100000000000003010"),
            ("100000000000003010", "0.1", "100000000000003010.1015625"),
            ("1.5", "-1.5", "0"),
            ("-0.0000000000000000001", "0", "0"),
            ("0", "0.000003814697265625", "0.00000381469726562"),
            ("0", "0.000011444091796875", "0.00001144409179688"),
            ("0", "0.0000019073486328125", "0.00000190734863281"),
            ("0", "-0.000003814697265625", "-0.00000381469726562"),
            ("0", "0x1p-16445", "0"),
            ("0", "0x.8", "0.5"),
            ("0.5", "1.e5", "100000.5"),
            ("1", "-0.9", "0.1"),
            (
                "123456789.123456789",
                "0.000000001",
                "123456789.12345678999554366",
            ),
            ("-1.5", "0.25", "-1.25"),
            ("1e-10", "1e-10", "0.0000000002"),
            ("9223372036854775807", "1", "9223372036854775808"),
            ("-9223372036854775808", "-1", "-9223372036854775809"),
            ("18446744073709551615", "1", "18446744073709551616"),
            ("0.1", "-0.1", "0"),
            ("3.0000000000000000001", "0", "3"),
            ("2.5", "0.0000000000000000005", "2.5"),
            ("1e20", "1", "100000000000000000000"),
            ("0x1p-16445", "0x1p-16445", "0"),
            ("1e-4950", "0", "0"),
            ("4e-4951", "0", "0"),
            ("1.00000000000000000000000000001", "0", "1"),
            ("0.3", "0.6", "0.9"),
            ("1e-18", "0", "0"),
            ("5e-18", "0", "0"),
            ("-5e-18", "0", "0"),
            ("15e-18", "0", "0.00000000000000002"),
            ("0x1p-18", "0", "0.00000381469726562"),
            ("0x3p-19", "0", "0.00000572204589844"),
            ("12345678901234567890.5", "0", "12345678901234567890"),
            (
                "0.00000000000000001",
                "0.00000000000000001",
                "0.00000000000000002",
            ),
            ("1.1", "2.2", "3.3"),
            ("100", "-100.5", "-0.5"),
            ("-0", "-0", "0"),
            ("7e-1", "3e-1", "1"),
            ("0x8000000000000001p0", "0.5", "9223372036854775810"),
            ("0xffffffffffffffffp0", "0.5", "18446744073709551616"),
            ("0xffffffffffffffffp0", "1", "18446744073709551616"),
            ("0xfffffffffffffffe8p-4", "0", "18446744073709551614"),
            ("0xfffffffffffffffd8p-4", "0", "18446744073709551614"),
            (
                "1e308",
                "1e308",
                "199999999999999999993371759311691291321120199694831134415594095989843469737676123744200253843777078640893494450108026446304269499187921167194841628860392837535918200039206381557326219209014213335878306791577877829121087126122536729803237260434173178506889763247582601711514636284849020905456510092687857156096",
            ),
            (
                "0",
                "1e400",
                "10000000000000000000281880683947586514586453433629052038625910693539685534008629862039363994848324160522094053927317616200295822777259255734023828976593340661017797447434546173917862448116674971723778943824391593338047470675026246684401359237513603830343735485505244955964979021825038280091068414947402456898653040951017512658092615827588920183472511643316591362664138176309734806343732497430221946880",
            ),
        ];
        for (a, b, want) in cases {
            assert_eq!(incr(a, b), *want, "{a} + {b}");
        }
    }

    #[test]
    fn huge_sums_as_redis_prints_them() {
        // (a, b, length, first 30 and last 30 characters) from redis-server.
        let cases = [
            (
                "1.7976931348623157e308",
                "1e308",
                309,
                "279769313486231570002352240441",
                "688773926186886103199182225408",
            ),
            (
                "0x1.fffffffffffffffep16383",
                "0",
                4933,
                "118973149535723176502126385303",
                "444156604419552086811989770240",
            ),
            (
                "1e4931",
                "1e4931",
                4932,
                "200000000000000000001203789877",
                "232628217307683622758377324544",
            ),
        ];
        for (a, b, len, head, tail) in cases {
            let s = incr(a, b);
            assert_eq!(s.len(), len, "{a} + {b}");
            assert!(s.starts_with(head) && s.ends_with(tail), "{a} + {b}");
        }
    }

    #[test]
    fn overflow_and_nan() {
        assert!(!(ld("inf") + ld("1")).is_finite());
        assert!(!(ld("-inf") + ld("-inf")).is_finite());
        assert!(!(ld("inf") + ld("-inf")).is_finite());
        assert!(!(ld("1.18e4932") + ld("1.18e4932")).is_finite());
        assert!(!(ld("-1.18e4932") + ld("-1.18e4932")).is_finite());
        assert!((ld("1.18e4932") + ld("-1.18e4932")).is_zero());
    }

    #[test]
    fn addition_rounds_to_nearest_even() {
        // Checked against redis-server too. 2^64 + 1 is a tie between 2^64
        // and 2^64 + 2: the even mantissa wins.
        assert_eq!(incr("18446744073709551616", "1"), "18446744073709551616");
        assert_eq!(incr("18446744073709551618", "1"), "18446744073709551620");
        // Just above the tie rounds up.
        assert_eq!(
            incr("18446744073709551616", "1.0000001"),
            "18446744073709551618"
        );
        // Subtraction of a far smaller value with sticky bits.
        assert_eq!(
            incr("18446744073709551616", "-1e-30"),
            "18446744073709551616"
        );
        assert_eq!(incr("1", "-1e-30"), "1");
    }

    #[test]
    fn hincrbyfloat_adds_in_long_double() {
        use crate::engine::hash::{HashLimits, HashValue};
        let mut h = HashValue::new();
        let lim = HashLimits::default();
        // f64 would store 10.59999999999999964.
        assert_eq!(h.incr_by_float(b"f", ld("10.5"), lim), Ok(b"10.5".to_vec()));
        assert_eq!(h.incr_by_float(b"f", ld("0.1"), lim), Ok(b"10.6".to_vec()));
        // Beyond f64's range, inside long double's.
        h.set(b"big", b"1e400", lim);
        let big = h.incr_by_float(b"big", ld("1"), lim);
        assert!(big.as_ref().is_ok_and(|b| b.len() == 401), "{big:?}");
        h.set(b"x", b" 1", lim);
        assert!(h.incr_by_float(b"x", ld("1"), lim).is_err());
        assert_eq!(<LongDouble as HashFloat>::zero().format(), b"0".to_vec());
    }
}
