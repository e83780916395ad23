//! Reading RDB: values of every encoding of versions 6 to 12, and whole
//! files. Every length is checked against what is left, so a truncated or
//! corrupt input is an [`RdbError`] naming the offset, never a panic; a
//! file is read whole before any of it is used, so nothing is half-loaded.

use std::collections::BTreeMap;

use super::crc64::crc64;
use super::packed::{intset_members, listpack_elements, ziplist_elements, zipmap_pairs, Elem};
use super::{
    lzf, opcodes, type_name, types, Limits, RdbError, MAX_READ_VERSION, MIN_READ_VERSION,
    TYPE_LEADERBOARD, TYPE_STREAM_ROSTRUM,
};
use crate::engine::hash::HashValue;
use crate::engine::leaderboard::{self, EntryRef, Leaderboard};
use crate::engine::list::ListValue;
use crate::engine::set::SetValue;
use crate::engine::stream::{Consumer, Group, Pending, Stream, StreamId};
use crate::engine::string::StrValue;
use crate::engine::zset::ZSet;
use crate::engine::Value;
use crate::protocol::number::strtod;

/// A length, or the special encoding of a string.
enum Len {
    Plain(u64),
    Special(u8),
}

/// A cursor over RDB bytes; `base` is the offset of `buf[0]` in the file.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    base: u64,
}

impl<'a> Reader<'a> {
    /// A reader of `buf`, whose first byte is at `base` in its file.
    pub fn new(buf: &'a [u8], base: u64) -> Self {
        Reader { buf, pos: 0, base }
    }

    /// The offset of the next byte.
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Whether every byte was read.
    pub fn at_end(&self) -> bool {
        self.pos == self.buf.len()
    }

    fn err(&self, what: impl Into<String>) -> RdbError {
        RdbError::new(self.offset(), what)
    }

