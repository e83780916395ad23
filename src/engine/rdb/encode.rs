//! Writing values, and the pieces of a file, as redis-server 7.0 writes
//! them. Encodings follow the value's own (OBJECT ENCODING): an `intset`
//! set is written as an intset, a `listpack` sorted set or hash as a
//! listpack, a bigger one element by element; every list as a quicklist of
//! listpacks cut where Redis 7.0's `list-max-listpack-size` cuts a list
//! built by pushes at its tail.

use super::crc64::crc64;
use super::packed::{intset_bytes_width, ListpackWriter};
use super::{lzf, opcodes, types, RDB_VERSION, TYPE_LEADERBOARD};
use crate::engine::hash::HashValue;
use crate::engine::keyspace::Shard;
use crate::engine::leaderboard::{self, Leaderboard};
use crate::engine::list::ListValue;
use crate::engine::set::{Member, SetValue};
use crate::engine::stream::{Stream, StreamId};
use crate::engine::zset::ZSet;
use crate::engine::Value;
use crate::protocol::number::{format_double, parse_i64, MAX_DOUBLE_CHARS};

/// How values are written.
#[derive(Debug, Clone, Copy)]
pub struct EncodeOptions {
    /// `rdbcompression`: strings over 20 bytes are LZF-compressed when
    /// that saves at least 4 bytes.
    pub compress: bool,
    /// `list-max-listpack-size`: where list nodes are cut.
    pub list_fill: i64,
    /// A leaderboard's periods on disk are written as references to their
    /// files (name and checksum) instead of whole: an AOF base's RDB part,
    /// read back only by this server, next to those files.
    pub archive_refs: bool,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        EncodeOptions {
            compress: true,
            list_fill: -2,
            archive_refs: false,
        }
    }
}

