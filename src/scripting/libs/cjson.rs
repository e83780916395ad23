//! `cjson`: JSON for scripts, with Lua CJSON 2.1's behaviour as Redis
//! bundles it: numbers print with 14 significant digits, `/` is escaped,
//! an empty table encodes as `{}`, a table with only positive integer keys
//! is an array (holes become `null`) unless it is excessively sparse (an
//! error), `cjson.null` stands for JSON null.

use mlua::{LightUserData, Lua, Table, Value};

use super::lua_error;
use crate::protocol::number::strtod;

/// Deepest nesting encode and decode accept.
const MAX_DEPTH: usize = 1000;
/// An array whose highest index is more than this many times its number of
/// items (and above [`SPARSE_SAFE`]) is refused.
const SPARSE_RATIO: f64 = 2.0;
const SPARSE_SAFE: f64 = 10.0;

/// `cjson.null`.
pub fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

/// C's `%.<prec>g`.
pub fn format_g(x: f64, prec: usize) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let prec = prec.max(1);
    let sci = format!("{:.*e}", prec - 1, x);
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let strip = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if exp < -4 || exp >= prec as i32 {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{}{:02}", strip(mant), sign, exp.abs())
    } else {
        let decimals = (prec as i32 - 1 - exp).max(0) as usize;
        strip(&format!("{:.*}", decimals, x))
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::LightUserData(_) | Value::UserData(_) => "userdata",
        other => other.type_name(),
    }
}

fn exception(v: &Value, reason: &str) -> mlua::Error {
    lua_error(format!("Cannot serialise {}: {reason}", type_name(v)))
}

fn encode_number(out: &mut Vec<u8>, v: &Value, x: f64) -> mlua::Result<()> {
    if !x.is_finite() {
        return Err(exception(v, "must not be NaN or Inf"));
    }
    out.extend_from_slice(format_g(x, 14).as_bytes());
    Ok(())
}

fn encode_string(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &b in s {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            8 => out.extend_from_slice(b"\\b"),
            9 => out.extend_from_slice(b"\\t"),
            10 => out.extend_from_slice(b"\\n"),
            12 => out.extend_from_slice(b"\\f"),
            13 => out.extend_from_slice(b"\\r"),
            0..=31 | 127 => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

/// The array length of a table, or `None` when it is an object.
fn array_length(t: &Table, v: &Value) -> mlua::Result<Option<usize>> {
    let mut max = 0f64;
    let mut items = 0f64;
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        let k = match k {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => return Ok(None),
        };
        if k.floor() != k || k < 1.0 {
            return Ok(None);
        }
        max = max.max(k);
        items += 1.0;
    }
    if max > items * SPARSE_RATIO && max > SPARSE_SAFE {
        return Err(exception(v, "excessively sparse array"));
    }
    Ok((max > 0.0).then_some(max as usize))
}

fn encode_value(out: &mut Vec<u8>, v: &Value, depth: usize) -> mlua::Result<()> {
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(i) => encode_number(out, v, *i as f64)?,
        Value::Number(n) => encode_number(out, v, *n)?,
        Value::String(s) => encode_string(out, &s.as_bytes()),
        Value::Table(t) => {
            if depth > MAX_DEPTH {
                return Err(lua_error(format!(
                    "Cannot serialise, excessive nesting ({depth})"
                )));
            }
            match array_length(t, v)? {
                Some(len) => {
                    out.push(b'[');
                    for i in 1..=len {
                        if i > 1 {
                            out.push(b',');
                        }
                        encode_value(out, &t.raw_get::<Value>(i)?, depth + 1)?;
                    }
                    out.push(b']');
                }
                None => {
                    out.push(b'{');
                    let mut first = true;
                    for pair in t.pairs::<Value, Value>() {
                        let (k, val) = pair?;
                        if !first {
                            out.push(b',');
                        }
                        first = false;
                        match &k {
                            Value::String(s) => encode_string(out, &s.as_bytes()),
                            Value::Integer(_) | Value::Number(_) => {
                                out.push(b'"');
                                let x = match k {
                                    Value::Integer(i) => i as f64,
                                    Value::Number(n) => n,
                                    _ => 0.0,
                                };
                                encode_number(out, &k, x)?;
                                out.push(b'"');
                            }
                            other => {
                                return Err(exception(
                                    other,
                                    "table key must be a number or string",
                                ))
                            }
                        }
                        out.push(b':');
                        encode_value(out, &val, depth + 1)?;
                    }
                    out.push(b'}');
                }
            }
        }
        other => return Err(exception(other, "type not supported")),
    }
    Ok(())
}

