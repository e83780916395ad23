//! LZF, the compression of RDB strings: a compressor that makes the same
//! choices as the liblzf 3.6 that redis-server 7.0 builds (a 2^16-slot
//! table of 3-byte hashes in its "very fast" variant, matches of 3 to 264
//! bytes up to 8 KiB back, literal runs of at most 32 bytes), so a DUMP
//! payload is byte for byte Redis's, and a decompressor that checks every
//! length and offset against its buffers.
//!
//! Written here rather than taken from a crate: the one crate that wraps
//! liblzf builds C code, and a pure-Rust port must also match the table
//! size and hash Redis compiles with, which is the whole point.

use std::cell::RefCell;

const HLOG: u32 = 16;
const HSIZE: usize = 1 << HLOG;
const MAX_LIT: usize = 1 << 5;
const MAX_OFF: usize = 1 << 13;
const MAX_REF: usize = (1 << 8) + (1 << 3);

thread_local! {
    /// The hash table, reused between calls: each slot holds a generation
    /// (high 32 bits) and an input offset, so no call has to clear it.
    static TABLE: RefCell<(Vec<u64>, u32)> = const { RefCell::new((Vec::new(), 0)) };
}

fn idx(h: u32) -> usize {
    ((h >> (3 * 8 - HLOG)).wrapping_sub(h.wrapping_mul(5)) as usize) & (HSIZE - 1)
}

fn first(d: &[u8], i: usize) -> u32 {
    ((d[i] as u32) << 8) | d[i + 1] as u32
}

fn next(h: u32, d: &[u8], i: usize) -> u32 {
    (h << 8) | d[i + 2] as u32
}

/// Compresses `input` into at most `max_out` bytes; `None` when it does not
/// fit (or `input` is empty), as liblzf's `lzf_compress` returns 0.
pub fn compress(input: &[u8], max_out: usize) -> Option<Vec<u8>> {
    if input.is_empty() || max_out == 0 {
        return None;
    }
    TABLE.with(|t| {
        let mut t = t.borrow_mut();
        let (table, gen) = &mut *t;
        if table.is_empty() {
            table.resize(HSIZE, 0);
        }
        *gen = gen.wrapping_add(1);
        if *gen == 0 {
            table.iter_mut().for_each(|s| *s = 0);
            *gen = 1;
        }
        compress_with(input, max_out, table, *gen as u64)
    })
}

fn compress_with(d: &[u8], max_out: usize, table: &mut [u64], gen: u64) -> Option<Vec<u8>> {
    let n = d.len();
    let mut out: Vec<u8> = Vec::with_capacity(max_out.min(n + n / 16 + 64));
    let get = |table: &[u64], h: u32| -> usize {
        let s = table[idx(h)];
        if s >> 32 == gen {
            (s & 0xffff_ffff) as usize
        } else {
            0
        }
    };
    let put = |table: &mut [u64], h: u32, at: usize| table[idx(h)] = (gen << 32) | at as u64;
    // `op` is the output length with a run's header byte reserved at
    // `op - lit - 1`, as liblzf keeps it.
    let mut lit: usize = 0;
    out.push(0);
    let mut ip = 0usize;
    if n >= 2 {
        let mut hval = first(d, ip);
        while ip + 2 < n {
            hval = next(hval, d, ip);
            let r = get(table, hval);
            put(table, hval, ip);
            let matched = r > 0
                && r < ip
                && ip - r - 1 < MAX_OFF
                && d[r + 2] == d[ip + 2]
                && d[r + 1] == d[ip + 1]
                && d[r] == d[ip];
            if matched {
                let off = ip - r - 1;
                let mut len = 2usize;
                let maxlen = (n - ip - len).min(MAX_REF);
                let op = out.len();
                if op + 3 + 1 >= max_out && op - usize::from(lit == 0) + 3 + 1 >= max_out {
                    return None;
                }
                let hdr = op - lit - 1;
                out[hdr] = (lit as u8).wrapping_sub(1);
                if lit == 0 {
                    out.pop();
                }
                loop {
                    len += 1;
                    if !(len < maxlen && d[r + len] == d[ip + len]) {
                        break;
                    }
                }
                len -= 2;
                ip += 1;
                if len < 7 {
                    out.push(((off >> 8) + (len << 5)) as u8);
                } else {
                    out.push(((off >> 8) + (7 << 5)) as u8);
                    out.push((len - 7) as u8);
                }
                out.push(off as u8);
                lit = 0;
                out.push(0);
                ip += len + 1;
                if ip + 2 >= n {
                    break;
                }
                ip -= 2;
                hval = first(d, ip);
                hval = next(hval, d, ip);
                put(table, hval, ip);
                ip += 1;
                hval = next(hval, d, ip);
                put(table, hval, ip);
                ip += 1;
            } else {
                if out.len() >= max_out {
                    return None;
                }
                lit += 1;
                out.push(d[ip]);
                ip += 1;
                if lit == MAX_LIT {
                    let hdr = out.len() - lit - 1;
                    out[hdr] = (lit - 1) as u8;
                    lit = 0;
                    out.push(0);
                }
            }
        }
    }
    if out.len() + 3 > max_out {
        return None;
    }
    while ip < n {
        lit += 1;
        out.push(d[ip]);
        ip += 1;
        if lit == MAX_LIT {
            let hdr = out.len() - lit - 1;
            out[hdr] = (lit - 1) as u8;
            lit = 0;
            out.push(0);
        }
    }
    let hdr = out.len() - lit - 1;
    out[hdr] = (lit as u8).wrapping_sub(1);
    if lit == 0 {
        out.pop();
    }
    if out.len() > max_out {
        return None;
    }
    Some(out)
}

