//! The Lua libraries Redis bundles for scripts, written for this server in
//! Rust: `bit` (LuaBitOp), `struct` (binary packing), `cjson` (JSON) and
//! `cmsgpack` (MessagePack). Each `create` returns the library's table.

pub mod bit;
pub mod cjson;
pub mod cmsgpack;
pub mod structlib;

/// A Lua error raised from a library function (`msg` as Lua shows it).
pub(crate) fn lua_error(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::RuntimeError(msg.into())
}