/// Appends an RDB length.
pub fn write_len(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else if let Ok(n) = u32::try_from(n) {
        out.push(0x80);
        out.extend_from_slice(&n.to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Appends a string: a canonical integer of at most 11 characters that
/// fits 32 bits in 1, 2 or 4 bytes; else LZF when asked for and it saves
/// room; else the bytes.
pub fn write_string(out: &mut Vec<u8>, s: &[u8], compress: bool) {
    if s.len() <= 11 {
        if let Some(v) = parse_i64(s) {
            if let Ok(v8) = i8::try_from(v) {
                out.extend_from_slice(&[0xc0, v8 as u8]);
                return;
            } else if let Ok(v16) = i16::try_from(v) {
                out.push(0xc1);
                out.extend_from_slice(&v16.to_le_bytes());
                return;
            } else if let Ok(v32) = i32::try_from(v) {
                out.push(0xc2);
                out.extend_from_slice(&v32.to_le_bytes());
                return;
            }
        }
    }
    if compress && s.len() > 20 {
        if let Some(c) = lzf::compress(s, s.len() - 4) {
            out.push(0xc3);
            write_len(out, c.len() as u64);
            write_len(out, s.len() as u64);
            out.extend_from_slice(&c);
            return;
        }
    }
    write_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// A score as Redis's `d2string` writes it into a listpack: integral
/// values below 2^52 in magnitude as integers, others as `%.17g`.
pub fn score_text(score: f64, buf: &mut [u8; MAX_DOUBLE_CHARS]) -> usize {
    if score == 0.0 {
        // The listpack keeps -0 as the integer 0, as Redis's does.
        buf[0] = b'0';
        return 1;
    }
    if score > -4_503_599_627_370_495.0
        && score < 4_503_599_627_370_496.0
        && score == (score as i64) as f64
    {
        let mut b = itoa::Buffer::new();
        let t = b.format(score as i64).as_bytes();
        buf[..t.len()].copy_from_slice(t);
        return t.len();
    }
    format_double(score, buf)
}

/// The type id a value is written with.
pub fn object_type(v: &Value) -> u8 {
    match v {
        Value::Str(_) => types::STRING,
        Value::List(_) => types::LIST_QUICKLIST_2,
        Value::Set(s) if s.encoding() == "intset" => types::SET_INTSET,
        Value::Set(_) => types::SET,
        Value::ZSet(z) if z.is_listpack() => types::ZSET_LISTPACK,
        Value::ZSet(_) => types::ZSET_2,
        Value::Hash(h) if h.encoding() == "listpack" => types::HASH_LISTPACK,
        Value::Hash(_) => types::HASH,
        Value::Leaderboard(_) => TYPE_LEADERBOARD,
        Value::Stream(_) => types::STREAM_LISTPACKS_2,
    }
}

/// Appends a value: its type id, then its payload.
pub fn write_object(out: &mut Vec<u8>, v: &Value, o: EncodeOptions) {
    out.push(object_type(v));
    write_payload(out, v, o);
}

/// Appends a value's payload (what follows its type id and key).
fn write_payload(out: &mut Vec<u8>, v: &Value, o: EncodeOptions) {
    match v {
        Value::Str(s) => write_string(out, &s.as_bytes(), o.compress),
        Value::List(l) => write_list(out, l, o),
        Value::Set(s) => write_set(out, s, o),
        Value::ZSet(z) => write_zset(out, z, o),
        Value::Hash(h) => write_hash(out, h, o),
        Value::Leaderboard(b) => write_leaderboard(out, b, o),
        Value::Stream(st) => write_stream(out, st, o),
    }
}

fn write_set(out: &mut Vec<u8>, s: &SetValue, o: EncodeOptions) {
    if let Some(width) = s.intset_width() {
        let ints: Vec<i64> = s.iter().filter_map(|m| m.as_int()).collect();
        write_string(out, &intset_bytes_width(&ints, width), o.compress);
        return;
    }
    write_len(out, s.len() as u64);
    let mut buf = itoa::Buffer::new();
    for m in s.iter() {
        let b: &[u8] = match m {
            Member::Int(_) => m.bytes(&mut buf),
            Member::Bytes(b) => b,
        };
        write_string(out, b, o.compress);
    }
}

fn write_zset(out: &mut Vec<u8>, z: &ZSet, o: EncodeOptions) {
    let mut num = [0u8; MAX_DOUBLE_CHARS];
    if z.is_listpack() {
        let mut lp = ListpackWriter::new();
        for (m, score) in z.iter() {
            lp.push(m);
            let n = score_text(score, &mut num);
            lp.push(&num[..n]);
        }
        write_string(out, &lp.finish(), o.compress);
        return;
    }
    // Highest first, as Redis 7.0 writes a skiplist.
    write_len(out, z.len() as u64);
    for (m, score) in z.range_by_rank(0, z.len().saturating_sub(1), true) {
        write_string(out, m, o.compress);
        out.extend_from_slice(&score.to_le_bytes());
    }
}

fn write_hash(out: &mut Vec<u8>, h: &HashValue, o: EncodeOptions) {
    if h.encoding() == "listpack" {
        let mut lp = ListpackWriter::new();
        for (f, v) in h.iter() {
            lp.push(f);
            lp.push(&v);
        }
        write_string(out, &lp.finish(), o.compress);
        return;
    }
    write_len(out, h.len() as u64);
    for (f, v) in h.iter() {
        write_string(out, f, o.compress);
        write_string(out, &v, o.compress);
    }
}

/// Redis 7.0's node sizes for negative `list-max-listpack-size`.
const NODE_BYTES: [usize; 5] = [4096, 8192, 16384, 32768, 65536];
/// Redis's `SIZE_SAFETY_LIMIT` for count-limited nodes.
const SAFETY_BYTES: usize = 8192;

/// Whether Redis 7.0's quicklist lets an element of `sz` bytes join a node
/// of `node_bytes` bytes and `count` elements (`_quicklistNodeAllowInsert`).
fn node_allows(fill: i64, node_bytes: usize, count: usize, sz: usize) -> bool {
    let mut overhead = if sz < 254 { 1 } else { 5 };
    overhead += if sz < 64 {
        1
    } else if sz < 16384 {
        2
    } else {
        5
    };
    let new_sz = node_bytes + sz + overhead;
    if fill < 0 {
        let level = (fill.unsigned_abs().min(5) - 1) as usize;
        if new_sz <= NODE_BYTES[level] {
            return true;
        }
    }
    if new_sz > SAFETY_BYTES {
        return false;
    }
    (count as i64) < fill.min(1 << 15)
}

fn write_list(out: &mut Vec<u8>, l: &ListValue, o: EncodeOptions) {
    let mut nodes: Vec<Vec<u8>> = Vec::new();
    let mut cur: Option<ListpackWriter> = None;
    let mut elem = Vec::new();
    for e in l.iter() {
        elem.clear();
        e.write_to(&mut elem);
        let fits = cur
            .as_ref()
            .is_some_and(|w| node_allows(o.list_fill, w.bytes() + 1, w.count(), elem.len()));
        if !fits {
            if let Some(w) = cur.take() {
                nodes.push(w.finish());
            }
            cur = Some(ListpackWriter::new());
        }
        if let Some(w) = cur.as_mut() {
            w.push(&elem);
        }
    }
    if let Some(w) = cur.take() {
        nodes.push(w.finish());
    }
    write_len(out, nodes.len() as u64);
    for n in nodes {
        // 2: a packed (listpack) node.
        write_len(out, 2);
        write_string(out, &n, o.compress);
    }
}

/// The version of the leaderboard record; a reader refuses newer ones
/// (a later version adds what boards gain, such as seasons).
pub const LEADERBOARD_RECORD_VERSION: u8 = 3;

/// A board: the record version, its options by name, its entries best
/// first (member, score, subscore, time, metadata), then its dedup window's
/// ids, oldest first.
fn write_leaderboard(out: &mut Vec<u8>, b: &Leaderboard, o: EncodeOptions) {
    write_board_start(out, b, b.len());
    for (_, e) in b.iter() {
        write_leaderboard_entry(out, e, o);
    }
    write_leaderboard_tail(out, b, o);
}

/// A board's record up to its entries: the version, options and the
/// number of entries that follow.
fn write_board_start(out: &mut Vec<u8>, b: &Leaderboard, len: usize) {
    out.push(LEADERBOARD_RECORD_VERSION);
    let opts = b.options();
    for name in [
        opts.order.name(),
        opts.policy.name(),
        opts.tiebreak.name(),
        opts.ranking.name(),
    ] {
        write_string(out, name.as_bytes(), false);
    }
    write_len(out, opts.capacity);
    write_len(out, len as u64);
}

/// The start of a big board's key record written in pieces (a snapshot's
/// stepwise walk): SELECTDB, its expiry, the type, the key and the record
/// up to its `len` entries; then [`write_leaderboard_entry`] `len` times
/// and [`write_leaderboard_tail`].
pub fn write_leaderboard_head(
    out: &mut Vec<u8>,
    db: usize,
    key: &[u8],
    expire_ms: Option<u64>,
    b: &Leaderboard,
    o: EncodeOptions,
) {
    out.push(opcodes::SELECTDB);
    write_len(out, db as u64);
    if let Some(t) = expire_ms {
        out.push(opcodes::EXPIRETIME_MS);
        out.extend_from_slice(&t.to_le_bytes());
    }
    out.push(TYPE_LEADERBOARD);
    write_string(out, key, o.compress);
    write_board_start(out, b, b.len());
}

/// One entry of a board's record (any order: a reader restores each).
pub fn write_leaderboard_entry(out: &mut Vec<u8>, e: leaderboard::EntryRef<'_>, o: EncodeOptions) {
    write_string(out, e.member, o.compress);
    out.extend_from_slice(&e.score.to_le_bytes());
    out.extend_from_slice(&e.subscore.to_le_bytes());
    out.extend_from_slice(&e.time.to_le_bytes());
    match e.meta {
        Some(m) => {
            out.push(1);
            write_string(out, m, o.compress);
        }
        None => out.push(0),
    }
}

/// What follows a board's entries: its dedup window's ids, its season and
/// its closed periods.
pub fn write_leaderboard_tail(out: &mut Vec<u8>, b: &Leaderboard, o: EncodeOptions) {
    write_len(out, b.ids.len() as u64);
    for id in b.ids.iter() {
        write_string(out, id, o.compress);
    }
    // Version 2: the season (0: none), its closed periods as records of
    // their own.
    let Some(season) = b.season() else {
        out.push(0);
        return;
    };
    out.push(1);
    let words = season.opts.schedule.words();
    write_len(out, words.len() as u64);
    for w in &words {
        write_string(out, w.as_bytes(), false);
    }
    write_string(out, season.opts.zone.to_string().as_bytes(), false);
    write_len(out, season.opts.history);
    // Version 3: where closed periods live (0 memory, 1 disk).
    out.push(match season.opts.archive {
        leaderboard::ArchiveMode::Memory => 0,
        leaderboard::ArchiveMode::Disk => 1,
    });
    write_len(out, season.number);
    write_len(out, season.start);
    write_len(out, season.end().map_or(0, |e| e.saturating_add(1)));
    write_len(out, season.archives().len() as u64);
    for a in season.archives() {
        write_len(out, a.number);
        write_len(out, a.start);
        write_len(out, a.end);
        // Version 3: 0 and the period's record (a period on disk is
        // carried whole: an RDB file or a DUMP payload stands alone), or 1
        // and the name of the file that could not be read, and why.
        match &a.data {
            leaderboard::ArchiveData::Memory(board) => {
                out.push(0);
                write_leaderboard(out, board, o);
            }
            leaderboard::ArchiveData::Disk(d) if o.archive_refs => {
                out.push(2);
                write_string(out, d.name().as_bytes(), false);
                out.extend_from_slice(&d.crc().to_le_bytes());
            }
            leaderboard::ArchiveData::Disk(d) => {
                let mut rec = Vec::new();
                match write_disk_period(&mut rec, d, b.options(), o) {
                    Ok(()) => {
                        out.push(0);
                        out.extend_from_slice(&rec);
                    }
                    Err(e) => {
                        out.push(1);
                        write_string(out, d.name().as_bytes(), false);
                        write_string(out, e.to_string().as_bytes(), false);
                    }
                }
            }
            leaderboard::ArchiveData::Unavailable(u) => {
                out.push(1);
                write_string(out, u.name.as_bytes(), false);
                write_string(out, u.reason.as_bytes(), false);
            }
        }
    }
}

/// A period on disk as the record of a board holding its entries (no ids,
/// no season).
fn write_disk_period(
    out: &mut Vec<u8>,
    d: &leaderboard::disk::DiskArchive,
    opts: &leaderboard::Options,
    o: EncodeOptions,
) -> std::io::Result<()> {
    out.push(LEADERBOARD_RECORD_VERSION);
    for name in [
        opts.order.name(),
        opts.policy.name(),
        opts.tiebreak.name(),
        opts.ranking.name(),
    ] {
        write_string(out, name.as_bytes(), false);
    }
    write_len(out, opts.capacity);
    write_len(out, d.count());
    d.for_each(|e| {
        write_string(out, &e.member, o.compress);
        out.extend_from_slice(&e.score.to_le_bytes());
        out.extend_from_slice(&e.subscore.to_le_bytes());
        out.extend_from_slice(&e.time.to_le_bytes());
        match &e.meta {
            Some(m) => {
                out.push(1);
                write_string(out, m, o.compress);
            }
            None => out.push(0),
        }
    })?;
    write_len(out, 0);
    out.push(0);
    Ok(())
}

fn write_id(out: &mut Vec<u8>, id: StreamId) {
    write_len(out, id.ms);
    write_len(out, id.seq);
}

/// Redis's `stream-node-max-entries` and `stream-node-max-bytes` defaults:
/// when a stream's listpack node is full, as `streamAppendItem` decides.
const STREAM_NODE_MAX_ENTRIES: usize = 100;
const STREAM_NODE_MAX_BYTES: usize = 4096;

/// A stream id as Redis keys its radix trees: 16 bytes, big-endian.
fn raw_id(id: StreamId) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&id.ms.to_be_bytes());
    b[8..].copy_from_slice(&id.seq.to_be_bytes());
    b
}

/// One listpack node of a stream, as Redis 7.0 builds it by appending:
/// the master entry (count, deleted, the first entry's field names, 0),
/// then each entry as flags, id deltas against the master id, its values
/// alone when its names are the master's (`SAMEFIELDS`) or its names and
/// values, and its element count.
fn stream_node(entries: &[(StreamId, Vec<Vec<u8>>)]) -> ListpackWriter {
    let mut lp = ListpackWriter::new();
    let Some((master, first)) = entries.first() else {
        return lp;
    };
    let master_fields = node_header(&mut lp, entries.len(), first);
    for (id, fields) in entries {
        push_stream_entry(&mut lp, *master, &master_fields, *id, fields);
    }
    lp
}

/// A node's master entry; returns the master field names.
fn node_header<'a>(lp: &mut ListpackWriter, count: usize, first: &'a [Vec<u8>]) -> Vec<&'a [u8]> {
    let master_fields: Vec<&[u8]> = first.iter().step_by(2).map(Vec::as_slice).collect();
    lp.push_int(count as i64);
    lp.push_int(0);
    lp.push_int(master_fields.len() as i64);
    for f in &master_fields {
        lp.push(f);
    }
    lp.push_int(0);
    master_fields
}

