//! Bitmap commands (SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD):
//! bitmaps are strings, stored compressed while sparse.

use super::table::CommandSpec;

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[];