/// Decompresses `input`, which must give exactly `out_len` bytes; `None`
/// when it is corrupt (a run or back reference past either buffer).
pub fn decompress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    let mut out: Vec<u8> = Vec::with_capacity(out_len);
    let mut ip = 0usize;
    while ip < input.len() {
        let ctrl = input[ip] as usize;
        ip += 1;
        if ctrl < 32 {
            let run = ctrl + 1;
            let lits = input.get(ip..ip + run)?;
            if out.len() + run > out_len {
                return None;
            }
            out.extend_from_slice(lits);
            ip += run;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += *input.get(ip)? as usize;
                ip += 1;
            }
            len += 2;
            let back = ((ctrl & 0x1f) << 8) + *input.get(ip)? as usize + 1;
            ip += 1;
            if back > out.len() || out.len() + len > out_len {
                return None;
            }
            let start = out.len() - back;
            for k in 0..len {
                let b = out[start + k];
                out.push(b);
            }
        }
    }
    (out.len() == out_len).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_output() {
        // What redis-server 7.0.15's DUMP holds for 50 `a`s and for
        // "hello world hello world hello world hello".
        let c = compress(&[b'a'; 50], 46).unwrap();
        assert_eq!(c, b"\x01aa\xe0\x25\x00\x01aa");
        assert_eq!(decompress(&c, 50).unwrap(), vec![b'a'; 50]);
        let text = b"hello world hello world hello world hello";
        let c = compress(text, text.len() - 4).unwrap();
        assert_eq!(c, b"\x0chello world h\xe0\x11\x0b\x01lo");
        assert_eq!(decompress(&c, text.len()).unwrap(), text);
    }

    #[test]
    fn incompressible_does_not_fit() {
        let data: Vec<u8> = (0..64u32).map(|i| (i * 97 % 251) as u8).collect();
        assert!(compress(&data, data.len() - 4).is_none());
    }

    #[test]
    fn corrupt_input_is_refused() {
        assert!(decompress(&[0x05, 1, 2], 6).is_none());
        assert!(decompress(&[0xe0, 0x1c, 0x09], 40).is_none());
        assert!(decompress(&[0x00, 1], 2).is_none());
    }

    proptest! {
        #[test]
        fn round_trips(data in proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), any::<u8>()], 0..3000)) {
            if let Some(c) = compress(&data, data.len() + data.len() / 16 + 64) {
                prop_assert_eq!(decompress(&c, data.len()).unwrap(), data);
            } else {
                prop_assert!(data.is_empty());
            }
        }
    }
}
