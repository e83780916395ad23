//! The range arguments of the sorted-set commands, parsed once into types
//! shared by every command that takes them: score ranges (`1.5`, `(1.5`,
//! `-inf`, `+inf`) and lexicographic ranges (`-`, `+`, `[a`, `(a`).
//!
//! Parsing follows Redis 7.0 exactly, including its C-string quirks: a score
//! bound is read with `strtod` and must be followed by the end of the argument
//! or a NUL byte (so `(` alone is an exclusive 0, and leading white space is
//! skipped); `-` and `+` lex bounds may be followed by a NUL byte.

use std::cmp::Ordering;
use std::fmt;

use crate::protocol::number::strtod;

/// Why a range argument was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeError {
    /// A score bound that is not a number (`ERR min or max is not a float`).
    NotFloat,
    /// A lex bound without `-`, `+`, `[` or `(`
    /// (`ERR min or max not valid string range item`).
    NotLexItem,
}

impl RangeError {
    /// The message after `ERR ` that Redis sends.
    pub fn message(self) -> &'static str {
        match self {
            RangeError::NotFloat => "min or max is not a float",
            RangeError::NotLexItem => "min or max not valid string range item",
        }
    }
}

impl fmt::Display for RangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ERR {}", self.message())
    }
}

impl std::error::Error for RangeError {}

/// One end of a score range: a value, open (`(`) or closed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoreBound {
    /// The bound's value (never NaN; may be infinite).
    pub value: f64,
    /// True when written with a `(` prefix.
    pub exclusive: bool,
}

impl ScoreBound {
    /// Parses one bound as Redis's `zslParseRange` does.
    pub fn parse(arg: &[u8]) -> Result<ScoreBound, RangeError> {
        let (exclusive, text) = match arg.split_first() {
            Some((b'(', rest)) => (true, rest),
            _ => (false, arg),
        };
        let read = strtod(text);
        // C sees the argument as a NUL-terminated string: whatever follows
        // the number must be the terminator (or an embedded NUL).
        let ends = matches!(text.get(read.consumed), None | Some(0));
        if !ends || read.value.is_nan() {
            return Err(RangeError::NotFloat);
        }
        Ok(ScoreBound {
            value: read.value,
            exclusive,
        })
    }
}

/// A score interval as ZRANGEBYSCORE, ZCOUNT, ZREMRANGEBYSCORE take it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RangeByScore {
    /// Lower bound.
    pub min: f64,
    /// Upper bound.
    pub max: f64,
    /// The lower bound itself is excluded.
    pub min_exclusive: bool,
    /// The upper bound itself is excluded.
    pub max_exclusive: bool,
}

impl RangeByScore {
    /// Parses `min` and `max` arguments (in that order).
    pub fn parse(min: &[u8], max: &[u8]) -> Result<RangeByScore, RangeError> {
        let lo = ScoreBound::parse(min)?;
        let hi = ScoreBound::parse(max)?;
        Ok(RangeByScore {
            min: lo.value,
            max: hi.value,
            min_exclusive: lo.exclusive,
            max_exclusive: hi.exclusive,
        })
    }

    /// The closed interval `[min, max]`.
    pub fn inclusive(min: f64, max: f64) -> RangeByScore {
        RangeByScore {
            min,
            max,
            min_exclusive: false,
            max_exclusive: false,
        }
    }

    /// True when no score can be inside (`5 1`, `(1 1`).
    pub fn is_empty(&self) -> bool {
        self.min > self.max || (self.min == self.max && (self.min_exclusive || self.max_exclusive))
    }

    /// `score` is not below the lower bound.
    #[inline]
    pub fn gte_min(&self, score: f64) -> bool {
        if self.min_exclusive {
            score > self.min
        } else {
            score >= self.min
        }
    }

    /// `score` is not above the upper bound.
    #[inline]
    pub fn lte_max(&self, score: f64) -> bool {
        if self.max_exclusive {
            score < self.max
        } else {
            score <= self.max
        }
    }

    /// `score` is inside the range.
    #[inline]
    pub fn contains(&self, score: f64) -> bool {
        self.gte_min(score) && self.lte_max(score)
    }
}

/// One end of a lexicographic range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LexBound {
    /// `-`: below every member.
    Min,
    /// `+`: above every member.
    Max,
    /// `[member`: the member itself included.
    Inclusive(Vec<u8>),
    /// `(member`: the member itself excluded.
    Exclusive(Vec<u8>),
}

