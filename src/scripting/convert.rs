//! Conversions between replies and Lua values, as Redis 7.0 does them.
//!
//! - [`reply_to_lua`]: what `redis.call` returns, decoded from the bytes the
//!   command wrote (RESP2 or RESP3, as `redis.setresp` asked): integers are
//!   numbers, bulk strings strings, a RESP2 null is `false` (RESP3: `nil`),
//!   arrays tables, a status `{ok=...}`, an error `{err=...}`, and RESP3's
//!   maps, sets, doubles, big numbers and verbatim strings the tables
//!   `{map=...}`, `{set=...}`, `{double=...}`, `{big_number=...}` and
//!   `{verbatim_string=...}`.
//! - [`lua_to_reply`]: what a script returns, written for the client:
//!   numbers truncate to integers, `false` is a null (or `#f` after
//!   `redis.setresp(3)`), tables are arrays up to the first nil unless they
//!   carry one of the special fields above.

use mlua::{Lua, Table, Value};

use crate::protocol::number::{format_double, MAX_DOUBLE_CHARS};
use crate::protocol::Reply;

/// Deepest table nesting a script may return (Redis stops at the Lua stack
/// limit).
const MAX_DEPTH: usize = 1000;

/// A reply decoded for Lua: a value, or the error line of an error reply.
pub enum Decoded {
    /// Any reply but a top-level error.
    Value(Value),
    /// An error reply: its line without the `-`.
    Error(Vec<u8>),
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn line(&mut self) -> Option<&'a [u8]> {
        let rest = self.buf.get(self.pos..)?;
        let end = rest.windows(2).position(|w| w == b"\r\n")?;
        self.pos += end + 2;
        rest.get(..end)
    }

    fn int(&mut self) -> Option<i64> {
        std::str::from_utf8(self.line()?).ok()?.parse().ok()
    }

    fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.buf.get(self.pos..self.pos + n)?;
        self.pos += n + 2;
        Some(s)
    }

    fn byte(&mut self) -> Option<u8> {
        let b = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }
}

fn table1(lua: &Lua, key: &str, v: impl mlua::IntoLua) -> mlua::Result<Value> {
    let t = lua.create_table_with_capacity(0, 1)?;
    t.raw_set(key, v)?;
    Ok(Value::Table(t))
}

/// Decodes one reply written by a command for `redis.call`.
pub fn reply_to_lua(lua: &Lua, buf: &[u8]) -> mlua::Result<Decoded> {
    if let Some(rest) = buf.strip_prefix(b"-") {
        let end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .unwrap_or(rest.len());
        return Ok(Decoded::Error(rest[..end].to_vec()));
    }
    let mut r = Reader { buf, pos: 0 };
    Ok(Decoded::Value(read(lua, &mut r)?))
}

fn bad() -> mlua::Error {
    mlua::Error::RuntimeError("malformed reply".into())
}

