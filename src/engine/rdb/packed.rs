//! The packed blobs RDB values are made of: listpack (written and read),
//! intset (written and read), and the older ziplist and zipmap (read
//! only). Each reader checks every length against the blob and answers
//! `None` for a malformed one; the caller names where the blob starts.

use crate::protocol::number::parse_i64;

/// One element of a listpack or ziplist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elem<'a> {
    /// An integer-encoded element.
    Int(i64),
    /// A string element.
    Str(&'a [u8]),
}

impl Elem<'_> {
    /// The element's bytes (an integer formatted).
    pub fn to_vec(self) -> Vec<u8> {
        match self {
            Elem::Int(n) => itoa::Buffer::new().format(n).as_bytes().to_vec(),
            Elem::Str(s) => s.to_vec(),
        }
    }
}

/// Bytes of a listpack's header (total bytes, element count).
const LP_HEADER: usize = 6;
/// A listpack's terminator.
const LP_EOF: u8 = 0xff;

/// Builds a listpack as Redis 7.0 does: an element that is a canonical
/// integer (at most 20 characters) takes the smallest integer encoding,
/// any other the smallest string encoding.
#[derive(Debug)]
pub struct ListpackWriter {
    buf: Vec<u8>,
    count: usize,
}

impl Default for ListpackWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl ListpackWriter {
    /// An empty listpack.
    pub fn new() -> Self {
        ListpackWriter {
            buf: vec![0; LP_HEADER],
            count: 0,
        }
    }

    /// Bytes so far, header included, terminator not (Redis counts it: add 1).
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// Elements so far.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Appends an element.
    pub fn push(&mut self, s: &[u8]) {
        match (s.len() <= 20).then(|| parse_i64(s)).flatten() {
            Some(n) => self.push_int(n),
            None => self.push_str(s),
        }
    }

    /// Appends an integer element.
    pub fn push_int(&mut self, v: i64) {
        let start = self.buf.len();
        let b = &mut self.buf;
        if (0..=127).contains(&v) {
            b.push(v as u8);
        } else if (-4096..=4095).contains(&v) {
            let u = (v as u64) & 0x1fff;
            b.push(0xc0 | (u >> 8) as u8);
            b.push(u as u8);
        } else if (-32768..=32767).contains(&v) {
            b.push(0xf1);
            b.extend_from_slice(&(v as i16).to_le_bytes());
        } else if (-8_388_608..=8_388_607).contains(&v) {
            b.push(0xf2);
            b.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
        } else if let Ok(w) = i32::try_from(v) {
            b.push(0xf3);
            b.extend_from_slice(&w.to_le_bytes());
        } else {
            b.push(0xf4);
            b.extend_from_slice(&v.to_le_bytes());
        }
        self.finish_entry(start);
    }

    /// Appends a string element (never integer-encoded).
    pub fn push_str(&mut self, s: &[u8]) {
        let start = self.buf.len();
        let b = &mut self.buf;
        let n = s.len();
        if n < 64 {
            b.push(0x80 | n as u8);
        } else if n < 4096 {
            b.push(0xe0 | (n >> 8) as u8);
            b.push(n as u8);
        } else {
            b.push(0xf0);
            b.extend_from_slice(&(n as u32).to_le_bytes());
        }
        b.extend_from_slice(s);
        self.finish_entry(start);
    }

    fn finish_entry(&mut self, start: usize) {
        let l = self.buf.len() - start;
        let b = &mut self.buf;
        if l <= 127 {
            b.push(l as u8);
        } else if l < 16383 {
            b.push((l >> 7) as u8);
            b.push((l & 127) as u8 | 128);
        } else if l < 2_097_151 {
            b.push((l >> 14) as u8);
            b.push(((l >> 7) & 127) as u8 | 128);
            b.push((l & 127) as u8 | 128);
        } else if l < 268_435_455 {
            b.push((l >> 21) as u8);
            b.push(((l >> 14) & 127) as u8 | 128);
            b.push(((l >> 7) & 127) as u8 | 128);
            b.push((l & 127) as u8 | 128);
        } else {
            b.push((l >> 28) as u8);
            b.push(((l >> 21) & 127) as u8 | 128);
            b.push(((l >> 14) & 127) as u8 | 128);
            b.push(((l >> 7) & 127) as u8 | 128);
            b.push((l & 127) as u8 | 128);
        }
        self.count += 1;
    }

    /// The finished listpack.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(LP_EOF);
        let total = self.buf.len() as u32;
        self.buf[0..4].copy_from_slice(&total.to_le_bytes());
        let count = self.count.min(65535) as u16;
        self.buf[4..6].copy_from_slice(&count.to_le_bytes());
        self.buf
    }
}

fn le(b: &[u8]) -> u64 {
    b.iter().rev().fold(0u64, |a, &x| (a << 8) | x as u64)
}

