//! The request parser: Redis's request grammar (an array of bulk strings, or
//! an inline line with `sdssplitargs` quoting), parsed incrementally.
//!
//! The parser never copies multibulk arguments: it records their spans in the
//! connection's read buffer. When a command is incomplete it remembers where
//! it stopped (which argument, which bulk length), so bytes arriving later are
//! never scanned twice. Every length read from the wire is checked against
//! [`Limits`] before anything is reserved for it.

use std::ops::Range;

/// Bounds applied to what a client may send.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest bulk argument accepted (`proto-max-bulk-len`).
    pub max_bulk_len: usize,
    /// Largest multibulk count accepted.
    pub max_multibulk_len: usize,
    /// Whether the client is authenticated: unauthenticated clients get the
    /// much smaller limits Redis applies before AUTH.
    pub authenticated: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: 512 * 1024 * 1024,
            max_multibulk_len: i32::MAX as usize,
            authenticated: true,
        }
    }
}

/// Longest inline request or length line Redis waits for before giving up.
pub const MAX_INLINE_LEN: usize = 64 * 1024;
/// Bulk arguments at least this long report what they still need
/// ([`RequestParser::wanted`], bounded by [`RESERVE_CAP`]); the connection
/// grows its buffer towards it only as the bytes arrive.
const BIG_ARG: usize = 32 * 1024;
/// Most bytes [`RequestParser::wanted`] reports for one bulk argument.
const RESERVE_CAP: usize = 16 * 1024 * 1024;

/// A protocol violation: the connection gets this error line and is closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ERR Protocol error: {}", self.0)
    }
}

fn perr(msg: impl Into<String>) -> ProtocolError {
    ProtocolError(msg.into())
}

/// One complete command found at the start of the buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A command: its arguments are in [`RequestParser::args`]. `consumed`
    /// bytes at the start of the buffer belong to it.
    Command { consumed: usize },
    /// Bytes that carry no command (`*0`, `*-1`, an empty inline line).
    Skip { consumed: usize },
}

/// Where the arguments of the last parsed command live.
#[derive(Debug)]
enum ArgStore {
    /// Spans into the read buffer.
    Spans(Vec<Range<usize>>),
    /// Owned, unescaped inline arguments.
    Inline(Vec<Vec<u8>>),
}

/// Incremental request parser, one per connection.
#[derive(Debug)]
pub struct RequestParser {
    /// Arguments of the multibulk in progress (or of the last command).
    store: ArgStore,
    /// Bytes of the buffer already consumed by the multibulk in progress.
    pos: usize,
    /// Arguments still expected by the multibulk in progress (0 = none).
    remaining: usize,
    /// Length of the bulk whose header was read and whose body is awaited.
    bulk_len: Option<usize>,
    /// For inline requests: how far a newline was already searched for.
    inline_scanned: usize,
}

impl Default for RequestParser {
    fn default() -> Self {
        Self::new()
    }
}

impl RequestParser {
    /// A parser with no command in progress.
    pub fn new() -> Self {
        RequestParser {
            store: ArgStore::Spans(Vec::with_capacity(8)),
            pos: 0,
            remaining: 0,
            bulk_len: None,
            inline_scanned: 0,
        }
    }

    /// Whether part of a command has been received but not all of it.
    pub fn in_progress(&self) -> bool {
        self.remaining > 0 || self.inline_scanned > 0
    }

    /// How many more bytes the bulk in progress still needs (0 for small
    /// ones), a hint for growing the buffer.
    pub fn wanted(&self, buffered: usize) -> usize {
        match self.bulk_len {
            Some(len) if len >= BIG_ARG => {
                let need = (self.pos + len + 2).saturating_sub(buffered);
                need.min(RESERVE_CAP)
            }
            _ => 0,
        }
    }