    fn err_at(&self, at: u64, what: impl Into<String>) -> RdbError {
        RdbError::new(at, what)
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], RdbError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        match end {
            Some(e) => {
                let s = &self.buf[self.pos..e];
                self.pos = e;
                Ok(s)
            }
            None => Err(self.err(format!(
                "unexpected end of data ({n} bytes wanted, {} left)",
                self.buf.len() - self.pos
            ))),
        }
    }

    /// One byte.
    pub fn u8(&mut self) -> Result<u8, RdbError> {
        Ok(self.take(1)?[0])
    }

    fn arr<const N: usize>(&mut self) -> Result<[u8; N], RdbError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn u64_le(&mut self) -> Result<u64, RdbError> {
        Ok(u64::from_le_bytes(self.arr()?))
    }

    fn raw_len(&mut self) -> Result<Len, RdbError> {
        let b = self.u8()?;
        Ok(match b >> 6 {
            0 => Len::Plain((b & 0x3f) as u64),
            1 => Len::Plain((((b & 0x3f) as u64) << 8) | self.u8()? as u64),
            3 => Len::Special(b & 0x3f),
            _ => match b {
                0x80 => Len::Plain(u32::from_be_bytes(self.arr()?) as u64),
                0x81 => Len::Plain(u64::from_be_bytes(self.arr()?)),
                _ => return Err(self.err(format!("unknown length encoding {b:#04x}"))),
            },
        })
    }

    /// A length.
    pub fn length(&mut self) -> Result<u64, RdbError> {
        let at = self.offset();
        match self.raw_len()? {
            Len::Plain(n) => Ok(n),
            Len::Special(_) => {
                Err(self.err_at(at, "a string encoding where a length was expected"))
            }
        }
    }

    /// A count of items, each at least `min_bytes` long: refused when what
    /// is left cannot hold them (so a corrupt count allocates nothing).
    fn count(&mut self, min_bytes: usize) -> Result<usize, RdbError> {
        let at = self.offset();
        let n = self.length()?;
        let left = (self.buf.len() - self.pos) as u64;
        if n.saturating_mul(min_bytes as u64) > left {
            return Err(self.err_at(at, format!("count {n} is more than the data left holds")));
        }
        Ok(n as usize)
    }

    /// A string (raw, integer or LZF).
    pub fn string(&mut self) -> Result<Vec<u8>, RdbError> {
        let at = self.offset();
        match self.raw_len()? {
            Len::Plain(n) => {
                let n = usize::try_from(n).map_err(|_| self.err_at(at, "string too long"))?;
                Ok(self.take(n)?.to_vec())
            }
            Len::Special(0) => Ok(itoa_vec(self.u8()? as i8 as i64)),
            Len::Special(1) => Ok(itoa_vec(i16::from_le_bytes(self.arr()?) as i64)),
            Len::Special(2) => Ok(itoa_vec(i32::from_le_bytes(self.arr()?) as i64)),
            Len::Special(3) => {
                let clen = self.length()? as usize;
                let len = self.length()?;
                if len > (1 << 32) || len > (clen as u64).saturating_mul(256) + 64 {
                    return Err(self.err_at(at, format!("bad LZF lengths {clen} -> {len}")));
                }
                let data = self.take(clen)?;
                lzf::decompress(data, len as usize)
                    .ok_or_else(|| self.err_at(at, "corrupt LZF-compressed string"))
            }
            Len::Special(e) => Err(self.err_at(at, format!("unknown string encoding {e}"))),
        }
    }

    /// A binary double (8 bytes, little-endian).
    fn binary_double(&mut self) -> Result<f64, RdbError> {
        Ok(f64::from_le_bytes(self.arr()?))
    }

    /// An ascii double (`ZSET`, version < 8 sorted sets).
    fn ascii_double(&mut self) -> Result<f64, RdbError> {
        let at = self.offset();
        match self.u8()? {
            253 => Ok(f64::NAN),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            n => {
                let text = self.take(n as usize)?;
                let r = strtod(text);
                if r.consumed != text.len() {
                    return Err(self.err_at(at, "bad ascii score"));
                }
                Ok(r.value)
            }
        }
    }

    /// A value of type `t`. `Ok(None)`: an empty value (Redis skips those).
    pub fn object(&mut self, t: u8, lim: &Limits) -> Result<Option<Value>, RdbError> {
        use types::*;
        let at = self.offset();
        let v = match t {
            STRING => Value::Str(StrValue::from_bytes(&self.string()?)),
            LIST => {
                let n = self.count(1)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.string()?);
                }
                Value::List(Box::new(ListValue::from_values(
                    items.iter().map(|v| v.as_slice()),
                    lim.list,
                )))
            }
            LIST_ZIPLIST => {
                let blob = self.string()?;
                let items =
                    ziplist_elements(&blob).ok_or_else(|| self.err_at(at, "corrupt ziplist"))?;
                list_of(items.into_iter().map(Elem::to_vec), lim)
            }
            LIST_QUICKLIST | LIST_QUICKLIST_2 => {
                let nodes = self.count(1)?;
                let mut items: Vec<Vec<u8>> = Vec::new();
                for _ in 0..nodes {
                    let container = if t == LIST_QUICKLIST_2 {
                        self.length()?
                    } else {
                        2
                    };
                    let node_at = self.offset();
                    let blob = self.string()?;
                    match (t, container) {
                        (_, 1) => items.push(blob),
                        (LIST_QUICKLIST, _) => items.extend(
                            ziplist_elements(&blob)
                                .ok_or_else(|| self.err_at(node_at, "corrupt ziplist"))?
                                .into_iter()
                                .map(Elem::to_vec),
                        ),
                        (_, 2) => items.extend(
                            listpack_elements(&blob)
                                .ok_or_else(|| self.err_at(node_at, "corrupt listpack"))?
                                .into_iter()
                                .map(Elem::to_vec),
                        ),
                        _ => {
                            return Err(self.err_at(
                                node_at,
                                format!("unknown quicklist container {container}"),
                            ))
                        }
                    }
                }
                list_of(items.into_iter(), lim)
            }
            SET => {
                let n = self.count(1)?;
                let mut s = SetValue::new();
                for _ in 0..n {
                    let m_at = self.offset();
                    let m = self.string()?;
                    if !s.insert(&m, lim.max_intset) {
                        return Err(self.err_at(m_at, "duplicate set member"));
                    }
                }
                Value::Set(Box::new(s))
            }
            SET_INTSET => {
                let blob = self.string()?;
                let ints =
                    intset_members(&blob).ok_or_else(|| self.err_at(at, "corrupt intset"))?;
                let texts: Vec<Vec<u8>> = ints.iter().map(|&n| itoa_vec(n)).collect();
                set_of(texts.into_iter(), lim)
                    .ok_or_else(|| self.err_at(at, "duplicate intset member"))?
            }
            SET_LISTPACK => {
                let blob = self.string()?;
                let items =
                    listpack_elements(&blob).ok_or_else(|| self.err_at(at, "corrupt listpack"))?;
                set_of(items.into_iter().map(Elem::to_vec), lim)
                    .ok_or_else(|| self.err_at(at, "duplicate set member"))?
            }
            ZSET | ZSET_2 => {
                let n = self.count(2)?;
                let mut pairs = Vec::with_capacity(n);
                for _ in 0..n {
                    let m = self.string()?;
                    let s = if t == ZSET_2 {
                        self.binary_double()?
                    } else {
                        self.ascii_double()?
                    };
                    pairs.push((m, s));
                }
                zset_of(pairs, lim).map_err(|e| self.err_at(at, e))?
            }
            ZSET_ZIPLIST | ZSET_LISTPACK => {
                let blob = self.string()?;
                let items = if t == ZSET_ZIPLIST {
                    ziplist_elements(&blob)
                } else {
                    listpack_elements(&blob)
                }
                .ok_or_else(|| self.err_at(at, "corrupt sorted set blob"))?;
                if items.len() % 2 != 0 {
                    return Err(self.err_at(at, "sorted set blob with an odd element count"));
                }
                let mut pairs = Vec::with_capacity(items.len() / 2);
                for p in items.chunks_exact(2) {
                    let score = match p[1] {
                        Elem::Int(n) => n as f64,
                        Elem::Str(s) => {
                            let r = strtod(s);
                            if r.consumed != s.len() || s.is_empty() {
                                return Err(self.err_at(at, "bad score in a sorted set blob"));
                            }
                            r.value
                        }
                    };
                    pairs.push((p[0].to_vec(), score));
                }
                zset_of(pairs, lim).map_err(|e| self.err_at(at, e))?
            }
            HASH => {
                let n = self.count(2)?;
                let mut pairs = Vec::with_capacity(n);
                for _ in 0..n {
                    let f = self.string()?;
                    let v = self.string()?;
                    pairs.push((f, v));
                }
                hash_of(pairs, lim).map_err(|e| self.err_at(at, e))?
            }
            HASH_ZIPMAP => {
                let blob = self.string()?;
                let pairs = zipmap_pairs(&blob).ok_or_else(|| self.err_at(at, "corrupt zipmap"))?;
                hash_of(
                    pairs
                        .into_iter()
                        .map(|(f, v)| (f.to_vec(), v.to_vec()))
                        .collect(),
                    lim,
                )
                .map_err(|e| self.err_at(at, e))?
            }
            HASH_ZIPLIST | HASH_LISTPACK => {
                let blob = self.string()?;
                let items = if t == HASH_ZIPLIST {
                    ziplist_elements(&blob)
                } else {
                    listpack_elements(&blob)
                }
                .ok_or_else(|| self.err_at(at, "corrupt hash blob"))?;
                if items.len() % 2 != 0 {
                    return Err(self.err_at(at, "hash blob with an odd element count"));
                }
                let pairs = items
                    .chunks_exact(2)
                    .map(|p| (p[0].to_vec(), p[1].to_vec()))
                    .collect();
                hash_of(pairs, lim).map_err(|e| self.err_at(at, e))?
            }
            TYPE_LEADERBOARD => self.leaderboard(lim)?,
            TYPE_STREAM_ROSTRUM => self.stream()?,
            STREAM_LISTPACKS | STREAM_LISTPACKS_2 | STREAM_LISTPACKS_3 => {
                self.stream_listpacks(t)?
            }
            _ => {
                return Err(
                    self.err_at(at, format!("unsupported value type {t} ({})", type_name(t)))
                )
            }
        };
        Ok((!is_empty(&v)).then_some(v))
    }

    fn stream_id(&mut self) -> Result<StreamId, RdbError> {
        Ok(StreamId::new(self.length()?, self.length()?))
    }

    /// Rostrum's stream record of earlier versions (type 201). Entry ids must
    /// rise, and pending entries name consumers of their group.
    fn stream(&mut self) -> Result<Value, RdbError> {
        let at = self.offset();
        let bad = |what: &str| RdbError::new(at, format!("bad stream: {what}"));
        let mut st = Stream::new();
        let n = self.count(3)?;
        let mut last: Option<StreamId> = None;
        for _ in 0..n {
            let id = self.stream_id()?;
            if last.is_some_and(|l| l >= id) {
                return Err(bad("entry ids out of order"));
            }
            last = Some(id);
            let k = self.count(1)?;
            if k == 0 || k % 2 != 0 {
                return Err(bad("an entry's fields and values are not in pairs"));
            }
            let mut fields = Vec::with_capacity(k);
            for _ in 0..k {
                fields.push(self.string()?);
            }
            let refs: Vec<&[u8]> = fields.iter().map(Vec::as_slice).collect();
            st.append(id, &refs);
        }
        let last_id = self.stream_id()?;
        if last.is_some_and(|l| l > last_id) {
            return Err(bad("last id below an entry's"));
        }
        st.last_id = last_id;
        st.max_deleted_id = self.stream_id()?;
        st.entries_added = self.length()?;
        let groups = self.count(4)?;
        for _ in 0..groups {
            let name = self.string()?;
            let last_id = self.stream_id()?;
            let entries_read = self.length()?.checked_sub(1);
            let mut g = Group::new(last_id, entries_read);
            let consumers = self.count(2)?;
            for _ in 0..consumers {
                let cname = self.string()?;
                let seen_time = self.length()?;
                g.consumers.insert(
                    cname.into(),
                    Consumer {
                        seen_time,
                        ..Consumer::default()
                    },
                );
            }
            let pending = self.count(5)?;
            for _ in 0..pending {
                let id = self.stream_id()?;
                let cname = self.string()?;
                let delivery_time = self.length()?;
                let delivery_count = self.length()?;
                let Some((key, _)) = g.consumers.get_key_value(cname.as_slice()) else {
                    return Err(bad("a pending entry names no consumer of its group"));
                };
                let consumer = key.clone();
                if let Some(c) = g.consumers.get_mut(cname.as_slice()) {
                    c.pel.insert(id);
                }
                g.pel.insert(
                    id,
                    Pending {
                        consumer,
                        delivery_time,
                        delivery_count,
                    },
                );
            }
            st.groups.insert(name, g);
        }
        Ok(Value::Stream(Box::new(st)))
    }

    /// A 16-byte big-endian stream id (radix tree keys, pending entries).
    fn raw_stream_id(&mut self) -> Result<StreamId, RdbError> {
        let b: [u8; 16] = self.arr()?;
        let mut ms = [0u8; 8];
        let mut seq = [0u8; 8];
        ms.copy_from_slice(&b[..8]);
        seq.copy_from_slice(&b[8..]);
        Ok(StreamId::new(
            u64::from_be_bytes(ms),
            u64::from_be_bytes(seq),
        ))
    }

    /// Redis's stream types: 15 (5.0 to 6.2), 19 (7.0: first id, largest
    /// deleted id, entries-added, a group's entries-read) and 21 (7.2: a
    /// consumer's active time). Listpack nodes keyed by their master id,
    /// entries in the master-entry / delta format, deleted ones skipped.
    fn stream_listpacks(&mut self, t: u8) -> Result<Value, RdbError> {
        let at = self.offset();
        let bad = |what: &str| RdbError::new(at, format!("bad stream: {what}"));
        let mut st = Stream::new();
        let nodes = self.count(2)?;
        let mut last: Option<StreamId> = None;
        for _ in 0..nodes {
            let key = self.string()?;
            let lp_at = self.offset();
            let lp = self.string()?;
            let Ok(key) = <[u8; 16]>::try_from(key.as_slice()) else {
                return Err(bad("a node key is not 16 bytes"));
            };
            let master = StreamId::new(
                u64::from_be_bytes(key[..8].try_into().unwrap_or_default()),
                u64::from_be_bytes(key[8..].try_into().unwrap_or_default()),
            );
            let elems = listpack_elements(&lp)
                .ok_or_else(|| RdbError::new(lp_at, "bad stream: malformed listpack"))?;
            let mut it = elems.into_iter();
            let int = |it: &mut std::vec::IntoIter<Elem<'_>>| -> Result<i64, RdbError> {
                match it.next() {
                    Some(Elem::Int(n)) => Ok(n),
                    Some(Elem::Str(s)) => std::str::from_utf8(s)
                        .ok()
                        .and_then(|s| s.parse().ok())
                        .ok_or_else(|| RdbError::new(lp_at, "bad stream: integer expected")),
                    None => Err(RdbError::new(lp_at, "bad stream: listpack ends early")),
                }
            };
            let count = int(&mut it)?;
            let deleted = int(&mut it)?;
            let nmaster = int(&mut it)?;
            if count < 0 || deleted < 0 || nmaster < 0 {
                return Err(bad("negative count in a master entry"));
            }
            let mut master_fields = Vec::with_capacity(nmaster as usize);
            for _ in 0..nmaster {
                master_fields.push(
                    it.next()
                        .ok_or_else(|| bad("listpack ends early"))?
                        .to_vec(),
                );
            }
            if int(&mut it)? != 0 {
                return Err(bad("master entry not terminated"));
            }
            for _ in 0..count + deleted {
                let flags = int(&mut it)?;
                let ms = master.ms.wrapping_add(int(&mut it)? as u64);
                let seq = master.seq.wrapping_add(int(&mut it)? as u64);
                let id = StreamId::new(ms, seq);
                let mut fields: Vec<Vec<u8>> = Vec::new();
                if flags & 2 != 0 {
                    for f in &master_fields {
                        fields.push(f.clone());
                        fields.push(
                            it.next()
                                .ok_or_else(|| bad("listpack ends early"))?
                                .to_vec(),
                        );
                    }
                } else {
                    let n = int(&mut it)?;
                    if n < 0 {
                        return Err(bad("negative field count"));
                    }
                    for _ in 0..2 * n {
                        fields.push(
                            it.next()
                                .ok_or_else(|| bad("listpack ends early"))?
                                .to_vec(),
                        );
                    }
                }
                int(&mut it)?;
                if flags & 1 != 0 {
                    continue;
                }
                if last.is_some_and(|l| l >= id) {
                    return Err(bad("entry ids out of order"));
                }
                if fields.is_empty() {
                    return Err(bad("an entry without fields"));
                }
                last = Some(id);
                let refs: Vec<&[u8]> = fields.iter().map(Vec::as_slice).collect();
                st.append(id, &refs);
            }
        }
        let length = self.length()?;
        if length != st.len() {
            return Err(bad("the length does not match the entries"));
        }
        st.last_id = self.stream_id()?;
        if last.is_some_and(|l| l > st.last_id) {
            return Err(bad("last id below an entry's"));
        }
        if t >= types::STREAM_LISTPACKS_2 {
            self.stream_id()?; // first id: the first entry's
            st.max_deleted_id = self.stream_id()?;
            st.entries_added = self.length()?;
        } else {
            st.max_deleted_id = StreamId::MIN;
            st.entries_added = length;
        }
        let groups = self.count(2)?;
        for _ in 0..groups {
            let name = self.string()?;
            let last_id = self.stream_id()?;
            let entries_read = if t >= types::STREAM_LISTPACKS_2 {
                let n = self.length()?;
                (n != u64::MAX).then_some(n)
            } else {
                st.entries_read_at(last_id)
            };
            let mut g = Group::new(last_id, entries_read);
            let npel = self.count(17)?;
            let mut pel: BTreeMap<StreamId, (u64, u64)> = BTreeMap::new();
            for _ in 0..npel {
                let id = self.raw_stream_id()?;
                let time = self.u64_le()?;
                let count = self.length()?;
                pel.insert(id, (time, count));
            }
            let consumers = self.count(9)?;
            for _ in 0..consumers {
                let cname: std::sync::Arc<[u8]> = self.string()?.into();
                let seen_time = self.u64_le()?;
                if t >= types::STREAM_LISTPACKS_3 {
                    self.u64_le()?; // active time: Rostrum keeps the seen time
                }
                let mut c = Consumer {
                    seen_time,
                    ..Consumer::default()
                };
                let n = self.count(16)?;
                for _ in 0..n {
                    let id = self.raw_stream_id()?;
                    let Some((delivery_time, delivery_count)) = pel.remove(&id) else {
                        return Err(bad("a consumer's pending entry is not in its group's"));
                    };
                    c.pel.insert(id);
                    g.pel.insert(
                        id,
                        Pending {
                            consumer: cname.clone(),
                            delivery_time,
                            delivery_count,
                        },
                    );
                }
                g.consumers.insert(cname, c);
            }
            if !pel.is_empty() {
                return Err(bad("a pending entry without a consumer"));
            }
            st.groups.insert(name, g);
        }
        Ok(Value::Stream(Box::new(st)))
    }

    fn leaderboard(&mut self, lim: &Limits) -> Result<Value, RdbError> {
        Ok(Value::Leaderboard(Box::new(self.board(lim, 0)?)))
    }

    /// A leaderboard record: version 1 (entries, options, ids) or 2 (then
    /// its season, whose closed periods are records of their own, read at
    /// `depth` + 1: an archive holds no season).
    fn board(&mut self, lim: &Limits, depth: u8) -> Result<Leaderboard, RdbError> {
        let at = self.offset();
        let bad = |what: &str| RdbError::new(at, format!("bad leaderboard: {what}"));
        let version = self.u8()?;
        if version == 0 || version > super::encode::LEADERBOARD_RECORD_VERSION {
            return Err(bad(&format!("record version {version} is not supported")));
        }
        let order = leaderboard::Order::from_name(&self.string()?).ok_or_else(|| bad("order"))?;
        let policy =
            leaderboard::Policy::from_name(&self.string()?).ok_or_else(|| bad("policy"))?;
        let tiebreak =
            leaderboard::Tiebreak::from_name(&self.string()?).ok_or_else(|| bad("tiebreak"))?;
        let ranking =
            leaderboard::Ranking::from_name(&self.string()?).ok_or_else(|| bad("ranking"))?;
        let capacity = self.length()?;
        let opts = leaderboard::Options {
            order,
            policy,
            tiebreak,
            ranking,
            capacity,
            max_meta_len: lim.lb_max_meta,
        };
        let n = self.count(26)?;
        // Entries are written in the board's order: the tree is built
        // once from them (any order and repeats are still read as a
        // restore of each in turn).
        let mut build = Leaderboard::builder(opts, n);
        for _ in 0..n {
            let member = self.string()?;
            let score = self.u64_le()? as i64;
            let subscore = self.u64_le()? as i64;
            let time = self.u64_le()?;
            let meta = match self.u8()? {
                0 => None,
                1 => Some(self.string()?),
                _ => return Err(bad("metadata flag")),
            };
            build
                .push(EntryRef {
                    member: &member,
                    score,
                    subscore,
                    time,
                    meta: meta.as_deref(),
                })
                .map_err(|e| bad(&e.to_string()))?;
        }
        let mut b = build.finish();
        let ids = self.count(1)?;
        for _ in 0..ids {
            let id = self.string()?;
            b.ids.insert(&id, lim.lb_dedup_window);
        }
        if version >= 2 && self.u8()? == 1 {
            if depth > 0 {
                return Err(bad("a closed period with a season of its own"));
            }
            let words = self.count(1)?;
            let mut w = Vec::with_capacity(words);
            for _ in 0..words {
                w.push(String::from_utf8_lossy(&self.string()?).into_owned());
            }
            let schedule = schedule_of(&w).ok_or_else(|| bad("schedule"))?;
            let zone = leaderboard::Zone::parse(&String::from_utf8_lossy(&self.string()?))
                .ok_or_else(|| bad("time zone"))?;
            let history = self.length()?;
            let archive = match version {
                2 => leaderboard::ArchiveMode::Memory,
                _ => match self.u8()? {
                    0 => leaderboard::ArchiveMode::Memory,
                    1 => leaderboard::ArchiveMode::Disk,
                    _ => return Err(bad("archive mode")),
                },
            };
            let number = self.length()?;
            let start = self.length()?;
            let end = self.length()?.checked_sub(1);
            let n = self.count(4)?;
            let mut archives = Vec::with_capacity(n);
            for _ in 0..n {
                let (number, start, end) = (self.length()?, self.length()?, self.length()?);
                let kind = if version >= 3 { self.u8()? } else { 0 };
                let data = match kind {
                    0 => leaderboard::ArchiveData::Memory(Box::new(self.board(lim, depth + 1)?)),
                    1 => {
                        let name = String::from_utf8_lossy(&self.string()?).into_owned();
                        let reason = String::from_utf8_lossy(&self.string()?).into_owned();
                        leaderboard::ArchiveData::Unavailable(leaderboard::disk::Unavailable {
                            name,
                            reason,
                            crc: None,
                        })
                    }
                    // An AOF base's reference to the period's file, opened
                    // when the load places the board's periods.
                    2 => {
                        let name = String::from_utf8_lossy(&self.string()?).into_owned();
                        let crc = self.u64_le()?;
                        leaderboard::ArchiveData::Unavailable(leaderboard::disk::Unavailable {
                            name,
                            reason: "its file was not opened".into(),
                            crc: Some(crc),
                        })
                    }
                    _ => return Err(bad("closed period kind")),
                };
                archives.push(leaderboard::Archive {
                    number,
                    start,
                    end,
                    data,
                });
            }
            let opts = leaderboard::SeasonOptions {
                schedule,
                zone,
                history,
                archive,
            };
            b.restore_season(opts, number, start, end, archives);
        }
        Ok(b)
    }
}

