//! The text around Lua code: a library's `#!lua name=<lib>` header, an EVAL
//! script's `#!lua flags=...` shebang, and the FUNCTION DUMP payload.
//!
//! The payload is Rostrum's own format, not Redis's (which is RDB-based):
//! `RFUN` and a version byte, then each library's code as a 4-byte
//! big-endian length and the bytes, then the first 8 bytes of the SHA1 of
//! everything before them. DUMP then RESTORE round-trips on Rostrum; a
//! payload from Redis is refused as a wrong version/checksum, as Redis
//! would refuse a damaged one.

use crate::error::CmdError;
use crate::protocol::request::split_args;

/// Flags a function (or a scripted shebang) can declare.
pub const FLAG_NAMES: &[&str] = &[
    "no-writes",
    "allow-oom",
    "allow-stale",
    "no-cluster",
    "allow-cross-slot-keys",
];

/// A library's header: its name, and where its code starts (the newline
/// ending the header, so that line numbers count the header line).
#[derive(Debug, PartialEq, Eq)]
pub struct Header {
    /// Library name.
    pub name: String,
    /// Offset of the code in the text.
    pub code_at: usize,
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The error for a bad library or function name.
pub fn bad_name() -> CmdError {
    CmdError::err("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long")
}

/// Parses the `#!<engine> name=<lib>` first line of FUNCTION LOAD's text.
pub fn parse_header(code: &[u8]) -> Result<Header, CmdError> {
    if !code.starts_with(b"#!") {
        return Err(CmdError::err("Missing library metadata"));
    }
    let Some(nl) = code.iter().position(|&b| b == b'\n') else {
        return Err(CmdError::err("Invalid library metadata"));
    };
    let parts = split_args(&code[..nl]).ok_or_else(|| CmdError::err("Invalid library metadata"))?;
    let Some(first) = parts.first() else {
        return Err(CmdError::err("Invalid library metadata"));
    };
    let engine = String::from_utf8_lossy(first.get(2..).unwrap_or(b"")).into_owned();
    let mut name: Option<String> = None;
    for p in parts.iter().skip(1) {
        let text = String::from_utf8_lossy(p);
        match text.strip_prefix("name=") {
            Some(n) => {
                if name.is_some() {
                    return Err(CmdError::err(
                        "Invalid metadata value, name argument was given multiple times",
                    ));
                }
                name = Some(n.to_string());
            }
            None => {
                return Err(CmdError::err(format!(
                    "Invalid metadata value given: {text}"
                )))
            }
        }
    }
    let Some(name) = name else {
        return Err(CmdError::err("Library name was not given"));
    };
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(CmdError::err(format!("Engine '{engine}' not found")));
    }
    if !valid_name(&name) {
        return Err(bad_name());
    }
    Ok(Header { name, code_at: nl })
}

/// What an EVAL script's shebang declares.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Shebang {
    /// Whether the script has a shebang (otherwise it runs in the legacy
    /// mode: any command allowed, writes checked one by one under EVAL_RO).
    pub present: bool,
    /// `flags=no-writes`.
    pub no_writes: bool,
    /// Offset of the code in the body.
    pub code_at: usize,
}

/// Parses an EVAL script's optional `#!lua [flags=a,b]` first line.
pub fn parse_shebang(body: &[u8]) -> Result<Shebang, CmdError> {
    if !body.starts_with(b"#!") {
        return Ok(Shebang::default());
    }
    let Some(nl) = body.iter().position(|&b| b == b'\n') else {
        return Err(CmdError::err("Invalid script shebang"));
    };
    let parts = split_args(&body[..nl]).ok_or_else(|| CmdError::err("Invalid script shebang"))?;
    let first = parts.first().map(|p| p.as_slice()).unwrap_or(b"");
    if first != b"#!lua" {
        return Err(CmdError::err(format!(
            "Unexpected engine in script shebang: {}",
            String::from_utf8_lossy(first)
        )));
    }
    let mut sb = Shebang {
        present: true,
        no_writes: false,
        code_at: nl,
    };
    for p in parts.iter().skip(1) {
        let text = String::from_utf8_lossy(p);
        let Some(list) = text.strip_prefix("flags=") else {
            return Err(CmdError::err(format!("Unknown lua shebang option: {text}")));
        };
        for flag in list.split(',').filter(|f| !f.is_empty()) {
            if !FLAG_NAMES.contains(&flag) {
                return Err(CmdError::err(format!(
                    "Unexpected flag in script shebang: {flag}"
                )));
            }
            if flag == "no-writes" {
                sb.no_writes = true;
            }
        }
    }
    Ok(sb)
}

