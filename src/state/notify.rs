//! Keyspace notifications: the event classes of `notify-keyspace-events`,
//! the events a command raises while it runs, and their delivery as
//! Pub/Sub messages on `__keyspace@<db>__:<key>` (the event's name as the
//! message) and `__keyevent@<db>__:<event>` (the key as the message).
//!
//! A command raises events through `Keys::notify` (cheap when the class is
//! off: one test of the flags the command started with); the dispatcher
//! publishes them when the command's handler returns, ahead of its reply
//! for a client that subscribed itself (RESP3), as Redis orders them.
//! Keys removed by the active expiry cycle raise `expired` through
//! [`publish`] directly.

use bytes::Bytes;

use super::pubsub::{Kind, Own, PubSub};

/// One class of events (a bit of the `notify-keyspace-events` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Class(u32);

impl Class {
    /// `K`: publish on `__keyspace@<db>__:<key>`.
    pub const KEYSPACE: Class = Class(1 << 0);
    /// `E`: publish on `__keyevent@<db>__:<event>`.
    pub const KEYEVENT: Class = Class(1 << 1);
    /// `g`: DEL, EXPIRE, RENAME, ... (type-independent commands).
    pub const GENERIC: Class = Class(1 << 2);
    /// `$`: string commands.
    pub const STRING: Class = Class(1 << 3);
    /// `l`: list commands.
    pub const LIST: Class = Class(1 << 4);
    /// `s`: set commands.
    pub const SET: Class = Class(1 << 5);
    /// `h`: hash commands.
    pub const HASH: Class = Class(1 << 6);
    /// `z`: sorted set commands.
    pub const ZSET: Class = Class(1 << 7);
    /// `x`: a key expired.
    pub const EXPIRED: Class = Class(1 << 8);
    /// `e`: a key was evicted for maxmemory.
    pub const EVICTED: Class = Class(1 << 9);
    /// `t`: stream commands.
    pub const STREAM: Class = Class(1 << 10);
    /// `m`: a read found no key (not part of `A`).
    pub const KEY_MISS: Class = Class(1 << 11);
    /// `d`: module key types.
    pub const MODULE: Class = Class(1 << 13);
    /// `n`: a key was created (not part of `A`).
    pub const NEW: Class = Class(1 << 14);

    /// The class's bit.
    pub const fn bits(self) -> u32 {
        self.0
    }
}

/// The event classes of `A`, in the order CONFIG GET prints them.
const CLASSES: [(Class, char); 10] = [
    (Class::GENERIC, 'g'),
    (Class::STRING, '$'),
    (Class::LIST, 'l'),
    (Class::SET, 's'),
    (Class::HASH, 'h'),
    (Class::ZSET, 'z'),
    (Class::EXPIRED, 'x'),
    (Class::EVICTED, 'e'),
    (Class::STREAM, 't'),
    (Class::MODULE, 'd'),
];

/// Every class `A` stands for.
const ALL: u32 = {
    let mut bits = 0;
    let mut i = 0;
    while i < CLASSES.len() {
        bits |= CLASSES[i].0 .0;
        i += 1;
    }
    bits
};

/// Parses `notify-keyspace-events` characters into flags; `None` for a
/// character that names no class.
pub fn parse_flags(s: &str) -> Option<u32> {
    let mut flags = 0;
    for ch in s.chars() {
        flags |= match ch {
            'A' => ALL,
            'K' => Class::KEYSPACE.0,
            'E' => Class::KEYEVENT.0,
            'm' => Class::KEY_MISS.0,
            'n' => Class::NEW.0,
            _ => CLASSES.iter().find(|(_, c)| *c == ch)?.0 .0,
        };
    }
    Some(flags)
}

/// The canonical spelling of `flags`, as CONFIG GET answers (`A` for all
/// the classes it covers, whereupon `n` is not shown, as in Redis 7.0).
pub fn flags_string(flags: u32) -> String {
    spell(flags, true)
}

/// Every flag of `flags` spelled out (no `A`): how the configuration keeps
/// them, so that `n` given with `A` is not lost.
pub fn flags_spelled_out(flags: u32) -> String {
    spell(flags, false)
}