fn push_stream_entry(
    lp: &mut ListpackWriter,
    master: StreamId,
    master_fields: &[&[u8]],
    id: StreamId,
    fields: &[Vec<u8>],
) {
    let same = fields.len() == master_fields.len() * 2
        && fields
            .iter()
            .step_by(2)
            .zip(master_fields)
            .all(|(a, b)| a.as_slice() == *b);
    let n = (fields.len() / 2) as i64;
    lp.push_int(if same { 2 } else { 0 });
    lp.push_int(id.ms.wrapping_sub(master.ms) as i64);
    lp.push_int(id.seq.wrapping_sub(master.seq) as i64);
    if same {
        for v in fields.iter().skip(1).step_by(2) {
            lp.push(v);
        }
        lp.push_int(n + 3);
    } else {
        lp.push_int(n);
        for f in fields {
            lp.push(f);
        }
        lp.push_int(2 * n + 4);
    }
}

fn write_stream_node(out: &mut Vec<u8>, entries: &[(StreamId, Vec<Vec<u8>>)], o: EncodeOptions) {
    if let Some((master, _)) = entries.first() {
        write_string(out, &raw_id(*master), false);
        write_string(out, &stream_node(entries).finish(), o.compress);
    }
}

/// Bytes [`write_key_in_pieces`] gathers before it hands them on.
pub const PIECE_BYTES: usize = 1 << 16;

