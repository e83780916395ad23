//! `cmsgpack`: MessagePack for scripts (`cmsgpack.pack(...)`,
//! `cmsgpack.unpack(data)`), following lua-cmsgpack's choices: integral
//! numbers use the smallest integer encoding, other numbers a float32 when
//! exact else a float64, a table whose keys are exactly 1..n is an array,
//! any other table a map.

use mlua::{Lua, MultiValue, Table, Value, Variadic};

use super::lua_error;

/// Deepest nesting packed; deeper tables pack as nil (as lua-cmsgpack).
const MAX_NESTING: usize = 16;

fn pack_int(out: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        match n {
            0..=127 => out.push(n as u8),
            128..=0xff => out.extend_from_slice(&[0xcc, n as u8]),
            0x100..=0xffff => {
                out.push(0xcd);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
            0x1_0000..=0xffff_ffff => {
                out.push(0xce);
                out.extend_from_slice(&(n as u32).to_be_bytes());
            }
            _ => {
                out.push(0xcf);
                out.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn pack_number(out: &mut Vec<u8>, x: f64) {
    if x.is_finite() && x.floor() == x && x.abs() < 9.2e18 {
        pack_int(out, x as i64);
    } else if (x as f32) as f64 == x || x.is_nan() {
        out.push(0xca);
        out.extend_from_slice(&(x as f32).to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&x.to_be_bytes());
    }
}

fn pack_len(out: &mut Vec<u8>, n: usize, fix: u8, fix_max: usize, codes: [u8; 3]) {
    if n <= fix_max {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(codes[1]);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(codes[2]);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

fn pack_value(out: &mut Vec<u8>, v: &Value, depth: usize) -> mlua::Result<()> {
    match v {
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => pack_int(out, *i),
        Value::Number(x) => pack_number(out, *x),
        Value::String(s) => {
            let s = s.as_bytes();
            if s.len() < 32 {
                out.push(0xa0 | s.len() as u8);
            } else if s.len() <= 0xff {
                out.extend_from_slice(&[0xd9, s.len() as u8]);
            } else {
                pack_len(out, s.len(), 0xa0, 31, [0, 0xda, 0xdb]);
            }
            out.extend_from_slice(&s);
        }
        Value::Table(t) if depth < MAX_NESTING => {
            let pairs: Vec<(Value, Value)> =
                t.pairs::<Value, Value>().collect::<mlua::Result<_>>()?;
            let is_array = pairs.iter().all(|(k, _)| match k {
                Value::Integer(i) => *i >= 1 && (*i as usize) <= pairs.len(),
                Value::Number(n) => n.floor() == *n && *n >= 1.0 && (*n as usize) <= pairs.len(),
                _ => false,
            });
            if is_array {
                pack_len(out, pairs.len(), 0x90, 15, [0, 0xdc, 0xdd]);
                for i in 1..=pairs.len() {
                    pack_value(out, &t.raw_get::<Value>(i)?, depth + 1)?;
                }
            } else {
                pack_len(out, pairs.len(), 0x80, 15, [0, 0xde, 0xdf]);
                for (k, val) in &pairs {
                    pack_value(out, k, depth + 1)?;
                    pack_value(out, val, depth + 1)?;
                }
            }
        }
        _ => out.push(0xc0),
    }
    Ok(())
}

struct Reader<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> mlua::Result<&[u8]> {
        let b = self
            .s
            .get(self.pos..self.pos + n)
            .ok_or_else(|| lua_error("Missing bytes in input."))?;
        self.pos += n;
        Ok(b)
    }

    fn uint(&mut self, n: usize) -> mlua::Result<u64> {
        Ok(self.take(n)?.iter().fold(0u64, |a, &b| (a << 8) | b as u64))
    }

    fn value(&mut self, lua: &Lua) -> mlua::Result<Value> {
        let tag = self.take(1)?[0];
        let num = |x: f64| Ok(Value::Number(x));
        match tag {
            0x00..=0x7f => num(tag as f64),
            0xe0..=0xff => num(tag as i8 as f64),
            0xc0 => Ok(Value::Nil),
            0xc2 => Ok(Value::Boolean(false)),
            0xc3 => Ok(Value::Boolean(true)),
            0xcc => num(self.uint(1)? as f64),
            0xcd => num(self.uint(2)? as f64),
            0xce => num(self.uint(4)? as f64),
            0xcf => num(self.uint(8)? as f64),
            0xd0 => num(self.uint(1)? as u8 as i8 as f64),
            0xd1 => num(self.uint(2)? as u16 as i16 as f64),
            0xd2 => num(self.uint(4)? as u32 as i32 as f64),
            0xd3 => num(self.uint(8)? as i64 as f64),
            0xca => num(f32::from_bits(self.uint(4)? as u32) as f64),
            0xcb => num(f64::from_bits(self.uint(8)?)),
            0xa0..=0xbf => self.string(lua, (tag & 0x1f) as usize),
            0xd9 | 0xc4 => {
                let n = self.uint(1)? as usize;
                self.string(lua, n)
            }
            0xda | 0xc5 => {
                let n = self.uint(2)? as usize;
                self.string(lua, n)
            }
            0xdb | 0xc6 => {
                let n = self.uint(4)? as usize;
                self.string(lua, n)
            }
            0x90..=0x9f => self.array(lua, (tag & 0x0f) as usize),
            0xdc => {
                let n = self.uint(2)? as usize;
                self.array(lua, n)
            }
            0xdd => {
                let n = self.uint(4)? as usize;
                self.array(lua, n)
            }
            0x80..=0x8f => self.map(lua, (tag & 0x0f) as usize),
            0xde => {
                let n = self.uint(2)? as usize;
                self.map(lua, n)
            }
            0xdf => {
                let n = self.uint(4)? as usize;
                self.map(lua, n)
            }
            _ => Err(lua_error("Bad data format in input.")),
        }
    }

    fn string(&mut self, lua: &Lua, n: usize) -> mlua::Result<Value> {
        let b = self.take(n)?.to_vec();
        Ok(Value::String(lua.create_string(b)?))
    }

    fn array(&mut self, lua: &Lua, n: usize) -> mlua::Result<Value> {
        let t = lua.create_table_with_capacity(n.min(1024), 0)?;
        for i in 1..=n {
            let v = self.value(lua)?;
            t.raw_set(i, v)?;
        }
        Ok(Value::Table(t))
    }

    fn map(&mut self, lua: &Lua, n: usize) -> mlua::Result<Value> {
        let t = lua.create_table()?;
        for _ in 0..n {
            let k = self.value(lua)?;
            let v = self.value(lua)?;
            if !matches!(k, Value::Nil) {
                t.raw_set(k, v)?;
            }
        }
        Ok(Value::Table(t))
    }
}

/// `cmsgpack.pack(...)`: every argument packed, one after the other.
pub fn pack(args: &[Value]) -> mlua::Result<Vec<u8>> {
    let mut out = Vec::new();
    for v in args {
        pack_value(&mut out, v, 0)?;
    }
    Ok(out)
}

/// `cmsgpack.unpack(data)`: every value in the data.
pub fn unpack(lua: &Lua, data: &[u8]) -> mlua::Result<MultiValue> {
    let mut r = Reader { s: data, pos: 0 };
    let mut out = Vec::new();
    while r.pos < data.len() {
        out.push(r.value(lua)?);
    }
    Ok(MultiValue::from_iter(out))
}

/// The `cmsgpack` table.
pub fn create(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "pack",
        lua.create_function(|lua, args: Variadic<Value>| {
            if args.is_empty() {
                return Err(lua_error("MessagePack pack needs input."));
            }
            lua.create_string(pack(&args)?)
        })?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(|lua, s: mlua::LuaString| unpack(lua, &s.as_bytes()))?,
    )?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let lua = Lua::new();
        let v: Value = lua
            .load("return {1, -5, 300, 'abc', {a=1.5}, true}")
            .eval()
            .unwrap();
        let packed = pack(std::slice::from_ref(&v)).unwrap();
        assert_eq!(&packed[..4], &[0x96, 0x01, 0xfb, 0xcd]);
        let back: Vec<Value> = unpack(&lua, &packed).unwrap().into_iter().collect();
        assert_eq!(pack(&back).unwrap(), packed);
        assert!(unpack(&lua, &[0xcd, 0x01]).is_err());
    }
}
