//! `rostrum check-aof [--fix] FILE`: checks an AOF the way redis-check-aof
//! 7.0 does, prints the same report, and with `--fix` truncates the file
//! to its last valid command after asking. FILE is one file (commands,
//! with or without an RDB preamble) or a manifest
//! (`appendonlydir/appendonly.aof.manifest`): then the base and the incrs
//! it names are checked in order, and only the last may be fixed.

use std::fmt::Write as _;
use std::io::{BufRead, Write};
use std::path::Path;

use super::aofdir::Manifest;
use crate::engine::rdb::decode;
use crate::engine::rdb::Limits;

/// The result of checking a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// File size.
    pub size: u64,
    /// Bytes of valid commands from the start.
    pub ok_up_to: u64,
    /// Lines read (redis-check-aof's `ok_up_to_line`).
    pub ok_up_to_line: u64,
    /// The first problem, as redis-check-aof prints it.
    pub error: Option<String>,
}

impl Report {
    /// Bytes after the valid part.
    pub fn diff(&self) -> u64 {
        self.size - self.ok_up_to
    }
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    /// Start of the last read (where an error is reported).
    epos: usize,
    line: u64,
    error: Option<String>,
}

impl Reader<'_> {
    fn fail(&mut self, msg: String) -> bool {
        self.error = Some(format!("0x{:>16x}: {msg}", self.epos));
        false
    }

    fn newline(&mut self, at: usize) -> bool {
        match self.data.get(at..at + 2) {
            Some(b"\r\n") => {
                self.line += 1;
                true
            }
            other => {
                let got: String = other
                    .unwrap_or(&[])
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                self.fail(format!("Expected \\r\\n, got: {got}"))
            }
        }
    }

    /// A `<prefix><number>\r\n` line.
    fn long(&mut self, prefix: u8) -> Option<i64> {
        self.epos = self.pos;
        let rest = &self.data[self.pos..];
        if rest.is_empty() {
            return None;
        }
        // fgets reads at most 127 bytes or up to a newline.
        let end = rest
            .iter()
            .take(127)
            .position(|&b| b == b'\n')
            .map(|i| i + 1)
            .unwrap_or(rest.len().min(127));
        let line = &rest[..end];
        if line[0] != prefix {
            self.fail(format!(
                "Expected prefix '{}', got: '{}'",
                prefix as char, line[0] as char
            ));
            return None;
        }
        // strtol: optional sign and digits.
        let mut i = 1;
        if matches!(line.get(i), Some(b'-') | Some(b'+')) {
            i += 1;
        }
        while line.get(i).is_some_and(|b| b.is_ascii_digit()) {
            i += 1;
        }
        let n = std::str::from_utf8(&line[1..i])
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
            .unwrap_or(0);
        let at = self.pos + i;
        self.pos += end;
        if !self.newline(at) {
            return None;
        }
        Some(n)
    }

    fn string(&mut self) -> Option<&[u8]> {
        let len = self.long(b'$')?;
        if !(0..=i64::MAX - 2).contains(&len) {
            self.fail(format!(
                "Expected to read string of {len} bytes, which is not in the suitable range"
            ));
            return None;
        }
        let want = len as usize + 2;
        self.epos = self.pos;
        let got = (self.data.len() - self.pos).min(want);
        if got < want {
            self.pos += got;
            self.fail(format!("Expected to read {want} bytes, got {got} bytes"));
            return None;
        }
        let start = self.pos;
        self.pos += want;
        if !self.newline(start + len as usize) {
            return None;
        }
        Some(&self.data[start..start + len as usize])
    }
}

/// Checks AOF bytes; `ok_up_to` is where `--fix` would cut.
pub fn check_bytes(data: &[u8]) -> Report {
    check_from(data, 0)
}