    /// The arguments of the command last returned as [`Parsed::Command`].
    /// `buf` must be the same buffer that was parsed, not yet advanced.
    /// (Inline room for 24: an HSET of 10 fields takes no allocation.)
    pub fn args<'b>(&'b self, buf: &'b [u8]) -> smallvec::SmallVec<[&'b [u8]; 24]> {
        match &self.store {
            ArgStore::Spans(spans) => spans
                .iter()
                .map(|r| buf.get(r.clone()).unwrap_or(&[]))
                .collect(),
            ArgStore::Inline(args) => args.iter().map(|a| a.as_slice()).collect(),
        }
    }

    /// Parse the command at the start of `buf`, resuming the one in progress.
    ///
    /// Returns `Ok(None)` when more bytes are needed. After a `Command` or
    /// `Skip`, the caller removes `consumed` bytes from the front of the
    /// buffer before calling again.
    pub fn parse(&mut self, buf: &[u8], limits: &Limits) -> Result<Option<Parsed>, ProtocolError> {
        if self.remaining == 0 {
            let Some(&first) = buf.first() else {
                return Ok(None);
            };
            if first != b'*' {
                return self.parse_inline(buf);
            }
            // Multibulk header.
            let Some(eol) = find_line_end(buf, 1) else {
                if buf.len() > MAX_INLINE_LEN {
                    return Err(perr("too big mbulk count string"));
                }
                return Ok(None);
            };
            let count = parse_len(&buf[1..eol]).ok_or_else(|| perr("invalid multibulk length"))?;
            let consumed = eol + 2;
            if count <= 0 {
                return Ok(Some(Parsed::Skip { consumed }));
            }
            let count = count as usize;
            if count > limits.max_multibulk_len {
                return Err(perr("invalid multibulk length"));
            }
            if !limits.authenticated && count > 10 {
                return Err(perr("unauthenticated multibulk length"));
            }
            if !matches!(self.store, ArgStore::Spans(_)) {
                self.store = ArgStore::Spans(Vec::new());
            }
            if let ArgStore::Spans(spans) = &mut self.store {
                spans.clear();
                // Never trust the count for the allocation: grow as args arrive.
                spans.reserve(count.min(1024));
            }
            self.remaining = count;
            self.pos = consumed;
            self.bulk_len = None;
        }
        self.resume_multibulk(buf, limits)
    }

    fn resume_multibulk(
        &mut self,
        buf: &[u8],
        limits: &Limits,
    ) -> Result<Option<Parsed>, ProtocolError> {
        while self.remaining > 0 {
            // A plain `$<digits>\r` line is read in one pass (the same
            // length and end as the general path below finds).
            let fast = match self.bulk_len {
                Some(_) => None,
                None => fast_bulk_len(buf, self.pos).filter(|&(len, _)| {
                    len <= limits.max_bulk_len && (limits.authenticated || len <= 16384)
                }),
            };
            let len = match (self.bulk_len, fast) {
                (Some(len), _) => len,
                (None, Some((len, eol))) => {
                    self.pos = eol + 2;
                    self.bulk_len = Some(len);
                    len
                }
                (None, None) => {
                    // Like Redis, look at the first byte only once the
                    // whole line is there.
                    let Some(eol) = find_line_end(buf, self.pos) else {
                        if buf.len() - self.pos > MAX_INLINE_LEN {
                            self.reset();
                            return Err(perr("too big bulk count string"));
                        }
                        return Ok(None);
                    };
                    let b = buf.get(self.pos).copied().unwrap_or_default();
                    if b != b'$' {
                        let got = b as char;
                        self.reset();
                        return Err(perr(format!("expected '$', got '{got}'")));
                    }
                    let len = match parse_len(&buf[self.pos + 1..eol]) {
                        Some(l) if l >= 0 && (l as u64) <= limits.max_bulk_len as u64 => l as usize,
                        _ => {
                            self.reset();
                            return Err(perr("invalid bulk length"));
                        }
                    };
                    if !limits.authenticated && len > 16384 {
                        self.reset();
                        return Err(perr("unauthenticated bulk length"));
                    }
                    self.pos = eol + 2;
                    self.bulk_len = Some(len);
                    len
                }
            };
            // Redis skips the two bytes after the body without checking them.
            if buf.len() < self.pos + len + 2 {
                return Ok(None);
            }
            if let ArgStore::Spans(spans) = &mut self.store {
                spans.push(self.pos..self.pos + len);
            }
            self.pos += len + 2;
            self.bulk_len = None;
            self.remaining -= 1;
        }
        let consumed = self.pos;
        self.pos = 0;
        Ok(Some(Parsed::Command { consumed }))
    }

    fn parse_inline(&mut self, buf: &[u8]) -> Result<Option<Parsed>, ProtocolError> {
        let from = self.inline_scanned;
        // Redis finds the newline with strchr: a NUL byte ends the search,
        // so a request holding one never completes (until it is too big).
        let stop = buf
            .get(from..)
            .and_then(|rest| rest.iter().position(|&b| b == b'\n' || b == 0))
            .map(|i| i + from);
        let Some(nl) = stop.filter(|&i| buf.get(i) == Some(&b'\n')) else {
            if buf.len() > MAX_INLINE_LEN {
                self.reset();
                return Err(perr("too big inline request"));
            }
            // Resume at the NUL (found again at once) or after the bytes seen.
            self.inline_scanned = stop.unwrap_or(buf.len());
            return Ok(None);
        };
        self.inline_scanned = 0;
        let consumed = nl + 1;
        let mut line = &buf[..nl];
        if line.last() == Some(&b'\r') {
            line = &line[..line.len() - 1];
        }
        let args = split_args(line).ok_or_else(|| perr("unbalanced quotes in request"))?;
        if args.is_empty() {
            return Ok(Some(Parsed::Skip { consumed }));
        }
        self.store = ArgStore::Inline(args);
        Ok(Some(Parsed::Command { consumed }))
    }

    fn reset(&mut self) {
        self.remaining = 0;
        self.pos = 0;
        self.bulk_len = None;
        self.inline_scanned = 0;
    }
}

