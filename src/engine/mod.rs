//! The data: the sharded keyspace with expiry, and the structures values are
//! made of. No RESP, no clients, no tokio here.

pub mod access;
pub mod bitmap;
pub mod cow;
pub mod digest;
mod field_names;
pub mod glob;
pub mod hash;
pub mod keycapture;
pub mod keyspace;
mod keytable;
pub mod leaderboard;
pub mod list;
pub mod prefetch;
pub mod rdb;
pub mod set;
pub mod stream;
pub mod string;
pub mod value;
pub mod zset;

pub use keyspace::{
    as_guest_writer, take_handoff, Db, Entry, Eviction, Keyspace, Locked, ShardGuard, SHARD_COUNT,
};
pub use value::Value;
