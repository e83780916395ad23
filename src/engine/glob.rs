//! Glob-style pattern matching exactly as Redis's `stringmatchlen`
//! (KEYS, SCAN MATCH, CONFIG GET, ...).

/// Whether `s` matches `pattern` (`*`, `?`, `[abc]`, `[^a-z]`, `\x`).
pub fn matches(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    let mut skip_longer = false;
    match_impl(pattern, s, nocase, &mut skip_longer, 0)
}

fn eq(a: u8, b: u8, nocase: bool) -> bool {
    if nocase {
        a.eq_ignore_ascii_case(&b)
    } else {
        a == b
    }
}

/// A byte as C's signed `char`, lower-cased (ASCII only) when `nocase`.
fn signed(b: u8, nocase: bool) -> i8 {
    let b = if nocase { b.to_ascii_lowercase() } else { b };
    b as i8
}

fn match_impl(
    mut p: &[u8],
    mut s: &[u8],
    nocase: bool,
    skip_longer: &mut bool,
    nesting: usize,
) -> bool {
    // Like Redis, bound the recursion on pathological patterns.
    if nesting > 1000 {
        return false;
    }
    while let (Some(&pc), Some(&sc)) = (p.first(), s.first()) {
        match pc {
            b'*' => {
                while p.get(1) == Some(&b'*') {
                    p = &p[1..];
                }
                if p.len() == 1 {
                    return true;
                }
                while !s.is_empty() {
                    if match_impl(&p[1..], s, nocase, skip_longer, nesting + 1) {
                        return true;
                    }
                    if *skip_longer {
                        return false;
                    }
                    s = &s[1..];
                }
                // No suffix of the string matches the rest of the pattern,
                // so no earlier `*` can succeed by matching more either.
                *skip_longer = true;
                return false;
            }
            b'?' => {}
            b'[' => {
                let (matched, rest) = match_class(&p[1..], sc, nocase);
                if !matched {
                    return false;
                }
                p = rest;
            }
            b'\\' if p.len() >= 2 => {
                p = &p[1..];
                if !eq(p[0], sc, nocase) {
                    return false;
                }
            }
            _ => {
                if !eq(pc, sc, nocase) {
                    return false;
                }
            }
        }
        s = &s[1..];
        p = p.get(1..).unwrap_or_default();
        if s.is_empty() {
            while p.first() == Some(&b'*') {
                p = &p[1..];
            }
            break;
        }
    }
    p.is_empty() && s.is_empty()
}