fn read(lua: &Lua, r: &mut Reader<'_>) -> mlua::Result<Value> {
    let kind = r.byte().ok_or_else(bad)?;
    Ok(match kind {
        b':' => Value::Integer(r.int().ok_or_else(bad)?),
        b'$' => {
            let n = r.int().ok_or_else(bad)?;
            if n < 0 {
                Value::Boolean(false)
            } else {
                Value::String(lua.create_string(r.bytes(n as usize).ok_or_else(bad)?)?)
            }
        }
        b'+' => table1(lua, "ok", lua.create_string(r.line().ok_or_else(bad)?)?)?,
        b'-' => table1(lua, "err", lua.create_string(r.line().ok_or_else(bad)?)?)?,
        b'*' => {
            let n = r.int().ok_or_else(bad)?;
            if n < 0 {
                return Ok(Value::Boolean(false));
            }
            let t = lua.create_table_with_capacity(n as usize, 0)?;
            for i in 1..=n {
                t.raw_set(i, read(lua, r)?)?;
            }
            Value::Table(t)
        }
        b'%' => {
            let n = r.int().ok_or_else(bad)?;
            let t = lua.create_table()?;
            for _ in 0..n {
                let k = read(lua, r)?;
                let v = read(lua, r)?;
                t.raw_set(k, v)?;
            }
            table1(lua, "map", t)?
        }
        b'~' => {
            let n = r.int().ok_or_else(bad)?;
            let t = lua.create_table()?;
            for _ in 0..n {
                let k = read(lua, r)?;
                t.raw_set(k, true)?;
            }
            table1(lua, "set", t)?
        }
        b'_' => {
            r.line().ok_or_else(bad)?;
            Value::Nil
        }
        b'#' => Value::Boolean(r.line().ok_or_else(bad)? == b"t"),
        b',' => {
            let s = r.line().ok_or_else(bad)?;
            let d = std::str::from_utf8(s)
                .ok()
                .and_then(|s| s.parse::<f64>().ok())
                .unwrap_or(0.0);
            table1(lua, "double", d)?
        }
        b'(' => table1(
            lua,
            "big_number",
            lua.create_string(r.line().ok_or_else(bad)?)?,
        )?,
        b'=' => {
            let n = r.int().ok_or_else(bad)?;
            let s = r.bytes(n.max(0) as usize).ok_or_else(bad)?;
            let (format, text) = match s.get(3) {
                Some(b':') => (&s[..3], &s[4..]),
                _ => (&b"txt"[..], s),
            };
            let v = lua.create_table_with_capacity(0, 2)?;
            v.raw_set("format", lua.create_string(format)?)?;
            v.raw_set("string", lua.create_string(text)?)?;
            table1(lua, "verbatim_string", v)?
        }
        _ => return Err(bad()),
    })
}

/// A double as C's `%.17g` prints it (`nan` keeps its sign, as glibc does).
pub fn c_double(d: f64) -> Vec<u8> {
    if d.is_nan() {
        return if d.is_sign_negative() {
            b"-nan".to_vec()
        } else {
            b"nan".to_vec()
        };
    }
    let mut b = [0u8; MAX_DOUBLE_CHARS];
    let n = format_double(d, &mut b);
    b[..n].to_vec()
}

/// A Lua number as a reply integer: C's truncating cast, where every value
/// out of range (and NaN) becomes the x86 "integer indefinite" value.
pub fn lua_number_to_int(d: f64) -> i64 {
    // 2^63: the first double out of range.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if d.is_nan() || !(-LIMIT..LIMIT).contains(&d) {
        i64::MIN
    } else {
        d as i64
    }
}

/// Writes what a script returned. `script_resp` is the protocol the script
/// last chose with `redis.setresp` (it decides how booleans convert).
pub fn lua_to_reply(out: &mut Reply, v: &Value, script_resp: u8) {
    write(out, v, script_resp, 0);
}

fn write(out: &mut Reply, v: &Value, resp: u8, depth: usize) {
    if depth > MAX_DEPTH {
        out.error("ERR reached lua stack limit");
        return;
    }
    match v {
        Value::String(s) => out.bulk(&s.as_bytes()),
        Value::Boolean(b) => {
            if resp == 2 {
                if *b {
                    out.int(1)
                } else {
                    out.null()
                }
            } else {
                out.boolean(*b)
            }
        }
        Value::Integer(i) => out.int(*i),
        Value::Number(n) => out.int(lua_number_to_int(*n)),
        Value::Table(t) => write_table(out, t, resp, depth),
        _ => out.null(),
    }
}

