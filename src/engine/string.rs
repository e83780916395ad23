//! String values, with the encodings OBJECT ENCODING reports (`int`,
//! `embstr`, `raw`). The bytes are always kept as bytes, so GET never
//! formats; the encoding is a tag that follows Redis's rules.

use std::borrow::Cow;

/// Longest string Redis stores as `embstr`.
pub const EMBSTR_MAX: usize = 44;

/// How Redis would encode the string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrEncoding {
    /// A canonical integer of at most 20 characters.
    Int,
    /// A short string stored with its object header.
    Embstr,
    /// A string buffer (long, or changed in place).
    Raw,
}

/// A string value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrValue {
    data: Vec<u8>,
    enc: StrEncoding,
}

impl StrValue {
    /// A value as SET stores it: `int` when the bytes are a canonical
    /// integer of at most 20 characters, else `embstr`/`raw` by length.
    pub fn from_bytes(b: &[u8]) -> Self {
        StrValue {
            data: b.to_vec(),
            enc: encoding_for(b),
        }
    }

    /// The value of an integer (INCR and friends).
    pub fn from_i64(n: i64) -> Self {
        StrValue {
            data: itoa::Buffer::new().format(n).as_bytes().to_vec(),
            enc: StrEncoding::Int,
        }
    }

    /// A value built by changing bytes in place (APPEND, SETRANGE, SETBIT):
    /// always `raw`, as in Redis.
    pub fn raw(data: Vec<u8>) -> Self {
        StrValue {
            data,
            enc: StrEncoding::Raw,
        }
    }

    /// The bytes of the value, as GET returns them. Borrowed for plain
    /// strings; a compressed representation (sparse bitmaps) would be
    /// materialized here, so hot paths should prefer length-aware accessors.
    pub fn as_bytes(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.data)
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the value is the empty string.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The bytes for in-place change; the value becomes `raw`.
    pub fn make_raw(&mut self) -> &mut Vec<u8> {
        self.enc = StrEncoding::Raw;
        &mut self.data
    }

    /// The value as an integer, if it is one (INCR and friends).
    pub fn as_i64(&self) -> Option<i64> {
        crate::protocol::number::parse_i64(&self.data)
    }

    /// The name OBJECT ENCODING answers.
    pub fn encoding(&self) -> &'static str {
        match self.enc {
            StrEncoding::Int => "int",
            StrEncoding::Embstr => "embstr",
            StrEncoding::Raw => "raw",
        }
    }

    /// Approximate bytes used.
    pub fn memory_usage(&self) -> usize {
        16 + self.data.capacity()
    }
}

fn encoding_for(b: &[u8]) -> StrEncoding {
    if b.len() <= 20 && crate::protocol::number::parse_i64(b).is_some() {
        StrEncoding::Int
    } else if b.len() <= EMBSTR_MAX {
        StrEncoding::Embstr
    } else {
        StrEncoding::Raw
    }
}

impl StrValue {
    /// A value as Redis's `createStringObject` makes it from computed bytes
    /// (INCRBYFLOAT results): `embstr` or `raw` by length, never `int`.
    pub fn from_computed(b: &[u8]) -> Self {
        let mut v = StrValue::from_bytes(b);
        if v.enc == StrEncoding::Int {
            v.enc = StrEncoding::Embstr;
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings() {
        assert_eq!(StrValue::from_bytes(b"123").encoding(), "int");
        assert_eq!(StrValue::from_bytes(b"0123").encoding(), "embstr");
        assert_eq!(StrValue::from_bytes(&[b'a'; 45]).encoding(), "raw");
        let mut v = StrValue::from_bytes(b"12");
        v.make_raw().push(b'3');
        assert_eq!(v.as_bytes().as_ref(), b"123");
        assert_eq!(v.encoding(), "raw");
        assert_eq!(StrValue::from_i64(-5).as_i64(), Some(-5));
    }
}