/// `cjson.encode(value)`.
pub fn encode(v: &Value) -> mlua::Result<Vec<u8>> {
    let mut out = Vec::new();
    encode_value(&mut out, v, 1)?;
    Ok(out)
}

fn bad_unicode(at: usize) -> mlua::Error {
    lua_error(format!(
        "Expected value but found invalid unicode escape code at character {}",
        at + 1
    ))
}

struct Parser<'a, 'l> {
    lua: &'l Lua,
    s: &'a [u8],
    pos: usize,
}

impl Parser<'_, '_> {
    fn skip_ws(&mut self) {
        while matches!(self.s.get(self.pos), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn fail(&self, expected: &str, found: &str, at: usize) -> mlua::Error {
        lua_error(format!(
            "Expected {expected} but found {found} at character {}",
            at + 1
        ))
    }

    /// The name of the token at the current position (for errors).
    fn token_name(&self) -> &'static str {
        match self.s.get(self.pos) {
            None => "T_END",
            Some(b'{') => "T_OBJ_BEGIN",
            Some(b'}') => "T_OBJ_END",
            Some(b'[') => "T_ARR_BEGIN",
            Some(b']') => "T_ARR_END",
            Some(b',') => "T_COMMA",
            Some(b':') => "T_COLON",
            Some(b'"') => "T_STRING",
            Some(b'-' | b'0'..=b'9') => "T_NUMBER",
            Some(_) => {
                let rest = &self.s[self.pos..];
                if rest.starts_with(b"true") || rest.starts_with(b"false") {
                    "T_BOOLEAN"
                } else if rest.starts_with(b"null") {
                    "T_NULL"
                } else {
                    "invalid token"
                }
            }
        }
    }

    fn value(&mut self, depth: usize) -> mlua::Result<Value> {
        self.skip_ws();
        let at = self.pos;
        match self.s.get(self.pos) {
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => Ok(Value::String(self.lua.create_string(self.string()?)?)),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) if self.s[at..].starts_with(b"true") => {
                self.pos += 4;
                Ok(Value::Boolean(true))
            }
            Some(_) if self.s[at..].starts_with(b"false") => {
                self.pos += 5;
                Ok(Value::Boolean(false))
            }
            Some(_) if self.s[at..].starts_with(b"null") => {
                self.pos += 4;
                Ok(null())
            }
            _ => Err(self.fail("value", self.token_name(), at)),
        }
    }

    fn number(&mut self) -> mlua::Result<Value> {
        let at = self.pos;
        let rest = &self.s[at..];
        let digits = rest.strip_prefix(b"-").unwrap_or(rest);
        let bad = digits.len() > 1
            && digits[0] == b'0'
            && (digits[1].is_ascii_digit() || digits[1] == b'x' || digits[1] == b'X');
        let parsed = strtod(rest);
        if bad || parsed.consumed == 0 {
            return Err(self.fail("value", "invalid number", at));
        }
        self.pos += parsed.consumed;
        Ok(Value::Number(parsed.value))
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let h = self.s.get(at..at + 4)?;
        u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()
    }

    fn string(&mut self) -> mlua::Result<Vec<u8>> {
        let start = self.pos;
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            let Some(&b) = self.s.get(self.pos) else {
                return Err(self.fail("value", "unexpected end of string", start));
            };
            self.pos += 1;
            match b {
                b'"' => return Ok(out),
                b'\\' => {
                    let Some(&e) = self.s.get(self.pos) else {
                        return Err(self.fail("value", "unexpected end of string", start));
                    };
                    self.pos += 1;
                    match e {
                        b'"' | b'\\' | b'/' => out.push(e),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let bad = || bad_unicode(start);
                            let mut cp = self.hex4(self.pos).ok_or_else(bad)?;
                            self.pos += 4;
                            if (0xd800..0xdc00).contains(&cp) {
                                if self.s.get(self.pos..self.pos + 2) != Some(b"\\u") {
                                    return Err(bad());
                                }
                                let low = self.hex4(self.pos + 2).ok_or_else(bad)?;
                                if !(0xdc00..0xe000).contains(&low) {
                                    return Err(bad());
                                }
                                self.pos += 6;
                                cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
                            } else if (0xdc00..0xe000).contains(&cp) {
                                return Err(bad());
                            }
                            let c = char::from_u32(cp).ok_or_else(bad)?;
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => return Err(self.fail("value", "invalid escape code", start)),
                    }
                }
                _ => out.push(b),
            }
        }
    }

    fn nested(&self, depth: usize) -> mlua::Result<()> {
        if depth > MAX_DEPTH {
            return Err(lua_error(format!(
                "Found too many nested data structures ({depth}) at character {}",
                self.pos + 1
            )));
        }
        Ok(())
    }

    fn array(&mut self, depth: usize) -> mlua::Result<Value> {
        self.nested(depth)?;
        self.pos += 1;
        let t = self.lua.create_table()?;
        self.skip_ws();
        if self.s.get(self.pos) == Some(&b']') {
            self.pos += 1;
            return Ok(Value::Table(t));
        }
        let mut i = 1;
        loop {
            let v = self.value(depth)?;
            t.raw_set(i, v)?;
            i += 1;
            self.skip_ws();
            match self.s.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::Table(t));
                }
                _ => return Err(self.fail("comma or array end", self.token_name(), self.pos)),
            }
        }
    }

    fn object(&mut self, depth: usize) -> mlua::Result<Value> {
        self.nested(depth)?;
        self.pos += 1;
        let t = self.lua.create_table()?;
        self.skip_ws();
        if self.s.get(self.pos) == Some(&b'}') {
            self.pos += 1;
            return Ok(Value::Table(t));
        }
        loop {
            self.skip_ws();
            if self.s.get(self.pos) != Some(&b'"') {
                return Err(self.fail("object key string", self.token_name(), self.pos));
            }
            let k = self.string()?;
            self.skip_ws();
            if self.s.get(self.pos) != Some(&b':') {
                return Err(self.fail("colon", self.token_name(), self.pos));
            }
            self.pos += 1;
            let v = self.value(depth)?;
            t.raw_set(self.lua.create_string(&k)?, v)?;
            self.skip_ws();
            match self.s.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Value::Table(t));
                }
                _ => return Err(self.fail("comma or object end", self.token_name(), self.pos)),
            }
        }
    }
}

