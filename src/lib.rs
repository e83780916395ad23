//! Rostrum: a leaderboard server that speaks the Redis protocol.
//!
//! The layers, lowest first. A module imports only its own layer and the
//! ones below (`tests/layers.rs` reads every `crate::` path and fails on an
//! upward import or a loop between top-level modules):
//!
//! ```text
//!  main.rs       the binary: command line, config file, runtime
//!    server/       listener, connection loop, expiry cron, signals
//!      persistence/  AOF and RDB start-up load, the snapshot thread
//!                    (AOF rewrite, RDB saves), check-aof
//!        commands/     the one table, dispatch, pipelined runs, one module
//!                      per family; ScriptHost: redis.call's way back in
//!          state/        Server (shared state, counters, slow log, blocked
//!                        clients), client state, Ctx/Keys, config, the
//!                        Pub/Sub registry, keyspace notifications, the
//!                        monitors and the clients' outboxes, the
//!                        client-side caching table, and journal/ (the one
//!                        feed of writes: AOF encode, writer thread,
//!                        copy-before-write)
//!            scripting/    the Lua VM; reaches commands only through the
//!                          ScriptHost a command hands it
//!              engine/       keyspace, expiry, data structures (no RESP),
//!                            the RDB codec (rdb/)
//!                protocol/, error.rs   RESP in and out, error lines
//! ```
//!
//! A byte from a socket goes `server` → `protocol` (request parser) →
//! `commands` (lookup, checks, locks) → a family's handler → `engine`; the
//! write is fed to `state::journal` before the locks go, and the reply goes
//! back through `protocol::Reply`.
//!
//! Where new things go:
//! - **A command family**: `src/commands/<family>.rs` with its `COMMANDS`
//!   (name, arity, flags, key spec, handler), listed in
//!   `commands::FAMILIES`; arity, COMMAND and key extraction come from the
//!   table. Example: hashes as `commands/hash.rs`, whose HSET handler
//!   parses its arguments, calls `engine::hash`, marks the key modified
//!   through `Ctx::keys` (which feeds the AOF) and writes the reply.
//! - **A data structure**: `src/engine/<type>.rs`, knowing nothing of RESP
//!   or clients, with unit tests and a model proptest beside it, and a
//!   variant of `engine::Value`. Example: a hash's listpack and table
//!   encodings in `engine/hash.rs`, converted in one place.
//! - **A config parameter**: a field of `state::Config` and one line of its
//!   parameter table (name, aliases, parser, field); it is then read from
//!   the config file, `--config` and CONFIG GET/SET. Example:
//!   `park-spin-us`, whose line is `num_field!("park-spin-us", &[],
//!   int(0, 1000), park_spin_us)`; a value read on every command also gets
//!   a hot copy in `Server` (`refresh_hot_config`).

pub mod commands;
pub mod engine;
pub mod error;
pub mod persistence;
pub mod protocol;
pub mod scripting;
pub mod server;
pub mod state;
