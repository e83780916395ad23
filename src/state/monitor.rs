//! MONITOR: the clients that watch every command the server runs, and the
//! line each of them is sent per command (`+<secs>.<micros> [<db> <addr>]
//! "name" "arg" ...`, arguments quoted as Redis quotes them).
//!
//! A line is formatted once and appended to every monitor's
//! [`Outbox`](super::outbox::Outbox), so a slow monitor never slows the
//! client whose command it watches; one past its output limit is
//! disconnected. Whether nobody monitors is one atomic load
//! ([`Monitors::active`]), the only cost commands pay then.
//!
//! Not here: which commands are shown and when (`commands::server::monitor`,
//! from the command table's flags), and the MONITOR command itself.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use smallvec::SmallVec;

use super::client::ClientInfo;
use super::outbox::{OutputLimit, Pushed};

/// Who ran a command, as a monitor line names it.
#[derive(Debug, Clone, Copy)]
pub enum Origin<'a> {
    /// A connection, by its peer address (`ip:port`).
    Client(&'a str),
    /// A script (`redis.call`), shown as `lua`.
    Lua,
}

/// The clients in monitor mode, in the order they entered it.
#[derive(Default)]
pub struct Monitors {
    /// `clients.len()`, read without the lock.
    count: AtomicUsize,
    clients: RwLock<Vec<Arc<ClientInfo>>>,
}

impl Monitors {
    /// An empty registry.
    pub fn new() -> Self {
        Monitors::default()
    }

    /// Whether any client monitors.
    #[inline]
    pub fn active(&self) -> bool {
        self.count.load(Ordering::Relaxed) > 0
    }

    /// Puts `client` in monitor mode; false if it already was.
    pub fn add(&self, client: &Arc<ClientInfo>) -> bool {
        let mut list = self.clients.write();
        if list.iter().any(|c| c.id == client.id) {
            return false;
        }
        list.push(client.clone());
        client.set_monitor(true);
        self.count.store(list.len(), Ordering::Relaxed);
        true
    }

    /// Takes `client` out of monitor mode (RESET, disconnect).
    pub fn remove(&self, client: &ClientInfo) {
        if !client.is_monitor() {
            return;
        }
        let mut list = self.clients.write();
        list.retain(|c| c.id != client.id);
        client.set_monitor(false);
        self.count.store(list.len(), Ordering::Relaxed);
    }

    /// Sends every monitor the line of one command: run at `unix_us` by
    /// `origin` with `db` selected. `limit` gives each monitor's output
    /// limit; one past it is disconnected.
    pub fn feed(
        &self,
        unix_us: u64,
        db: usize,
        origin: Origin,
        args: &[&[u8]],
        limit: impl Fn(&ClientInfo) -> OutputLimit,
    ) {
        let mut body = Vec::with_capacity(64 + args.iter().map(|a| a.len() + 3).sum::<usize>());
        format_line(&mut body, unix_us, db, origin, args);
        let list = self.clients.read();
        for c in list.iter() {
            if c.outbox.push(b'+', &body, &limit(c)) == Pushed::OverLimit {
                c.close_for_output_limit();
            }
        }
    }
}

/// A monitor line without its leading `+`: `1700000000.123456 [0
/// 127.0.0.1:5000] "set" "k" "v"\r\n`.
pub fn format_line(out: &mut Vec<u8>, unix_us: u64, db: usize, origin: Origin, args: &[&[u8]]) {
    let mut ib = itoa::Buffer::new();
    out.extend_from_slice(ib.format(unix_us / 1_000_000).as_bytes());
    out.push(b'.');
    let micros = ib.format(unix_us % 1_000_000);
    out.extend(std::iter::repeat_n(b'0', 6 - micros.len()));
    out.extend_from_slice(micros.as_bytes());
    out.extend_from_slice(b" [");
    out.extend_from_slice(ib.format(db).as_bytes());
    out.push(b' ');
    match origin {
        Origin::Client(addr) => out.extend_from_slice(addr.as_bytes()),
        Origin::Lua => out.extend_from_slice(b"lua"),
    }
    out.push(b']');
    for a in args {
        out.push(b' ');
        quote(out, a);
    }
    out.extend_from_slice(b"\r\n");
}

/// Appends `s` in double quotes, escaped as Redis's `sdscatrepr` does:
/// `\\`, `\"`, `\n`, `\r`, `\t`, `\a`, `\b`, printable ASCII as is, any
/// other byte as `\xNN`.
pub fn quote(out: &mut Vec<u8>, s: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    for &c in s {
        match c {
            b'\\' | b'"' => out.extend_from_slice(&[b'\\', c]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(c),
            _ => out.extend_from_slice(&[
                b'\\',
                b'x',
                HEX[(c >> 4) as usize],
                HEX[(c & 15) as usize],
            ]),
        }
    }
    out.push(b'"');
}

/// What replaces a secret argument in a monitor line.
pub const REDACTED: &[u8] = b"(redacted)";

/// The arguments as a monitor shows them: AUTH's password (and user), and
/// the user and password of HELLO's first `AUTH` option if HELLO got to
/// read it (Redis 7.0 leaves a second one shown), replaced by
/// [`REDACTED`]. `name` is the command's table name.
pub fn redacted<'a>(name: &str, args: &[&'a [u8]]) -> SmallVec<[&'a [u8]; 8]> {
    let mut shown: SmallVec<[&[u8]; 8]> = args.iter().copied().collect();
    match name {
        // AUTH with too many arguments fails before it hides them.
        "auth" if args.len() <= 3 => shown[1..].fill(REDACTED),
        "hello" => redact_hello(&mut shown),
        _ => {}
    }
    shown
}

