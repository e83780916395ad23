//! Closed periods on disk (issue 17, `ARCHIVE DISK`): the file format,
//! its writer, and the reads the LB.* commands make on it. No commands,
//! no configuration here: the caller passes the folder.
//!
//! # File (`<dir>/lb-archives/p<number>-<16 hex>.lba`, little-endian)
//! - a 128-byte header: magic `RSTLBA01`, version, the board's options,
//!   entry count, period number, start and end, section offsets, the
//!   file's length, the body's CRC-64 (the RDB's) and the header's own;
//! - the key the period was written for (and its database): reported in
//!   errors, checked by nothing else (the name is random, so RENAME, MOVE
//!   and SWAPDB leave the files alone);
//! - entries in rank order, each `member length, member, score, subscore
//!   (zigzag varints), time (varint), place - rank (varint), metadata
//!   length + 1 or 0, metadata`;
//! - a block directory: for every [`BLOCK`] entries, the offset of the
//!   first and its score (16 bytes, kept in memory: the sparse index);
//! - a member hash table (open addressing, linear probing, load <= 1/2):
//!   per slot a 32-bit tag of the member's hash and the entry's place + 1.
//!
//! A rank, score or entry lookup reads 64 bytes of the table (rarely
//! more) and the entry's block (a few KiB): two `pread`s, O(1) plus the
//! block; a range starts at its block (the directory is in memory) and
//! reads on. Reads go through `pread` (no `mmap`): a file truncated or
//! changed underneath gives a read error or a checksum-free garbage
//! decode that is bounds-checked, never a crash.
//!
//! Files are read-only once written (written to `.tmp`, synced, then
//! renamed). The open files are shared by path ([`open_shared`]): a
//! board and its COPY refer to one [`ArchiveFile`], and the file is
//! deleted when the last reference goes (the period dropped by HISTORY,
//! the board deleted, overwritten or flushed), not when the process exits.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use super::{EntryRef, Leaderboard, Options, Order, Policy, Ranking, Tiebreak};
use crate::engine::rdb::crc64::crc64;
use crate::engine::zset::alloc_size;

/// Entries per block of the sparse index.
pub const BLOCK: u64 = 256;
/// The archive files' folder under `dir`.
pub const FOLDER: &str = "lb-archives";
/// File name extension.
pub const EXT: &str = "lba";

const MAGIC: &[u8; 8] = b"RSTLBA01";
const VERSION: u32 = 1;
const HEADER_LEN: u64 = 128;
const SLOT: u64 = 8;

/// Set when the process is exiting: files are then kept whatever is
/// dropped.
static EXITING: AtomicBool = AtomicBool::new(false);

/// Keeps every archive file from here on (the process is exiting, and
/// the boards dropped with it still own their periods).
pub fn keep_files_on_exit() {
    EXITING.store(true, Ordering::SeqCst);
}

type Registry = Mutex<HashMap<PathBuf, Weak<ArchiveFile>>>;

fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The header of an archive file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub order: Order,
    pub ranking: Ranking,
    pub tiebreak: Tiebreak,
    pub policy: Policy,
    pub count: u64,
    pub number: u64,
    pub start: u64,
    pub end: u64,
    pub capacity: u64,
    entries_off: u64,
    blocks_off: u64,
    hash_off: u64,
    hash_slots: u64,
    key_off: u64,
    key_len: u64,
    pub file_len: u64,
    /// CRC-64 of every byte after the header.
    pub crc: u64,
}

fn code<T: PartialEq + Copy>(all: &[T], v: T) -> u8 {
    all.iter().position(|&x| x == v).unwrap_or(0) as u8
}

fn decode_word<T: Copy>(all: &[T], b: u8) -> io::Result<T> {
    all.get(b as usize)
        .copied()
        .ok_or_else(|| corrupt("options"))
}

const ORDERS: [Order; 2] = [Order::Desc, Order::Asc];
const RANKINGS: [Ranking; 3] = [Ranking::Ordinal, Ranking::Competition, Ranking::Dense];
const TIEBREAKS: [Tiebreak; 2] = [Tiebreak::Earliest, Tiebreak::Latest];
const POLICIES: [Policy; 3] = [Policy::Best, Policy::Set, Policy::Incr];

fn corrupt(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("corrupt archive: {what}"),
    )
}

