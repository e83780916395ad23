//! `bit`: LuaBitOp's operations on 32-bit integers (results are signed).

use mlua::{Lua, Table, Variadic};

/// A Lua number as LuaBitOp sees it: rounded, then its low 32 bits.
pub fn tobit(x: f64) -> i32 {
    if !x.is_finite() {
        return 0;
    }
    let r = x.round_ties_even();
    r.rem_euclid(4_294_967_296.0) as u32 as i32
}

fn shift_count(n: f64) -> u32 {
    (tobit(n) & 31) as u32
}

/// `bit.tohex(x [, n])`: `n` hex digits (upper case if negative), default 8.
pub fn tohex(x: f64, n: Option<f64>) -> String {
    let mut n = n.map(tobit).unwrap_or(8);
    let upper = n < 0;
    if upper {
        n = -n;
    }
    let n = n.clamp(0, 8) as usize;
    let v = tobit(x) as u32;
    let s = if upper {
        format!("{v:08X}")
    } else {
        format!("{v:08x}")
    };
    s[8 - n..].to_string()
}

fn fold(args: &[f64], f: impl Fn(i32, i32) -> i32) -> f64 {
    let mut it = args.iter().map(|&x| tobit(x));
    let first = it.next().unwrap_or(0);
    it.fold(first, f) as f64
}

/// The `bit` table.
pub fn create(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "tobit",
        lua.create_function(|_, x: f64| Ok(tobit(x) as f64))?,
    )?;
    t.raw_set(
        "bnot",
        lua.create_function(|_, x: f64| Ok(!tobit(x) as f64))?,
    )?;
    t.raw_set(
        "band",
        lua.create_function(|_, a: Variadic<f64>| Ok(fold(&a, |x, y| x & y)))?,
    )?;
    t.raw_set(
        "bor",
        lua.create_function(|_, a: Variadic<f64>| Ok(fold(&a, |x, y| x | y)))?,
    )?;
    t.raw_set(
        "bxor",
        lua.create_function(|_, a: Variadic<f64>| Ok(fold(&a, |x, y| x ^ y)))?,
    )?;
    t.raw_set(
        "lshift",
        lua.create_function(|_, (x, n): (f64, f64)| {
            Ok(((tobit(x) as u32) << shift_count(n)) as i32 as f64)
        })?,
    )?;
    t.raw_set(
        "rshift",
        lua.create_function(|_, (x, n): (f64, f64)| {
            Ok(((tobit(x) as u32) >> shift_count(n)) as i32 as f64)
        })?,
    )?;
    t.raw_set(
        "arshift",
        lua.create_function(|_, (x, n): (f64, f64)| Ok((tobit(x) >> shift_count(n)) as f64))?,
    )?;
    t.raw_set(
        "rol",
        lua.create_function(|_, (x, n): (f64, f64)| {
            Ok((tobit(x) as u32).rotate_left(shift_count(n)) as i32 as f64)
        })?,
    )?;
    t.raw_set(
        "ror",
        lua.create_function(|_, (x, n): (f64, f64)| {
            Ok((tobit(x) as u32).rotate_right(shift_count(n)) as i32 as f64)
        })?,
    )?;
    t.raw_set(
        "bswap",
        lua.create_function(|_, x: f64| Ok((tobit(x) as u32).swap_bytes() as i32 as f64))?,
    )?;
    t.raw_set(
        "tohex",
        lua.create_function(|_, (x, n): (f64, Option<f64>)| Ok(tohex(x, n)))?,
    )?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn luabitop_semantics() {
        assert_eq!(tobit(4294967295.0), -1);
        assert_eq!(tobit(2147483648.0), i32::MIN);
        assert_eq!(tobit(-1.0), -1);
        assert_eq!(tobit(1.5), 2);
        assert_eq!(tobit(2.5), 2);
        assert_eq!(tohex(255.0, None), "000000ff");
        assert_eq!(tohex(-1.0, Some(-4.0)), "FFFF");
        assert_eq!(tohex(4660.0, Some(2.0)), "34");
    }
}
