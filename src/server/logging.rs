//! Where the log goes: `logfile` (a path; empty: standard output, as
//! redis-server), reopened on SIGHUP so that logrotate can rename the file
//! and have the server write a fresh one; or the system log when
//! `syslog-enabled yes` (datagrams to `/dev/log` as glibc's `syslog(3)`
//! sends redis-server's: `<priority>Mmm dd hh:mm:ss ident[pid]: message`,
//! the priority being `syslog-facility` and the record's level). Colours
//! only when the log goes to a terminal.

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
        /// `syslog-facility`'s number times 8.
        facility: u32,
        /// `syslog-ident[pid]: `.
        tag: String,
    },
}

/// The syslog severity of a record of `level`, as redis-server maps its
/// own levels (warning: LOG_WARNING, notice: LOG_NOTICE, verbose:
/// LOG_INFO, debug: LOG_DEBUG); Rostrum logs `notice` and `verbose` at
/// INFO.
fn severity(level: &tracing::Level) -> u32 {
    match *level {
        tracing::Level::ERROR | tracing::Level::WARN => 4,
        tracing::Level::INFO => 5,
        tracing::Level::DEBUG => 6,
        tracing::Level::TRACE => 7,
    }
}

/// Local time as glibc's syslog writes it (`%h %e %T`: `Nov  4 21:37:02`).
fn syslog_time(unix_s: i64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let t: libc::time_t = unix_s as libc::time_t;
    // SAFETY: `tm` is a plain C struct for which all-zero bytes are a
    // valid value; localtime_r reads `t` and writes only into `tm`, both
    // live locals, and is thread-safe (unlike localtime).
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&t, &mut tm).is_null() {
            return String::from("Jan  1 00:00:00");
        }
        tm
    };
    format!(
        "{} {:>2} {:02}:{:02}:{:02}",
        MONTHS[tm.tm_mon.clamp(0, 11) as usize],
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
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
        let tag = format!("{}[{}]: ", s.ident, std::process::id());
        let facility = fac as u32 * 8;
        (
            Target::Syslog {
                socket,
                facility,
                tag,
            },
            false,
        )
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
    let make = MakeWriter(sink);
    if s.syslog {
        // The system log stamps the time; the level is in the priority.
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_target(false)
            .with_ansi(false)
            .without_time()
            .with_level(false)
            .with_writer(make)
            .init();
    } else {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_target(false)
            .with_ansi(ansi)
            .with_writer(make)
            .init();
    }
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

/// Makes each record's [`Writer`], knowing the record's level.
struct MakeWriter(Arc<Sink>);

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for MakeWriter {
    type Writer = Writer;

    fn make_writer(&'a self) -> Writer {
        Writer(self.0.clone(), severity(&tracing::Level::INFO))
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Writer {
        Writer(self.0.clone(), severity(meta.level()))
    }
}

/// One log record's writer: what tracing writes goes to the sink (with
/// the record's syslog severity).
struct Writer(Arc<Sink>, u32);

impl Write for Writer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut t = self.0.target.lock();
        match &mut *t {
            Target::Stdout => std::io::stdout().lock().write_all(buf)?,
            Target::File { file, .. } => file.write_all(buf)?,
            Target::Syslog {
                socket,
                facility,
                tag,
            } => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs() as i64);
                let mut msg =
                    format!("<{}>{} {tag}", *facility + self.1, syslog_time(now)).into_bytes();
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

    #[test]
    fn syslog_time_is_glibcs_format() {
        let t = syslog_time(0);
        assert_eq!(t.len(), "Jan  1 00:00:00".len(), "{t}");
        assert_eq!(&t[12..13], ":", "{t}");
    }
}