impl Header {
    fn encode(&self) -> [u8; HEADER_LEN as usize] {
        let mut h = [0u8; HEADER_LEN as usize];
        h[..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&VERSION.to_le_bytes());
        h[12] = code(&ORDERS, self.order);
        h[13] = code(&RANKINGS, self.ranking);
        h[14] = code(&TIEBREAKS, self.tiebreak);
        h[15] = code(&POLICIES, self.policy);
        let fields = [
            self.count,
            self.number,
            self.start,
            self.end,
            self.capacity,
            self.entries_off,
            self.blocks_off,
            self.hash_off,
            self.hash_slots,
            self.key_off,
            self.key_len,
            self.file_len,
            self.crc,
        ];
        for (i, f) in fields.iter().enumerate() {
            h[16 + i * 8..24 + i * 8].copy_from_slice(&f.to_le_bytes());
        }
        let hcrc = crc64(0, &h[..120]);
        h[120..].copy_from_slice(&hcrc.to_le_bytes());
        h
    }

    fn decode(h: &[u8]) -> io::Result<Header> {
        if h.len() < HEADER_LEN as usize || &h[..8] != MAGIC {
            return Err(corrupt("not an archive file (bad magic)"));
        }
        let u = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&h[i..i + 8]);
            u64::from_le_bytes(b)
        };
        if crc64(0, &h[..120]) != u(120) {
            return Err(corrupt("header checksum mismatch"));
        }
        let mut v = [0u8; 4];
        v.copy_from_slice(&h[8..12]);
        let version = u32::from_le_bytes(v);
        if version != VERSION {
            return Err(corrupt(&format!("version {version} is not supported")));
        }
        let f = |i: usize| u(16 + i * 8);
        let hd = Header {
            order: decode_word(&ORDERS, h[12])?,
            ranking: decode_word(&RANKINGS, h[13])?,
            tiebreak: decode_word(&TIEBREAKS, h[14])?,
            policy: decode_word(&POLICIES, h[15])?,
            count: f(0),
            number: f(1),
            start: f(2),
            end: f(3),
            capacity: f(4),
            entries_off: f(5),
            blocks_off: f(6),
            hash_off: f(7),
            hash_slots: f(8),
            key_off: f(9),
            key_len: f(10),
            file_len: f(11),
            crc: f(12),
        };
        let sane = hd.key_off == HEADER_LEN
            && hd.entries_off == hd.key_off.saturating_add(hd.key_len)
            && hd.entries_off <= hd.blocks_off
            && hd
                .blocks_off
                .saturating_add(hd.count.div_ceil(BLOCK).saturating_mul(16))
                == hd.hash_off
            && hd.hash_slots.is_power_of_two()
            && hd.hash_slots > hd.count
            && hd
                .hash_off
                .saturating_add(hd.hash_slots.saturating_mul(SLOT))
                == hd.file_len
            && hd.count < u32::MAX as u64;
        if !sane {
            return Err(corrupt("inconsistent header"));
        }
        Ok(hd)
    }
}

/// A stable 64-bit hash of a member (FNV-1a, then a finalizer), the same
/// in every build: it is stored in the file.
fn member_hash(m: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in m {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// An entry read from a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedEntry {
    pub member: Vec<u8>,
    pub score: i64,
    pub subscore: i64,
    pub time: u64,
    pub meta: Option<Vec<u8>>,
    /// Its rank per the board's RANKING.
    pub rank: u64,
}

impl OwnedEntry {
    /// The entry as the in-memory board lends it.
    pub fn as_ref(&self) -> EntryRef<'_> {
        EntryRef {
            member: &self.member,
            score: self.score,
            subscore: self.subscore,
            time: self.time,
            meta: self.meta.as_deref(),
        }
    }
}

