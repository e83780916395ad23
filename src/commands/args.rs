//! Small argument parsers shared by every family: integers and floats with
//! Redis's error lines, option words matched case-insensitively.

use crate::error::CmdError;
use crate::protocol::number;

/// An integer argument (`ERR value is not an integer or out of range`).
pub fn int(arg: &[u8]) -> Result<i64, CmdError> {
    number::parse_i64(arg).ok_or(CmdError::NotInteger)
}

/// A non-negative integer argument with a custom error.
pub fn int_with(arg: &[u8], err: impl FnOnce() -> CmdError) -> Result<i64, CmdError> {
    number::parse_i64(arg).ok_or_else(err)
}

/// A double argument (`ERR value is not a valid float`).
pub fn float(arg: &[u8]) -> Result<f64, CmdError> {
    number::parse_f64(arg).ok_or(CmdError::NotFloat)
}

/// Whether `arg` is the option word `word` (ASCII case-insensitive).
pub fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// A lossy UTF-8 rendering for error messages.
pub fn text(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).into_owned()
}
