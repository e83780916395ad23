//! Rostrum: a leaderboard server that speaks the Redis protocol.
//!
//! A byte from a socket travels `server` (connections) → `protocol` (request
//! parser) → `commands` (table, dispatch, one module per family) → `engine`
//! (keyspace and data structures); the reply goes back through
//! `protocol::Reply`. `persistence` holds the append-only file; `scripting` the
//! Lua VM behind EVAL and FCALL.

pub mod commands;
pub mod engine;
pub mod error;
pub mod persistence;
pub mod protocol;
pub mod scripting;
pub mod server;
