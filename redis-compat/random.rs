//! Seeded random command streams for the differential harness.
//!
//! A stream is N commands drawn from a seed over a tiny keyspace (five keys,
//! small values and integers), so commands keep colliding: INCR on a string
//! that is not a number, RENAME onto a key of another type, GETRANGE past the
//! end. Each command family contributes one generator function to
//! [`FAMILIES`]; a stream picks a family, then a command from it.
//!
//! Generators must only produce commands whose replies are deterministic on
//! both servers: no relative TTL reads (TTL/PTTL/EXPIRETIME round the clock),
//! no RANDOMKEY, no replies whose order is a hash order (KEYS, SMEMBERS).
//! Expiry is only set far in the future (or in the past, which deletes).

/// Arguments of one command.
pub type Cmd = Vec<Vec<u8>>;

/// One command family's generator.
pub struct Family {
    /// Name used on the command line (`cargo test --test compat -- strings`).
    pub name: &'static str,
    /// Draws one command of this family.
    pub generate: fn(&mut Rng) -> Cmd,
}

/// Every family the random streams know, in the order they were added.
pub const FAMILIES: &[Family] = &[
    Family {
        name: "strings",
        generate: strings,
    },
    Family {
        name: "keys",
        generate: keys,
    },
    Family {
        name: "bitmap",
        generate: bitmap,
    },
    Family {
        name: "zsets",
        generate: zsets,
    },
    Family {
        name: "zranges",
        generate: zranges,
    },
    Family {
        name: "zsetops",
        generate: zsetops,
    },
    Family {
        name: "sets",
        generate: sets,
    },
    Family {
        name: "lists",
        generate: lists,
    },
    Family {
        name: "hashes",
        generate: hashes,
    },
    Family {
        name: "sort",
        generate: sort,
    },
    Family {
        name: "streams",
        generate: streams,
    },
];

/// The families a filter selects: all of them for no filter or `random`,
/// one by name, or none.
pub fn select(filter: Option<&str>) -> Vec<&'static Family> {
    FAMILIES
        .iter()
        .filter(|f| match filter {
            None | Some("random") => true,
            Some(name) => name == f.name,
        })
        .collect()
}

/// `n` commands drawn from `seed`, each from one of `families`.
pub fn stream(seed: u64, n: usize, families: &[&Family]) -> Vec<Cmd> {
    let mut rng = Rng::new(seed);
    (0..n)
        .filter_map(|_| {
            let family = rng.pick(families)?;
            Some((family.generate)(&mut rng))
        })
        .collect()
}

/// A small deterministic generator (SplitMix64), so a seed names the same
/// stream on every machine and with every version of the `rand` crate.
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        let span = (hi - lo + 1).max(1) as usize;
        lo + self.below(span) as i64
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    /// One element of `items`, `None` if empty.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        let i = self.below(items.len());
        items.get(i)
    }

    /// One of `words` as an argument (empty if `words` is empty).
    pub fn word(&mut self, words: &[&str]) -> Vec<u8> {
        self.pick(words)
            .map(|w| w.as_bytes().to_vec())
            .unwrap_or_default()
    }
}

// ---------------------------------------------------------------------------
// Shared argument pools

/// The whole keyspace of a stream.
pub const KEYS: &[&str] = &["k1", "k2", "k3", "k4", "k5"];

/// Values chosen to hit the integer, float and plain-string paths.
pub const VALUES: &[&str] = &[
    "",
    "0",
    "1",
    "-1",
    "7",
    "10",
    "abc",
    "hello world",
    "01",
    " 1",
    "1.5",
    "-0",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "\x00\u{ff}",
];

/// A key of the stream's keyspace.
pub fn key(r: &mut Rng) -> Vec<u8> {
    r.word(KEYS)
}

/// A value from [`VALUES`], or occasionally a short run of one letter.
pub fn value(r: &mut Rng) -> Vec<u8> {
    if r.chance(15) {
        let len = r.below(12);
        vec![b'a' + r.below(3) as u8; len]
    } else {
        r.word(VALUES)
    }
}

/// A small integer argument, sometimes not an integer at all.
pub fn int_arg(r: &mut Rng) -> Vec<u8> {
    match r.below(20) {
        0 => r.word(&[
            "abc",
            "1.5",
            "",
            "9223372036854775807",
            "-9223372036854775808",
        ]),
        _ => r.range(-5, 12).to_string().into_bytes(),
    }
}

/// Builds a command from its parts.
pub fn cmd<const N: usize>(parts: [Vec<u8>; N]) -> Cmd {
    parts.into_iter().collect()
}

