//! `struct`: packs and unpacks binary data with a format string
//! (`struct.pack`, `struct.unpack`, `struct.size`), as Roberto
//! Ierusalimschy's library that Redis bundles: `<` `>` `=` endianness, `!n`
//! alignment, `b B h H l L T i[n] I[n]` integers, `f d` floats, `x`
//! padding, `s` zero-terminated and `c[n]` fixed strings.

use mlua::{Lua, MultiValue, Table, Value, Variadic};

use super::lua_error;

/// Widest integer `i[n]` / `I[n]` accepts.
const MAX_INT_SIZE: usize = 32;
/// Alignment of `!` without a number.
const MAX_ALIGN: usize = 8;

struct Format<'a> {
    fmt: &'a [u8],
    pos: usize,
    little: bool,
    align: usize,
}

fn arg_error(n: usize, func: &str, msg: &str) -> mlua::Error {
    lua_error(format!("bad argument #{n} to '{func}' ({msg})"))
}

impl<'a> Format<'a> {
    fn new(fmt: &'a [u8]) -> Self {
        Format {
            fmt,
            pos: 0,
            little: true,
            align: 1,
        }
    }

    fn number(&mut self, default: usize) -> usize {
        let start = self.pos;
        let mut n: usize = 0;
        while let Some(d) = self.fmt.get(self.pos).filter(|c| c.is_ascii_digit()) {
            n = n.saturating_mul(10).saturating_add((d - b'0') as usize);
            self.pos += 1;
        }
        if self.pos == start {
            default
        } else {
            n
        }
    }

    /// The next option and its size (0 for control options).
    fn next(&mut self) -> Option<mlua::Result<(u8, usize)>> {
        let opt = *self.fmt.get(self.pos)?;
        self.pos += 1;
        let size = match opt {
            b'b' | b'B' | b'x' => 1,
            b'h' | b'H' => 2,
            b'l' | b'L' | b'T' | b'd' => 8,
            b'f' => 4,
            b'c' => self.number(1),
            b'i' | b'I' => {
                let n = self.number(4);
                if n > MAX_INT_SIZE {
                    return Some(Err(lua_error(format!(
                        "integral size {n} is larger than limit of {MAX_INT_SIZE}"
                    ))));
                }
                n
            }
            _ => 0,
        };
        Some(Ok((opt, size)))
    }

    /// Applies a control option (endianness, alignment, space).
    fn control(&mut self, opt: u8, func: &str) -> mlua::Result<()> {
        match opt {
            b' ' => {}
            b'>' => self.little = false,
            b'<' | b'=' => self.little = true,
            b'!' => {
                let a = self.number(MAX_ALIGN);
                if !a.is_power_of_two() {
                    return Err(lua_error(format!("alignment {a} is not a power of 2")));
                }
                self.align = a;
            }
            _ => {
                return Err(arg_error(
                    1,
                    func,
                    &format!("invalid format option '{}'", opt as char),
                ))
            }
        }
        Ok(())
    }

    fn padding(&self, len: usize, opt: u8, size: usize) -> usize {
        if size == 0 || opt == b'c' {
            return 0;
        }
        let size = size.min(self.align);
        (size - (len & (size - 1))) & (size - 1)
    }
}

fn number_arg(v: Option<&Value>, n: usize, func: &str) -> mlua::Result<f64> {
    match v {
        Some(Value::Integer(i)) => Ok(*i as f64),
        Some(Value::Number(x)) => Ok(*x),
        Some(Value::String(s)) => s
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .ok_or_else(|| arg_error(n, func, "number expected, got string")),
        other => Err(arg_error(
            n,
            func,
            &format!(
                "number expected, got {}",
                other.map_or("no value", |v| v.type_name())
            ),
        )),
    }
}

