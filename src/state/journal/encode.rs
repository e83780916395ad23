//! How commands are written to the AOF: RESP arrays of bulk strings, a
//! SELECT whenever the database changes, relative expiries made absolute
//! (so replaying the file later gives the same expiry times), and several
//! commands of one transaction wrapped in MULTI / EXEC.

use bytes::Bytes;

use super::Stream;
use crate::protocol::{parse_i64, write_bulk_frame};
use crate::state::keys::{select_target, Propagation};

/// Appends one command as a RESP array of bulk strings.
pub fn write_command<'a>(out: &mut Vec<u8>, args: impl ExactSizeIterator<Item = &'a [u8]>) {
    write_bulk_frame(out, Some(b'*'), args);
}

/// Appends `SELECT db`.
pub fn write_select(out: &mut Vec<u8>, db: usize) {
    let mut num = itoa::Buffer::new();
    let n = num.format(db).as_bytes();
    write_command(out, [&b"SELECT"[..], n].into_iter());
}

/// What one dispatched command logs.
pub enum Group<'a> {
    /// Only the DELs of keys that expired.
    Nothing,
    /// The command as received.
    One(&'a [&'a [u8]]),
    /// Commands replacing it (EXEC's, a script's, or a handler's
    /// `propagate_as`); `SELECT` entries mark database changes. Those for
    /// replicas only (PUBLISH) are left out of the AOF's streams.
    Many(&'a Propagation),
}

/// Which stream [`emit`] writes: the AOF's (the file, the rewrite's) or
/// the replication stream, which also gets the commands for replicas only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Aof,
    Replicas,
}

fn select_if(s: &mut Stream, db: usize) {
    if s.db != Some(db) {
        write_select(&mut s.buf, db);
        s.db = Some(db);
    }
}

/// Appends `#TS:<unix_s>` to `s` when it is a later second than the last
/// annotation (Redis 7.0's `aof-timestamp-enabled`; loaders skip lines
/// starting with `#`).
pub(crate) fn annotate_time(s: &mut Stream, unix_s: u64) {
    if unix_s > s.ts {
        s.ts = unix_s;
        write_time_annotation(&mut s.buf, unix_s);
    }
}

