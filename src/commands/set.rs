//! Set commands (SADD, SMEMBERS, SINTER, ...).

use super::table::CommandSpec;

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[];
