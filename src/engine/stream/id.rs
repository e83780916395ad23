//! Stream entry ids (`ms-seq`): ordering, the neighbours of an id, and
//! their text form. Parsing with Redis's rules for each command lives with
//! the commands; this is the plain value.

use std::fmt;

/// An entry id: milliseconds and a sequence number within them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StreamId {
    /// Milliseconds part.
    pub ms: u64,
    /// Sequence part.
    pub seq: u64,
}

impl StreamId {
    /// `0-0`, the smallest id.
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    /// The largest id.
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    /// An id from its two parts.
    pub const fn new(ms: u64, seq: u64) -> Self {
        StreamId { ms, seq }
    }

    /// The next id, or None after [`StreamId::MAX`].
    pub fn next(self) -> Option<StreamId> {
        match self.seq.checked_add(1) {
            Some(seq) => Some(StreamId { ms: self.ms, seq }),
            None => self.ms.checked_add(1).map(|ms| StreamId { ms, seq: 0 }),
        }
    }

    /// The previous id, or None before [`StreamId::MIN`].
    pub fn prev(self) -> Option<StreamId> {
        match self.seq.checked_sub(1) {
            Some(seq) => Some(StreamId { ms: self.ms, seq }),
            None => self
                .ms
                .checked_sub(1)
                .map(|ms| StreamId { ms, seq: u64::MAX }),
        }
    }

    /// Whether this is `0-0`.
    pub fn is_zero(self) -> bool {
        self == StreamId::MIN
    }

    /// The id as `ms-seq` bytes.
    pub fn to_bytes(self) -> Vec<u8> {
        let mut ms = itoa::Buffer::new();
        let mut seq = itoa::Buffer::new();
        let (ms, seq) = (
            ms.format(self.ms).as_bytes(),
            seq.format(self.seq).as_bytes(),
        );
        let mut out = Vec::with_capacity(ms.len() + 1 + seq.len());
        out.extend_from_slice(ms);
        out.push(b'-');
        out.extend_from_slice(seq);
        out
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbours_wrap_between_parts() {
        assert_eq!(StreamId::new(1, u64::MAX).next(), Some(StreamId::new(2, 0)));
        assert_eq!(StreamId::new(2, 0).prev(), Some(StreamId::new(1, u64::MAX)));
        assert_eq!(StreamId::MAX.next(), None);
        assert_eq!(StreamId::MIN.prev(), None);
        assert_eq!(StreamId::new(5, 7).to_string(), "5-7");
    }
}
