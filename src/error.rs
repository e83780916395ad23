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
    UnknownCommand { name: String, args: String },
    /// `ERR unknown subcommand '<sub>'. Try <CMD> HELP.`
    UnknownSubcommand { command: String, sub: String },
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

    /// The unknown-command error for `args` (argument 0 is the name).
    pub fn unknown_command(args: &[&[u8]]) -> Self {
        let name = String::from_utf8_lossy(args.first().copied().unwrap_or(b"")).into_owned();
        let mut rest = String::new();
        for a in args.iter().skip(1) {
            if rest.len() >= 128 {
                break;
            }
            let room = 128 - rest.len();
            let s = String::from_utf8_lossy(a);
            let cut: String = truncate_bytes(&s, room);
            rest.push('\'');
            rest.push_str(&cut);
            rest.push_str("' ");
        }
        CmdError::UnknownCommand {
            name: truncate_bytes(&name, 128),
            args: rest,
        }
    }

    /// The error code: the first word of the line (for `INFO errorstats`).
    pub fn code(&self) -> String {
        let line = self.to_string();
        line.split(' ').next().unwrap_or("ERR").to_string()
    }
}

fn truncate_bytes(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
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
            CmdError::UnknownCommand { name, args } => {
                write!(
                    f,
                    "ERR unknown command '{name}', with args beginning with: {args}"
                )
            }
            CmdError::UnknownSubcommand { command, sub } => {
                write!(f, "ERR unknown subcommand '{sub}'. Try {command} HELP.")
            }
            CmdError::NoAuth => f.write_str("NOAUTH Authentication required."),
            CmdError::Other(line) => f.write_str(line),
        }
    }
}

impl std::error::Error for CmdError {}