/// A stream entry as a node being built holds it: its id and fields.
type NodeEntry = (StreamId, Vec<Vec<u8>>);

/// Calls `emit` with each listpack node of `st`'s entries, split where
/// Redis's appends would split them; only the node being filled is held.
fn stream_nodes(st: &Stream, emit: &mut dyn FnMut(&[NodeEntry])) {
    let mut current: Vec<(StreamId, Vec<Vec<u8>>)> = Vec::new();
    // The node being filled, as Redis sees its size.
    let mut sizer = ListpackWriter::new();
    st.for_each_in(StreamId::MIN, StreamId::MAX, false, |id, fields| {
        let totelelen: usize = fields.iter().map(|f| f.len()).sum();
        if !current.is_empty()
            && (sizer.bytes() + 1 + totelelen >= STREAM_NODE_MAX_BYTES
                || current.len() >= STREAM_NODE_MAX_ENTRIES)
        {
            emit(&current);
            current.clear();
        }
        let entry: Vec<Vec<u8>> = fields.iter().map(|f| f.to_vec()).collect();
        match current.first() {
            None => {
                sizer = ListpackWriter::new();
                let master = node_header(&mut sizer, 1, &entry);
                push_stream_entry(&mut sizer, id, &master, id, &entry);
            }
            Some((master_id, first)) => {
                let master: Vec<&[u8]> = first.iter().step_by(2).map(Vec::as_slice).collect();
                push_stream_entry(&mut sizer, *master_id, &master, id, &entry);
            }
        }
        current.push((id, entry));
        true
    });
    if !current.is_empty() {
        emit(&current);
    }
}