fn spell(flags: u32, abbreviate: bool) -> String {
    let mut out = String::new();
    if abbreviate && flags & ALL == ALL {
        out.push('A');
    } else {
        for (class, ch) in CLASSES {
            if flags & class.0 != 0 {
                out.push(ch);
            }
        }
        if flags & Class::NEW.0 != 0 {
            out.push('n');
        }
    }
    for (class, ch) in [
        (Class::KEYSPACE, 'K'),
        (Class::KEYEVENT, 'E'),
        (Class::KEY_MISS, 'm'),
    ] {
        if flags & class.0 != 0 {
            out.push(ch);
        }
    }
    out
}

/// Whether flags enable events of `class` at all (a class and at least
/// one of `K` and `E`).
pub fn enabled(flags: u32, class: Class) -> bool {
    flags & class.0 != 0 && flags & (Class::KEYSPACE.0 | Class::KEYEVENT.0) != 0
}

/// One event a command raised.
#[derive(Debug, Clone)]
pub struct Event {
    /// The event's name (`set`, `zincr`, `expired`, ...).
    pub name: &'static str,
    /// The database of the key.
    pub db: usize,
    /// The key.
    pub key: Bytes,
}

/// Publishes `events` under `flags` (the `K` and `E` bits decide the
/// channels). The publishing client's own copies go to `own`.
pub fn publish(pubsub: &PubSub, flags: u32, events: &[Event], own: &mut Own) {
    let mut channel = Vec::new();
    for e in events {
        if flags & Class::KEYSPACE.0 != 0 {
            channel_name(&mut channel, b"__keyspace@", e.db, &e.key);
            pubsub.publish(Kind::Channel, &channel, e.name.as_bytes(), own);
        }
        if flags & Class::KEYEVENT.0 != 0 {
            channel_name(&mut channel, b"__keyevent@", e.db, e.name.as_bytes());
            pubsub.publish(Kind::Channel, &channel, &e.key, own);
        }
    }
}

/// Publishes `expired` for `keys` of database `db`, removed by the active
/// expiry cycle (no client caused them).
pub fn publish_expired(pubsub: &PubSub, flags: u32, db: usize, keys: &[Bytes]) {
    if !enabled(flags, Class::EXPIRED) {
        return;
    }
    let events: Vec<Event> = keys
        .iter()
        .map(|key| Event {
            name: "expired",
            db,
            key: key.clone(),
        })
        .collect();
    let mut nowhere = Vec::new();
    let mut own = Own {
        id: NO_CLIENT,
        resp3: false,
        out: &mut nowhere,
    };
    publish(pubsub, flags, &events, &mut own);
}

/// A client id no connection has (ids start at 1).
const NO_CLIENT: u64 = 0;

/// `<prefix><db>__:<name>` into `out` (cleared first).
fn channel_name(out: &mut Vec<u8>, prefix: &[u8], db: usize, name: &[u8]) {
    out.clear();
    out.extend_from_slice(prefix);
    out.extend_from_slice(itoa::Buffer::new().format(db).as_bytes());
    out.extend_from_slice(b"__:");
    out.extend_from_slice(name);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_round_trip_in_redis_spelling() {
        for (given, canonical) in [
            ("", ""),
            ("KEA", "AKE"),
            ("KEAnm", "AKEm"),
            ("Kn", "nK"),
            ("gA", "A"),
            ("x", "x"),
            ("Exg$", "g$xE"),
            ("Elshzxetd$g", "AE"),
        ] {
            let flags = parse_flags(given);
            assert_eq!(
                flags.map(flags_string).as_deref(),
                Some(canonical),
                "{given}"
            );
        }
        assert_eq!(parse_flags("KEq"), None);
        let kept = parse_flags("KEAn").map(flags_spelled_out);
        assert_eq!(kept.as_deref(), Some("g$lshzxetdnKE"));
        assert_eq!(kept.and_then(|k| parse_flags(&k)), parse_flags("KEAn"));
    }

    #[test]
    fn a_class_needs_k_or_e() {
        let flags = parse_flags("z").unwrap_or(0);
        assert!(!enabled(flags, Class::ZSET));
        let flags = parse_flags("Kz").unwrap_or(0);
        assert!(enabled(flags, Class::ZSET));
        assert!(!enabled(flags, Class::LIST));
    }

    #[test]
    fn channel_names() {
        let mut out = Vec::new();
        channel_name(&mut out, b"__keyspace@", 12, b"key:1");
        assert_eq!(out, b"__keyspace@12__:key:1");
    }
}