/// A schedule from the words LB.CREATE takes (as `Schedule::words`
/// writes them).
fn schedule_of(w: &[String]) -> Option<leaderboard::Schedule> {
    use leaderboard::Schedule;
    Some(match (w.first()?.as_str(), w.get(1), w.len()) {
        ("NEVER", None, 1) => Schedule::Never,
        ("DAILY", None, 1) => Schedule::Daily,
        ("WEEKLY", None, 1) => Schedule::Weekly,
        ("MONTHLY", None, 1) => Schedule::Monthly,
        ("EVERY", Some(ms), 2) => Schedule::Every(ms.parse().ok().filter(|&ms: &u64| ms > 0)?),
        ("CRON", Some(line), 2) => Schedule::Cron(Box::new(leaderboard::Cron::parse(line)?)),
        _ => return None,
    })
}

fn itoa_vec(n: i64) -> Vec<u8> {
    itoa::Buffer::new().format(n).as_bytes().to_vec()
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Str(_) => false,
        Value::List(l) => l.is_empty(),
        Value::Set(s) => s.is_empty(),
        Value::ZSet(z) => z.is_empty(),
        Value::Hash(h) => h.is_empty(),
        Value::Leaderboard(_) | Value::Stream(_) => false,
    }
}

fn list_of(items: impl Iterator<Item = Vec<u8>>, lim: &Limits) -> Value {
    let items: Vec<Vec<u8>> = items.collect();
    Value::List(Box::new(ListValue::from_values(
        items.iter().map(|v| v.as_slice()),
        lim.list,
    )))
}

