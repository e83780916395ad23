//! What a command handler works with: the server, the calling client, the
//! reply writer, and [`Keys`], its view of the keys it has locked.

use bytes::Bytes;

use super::client::{BlockState, ClientState};
use super::keys::Keys;
use super::server::Server;
use crate::error::CmdError;
use crate::protocol::Reply;

/// Everything a handler needs. Fields are public so a handler can read its
/// keys and write its reply at the same time.
pub struct Ctx<'c, 'a> {
    /// Shared server state.
    pub server: &'a Server,
    /// The calling client.
    pub client: &'c mut ClientState,
    /// Where the reply goes.
    pub out: &'c mut Reply,
    /// The keys this command may touch.
    pub keys: Keys<'a>,
}

impl Ctx<'_, '_> {
    /// Blocks the client on `keys` (of the selected database) until one of
    /// them changes or `timeout` passes (`None`: forever); the command is then
    /// run again, with `client.rerun` set, unless the client has gone by
    /// then (what it would have taken stays for the next waiter). Clients
    /// are woken in the order they blocked (see [`Ctx::may_serve`]); CLIENT
    /// UNBLOCK ends the wait as a timeout or an error. Returns false when blocking is not allowed here (inside
    /// EXEC or a script): the handler must then reply as on timeout.
    pub fn block_on(
        &mut self,
        keys: &[&[u8]],
        timeout: Option<std::time::Duration>,
        args: &[&[u8]],
    ) -> bool {
        self.block_in_group(keys, timeout, args, None)
    }

    /// [`Ctx::block_on`] for an XREADGROUP reading new entries of consumer
    /// group `group`: it stands in that group's line (see
    /// [`Ctx::may_serve_in_group`]).
    pub fn block_in_group(
        &mut self,
        keys: &[&[u8]],
        timeout: Option<std::time::Duration>,
        args: &[&[u8]],
        group: Option<&[u8]>,
    ) -> bool {
        if self.client.deny_blocking {
            return false;
        }
        let db = self.keys.db;
        let keys: Vec<(usize, Bytes)> = keys
            .iter()
            .map(|k| (db, Bytes::copy_from_slice(k)))
            .collect();
        // A woken client that still finds nothing keeps its place in line.
        if !self.client.rerun {
            let kind = args.first().map_or("", |name| waits_for(name));
            self.server
                .block_client(self.client.id(), &keys, kind, group);
        }
        self.client.info.set_blocked(true, !self.client.rerun);
        self.client.blocked = Some(BlockState {
            args: args.iter().map(|a| a.to_vec()).collect(),
            keys,
            deadline: timeout.map(|t| std::time::Instant::now() + t),
        });
        true
    }

    /// Whether a blocking command may take what `key` holds now: not while
    /// another client that blocked on `key` earlier waits for it, so that
    /// clients are served in the order they blocked, as in Redis (that
    /// client was woken too and takes it; this one waits its turn). Inside
    /// EXEC or a script, where nothing can wait, always.
    pub fn may_serve(&self, key: &[u8]) -> bool {
        self.may_serve_in_group(key, None)
    }

    /// [`Ctx::may_serve`] for an XREADGROUP reading the new entries of
    /// consumer group `group` of the stream `key`: only the clients waiting
    /// in that group stand in line (as in Redis, the oldest of them takes
    /// what arrives; each group gets every entry once).
    pub fn may_serve_in_group(&self, key: &[u8], group: Option<&[u8]>) -> bool {
        if self.client.deny_blocking {
            return true;
        }
        // Only the waiters for what the key holds now are in line for it.
        let kind = self
            .keys
            .part(key)
            .ok()
            .and_then(|p| p.peek(key, self.keys.now_ms))
            .map(|e| e.value.type_name());
        self.server
            .first_waiter(self.keys.db, key, kind, group)
            .is_none_or(|id| id == self.client.id())
    }
}

/// The type of value a blocking command waits for, by its name: "list"
/// (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP), "zset" (BZPOPMIN, BZPOPMAX,
/// BZMPOP), "stream" (XREAD, XREADGROUP), "" (any).
fn waits_for(name: &[u8]) -> &'static str {
    let lower = name.to_ascii_lowercase();
    if lower.starts_with(b"bz") {
        "zset"
    } else if lower.starts_with(b"bl") || lower.starts_with(b"br") {
        "list"
    } else if lower.starts_with(b"xread") {
        "stream"
    } else {
        ""
    }
}

/// What a blocking command found in one of its keys (`Keys::typed_mut` of
/// its type). When the command runs again after a wake, a key that now
/// holds another type counts as empty: the client stays blocked, as in
/// Redis 7.0 (`MULTI; ZADD k 1 a; DEL k; SET k x; EXEC` does not answer a
/// blocked BZPOPMIN with WRONGTYPE). On a first run the error stands.
pub fn found_when_blocked<T>(
    rerun: bool,
    found: Result<Option<T>, CmdError>,
) -> Result<Option<T>, CmdError> {
    match found {
        Err(CmdError::WrongType) if rerun => Ok(None),
        other => other,
    }
}