/// Matches `c` against the character class whose body starts at `p` (just
/// after the `[`). Returns whether it matched and the pattern from the
/// class's last character (its `]`; the pattern's last byte when the class
/// is not closed, as Redis reads it).
fn match_class(mut p: &[u8], c: u8, nocase: bool) -> (bool, &[u8]) {
    let not = p.first() == Some(&b'^');
    if not {
        p = &p[1..];
    }
    let mut matched = false;
    loop {
        match p {
            // An escaped character matches itself, case-sensitively.
            [b'\\', x, ..] => {
                matched |= *x == c;
                p = &p[1..];
            }
            [b']', ..] => break,
            [] => break,
            [lo, b'-', hi, ..] => {
                // Redis compares `char`s, which are signed: bytes from 0x80
                // sort below every ASCII byte.
                let (mut start, mut end) = (signed(*lo, nocase), signed(*hi, nocase));
                if start > end {
                    std::mem::swap(&mut start, &mut end);
                }
                matched |= (start..=end).contains(&signed(c, nocase));
                p = &p[2..];
            }
            [x, ..] => matched |= eq(*x, c, nocase),
        }
        p = &p[1..];
    }
    (matched != not, p)
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn redis_globs() {
        assert!(matches(b"*", b"anything", false));
        assert!(matches(b"h?llo", b"hello", false));
        assert!(matches(b"h*llo", b"heeeello", false));
        assert!(matches(b"h[ae]llo", b"hallo", false));
        assert!(!matches(b"h[^e]llo", b"hello", false));
        assert!(matches(b"h[a-b]llo", b"hbllo", false));
        assert!(matches(b"user:*", b"user:1001", false));
        assert!(!matches(b"user:*", b"usr:1", false));
        assert!(matches(b"a\\*b", b"a*b", false));
        assert!(matches(b"HELLO", b"hello", true));
        assert!(matches(b"[A-C]x", b"bX", true));
        assert!(!matches(b"[\\A]", b"a", true));
        // As in Redis, "*" does not match the empty string (KEYS * special-cases it).
        assert!(!matches(b"*", b"", false));
        assert!(!matches(b"?", b"", false));
        assert!(matches(b"a*", b"a", false));
        assert!(matches(b"", b"", false));
    }

    #[test]
    fn pathological_patterns_stay_fast() {
        let pattern = b"a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b".as_slice();
        assert!(!matches(pattern, &[b'a'; 60], false));
        let deep = vec![b'*'; 5000];
        assert!(matches(&deep, b"x", false));
    }

    /// Each pattern with the strings of [`STRINGS`] that real Redis 7.0.15
    /// KEYS returned for it (unclosed classes, escapes, signed ranges, ...).
    const CASES: &[(&[u8], &[&[u8]])] = &[
        (
            b"*",
            &[
                b"*", b"-", b"0", b"?", b"A", b"[", b"\\", b"]", b"^", b"_", b"`", b"a", b"a*b",
                b"a-", b"a]", b"ab", b"abc", b"b", b"hallo", b"hello", b"hxllo", b"x[y", b"z",
                b"\xc3", b"\xff",
            ],
        ),
        (
            b"**",
            &[
                b"*", b"-", b"0", b"?", b"A", b"[", b"\\", b"]", b"^", b"_", b"`", b"a", b"a*b",
                b"a-", b"a]", b"ab", b"abc", b"b", b"hallo", b"hello", b"hxllo", b"x[y", b"z",
                b"\xc3", b"\xff",
            ],
        ),
        (b"a*", &[b"a", b"a*b", b"a-", b"a]", b"ab", b"abc"]),
        (b"*a", &[b"a"]),
        (b"*b*", &[b"a*b", b"ab", b"abc", b"b"]),
        (
            b"?",
            &[
                b"*", b"-", b"0", b"?", b"A", b"[", b"\\", b"]", b"^", b"_", b"`", b"a", b"b",
                b"z", b"\xc3", b"\xff",
            ],
        ),
        (b"??", &[b"a-", b"a]", b"ab"]),
        (b"[", &[]),
        (b"[a", &[b"a"]),
        (b"[a-", &[b"-", b"a"]),
        (b"[a-]", &[b"]", b"^", b"_", b"`", b"a"]),
        (b"[a-]b", &[b"]", b"^", b"_", b"`", b"a", b"b"]),
        (b"[]", &[]),
        (b"[]a]", &[]),
        (
            b"[^]",
            &[
                b"*", b"-", b"0", b"?", b"A", b"[", b"\\", b"]", b"^", b"_", b"`", b"a", b"b",
                b"z", b"\xc3", b"\xff",
            ],
        ),
        (b"[^]]", &[b"a]"]),
        (
            b"[^a]",
            &[
                b"*", b"-", b"0", b"?", b"A", b"[", b"\\", b"]", b"^", b"_", b"`", b"b", b"z",
                b"\xc3", b"\xff",
            ],
        ),
        (b"[\\]", &[b"]"]),
        (b"[\\]]", &[b"]"]),
        (b"\\", &[b"\\"]),
        (b"a\\", &[]),
        (b"\\*", &[b"*"]),
        (b"a\\*b", &[b"a*b"]),
        (b"[a-z]", &[b"a", b"b", b"z"]),
        (b"[z-a]", &[b"a", b"b", b"z"]),
        (
            b"[^a-z]",
            &[
                b"*", b"-", b"0", b"?", b"A", b"[", b"\\", b"]", b"^", b"_", b"`", b"\xc3", b"\xff",
            ],
        ),
        (
            b"[a-\xff]",
            &[
                b"*", b"-", b"0", b"?", b"A", b"[", b"\\", b"]", b"^", b"_", b"`", b"a", b"\xff",
            ],
        ),
        (
            b"[\x80-b]",
            &[
                b"*", b"-", b"0", b"?", b"A", b"[", b"\\", b"]", b"^", b"_", b"`", b"a", b"b",
                b"\xc3", b"\xff",
            ],
        ),
        (b"h[ae]llo", &[b"hallo", b"hello"]),
        (b"h[^e]llo", &[b"hallo", b"hxllo"]),
        (b"h*llo", &[b"hallo", b"hello", b"hxllo"]),
        (b"*[", &[]),
        (b"x[*", &[]),
        (b"[[]", &[b"["]),
        (b"[-]", &[b"-"]),
        (b"[!a]", &[b"a"]),
        (b"a**b", &[b"a*b", b"ab"]),
        (
            b"*?*",
            &[
                b"*", b"-", b"0", b"?", b"A", b"[", b"\\", b"]", b"^", b"_", b"`", b"a", b"a*b",
                b"a-", b"a]", b"ab", b"abc", b"b", b"hallo", b"hello", b"hxllo", b"x[y", b"z",
                b"\xc3", b"\xff",
            ],
        ),
        (b"[*]", &[b"*"]),
        (b"[?]", &[b"?"]),
        (b"a[", &[]),
        (b"[a]*", &[b"a", b"a*b", b"a-", b"a]", b"ab", b"abc"]),
        (b"*]", &[b"]", b"a]"]),
        (b"[A-Z]", &[b"A"]),
        (
            b"[^\\]]",
            &[
                b"*", b"-", b"0", b"?", b"A", b"[", b"\\", b"^", b"_", b"`", b"a", b"b", b"z",
                b"\xc3", b"\xff",
            ],
        ),
    ];

    const STRINGS: &[&[u8]] = &[
        b"a", b"b", b"ab", b"abc", b"A", b"]", b"[", b"-", b"\\", b"^", b"_", b"`", b"*", b"?",
        b"a*b", b"hello", b"hallo", b"hxllo", b"\xc3", b"\xff", b"0", b"z", b"a]", b"a-", b"x[y",
    ];

    #[test]
    fn matches_what_redis_matches() {
        for (pattern, expected) in CASES {
            for s in STRINGS {
                let want = expected.contains(s);
                assert_eq!(
                    matches(pattern, s, false),
                    want,
                    "pattern {:?} string {:?}",
                    String::from_utf8_lossy(pattern),
                    String::from_utf8_lossy(s)
                );
            }
        }
    }
}
