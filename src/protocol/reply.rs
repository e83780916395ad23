//! The reply writer: appends RESP2 or RESP3 straight into a connection's
//! output buffer. There is no intermediate frame tree; each method writes the
//! bytes of one reply element, choosing the RESP2 fallback where RESP3 has a
//! richer type (maps become flat arrays, doubles become bulk strings, ...).

use super::number::{format_double, MAX_DOUBLE_CHARS};

/// Writes replies for one client.
#[derive(Debug, Default)]
pub struct Reply {
    /// The encoded bytes waiting to be sent.
    pub buf: Vec<u8>,
    /// Whether the client speaks RESP3 (`HELLO 3`).
    pub resp3: bool,
}

impl Reply {
    /// An empty writer for the given protocol.
    pub fn new(resp3: bool) -> Self {
        Reply {
            buf: Vec::with_capacity(1024),
            resp3,
        }
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Drops everything written after `len` (used to replace a partial reply).
    pub fn truncate(&mut self, len: usize) {
        self.buf.truncate(len);
    }

    fn header(&mut self, prefix: u8, n: i64) {
        // Most headers are short (`:1`, `$5`, `*20`): written as one
        // fixed-size store rather than through itoa and two copies (a
        // header is written per element: an LB.TOP 100 reply has 400).
        if (0..10).contains(&n) {
            self.buf
                .extend_from_slice(&[prefix, b'0' + n as u8, b'\r', b'\n']);
            return;
        }
        if (10..100).contains(&n) {
            let (tens, ones) = (n as u8 / 10, n as u8 % 10);
            self.buf
                .extend_from_slice(&[prefix, b'0' + tens, b'0' + ones, b'\r', b'\n']);
            return;
        }
        // The rest in one copy: an i64 has at most 20 characters, so the
        // line fits in 24 bytes.
        let mut ib = itoa::Buffer::new();
        let digits = ib.format(n).as_bytes();
        let mut line = [0u8; 24];
        let end = digits.len() + 3;
        line[0] = prefix;
        line[1..end - 2].copy_from_slice(digits);
        line[end - 2..end].copy_from_slice(b"\r\n");
        self.buf.extend_from_slice(&line[..end]);
    }

    /// A HELP reply as Redis writes it: the `COMMAND <subcommand> ...`
    /// header, `lines`, and the closing HELP entry, each a status string.
    pub fn help(&mut self, command: &str, lines: &[&str]) {
        self.array(lines.len() + 3);
        self.simple(
            format!("{command} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
                .as_bytes(),
        );
        for l in lines {
            self.simple(l.as_bytes());
        }
        self.simple(b"HELP");
        self.simple(b"    Prints this help.");
    }

    /// `+OK`.
    pub fn ok(&mut self) {
        self.buf.extend_from_slice(b"+OK\r\n");
    }

    /// A status reply (`+text`). Newlines are replaced by spaces.
    pub fn simple(&mut self, s: &[u8]) {
        self.buf.push(b'+');
        self.push_line(s);
    }

    /// An error reply (`-CODE message`): `line` is the whole line, code
    /// included. Newlines are replaced by spaces as Redis does.
    pub fn error(&mut self, line: &str) {
        self.error_bytes(line.as_bytes());
    }

    /// [`Reply::error`] for a line that may hold non-UTF-8 bytes.
    pub fn error_bytes(&mut self, line: &[u8]) {
        self.buf.push(b'-');
        self.push_line(line);
    }

    fn push_line(&mut self, s: &[u8]) {
        let start = self.buf.len();
        self.buf.extend_from_slice(s);
        for b in &mut self.buf[start..] {
            if *b == b'\r' || *b == b'\n' {
                *b = b' ';
            }
        }
        self.buf.extend_from_slice(b"\r\n");
    }

    /// An integer reply.
    pub fn int(&mut self, n: i64) {
        self.header(b':', n);
    }

    /// A bulk string.
    pub fn bulk(&mut self, s: &[u8]) {
        // One growth check for the whole element (header at most 21 bytes).
        self.buf.reserve(s.len() + 24);
        self.header(b'$', s.len() as i64);
        self.buf.extend_from_slice(s);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// A bulk string given as two pieces written one after the other (a
    /// list element stored as a shared prefix and its own rest).
    pub fn bulk_parts(&mut self, a: &[u8], b: &[u8]) {
        self.buf.reserve(a.len() + b.len() + 24);
        self.header(b'$', (a.len() + b.len()) as i64);
        self.buf.extend_from_slice(a);
        self.buf.extend_from_slice(b);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// An integer sent as a bulk string (as Redis does for e.g. INCRBYFLOAT).
    pub fn bulk_int(&mut self, n: i64) {
        let mut ib = itoa::Buffer::new();
        let s = ib.format(n);
        self.bulk(s.as_bytes());
    }

    /// The null bulk string (`$-1`, or `_` in RESP3).
    pub fn null(&mut self) {
        if self.resp3 {
            self.buf.extend_from_slice(b"_\r\n");
        } else {
            self.buf.extend_from_slice(b"$-1\r\n");
        }
    }

    /// The null array (`*-1`, or `_` in RESP3).
    pub fn null_array(&mut self) {
        if self.resp3 {
            self.buf.extend_from_slice(b"_\r\n");
        } else {
            self.buf.extend_from_slice(b"*-1\r\n");
        }
    }

    /// The header of an array of `n` elements.
    pub fn array(&mut self, n: usize) {
        self.header(b'*', n as i64);
    }

    /// The header of a map of `n` pairs (a flat array of 2n in RESP2).
    pub fn map(&mut self, n: usize) {
        if self.resp3 {
            self.header(b'%', n as i64);
        } else {
            self.header(b'*', 2 * n as i64);
        }
    }

    /// The header of a set of `n` elements (an array in RESP2).
    pub fn set(&mut self, n: usize) {
        if self.resp3 {
            self.header(b'~', n as i64);
        } else {
            self.header(b'*', n as i64);
        }
    }

    /// The header of a push message of `n` elements (an array in RESP2).
    pub fn push(&mut self, n: usize) {
        if self.resp3 {
            self.header(b'>', n as i64);
        } else {
            self.header(b'*', n as i64);
        }
    }

    /// A double: `,x` in RESP3, a bulk string in RESP2, formatted `%.17g`.
    pub fn double(&mut self, d: f64) {
        let mut b = [0u8; MAX_DOUBLE_CHARS];
        let n = format_double(d, &mut b);
        if self.resp3 {
            self.buf.push(b',');
            self.buf.extend_from_slice(&b[..n]);
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(&b[..n]);
        }
    }

    /// A boolean: `#t`/`#f` in RESP3, `:1`/`:0` in RESP2.
    pub fn boolean(&mut self, v: bool) {
        if self.resp3 {
            self.buf
                .extend_from_slice(if v { b"#t\r\n" } else { b"#f\r\n" });
        } else {
            self.int(v as i64);
        }
    }

    /// Verbatim text (`=len\r\ntxt:...` in RESP3, a bulk string in RESP2).
    pub fn verbatim(&mut self, text: &[u8]) {
        if self.resp3 {
            self.header(b'=', text.len() as i64 + 4);
            self.buf.extend_from_slice(b"txt:");
            self.buf.extend_from_slice(text);
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(text);
        }
    }

    /// Appends bytes that are already valid RESP.
    pub fn raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }
}

/// Appends a frame of bulk strings, as commands travel (the AOF) and as
/// Pub/Sub messages and pushes go out: `head` (`*` for an array, `>` for a
/// RESP3 push; `None` to leave it to the caller), the count, then each
/// part as a bulk string.
pub fn write_bulk_frame<'a>(
    out: &mut Vec<u8>,
    head: Option<u8>,
    parts: impl ExactSizeIterator<Item = &'a [u8]>,
) {
    let mut num = itoa::Buffer::new();
    if let Some(h) = head {
        out.push(h);
    }
    out.extend_from_slice(num.format(parts.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    for p in parts {
        out.push(b'$');
        out.extend_from_slice(num.format(p.len()).as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(p);
        out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Ok,
        Simple(Vec<u8>),
        Error(String),
        Int(i64),
        Bulk(Vec<u8>),
        Null,
        NullArray,
        Double(f64),
        Bool(bool),
        Verbatim(Vec<u8>),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            Just(Op::Ok),
            proptest::collection::vec(any::<u8>(), 0..20).prop_map(Op::Simple),
            "[A-Z]{1,5} [ -~]{0,20}".prop_map(Op::Error),
            any::<i64>().prop_map(Op::Int),
            proptest::collection::vec(any::<u8>(), 0..40).prop_map(Op::Bulk),
            Just(Op::Null),
            Just(Op::NullArray),
            any::<f64>()
                .prop_filter("not nan", |d| !d.is_nan())
                .prop_map(Op::Double),
            any::<bool>().prop_map(Op::Bool),
            proptest::collection::vec(any::<u8>(), 0..20).prop_map(Op::Verbatim),
        ]
    }

    #[derive(Debug, Clone)]
    enum Tree {
        Leaf(Op),
        Array(Vec<Tree>),
        Map(Vec<(Tree, Tree)>),
        Set(Vec<Tree>),
    }

    /// Map keys and set members: the scalar types replies use there.
    fn key() -> impl Strategy<Value = Tree> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..20).prop_map(|b| Tree::Leaf(Op::Bulk(b))),
            any::<i64>().prop_map(|n| Tree::Leaf(Op::Int(n))),
            "[a-z]{1,8}".prop_map(|s| Tree::Leaf(Op::Simple(s.into_bytes()))),
        ]
    }

    fn tree() -> impl Strategy<Value = Tree> {
        op().prop_map(Tree::Leaf).prop_recursive(3, 32, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Tree::Array),
                proptest::collection::vec((key(), inner), 0..4).prop_map(Tree::Map),
                proptest::collection::vec(key(), 0..6).prop_map(Tree::Set),
            ]
        })
    }

    fn write(r: &mut Reply, t: &Tree) {
        match t {
            Tree::Leaf(op) => match op {
                Op::Ok => r.ok(),
                Op::Simple(s) => r.simple(s),
                Op::Error(e) => r.error(e),
                Op::Int(n) => r.int(*n),
                Op::Bulk(b) => r.bulk(b),
                Op::Null => r.null(),
                Op::NullArray => r.null_array(),
                Op::Double(d) => r.double(*d),
                Op::Bool(b) => r.boolean(*b),
                Op::Verbatim(v) => r.verbatim(v),
            },
            Tree::Array(items) => {
                r.array(items.len());
                items.iter().for_each(|i| write(r, i));
            }
            Tree::Set(items) => {
                r.set(items.len());
                items.iter().for_each(|i| write(r, i));
            }
            Tree::Map(pairs) => {
                r.map(pairs.len());
                for (k, v) in pairs {
                    write(r, k);
                    write(r, v);
                }
            }
        }
    }

    proptest! {
        /// Every reply the writer produces decodes as exactly one valid frame,
        /// in RESP2 and in RESP3, by an independent decoder.
        #[test]
        fn writer_emits_valid_resp(t in tree()) {
            let mut r2 = Reply::new(false);
            write(&mut r2, &t);
            let decoded = redis_protocol::resp2::decode::decode(&r2.buf);
            let (_, used) = decoded.expect("valid RESP2").expect("complete RESP2 frame");
            prop_assert_eq!(used, r2.buf.len());

            let mut r3 = Reply::new(true);
            write(&mut r3, &t);
            let decoded = redis_protocol::resp3::decode::complete::decode(&r3.buf);
            let (_, used) = decoded.expect("valid RESP3").expect("complete RESP3 frame");
            prop_assert_eq!(used, r3.buf.len());
        }
    }

    #[test]
    fn headers_and_doubles_byte_for_byte() {
        let mut r = Reply::new(false);
        for n in [0, 9, 10, 99, 100, -1, i64::MIN] {
            r.int(n);
        }
        r.bulk(&[b'x'; 10]);
        r.double(1.5);
        r.double(-1234567890.0);
        r.double(f64::INFINITY);
        r.double(0.1);
        let mut want =
            b":0\r\n:9\r\n:10\r\n:99\r\n:100\r\n:-1\r\n:-9223372036854775808\r\n".to_vec();
        want.extend_from_slice(b"$10\r\nxxxxxxxxxx\r\n$3\r\n1.5\r\n$11\r\n-1234567890\r\n");
        want.extend_from_slice(b"$3\r\ninf\r\n$19\r\n0.10000000000000001\r\n");
        assert_eq!(
            String::from_utf8_lossy(&r.buf),
            String::from_utf8_lossy(&want)
        );
        let mut r = Reply::new(true);
        r.double(1.5);
        r.double(-0.0);
        assert_eq!(r.buf, b",1.5\r\n,-0\r\n");
    }

    #[test]
    fn resp2_fallbacks() {
        let mut r = Reply::new(false);
        r.map(1);
        r.bulk(b"a");
        r.double(1.5);
        r.boolean(true);
        r.null();
        assert_eq!(r.buf, b"*2\r\n$1\r\na\r\n$3\r\n1.5\r\n:1\r\n$-1\r\n");
        let mut r = Reply::new(true);
        r.map(1);
        r.bulk(b"a");
        r.double(1.5);
        r.null();
        assert_eq!(r.buf, b"%1\r\n$1\r\na\r\n,1.5\r\n_\r\n");
    }
}
