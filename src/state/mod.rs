//! The state commands need but do not own: the server's shared state
//! ([`Server`]: keyspace, configuration, clients, counters, slow log, the
//! registry of blocked clients), one connection's state ([`client`]), a
//! command's context ([`Ctx`], [`Keys`]) and the journal every write is fed
//! to ([`journal`], the AOF's entry point and writer), the Pub/Sub registry
//! ([`pubsub`]), the clients in monitor mode ([`monitor`]), the
//! connections' queues of pushed messages ([`outbox`]), keyspace
//! notifications ([`notify`]), the client-side caching table
//! ([`tracking`]), the live boards' watchers ([`watch`]) and the hand-over
//! of listeners moved by CONFIG SET ([`listeners`]).
//!
//! Below `commands`: nothing here knows the command table or a command
//! family. What needs the dispatcher (AOF loading and rewrite, the
//! connection loop) sits above it and reaches in here, never the other way.

pub mod acl;
pub mod client;
pub mod clock;
pub mod config;
pub mod config_rewrite;
pub mod ctx;
pub mod journal;
pub mod keys;
pub mod latency;
pub mod listeners;
pub mod memory;
pub mod monitor;
pub mod notify;
pub mod outbox;
pub mod per_thread;
pub mod pubsub;
pub mod replication;
pub mod seasons;
pub mod server;
pub mod tls;
pub mod tracking;
pub mod watch;

pub use clock::{unix_ms, unix_us};
pub use config::Config;
pub use ctx::Ctx;
pub use keys::Keys;
pub use server::Server;