fn string_arg(v: Option<&Value>, n: usize, func: &str) -> mlua::Result<Vec<u8>> {
    match v {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(Value::Integer(i)) => Ok(i.to_string().into_bytes()),
        Some(Value::Number(x)) => Ok(format!("{x}").into_bytes()),
        other => Err(arg_error(
            n,
            func,
            &format!(
                "string expected, got {}",
                other.map_or("no value", |v| v.type_name())
            ),
        )),
    }
}

fn put_int(out: &mut Vec<u8>, n: f64, size: usize, little: bool) {
    let v: u64 = if n < 0.0 { n as i64 as u64 } else { n as u64 };
    let fill = if n < 0.0 { 0xff } else { 0 };
    let bytes: Vec<u8> = (0..size)
        .map(|i| if i < 8 { (v >> (8 * i)) as u8 } else { fill })
        .collect();
    if little {
        out.extend_from_slice(&bytes);
    } else {
        out.extend(bytes.iter().rev());
    }
}

fn get_int(data: &[u8], little: bool, signed: bool) -> f64 {
    let size = data.len();
    let mut v: u64 = 0;
    for i in 0..size {
        let b = if little { data[size - 1 - i] } else { data[i] };
        v = (v << 8) | b as u64;
    }
    if signed && size < 8 && size > 0 {
        let shift = 64 - 8 * size as u32;
        ((v << shift) as i64 >> shift) as f64
    } else if signed {
        v as i64 as f64
    } else {
        v as f64
    }
}

/// `struct.pack(fmt, ...)`.
pub fn pack(fmt: &[u8], args: &[Value]) -> mlua::Result<Vec<u8>> {
    let mut f = Format::new(fmt);
    let mut out = Vec::new();
    let mut arg = 0usize;
    while let Some(next) = f.next() {
        let (opt, mut size) = next?;
        let pad = f.padding(out.len(), opt, size);
        out.resize(out.len() + pad, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = number_arg(args.get(arg), arg + 2, "pack")?;
                arg += 1;
                put_int(&mut out, n, size, f.little);
            }
            b'x' => out.push(0),
            b'f' => {
                let n = number_arg(args.get(arg), arg + 2, "pack")? as f32;
                arg += 1;
                let b = if f.little {
                    n.to_le_bytes()
                } else {
                    n.to_be_bytes()
                };
                out.extend_from_slice(&b);
            }
            b'd' => {
                let n = number_arg(args.get(arg), arg + 2, "pack")?;
                arg += 1;
                let b = if f.little {
                    n.to_le_bytes()
                } else {
                    n.to_be_bytes()
                };
                out.extend_from_slice(&b);
            }
            b'c' | b's' => {
                let s = string_arg(args.get(arg), arg + 2, "pack")?;
                arg += 1;
                if size == 0 || opt == b's' {
                    size = s.len();
                }
                if s.len() < size {
                    return Err(arg_error(arg + 1, "pack", "string too short"));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            other => f.control(other, "pack")?,
        }
    }
    Ok(out)
}

/// `struct.unpack(fmt, data [, pos])`: the values and the next position.
pub fn unpack(lua: &Lua, fmt: &[u8], data: &[u8], start: usize) -> mlua::Result<MultiValue> {
    let mut f = Format::new(fmt);
    let mut out: Vec<Value> = Vec::new();
    let mut pos = start;
    if pos > data.len() {
        return Err(arg_error(3, "unpack", "offset must be 1 or greater"));
    }
    while let Some(next) = f.next() {
        let (opt, mut size) = next?;
        pos += f.padding(pos, opt, size);
        if pos + size > data.len() {
            return Err(arg_error(2, "unpack", "data string too short"));
        }
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let signed = opt.is_ascii_lowercase();
                out.push(Value::Number(get_int(
                    &data[pos..pos + size],
                    f.little,
                    signed,
                )));
            }
            b'x' => {}
            b'f' => {
                let mut b = [0u8; 4];
                b.copy_from_slice(&data[pos..pos + 4]);
                let v = if f.little {
                    f32::from_le_bytes(b)
                } else {
                    f32::from_be_bytes(b)
                };
                out.push(Value::Number(v as f64));
            }
            b'd' => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&data[pos..pos + 8]);
                let v = if f.little {
                    f64::from_le_bytes(b)
                } else {
                    f64::from_be_bytes(b)
                };
                out.push(Value::Number(v));
            }
            b'c' => {
                if size == 0 {
                    let n = match out.pop() {
                        Some(Value::Number(n)) => n,
                        Some(Value::Integer(i)) => i as f64,
                        _ => return Err(lua_error("format 'c0' needs a previous size")),
                    };
                    size = n.max(0.0) as usize;
                    if pos + size > data.len() {
                        return Err(arg_error(2, "unpack", "data string too short"));
                    }
                }
                out.push(Value::String(lua.create_string(&data[pos..pos + size])?));
            }
            b's' => {
                let Some(end) = data[pos..].iter().position(|&b| b == 0) else {
                    return Err(lua_error("unfinished string in data"));
                };
                out.push(Value::String(lua.create_string(&data[pos..pos + end])?));
                size = end + 1;
            }
            other => f.control(other, "unpack")?,
        }
        pos += size;
    }
    out.push(Value::Number((pos + 1) as f64));
    Ok(MultiValue::from_iter(out))
}