/// A set of `members`; `None` when one repeats.
fn set_of(members: impl Iterator<Item = Vec<u8>>, lim: &Limits) -> Option<Value> {
    let mut s = SetValue::new();
    for m in members {
        if !s.insert(&m, lim.max_intset) {
            return None;
        }
    }
    Some(Value::Set(Box::new(s)))
}

fn zset_of(pairs: Vec<(Vec<u8>, f64)>, lim: &Limits) -> Result<Value, String> {
    let longest = pairs.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
    let mut z = ZSet::with_encoding_for(pairs.len(), longest, lim.zset);
    // A big set is sorted once at the end rather than kept in order
    // through every insert (as the AOF loader does).
    z.defer_order();
    for (m, s) in &pairs {
        if s.is_nan() {
            return Err("NaN score in a sorted set".into());
        }
        if !matches!(
            z.insert(m, *s, lim.zset),
            crate::engine::zset::InsertOutcome::Added
        ) {
            return Err("duplicate sorted set member".into());
        }
    }
    z.restore_order();
    Ok(Value::ZSet(z))
}

fn hash_of(pairs: Vec<(Vec<u8>, Vec<u8>)>, lim: &Limits) -> Result<Value, String> {
    let mut h = HashValue::new();
    for (f, v) in &pairs {
        if !h.set(f, v, lim.hash) {
            return Err("duplicate hash field".into());
        }
    }
    Ok(Value::Hash(h))
}