/// Sign-extends the low `bits` bits of `v`.
fn sext(v: u64, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((v << shift) as i64) >> shift
}

/// The elements of a listpack, or `None` when it is malformed.
pub fn listpack_elements(lp: &[u8]) -> Option<Vec<Elem<'_>>> {
    if lp.len() < LP_HEADER + 1 || le(lp.get(0..4)?) as usize != lp.len() {
        return None;
    }
    let declared = le(&lp[4..6]) as usize;
    let mut out = Vec::new();
    let mut p = LP_HEADER;
    loop {
        let h = *lp.get(p)?;
        if h == LP_EOF {
            break;
        }
        let (elem, len) = match h {
            0x00..=0x7f => (Elem::Int(h as i64), 1),
            0x80..=0xbf => {
                let n = (h & 0x3f) as usize;
                (Elem::Str(lp.get(p + 1..p + 1 + n)?), 1 + n)
            }
            0xc0..=0xdf => {
                let v = (((h & 0x1f) as u64) << 8) | *lp.get(p + 1)? as u64;
                (Elem::Int(sext(v, 13)), 2)
            }
            0xe0..=0xef => {
                let n = (((h & 0x0f) as usize) << 8) | *lp.get(p + 1)? as usize;
                (Elem::Str(lp.get(p + 2..p + 2 + n)?), 2 + n)
            }
            0xf0 => {
                let n = le(lp.get(p + 1..p + 5)?) as usize;
                (Elem::Str(lp.get(p + 5..(p + 5).checked_add(n)?)?), 5 + n)
            }
            0xf1 => (Elem::Int(sext(le(lp.get(p + 1..p + 3)?), 16)), 3),
            0xf2 => (Elem::Int(sext(le(lp.get(p + 1..p + 4)?), 24)), 4),
            0xf3 => (Elem::Int(sext(le(lp.get(p + 1..p + 5)?), 32)), 5),
            0xf4 => (Elem::Int(le(lp.get(p + 1..p + 9)?) as i64), 9),
            _ => return None,
        };
        let backlen = match len {
            0..=127 => 1,
            128..=16382 => 2,
            16383..=2_097_150 => 3,
            2_097_151..=268_435_454 => 4,
            _ => 5,
        };
        p = p.checked_add(len + backlen)?;
        if p >= lp.len() {
            return None;
        }
        out.push(elem);
    }
    if p + 1 != lp.len() || (declared != 65535 && declared != out.len()) {
        return None;
    }
    Some(out)
}

/// The elements of a ziplist (Redis before 7.0), or `None` when malformed.
pub fn ziplist_elements(zl: &[u8]) -> Option<Vec<Elem<'_>>> {
    if zl.len() < 11 || le(zl.get(0..4)?) as usize != zl.len() {
        return None;
    }
    let mut out = Vec::new();
    let mut p = 10;
    loop {
        let first = *zl.get(p)?;
        if first == 0xff {
            break;
        }
        p += if first < 254 { 1 } else { 5 };
        let h = *zl.get(p)?;
        let (elem, len) = match h >> 6 {
            0 => {
                let n = (h & 0x3f) as usize;
                (Elem::Str(zl.get(p + 1..p + 1 + n)?), 1 + n)
            }
            1 => {
                let n = (((h & 0x3f) as usize) << 8) | *zl.get(p + 1)? as usize;
                (Elem::Str(zl.get(p + 2..p + 2 + n)?), 2 + n)
            }
            2 => {
                let b = zl.get(p + 1..p + 5)?;
                let n = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
                (Elem::Str(zl.get(p + 5..(p + 5).checked_add(n)?)?), 5 + n)
            }
            _ => match h {
                0xc0 => (Elem::Int(sext(le(zl.get(p + 1..p + 3)?), 16)), 3),
                0xd0 => (Elem::Int(sext(le(zl.get(p + 1..p + 5)?), 32)), 5),
                0xe0 => (Elem::Int(le(zl.get(p + 1..p + 9)?) as i64), 9),
                0xf0 => (Elem::Int(sext(le(zl.get(p + 1..p + 4)?), 24)), 4),
                0xfe => (Elem::Int(*zl.get(p + 1)? as i8 as i64), 2),
                0xf1..=0xfd => (Elem::Int((h & 0x0f) as i64 - 1), 1),
                _ => return None,
            },
        };
        p = p.checked_add(len)?;
        out.push(elem);
    }
    (p + 1 == zl.len()).then_some(out)
}