/// `struct.size(fmt)`.
pub fn size(fmt: &[u8]) -> mlua::Result<usize> {
    let mut f = Format::new(fmt);
    let mut total = 0usize;
    while let Some(next) = f.next() {
        let (opt, size) = next?;
        if opt == b's' {
            return Err(arg_error(1, "size", "option 's' has no fixed size"));
        }
        if opt == b'c' && size == 0 {
            return Err(arg_error(1, "size", "option 'c0' has no fixed size"));
        }
        if size == 0 {
            f.control(opt, "size")?;
        }
        total += f.padding(total, opt, size) + size;
    }
    Ok(total)
}

/// The `struct` table.
pub fn create(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "pack",
        lua.create_function(|lua, args: Variadic<Value>| {
            let fmt = string_arg(args.first(), 1, "pack")?;
            let rest = args.get(1..).unwrap_or(&[]);
            lua.create_string(pack(&fmt, rest)?)
        })?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(|lua, args: Variadic<Value>| {
            let fmt = string_arg(args.first(), 1, "unpack")?;
            let data = string_arg(args.get(1), 2, "unpack")?;
            let start = match args.get(2) {
                None | Some(Value::Nil) => 1.0,
                v => number_arg(v, 3, "unpack")?,
            };
            if start < 1.0 {
                return Err(arg_error(3, "unpack", "offset must be 1 or greater"));
            }
            unpack(lua, &fmt, &data, start as usize - 1)
        })?,
    )?;
    t.raw_set(
        "size",
        lua.create_function(|_, fmt: mlua::LuaString| Ok(size(&fmt.as_bytes())? as f64))?,
    )?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_unpack_round_trip() {
        let lua = Lua::new();
        let args = [Value::Integer(-2), Value::Integer(513), Value::Number(1.5)];
        let packed = pack(b">bHd", &args).unwrap();
        assert_eq!(&packed[..3], &[0xfe, 0x02, 0x01]);
        assert_eq!(packed.len(), 11);
        let v: Vec<Value> = unpack(&lua, b">bHd", &packed, 0)
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(v.len(), 4);
        assert!(matches!(v[0], Value::Number(n) if n == -2.0));
        assert!(matches!(v[1], Value::Number(n) if n == 513.0));
        assert!(matches!(v[2], Value::Number(n) if n == 1.5));
        assert!(matches!(v[3], Value::Number(n) if n == 12.0));
        assert_eq!(size(b"!4 b i").unwrap(), 8);
        assert_eq!(size(b"<i2 c3").unwrap(), 5);
        assert!(size(b"s").is_err());
        let s = pack(b"s", &[Value::String(lua.create_string("ab").unwrap())]).unwrap();
        assert_eq!(s, b"ab\0");
    }
}