/// Whether a DUMP payload's trailer (version and CRC-64) is right: the
/// check behind RESTORE's "payload version or checksum are wrong".
pub fn payload_ok(p: &[u8]) -> bool {
    if p.len() < 10 {
        return false;
    }
    let (rest, crc) = p.split_at(p.len() - 8);
    let version = u16::from_le_bytes([rest[rest.len() - 2], rest[rest.len() - 1]]);
    let mut c = [0u8; 8];
    c.copy_from_slice(crc);
    version <= super::RDB_VERSION && crc64(0, rest) == u64::from_le_bytes(c)
}

/// The value of a DUMP payload whose trailer [`payload_ok`] accepted. As
/// redis-server 7.0 (without `sanitize-dump-payload`) the value is read
/// from the payload's start and may run into the trailer; bytes it leaves
/// unread are ignored.
pub fn payload_value(payload: &[u8], lim: &Limits) -> Result<Option<Value>, RdbError> {
    let mut r = Reader::new(payload, 0);
    let t = r.u8()?;
    r.object(t, lim)
}

/// One key read from a file.
#[derive(Debug)]
pub struct LoadedKey {
    pub db: usize,
    pub key: Vec<u8>,
    pub value: Value,
    /// Absolute expiry in unix ms.
    pub expire_ms: Option<u64>,
}