/// Checks the commands of `data` from `start` (after an RDB preamble).
fn check_from(data: &[u8], start: usize) -> Report {
    let mut r = Reader {
        data,
        pos: start,
        epos: start,
        line: 1,
        error: None,
    };
    let mut ok = start;
    let mut multi = 0u32;
    'commands: loop {
        if multi == 0 {
            ok = r.pos;
        }
        if r.pos >= data.len() {
            break;
        }
        if data[r.pos] == b'#' {
            // Annotation line.
            match data[r.pos..].iter().position(|&b| b == b'\n') {
                Some(nl) => {
                    r.pos += nl + 1;
                    r.line += 1;
                    continue;
                }
                None => {
                    r.epos = r.pos;
                    r.fail("Reached EOF while reading an annotation".into());
                    break;
                }
            }
        }
        let Some(argc) = r.long(b'*') else {
            break;
        };
        for i in 0..argc {
            let Some(arg) = r.string() else {
                break 'commands;
            };
            if i == 0 {
                if arg.eq_ignore_ascii_case(b"multi") {
                    if multi > 0 {
                        r.fail("Unexpected MULTI".into());
                        break 'commands;
                    }
                    multi += 1;
                } else if arg.eq_ignore_ascii_case(b"exec") {
                    if multi != 1 {
                        r.fail("Unexpected EXEC".into());
                        break 'commands;
                    }
                    multi -= 1;
                }
            }
        }
    }
    if r.error.is_none() && multi > 0 {
        r.fail("Reached EOF before reading EXEC for MULTI".into());
    }
    Report {
        size: data.len() as u64,
        ok_up_to: ok as u64,
        ok_up_to_line: r.line,
        error: r.error,
    }
}

/// Whether `path` is a manifest (its first line that is not a comment
/// starts with `file`, as redis-check-aof tells).
fn is_manifest(path: &Path) -> bool {
    let Ok(text) = std::fs::read(path) else {
        return false;
    };
    text.split(|&b| b == b'\n')
        .find(|l| !l.starts_with(b"#"))
        .is_some_and(|l| l.starts_with(b"file"))
}

/// Runs `check-aof`: prints the report to `out`; with `fix`, asks on
/// `input` and truncates. Returns the process exit code.
pub fn run(path: &Path, fix: bool, input: &mut dyn BufRead, out: &mut dyn Write) -> i32 {
    if is_manifest(path) {
        return run_manifest(path, fix, input, out);
    }
    let _ = writeln!(out, "Start checking Old-Style AOF");
    check_file(path, fix, input, out)
}

