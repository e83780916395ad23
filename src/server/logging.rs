//! Where the log goes: `logfile` (a path; empty: standard output, as
//! redis-server), reopened on SIGHUP so that logrotate can rename the file
//! and have the server write a fresh one; or the system log when
//! `syslog-enabled yes` (datagrams to `/dev/log`, tagged with
//! `syslog-ident` under `syslog-facility`). Colours only when the log goes
//! to a terminal.

use std::io::{IsTerminal, Write};
use std::os::unix::net::UnixDatagram;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

/// The facilities `syslog-facility` accepts, with their numbers.
const FACILITIES: &[(&str, u8)] = &[
    ("user", 1),
    ("local0", 16),
    ("local1", 17),
    ("local2", 18),
    ("local3", 19),
    ("local4", 20),
    ("local5", 21),
    ("local6", 22),
    ("local7", 23),
];

/// The facility number of a `syslog-facility` value.
pub fn facility(name: &str) -> Option<u8> {
    FACILITIES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, f)| *f)
}

enum Target {
    Stdout,
    File {
        path: String,
        file: std::fs::File,
    },
    Syslog {
        socket: UnixDatagram,
        prefix: String,
    },
}

/// The log's destination, shared by every thread's writer.
pub struct Sink {
    target: Mutex<Target>,
}

static SINK: OnceLock<Arc<Sink>> = OnceLock::new();

fn open_append(path: &str) -> Result<std::fs::File, String> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("Can't open the log file: {e}"))
}

/// What `logfile` and `syslog-*` ask for.
pub struct Settings<'a> {
    /// The `logfile` path; empty for standard output.
    pub logfile: &'a str,
    /// `syslog-enabled`.
    pub syslog: bool,
    /// `syslog-ident`.
    pub ident: &'a str,
    /// `syslog-facility`.
    pub facility: &'a str,
    /// The tracing filter (from `loglevel`).
    pub filter: &'a str,
}

/// Installs the log: returns an error line when the file cannot be opened
/// or the system log cannot be reached.
pub fn init(s: &Settings<'_>) -> Result<(), String> {
    let (target, ansi) = if s.syslog {
        let fac = facility(s.facility)
            .ok_or_else(|| format!("Invalid syslog-facility '{}'", s.facility))?;
        let socket = UnixDatagram::unbound()
            .and_then(|u| u.connect("/dev/log").map(|()| u))
            .map_err(|e| format!("syslog-enabled yes, but /dev/log can't be reached: {e}"))?;
        // <priority>: facility * 8 + severity (6: informational).
        let prefix = format!(
            "<{}>{}[{}]: ",
            fac as u32 * 8 + 6,
            s.ident,
            std::process::id()
        );
        (Target::Syslog { socket, prefix }, false)
    } else if s.logfile.is_empty() {
        (Target::Stdout, std::io::stdout().is_terminal())
    } else {
        let file = open_append(s.logfile)?;
        (
            Target::File {
                path: s.logfile.to_string(),
                file,
            },
            false,
        )
    };
    let sink = Arc::new(Sink {
        target: Mutex::new(target),
    });
    let _ = SINK.set(sink.clone());
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(s.filter));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(ansi)
        .with_writer(move || Writer(sink.clone()))
        .init();
    Ok(())
}

/// SIGHUP: reopens `logfile` by its path (after logrotate renamed it, the
/// log goes to a fresh file of that name). Nothing to do for standard
/// output or the system log.
pub fn reopen() {
    let Some(sink) = SINK.get() else {
        return;
    };
    let mut t = sink.target.lock();
    if let Target::File { path, file } = &mut *t {
        match open_append(path) {
            Ok(f) => *file = f,
            Err(e) => {
                let _ = writeln!(file, "{e}");
            }
        }
    }
}

/// One log record's writer: what tracing writes goes to the sink.
struct Writer(Arc<Sink>);

impl Write for Writer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut t = self.0.target.lock();
        match &mut *t {
            Target::Stdout => std::io::stdout().lock().write_all(buf)?,
            Target::File { file, .. } => file.write_all(buf)?,
            Target::Syslog { socket, prefix } => {
                let mut msg = prefix.as_bytes().to_vec();
                msg.extend_from_slice(buf.strip_suffix(b"\n").unwrap_or(buf));
                // The system log may be gone for a while: drop the line.
                let _ = socket.send(&msg);
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facilities() {
        assert_eq!(facility("user"), Some(1));
        assert_eq!(facility("LOCAL7"), Some(23));
        assert_eq!(facility("kern"), None);
    }
}