/// What a file holds.
#[derive(Debug, Default)]
pub struct LoadedFile {
    pub version: u16,
    /// AUX fields in file order.
    pub aux: Vec<(Vec<u8>, Vec<u8>)>,
    /// Function library codes.
    pub functions: Vec<Vec<u8>>,
    pub keys: Vec<LoadedKey>,
    /// Keys whose expiry had passed (not in `keys`).
    pub expired: u64,
    /// Bytes read, the checksum included (an AOF base goes on with
    /// commands after them).
    pub end: u64,
}

/// Reads a whole RDB file. `databases` bounds SELECTDB; keys whose expiry
/// is before `now_ms` are dropped (and counted), as a master drops them.
pub fn read_file(
    data: &[u8],
    databases: usize,
    now_ms: u64,
    lim: &Limits,
) -> Result<LoadedFile, RdbError> {
    let mut r = Reader::new(data, 0);
    let magic = r
        .take(9)
        .map_err(|_| RdbError::new(0, "not an RDB file (too short)"))?;
    if &magic[..5] != b"REDIS" {
        return Err(RdbError::new(0, "not an RDB file (no REDIS signature)"));
    }
    let version: u16 = std::str::from_utf8(&magic[5..])
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| RdbError::new(5, "bad RDB version"))?;
    if !(MIN_READ_VERSION..=MAX_READ_VERSION).contains(&version) {
        return Err(RdbError::new(
            5,
            format!("can't handle RDB format version {version}"),
        ));
    }
    let mut out = LoadedFile {
        version,
        ..LoadedFile::default()
    };
    let mut db = 0usize;
    let mut expire: Option<u64> = None;
    loop {
        let op_at = r.offset();
        let op = r.u8()?;
        match op {
            opcodes::EOF => break,
            opcodes::SELECTDB => {
                let n = r.length()?;
                if n >= databases as u64 {
                    return Err(RdbError::new(
                        op_at,
                        format!("database {n} is out of range (databases {databases})"),
                    ));
                }
                db = n as usize;
            }
            opcodes::RESIZEDB => {
                r.length()?;
                r.length()?;
            }
            opcodes::EXPIRETIME_MS => expire = Some(r.u64_le()?),
            opcodes::EXPIRETIME => expire = Some(u32::from_le_bytes(r.arr()?) as u64 * 1000),
            opcodes::IDLE => {
                r.length()?;
            }
            opcodes::FREQ => {
                r.u8()?;
            }
            opcodes::AUX => {
                let k = r.string()?;
                let v = r.string()?;
                out.aux.push((k, v));
            }
            opcodes::SLOT_INFO => {
                r.length()?;
                r.length()?;
                r.length()?;
            }
            opcodes::FUNCTION2 => out.functions.push(r.string()?),
            opcodes::FUNCTION_PRE_GA => {
                return Err(RdbError::new(
                    op_at,
                    "pre-release function format (Redis 7.0 RC) is not supported",
                ))
            }
            opcodes::MODULE_AUX => {
                return Err(RdbError::new(op_at, "module data is not supported"))
            }
            t => {
                let key = r.string()?;
                let value = r.object(t, lim).map_err(|e| {
                    RdbError::new(
                        e.offset,
                        format!(
                            "key '{}' ({}): {}",
                            String::from_utf8_lossy(&key),
                            type_name(t),
                            e.what
                        ),
                    )
                })?;
                let at = expire.take();
                let Some(value) = value else { continue };
                if at.is_some_and(|t| t <= now_ms) {
                    out.expired += 1;
                    continue;
                }
                out.keys.push(LoadedKey {
                    db,
                    key,
                    value,
                    expire_ms: at,
                });
            }
        }
    }
    if version >= 5 {
        let at = r.offset();
        let sum = r
            .u64_le()
            .map_err(|_| RdbError::new(at, "unexpected end of file: no checksum"))?;
        let expect = crc64(0, &data[..at as usize]);
        if sum != 0 && sum != expect {
            return Err(RdbError::new(
                at,
                format!("wrong checksum: file has {sum:016x}, data gives {expect:016x}"),
            ));
        }
    }
    out.end = r.offset();
    Ok(out)
}