/// Appends the line `#TS:<unix_s>`.
pub fn write_time_annotation(out: &mut Vec<u8>, unix_s: u64) {
    out.extend_from_slice(b"#TS:");
    out.extend_from_slice(itoa::Buffer::new().format(unix_s).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Appends a dispatched command's log to `s`: a DEL per expired key, then
/// the command(s), starting in database `db`. Several commands are
/// wrapped in MULTI / EXEC (counting those `target` gets: a PUBLISH is
/// inside the replicas' MULTI/EXEC, as Redis 7.0 propagates it, and not in
/// the AOF).
pub(crate) fn emit(
    s: &mut Stream,
    db: usize,
    expired: &[(usize, Bytes)],
    group: &Group<'_>,
    target: Target,
) {
    for (d, key) in expired {
        select_if(s, *d);
        write_command(&mut s.buf, [&b"DEL"[..], key.as_ref()].into_iter());
    }
    match group {
        Group::Nothing => {}
        Group::One(args) => {
            select_if(s, db);
            write_command(&mut s.buf, args.iter().copied());
        }
        Group::Many(list) => {
            let replicas = target == Target::Replicas;
            let included = |i: usize, c: &[Vec<u8>]| {
                select_target(c).is_none()
                    && (replicas || list.repl_only.binary_search(&i).is_err())
            };
            // Stop counting at two: only whether to wrap matters.
            let wrap = list
                .cmds
                .iter()
                .enumerate()
                .filter(|(i, c)| included(*i, c))
                .nth(1)
                .is_some();
            let mut in_db = db;
            let mut opened = false;
            let mut repl = list.repl_only.iter().copied().peekable();
            for (i, c) in list.cmds.iter().enumerate() {
                let repl_only = repl.next_if_eq(&i).is_some();
                if let Some(d) = select_target(c) {
                    in_db = d;
                    continue;
                }
                if repl_only && !replicas {
                    continue;
                }
                if opened {
                    // Inside MULTI a SELECT is queued like the commands.
                    select_if(s, in_db);
                } else {
                    select_if(s, in_db);
                    if wrap {
                        write_command(&mut s.buf, [&b"MULTI"[..]].into_iter());
                        opened = true;
                    }
                }
                write_command(&mut s.buf, c.iter().map(|a| a.as_slice()));
            }
            if opened {
                write_command(&mut s.buf, [&b"EXEC"[..]].into_iter());
            }
        }
    }
}

/// [`translate`] of an owned command, replacing it when it has a
/// deterministic form (most commands are looked at by their first letter
/// only).
pub fn translate_in_place(cmd: &mut Vec<Vec<u8>>, now_ms: u64) {
    let first = cmd.first().and_then(|n| n.first()).copied().unwrap_or(0);
    if !matches!(first.to_ascii_lowercase(), b'e' | b'p' | b's' | b'g') {
        return;
    }
    let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_slice()).collect();
    if let Some(t) = translate(&args, now_ms) {
        *cmd = t;
    }
}

fn ms_bytes(ms: i64) -> Vec<u8> {
    itoa::Buffer::new().format(ms).as_bytes().to_vec()
}

fn arg_is(a: &[u8], word: &str) -> bool {
    a.eq_ignore_ascii_case(word.as_bytes())
}

/// The absolute unix ms of an expiry option (`EX`, `PX`, `EXAT`, `PXAT`)
/// with value `v`; `None` if `opt` is not one.
fn absolute(opt: &[u8], v: &[u8], now_ms: u64) -> Option<i64> {
    let n = parse_i64(v)?;
    let now = now_ms as i64;
    if arg_is(opt, "ex") {
        Some(n.saturating_mul(1000).saturating_add(now))
    } else if arg_is(opt, "px") {
        Some(n.saturating_add(now))
    } else if arg_is(opt, "exat") {
        Some(n.saturating_mul(1000))
    } else if arg_is(opt, "pxat") {
        Some(n)
    } else {
        None
    }
}

/// The deterministic form of a command whose effect depends on the clock,
/// as Redis propagates it: EXPIRE / PEXPIRE / EXPIREAT become PEXPIREAT,
/// SETEX / PSETEX / SET with EX, PX or EXAT become `SET key value PXAT ms`,
/// GETEX with an expiry becomes PEXPIREAT (PERSIST with PERSIST). `None`:
/// the command is logged as it is.
pub fn translate(args: &[&[u8]], now_ms: u64) -> Option<Vec<Vec<u8>>> {
    let name = args.first()?;
    if name.len() < 3 || name.len() > 8 {
        return None;
    }
    let key = *args.get(1)?;
    let now = now_ms as i64;
    let pexpireat = |at: i64, rest: &[&[u8]]| {
        let mut v = vec![b"PEXPIREAT".to_vec(), key.to_vec(), ms_bytes(at)];
        v.extend(rest.iter().map(|a| a.to_vec()));
        v
    };
    let set_pxat = |value: &[u8], at: i64| {
        vec![
            b"SET".to_vec(),
            key.to_vec(),
            value.to_vec(),
            b"PXAT".to_vec(),
            ms_bytes(at),
        ]
    };
    if arg_is(name, "expire") || arg_is(name, "pexpire") || arg_is(name, "expireat") {
        let n = parse_i64(args.get(2)?)?;
        let at = if arg_is(name, "expire") {
            n.saturating_mul(1000).saturating_add(now)
        } else if arg_is(name, "pexpire") {
            n.saturating_add(now)
        } else {
            n.saturating_mul(1000)
        };
        return Some(pexpireat(at, args.get(3..).unwrap_or(&[])));
    }
    if arg_is(name, "setex") || arg_is(name, "psetex") {
        let n = parse_i64(args.get(2)?)?;
        let at = if arg_is(name, "setex") {
            n.saturating_mul(1000).saturating_add(now)
        } else {
            n.saturating_add(now)
        };
        return Some(set_pxat(args.get(3)?, at));
    }
    if arg_is(name, "set") {
        let value = args.get(2)?;
        let mut i = 3;
        while i < args.len() {
            let opt = args[i];
            if arg_is(opt, "pxat") {
                return None;
            }
            if let Some(at) = args.get(i + 1).and_then(|v| absolute(opt, v, now_ms)) {
                return Some(set_pxat(value, at));
            }
            i += 1;
        }
        return None;
    }
    if arg_is(name, "getex") {
        let mut i = 2;
        while i < args.len() {
            let opt = args[i];
            if arg_is(opt, "persist") {
                return Some(vec![b"PERSIST".to_vec(), key.to_vec()]);
            }
            if let Some(at) = args.get(i + 1).and_then(|v| absolute(opt, v, now_ms)) {
                return Some(pexpireat(at, &[]));
            }
            i += 1;
        }
        return None;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(args: &[&str], now: u64) -> Option<Vec<String>> {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        translate(&a, now).map(|v| {
            v.into_iter()
                .map(|x| String::from_utf8(x).unwrap())
                .collect()
        })
    }

    #[test]
    fn relative_expiries_become_absolute() {
        let now = 1_000_000;
        assert_eq!(
            t(&["EXPIRE", "k", "10"], now).unwrap(),
            ["PEXPIREAT", "k", "1010000"]
        );
        assert_eq!(
            t(&["pexpire", "k", "5", "NX"], now).unwrap(),
            ["PEXPIREAT", "k", "1000005", "NX"]
        );
        assert_eq!(
            t(&["expireat", "k", "7"], now).unwrap(),
            ["PEXPIREAT", "k", "7000"]
        );
        assert_eq!(
            t(&["SETEX", "k", "2", "v"], now).unwrap(),
            ["SET", "k", "v", "PXAT", "1002000"]
        );
        assert_eq!(
            t(&["psetex", "k", "2", "v"], now).unwrap(),
            ["SET", "k", "v", "PXAT", "1000002"]
        );
        assert_eq!(
            t(&["set", "k", "v", "NX", "ex", "3", "GET"], now).unwrap(),
            ["SET", "k", "v", "PXAT", "1003000"]
        );
        assert_eq!(
            t(&["set", "k", "v", "EXAT", "3"], now).unwrap(),
            ["SET", "k", "v", "PXAT", "3000"]
        );
        assert_eq!(t(&["set", "k", "v", "PXAT", "3"], now), None);
        assert_eq!(t(&["set", "k", "v"], now), None);
        assert_eq!(
            t(&["GETEX", "k", "PX", "9"], now).unwrap(),
            ["PEXPIREAT", "k", "1000009"]
        );
        assert_eq!(
            t(&["getex", "k", "persist"], now).unwrap(),
            ["PERSIST", "k"]
        );
        assert_eq!(t(&["zadd", "k", "1", "m"], now), None);
        // A key named like an option is not an option.
        assert_eq!(t(&["set", "ex", "v"], now), None);
    }

    #[test]
    fn emit_selects_and_wraps() {
        let mut s = Stream::default();
        let set: Vec<&[u8]> = vec![b"SET", b"a", b"1"];
        emit(&mut s, 0, &[], &Group::One(&set), Target::Aof);
        emit(&mut s, 0, &[], &Group::One(&set), Target::Aof);
        assert_eq!(
            s.buf,
            b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n"
        );
        let mut s = Stream {
            buf: Vec::new(),
            db: Some(0),
            ts: 0,
        };
        let list = vec![
            vec![b"SELECT".to_vec(), b"0".to_vec()],
            vec![b"SET".to_vec(), b"a".to_vec(), b"1".to_vec()],
            vec![b"SELECT".to_vec(), b"2".to_vec()],
            vec![b"DEL".to_vec(), b"b".to_vec()],
        ];
        let many = Propagation::from_cmds(list.clone());
        emit(
            &mut s,
            5,
            &[(3, Bytes::from_static(b"x"))],
            &Group::Many(&many),
            Target::Aof,
        );
        let text = String::from_utf8(s.buf).unwrap().replace("\r\n", " ");
        assert_eq!(
            text,
            "*2 $6 SELECT $1 3 *2 $3 DEL $1 x *2 $6 SELECT $1 0 *1 $5 MULTI *3 $3 SET $1 a $1 1 \
             *2 $6 SELECT $1 2 *2 $3 DEL $1 b *1 $4 EXEC "
        );
        assert_eq!(s.db, Some(2));
        // One command is not wrapped.
        let mut s = Stream::default();
        let one = Propagation::from_cmds(list[..2].to_vec());
        emit(&mut s, 1, &[], &Group::Many(&one), Target::Aof);
        let text = String::from_utf8(s.buf).unwrap().replace("\r\n", " ");
        assert_eq!(text, "*2 $6 SELECT $1 0 *3 $3 SET $1 a $1 1 ");
    }

    #[test]
    fn publish_goes_to_replicas_inside_their_multi() {
        let mut p = Propagation::default();
        p.select(0);
        p.push(vec![b"SET".to_vec(), b"a".to_vec(), b"1".to_vec()]);
        p.push_repl_only(vec![b"PUBLISH".to_vec(), b"ch".to_vec(), b"m".to_vec()]);
        fn text(p: &Propagation, target: Target) -> String {
            let mut s = Stream::default();
            emit(&mut s, 0, &[], &Group::Many(p), target);
            String::from_utf8(s.buf).unwrap().replace("\r\n", " ")
        }
        // The AOF gets the one write, unwrapped, as before.
        assert_eq!(
            text(&p, Target::Aof),
            "*2 $6 SELECT $1 0 *3 $3 SET $1 a $1 1 "
        );
        assert_eq!(
            text(&p, Target::Replicas),
            "*2 $6 SELECT $1 0 *1 $5 MULTI *3 $3 SET $1 a $1 1 \
             *3 $7 PUBLISH $2 ch $1 m *1 $4 EXEC "
        );
        // Only a PUBLISH: nothing in the AOF, the PUBLISH alone to replicas.
        let mut q = Propagation::default();
        q.append(p.clone(), true);
        assert_eq!(q.cmds.len(), 2);
        assert_eq!(text(&q, Target::Aof), "");
        assert_eq!(
            text(&q, Target::Replicas),
            "*2 $6 SELECT $1 0 *3 $7 PUBLISH $2 ch $1 m "
        );
    }
}