/// Decodes entries from a buffer, bounds-checked.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn varint(&mut self) -> io::Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.buf.get(self.pos).ok_or_else(|| corrupt("entry cut"))?;
            self.pos += 1;
            v |= ((b & 0x7f) as u64) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(corrupt("varint"))
    }

    fn bytes(&mut self, n: u64) -> io::Result<&[u8]> {
        let n = usize::try_from(n).map_err(|_| corrupt("length"))?;
        let end = self.pos.checked_add(n).ok_or_else(|| corrupt("length"))?;
        let s = self
            .buf
            .get(self.pos..end)
            .ok_or_else(|| corrupt("entry cut"))?;
        self.pos = end;
        Ok(s)
    }

    /// The next entry, at `place` (1-based).
    fn entry(&mut self, place: u64) -> io::Result<OwnedEntry> {
        let len = self.varint()?;
        let member = self.bytes(len)?.to_vec();
        let score = unzigzag(self.varint()?);
        let subscore = unzigzag(self.varint()?);
        let time = self.varint()?;
        let back = self.varint()?;
        let meta = match self.varint()? {
            0 => None,
            n => Some(self.bytes(n - 1)?.to_vec()),
        };
        Ok(OwnedEntry {
            member,
            score,
            subscore,
            time,
            meta,
            rank: place.checked_sub(back).ok_or_else(|| corrupt("rank"))?,
        })
    }

    /// Skips one entry.
    fn skip(&mut self) -> io::Result<()> {
        let len = self.varint()?;
        self.bytes(len)?;
        for _ in 0..4 {
            self.varint()?;
        }
        match self.varint()? {
            0 => Ok(()),
            n => self.bytes(n - 1).map(|_| ()),
        }
    }
}

/// An open archive file: its header, the block directory, the file.
#[derive(Debug)]
pub struct ArchiveFile {
    path: PathBuf,
    file: File,
    header: Header,
    /// Per block: the offset of its first entry and that entry's score.
    blocks: Vec<(u64, i64)>,
    key: Vec<u8>,
    db: u64,
}

impl Drop for ArchiveFile {
    fn drop(&mut self) {
        let mut r = registry().lock().unwrap_or_else(|p| p.into_inner());
        // Only our own entry (a new open of the same path may be there).
        if r.get(&self.path).is_some_and(|w| w.strong_count() == 0) {
            r.remove(&self.path);
        }
        drop(r);
        if !EXITING.load(Ordering::SeqCst) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// A closed period on disk (cheap to clone: the file is shared).
#[derive(Debug, Clone)]
pub struct DiskArchive {
    file: Arc<ArchiveFile>,
}

/// A closed period whose file could not be opened (missing, corrupt, or
/// for another board): its reads answer an error naming the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    /// The file's name (under the archive folder).
    pub name: String,
    pub reason: String,
    /// A reference not opened yet: the checksum the file must have (an AOF
    /// base's RDB part names its boards' period files instead of copying
    /// them; loading opens them, `Leaderboard::place_archives`).
    pub crc: Option<u64>,
}

/// Whether `name` is a plain archive file name (no folder, not hidden, of
/// this format's extension): what the AOF may name.
pub fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && !name.contains('/')
        && name.ends_with(&format!(".{EXT}"))
}

/// The archive folder under `dir`.
pub fn folder(dir: &Path) -> PathBuf {
    dir.join(FOLDER)
}

impl DiskArchive {
    /// The file's name (in the archive folder).
    pub fn name(&self) -> String {
        self.file
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.file.path
    }

    pub fn header(&self) -> &Header {
        &self.file.header
    }

    /// The key and database the period was written for.
    pub fn written_for(&self) -> (&[u8], u64) {
        (&self.file.key, self.file.db)
    }

    /// Entries in the period.
    pub fn count(&self) -> u64 {
        self.file.header.count
    }

    /// The body's checksum (what the AOF refers to).
    pub fn crc(&self) -> u64 {
        self.file.header.crc
    }

    /// Bytes of the file.
    pub fn file_size(&self) -> u64 {
        self.file.header.file_len
    }

    /// Bytes held in memory for it (the block directory; the file struct
    /// is shared with copies).
    pub fn memory_usage(&self) -> usize {
        alloc_size(std::mem::size_of::<ArchiveFile>())
            + alloc_size(self.file.blocks.capacity() * 16)
            + alloc_size(self.file.key.len())
    }