impl LexBound {
    /// Parses one bound as Redis's `zslParseLexRangeItem` does.
    pub fn parse(arg: &[u8]) -> Result<LexBound, RangeError> {
        match arg.split_first() {
            Some((b'+', rest)) if matches!(rest.first(), None | Some(0)) => Ok(LexBound::Max),
            Some((b'-', rest)) if matches!(rest.first(), None | Some(0)) => Ok(LexBound::Min),
            Some((b'(', rest)) => Ok(LexBound::Exclusive(rest.to_vec())),
            Some((b'[', rest)) => Ok(LexBound::Inclusive(rest.to_vec())),
            _ => Err(RangeError::NotLexItem),
        }
    }

    /// Redis treats `-` and `+` as exclusive bounds.
    fn is_exclusive(&self) -> bool {
        !matches!(self, LexBound::Inclusive(_))
    }

    /// Orders two bounds with `-` below and `+` above every string.
    fn cmp_bound(&self, other: &LexBound) -> Ordering {
        use LexBound::*;
        match (self, other) {
            (Min, Min) | (Max, Max) => Ordering::Equal,
            (Min, _) | (_, Max) => Ordering::Less,
            (Max, _) | (_, Min) => Ordering::Greater,
            (Inclusive(a) | Exclusive(a), Inclusive(b) | Exclusive(b)) => a.cmp(b),
        }
    }
}

/// A lexicographic interval as ZRANGEBYLEX, ZLEXCOUNT, ZREMRANGEBYLEX take it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeByLex {
    /// Lower bound.
    pub min: LexBound,
    /// Upper bound.
    pub max: LexBound,
}

impl RangeByLex {
    /// Parses `min` and `max` arguments (in that order).
    pub fn parse(min: &[u8], max: &[u8]) -> Result<RangeByLex, RangeError> {
        Ok(RangeByLex {
            min: LexBound::parse(min)?,
            max: LexBound::parse(max)?,
        })
    }

    /// True when no member can be inside (`+ -`, `(a (a`, `- -`).
    pub fn is_empty(&self) -> bool {
        match self.min.cmp_bound(&self.max) {
            Ordering::Greater => true,
            Ordering::Equal => self.min.is_exclusive() || self.max.is_exclusive(),
            Ordering::Less => false,
        }
    }

    /// `member` is not below the lower bound.
    #[inline]
    pub fn gte_min(&self, member: &[u8]) -> bool {
        match &self.min {
            LexBound::Min => true,
            LexBound::Max => false,
            LexBound::Inclusive(m) => member >= m.as_slice(),
            LexBound::Exclusive(m) => member > m.as_slice(),
        }
    }

    /// `member` is not above the upper bound.
    #[inline]
    pub fn lte_max(&self, member: &[u8]) -> bool {
        match &self.max {
            LexBound::Min => false,
            LexBound::Max => true,
            LexBound::Inclusive(m) => member <= m.as_slice(),
            LexBound::Exclusive(m) => member < m.as_slice(),
        }
    }

    /// `member` is inside the range.
    #[inline]
    pub fn contains(&self, member: &[u8]) -> bool {
        self.gte_min(member) && self.lte_max(member)
    }
}

/// What the encodings need from a range of either kind: emptiness and the
/// two bound tests applied to an entry.
pub(super) trait Bounds {
    /// No entry can be inside.
    fn is_empty(&self) -> bool;
    /// The entry is not below the lower bound.
    fn gte_min(&self, score: f64, member: &[u8]) -> bool;
    /// The entry is not above the upper bound.
    fn lte_max(&self, score: f64, member: &[u8]) -> bool;
}

impl Bounds for RangeByScore {
    fn is_empty(&self) -> bool {
        RangeByScore::is_empty(self)
    }
    #[inline]
    fn gte_min(&self, score: f64, _: &[u8]) -> bool {
        RangeByScore::gte_min(self, score)
    }
    #[inline]
    fn lte_max(&self, score: f64, _: &[u8]) -> bool {
        RangeByScore::lte_max(self, score)
    }
}