/// Where the line starting at `from` ends, as Redis finds it: the first
/// `\r` (a NUL byte before it means never), with at least one more byte after
/// it. Redis skips that byte without checking that it is `\n`.
fn find_line_end(buf: &[u8], from: usize) -> Option<usize> {
    let rest = buf.get(from..)?;
    let at = rest.iter().position(|&b| b == b'\r' || b == 0)? + from;
    (buf.get(at) == Some(&b'\r') && at + 1 < buf.len()).then_some(at)
}

/// The length and line end of a bulk length line at `at` that is `$`, one
/// to nine digits in canonical form (no leading zero but `0` itself) and
/// `\r` with one more byte after it; `None` for anything else, which the
/// general path ([`find_line_end`], [`parse_len`]) then reads.
#[inline]
fn fast_bulk_len(buf: &[u8], at: usize) -> Option<(usize, usize)> {
    let rest = buf.get(at..)?;
    let (&b'$', digits) = rest.split_first()? else {
        return None;
    };
    let mut len = 0usize;
    for (i, &d) in digits.iter().enumerate().take(10) {
        match d {
            b'0'..=b'9' if i < 9 && !(i == 1 && digits.first() == Some(&b'0')) => {
                len = len * 10 + (d - b'0') as usize;
            }
            // The line end, with a byte after it (not checked, as Redis).
            b'\r' if i > 0 && i + 1 < digits.len() => return Some((len, at + 1 + i)),
            _ => return None,
        }
    }
    None
}

/// Most arguments a command may have for [`peek_keys`] to look past it.
const PEEK_MAX_ARGS: usize = 64;

/// The second argument (the first key of most commands) of each of the
/// first complete commands in `buf`, at most `max`, pushed to `out` (an
/// empty one for a command of one argument); returns how many were
/// found. Only a hint for reading keys ahead, never what runs: it stops,
/// early or at once, at anything but a complete multibulk of short-form
/// lengths (`*N`, `$N` of one to nine digits) with at most
/// [`PEEK_MAX_ARGS`] arguments, and never scans a bulk's bytes, so its
/// cost is bounded whatever the buffer holds.
pub fn peek_keys<'b>(
    buf: &'b [u8],
    max: usize,
    out: &mut smallvec::SmallVec<[&'b [u8]; 16]>,
) -> usize {
    let mut at = 0;
    let mut found = 0;
    while found < max {
        match peek_command(buf, at) {
            Some((key, end)) => {
                out.push(key);
                found += 1;
                at = end;
            }
            None => break,
        }
    }
    found
}

/// The second argument (or nothing) and the end of the complete command
/// at `at`, as [`peek_keys`] reads it.
fn peek_command(buf: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let (argc, mut p) = peek_len(buf, at, b'*')?;
    if argc == 0 || argc > PEEK_MAX_ARGS {
        return None;
    }
    let mut key: &[u8] = &[];
    for i in 0..argc {
        let (len, start) = peek_len(buf, p, b'$')?;
        let end = start + len;
        // The bulk and its line end must be there.
        if end + 2 > buf.len() {
            return None;
        }
        if i == 1 {
            key = &buf[start..end];
        }
        p = end + 2;
    }
    Some((key, p))
}

