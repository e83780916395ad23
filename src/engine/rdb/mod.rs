//! The RDB format: Redis's snapshot file and the payload of DUMP/RESTORE.
//! A codec like `protocol`: values and bytes, no files, clients or locks
//! (reading and writing `dump.rdb` is `persistence::rdb`; DUMP and RESTORE
//! are `commands::keys`).
//!
//! - [`encode`] writes a value as redis-server 7.0 writes it (RDB version
//!   10): strings with their integer and LZF forms, intsets and listpacks
//!   for small sets, sorted sets and hashes, quicklists of listpacks for
//!   lists, `ZSET_2` for big sorted sets; leaderboards as Rostrum's own
//!   type [`TYPE_LEADERBOARD`], which Redis refuses as an unknown type.
//! - [`decode`] reads every value encoding of RDB versions 6 to 12 (zipmap,
//!   ziplist, listpack, intset, quicklist 1 and 2, LZF, ascii and binary
//!   scores) into Rostrum's structures, and the whole-file layout (AUX,
//!   SELECTDB, RESIZEDB, expiries, functions, EOF and checksum).
//! - [`crc64`] and [`lzf`]: the checksum and the string compression.
//!
//! Streams are written as Redis 7.0's `STREAM_LISTPACKS_2` (listpack nodes
//! in the master-entry / delta format, groups, pending entries, consumers)
//! and read from types 15, 19, 21 and Rostrum's earlier record, 201.

pub mod crc64;
pub mod decode;
pub mod encode;
pub mod lzf;
pub mod packed;

use std::fmt;

use super::hash::HashLimits;
use super::list::ListLimits;
use super::zset::ZSetLimits;

/// The RDB version this codec writes (Redis 7.0's).
pub const RDB_VERSION: u16 = 10;
/// The newest version it reads (Redis 7.4's).
pub const MAX_READ_VERSION: u16 = 12;
/// The oldest version it reads (Redis 2.6's).
pub const MIN_READ_VERSION: u16 = 6;

/// Value type ids.
pub mod types {
    pub const STRING: u8 = 0;
    pub const LIST: u8 = 1;
    pub const SET: u8 = 2;
    pub const ZSET: u8 = 3;
    pub const HASH: u8 = 4;
    pub const ZSET_2: u8 = 5;
    pub const MODULE_PRE_GA: u8 = 6;
    pub const MODULE_2: u8 = 7;
    pub const HASH_ZIPMAP: u8 = 9;
    pub const LIST_ZIPLIST: u8 = 10;
    pub const SET_INTSET: u8 = 11;
    pub const ZSET_ZIPLIST: u8 = 12;
    pub const HASH_ZIPLIST: u8 = 13;
    pub const LIST_QUICKLIST: u8 = 14;
    pub const STREAM_LISTPACKS: u8 = 15;
    pub const HASH_LISTPACK: u8 = 16;
    pub const ZSET_LISTPACK: u8 = 17;
    pub const LIST_QUICKLIST_2: u8 = 18;
    pub const STREAM_LISTPACKS_2: u8 = 19;
    pub const SET_LISTPACK: u8 = 20;
    pub const STREAM_LISTPACKS_3: u8 = 21;
    pub const HASH_METADATA_PRE_GA: u8 = 22;
    pub const HASH_LISTPACK_EX_PRE_GA: u8 = 23;
    pub const HASH_METADATA: u8 = 24;
    pub const HASH_LISTPACK_EX: u8 = 25;
}

/// Rostrum's own type id for a leaderboard: outside every range Redis uses
/// (values 0-25, opcodes 244-255), so redis-server stops on it with its
/// unknown-type error instead of misreading it.
pub const TYPE_LEADERBOARD: u8 = 200;

/// Rostrum's own type id for a stream in earlier versions (streams are now
/// written in Redis's listpack layout; files with this record still load):
/// every entry, the stream's ids and counters, and its groups with
/// consumers and pending entries.
pub const TYPE_STREAM_ROSTRUM: u8 = 201;

/// Opcodes of the file layout.
pub mod opcodes {
    pub const SLOT_INFO: u8 = 244;
    pub const FUNCTION2: u8 = 245;
    pub const FUNCTION_PRE_GA: u8 = 246;
    pub const MODULE_AUX: u8 = 247;
    pub const IDLE: u8 = 248;
    pub const FREQ: u8 = 249;
    pub const AUX: u8 = 250;
    pub const RESIZEDB: u8 = 251;
    pub const EXPIRETIME_MS: u8 = 252;
    pub const EXPIRETIME: u8 = 253;
    pub const SELECTDB: u8 = 254;
    pub const EOF: u8 = 255;
}

/// A name for a value type id, for error messages.
pub fn type_name(t: u8) -> &'static str {
    use types::*;
    match t {
        STRING => "string",
        LIST | LIST_ZIPLIST | LIST_QUICKLIST | LIST_QUICKLIST_2 => "list",
        SET | SET_INTSET | SET_LISTPACK => "set",
        ZSET | ZSET_2 | ZSET_ZIPLIST | ZSET_LISTPACK => "zset",
        HASH | HASH_ZIPMAP | HASH_ZIPLIST | HASH_LISTPACK => "hash",
        MODULE_PRE_GA | MODULE_2 => "module",
        STREAM_LISTPACKS | STREAM_LISTPACKS_2 | STREAM_LISTPACKS_3 => "stream",
        HASH_METADATA_PRE_GA | HASH_LISTPACK_EX_PRE_GA | HASH_METADATA | HASH_LISTPACK_EX => {
            "hash with field expiry"
        }
        TYPE_LEADERBOARD => "leaderboard",
        TYPE_STREAM_ROSTRUM => "stream (Rostrum's record)",
        _ => "unknown",
    }
}

/// Why bytes could not be read as RDB: what, and the offset (in the file
/// or payload) where it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdbError {
    /// Byte offset from the start of the file or payload.
    pub offset: u64,
    /// What is wrong there.
    pub what: String,
}

impl RdbError {
    /// An error at `offset`.
    pub fn new(offset: u64, what: impl Into<String>) -> Self {
        RdbError {
            offset,
            what: what.into(),
        }
    }
}

impl fmt::Display for RdbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at offset {}", self.what, self.offset)
    }
}

impl std::error::Error for RdbError {}

/// The limits values are built with when read (the configuration's
/// `*-max-listpack-*`, `set-max-intset-entries`, `lb-*`).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub zset: ZSetLimits,
    pub hash: HashLimits,
    pub list: ListLimits,
    pub max_intset: usize,
    pub lb_max_meta: usize,
    pub lb_dedup_window: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            zset: ZSetLimits::new(128, 64),
            hash: HashLimits::default(),
            list: ListLimits::default(),
            max_intset: super::set::DEFAULT_MAX_INTSET_ENTRIES,
            lb_max_meta: 4096,
            lb_dedup_window: 100_000,
        }
    }
}

#[cfg(test)]
mod tests;