/// A word as an argument.
pub fn w(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

/// 1 to `max` keys, repeats allowed.
fn some_keys(r: &mut Rng, max: usize) -> Vec<Vec<u8>> {
    (0..1 + r.below(max)).map(|_| key(r)).collect()
}

// ---------------------------------------------------------------------------
// Families

/// String commands.
pub fn strings(r: &mut Rng) -> Cmd {
    match r.below(22) {
        0 | 1 => cmd([w("GET"), key(r)]),
        2..=4 => {
            let mut c = cmd([w("SET"), key(r), value(r)]);
            if r.chance(40) {
                let options: &[&[&str]] = &[
                    &["NX"],
                    &["XX"],
                    &["GET"],
                    &["KEEPTTL"],
                    &["EX", "100000"],
                    &["PX", "100000000"],
                    &["EXAT", "4000000000"],
                    &["EX", "0"],
                    &["PX", "-5"],
                    &["NX", "XX"],
                    &["EX", "10", "KEEPTTL"],
                    &["NX", "GET"],
                    &["XX", "GET"],
                    &["BOGUS"],
                ];
                if let Some(opts) = r.pick(options) {
                    c.extend(opts.iter().map(|o| w(o)));
                }
            }
            c
        }
        5 => cmd([w("SETNX"), key(r), value(r)]),
        6 => cmd([w("GETSET"), key(r), value(r)]),
        7 => cmd([w("GETDEL"), key(r)]),
        8 => {
            let opts: &[&[&str]] = &[&[], &["PERSIST"], &["EX", "100000"], &["EX", "-1"]];
            let mut c = cmd([w("GETEX"), key(r)]);
            if let Some(o) = r.pick(opts) {
                c.extend(o.iter().map(|o| w(o)));
            }
            c
        }
        9 => cmd([w(if r.chance(50) { "INCR" } else { "DECR" }), key(r)]),
        10 => cmd([
            w(if r.chance(50) { "INCRBY" } else { "DECRBY" }),
            key(r),
            int_arg(r),
        ]),
        11 => cmd([
            w("INCRBYFLOAT"),
            key(r),
            r.word(&["1", "-0.5", "0.1", "2.5e3", "abc", "-1e3", "inf"]),
        ]),
        12 | 13 => cmd([w("APPEND"), key(r), value(r)]),
        14 => cmd([w("STRLEN"), key(r)]),
        15 => cmd([
            w("GETRANGE"),
            key(r),
            r.range(-6, 6).to_string().into_bytes(),
            r.range(-6, 6).to_string().into_bytes(),
        ]),
        16 => cmd([
            w("SETRANGE"),
            key(r),
            r.range(-1, 8).to_string().into_bytes(),
            value(r),
        ]),
        17 | 18 => {
            let mut c = vec![w("MGET")];
            c.extend(some_keys(r, 4));
            c
        }
        19 | 20 => {
            let mut c = vec![w(if r.chance(75) { "MSET" } else { "MSETNX" })];
            for _ in 0..1 + r.below(3) {
                c.push(key(r));
                c.push(value(r));
            }
            c
        }
        _ => cmd([w("SUBSTR"), key(r), w("0"), w("-1")]),
    }
}

/// Keyspace commands.
pub fn keys(r: &mut Rng) -> Cmd {
    match r.below(14) {
        0 | 1 => {
            let mut c = vec![w(if r.chance(70) { "DEL" } else { "UNLINK" })];
            c.extend(some_keys(r, 3));
            c
        }
        2 => {
            let mut c = vec![w("EXISTS")];
            c.extend(some_keys(r, 4));
            c
        }
        3 => cmd([w("TYPE"), key(r)]),
        4 => {
            let mut c = cmd([
                w("EXPIRE"),
                key(r),
                r.word(&["100000", "200000", "0", "-1", "abc"]),
            ]);
            // GT/LT compare clock-relative times: only NX/XX here.
            if r.chance(30) {
                c.push(r.word(&["NX", "XX", "BOGUS"]));
            }
            c
        }
        5 => {
            let mut c = cmd([
                w(if r.chance(50) {
                    "EXPIREAT"
                } else {
                    "PEXPIREAT"
                }),
                key(r),
                r.word(&["4000000000", "4100000000", "4000000000000", "1"]),
            ]);
            if r.chance(40) {
                c.push(r.word(&["NX", "XX", "GT", "LT", "NX XX"]));
            }
            c
        }
        6 => cmd([w("PEXPIRE"), key(r), w("100000000")]),
        7 => cmd([w("PERSIST"), key(r)]),
        8 | 9 => cmd([
            w(if r.chance(70) { "RENAME" } else { "RENAMENX" }),
            key(r),
            key(r),
        ]),
        10 => {
            let mut c = cmd([w("COPY"), key(r), key(r)]);
            if r.chance(50) {
                c.push(w("REPLACE"));
            }
            c
        }
        11 => cmd([w("DBSIZE")]),
        12 => cmd([w("TOUCH"), key(r), key(r)]),
        _ => cmd([w("EXISTS"), key(r)]),
    }
}

/// A bit offset: near a few bases (the start, a 65,536-bit chunk edge, 1 Mbit
/// out so the bitmap is stored compressed), rarely not an offset at all.
fn bit_offset(r: &mut Rng) -> Vec<u8> {
    if r.chance(3) {
        return r.word(&["-1", "4294967296", "abc", "0012"]);
    }
    let base = *r
        .pick(&[0i64, 0, 100, 65_530, 70_000, 1 << 20])
        .unwrap_or(&0);
    (base + r.range(0, 400)).to_string().into_bytes()
}

/// A BITCOUNT/BITPOS index: small, negative, or far past the end.
fn bit_index(r: &mut Rng) -> Vec<u8> {
    let i = *r
        .pick(&[
            0i64, 1, 2, -1, -2, -3, 5, 100, -100, 9_000, 140_000, -140_000,
        ])
        .unwrap_or(&0);
    i.to_string().into_bytes()
}

/// Bitmap commands (and string reads of the bitmaps they make).
pub fn bitmap(r: &mut Rng) -> Cmd {
    match r.below(24) {
        0..=6 => cmd([
            w("SETBIT"),
            key(r),
            bit_offset(r),
            r.word(&["1", "1", "0", "2"]),
        ]),
        7 | 8 => cmd([w("GETBIT"), key(r), bit_offset(r)]),
        9 | 10 => {
            let mut c = cmd([w("BITCOUNT"), key(r)]);
            if r.chance(70) {
                c.push(bit_index(r));
                c.push(bit_index(r));
                if r.chance(50) {
                    c.push(r.word(&["BIT", "BYTE", "bit", "BITS"]));
                }
            }
            c
        }
        11..=13 => {
            let mut c = cmd([w("BITPOS"), key(r), r.word(&["0", "1", "1", "0", "2"])]);
            let n = r.below(4);
            if n >= 1 {
                c.push(bit_index(r));
            }
            if n >= 2 {
                c.push(bit_index(r));
            }
            if n >= 3 {
                c.push(r.word(&["BIT", "BYTE"]));
            }
            c
        }
        14 | 15 => {
            let op = r.word(&["AND", "OR", "XOR", "NOT", "nand"]);
            let sources = if op == b"NOT" && r.chance(90) {
                1
            } else {
                1 + r.below(3)
            };
            let mut c = cmd([w("BITOP"), op, key(r)]);
            c.extend((0..sources).map(|_| key(r)));
            c
        }
        16..=19 => {
            let mut c = cmd([
                w(if r.chance(85) {
                    "BITFIELD"
                } else {
                    "BITFIELD_RO"
                }),
                key(r),
            ]);
            for _ in 0..1 + r.below(3) {
                let ty = if r.chance(50) {
                    format!("i{}", r.range(0, 65))
                } else {
                    format!("u{}", r.range(1, 64))
                }
                .into_bytes();
                let at = if r.chance(80) {
                    bit_offset(r)
                } else {
                    format!("#{}", r.range(-1, 100)).into_bytes()
                };
                let value = r.word(&[
                    "0",
                    "1",
                    "-1",
                    "127",
                    "128",
                    "255",
                    "256",
                    "-129",
                    "9223372036854775807",
                    "-9223372036854775808",
                    "100000",
                ]);
                match r.below(4) {
                    0 => c.extend([w("GET"), ty, at]),
                    1 => c.extend([w("SET"), ty, at, value]),
                    2 => c.extend([w("INCRBY"), ty, at, value]),
                    _ => c.extend([w("OVERFLOW"), r.word(&["WRAP", "SAT", "FAIL", "BAD"])]),
                }
            }
            c
        }
        20 => cmd([w(if r.chance(50) { "GET" } else { "STRLEN" }), key(r)]),
        21 => cmd([w("GETRANGE"), key(r), bit_index(r), bit_index(r)]),
        22 => cmd([w("APPEND"), key(r), value(r)]),
        _ => cmd([w("SETRANGE"), key(r), bit_index(r), value(r)]),
    }
}

// ---------------------------------------------------------------------------
// Sorted sets
//
// Keys with roles, so every reply stays deterministic on both servers:
// - `za`, `zb`: short members only and never a STORE destination, so they
//   stay listpacks: ZSCAN (one step, listpack order) and lex ranges over
//   mixed scores (a linear walk) are deterministic on them.
// - `zlex`: every score is 0 (lex ranges are well defined at any size); long
//   members make it a skiplist now and then.
// - `zbig`: up to a few hundred members and long ones: the skiplist encoding.
// - `zdst` (and `zbig`): where the STORE commands write (any encoding).
// - `zset1`: a plain set (SADD), an input of the set operations.
// - now and then a key of the shared pool, so types collide (only short
//   members reach them, so they stay listpacks too).
// ZRANDMEMBER is only asked for the whole set (sent highest first in both
// encodings); ZSCAN only on `za` / `zb`.

/// Short members (a listpack never outgrows them).
const ZMEMBERS: &[&str] = &[
    "a", "b", "c", "d", "e", "f", "", "\x00", "1", "2", "10", "-1", "A", "ab", "zz",
];

/// Scores: integers, fractions, infinities, signed zero, and a few that are
/// not numbers.
const ZSCORES: &[&str] = &[
    "0", "1", "2", "3", "-1", "1.5", "-2.5", "10", "100", "1e3", "inf", "-inf", "+inf", "-0",
    "0.5", "abc", "nan", " 1",
];

/// Score range bounds.
const ZSCORE_BOUNDS: &[&str] = &[
    "-inf", "+inf", "0", "1", "(1", "2", "(2", "1.5", "10", "(10", "-1", "(-inf", "abc", "(",
    "1e3", "3",
];

/// Lex range bounds.
const ZLEX_BOUNDS: &[&str] = &[
    "-", "+", "[a", "(a", "[c", "(c", "[d", "[", "(", "x", "[m1", "(m5", "[zz", "(\x00",
];

/// A sorted-set key for commands safe on any encoding.
fn zkey(r: &mut Rng) -> Vec<u8> {
    match r.below(20) {
        0..=5 => w("za"),
        6..=9 => w("zb"),
        10..=12 => w("zbig"),
        13 | 14 => w("zlex"),
        15 | 16 => w("zdst"),
        17 => w("zset1"),
        _ => key(r),
    }
}

/// A key that stays a listpack (or is missing / of another type).
fn zsmall_key(r: &mut Rng) -> Vec<u8> {
    match r.below(10) {
        0..=4 => w("za"),
        5..=8 => w("zb"),
        _ => key(r),
    }
}

/// A key lex ranges are deterministic on.
fn zlex_key(r: &mut Rng) -> Vec<u8> {
    if r.chance(50) {
        w("zlex")
    } else {
        zsmall_key(r)
    }
}

/// A STORE destination: never a key that must stay a listpack (the shared
/// pool included, since `zsmall_key` reads it).
fn zdst_key(r: &mut Rng) -> Vec<u8> {
    if r.chance(80) {
        w("zdst")
    } else {
        w("zbig")
    }
}

fn zmember(r: &mut Rng) -> Vec<u8> {
    r.word(ZMEMBERS)
}

/// A member of `zbig` (or a long one, which no listpack holds).
fn zbig_member(r: &mut Rng) -> Vec<u8> {
    if r.chance(10) {
        format!("{}{}", "L".repeat(66), r.below(3)).into_bytes()
    } else {
        format!("m{}", r.below(300)).into_bytes()
    }
}

fn zscore(r: &mut Rng) -> Vec<u8> {
    if r.chance(85) {
        r.word(&ZSCORES[..15])
    } else {
        r.word(ZSCORES)
    }
}

fn zrank_arg(r: &mut Rng) -> Vec<u8> {
    match r.below(10) {
        0 => r.word(&["abc", "9223372036854775807", "-9223372036854775808", "1.5"]),
        1 | 2 => r.range(-300, 300).to_string().into_bytes(),
        _ => r.range(-6, 8).to_string().into_bytes(),
    }
}

/// `LIMIT offset count` (sometimes malformed).
fn push_limit(r: &mut Rng, c: &mut Cmd) {
    c.push(w("LIMIT"));
    c.push(r.range(-1, 6).to_string().into_bytes());
    c.push(r.word(&["-1", "0", "1", "2", "5", "100", "-3", "x"]));
}

/// ZADD to one of the keys, with members and scores that fit its role.
fn zadd_cmd(r: &mut Rng) -> Cmd {
    let (key, big, lex) = match r.below(10) {
        0..=4 => (zsmall_key(r), false, false),
        5 | 6 => (w("zbig"), true, false),
        7 | 8 => (w("zlex"), false, true),
        _ => (w("zdst"), false, false),
    };
    let mut c = cmd([w("ZADD"), key]);
    if r.chance(30) {
        let opts: &[&[&str]] = &[
            &["NX"],
            &["XX"],
            &["CH"],
            &["GT"],
            &["LT"],
            &["GT", "CH"],
            &["XX", "LT"],
            &["INCR"],
            &["NX", "INCR"],
            &["XX", "INCR"],
            &["GT", "INCR"],
            &["NX", "XX"],
            &["GT", "LT"],
            &["NX", "GT"],
        ];
        if let Some(o) = r.pick(opts) {
            c.extend(o.iter().map(|o| w(o)));
        }
    }
    let pairs = if big { 1 + r.below(40) } else { 1 + r.below(4) };
    for _ in 0..pairs {
        c.push(if lex { w("0") } else { zscore(r) });
        c.push(if big {
            zbig_member(r)
        } else if lex {
            if r.chance(10) {
                zbig_member(r)
            } else {
                zmember(r)
            }
        } else {
            zmember(r)
        });
    }
    if r.chance(3) {
        c.push(w("1")); // an odd count of score/member arguments
    }
    c
}

/// Sorted-set commands that change one key: ZADD, ZINCRBY, ZREM, the
/// ZREMRANGEBY* family, the pops and the blocking pops.
pub fn zsets(r: &mut Rng) -> Cmd {
    const WRITES: &[usize] = &[0, 1, 2, 3, 4, 5, 6, 7, 8, 23, 24, 25, 26, 27, 30];
    let arm = r.pick(WRITES).copied().unwrap_or(0);
    one_key_command(r, arm)
}

/// Sorted-set commands that read one key: the ZRANGE family, ZCOUNT,
/// ZLEXCOUNT, ZRANK, ZSCORE, ZMSCORE, ZCARD, ZRANDMEMBER, ZSCAN; with some
/// ZADDs so a stream of this family alone has data to read.
pub fn zranges(r: &mut Rng) -> Cmd {
    const READS: &[usize] = &[
        0, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 28, 29, 31,
    ];
    let arm = r.pick(READS).copied().unwrap_or(0);
    one_key_command(r, arm)
}

/// One command on one key; `arm` chooses which (see [`zsets`], [`zranges`]).
fn one_key_command(r: &mut Rng, arm: usize) -> Cmd {
    match arm {
        0..=5 => zadd_cmd(r),
        6 | 7 => {
            // ZINCRBY never touches zlex (its scores stay 0).
            let key = if r.chance(70) {
                zsmall_key(r)
            } else {
                w("zbig")
            };
            let m = if r.chance(50) {
                zmember(r)
            } else {
                zbig_member(r)
            };
            let m = if key == b"zbig" { m } else { zmember(r) };
            cmd([w("ZINCRBY"), key, zscore(r), m])
        }
        8 => {
            let mut c = cmd([w("ZREM"), zkey(r)]);
            for _ in 0..1 + r.below(3) {
                c.push(if r.chance(70) {
                    zmember(r)
                } else {
                    zbig_member(r)
                });
            }
            c
        }
        9 => cmd([w("ZSCORE"), zkey(r), zmember(r)]),
        10 => {
            let mut c = cmd([w("ZMSCORE"), zkey(r)]);
            for _ in 0..1 + r.below(3) {
                c.push(zmember(r));
            }
            c
        }
        11 => cmd([w("ZCARD"), zkey(r)]),
        12 => cmd([
            w("ZCOUNT"),
            zkey(r),
            r.word(ZSCORE_BOUNDS),
            r.word(ZSCORE_BOUNDS),
        ]),
        13 => cmd([
            w("ZLEXCOUNT"),
            zlex_key(r),
            r.word(ZLEX_BOUNDS),
            r.word(ZLEX_BOUNDS),
        ]),
        14 => {
            let name = if r.chance(50) { "ZRANK" } else { "ZREVRANK" };
            let m = if r.chance(70) {
                zmember(r)
            } else {
                zbig_member(r)
            };
            cmd([w(name), zkey(r), m])
        }
        15..=17 => {
            // ZRANGE by rank.
            let mut c = cmd([w("ZRANGE"), zkey(r), zrank_arg(r), zrank_arg(r)]);
            if r.chance(40) {
                c.push(w("REV"));
            }
            if r.chance(50) {
                c.push(w("WITHSCORES"));
            }
            if r.chance(5) {
                push_limit(r, &mut c);
            }
            c
        }
        18 | 19 => {
            let rev = r.chance(50);
            let name = if rev {
                "ZREVRANGEBYSCORE"
            } else {
                "ZRANGEBYSCORE"
            };
            let mut c = if r.chance(50) {
                cmd([w(name), zkey(r)])
            } else {
                cmd([w("ZRANGE"), zkey(r)])
            };
            let plain = c[0] == b"ZRANGE";
            c.push(r.word(ZSCORE_BOUNDS));
            c.push(r.word(ZSCORE_BOUNDS));
            if plain {
                c.push(w("BYSCORE"));
                if rev {
                    c.push(w("REV"));
                }
            }
            if r.chance(50) {
                c.push(w("WITHSCORES"));
            }
            if r.chance(40) {
                push_limit(r, &mut c);
            }
            c
        }
        20 | 21 => {
            let rev = r.chance(50);
            let name = if rev { "ZREVRANGEBYLEX" } else { "ZRANGEBYLEX" };
            let plain = r.chance(40);
            let mut c = cmd([w(if plain { "ZRANGE" } else { name }), zlex_key(r)]);
            c.push(r.word(ZLEX_BOUNDS));
            c.push(r.word(ZLEX_BOUNDS));
            if plain {
                c.push(w("BYLEX"));
                if rev {
                    c.push(w("REV"));
                }
            }
            if r.chance(40) {
                push_limit(r, &mut c);
            }
            if r.chance(5) {
                c.push(w("WITHSCORES"));
            }
            c
        }
        22 => cmd([
            w("ZREVRANGE"),
            zkey(r),
            zrank_arg(r),
            zrank_arg(r),
            w("WITHSCORES"),
        ]),
        23 => cmd([w("ZREMRANGEBYRANK"), zkey(r), zrank_arg(r), zrank_arg(r)]),
        24 => cmd([
            w("ZREMRANGEBYSCORE"),
            zkey(r),
            r.word(ZSCORE_BOUNDS),
            r.word(ZSCORE_BOUNDS),
        ]),
        25 => cmd([
            w("ZREMRANGEBYLEX"),
            zlex_key(r),
            r.word(ZLEX_BOUNDS),
            r.word(ZLEX_BOUNDS),
        ]),
        26 | 27 => {
            let name = if r.chance(50) { "ZPOPMIN" } else { "ZPOPMAX" };
            let mut c = cmd([w(name), zkey(r)]);
            if r.chance(60) {
                c.push(r.word(&["0", "1", "2", "5", "-1", "x", "100"]));
            }
            c
        }
        28 => {
            // Only the whole set: the one deterministic ZRANDMEMBER.
            let mut c = cmd([w("ZRANDMEMBER"), zkey(r), r.word(&["1000", "0", "x"])]);
            if r.chance(50) {
                c.push(w("WITHSCORES"));
            }
            c
        }
        29 => {
            let mut c = cmd([w("ZSCAN"), zsmall_key(r), r.word(&["0", "0", "x", "-1"])]);
            if r.chance(40) {
                c.push(w("MATCH"));
                c.push(r.word(&["*", "a*", "?", "[a-c]", "*\x00*"]));
            }
            if r.chance(30) {
                c.push(w("COUNT"));
                c.push(r.word(&["1", "10", "0", "x"]));
            }
            c
        }
        30 => {
            // Blocking pops on data, or a 10 ms timeout on nothing.
            let name = if r.chance(50) { "BZPOPMIN" } else { "BZPOPMAX" };
            let mut c = cmd([w(name), zkey(r)]);
            if r.chance(50) {
                c.push(zkey(r));
            }
            c.push(r.word(&["0.01", "0.01", "-1", "x"]));
            c
        }
        _ => cmd([w("ZRANGE"), zkey(r), w("0"), w("-1"), w("WITHSCORES")]),
    }
}

/// `numkeys key...` of 1 to 3 inputs (sometimes a wrong numkeys).
fn push_zinputs(r: &mut Rng, c: &mut Cmd) -> usize {
    let n = 1 + r.below(3);
    c.push(match r.below(25) {
        0 => w("0"),
        1 => w("x"),
        2 => (n + 1).to_string().into_bytes(),
        _ => n.to_string().into_bytes(),
    });
    for _ in 0..n {
        c.push(if r.chance(15) { w("zset1") } else { zkey(r) });
    }
    n
}

/// Sorted-set commands over several keys: the set operations, their STORE
/// forms, ZINTERCARD, ZRANGESTORE, ZMPOP, BZMPOP; and SADD for plain-set
/// inputs.
pub fn zsetops(r: &mut Rng) -> Cmd {
    match r.below(12) {
        0 => {
            let mut c = cmd([w("SADD"), w("zset1")]);
            for _ in 0..1 + r.below(3) {
                c.push(r.word(&["a", "b", "c", "1", "2", "m1", "m7", "zz", "q"]));
            }
            c
        }
        1 => zadd_cmd(r),
        2..=6 => {
            let (name, store) = match r.below(6) {
                0 => ("ZUNION", false),
                1 => ("ZINTER", false),
                2 => ("ZDIFF", false),
                3 => ("ZUNIONSTORE", true),
                4 => ("ZINTERSTORE", true),
                _ => ("ZDIFFSTORE", true),
            };
            let mut c = vec![w(name)];
            if store {
                c.push(zdst_key(r));
            }
            let n = push_zinputs(r, &mut c);
            if r.chance(40) {
                c.push(w("WEIGHTS"));
                let count = if r.chance(90) { n } else { n + 1 };
                for _ in 0..count {
                    c.push(r.word(&["1", "2", "0.5", "-1", "0", "inf", "x"]));
                }
            }
            if r.chance(40) {
                c.push(w("AGGREGATE"));
                c.push(r.word(&["SUM", "MIN", "MAX", "max", "avg"]));
            }
            if !store && r.chance(60) {
                c.push(w("WITHSCORES"));
            }
            c
        }
        7 => {
            let mut c = vec![w("ZINTERCARD")];
            push_zinputs(r, &mut c);
            if r.chance(40) {
                c.push(w("LIMIT"));
                c.push(r.word(&["0", "1", "2", "-1", "x"]));
            }
            c
        }
        8 => {
            let mut c = cmd([w("ZRANGESTORE"), zdst_key(r), zkey(r)]);
            match r.below(3) {
                0 => {
                    c.push(zrank_arg(r));
                    c.push(zrank_arg(r));
                }
                1 => {
                    c.push(r.word(ZSCORE_BOUNDS));
                    c.push(r.word(ZSCORE_BOUNDS));
                    c.push(w("BYSCORE"));
                }
                _ => {
                    // Lex only from keys where it is deterministic.
                    c[2] = zlex_key(r);
                    c.push(r.word(ZLEX_BOUNDS));
                    c.push(r.word(ZLEX_BOUNDS));
                    c.push(w("BYLEX"));
                }
            }
            if r.chance(30) {
                c.push(w("REV"));
            }
            if r.chance(30) {
                push_limit(r, &mut c);
            }
            c
        }
        9 | 10 => {
            let mut c = vec![w("ZMPOP")];
            push_zinputs(r, &mut c);
            c.push(r.word(&["MIN", "MAX", "min", "max", "mid"]));
            if r.chance(50) {
                c.push(w("COUNT"));
                c.push(r.word(&["1", "2", "10", "0", "-1", "x"]));
            }
            c
        }
        _ => {
            let mut c = cmd([w("BZMPOP"), r.word(&["0.01", "0.01", "-1", "x"])]);
            push_zinputs(r, &mut c);
            c.push(r.word(&["MIN", "MAX", "mid"]));
            if r.chance(50) {
                c.push(w("COUNT"));
                c.push(r.word(&["1", "3", "0"]));
            }
            c
        }
    }
}

/// Set members: integers (intset) and words or non-canonical numbers (which
/// turn a set into a hashtable).
const SET_MEMBERS: &[&str] = &["1", "2", "3", "10", "-5", "a", "b", "c", "007", "x y"];

fn set_member(r: &mut Rng) -> Vec<u8> {
    r.word(SET_MEMBERS)
}

/// Set commands whose replies do not depend on hash order: membership,
/// cardinalities, the STORE forms (which reply a count), SINTERCARD.
pub fn sets(r: &mut Rng) -> Cmd {
    match r.below(16) {
        0..=3 => {
            let mut c = cmd([w("SADD"), key(r)]);
            for _ in 0..1 + r.below(4) {
                c.push(set_member(r));
            }
            c
        }
        4 | 5 => {
            let mut c = cmd([w("SREM"), key(r)]);
            for _ in 0..1 + r.below(3) {
                c.push(set_member(r));
            }
            c
        }
        6 => cmd([w("SCARD"), key(r)]),
        7 => cmd([w("SISMEMBER"), key(r), set_member(r)]),
        8 => {
            let mut c = cmd([w("SMISMEMBER"), key(r)]);
            for _ in 0..1 + r.below(3) {
                c.push(set_member(r));
            }
            c
        }
        9 => cmd([w("SMOVE"), key(r), key(r), set_member(r)]),
        10..=12 => {
            let op = r.word(&["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]);
            let mut c = cmd([op, key(r)]);
            c.extend(some_keys(r, 3));
            c
        }
        13 => {
            let keys = some_keys(r, 3);
            let mut c = cmd([w("SINTERCARD"), keys.len().to_string().into_bytes()]);
            c.extend(keys);
            if r.chance(40) {
                c.push(w("LIMIT"));
                c.push(r.range(0, 3).to_string().into_bytes());
            }
            c
        }
        14 => cmd([w("TYPE"), key(r)]),
        _ => cmd([w("OBJECT"), w("ENCODING"), key(r)]),
    }
}

/// List elements: integers (stored as numbers), their non-canonical
/// spellings, words, and the empty string.
const LIST_ELEMENTS: &[&str] = &["1", "2", "-3", "01", "a", "b", "c", "", "x y", "70000"];

fn list_element(r: &mut Rng) -> Vec<u8> {
    r.word(LIST_ELEMENTS)
}

/// LEFT or RIGHT, rarely a bad word.
fn list_end(r: &mut Rng) -> Vec<u8> {
    r.word(&["LEFT", "RIGHT", "left", "right", "LEFT", "RIGHT", "up"])
}

/// List commands. Blocking ones wait 10 ms at most on an empty key; the
/// node size limit changes now and then, so lists of a few elements span
/// several nodes (invisible in replies, but every command then walks them).
pub fn lists(r: &mut Rng) -> Cmd {
    match r.below(25) {
        0..=4 => {
            let name = r.word(&["LPUSH", "RPUSH", "LPUSH", "RPUSH", "LPUSHX", "RPUSHX"]);
            let mut c = cmd([name, key(r)]);
            for _ in 0..1 + r.below(5) {
                c.push(list_element(r));
            }
            c
        }
        5 | 6 => {
            let mut c = cmd([r.word(&["LPOP", "RPOP"]), key(r)]);
            if r.chance(50) {
                c.push(int_arg(r));
            }
            c
        }
        7 => cmd([w("LLEN"), key(r)]),
        8 | 9 => cmd([w("LRANGE"), key(r), int_arg(r), int_arg(r)]),
        10 => cmd([w("LINDEX"), key(r), int_arg(r)]),
        11 => cmd([w("LSET"), key(r), int_arg(r), list_element(r)]),
        12 => {
            let place = r.word(&["BEFORE", "AFTER", "after", "middle"]);
            cmd([
                w("LINSERT"),
                key(r),
                place,
                list_element(r),
                list_element(r),
            ])
        }
        13 => cmd([w("LREM"), key(r), int_arg(r), list_element(r)]),
        14 => cmd([w("LTRIM"), key(r), int_arg(r), int_arg(r)]),
        15 | 16 => {
            let mut c = cmd([w("LPOS"), key(r), list_element(r)]);
            for _ in 0..r.below(3) {
                let opt = r.word(&["RANK", "COUNT", "MAXLEN"]);
                c.push(opt);
                c.push(int_arg(r));
            }
            c
        }
        17 => cmd([w("LMOVE"), key(r), key(r), list_end(r), list_end(r)]),
        18 => cmd([w("RPOPLPUSH"), key(r), key(r)]),
        19 => {
            let keys = some_keys(r, 3);
            let mut c = cmd([w("LMPOP"), keys.len().to_string().into_bytes()]);
            c.extend(keys);
            c.push(list_end(r));
            if r.chance(50) {
                c.push(w("COUNT"));
                c.push(int_arg(r));
            }
            c
        }
        20 => {
            let mut c = cmd([r.word(&["BLPOP", "BRPOP"])]);
            c.extend(some_keys(r, 3));
            c.push(w("0.01"));
            c
        }
        21 => {
            let (src, dst) = (key(r), key(r));
            if r.chance(50) {
                cmd([w("BRPOPLPUSH"), src, dst, w("0.01")])
            } else {
                cmd([w("BLMOVE"), src, dst, list_end(r), list_end(r), w("0.01")])
            }
        }
        22 => {
            let keys = some_keys(r, 3);
            let mut c = cmd([w("BLMPOP"), w("0.01"), keys.len().to_string().into_bytes()]);
            c.extend(keys);
            c.push(list_end(r));
            if r.chance(50) {
                c.push(w("COUNT"));
                c.push(int_arg(r));
            }
            c
        }
        23 => {
            let size = r.word(&["1", "2", "3", "-1", "-2"]);
            cmd([w("CONFIG"), w("SET"), w("list-max-listpack-size"), size])
        }
        _ => cmd([w("TYPE"), key(r)]),
    }
}

/// Hash fields: a few names, numbers and the empty field.
const HASH_FIELDS: &[&str] = &["f", "g", "name", "1", "-1", "", "x y", "n"];

fn hash_field(r: &mut Rng) -> Vec<u8> {
    r.word(HASH_FIELDS)
}

/// HINCRBYFLOAT increments: small numbers (results stay short), and some
/// that are not numbers or not finite.
fn float_incr(r: &mut Rng) -> Vec<u8> {
    r.word(&[
        "1.5", "-0.25", "0.1", "3e2", "-7", "0", "1e-5", "abc", "inf", "", "-1.5e1",
    ])
}

/// Hash commands. Values stay shorter than `hash-max-listpack-value` and
/// hashes hold at most [`HASH_FIELDS`] fields, so every hash is a listpack
/// and the whole-hash replies (HGETALL, HKEYS, HVALS, HSCAN, HRANDFIELD
/// with a count past the size) come in insertion order on both servers.
pub fn hashes(r: &mut Rng) -> Cmd {
    match r.below(20) {
        0..=3 => {
            let mut c = cmd([w(if r.chance(80) { "HSET" } else { "HMSET" }), key(r)]);
            for _ in 0..1 + r.below(3) {
                c.push(hash_field(r));
                c.push(value(r));
            }
            // Now and then an odd number of arguments.
            if r.chance(5) {
                c.push(hash_field(r));
            }
            c
        }
        4 => cmd([w("HSETNX"), key(r), hash_field(r), value(r)]),
        5 | 6 => {
            let mut c = cmd([w("HDEL"), key(r)]);
            for _ in 0..1 + r.below(3) {
                c.push(hash_field(r));
            }
            c
        }
        7 => cmd([w("HGET"), key(r), hash_field(r)]),
        8 => {
            let mut c = cmd([w("HMGET"), key(r)]);
            for _ in 0..1 + r.below(3) {
                c.push(hash_field(r));
            }
            c
        }
        9 => cmd([
            w(r.pick(&["HLEN", "HKEYS", "HVALS", "HGETALL"])
                .copied()
                .unwrap_or("HLEN")),
            key(r),
        ]),
        10 => cmd([
            w(if r.chance(50) { "HSTRLEN" } else { "HEXISTS" }),
            key(r),
            hash_field(r),
        ]),
        11 | 12 => cmd([w("HINCRBY"), key(r), hash_field(r), int_arg(r)]),
        13 | 14 => cmd([w("HINCRBYFLOAT"), key(r), hash_field(r), float_incr(r)]),
        15 => {
            let mut c = cmd([w("HRANDFIELD"), key(r), r.word(&["0", "8", "100", "abc"])]);
            if r.chance(50) {
                c.push(w(if r.chance(90) { "WITHVALUES" } else { "BOGUS" }));
            }
            c
        }
        16 => {
            let mut c = cmd([w("HSCAN"), key(r), r.word(&["0", "5", "abc"])]);
            if r.chance(40) {
                c.push(w("MATCH"));
                c.push(r.word(&["*", "f*", "[gn]", "?"]));
            }
            if r.chance(20) {
                c.push(w("COUNT"));
                c.push(r.word(&["1", "0", "x"]));
            }
            c
        }
        17 => cmd([w("TYPE"), key(r)]),
        _ => cmd([w("OBJECT"), w("ENCODING"), key(r)]),
    }
}

// ---------------------------------------------------------------------------
// SORT and SORT_RO
//
// Keys only this family writes (besides STORE onto the shared pool):
// - `sl`: a short list of numbers and words; `slbig`: a long list of
//   numbers, split into several nodes when `list-max-listpack-size` is small.
// - `si`: integers only, fewer than `set-max-intset-entries`, so it stays
//   an intset and its own order (ascending) is the same on both servers.
// - `sbig`: integers that outgrow an intset (and now and then a word), so a
//   hashtable whose order is a hash order.
// - `sz`: a small sorted set; `szbig`: one past the listpack limits (many
//   members, or a member longer than 64 bytes). SORT turns a listpack
//   sorted set into a skiplist for good, which OBJECT ENCODING shows.
// - `snul`: a list whose elements hold NUL bytes (strtod and strcoll stop
//   there).
// - `sdst`: the usual STORE destination (STORE also writes the sources and
//   the shared pool).
// - weights: `wn_<e>` strings and field `n` of hashes `wh_<e>` hold numbers
//   (sometimes not numbers); `wa_<e>` strings and field `a` of `wh_<e>` hold
//   a one-character tag then the element.
//
// No reply may depend on how ties come out (Redis sorts with qsort, or its
// own unstable pqsort with BY and LIMIT) or on a hash order:
// - a numeric sort breaks ties bytewise by the element, so any weights go
//   (a missing one weighs 0);
// - ALPHA without BY compares the elements, with strcoll (which stops at a
//   NUL) unless storing: the other keys of this family hold no NUL, but
//   `snul` does and the shared pool's sorted sets hold "" and "\0", so
//   those are only sorted ALPHA with STORE (and only STORE onto the shared
//   pool, as do sorts that GET from it);
// - ALPHA with BY ties the elements whose weights are equal or missing: such
//   a sort GETs only its BY pattern (and patterns without `*`), which is
//   the same for all tied elements, and never `#`;
// - BY nosort keeps the order of lists, sorted sets and the intset `si`;
//   another set only with STORE (Redis then sorts it ALPHA).
// Weights never overflow a double: Redis does not clear errno before its
// strtod, so after one ERANGE a later numeric sort may fail as well.

/// Numbers in several spellings (strtod reads them all).
const SORT_NUMBERS: &[&str] = &[
    "1",
    "2",
    "3",
    "10",
    "-5",
    "0",
    "-0",
    "01",
    "1.5",
    "+4",
    " 7",
    "1e3",
    "inf",
    "-inf",
    "0x1A",
    "2.5",
    "100",
    "007",
    "9223372036854775807",
    "-9223372036854775808",
];

/// Elements a numeric sort refuses (except "", which strtod reads as 0).
const SORT_WORDS: &[&str] = &["a", "b", "abc", "B", "x y", "", "\u{e9}", "1a", "nan", "7 "];

/// Numeric weights, and a few that are not numbers.
const SORT_WEIGHTS: &[&str] = &[
    "0", "1", "2", "3", "5", "-3", "1.5", "", " 2", "inf", "-inf", "1e2", "0x10", "-0", "x", "2x",
    "nan",
];

/// A key of this family's sources (or of the shared pool, or missing);
/// true when it is one of this family's keys without NUL bytes (`snul`,
/// a list of elements with NUL bytes, is treated like the shared pool).
fn sort_source(r: &mut Rng) -> (Vec<u8>, bool) {
    match r.below(20) {
        0..=3 => (w("sl"), true),
        4 | 5 => (w("slbig"), true),
        6..=8 => (w("si"), true),
        9 | 10 => (w("sbig"), true),
        11..=13 => (w("sz"), true),
        14 | 15 => (w("szbig"), true),
        16 => (w("sdst"), true),
        17 => (r.word(&["nosuch", "wn_1", "wh_1", "wa_1"]), true),
        18 => (w("snul"), false),
        _ => (key(r), false),
    }
}

/// An element of `sl`, `sz` or a weight's name.
fn sort_elem(r: &mut Rng) -> Vec<u8> {
    if r.chance(85) {
        r.word(SORT_NUMBERS)
    } else {
        r.word(SORT_WORDS)
    }
}

/// An element a weight is written for: the pools, or a small integer (the
/// members of `si`, `sbig`, `szbig`, `slbig`).
fn sort_weighted(r: &mut Rng) -> Vec<u8> {
    if r.chance(50) {
        sort_elem(r)
    } else {
        r.range(-20, 40).to_string().into_bytes()
    }
}

/// `prefix` then `elem`.
fn prefixed(prefix: &str, elem: &[u8]) -> Vec<u8> {
    let mut k = w(prefix);
    k.extend_from_slice(elem);
    k
}

/// An ALPHA weight of `elem`: a tag character then the element.
fn alpha_weight(r: &mut Rng, elem: &[u8]) -> Vec<u8> {
    let tag = ["a", "b", "m", "z", "A", "0", "-", "~"];
    prefixed(r.pick(&tag).copied().unwrap_or("a"), elem)
}

/// A BY pattern that names weights (ALPHA or not).
const SORT_BY: &[&str] = &[
    "wn_*", "wn_*", "wh_*->n", "wh_*->n", "wa_*", "wh_*->a", "nosuch_*", "wh_*->zz", "wn_*x",
];

/// GET patterns for a sort whose order is total.
const SORT_GET: &[&str] = &[
    "#", "#", "wn_*", "wh_*->n", "wh_*->a", "wa_*", "nosuch_*", "constant", "wh_*->", "k*", "#\0x",
    "wn_*\0",
];

/// Elements of `snul`: C string functions (strtod, strcoll) stop at the NUL.
const SORT_NUL: &[&str] = &["7\0junk", "7\0", "\0", "a\0b", "a\0c", "1\0", "-2\0\0"];

/// SORT or SORT_RO with options in a random order (see above for what each
/// combination is restricted to).
fn sort_cmd(r: &mut Rng) -> Cmd {
    let ro = r.chance(25);
    let (src, own) = sort_source(r);
    let store = if ro { r.chance(5) } else { r.chance(30) };
    let mut alpha = r.chance(35);
    // Weights (Some(pattern)), nosort (Some(word without *)) or none.
    let by: Option<Vec<u8>> = match r.below(10) {
        0..=3 => None,
        4 | 5 => {
            let set = src == w("sbig") || (!own && src != w("snul"));
            if set && !store {
                None
            } else {
                Some(r.word(&["nosort", "NOSORT", "constant", "wn_"]))
            }
        }
        6 if !alpha => Some(w("k*")),
        _ => Some(r.word(SORT_BY)),
    };
    let weighted = by.as_ref().is_some_and(|p| p.contains(&b'*'));
    if alpha && !weighted && !own && !store {
        alpha = false;
    }
    let mut gets: Vec<Vec<u8>> = Vec::new();
    if alpha && weighted {
        let by = by.clone().unwrap_or_default();
        for _ in 0..1 + r.below(2) {
            gets.push(if r.chance(80) {
                by.clone()
            } else {
                w("constant")
            });
        }
    } else {
        for _ in 0..r.below(4) {
            gets.push(r.word(SORT_GET));
        }
    }
    // Where STORE may write: never one of this family's keys when the
    // values could come from the shared pool (which holds NUL bytes).
    let shared = !own || gets.iter().any(|g| g == b"k*");
    let dest = if shared {
        key(r)
    } else {
        match r.below(20) {
            0..=13 => w("sdst"),
            14 => w("sl"),
            15 if r.chance(20) => w(if r.chance(50) { "si" } else { "sz" }),
            _ => key(r),
        }
    };
    let mut groups: Vec<Cmd> = Vec::new();
    // Now and then a second BY with weights, which a nosort one overrides
    // wherever it stands.
    if by.as_ref().is_some_and(|p| !p.contains(&b'*')) && r.chance(20) {
        groups.push(vec![w("BY"), r.word(SORT_BY)]);
    }
    if let Some(p) = by {
        groups.push(vec![w(if r.chance(80) { "BY" } else { "by" }), p]);
    }
    for g in gets {
        groups.push(vec![w("GET"), g]);
    }
    if r.chance(40) {
        let offset = if r.chance(90) {
            r.range(-1, 6)
        } else {
            r.range(20, 600)
        };
        let count = if r.chance(3) {
            w("x")
        } else {
            r.word(&["-1", "0", "1", "2", "3", "5", "100", "-3"])
        };
        groups.push(vec![w("LIMIT"), offset.to_string().into_bytes(), count]);
    }
    if r.chance(40) {
        groups.push(vec![w("DESC")]);
    } else if r.chance(15) {
        groups.push(vec![w("ASC")]);
    }
    if alpha {
        groups.push(vec![w(if r.chance(80) { "ALPHA" } else { "alpha" })]);
    }
    if store {
        groups.push(vec![w("STORE"), dest]);
    }
    for i in (1..groups.len()).rev() {
        let j = r.below(i + 1);
        groups.swap(i, j);
    }
    // Now and then a bad last word: an option without its argument (in the
    // middle, BY would take the next word as a nosort pattern).
    if r.chance(3) {
        groups.push(vec![r.word(&["BOGUS", "LIMIT", "GET", "BY", "STORE"])]);
    }
    let mut c = cmd([w(if ro { "SORT_RO" } else { "SORT" }), src]);
    c.extend(groups.into_iter().flatten());
    c
}

/// Writes one or a few weights.
fn sort_weight_cmd(r: &mut Rng) -> Cmd {
    match r.below(10) {
        0..=2 => {
            let mut c = vec![w("MSET")];
            for _ in 0..1 + r.below(4) {
                let e = sort_weighted(r);
                c.push(prefixed("wn_", &e));
                c.push(r.word(SORT_WEIGHTS));
            }
            c
        }
        3 | 4 => {
            let mut c = vec![w("MSET")];
            for _ in 0..1 + r.below(4) {
                let e = sort_weighted(r);
                c.push(prefixed("wa_", &e));
                c.push(alpha_weight(r, &e));
            }
            c
        }
        5..=7 => {
            let e = sort_weighted(r);
            let mut c = cmd([w("HSET"), prefixed("wh_", &e)]);
            if r.chance(70) {
                c.push(w("n"));
                c.push(r.word(SORT_WEIGHTS));
            }
            if c.len() == 2 || r.chance(60) {
                c.push(w("a"));
                c.push(alpha_weight(r, &e));
            }
            c
        }
        8 => {
            let e = sort_weighted(r);
            let k = prefixed(r.pick(&["wn_", "wa_", "wh_"]).copied().unwrap_or("wn_"), &e);
            match r.below(4) {
                0 => cmd([w("HDEL"), k, r.word(&["n", "a"])]),
                1 => cmd([w("RPUSH"), k, w("x")]),
                2 => cmd([w("SET"), k, w("5")]),
                _ => cmd([w("DEL"), k]),
            }
        }
        _ => {
            let mut c = vec![w("DEL")];
            for _ in 0..1 + r.below(3) {
                let e = sort_weighted(r);
                c.push(prefixed(
                    r.pick(&["wn_", "wa_", "wh_"]).copied().unwrap_or("wn_"),
                    &e,
                ));
            }
            c
        }
    }
}

/// Writes to the sources.
fn sort_source_cmd(r: &mut Rng) -> Cmd {
    match r.below(17) {
        0..=2 => {
            let mut c = cmd([r.word(&["RPUSH", "LPUSH"]), w("sl")]);
            for _ in 0..1 + r.below(5) {
                c.push(sort_elem(r));
            }
            c
        }
        3 => {
            let mut c = cmd([w("RPUSH"), w("slbig")]);
            for _ in 0..1 + r.below(50) {
                c.push(r.range(-50, 1000).to_string().into_bytes());
            }
            c
        }
        4 => cmd([
            w("LTRIM"),
            w("slbig"),
            w("0"),
            r.word(&["10", "100", "200"]),
        ]),
        5 => cmd([w("LPOP"), w("sl"), r.word(&["1", "2", "3"])]),
        6 | 7 => {
            let mut c = cmd([w("SADD"), w("si")]);
            for _ in 0..1 + r.below(6) {
                c.push(if r.chance(5) {
                    r.word(&[
                        "70000",
                        "-70000",
                        "9223372036854775807",
                        "-9223372036854775808",
                    ])
                } else {
                    r.range(-20, 40).to_string().into_bytes()
                });
            }
            c
        }
        8 => {
            let mut c = cmd([w("SADD"), w("sbig")]);
            for _ in 0..1 + r.below(80) {
                c.push(if r.chance(1) {
                    r.word(SORT_WORDS)
                } else {
                    r.range(0, 700).to_string().into_bytes()
                });
            }
            c
        }
        9 => {
            let mut c = cmd([w("SREM"), w(if r.chance(50) { "si" } else { "sbig" })]);
            for _ in 0..1 + r.below(4) {
                c.push(r.range(-20, 40).to_string().into_bytes());
            }
            c
        }
        10 | 11 => {
            let mut c = cmd([w("ZADD"), w("sz")]);
            for _ in 0..1 + r.below(4) {
                c.push(r.word(&["0", "1", "2", "-1", "1.5", "inf"]));
                c.push(sort_elem(r));
            }
            c
        }
        12 => {
            let mut c = cmd([w("ZADD"), w("szbig")]);
            for _ in 0..1 + r.below(40) {
                c.push(r.range(-5, 5).to_string().into_bytes());
                c.push(if r.chance(2) {
                    "1".repeat(70).into_bytes()
                } else {
                    r.range(0, 300).to_string().into_bytes()
                });
            }
            c
        }
        13 => {
            let mut c = cmd([w("ZREM"), w(if r.chance(70) { "sz" } else { "szbig" })]);
            for _ in 0..1 + r.below(3) {
                c.push(sort_elem(r));
            }
            c
        }
        14 => {
            let size = r.word(&["1", "2", "3", "-1", "-2"]);
            cmd([w("CONFIG"), w("SET"), w("list-max-listpack-size"), size])
        }
        15 => {
            let mut c = cmd([w("RPUSH"), w("snul")]);
            for _ in 0..1 + r.below(4) {
                c.push(if r.chance(50) {
                    r.word(SORT_NUL)
                } else {
                    r.word(SORT_NUMBERS)
                });
            }
            c
        }
        _ => cmd([
            w("DEL"),
            r.word(&["sl", "slbig", "si", "sbig", "sz", "szbig", "sdst", "snul"]),
        ]),
    }
}

/// SORT and SORT_RO over lists, sets and sorted sets, the writes that feed
/// them (elements and weights), and reads of what STORE wrote.
pub fn sort(r: &mut Rng) -> Cmd {
    match r.below(20) {
        0..=7 => sort_cmd(r),
        8..=10 => sort_source_cmd(r),
        11..=13 => sort_weight_cmd(r),
        14 | 15 => cmd([w("LRANGE"), w("sdst"), w("0"), w("-1")]),
        16 => {
            let k = r.word(&["sl", "slbig", "si", "sbig", "sz", "szbig", "snul"]);
            cmd([w("LRANGE"), k, w("0"), w("-1")])
        }
        17 => cmd([
            w("OBJECT"),
            w("ENCODING"),
            r.word(&["sl", "slbig", "si", "sbig", "sz", "szbig", "sdst"]),
        ]),
        18 => cmd([
            w("TYPE"),
            r.word(&["sl", "si", "sz", "sdst", "wn_1", "wh_1"]),
        ]),
        _ => cmd([
            w(if r.chance(50) { "SCARD" } else { "ZCARD" }),
            r.word(&["si", "sbig", "sz", "szbig"]),
        ]),
    }
}

/// A stream id over a small space, so ids collide: explicit `ms-seq`,
/// `ms` alone, sometimes `ms-*` (where `auto` allows) or not an id at all.
fn stream_id(r: &mut Rng, auto: bool) -> Vec<u8> {
    let ms = r.below(30);
    match r.below(12) {
        0 if auto => format!("{ms}-*").into_bytes(),
        1 => format!("{ms}").into_bytes(),
        2 => r.word(&[
            "0-0",
            "bad",
            "-1",
            "18446744073709551615-18446744073709551615",
        ]),
        _ => format!("{ms}-{}", r.below(3)).into_bytes(),
    }
}

/// One end of an XRANGE interval.
fn stream_bound(r: &mut Rng) -> Vec<u8> {
    match r.below(6) {
        0 => w("-"),
        1 => w("+"),
        2 => {
            let mut v = w("(");
            v.extend(stream_id(r, false));
            v
        }
        _ => stream_id(r, false),
    }
}

/// Stream commands with explicit ids only (a generated id holds the
/// time), no `~` trimming (it depends on node boundaries), no BLOCK, and
/// nothing that replies with times or idle (XPENDING's extended form,
/// XINFO CONSUMERS / STREAM FULL); claims use min-idle 0.
pub fn streams(r: &mut Rng) -> Cmd {
    let group = || w("g");
    let consumer = |r: &mut Rng| r.word(&["c1", "c2", "c3"]);
    match r.below(24) {
        0..=5 => {
            let mut c = vec![w("XADD"), key(r)];
            match r.below(6) {
                0 => c.extend([w("MAXLEN"), r.range(0, 4).to_string().into_bytes()]),
                1 => c.extend([w("MINID"), w("="), stream_id(r, false)]),
                2 => c.push(w("NOMKSTREAM")),
                _ => {}
            }
            c.push(stream_id(r, true));
            for _ in 0..1 + r.below(2) {
                c.push(r.word(&["f", "g", "user"]));
                c.push(value(r));
            }
            c
        }
        6 | 7 => {
            let rev = r.chance(40);
            let mut c = vec![
                w(if rev { "XREVRANGE" } else { "XRANGE" }),
                key(r),
                stream_bound(r),
                stream_bound(r),
            ];
            if r.chance(40) {
                c.extend([w("COUNT"), int_arg(r)]);
            }
            c
        }
        8 => cmd([w("XLEN"), key(r)]),
        9 => cmd([w("XDEL"), key(r), stream_id(r, false), stream_id(r, false)]),
        10 => cmd([
            w("XTRIM"),
            key(r),
            w(if r.chance(50) { "MAXLEN" } else { "MINID" }),
            if r.chance(50) {
                r.range(0, 4).to_string().into_bytes()
            } else {
                stream_id(r, false)
            },
        ]),
        11 => {
            let mut c = vec![w("XSETID"), key(r), stream_id(r, false)];
            if r.chance(40) {
                c.extend([w("ENTRIESADDED"), int_arg(r)]);
            }
            if r.chance(30) {
                c.extend([w("MAXDELETEDID"), stream_id(r, false)]);
            }
            c
        }
        12 => {
            let mut c = vec![w("XREAD")];
            if r.chance(50) {
                c.extend([w("COUNT"), int_arg(r)]);
            }
            c.extend([w("STREAMS"), key(r), key(r)]);
            c.push(if r.chance(30) {
                w("$")
            } else {
                stream_id(r, false)
            });
            c.push(stream_id(r, false));
            c
        }
        13 => {
            let id = if r.chance(30) {
                w("$")
            } else {
                stream_id(r, false)
            };
            let mut c = vec![w("XGROUP"), w("CREATE"), key(r), group(), id];
            if r.chance(50) {
                c.push(w("MKSTREAM"));
            }
            if r.chance(30) {
                c.extend([w("ENTRIESREAD"), int_arg(r)]);
            }
            c
        }
        14 => match r.below(4) {
            0 => cmd([
                w("XGROUP"),
                w("SETID"),
                key(r),
                group(),
                stream_id(r, false),
            ]),
            1 => cmd([w("XGROUP"), w("DESTROY"), key(r), group()]),
            2 => cmd([
                w("XGROUP"),
                w("CREATECONSUMER"),
                key(r),
                group(),
                consumer(r),
            ]),
            _ => cmd([w("XGROUP"), w("DELCONSUMER"), key(r), group(), consumer(r)]),
        },
        15..=17 => {
            let mut c = vec![w("XREADGROUP"), w("GROUP"), group(), consumer(r)];
            if r.chance(50) {
                c.extend([w("COUNT"), r.range(0, 3).to_string().into_bytes()]);
            }
            if r.chance(20) {
                c.push(w("NOACK"));
            }
            c.extend([w("STREAMS"), key(r)]);
            c.push(if r.chance(70) {
                w(">")
            } else {
                stream_id(r, false)
            });
            c
        }
        18 => cmd([
            w("XACK"),
            key(r),
            group(),
            stream_id(r, false),
            stream_id(r, false),
        ]),
        19 => {
            let mut c = vec![w("XPENDING"), key(r), group()];
            if r.chance(30) {
                // The extended form's idle column is a time: only an empty
                // or missing consumer's, which replies an empty array.
                c.extend([w("-"), w("+"), w("10"), w("nobody")]);
            }
            c
        }
        20 => {
            let mut c = vec![w("XCLAIM"), key(r), group(), consumer(r), w("0")];
            c.push(stream_id(r, false));
            c.push(stream_id(r, false));
            c.push(w("JUSTID"));
            if r.chance(30) {
                c.push(w("FORCE"));
            }
            if r.chance(30) {
                c.extend([w("RETRYCOUNT"), r.range(0, 5).to_string().into_bytes()]);
            }
            if r.chance(20) {
                c.extend([w("LASTID"), stream_id(r, false)]);
            }
            c
        }
        21 => {
            let mut c = vec![
                w("XAUTOCLAIM"),
                key(r),
                group(),
                consumer(r),
                w("0"),
                stream_bound(r),
            ];
            if r.chance(50) {
                c.extend([w("COUNT"), int_arg(r)]);
            }
            c.push(w("JUSTID"));
            c
        }
        22 => cmd([w("XINFO"), w("GROUPS"), key(r)]),
        _ => cmd([w("TYPE"), key(r)]),
    }
}