/// `prefix`, one to nine digits and a line end at `at`: the number and
/// where the line after it starts.
#[inline]
fn peek_len(buf: &[u8], at: usize, prefix: u8) -> Option<(usize, usize)> {
    let line = buf.get(at..)?;
    if line.first() != Some(&prefix) {
        return None;
    }
    // One or two digits (most lengths), read at once.
    if let Some(&[a, b, c, _, ..]) = line.get(1..) {
        let (a, b) = (a.wrapping_sub(b'0'), b.wrapping_sub(b'0'));
        if a <= 9 && b == b'\r'.wrapping_sub(b'0') {
            return Some((a as usize, at + 4));
        }
        if a <= 9 && b <= 9 && c == b'\r' && line.len() > 4 {
            return Some((a as usize * 10 + b as usize, at + 5));
        }
    }
    let mut n = 0usize;
    let mut i = 1;
    loop {
        let d = *line.get(i)?;
        if d == b'\r' {
            break;
        }
        let v = d.wrapping_sub(b'0');
        if v > 9 || i > 9 {
            return None;
        }
        n = n * 10 + v as usize;
        i += 1;
    }
    // At least one digit, and a byte after the `\r`.
    (i > 1 && i + 1 < line.len()).then_some((n, at + i + 2))
}

/// Parses a length line as Redis's `string2ll` does (no leading `+`, no
/// leading zeros, no spaces).
fn parse_len(s: &[u8]) -> Option<i64> {
    crate::protocol::parse_i64(s)
}

