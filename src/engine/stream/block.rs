//! A block of consecutive stream entries in one byte buffer (Redis keeps a
//! listpack per radix-tree node; this is the same idea). The block is keyed
//! by its base id (the id of the first entry it was created with, kept
//! after that entry is deleted): each entry stores its milliseconds as a
//! delta against the base and its sequence as is, both as varints. Field
//! names equal to the block's first entry's (the "master" fields) are not
//! repeated: the common case of a producer writing the same fields in
//! every event costs only the values.
//!
//! Layout: `nmaster, (len, name)*nmaster`, then entries:
//! `ms_delta, seq, k, [ (len, name)*k ], (len, value)*n` where `k` is 0
//! when the entry's names are the master names (then `n = nmaster`), else
//! its own field count (`n = k`).

use smallvec::SmallVec;

use super::id::StreamId;

/// Entries a block holds before a new one starts (Redis's
/// `stream-node-max-entries` default).
pub const MAX_ENTRIES: u32 = 100;
/// Bytes a block holds before a new one starts (`stream-node-max-bytes`).
pub const MAX_BYTES: usize = 4096;

/// A block of entries; see the module comment for the layout.
#[derive(Debug, Clone, Default)]
pub struct Block {
    data: Vec<u8>,
    count: u32,
}

fn push_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn read_varint(bytes: &[u8], at: &mut usize) -> u64 {
    let mut n: u64 = 0;
    let mut shift = 0;
    while let Some(&b) = bytes.get(*at) {
        *at += 1;
        if shift < 64 {
            n |= u64::from(b & 0x7f) << shift;
        }
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    n
}

fn push_bytes(out: &mut Vec<u8>, b: &[u8]) {
    push_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn read_bytes<'a>(bytes: &'a [u8], at: &mut usize) -> &'a [u8] {
    let n = read_varint(bytes, at) as usize;
    let start = (*at).min(bytes.len());
    let end = start.saturating_add(n).min(bytes.len());
    *at = end;
    &bytes[start..end]
}

/// An entry's field names and values interleaved, borrowed from its block
/// (inline up to four pairs: decoding an entry allocates nothing).
pub type Fields<'a> = SmallVec<[&'a [u8]; 8]>;

/// One decoded entry: its id, where its bytes are in the block, and its
/// field names and values interleaved (borrowed from the block).
#[derive(Debug)]
pub struct EntryRef<'a> {
    /// The entry's id.
    pub id: StreamId,
    start: usize,
    end: usize,
    /// `name, value, name, value, ...`.
    pub fields: Fields<'a>,
}

/// The entries of a block in id order, decoded one at a time (the master
/// names once, when it starts).
#[derive(Debug)]
pub struct Iter<'a> {
    data: &'a [u8],
    at: usize,
    base: StreamId,
    masters: SmallVec<[&'a [u8]; 4]>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = EntryRef<'a>;

    fn next(&mut self) -> Option<EntryRef<'a>> {
        let data = self.data;
        if self.at >= data.len() {
            return None;
        }
        let at = &mut self.at;
        let start = *at;
        let ms = self.base.ms.saturating_add(read_varint(data, at));
        let seq = read_varint(data, at);
        let k = read_varint(data, at) as usize;
        let mut fields = Fields::new();
        if k == 0 {
            for m in &self.masters {
                fields.push(*m);
                fields.push(read_bytes(data, at));
            }
        } else {
            let names: SmallVec<[&[u8]; 4]> = (0..k).map(|_| read_bytes(data, at)).collect();
            for n in names {
                fields.push(n);
                fields.push(read_bytes(data, at));
            }
        }
        Some(EntryRef {
            id: StreamId { ms, seq },
            start,
            end: *at,
            fields,
        })
    }
}

impl Block {
    /// A block whose master fields are those of its first entry
    /// (`fields` interleaves names and values).
    pub fn new(base: StreamId, id: StreamId, fields: &[&[u8]]) -> Block {
        // Room for a few entries like the first: the block grows by
        // doubling from there, and is shrunk when sealed.
        let first: usize = fields.iter().map(|f| f.len() + 1).sum();
        let mut data = Vec::with_capacity((first * 4).clamp(64, MAX_BYTES));
        let names = fields.len() / 2;
        push_varint(&mut data, names as u64);
        for pair in fields.chunks_exact(2) {
            push_bytes(&mut data, pair[0]);
        }
        let mut b = Block { data, count: 0 };
        b.push(base, id, fields);
        b
    }

    /// Live entries in the block.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Bytes used by the encoded entries.
    pub fn byte_len(&self) -> usize {
        self.data.len()
    }