#[cfg(test)]
mod tests {
    //! The formats older Redis versions write, built by hand from their
    //! layouts (no redis-server before 7.0 is at hand to write them).
    use super::*;

    /// A ziplist of raw entries (each: encoding byte(s) and data).
    fn ziplist(entries: &[&[u8]]) -> Vec<u8> {
        let mut body = Vec::new();
        let mut prev = 0usize;
        for e in entries {
            let start = body.len();
            if prev < 254 {
                body.push(prev as u8);
            } else {
                body.push(254);
                body.extend_from_slice(&(prev as u32).to_le_bytes());
            }
            body.extend_from_slice(e);
            prev = body.len() - start;
        }
        let total = 10 + body.len() + 1;
        let mut z = Vec::new();
        z.extend_from_slice(&(total as u32).to_le_bytes());
        z.extend_from_slice(&0u32.to_le_bytes());
        z.extend_from_slice(&(entries.len() as u16).to_le_bytes());
        z.extend_from_slice(&body);
        z.push(0xff);
        z
    }

    fn blob(out: &mut Vec<u8>, b: &[u8]) {
        super::super::encode::write_len(out, b.len() as u64);
        out.extend_from_slice(b);
    }

    fn read(t: u8, payload: &[u8]) -> Value {
        let mut r = Reader::new(payload, 0);
        let v = r.object(t, &Limits::default()).unwrap().unwrap();
        assert!(r.at_end());
        v
    }