/// The field-value pairs of a zipmap (hashes of Redis before 2.6).
pub fn zipmap_pairs(zm: &[u8]) -> Option<Vec<(&[u8], &[u8])>> {
    let mut p = 1;
    let mut out = Vec::new();
    let read_len = |p: &mut usize| -> Option<usize> {
        let b = *zm.get(*p)?;
        match b {
            0..=253 => {
                *p += 1;
                Some(b as usize)
            }
            254 => {
                let n = le(zm.get(*p + 1..*p + 5)?) as usize;
                *p += 5;
                Some(n)
            }
            _ => None,
        }
    };
    loop {
        if *zm.get(p)? == 0xff {
            break;
        }
        let klen = read_len(&mut p)?;
        let key = zm.get(p..p.checked_add(klen)?)?;
        p += klen;
        let vlen = read_len(&mut p)?;
        let free = *zm.get(p)? as usize;
        p += 1;
        let val = zm.get(p..p.checked_add(vlen)?)?;
        p += vlen + free;
        out.push((key, val));
    }
    (p + 1 == zm.len()).then_some(out)
}

/// An intset of `members` (sorted, distinct) in the smallest width that
/// holds them all, as Redis builds it.
pub fn intset_bytes(members: &[i64]) -> Vec<u8> {
    let fits = |lo: i64, hi: i64| members.iter().all(|&m| (lo..=hi).contains(&m));
    let width: usize = if fits(i16::MIN as i64, i16::MAX as i64) {
        2
    } else if fits(i32::MIN as i64, i32::MAX as i64) {
        4
    } else {
        8
    };
    intset_bytes_width(members, width)
}

/// An intset of `members` in `width` bytes each (at least the smallest
/// that holds them: a set that once held a wider member keeps its width).
pub fn intset_bytes_width(members: &[i64], width: usize) -> Vec<u8> {
    let fits = |lo: i64, hi: i64| members.iter().all(|&m| (lo..=hi).contains(&m));
    let width = match width {
        2 if fits(i16::MIN as i64, i16::MAX as i64) => 2,
        2 | 4 if fits(i32::MIN as i64, i32::MAX as i64) => 4,
        _ => 8,
    };
    let mut out = Vec::with_capacity(8 + width * members.len());
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&(members.len() as u32).to_le_bytes());
    for &m in members {
        out.extend_from_slice(&m.to_le_bytes()[..width]);
    }
    out
}

/// The members of an intset, or `None` when malformed.
pub fn intset_members(b: &[u8]) -> Option<Vec<i64>> {
    let width = le(b.get(0..4)?) as usize;
    let len = le(b.get(4..8)?) as usize;
    if !matches!(width, 2 | 4 | 8) || b.len() != 8 + width.checked_mul(len)? {
        return None;
    }
    Some(
        b[8..]
            .chunks_exact(width)
            .map(|c| sext(le(c), 8 * width as u32))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn listpack_encodings() {
        let mut w = ListpackWriter::new();
        for s in [
            &b"7"[..],
            b"-1",
            b"300",
            b"-5000",
            b"100000",
            b"3000000000",
            b"a",
            b"012",
        ] {
            w.push(s);
        }
        let lp = w.finish();
        let e = listpack_elements(&lp).unwrap();
        assert_eq!(
            e,
            vec![
                Elem::Int(7),
                Elem::Int(-1),
                Elem::Int(300),
                Elem::Int(-5000),
                Elem::Int(100000),
                Elem::Int(3_000_000_000),
                Elem::Str(b"a"),
                Elem::Str(b"012"),
            ]
        );
        // 7: one byte; -1: 13-bit; 300: 13-bit; -5000: 16-bit.
        assert_eq!(&lp[6..8], &[0x07, 0x01]);
        assert_eq!(&lp[8..11], &[0xdf, 0xff, 0x02]);
    }

    #[test]
    fn malformed_listpacks_are_refused() {
        let mut w = ListpackWriter::new();
        w.push(b"hello");
        let lp = w.finish();
        for cut in 0..lp.len() {
            assert!(listpack_elements(&lp[..cut]).is_none());
        }
        let mut bad = lp.clone();
        bad[6] = 0x8f;
        assert!(listpack_elements(&bad).is_none());
    }

    #[test]
    fn intset_round_trip() {
        for m in [vec![1, 2, 3], vec![-70000, 5], vec![i64::MIN, 0, i64::MAX]] {
            assert_eq!(intset_members(&intset_bytes(&m)).unwrap(), m);
        }
        assert_eq!(intset_bytes(&[1, 2])[0], 2);
        assert!(intset_members(&[2, 0, 0, 0, 2, 0, 0, 0, 1]).is_none());
    }

    proptest! {
        #[test]
        fn listpack_round_trips(items in proptest::collection::vec(
            prop_oneof![any::<i64>().prop_map(|n| n.to_string().into_bytes()),
                        proptest::collection::vec(any::<u8>(), 0..5000)], 0..40)) {
            let mut w = ListpackWriter::new();
            for i in &items {
                w.push(i);
            }
            let lp = w.finish();
            let back: Vec<Vec<u8>> = listpack_elements(&lp).unwrap().into_iter().map(Elem::to_vec).collect();
            prop_assert_eq!(back, items);
        }
    }
}
