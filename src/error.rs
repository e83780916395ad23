//! Errors as values: one enum whose `Display` is the exact Redis error line
//! (code and message, without the leading `-`).

use std::borrow::Cow;
use std::fmt;

/// The result of a command handler.
pub type CmdResult = Result<(), CmdError>;

/// A command error, printed exactly as Redis prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CmdError {
    /// `WRONGTYPE Operation against a key holding the wrong kind of value`
    WrongType,
    /// `ERR syntax error`
    Syntax,
    /// `ERR value is not an integer or out of range`
    NotInteger,
    /// `ERR value is not a valid float`
    NotFloat,
    /// `ERR increment or decrement would overflow`
    Overflow,
    /// `ERR no such key`
    NoSuchKey,
    /// `ERR DB index is out of range`
    DbIndexOutOfRange,
    /// `ERR wrong number of arguments for '<name>' command`
    WrongArity(String),
    /// `ERR unknown command '<name>', with args beginning with: ...`
    /// (raw bytes: Redis echoes the name as sent, up to a NUL byte).
    UnknownCommand { name: Vec<u8>, args: Vec<u8> },
    /// `ERR unknown subcommand '<sub>'. Try <CMD> HELP.`
    UnknownSubcommand { command: String, sub: Vec<u8> },
    /// `NOAUTH Authentication required.`
    NoAuth,
    /// Any other error: the full line, code included (e.g. `ERR ...`).
    Other(Cow<'static, str>),
}

impl CmdError {
    /// An `ERR <msg>` error.
    pub fn err(msg: impl Into<String>) -> Self {
        CmdError::Other(Cow::Owned(format!("ERR {}", msg.into())))
    }

    /// A full error line with its own code (`BUSYKEY ...`, `EXECABORT ...`).
    pub fn line(line: impl Into<Cow<'static, str>>) -> Self {
        CmdError::Other(line.into())
    }

    /// The unknown-command error for `args` (argument 0 is the name), built
    /// as Redis's `%.128s` formats would: each string cut at a NUL byte.
    pub fn unknown_command(args: &[&[u8]]) -> Self {
        let name = c_str(args.first().copied().unwrap_or(b""), 128).to_vec();
        let mut rest = Vec::new();
        for a in args.iter().skip(1) {
            if rest.len() >= 128 {
                break;
            }
            let room = 128 - rest.len();
            rest.push(b'\'');
            rest.extend_from_slice(c_str(a, room));
            rest.extend_from_slice(b"' ");
        }
        CmdError::UnknownCommand { name, args: rest }
    }

    /// The unknown-subcommand error for container `command`.
    pub fn unknown_subcommand(command: &str, sub: &[u8]) -> Self {
        CmdError::UnknownSubcommand {
            command: command.to_ascii_uppercase(),
            sub: c_str(sub, 128).to_vec(),
        }
    }

    /// The error line as bytes (the reply writer sends these; names echoed
    /// from the client are kept byte for byte).
    pub fn line_bytes(&self) -> Vec<u8> {
        match self {
            CmdError::UnknownCommand { name, args } => {
                let mut v = b"ERR unknown command '".to_vec();
                v.extend_from_slice(name);
                v.extend_from_slice(b"', with args beginning with: ");
                v.extend_from_slice(args);
                v
            }
            CmdError::UnknownSubcommand { command, sub } => {
                let mut v = b"ERR unknown subcommand '".to_vec();
                v.extend_from_slice(sub);
                v.extend_from_slice(format!("'. Try {command} HELP.").as_bytes());
                v
            }
            other => other.to_string().into_bytes(),
        }
    }

    /// The error code: the first word of the line (for `INFO errorstats`).
    pub fn code(&self) -> String {
        let line = self.to_string();
        line.split(' ').next().unwrap_or("ERR").to_string()
    }
}

/// `s` as C's `%.*s` would print it: up to the first NUL, at most `max`.
fn c_str(s: &[u8], max: usize) -> &[u8] {
    let end = s.iter().position(|&b| b == 0).unwrap_or(s.len()).min(max);
    &s[..end]
}

impl fmt::Display for CmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CmdError::WrongType => {
                f.write_str("WRONGTYPE Operation against a key holding the wrong kind of value")
            }
            CmdError::Syntax => f.write_str("ERR syntax error"),
            CmdError::NotInteger => f.write_str("ERR value is not an integer or out of range"),
            CmdError::NotFloat => f.write_str("ERR value is not a valid float"),
            CmdError::Overflow => f.write_str("ERR increment or decrement would overflow"),
            CmdError::NoSuchKey => f.write_str("ERR no such key"),
            CmdError::DbIndexOutOfRange => f.write_str("ERR DB index is out of range"),
            CmdError::WrongArity(name) => {
                write!(f, "ERR wrong number of arguments for '{name}' command")
            }
            CmdError::UnknownCommand { .. } | CmdError::UnknownSubcommand { .. } => {
                f.write_str(&String::from_utf8_lossy(&self.line_bytes()))
            }
            CmdError::NoAuth => f.write_str("NOAUTH Authentication required."),
            CmdError::Other(line) => f.write_str(line),
        }
    }
}

impl std::error::Error for CmdError {}