    /// Whether another entry should go to a new block.
    pub fn is_full(&self) -> bool {
        self.count >= MAX_ENTRIES || self.data.len() >= MAX_BYTES
    }

    /// Drops spare capacity (a block is sealed when the next one starts).
    pub fn seal(&mut self) {
        self.data.shrink_to_fit();
    }

    /// Bytes allocated.
    pub fn capacity(&self) -> usize {
        self.data.capacity()
    }

    /// The entries in id order, decoded as they are taken.
    pub fn iter(&self, base: StreamId) -> Iter<'_> {
        let data = &self.data[..];
        let mut at = 0;
        let n = read_varint(data, &mut at) as usize;
        let masters = (0..n).map(|_| read_bytes(data, &mut at)).collect();
        Iter {
            data,
            at,
            base,
            masters,
        }
    }

    /// Whether `fields`' names are the block's master names.
    fn has_master_names(&self, fields: &[&[u8]]) -> bool {
        let data = &self.data[..];
        let mut at = 0;
        let n = read_varint(data, &mut at) as usize;
        n * 2 == fields.len()
            && fields
                .chunks_exact(2)
                .all(|pair| read_bytes(data, &mut at) == pair[0])
    }

    /// Appends an entry (its id must be above every id in the block and
    /// not below `base`).
    pub fn push(&mut self, base: StreamId, id: StreamId, fields: &[&[u8]]) {
        let same = self.has_master_names(fields);
        let data = &mut self.data;
        push_varint(data, id.ms.saturating_sub(base.ms));
        push_varint(data, id.seq);
        if same {
            push_varint(data, 0);
            for pair in fields.chunks_exact(2) {
                push_bytes(data, pair[1]);
            }
        } else {
            push_varint(data, (fields.len() / 2) as u64);
            for pair in fields.chunks_exact(2) {
                push_bytes(data, pair[0]);
            }
            for pair in fields.chunks_exact(2) {
                push_bytes(data, pair[1]);
            }
        }
        self.count += 1;
    }

    /// Every entry, in id order.
    pub fn entries(&self, base: StreamId) -> Vec<EntryRef<'_>> {
        self.iter(base).collect()
    }

    /// Removes the entry with `id`; returns whether it was there.
    pub fn remove(&mut self, base: StreamId, id: StreamId) -> bool {
        let span = self
            .entries(base)
            .iter()
            .find(|e| e.id == id)
            .map(|e| (e.start, e.end));
        match span {
            Some((s, e)) => {
                self.data.drain(s..e);
                self.count -= 1;
                true
            }
            None => false,
        }
    }

    /// Removes the first `n` entries (the ids only delta against the
    /// base, so the rest stay valid).
    pub fn remove_first(&mut self, base: StreamId, n: usize) {
        if n == 0 {
            return;
        }
        let span = {
            let entries = self.entries(base);
            match (entries.first(), entries.get(n.min(entries.len()) - 1)) {
                (Some(f), Some(l)) => Some((f.start, l.end, n.min(entries.len()))),
                _ => None,
            }
        };
        if let Some((s, e, k)) = span {
            self.data.drain(s..e);
            self.count -= k as u32;
        }
    }

    /// The last entry's id.
    pub fn last_id(&self, base: StreamId) -> Option<StreamId> {
        self.iter(base).last().map(|e| e.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn master_fields_are_shared_and_own_fields_kept() {
        let base = StreamId::new(1000, 0);
        let mut b = Block::new(base, base, &[b"a", b"1", b"b", b"2"]);
        let before = b.byte_len();
        b.push(base, StreamId::new(1001, 5), &[b"a", b"3", b"b", b"4"]);
        // Same names: two values, three varints, no names.
        assert_eq!(b.byte_len() - before, 3 + 4);
        b.push(base, StreamId::new(1001, 6), &[b"x", b"9"]);
        let e = b.entries(base);
        assert_eq!(e.len(), 3);
        assert_eq!(e[1].id, StreamId::new(1001, 5));
        assert_eq!(e[1].fields[..], [&b"a"[..], b"3", b"b", b"4"]);
        assert_eq!(e[2].fields[..], [&b"x"[..], b"9"]);
        drop(e);
        assert!(b.remove(base, StreamId::new(1001, 5)));
        assert!(!b.remove(base, StreamId::new(1001, 5)));
        assert_eq!(b.count(), 2);
        b.remove_first(base, 1);
        let e = b.entries(base);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].id, StreamId::new(1001, 6));
    }
}