/// Splits an inline request into arguments with Redis's quoting rules:
/// `"..."` understands `\n \r \t \b \a \\ \" \xHH`, `'...'` only `\'`, and
/// a closing quote must be followed by a space or the end of the line.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut args = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && is_space(line[i]) {
            i += 1;
        }
        if i >= n {
            return Some(args);
        }
        let mut cur = Vec::new();
        let mut in_dq = false;
        let mut in_sq = false;
        loop {
            if in_dq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\'
                    && i + 3 < n
                    && line[i + 1] == b'x'
                    && is_hex(line[i + 2])
                    && is_hex(line[i + 3])
                {
                    cur.push(hex(line[i + 2]) * 16 + hex(line[i + 3]));
                    i += 3;
                } else if c == b'\\' && i + 1 < n {
                    i += 1;
                    cur.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                } else if c == b'"' {
                    if i + 1 < n && !is_space(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else if in_sq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    i += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    if i + 1 < n && !is_space(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else {
                if i >= n {
                    break;
                }
                match line[i] {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => {
                        i += 1;
                        break;
                    }
                    b'"' => in_dq = true,
                    b'\'' => in_sq = true,
                    c => cur.push(c),
                }
            }
            i += 1;
        }
        args.push(cur);
    }
}

/// C's `isspace` (which, unlike `u8::is_ascii_whitespace`, includes `\v`).
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn is_hex(c: u8) -> bool {
    c.is_ascii_hexdigit()
}

fn hex(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        b'A'..=b'F' => c - b'A' + 10,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `peek_keys` finds the second argument of each complete command,
    /// as the parser reads them, and stops at what it does not read.
    #[test]
    fn peek_keys_finds_each_complete_commands_second_argument() {
        let peek = |buf: &[u8], max: usize| {
            let mut out = smallvec::SmallVec::new();
            let n = peek_keys(buf, max, &mut out);
            assert_eq!(n, out.len());
            out.iter().map(|k| k.to_vec()).collect::<Vec<_>>()
        };
        let three = b"*3\r\n$4\r\nHGET\r\n$3\r\np:1\r\n$2\r\nxp\r\n\
*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$11\r\nkey:\r\n\x00long\r\n";
        let keys = peek(three, 16);
        assert_eq!(
            keys,
            vec![b"p:1".to_vec(), vec![], b"key:\r\n\x00long".to_vec()]
        );
        // The same commands as the parser reads them.
        let parsed = parse_all(three).unwrap();
        for (args, key) in parsed.iter().zip(&keys) {
            assert_eq!(args.get(1).cloned().unwrap_or_default(), *key);
        }
        assert_eq!(peek(three, 2).len(), 2);
        // Every cut of the buffer: only the commands complete before it.
        let mut ends = Vec::new();
        let mut parser = RequestParser::new();
        while let Ok(Some(Parsed::Command { consumed })) = parser.parse(
            &three[ends.last().copied().unwrap_or(0)..],
            &Limits::default(),
        ) {
            ends.push(ends.last().copied().unwrap_or(0) + consumed);
        }
        assert_eq!(ends.last(), Some(&three.len()));
        for cut in 0..three.len() {
            let complete = ends.iter().filter(|&&e| e <= cut).count();
            assert_eq!(peek(&three[..cut], 16).len(), complete, "cut at {cut}");
        }
        // Stops at an inline command, `*0`, a long length, a bad digit.
        assert!(peek(b"GET a\r\n", 16).is_empty());
        assert!(peek(b"*0\r\n*2\r\n$3\r\nGET\r\n$1\r\na\r\n", 16).is_empty());
        assert!(peek(b"*2\r\n$3\r\nGET\r\n$1234567890\r\na\r\n", 16).is_empty());
        assert!(peek(b"*2\r\n$3\r\nGET\r\n$-1\r\n", 16).is_empty());
        assert!(peek(b"*2\r\n$3\r\nGET\r\n$\r\n", 16).is_empty());
        // More arguments than it looks past.
        let mut big = format!("*{}\r\n", PEEK_MAX_ARGS + 1).into_bytes();
        for _ in 0..=PEEK_MAX_ARGS {
            big.extend_from_slice(b"$1\r\nx\r\n");
        }
        assert!(peek(&big, 16).is_empty());
        // A bulk's line end missing: not complete.
        assert!(peek(b"*2\r\n$3\r\nGET\r\n$1\r\na", 16).is_empty());
    }

    fn parse_all(input: &[u8]) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
        let mut p = RequestParser::new();
        let mut buf = input.to_vec();
        let mut out = Vec::new();
        while let Some(parsed) = p.parse(&buf, &Limits::default())? {
            match parsed {
                Parsed::Command { consumed } => {
                    out.push(p.args(&buf).iter().map(|a| a.to_vec()).collect());
                    buf.drain(..consumed);
                }
                Parsed::Skip { consumed } => {
                    buf.drain(..consumed);
                }
            }
        }
        Ok(out)
    }

    /// The one-pass bulk length reader agrees with the general path
    /// (`find_line_end` then `parse_len`) wherever it answers, and leaves
    /// to it every line it does not read.
    #[test]
    fn fast_bulk_len_agrees_with_the_general_path() {
        let lines: &[&[u8]] = &[
            b"$0\r\n",
            b"$5\r\n",
            b"$12\r\n",
            b"$123456789\r\n",
            b"$1234567890\r\n",
            b"$01\r\n",
            b"$00\r\n",
            b"$-1\r\n",
            b"$+1\r\n",
            b"$\r\n",
            b"$1 \r\n",
            b"$1\r",
            b"$1",
            b"$1\0\r\n",
            b"*1\r\n",
            b"$1\rx",
            b"$999999999\r\n",
        ];
        for line in lines {
            for cut in 0..=line.len() {
                let buf = &line[..cut];
                let general = find_line_end(buf, 0).and_then(|eol| {
                    let len = parse_len(buf.get(1..eol)?)?;
                    (buf.first() == Some(&b'$') && len >= 0).then_some((len as usize, eol))
                });
                if let Some(fast) = fast_bulk_len(buf, 0) {
                    assert_eq!(Some(fast), general, "{:?}", String::from_utf8_lossy(buf));
                }
            }
        }
        assert_eq!(fast_bulk_len(b"$12\r\n", 0), Some((12, 3)));
        assert_eq!(fast_bulk_len(b"xx$7\r\n", 2), Some((7, 4)));
        assert_eq!(fast_bulk_len(b"$01\r\n", 0), None);
        assert_eq!(
            parse_all(b"*3\r\n$4\r\nHGET\r\n$1\r\nk\r\n$10\r\n0123456789\r\n").unwrap(),
            vec![vec![
                b"HGET".to_vec(),
                b"k".to_vec(),
                b"0123456789".to_vec()
            ]]
        );
    }

    #[test]
    fn multibulk_and_inline() {
        let cmds = parse_all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\nset a \"b c\"\r\n").unwrap();
        assert_eq!(cmds[0], vec![b"GET".to_vec(), b"k".to_vec()]);
        assert_eq!(cmds[1], vec![b"PING".to_vec()]);
        assert_eq!(
            cmds[2],
            vec![b"set".to_vec(), b"a".to_vec(), b"b c".to_vec()]
        );
    }

    #[test]
    fn byte_at_a_time_resumes() {
        let input = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n";
        let mut p = RequestParser::new();
        let mut buf = Vec::new();
        let mut got = None;
        for &b in input.iter() {
            buf.push(b);
            if let Some(Parsed::Command { consumed }) = p.parse(&buf, &Limits::default()).unwrap() {
                assert_eq!(consumed, input.len());
                got = Some(p.args(&buf).iter().map(|a| a.to_vec()).collect::<Vec<_>>());
            }
        }
        assert_eq!(
            got.unwrap(),
            vec![b"SET".to_vec(), b"key".to_vec(), b"value".to_vec()]
        );
    }

    #[test]
    fn errors_match_redis() {
        let e = |s: &[u8]| parse_all(s).unwrap_err().to_string();
        assert_eq!(
            e(b"*1\r\n:1\r\n"),
            "ERR Protocol error: expected '$', got ':'"
        );
        assert_eq!(
            e(b"*1\r\n$-5\r\n"),
            "ERR Protocol error: invalid bulk length"
        );
        assert_eq!(
            e(b"*1\r\n$2147483648000\r\n"),
            "ERR Protocol error: invalid bulk length"
        );
        assert_eq!(e(b"*x\r\n"), "ERR Protocol error: invalid multibulk length");
        assert_eq!(
            e(b"set \"a\r\n"),
            "ERR Protocol error: unbalanced quotes in request"
        );
        assert_eq!(
            e(b"set \"a\"b\r\n"),
            "ERR Protocol error: unbalanced quotes in request"
        );
    }

    #[test]
    fn line_ends_found_as_redis_finds_them() {
        // The byte after '\r' in a length line is skipped unchecked.
        assert_eq!(
            parse_all(b"*1\rx$4\r\nPING\r\n").unwrap(),
            vec![vec![b"PING".to_vec()]]
        );
        // The first byte of a bulk length line is judged once the line is
        // complete; an empty line is "got '\r'".
        let mut p = RequestParser::new();
        assert_eq!(p.parse(b"*1\r\n:1", &Limits::default()), Ok(None));
        assert_eq!(
            parse_all(b"*1\r\n\r\n").unwrap_err().to_string(),
            "ERR Protocol error: expected '$', got '\r'"
        );
        let mut long = b"*1\r\n".to_vec();
        long.extend(std::iter::repeat_n(b'x', MAX_INLINE_LEN + 1));
        assert_eq!(
            parse_all(&long).unwrap_err().to_string(),
            "ERR Protocol error: too big bulk count string"
        );
    }

    #[test]
    fn nul_byte_keeps_inline_request_waiting() {
        let mut p = RequestParser::new();
        let buf = b"PI\0NG\r\nPING\r\n";
        assert_eq!(p.parse(buf, &Limits::default()), Ok(None));
        assert_eq!(p.parse(buf, &Limits::default()), Ok(None));
        let mut big = buf.to_vec();
        big.extend(std::iter::repeat_n(b'x', MAX_INLINE_LEN));
        assert_eq!(
            p.parse(&big, &Limits::default()).unwrap_err().to_string(),
            "ERR Protocol error: too big inline request"
        );
    }

    #[test]
    fn vertical_tab_is_space_between_arguments_only() {
        assert_eq!(
            split_args(b"\x0bECHO \"x\"\x0b a\x0bb").unwrap(),
            vec![b"ECHO".to_vec(), b"x".to_vec(), b"a\x0bb".to_vec()]
        );
    }

    #[test]
    fn empty_multibulk_skipped() {
        assert_eq!(parse_all(b"*0\r\n*-1\r\n\r\nPING\r\n").unwrap().len(), 1);
    }

    #[test]
    fn quoting_rules() {
        assert_eq!(
            split_args(b"a \"\\x41\\n\" 'it\\'s'").unwrap(),
            vec![b"a".to_vec(), b"A\n".to_vec(), b"it's".to_vec()]
        );
        assert_eq!(split_args(b"  ").unwrap().len(), 0);
        assert!(split_args(b"'abc").is_none());
    }

    #[test]
    fn unauthenticated_limits() {
        let limits = Limits {
            authenticated: false,
            ..Limits::default()
        };
        let mut p = RequestParser::new();
        assert!(p.parse(b"*11\r\n", &limits).is_err());
        let mut p = RequestParser::new();
        assert!(p.parse(b"*1\r\n$16385\r\n", &limits).is_err());
    }
}