/// `cjson.decode(text)`.
pub fn decode(lua: &Lua, s: &[u8]) -> mlua::Result<Value> {
    let mut p = Parser { lua, s, pos: 0 };
    let v = p.value(0)?;
    p.skip_ws();
    if p.pos < s.len() {
        return Err(p.fail("the end", p.token_name(), p.pos));
    }
    Ok(v)
}

/// The `cjson` table.
pub fn create(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "encode",
        lua.create_function(|lua, v: Value| lua.create_string(encode(&v)?))?,
    )?;
    t.raw_set(
        "decode",
        lua.create_function(|lua, s: mlua::LuaString| decode(lua, &s.as_bytes()))?,
    )?;
    t.raw_set("null", null())?;
    // Configuration functions are accepted and report the defaults.
    for (name, default) in [
        ("encode_max_depth", 1000.0),
        ("decode_max_depth", 1000.0),
        ("encode_number_precision", 14.0),
    ] {
        t.raw_set(
            name,
            lua.create_function(move |_, _: mlua::MultiValue| Ok(default))?,
        )?;
    }
    for name in [
        "encode_keep_buffer",
        "encode_invalid_numbers",
        "decode_invalid_numbers",
        "encode_sparse_array",
    ] {
        t.raw_set(
            name,
            lua.create_function(|_, _: mlua::MultiValue| Ok(false))?,
        )?;
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_g() {
        assert_eq!(format_g(3.0, 14), "3");
        assert_eq!(format_g(0.1, 14), "0.1");
        assert_eq!(format_g(1e20, 14), "1e+20");
        assert_eq!(format_g(123456789012345.0, 14), "1.2345678901234e+14");
        assert_eq!(format_g(0.0001, 14), "0.0001");
        assert_eq!(format_g(0.00001, 14), "1e-05");
        assert_eq!(format_g(-2.5, 14), "-2.5");
    }

    #[test]
    fn encode_and_decode() {
        let lua = Lua::new();
        let v: Value = lua.load("return {1, 2, 'a/b'}").eval().unwrap();
        assert_eq!(encode(&v).unwrap(), b"[1,2,\"a\\/b\"]");
        let v: Value = lua.load("return {}").eval().unwrap();
        assert_eq!(encode(&v).unwrap(), b"{}");
        let v: Value = lua.load("return {[1]=1, [3]=3}").eval().unwrap();
        assert_eq!(encode(&v).unwrap(), b"[1,null,3]");
        let v: Value = lua.load("return {[20]=1}").eval().unwrap();
        assert!(encode(&v).is_err());
        let d = decode(&lua, br#"{"a":[1,2.5,"x\u00e9"],"b":null}"#).unwrap();
        let Value::Table(t) = d else { panic!() };
        let a: Table = t.get("a").unwrap();
        assert_eq!(a.raw_get::<f64>(2).unwrap(), 2.5);
        assert_eq!(a.raw_get::<String>(3).unwrap(), "xé");
        let e = decode(&lua, b"[1,").unwrap_err().to_string();
        assert!(
            e.contains("Expected value but found T_END at character 4"),
            "{e}"
        );
    }
}
