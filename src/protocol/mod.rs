//! The wire: requests in (our own incremental parser) and replies out (one
//! writer for RESP2 and RESP3), plus the number formats Redis uses on it.
//! Nothing here knows about commands or data.

pub mod number;
pub mod reply;
pub mod request;

pub use number::{format_double, parse_f64, parse_i64};
pub use reply::{write_bulk_frame, Reply};
pub use request::{Limits, Parsed, ProtocolError, RequestParser};