/// Checks every file a manifest names: the base, then the incrs in order.
fn run_manifest(path: &Path, fix: bool, input: &mut dyn BufRead, out: &mut dyn Write) -> i32 {
    let _ = writeln!(out, "Start checking Multi Part AOF");
    let text = match std::fs::read(path) {
        Ok(t) => String::from_utf8_lossy(&t).into_owned(),
        Err(e) => {
            let _ = writeln!(out, "Cannot open file {}: {e}", path.display());
            return 1;
        }
    };
    let m = match Manifest::parse(&text) {
        Ok(m) => m,
        Err(e) => {
            let _ = writeln!(out, "{e}");
            return 1;
        }
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let files: Vec<_> = m.load_order().collect();
    for (i, f) in files.iter().enumerate() {
        let last = i + 1 == files.len();
        let kind = if m.base.as_ref() == Some(*f) {
            "BASE"
        } else {
            "INCR"
        };
        let _ = writeln!(out, "Start to check {kind} AOF {}.", f.name);
        // Only the last file may be cut (what a crash leaves).
        let code = check_file(&dir.join(&f.name), fix && last, input, out);
        if code != 0 {
            return code;
        }
    }
    let _ = writeln!(out, "All AOF files and manifest are valid");
    0
}

/// Checks one file (commands, with or without an RDB preamble).
fn check_file(path: &Path, fix: bool, input: &mut dyn BufRead, out: &mut dyn Write) -> i32 {
    let name = path.display().to_string();
    let data = match std::fs::read(path) {
        Ok(d) => d,
        Err(e) => {
            let _ = writeln!(out, "Cannot open file {name}: {e}");
            return 1;
        }
    };
    let mut start = 0;
    if data.starts_with(b"REDIS") {
        let _ = writeln!(
            out,
            "The AOF appears to start with an RDB preamble.\nChecking the RDB preamble to start:"
        );
        match decode::read_file(&data, usize::MAX, 0, &Limits::default()) {
            Ok(loaded) => {
                let _ = writeln!(
                    out,
                    "[info] {} keys read\nRDB preamble is OK, proceeding with AOF tail...",
                    loaded.keys.len()
                );
                start = loaded.end as usize;
            }
            Err(e) => {
                let _ = writeln!(
                    out,
                    "--- RDB ERROR DETECTED ---\n[offset {}] {}\nRDB preamble of AOF file is not sane, aborting.",
                    e.offset, e.what
                );
                return 1;
            }
        }
    }
    let rep = check_from(&data, start);
    let mut text = String::new();
    if let Some(e) = &rep.error {
        let _ = writeln!(text, "{e}");
    }
    let _ = writeln!(
        text,
        "AOF analyzed: filename={name}, size={}, ok_up_to={}, ok_up_to_line={}, diff={}",
        rep.size,
        rep.ok_up_to,
        rep.ok_up_to_line,
        rep.diff()
    );
    let _ = out.write_all(text.as_bytes());
    if rep.diff() == 0 && rep.error.is_none() {
        let _ = writeln!(out, "AOF {name} is valid");
        return 0;
    }
    if !fix {
        let _ = writeln!(
            out,
            "AOF {name} is not valid. Use the --fix option to try fixing it."
        );
        return 1;
    }
    let _ = writeln!(
        out,
        "This will shrink the AOF {name} from {} bytes, with {} bytes, to {} bytes",
        rep.size,
        rep.diff(),
        rep.ok_up_to
    );
    let _ = write!(out, "Continue? [y/N]: ");
    let _ = out.flush();
    let mut answer = String::new();
    if input.read_line(&mut answer).is_err()
        || !answer.trim_start().to_ascii_lowercase().starts_with('y')
    {
        let _ = writeln!(out, "Aborting...");
        return 1;
    }
    let cut = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|f| {
            f.set_len(rep.ok_up_to)?;
            f.sync_all()
        });
    match cut {
        Ok(()) => {
            let _ = writeln!(out, "Successfully truncated AOF {name}");
            0
        }
        Err(e) => {
            let _ = writeln!(out, "Failed to truncate AOF {name}: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Reports compared with redis-check-aof 7.0.15 on the same bytes.
    #[test]
    fn reports_like_redis_check_aof() {
        let ok = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n";
        let r = check_bytes(ok);
        assert_eq!((r.ok_up_to, r.error.clone()), (50, None));

        let mut t = ok.to_vec();
        t.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$2\r\n2");
        let r = check_bytes(&t);
        assert_eq!((r.size, r.ok_up_to, r.ok_up_to_line), (75, 50, 19));
        assert_eq!(
            r.error.as_deref(),
            Some("0x              4a: Expected to read 4 bytes, got 1 bytes")
        );

        let mut c = ok.to_vec();
        c.extend_from_slice(b"*3\r\n$3\r\nSET\r\nxx\r\n$1\r\nb\r\n$2\r\n22\r\n");
        let r = check_bytes(&c);
        assert_eq!((r.ok_up_to, r.ok_up_to_line), (50, 16));
        assert_eq!(
            r.error.as_deref(),
            Some("0x              3f: Expected prefix '$', got: 'x'")
        );

        let m = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n";
        let r = check_bytes(m);
        assert_eq!((r.ok_up_to, r.ok_up_to_line), (23, 16));
        assert_eq!(
            r.error.as_deref(),
            Some("0x              3e: Reached EOF before reading EXEC for MULTI")
        );

        let x = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1xx*1\r\n";
        let r = check_bytes(x);
        assert_eq!((r.ok_up_to, r.ok_up_to_line), (23, 12));
        assert_eq!(
            r.error.as_deref(),
            Some("0x              2f: Expected \\r\\n, got: 7878")
        );
    }
}