    fn read_at(&self, off: u64, len: u64) -> io::Result<Vec<u8>> {
        let n = usize::try_from(len).map_err(|_| corrupt("length"))?;
        let mut buf = vec![0u8; n];
        self.file.file.read_exact_at(&mut buf, off).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                corrupt("file is shorter than its header says")
            } else {
                e
            }
        })?;
        Ok(buf)
    }

    /// Bytes of blocks `first..=last`.
    fn read_blocks(&self, first: u64, last: u64) -> io::Result<Vec<u8>> {
        let start = self.block_off(first)?;
        let end = match self.file.blocks.get(last as usize + 1) {
            Some(&(off, _)) => off,
            None => self.file.header.blocks_off,
        };
        if end < start {
            return Err(corrupt("block directory"));
        }
        self.read_at(start, end - start)
    }

    fn block_off(&self, b: u64) -> io::Result<u64> {
        self.file
            .blocks
            .get(b as usize)
            .map(|&(off, _)| off)
            .ok_or_else(|| corrupt("block directory"))
    }

    /// The entry at place `pos + 1` (0-based `pos`).
    fn entry_at(&self, pos: u64) -> io::Result<OwnedEntry> {
        let b = pos / BLOCK;
        let buf = self.read_blocks(b, b)?;
        let mut c = Cursor { buf: &buf, pos: 0 };
        for _ in b * BLOCK..pos {
            c.skip()?;
        }
        c.entry(pos + 1)
    }

    /// The member's place (0-based) and entry.
    pub fn find(&self, member: &[u8]) -> io::Result<Option<(u64, OwnedEntry)>> {
        let h = &self.file.header;
        if h.count == 0 {
            return Ok(None);
        }
        let hash = member_hash(member);
        let tag = (hash >> 32) as u32;
        let mask = h.hash_slots - 1;
        let mut slot = hash & mask;
        const RUN: u64 = 8;
        let mut probed = 0;
        while probed < h.hash_slots {
            let n = RUN.min(h.hash_slots - slot);
            let buf = self.read_at(h.hash_off + slot * SLOT, n * SLOT)?;
            for s in buf.chunks_exact(SLOT as usize) {
                let mut t = [0u8; 4];
                t.copy_from_slice(&s[..4]);
                let mut p = [0u8; 4];
                p.copy_from_slice(&s[4..]);
                let pos1 = u32::from_le_bytes(p) as u64;
                if pos1 == 0 {
                    return Ok(None);
                }
                if u32::from_le_bytes(t) == tag {
                    let pos = pos1 - 1;
                    if pos >= h.count {
                        return Err(corrupt("hash table"));
                    }
                    let e = self.entry_at(pos)?;
                    if e.member == member {
                        return Ok(Some((pos, e)));
                    }
                }
            }
            probed += n;
            slot = (slot + n) & mask;
        }
        Ok(None)
    }

    /// The entries at places `from..=to` (1-based, clamped).
    pub fn range(&self, from: u64, to: u64) -> io::Result<Vec<OwnedEntry>> {
        let from = from.max(1);
        let to = to.min(self.count());
        if from > to {
            return Ok(Vec::new());
        }
        let (first, last) = ((from - 1) / BLOCK, (to - 1) / BLOCK);
        let buf = self.read_blocks(first, last)?;
        let mut c = Cursor { buf: &buf, pos: 0 };
        for _ in first * BLOCK + 1..from {
            c.skip()?;
        }
        let mut out = Vec::with_capacity((to - from + 1).min(1 << 16) as usize);
        for place in from..=to {
            out.push(c.entry(place)?);
        }
        Ok(out)
    }

    /// Every entry in order, a block at a time.
    pub fn for_each(&self, mut f: impl FnMut(&OwnedEntry)) -> io::Result<()> {
        let n = self.count();
        let mut place = 1;
        let blocks = n.div_ceil(BLOCK);
        let mut b = 0;
        while b < blocks {
            let last = (b + 63).min(blocks - 1);
            let buf = self.read_blocks(b, last)?;
            let mut c = Cursor { buf: &buf, pos: 0 };
            let end = ((last + 1) * BLOCK).min(n);
            while place <= end {
                f(&c.entry(place)?);
                place += 1;
            }
            b = last + 1;
        }
        Ok(())
    }

    /// As [`Leaderboard::around`].
    pub fn around(&self, member: &[u8], count: u64) -> io::Result<Vec<OwnedEntry>> {
        let Some((pos, _)) = self.find(member)? else {
            return Ok(Vec::new());
        };
        if count == 0 {
            return Ok(Vec::new());
        }
        let n = self.count();
        let start = pos.saturating_sub(count / 2).min(n.saturating_sub(count));
        self.range(start + 1, start.saturating_add(count))
    }

    /// As [`Leaderboard::among`]: (rank among them, global rank when
    /// asked, entry), in the board's order.
    pub fn among<'m>(
        &self,
        members: impl IntoIterator<Item = &'m [u8]>,
        global: bool,
    ) -> io::Result<Vec<(u64, Option<u64>, OwnedEntry)>> {
        let mut found = Vec::new();
        for m in members {
            if let Some(x) = self.find(m)? {
                found.push(x);
            }
        }
        found.sort_unstable_by_key(|(pos, _)| *pos);
        found.dedup_by_key(|(pos, _)| *pos);
        let ranking = self.file.header.ranking;
        let mut out: Vec<(u64, Option<u64>, OwnedEntry)> = Vec::with_capacity(found.len());
        for (i, (_, e)) in found.into_iter().enumerate() {
            let place = i as u64 + 1;
            let rank = match out.last() {
                Some((last, _, prev)) if ranking != Ranking::Ordinal => {
                    if (prev.score, prev.subscore) == (e.score, e.subscore) {
                        *last
                    } else if ranking == Ranking::Dense {
                        last + 1
                    } else {
                        place
                    }
                }
                _ => place,
            };
            let g = global.then_some(e.rank);
            out.push((rank, g, e));
        }
        Ok(out)
    }

    /// Entries whose score is in `[min, max]`.
    pub fn count_between(&self, min: i64, max: i64) -> io::Result<u64> {
        if min > max {
            return Ok(0);
        }
        let (a, b) = match self.file.header.order {
            // Higher first: [score > max][in range][score < min].
            Order::Desc => (self.partition(|s| s > max)?, self.partition(|s| s >= min)?),
            Order::Asc => (self.partition(|s| s < min)?, self.partition(|s| s <= max)?),
        };
        Ok(b.saturating_sub(a))
    }

    /// How many leading entries satisfy `pred` (true on a prefix).
    fn partition(&self, pred: impl Fn(i64) -> bool) -> io::Result<u64> {
        let blocks = &self.file.blocks;
        // Blocks whose first entry satisfies pred form a prefix.
        let k = blocks.partition_point(|&(_, s)| pred(s)) as u64;
        if k == 0 {
            return Ok(0);
        }
        let b = k - 1;
        let buf = self.read_blocks(b, b)?;
        let mut c = Cursor { buf: &buf, pos: 0 };
        let end = ((b + 1) * BLOCK).min(self.count());
        let mut place = b * BLOCK;
        while place < end {
            if !pred(c.entry(place + 1)?.score) {
                break;
            }
            place += 1;
        }
        Ok(place)
    }

    /// The period as an in-memory board (`opts`: the board's options).
    pub fn to_board(&self, opts: Options) -> io::Result<Leaderboard> {
        let mut b = Leaderboard::builder(opts, self.count() as usize);
        let mut err = None;
        self.for_each(|e| {
            if err.is_none() {
                if let Err(x) = b.push(e.as_ref()) {
                    err = Some(x);
                }
            }
        })?;
        match err {
            Some(e) => Err(io::Error::other(e.to_string())),
            None => Ok(b.finish()),
        }
    }
}