const MAGIC: &[u8] = b"RFUN";
const VERSION: u8 = 1;

fn checksum(data: &[u8]) -> [u8; 8] {
    let digest = sha1_smol::Sha1::from(data).digest().bytes();
    let mut c = [0u8; 8];
    c.copy_from_slice(&digest[..8]);
    c
}

/// FUNCTION DUMP's payload for these libraries' codes.
pub fn dump(codes: &[Vec<u8>]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.push(VERSION);
    for c in codes {
        out.extend_from_slice(&(c.len() as u32).to_be_bytes());
        out.extend_from_slice(c);
    }
    let sum = checksum(&out);
    out.extend_from_slice(&sum);
    out
}

/// The libraries' codes in a FUNCTION RESTORE payload.
pub fn undump(payload: &[u8]) -> Result<Vec<Vec<u8>>, CmdError> {
    let wrong = || CmdError::err("DUMP payload version or checksum are wrong");
    if payload.len() < MAGIC.len() + 1 + 8 {
        return Err(wrong());
    }
    let (body, sum) = payload.split_at(payload.len() - 8);
    if checksum(body) != sum || !body.starts_with(MAGIC) || body.get(MAGIC.len()) != Some(&VERSION)
    {
        return Err(wrong());
    }
    let mut rest = &body[MAGIC.len() + 1..];
    let mut codes = Vec::new();
    while !rest.is_empty() {
        let (len, tail) = rest
            .split_at_checked(4)
            .ok_or_else(|| CmdError::err("payload is corrupted"))?;
        let n = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
        let (code, tail) = tail
            .split_at_checked(n)
            .ok_or_else(|| CmdError::err("payload is corrupted"))?;
        codes.push(code.to_vec());
        rest = tail;
    }
    Ok(codes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers() {
        let h = parse_header(b"#!lua name=mylib\nreturn 1").unwrap();
        assert_eq!(h.name, "mylib");
        assert_eq!(h.code_at, 16);
        assert!(parse_header(b"#!LUA  name=x \n").is_ok());
        let err = |c: &[u8]| parse_header(c).unwrap_err().to_string();
        assert_eq!(err(b"return 1"), "ERR Missing library metadata");
        assert_eq!(err(b"#!lua name=x"), "ERR Invalid library metadata");
        assert_eq!(err(b"#!js name=x\n"), "ERR Engine 'js' not found");
        assert_eq!(err(b"#!lua\n"), "ERR Library name was not given");
        assert_eq!(
            err(b"#!lua name=a b=1\n"),
            "ERR Invalid metadata value given: b=1"
        );
        assert_eq!(
            err(b"#!lua name=a name=b\n"),
            "ERR Invalid metadata value, name argument was given multiple times"
        );
        assert!(err(b"#!lua name=a-b\n").starts_with("ERR Library names can only"));
    }

    #[test]
    fn shebangs() {
        assert!(!parse_shebang(b"return 1").unwrap().present);
        let s = parse_shebang(b"#!lua flags=no-writes,allow-oom\nreturn 1").unwrap();
        assert!(s.present && s.no_writes);
        let err = |c: &[u8]| parse_shebang(c).unwrap_err().to_string();
        assert_eq!(
            err(b"#!js\n"),
            "ERR Unexpected engine in script shebang: #!js"
        );
        assert_eq!(
            err(b"#!lua name=x\n"),
            "ERR Unknown lua shebang option: name=x"
        );
        assert_eq!(
            err(b"#!lua flags=bogus\n"),
            "ERR Unexpected flag in script shebang: bogus"
        );
    }

    #[test]
    fn dump_round_trips_and_detects_damage() {
        let codes = vec![b"#!lua name=a\n".to_vec(), b"#!lua name=b\nx".to_vec()];
        let p = dump(&codes);
        assert_eq!(undump(&p).unwrap(), codes);
        let mut bad = p.clone();
        bad[6] ^= 1;
        assert!(undump(&bad).is_err());
        assert!(undump(b"x").is_err());
    }
}