fn write_table(out: &mut Reply, t: &Table, resp: u8, depth: usize) {
    if let Ok(Value::String(e)) = t.raw_get::<Value>("err") {
        out.error_bytes(&e.as_bytes());
        return;
    }
    if let Ok(Value::String(s)) = t.raw_get::<Value>("ok") {
        out.simple(&s.as_bytes());
        return;
    }
    match t.raw_get::<Value>("double") {
        Ok(Value::Number(d)) => return write_double(out, d),
        Ok(Value::Integer(i)) => return write_double(out, i as f64),
        _ => {}
    }
    if let Ok(Value::String(s)) = t.raw_get::<Value>("big_number") {
        if out.resp3 {
            out.raw(b"(");
            out.raw(&s.as_bytes());
            out.raw(b"\r\n");
        } else {
            out.bulk(&s.as_bytes());
        }
        return;
    }
    if let Ok(Value::Table(m)) = t.raw_get::<Value>("map") {
        let pairs: Vec<(Value, Value)> = m.pairs::<Value, Value>().filter_map(|p| p.ok()).collect();
        out.map(pairs.len());
        for (k, v) in &pairs {
            write(out, k, resp, depth + 1);
            write(out, v, resp, depth + 1);
        }
        return;
    }
    if let Ok(Value::Table(s)) = t.raw_get::<Value>("set") {
        let keys: Vec<Value> = s
            .pairs::<Value, Value>()
            .filter_map(|p| p.ok().map(|(k, _)| k))
            .collect();
        out.set(keys.len());
        for k in &keys {
            write(out, k, resp, depth + 1);
        }
        return;
    }
    if let Ok(Value::Table(v)) = t.raw_get::<Value>("verbatim_string") {
        if let (Ok(Value::String(format)), Ok(Value::String(text))) =
            (v.raw_get::<Value>("format"), v.raw_get::<Value>("string"))
        {
            let (format, text) = (format.as_bytes(), text.as_bytes());
            if out.resp3 {
                let mut head = b"=".to_vec();
                head.extend_from_slice((text.len() + 4).to_string().as_bytes());
                head.extend_from_slice(b"\r\n");
                out.raw(&head);
                let f: Vec<u8> = format.iter().copied().chain(*b"   ").take(3).collect();
                out.raw(&f);
                out.raw(b":");
                out.raw(&text);
                out.raw(b"\r\n");
            } else {
                out.bulk(&text);
            }
            return;
        }
    }
    let mut items = Vec::new();
    for i in 1.. {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => items.push(v),
        }
    }
    out.array(items.len());
    for v in &items {
        write(out, v, resp, depth + 1);
    }
}

fn write_double(out: &mut Reply, d: f64) {
    let s = c_double(d);
    if out.resp3 {
        out.raw(b",");
        out.raw(&s);
        out.raw(b"\r\n");
    } else {
        out.bulk(&s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(lua: &Lua, reply: &[u8]) -> Vec<u8> {
        let v = match reply_to_lua(lua, reply).unwrap() {
            Decoded::Value(v) => v,
            Decoded::Error(e) => return e,
        };
        let mut out = Reply::new(reply.iter().any(|b| b"%~_#,(=".contains(b)));
        lua_to_reply(&mut out, &v, 3);
        out.buf
    }

    #[test]
    fn replies_survive_the_trip_through_lua() {
        let lua = Lua::new();
        for r in [
            &b":12\r\n"[..],
            b"$3\r\nabc\r\n",
            b"*2\r\n:1\r\n$1\r\nx\r\n",
            b"+PONG\r\n",
            b"%1\r\n$1\r\nf\r\n$1\r\nv\r\n",
            b"~1\r\n$1\r\na\r\n",
            b",1.5\r\n",
            b"#t\r\n",
            b"(123\r\n",
            b"=9\r\ntxt:hello\r\n",
        ] {
            assert_eq!(roundtrip(&lua, r), r, "{}", String::from_utf8_lossy(r));
        }
        assert_eq!(roundtrip(&lua, b"-ERR x\r\n"), b"ERR x");
        // RESP2 nulls are false, which a RESP2 script returns as a null.
        let v = match reply_to_lua(&lua, b"$-1\r\n").unwrap() {
            Decoded::Value(v) => v,
            Decoded::Error(_) => panic!(),
        };
        let mut out = Reply::new(false);
        lua_to_reply(&mut out, &v, 2);
        assert_eq!(out.buf, b"$-1\r\n");
    }

    #[test]
    fn numbers_truncate_like_c() {
        assert_eq!(lua_number_to_int(3.99), 3);
        assert_eq!(lua_number_to_int(-3.99), -3);
        assert_eq!(lua_number_to_int(1e300), i64::MIN);
        assert_eq!(lua_number_to_int(f64::NAN), i64::MIN);
        assert_eq!(lua_number_to_int(f64::INFINITY), i64::MIN);
        assert_eq!(c_double(0.1), b"0.10000000000000001");
        assert_eq!(c_double(-f64::NAN), b"-nan");
    }
}