/// HELLO reads its protocol version first, then its options in order; it
/// hides its first `AUTH user pass` option once it reads it, so an error
/// before it leaves that option shown.
fn redact_hello(args: &mut [&[u8]]) {
    let version_ok = match args.get(1) {
        None => true,
        Some(v) => std::str::from_utf8(v)
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
            .is_some_and(|v| (2..=3).contains(&v)),
    };
    if !version_ok {
        return;
    }
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - i - 1;
        if args[i].eq_ignore_ascii_case(b"auth") && more >= 2 {
            args[i + 1] = REDACTED;
            args[i + 2] = REDACTED;
            return;
        } else if args[i].eq_ignore_ascii_case(b"setname") && more >= 1 {
            i += 2;
        } else {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(db: usize, origin: Origin, args: &[&[u8]]) -> String {
        let mut out = Vec::new();
        format_line(&mut out, 1_700_000_000_000_042, db, origin, args);
        String::from_utf8(out).unwrap_or_default()
    }

    #[test]
    fn lines_quote_like_redis() {
        assert_eq!(
            line(3, Origin::Client("127.0.0.1:5000"), &[b"set", b"k", b"v"]),
            "1700000000.000042 [3 127.0.0.1:5000] \"set\" \"k\" \"v\"\r\n"
        );
        assert_eq!(
            line(0, Origin::Lua, &[b"get", b"a\"\\\n\r\t\x07\x08\x01\xff \xc3\xa9~"]),
            "1700000000.000042 [0 lua] \"get\" \"a\\\"\\\\\\n\\r\\t\\a\\b\\x01\\xff \\xc3\\xa9~\"\r\n"
        );
    }

    #[test]
    fn secrets_are_hidden_as_redis_hides_them() {
        let show = |name: &str, args: &[&[u8]]| -> Vec<String> {
            redacted(name, args)
                .iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        };
        assert_eq!(show("auth", &[b"AUTH", b"pw"]), ["AUTH", "(redacted)"]);
        assert_eq!(
            show("auth", &[b"auth", b"u", b"pw"]),
            ["auth", "(redacted)", "(redacted)"]
        );
        assert_eq!(
            show("auth", &[b"auth", b"a", b"b", b"c"]),
            ["auth", "a", "b", "c"]
        );
        assert_eq!(
            show("hello", &[b"hello", b"3", b"AUTH", b"u", b"p", b"x"]),
            ["hello", "3", "AUTH", "(redacted)", "(redacted)", "x"]
        );
        assert_eq!(
            show("hello", &[b"hello", b"4", b"auth", b"u", b"p"]),
            ["hello", "4", "auth", "u", "p"]
        );
        assert_eq!(
            show("hello", &[b"hello", b"3", b"x", b"auth", b"u", b"p"]),
            ["hello", "3", "x", "auth", "u", "p"]
        );
        assert_eq!(
            show(
                "hello",
                &[b"hello", b"2", b"setname", b"n", b"auth", b"u", b"p"]
            ),
            [
                "hello",
                "2",
                "setname",
                "n",
                "auth",
                "(redacted)",
                "(redacted)"
            ]
        );
        assert_eq!(
            show("hello", &[b"hello", b"3", b"auth", b"u"]),
            ["hello", "3", "auth", "u"]
        );
        assert_eq!(
            show(
                "hello",
                &[b"hello", b"2", b"auth", b"a", b"b", b"auth", b"c", b"d"]
            ),
            [
                "hello",
                "2",
                "auth",
                "(redacted)",
                "(redacted)",
                "auth",
                "c",
                "d"
            ]
        );
        assert_eq!(show("get", &[b"get", b"auth"]), ["get", "auth"]);
    }

    #[test]
    fn monitors_receive_lines_until_removed() {
        let m = Monitors::new();
        let c = Arc::new(ClientInfo::new(1, String::new(), String::new(), 0));
        assert!(!m.active());
        assert!(m.add(&c));
        assert!(!m.add(&c));
        assert!(m.active() && c.is_monitor());
        m.feed(2_000_000, 0, Origin::Lua, &[b"ping"], |_| {
            OutputLimit::default()
        });
        let mut out = Vec::new();
        c.outbox.take_into(&mut out);
        assert_eq!(out, b"+2.000000 [0 lua] \"ping\"\r\n");
        m.remove(&c);
        assert!(!m.active() && !c.is_monitor());
    }

    #[test]
    fn a_monitor_past_its_limit_is_disconnected() {
        let m = Monitors::new();
        let c = Arc::new(ClientInfo::new(1, String::new(), String::new(), 0));
        m.add(&c);
        let limit = OutputLimit {
            hard: 100,
            soft: 0,
            soft_secs: 0,
        };
        for _ in 0..5 {
            m.feed(0, 0, Origin::Lua, &[b"0123456789"], |_| limit);
        }
        assert!(c.killed.load(Ordering::Acquire));
        assert_eq!(c.outbox.pending(), 0);
    }
}