    fn list_items(v: &Value) -> Vec<Vec<u8>> {
        match v {
            Value::List(l) => l.iter().map(|e| e.to_vec()).collect(),
            _ => panic!("not a list"),
        }
    }

    fn every_ziplist_encoding() -> Vec<u8> {
        ziplist(&[
            b"\x05hello",
            b"\xf8",                                 // immediate 7
            b"\xfe\xfb",                             // int8 -5
            b"\xc0\x2c\x01",                         // int16 300
            b"\xf0\xa0\x86\x01",                     // int24 100000
            b"\xd0\x00\x5e\xd0\xb2",                 // int32 3000000000 as i32
            b"\xe0\x00\x00\x00\x00\x00\x00\x00\x80", // int64 min
            b"\x40\x03abc",                          // 14-bit length string
        ])
    }

    #[test]
    fn ziplist_lists_of_every_encoding() {
        let mut p = Vec::new();
        blob(&mut p, &every_ziplist_encoding());
        let want: Vec<Vec<u8>> = [
            "hello",
            "7",
            "-5",
            "300",
            "100000",
            "-1294967296",
            "-9223372036854775808",
            "abc",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        assert_eq!(list_items(&read(types::LIST_ZIPLIST, &p)), want);
        // The same ziplist as the one node of a (Redis 3.2-6.2) quicklist.
        let mut q = vec![1];
        blob(&mut q, &every_ziplist_encoding());
        assert_eq!(list_items(&read(types::LIST_QUICKLIST, &q)), want);
    }

    #[test]
    fn zipmap_hashes_and_ascii_scores() {
        // zipmap: count, then len key len free value, end.
        let zm = b"\x02\x01a\x02\x00xy\x01b\x01\x02z\x00\x00\xff";
        let mut p = Vec::new();
        blob(&mut p, zm);
        let Value::Hash(h) = read(types::HASH_ZIPMAP, &p) else {
            panic!("not a hash")
        };
        assert_eq!(h.get(b"a").unwrap().to_vec(), b"xy");
        assert_eq!(h.get(b"b").unwrap().to_vec(), b"z");
        // ZSET: count, then member and score as text (253 nan, 254 inf, 255 -inf).
        let p = b"\x03\x01a\x031.5\x01b\xfe\x01c\xff";
        let Value::ZSet(z) = read(types::ZSET, p) else {
            panic!("not a zset")
        };
        let got: Vec<(Vec<u8>, f64)> = z.iter().map(|(m, s)| (m.to_vec(), s)).collect();
        assert_eq!(
            got,
            vec![
                (b"c".to_vec(), f64::NEG_INFINITY),
                (b"a".to_vec(), 1.5),
                (b"b".to_vec(), f64::INFINITY)
            ]
        );
        // A NaN score is refused.
        assert!(Reader::new(b"\x01\x01a\xfd", 0)
            .object(types::ZSET, &Limits::default())
            .is_err());
    }

    #[test]
    fn old_files_load_and_bad_ones_name_the_offset() {
        let mut f = b"REDIS0006\xfe\x00\x00\x01k\x02hi".to_vec();
        // An expiry in seconds (version < 7 style), then a ziplist hash.
        f.extend_from_slice(b"\xfd\x00\x00\x00\x7f\x0d\x01h");
        blob(&mut f, &ziplist(&[b"\x01f", b"\x01v"]));
        f.push(0xff);
        f.extend_from_slice(&0u64.to_le_bytes());
        let loaded = read_file(&f, 16, 0, &Limits::default()).unwrap();
        assert_eq!(loaded.version, 6);
        assert_eq!(loaded.keys.len(), 2);
        assert_eq!(loaded.keys[1].expire_ms, Some(0x7f00_0000u64 * 1000));
        let e = read_file(&f[..20], 16, 0, &Limits::default()).unwrap_err();
        assert_eq!(e.offset, 18);
        let e = read_file(b"REDIS0013", 16, 0, &Limits::default()).unwrap_err();
        assert!(e.what.contains("version 13"));
        // A leaderboard record of a later version is refused by number.
        let e = Reader::new(b"\x04\x04DESC", 0)
            .object(TYPE_LEADERBOARD, &Limits::default())
            .err()
            .map(|e| e.what)
            .unwrap_or_default();
        assert!(e.contains("record version 4"), "{e}");
        // A module value names the key and the type.
        let e = read_file(b"REDIS0010\x07\x01m\x00", 16, 0, &Limits::default()).unwrap_err();
        assert!(
            e.what.contains("key 'm'") && e.what.contains("module"),
            "{e}"
        );
    }
}