/// Writes `board`, period `number` from `start` to `end` of `key` in
/// database `db`, to a new file in `folder` (created if needed), and
/// opens it.
pub fn write(
    folder: &Path,
    key: &[u8],
    db: u64,
    number: u64,
    start: u64,
    end: u64,
    board: &Leaderboard,
) -> io::Result<DiskArchive> {
    std::fs::create_dir_all(folder)?;
    let count = board.count();
    let name = loop {
        let name = format!("p{number}-{:016x}.{EXT}", rand::random::<u64>());
        if !folder.join(&name).exists() {
            break name;
        }
    };
    let path = folder.join(&name);
    let tmp = folder.join(format!("{name}.tmp"));
    let r = write_file(&tmp, key, db, number, start, end, board, count);
    if let Err(e) = r.and_then(|_| std::fs::rename(&tmp, &path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    open_shared(&path)
}

#[allow(clippy::too_many_arguments)]
fn write_file(
    tmp: &Path,
    key: &[u8],
    db: u64,
    number: u64,
    start: u64,
    end: u64,
    board: &Leaderboard,
    count: u64,
) -> io::Result<()> {
    let file = OpenOptions::new().write(true).create_new(true).open(tmp)?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    w.write_all(&[0u8; HEADER_LEN as usize])?;
    let mut crc = 0u64;
    let mut off = HEADER_LEN;
    let mut put = |w: &mut BufWriter<File>, bytes: &[u8], crc: &mut u64| -> io::Result<()> {
        *crc = crc64(*crc, bytes);
        off += bytes.len() as u64;
        w.write_all(bytes)
    };
    // The key section: db (8 bytes), then the key.
    let mut keysec = db.to_le_bytes().to_vec();
    keysec.extend_from_slice(key);
    put(&mut w, &keysec, &mut crc)?;
    let entries_off = HEADER_LEN + keysec.len() as u64;
    let slots = (count.saturating_mul(2)).next_power_of_two().max(16);
    let mut table = vec![0u64; slots as usize];
    let mut blocks: Vec<u8> = Vec::with_capacity((count.div_ceil(BLOCK) * 16) as usize);
    let mut buf = Vec::with_capacity(256);
    let mut place = 0u64;
    let mut off_now = entries_off;
    for (rank, e) in board.iter() {
        if place.is_multiple_of(BLOCK) {
            blocks.extend_from_slice(&off_now.to_le_bytes());
            blocks.extend_from_slice(&e.score.to_le_bytes());
        }
        buf.clear();
        put_varint(&mut buf, e.member.len() as u64);
        buf.extend_from_slice(e.member);
        put_varint(&mut buf, zigzag(e.score));
        put_varint(&mut buf, zigzag(e.subscore));
        put_varint(&mut buf, e.time);
        put_varint(&mut buf, (place + 1).saturating_sub(rank));
        match e.meta {
            None => put_varint(&mut buf, 0),
            Some(m) => {
                put_varint(&mut buf, m.len() as u64 + 1);
                buf.extend_from_slice(m);
            }
        }
        off_now += buf.len() as u64;
        put(&mut w, &buf, &mut crc)?;
        let h = member_hash(e.member);
        let mut s = h & (slots - 1);
        while table[s as usize] != 0 {
            s = (s + 1) & (slots - 1);
        }
        table[s as usize] = ((h >> 32) & 0xffff_ffff) | ((place + 1) << 32);
        place += 1;
    }
    if place != count {
        return Err(io::Error::other("board changed while written"));
    }
    let blocks_off = off_now;
    put(&mut w, &blocks, &mut crc)?;
    let hash_off = blocks_off + blocks.len() as u64;
    let mut tb = Vec::with_capacity(64 * 1024);
    for chunk in table.chunks(8192) {
        tb.clear();
        for &v in chunk {
            tb.extend_from_slice(&((v & 0xffff_ffff) as u32).to_le_bytes());
            tb.extend_from_slice(&((v >> 32) as u32).to_le_bytes());
        }
        put(&mut w, &tb, &mut crc)?;
    }
    let o = board.options();
    let header = Header {
        order: o.order,
        ranking: o.ranking,
        tiebreak: o.tiebreak,
        policy: o.policy,
        count,
        number,
        start,
        end,
        capacity: o.capacity,
        entries_off,
        blocks_off,
        hash_off,
        hash_slots: slots,
        key_off: HEADER_LEN,
        key_len: keysec.len() as u64,
        file_len: hash_off + slots * SLOT,
        crc,
    };
    let mut file = w.into_inner().map_err(|e| e.into_error())?;
    file.seek(SeekFrom::Start(0))?;
    file.write_all(&header.encode())?;
    file.sync_all()?;
    Ok(())
}

/// Opens the file at `path`, checking its header and whole-body checksum;
/// a file already open (a COPY of a board refers to it too) is shared.
pub fn open_shared(path: &Path) -> io::Result<DiskArchive> {
    // Held while opening, so that one path is opened once.
    let mut r = registry().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(f) = r.get(path).and_then(Weak::upgrade) {
        return Ok(DiskArchive { file: f });
    }
    let f = Arc::new(open_file(path)?);
    r.insert(path.to_path_buf(), Arc::downgrade(&f));
    Ok(DiskArchive { file: f })
}

fn open_file(path: &Path) -> io::Result<ArchiveFile> {
    let mut file = File::open(path)?;
    let mut h = [0u8; HEADER_LEN as usize];
    file.read_exact(&mut h)
        .map_err(|_| corrupt("file is shorter than a header"))?;
    let header = Header::decode(&h)?;
    let len = file.metadata()?.len();
    if len != header.file_len {
        return Err(corrupt(&format!(
            "file is {len} bytes, its header says {}",
            header.file_len
        )));
    }
    let mut crc = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        crc = crc64(crc, &buf[..n]);
    }
    if crc != header.crc {
        return Err(corrupt("checksum mismatch"));
    }
    let keysec = read_exact_at(&file, header.key_off, header.key_len)?;
    if keysec.len() < 8 {
        return Err(corrupt("key section"));
    }
    let mut d = [0u8; 8];
    d.copy_from_slice(&keysec[..8]);
    let db = u64::from_le_bytes(d);
    let key = keysec[8..].to_vec();
    let dir = read_exact_at(
        &file,
        header.blocks_off,
        header.hash_off - header.blocks_off,
    )?;
    let mut blocks = Vec::with_capacity(dir.len() / 16);
    for c in dir.chunks_exact(16) {
        let mut o = [0u8; 8];
        let mut s = [0u8; 8];
        o.copy_from_slice(&c[..8]);
        s.copy_from_slice(&c[8..]);
        let off = u64::from_le_bytes(o);
        if off < header.entries_off || off > header.blocks_off {
            return Err(corrupt("block directory"));
        }
        blocks.push((off, i64::from_le_bytes(s)));
    }
    Ok(ArchiveFile {
        path: path.to_path_buf(),
        file,
        header,
        blocks,
        key,
        db,
    })
}

fn read_exact_at(file: &File, off: u64, len: u64) -> io::Result<Vec<u8>> {
    let n = usize::try_from(len).map_err(|_| corrupt("length"))?;
    let mut buf = vec![0u8; n];
    file.read_exact_at(&mut buf, off)
        .map_err(|_| corrupt("file is shorter than its header says"))?;
    Ok(buf)
}

/// Archive files in `folder` (names ending in `.lba` or `.lba.tmp`).
pub fn files_in(folder: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().map(|n| n.to_string_lossy().into_owned());
            n.is_some_and(|n| n.ends_with(".lba") || n.ends_with(".lba.tmp"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "rostrum-disk-{name}-{}-{}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn board(n: u64, ranking: Ranking) -> Leaderboard {
        let mut b = Leaderboard::new(Options {
            ranking,
            ..Options::default()
        });
        for i in 0..n {
            let meta = (i % 7 == 0).then(|| format!("m{i}").into_bytes());
            b.submit(
                format!("p{i}").as_bytes(),
                (i % 50) as i64 - 20,
                (i % 3) as i64,
                i,
                meta.as_deref(),
            )
            .unwrap();
        }
        b
    }

    #[test]
    fn lookups_match_the_board() {
        let dir = tmpdir("lookups");
        for ranking in RANKINGS {
            let b = board(1000, ranking);
            let d = write(&dir, b"k", 0, 3, 10, 20, &b).unwrap();
            assert_eq!(d.count(), 1000);
            for i in (0..1100).step_by(7) {
                let m = format!("p{i}");
                let got = d.find(m.as_bytes()).unwrap();
                assert_eq!(got.as_ref().map(|(_, e)| e.rank), b.rank(m.as_bytes()));
                assert_eq!(got.as_ref().map(|(_, e)| e.as_ref()), b.get(m.as_bytes()));
            }
            let all: Vec<_> = b.iter().map(|(r, e)| (r, e.member.to_vec())).collect();
            let got: Vec<_> = d
                .range(1, 2000)
                .unwrap()
                .into_iter()
                .map(|e| (e.rank, e.member))
                .collect();
            assert_eq!(all, got);
            for (lo, hi) in [(-30, 40), (-20, -20), (0, 5), (10, -10), (29, 29)] {
                assert_eq!(d.count_between(lo, hi).unwrap(), b.count_between(lo, hi));
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn corrupt_and_cut_files_are_errors() {
        let dir = tmpdir("corrupt");
        let b = board(300, Ranking::Ordinal);
        let d = write(&dir, b"k", 0, 1, 0, 1, &b).unwrap();
        let path = d.path().to_path_buf();
        let mut bytes = std::fs::read(&path).unwrap();
        let copy = dir.join("copy.lba");
        bytes[200] ^= 1;
        std::fs::write(&copy, &bytes).unwrap();
        assert!(open_shared(&copy).is_err());
        // Cut underneath an open file: reads fail, nothing panics.
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(300).unwrap();
        assert!(d.range(1, 300).is_err());
        let _ = d.find(b"p5");
        drop(d);
        assert!(!path.exists(), "dropped: deleted");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
