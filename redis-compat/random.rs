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