/// A stream as Redis 7.0 writes it (`STREAM_LISTPACKS_2`): its entries in
/// listpack nodes split where Redis's appends would split them (so a
/// stream written by XADDs alone has Redis's bytes; deleted entries are
/// not kept), the length, last, first and largest deleted ids,
/// entries-added, then each group: name, last delivered id, entries-read
/// (-1 unknown), its pending entries (16-byte id, delivery time, count)
/// and its consumers (name, seen time, their pending ids).
fn write_stream(out: &mut Vec<u8>, st: &Stream, o: EncodeOptions) {
    let _ = write_stream_in::<std::convert::Infallible>(out, st, o, &mut |_| Ok(()));
}

/// [`write_stream`], calling `flush` whenever `out` holds
/// [`PIECE_BYTES`] or more (`flush` takes the bytes out of it). The node
/// count comes first in the format, so the nodes are split twice: once
/// to count them, once to write them; no more than one node's entries is
/// held at a time.
fn write_stream_in<E>(
    out: &mut Vec<u8>,
    st: &Stream,
    o: EncodeOptions,
    flush: &mut dyn FnMut(&mut Vec<u8>) -> Result<(), E>,
) -> Result<(), E> {
    let mut count = 0u64;
    stream_nodes(st, &mut |_| count += 1);
    write_len(out, count);
    let mut failed = None;
    stream_nodes(st, &mut |n| {
        if failed.is_some() {
            return;
        }
        write_stream_node(out, n, o);
        if out.len() >= PIECE_BYTES {
            if let Err(e) = flush(out) {
                failed = Some(e);
            }
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    write_len(out, st.len());
    write_id(out, st.last_id);
    write_id(out, st.first_id());
    write_id(out, st.max_deleted_id);
    write_len(out, st.entries_added);
    write_len(out, st.groups.len() as u64);
    for (name, g) in &st.groups {
        write_string(out, name, o.compress);
        write_id(out, g.last_id);
        write_len(out, g.entries_read.unwrap_or(u64::MAX));
        write_len(out, g.pel.len() as u64);
        for (id, p) in &g.pel {
            out.extend_from_slice(&raw_id(*id));
            out.extend_from_slice(&p.delivery_time.to_le_bytes());
            write_len(out, p.delivery_count);
            if out.len() >= PIECE_BYTES {
                flush(out)?;
            }
        }
        write_len(out, g.consumers.len() as u64);
        for (cname, c) in &g.consumers {
            write_string(out, cname, o.compress);
            out.extend_from_slice(&c.seen_time.to_le_bytes());
            write_len(out, c.pel.len() as u64);
            for id in &c.pel {
                out.extend_from_slice(&raw_id(*id));
                if out.len() >= PIECE_BYTES {
                    flush(out)?;
                }
            }
        }
    }
    Ok(())
}

/// A DUMP payload: the value, the RDB version (2 bytes, little-endian)
/// and the CRC-64 of both (8 bytes, little-endian).
pub fn dump_payload(v: &Value, o: EncodeOptions) -> Vec<u8> {
    let mut out = Vec::new();
    write_object(&mut out, v, o);
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// `REDIS0010`.
pub fn write_magic(out: &mut Vec<u8>) {
    out.extend_from_slice(format!("REDIS{RDB_VERSION:04}").as_bytes());
}

/// An AUX field with a text value.
pub fn write_aux(out: &mut Vec<u8>, key: &str, value: &[u8]) {
    out.push(opcodes::AUX);
    write_string(out, key.as_bytes(), false);
    write_string(out, value, false);
}

/// An AUX field with an integer value (written as its text, which the
/// string encoding turns into an integer when it fits).
pub fn write_aux_int(out: &mut Vec<u8>, key: &str, value: i64) {
    write_aux(out, key, itoa::Buffer::new().format(value).as_bytes());
}

/// A function library (`FUNCTION2`: its code).
pub fn write_function(out: &mut Vec<u8>, code: &[u8]) {
    out.push(opcodes::FUNCTION2);
    write_string(out, code, false);
}

/// One key: its expiry, type, name and value.
pub fn write_key(
    out: &mut Vec<u8>,
    key: &[u8],
    value: &Value,
    expire_ms: Option<u64>,
    o: EncodeOptions,
) {
    if let Some(t) = expire_ms {
        out.push(opcodes::EXPIRETIME_MS);
        out.extend_from_slice(&t.to_le_bytes());
    }
    out.push(object_type(value));
    write_string(out, key, o.compress);
    write_payload(out, value, o);
}

/// [`write_key`], handing `out` to `flush` (which takes its bytes) each
/// time it holds [`PIECE_BYTES`] or more while a big stream is encoded, so
/// that a snapshot writing one never holds its whole encoding; the bytes
/// are [`write_key`]'s. What is left in `out` at the end is the caller's
/// to hand on.
pub fn write_key_in_pieces<E>(
    out: &mut Vec<u8>,
    key: &[u8],
    value: &Value,
    expire_ms: Option<u64>,
    o: EncodeOptions,
    flush: &mut dyn FnMut(&mut Vec<u8>) -> Result<(), E>,
) -> Result<(), E> {
    let Value::Stream(st) = value else {
        write_key(out, key, value, expire_ms, o);
        return Ok(());
    };
    if let Some(t) = expire_ms {
        out.push(opcodes::EXPIRETIME_MS);
        out.extend_from_slice(&t.to_le_bytes());
    }
    out.push(object_type(value));
    write_string(out, key, o.compress);
    write_stream_in(out, st, o, flush)
}

/// SELECTDB `db` alone (before a key written apart from its shard).
pub fn write_select_db(out: &mut Vec<u8>, db: usize) {
    out.push(opcodes::SELECTDB);
    write_len(out, db as u64);
}

/// SELECTDB `db`, then RESIZEDB with its key and expiry counts (a
/// loader's size hint).
pub fn write_db_head(out: &mut Vec<u8>, db: usize, keys: usize, expires: usize) {
    out.push(opcodes::SELECTDB);
    write_len(out, db as u64);
    out.push(opcodes::RESIZEDB);
    write_len(out, keys as u64);
    write_len(out, expires as u64);
}

/// The start of a sorted set written in pieces (a snapshot's stepwise
/// walk): SELECTDB `db`, the expiry, the type (a skiplist's), the key and
/// the member count; [`write_zset_member`] for each member follows.
pub fn write_zset_head(
    out: &mut Vec<u8>,
    db: usize,
    key: &[u8],
    expire_ms: Option<u64>,
    len: usize,
    o: EncodeOptions,
) {
    write_head(out, db, key, expire_ms, types::ZSET_2, len, o);
}

/// The start of a `hashtable` hash written in pieces, as
/// [`write_zset_head`]; [`write_hash_field`] for each pair follows.
pub fn write_hash_head(
    out: &mut Vec<u8>,
    db: usize,
    key: &[u8],
    expire_ms: Option<u64>,
    len: usize,
    o: EncodeOptions,
) {
    write_head(out, db, key, expire_ms, types::HASH, len, o);
}

/// One pair of a hash started by [`write_hash_head`].
pub fn write_hash_field(out: &mut Vec<u8>, field: &[u8], value: &[u8], o: EncodeOptions) {
    write_string(out, field, o.compress);
    write_string(out, value, o.compress);
}

/// The start of a `hashtable` set written in pieces, as
/// [`write_zset_head`]; [`write_set_member`] for each member follows.
pub fn write_set_head(
    out: &mut Vec<u8>,
    db: usize,
    key: &[u8],
    expire_ms: Option<u64>,
    len: usize,
    o: EncodeOptions,
) {
    write_head(out, db, key, expire_ms, types::SET, len, o);
}

/// One member of a set started by [`write_set_head`].
pub fn write_set_member(out: &mut Vec<u8>, member: &[u8], o: EncodeOptions) {
    write_string(out, member, o.compress);
}

/// SELECTDB `db`, the expiry, the type, the key and the element count.
fn write_head(
    out: &mut Vec<u8>,
    db: usize,
    key: &[u8],
    expire_ms: Option<u64>,
    ty: u8,
    len: usize,
    o: EncodeOptions,
) {
    out.push(opcodes::SELECTDB);
    write_len(out, db as u64);
    if let Some(t) = expire_ms {
        out.push(opcodes::EXPIRETIME_MS);
        out.extend_from_slice(&t.to_le_bytes());
    }
    out.push(ty);
    write_string(out, key, o.compress);
    write_len(out, len as u64);
}

/// One member of a sorted set started by [`write_zset_head`].
pub fn write_zset_member(out: &mut Vec<u8>, member: &[u8], score: f64, o: EncodeOptions) {
    write_string(out, member, o.compress);
    out.extend_from_slice(&score.to_le_bytes());
}

/// Every live key of a shard, each database after its SELECTDB and
/// RESIZEDB (the shard's part of that database: a loader's size hint).
pub fn write_shard(out: &mut Vec<u8>, shard: &Shard, now_ms: u64, o: EncodeOptions) -> u64 {
    let mut keys = 0;
    for (i, db) in shard.dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        out.push(opcodes::SELECTDB);
        write_len(out, i as u64);
        out.push(opcodes::RESIZEDB);
        write_len(out, db.len() as u64);
        write_len(out, db.expires_len() as u64);
        for (key, entry) in db.iter() {
            let at = entry.expire_at();
            if at.is_some_and(|t| t <= now_ms) {
                continue;
            }
            write_key(out, key, &entry.value, at, o);
            keys += 1;
        }
    }
    keys
}

/// The end: EOF, then the checksum of everything before it (`crc` so far
/// over the file, or 0 when `rdbchecksum` is off).
pub fn write_eof(out: &mut Vec<u8>) {
    out.push(opcodes::EOF);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::stream::Group;
    use crate::engine::string::StrValue;

    /// A big stream written in pieces is [`write_key`]'s bytes, handed on
    /// in pieces of about [`PIECE_BYTES`] (a node's or a pending entry's
    /// bytes more at most), never whole.
    #[test]
    fn a_stream_in_pieces_is_the_same_bytes_in_bounded_pieces() {
        let mut st = Stream::new();
        for i in 1..=60_000u64 {
            let v = format!("value-{}", i % 977);
            st.append(StreamId::new(i, 0), &[b"field", v.as_bytes(), b"n", b"7"]);
        }
        st.delete(StreamId::new(5, 0));
        let mut g = Group::new(StreamId::new(30_000, 0), Some(30_000));
        for i in 1..=20_000u64 {
            g.assign(
                StreamId::new(i, 0),
                if i % 3 == 0 { b"a" } else { b"b" },
                i,
                1,
            );
        }
        st.groups.insert(b"g".to_vec(), g);
        let v = Value::Stream(Box::new(st));
        for o in [
            EncodeOptions::default(),
            EncodeOptions {
                compress: false,
                ..Default::default()
            },
        ] {
            let mut whole = Vec::new();
            write_key(&mut whole, b"events", &v, Some(1_700_000_000_000), o);
            let mut pieces: Vec<Vec<u8>> = Vec::new();
            let mut out = Vec::new();
            let r = write_key_in_pieces::<()>(
                &mut out,
                b"events",
                &v,
                Some(1_700_000_000_000),
                o,
                &mut |p| {
                    pieces.push(std::mem::take(p));
                    Ok(())
                },
            );
            assert!(r.is_ok());
            pieces.push(out);
            assert!(pieces.len() > 10, "{} pieces", pieces.len());
            assert!(pieces.iter().all(|p| p.len() < PIECE_BYTES + 8192));
            assert_eq!(pieces.concat(), whole);
        }
        // A flush that fails stops the writing.
        let mut out = Vec::new();
        let mut calls = 0;
        let r = write_key_in_pieces(
            &mut out,
            b"events",
            &v,
            None,
            EncodeOptions::default(),
            &mut |_| {
                calls += 1;
                Err("disk full")
            },
        );
        assert_eq!((r, calls), (Err("disk full"), 1));
    }

    fn dump(v: Value) -> Vec<u8> {
        dump_payload(&v, EncodeOptions::default())
    }

    #[test]
    fn strings_as_redis_dumps_them() {
        // redis-server 7.0.15: DUMP of SET k 5 / 300 / 100000 / hello.
        assert_eq!(
            dump(Value::Str(StrValue::from_bytes(b"5"))),
            b"\x00\xc0\x05\x0a\x00\x63\x2f\x5f\x66\x83\x2f\xb3\x51"
        );
        let d = dump(Value::Str(StrValue::from_bytes(b"hello")));
        assert_eq!(&d[..9], &b"\x00\x05hello\x0a\x00"[..]);
    }

    #[test]
    fn lengths() {
        let mut o = Vec::new();
        write_len(&mut o, 63);
        write_len(&mut o, 64);
        write_len(&mut o, 16384);
        assert_eq!(o, [63, 0x40, 64, 0x80, 0, 0, 0x40, 0]);
    }

    #[test]
    fn scores_as_d2string() {
        let mut b = [0u8; MAX_DOUBLE_CHARS];
        let mut t = |d: f64| {
            let n = score_text(d, &mut b);
            String::from_utf8_lossy(&b[..n]).into_owned()
        };
        assert_eq!(t(1.0), "1");
        assert_eq!(t(-3.0), "-3");
        assert_eq!(t(1.5), "1.5");
        assert_eq!(t(0.1), "0.10000000000000001");
        assert_eq!(t(1e20), "1e+20");
        assert_eq!(t(f64::INFINITY), "inf");
    }
}