impl Bounds for RangeByLex {
    fn is_empty(&self) -> bool {
        RangeByLex::is_empty(self)
    }
    #[inline]
    fn gte_min(&self, _: f64, member: &[u8]) -> bool {
        RangeByLex::gte_min(self, member)
    }
    #[inline]
    fn lte_max(&self, _: f64, member: &[u8]) -> bool {
        RangeByLex::lte_max(self, member)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound(s: &[u8]) -> Result<(f64, bool), RangeError> {
        ScoreBound::parse(s).map(|b| (b.value, b.exclusive))
    }

    #[test]
    fn score_bounds_follow_strtod() {
        assert_eq!(bound(b"1.5"), Ok((1.5, false)));
        assert_eq!(bound(b"(1.5"), Ok((1.5, true)));
        assert_eq!(bound(b"-inf"), Ok((f64::NEG_INFINITY, false)));
        assert_eq!(bound(b"+inf"), Ok((f64::INFINITY, false)));
        assert_eq!(bound(b"(inf"), Ok((f64::INFINITY, true)));
        assert_eq!(bound(b"infinity"), Ok((f64::INFINITY, false)));
        assert_eq!(bound(b"0x10"), Ok((16.0, false)));
        assert_eq!(bound(b"1e400"), Ok((f64::INFINITY, false)));
        assert_eq!(bound(b"1e-400"), Ok((0.0, false)));
        assert_eq!(bound(b"5."), Ok((5.0, false)));
        assert_eq!(bound(b".5"), Ok((0.5, false)));
        assert_eq!(bound(b"+1"), Ok((1.0, false)));
        // C-string quirks: empty and "(" read as 0, leading space skipped,
        // anything after an embedded NUL ignored.
        assert_eq!(bound(b""), Ok((0.0, false)));
        assert_eq!(bound(b"("), Ok((0.0, true)));
        assert_eq!(bound(b"( 1"), Ok((1.0, true)));
        assert_eq!(bound(b" 1"), Ok((1.0, false)));
        assert_eq!(bound(b"1\0x"), Ok((1.0, false)));
        assert_eq!(bound(b"\0"), Ok((0.0, false)));
        for bad in [
            &b"abc"[..],
            b"nan",
            b"(nan",
            b"1 ",
            b"1e",
            b"++1",
            b"((1",
            b" ",
            b"1x",
        ] {
            assert_eq!(bound(bad), Err(RangeError::NotFloat), "{bad:?}");
        }
    }

    #[test]
    fn score_range_predicates() {
        let r = RangeByScore::parse(b"(1", b"3").unwrap();
        assert!(!r.contains(1.0) && r.contains(1.5) && r.contains(3.0) && !r.contains(3.5));
        assert!(!r.is_empty());
        assert!(RangeByScore::parse(b"(1", b"1").unwrap().is_empty());
        assert!(RangeByScore::parse(b"1", b"(1").unwrap().is_empty());
        assert!(!RangeByScore::parse(b"1", b"1").unwrap().is_empty());
        assert!(RangeByScore::parse(b"2", b"1").unwrap().is_empty());
        assert!(!RangeByScore::parse(b"-inf", b"+inf").unwrap().is_empty());
        assert_eq!(RangeByScore::parse(b"x", b"1"), Err(RangeError::NotFloat));
        assert_eq!(
            RangeError::NotFloat.to_string(),
            "ERR min or max is not a float"
        );
    }

    #[test]
    fn lex_bounds() {
        assert_eq!(LexBound::parse(b"-"), Ok(LexBound::Min));
        assert_eq!(LexBound::parse(b"+"), Ok(LexBound::Max));
        assert_eq!(LexBound::parse(b"-\0"), Ok(LexBound::Min));
        assert_eq!(LexBound::parse(b"+\0x"), Ok(LexBound::Max));
        assert_eq!(
            LexBound::parse(b"[a"),
            Ok(LexBound::Inclusive(b"a".to_vec()))
        );
        assert_eq!(
            LexBound::parse(b"(a"),
            Ok(LexBound::Exclusive(b"a".to_vec()))
        );
        assert_eq!(LexBound::parse(b"["), Ok(LexBound::Inclusive(vec![])));
        assert_eq!(
            LexBound::parse(b"[a\0"),
            Ok(LexBound::Inclusive(b"a\0".to_vec()))
        );
        for bad in [&b"a"[..], b"", b"-x", b"+x"] {
            assert_eq!(LexBound::parse(bad), Err(RangeError::NotLexItem));
        }
        assert_eq!(
            RangeError::NotLexItem.to_string(),
            "ERR min or max not valid string range item"
        );
    }

    #[test]
    fn lex_range_predicates() {
        let r = RangeByLex::parse(b"(a", b"[c").unwrap();
        assert!(!r.contains(b"a") && r.contains(b"aa") && r.contains(b"c") && !r.contains(b"ca"));
        let all = RangeByLex::parse(b"-", b"+").unwrap();
        assert!(all.contains(b"") && all.contains(b"\xff") && !all.is_empty());
        for (lo, hi) in [
            (&b"+"[..], &b"-"[..]),
            (b"-", b"-"),
            (b"+", b"+"),
            (b"(a", b"[a"),
            (b"[a", b"(a"),
            (b"[b", b"[a"),
            (b"+", b"[a"),
            (b"[a", b"-"),
        ] {
            assert!(
                RangeByLex::parse(lo, hi).unwrap().is_empty(),
                "{lo:?} {hi:?}"
            );
        }
        assert!(!RangeByLex::parse(b"[a", b"[a").unwrap().is_empty());
        assert!(!RangeByLex::parse(b"-", b"[a").unwrap().is_empty());
        // '-' as max and '+' as min match nothing.
        let r = RangeByLex::parse(b"-", b"-").unwrap();
        assert!(!r.contains(b"a"));
    }
}
