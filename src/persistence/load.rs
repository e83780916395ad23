//! Start-up: replays the AOF through the dispatcher with a fake client
//! (replies dropped), before any client is accepted.
//!
//! A truncated last command (a crash mid-write) is dropped and the file cut
//! to the last whole command when `aof-load-truncated` is on (as is an
//! unfinished MULTI at the end); anything else that is not a well-formed
//! command stops the start with an error naming the byte offset.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Buf, BytesMut};

use crate::commands;
use crate::protocol::{Limits, Parsed, Reply, RequestParser};
use crate::server::client::{ClientInfo, ClientState};
use crate::server::state::{unix_ms, Server};

/// Bytes read from the file at a time.
const READ_CHUNK: usize = 4 << 20;

/// What a load did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// Commands run.
    pub commands: u64,
    /// Bytes of whole commands (the file size after any truncation).
    pub bytes: u64,
    /// The size of a truncated file before it was cut, if it was.
    pub truncated_from: Option<u64>,
}

fn bad_format(path: &Path, offset: u64, why: &str) -> String {
    format!(
        "Bad file format reading the append only file {} at byte offset {offset} ({why}): \
         make a backup of your AOF file, then use rostrum check-aof --fix {}",
        path.display(),
        path.display()
    )
}

/// Replays the AOF at `path` into the server's keyspace.
pub fn load_file(server: &Server, path: &Path, load_truncated: bool) -> Result<Loaded, String> {
    let started = Instant::now();
    let mut file = File::open(path)
        .map_err(|e| format!("Can't open the append-only file {}: {e}", path.display()))?;
    let total = file.metadata().map(|m| m.len()).unwrap_or(0);
    if total == 0 {
        return Ok(Loaded {
            commands: 0,
            bytes: 0,
            truncated_from: None,
        });
    }
    tracing::info!("Reading the AOF file {} ({total} bytes)", path.display());
    let info = Arc::new(ClientInfo::new(0, String::new(), String::new(), unix_ms()));
    let mut client = ClientState::new(info, true);
    client.deny_blocking = true;
    let mut out = Reply::new(false);
    let mut parser = RequestParser::new();
    let limits = Limits::default();
    let mut rbuf = BytesMut::with_capacity(READ_CHUNK);
    // File offset of rbuf[0]: everything before it was whole commands.
    let mut offset: u64 = 0;
    // Where the open MULTI started, if one is open.
    let mut multi_at: Option<u64> = None;
    let mut commands_run: u64 = 0;
    let mut eof = false;
    let mut last_log = Instant::now();
    loop {
        // Run every whole command in the buffer.
        loop {
            if !parser.in_progress() {
                match rbuf.first() {
                    None => break,
                    Some(b'#') => {
                        // An annotation line (Redis 7 writes `#TS:...`).
                        match rbuf.iter().position(|&b| b == b'\n') {
                            Some(nl) => {
                                rbuf.advance(nl + 1);
                                offset += nl as u64 + 1;
                                continue;
                            }
                            None => break,
                        }
                    }
                    Some(b'*') => {}
                    Some(_) if offset == 0 && rbuf.starts_with(b"REDIS") => {
                        return Err(format!(
                            "The AOF file {} starts with an RDB preamble, which Rostrum can't load",
                            path.display()
                        ));
                    }
                    Some(_) => return Err(bad_format(path, offset, "expected '*'")),
                }
            }
            match parser.parse(&rbuf, &limits) {
                Ok(None) => break,
                Ok(Some(Parsed::Skip { .. })) => {
                    return Err(bad_format(path, offset, "empty command"));
                }
                Ok(Some(Parsed::Command { consumed })) => {
                    {
                        let args = parser.args(&rbuf);
                        if let Err(e) = commands::resolve(&args) {
                            return Err(bad_format(path, offset, &e.to_string()));
                        }
                        let is_multi = args
                            .first()
                            .is_some_and(|a| a.eq_ignore_ascii_case(b"multi"));
                        if is_multi && client.multi.is_none() {
                            multi_at = Some(offset);
                        }
                        commands::execute(server, &mut client, &mut out, &args);
                        if client.multi.is_none() {
                            multi_at = None;
                        }
                    }
                    out.buf.clear();
                    rbuf.advance(consumed);
                    offset += consumed as u64;
                    commands_run += 1;
                }
                Err(e) => return Err(bad_format(path, offset, &e.0)),
            }
        }
        if eof {
            break;
        }
        if last_log.elapsed().as_secs() >= 1 {
            last_log = Instant::now();
            tracing::info!(
                "Loading the AOF: {offset} of {total} bytes ({:.1}%)",
                offset as f64 * 100.0 / total as f64
            );
        }
        rbuf.reserve(READ_CHUNK);
        let start = rbuf.len();
        rbuf.resize(start + READ_CHUNK, 0);
        let n = loop {
            match file.read(&mut rbuf[start..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(format!(
                        "Error reading the append only file {}: {e}",
                        path.display()
                    ))
                }
            }
        };
        rbuf.truncate(start + n);
        if n == 0 {
            eof = true;
        }
    }
    // What is left is a command cut short, or a MULTI without its EXEC.
    let whole = multi_at.unwrap_or(offset);
    let mut truncated_from = None;
    if whole < total {
        if multi_at.is_some() {
            tracing::warn!("Revert incomplete MULTI/EXEC transaction in AOF file");
        }
        tracing::warn!(
            "!!! Warning: short read while loading the AOF file {}!!!",
            path.display()
        );
        if !load_truncated {
            return Err(format!(
                "Unexpected end of file reading the append only file {} (the last whole command ends at byte offset {whole}). \
                 You can: 1) Make a backup of your AOF file, then use rostrum check-aof --fix <filename>. \
                 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server.",
                path.display()
            ));
        }
        tracing::warn!("!!! Truncating the AOF at offset {whole} !!!");
        OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|f| {
                f.set_len(whole)?;
                f.sync_all()
            })
            .map_err(|e| {
                format!(
                    "Error truncating the AOF file {} to {whole} bytes: {e}",
                    path.display()
                )
            })?;
        tracing::warn!("AOF loaded anyway because aof-load-truncated is enabled");
        truncated_from = Some(total);
    }
    let secs = started.elapsed().as_secs_f64();
    tracing::info!(
        "DB loaded from append only file: {secs:.3} seconds ({:.1} MB/s, {:.0} commands/s)",
        whole as f64 / 1e6 / secs.max(1e-9),
        commands_run as f64 / secs.max(1e-9)
    );
    Ok(Loaded {
        commands: commands_run,
        bytes: whole,
        truncated_from,
    })
}
