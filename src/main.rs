//! The `rostrum` binary: reads the command line as redis-server does (an
//! optional config file, then any directive as `--name value...`), then
//! serves until SHUTDOWN or SIGTERM, in the foreground or daemonized.
//! `rostrum check-aof` checks and repairs an append-only file instead.

use std::io::{Read, Write};

use clap::{Parser, Subcommand};
use parking_lot::Mutex;
use rostrum::server::{self, logging};
use rostrum::state::{config, journal, Config, Server};

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// `rostrum check-aof ...`.
#[derive(Parser, Debug)]
#[command(name = "rostrum", version)]
struct ToolCli {
    #[command(subcommand)]
    tool: Tool,
}

/// Tools run instead of the server.
#[derive(Subcommand, Debug)]
enum Tool {
    /// Check an append-only file as redis-check-aof does; `--fix` cuts it
    /// back to its last valid command (after asking).
    CheckAof {
        /// Truncate the file to its last valid command.
        #[arg(long)]
        fix: bool,
        /// The AOF file.
        file: std::path::PathBuf,
    },
}

const USAGE: &str = "Usage: rostrum [/path/to/redis.conf] [options] [-]
       rostrum - (read the config from standard input)
       rostrum -v or --version
       rostrum -h or --help
       rostrum check-aof [--fix] FILE

Any config file directive can be given as an option: --name value...
(values up to the next --option; `--config NAME=VALUE` also works).

Examples:
       rostrum (run the server with the default configuration)
       rostrum /etc/redis/6379.conf
       rostrum --port 7777
       rostrum --maxmemory 100mb --save \"\" --appendonly yes
       rostrum /etc/myredis.conf --loglevel verbose";

/// What the command line asks for.
#[derive(Debug, PartialEq)]
enum Invocation {
    Version,
    Help,
    /// Serve: the config file (`-` for standard input), then the
    /// directives of the command line as config file text.
    Serve {
        config_file: Option<String>,
        directives: String,
    },
}

/// A value as a config file would quote it.
fn quoted(v: &str) -> String {
    format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Reads the arguments (after the program name) as redis-server does: a
/// first argument that is not an option is the config file; then every
/// `--name` starts a directive whose values are the arguments up to the
/// next `--option` (none: an empty value, as `--save ""`).
fn parse_command_line(args: &[String]) -> Result<Invocation, String> {
    let mut rest = args;
    match args.first().map(String::as_str) {
        Some("-v" | "--version") => return Ok(Invocation::Version),
        Some("-h" | "--help") => return Ok(Invocation::Help),
        _ => {}
    }
    let mut config_file = None;
    if let Some(first) = args.first() {
        if !first.starts_with("--") {
            config_file = Some(first.clone());
            rest = &args[1..];
        }
    }
    let mut directives = String::new();
    let mut i = 0;
    while i < rest.len() {
        let arg = &rest[i];
        let name = match arg.strip_prefix("--") {
            Some(n) if !n.is_empty() => n,
            _ if arg == "-" => {
                // Config from standard input, after the file's.
                let mut text = String::new();
                std::io::stdin()
                    .read_to_string(&mut text)
                    .map_err(|e| format!("Can't read the config from standard input: {e}"))?;
                directives.push_str(&text);
                directives.push('\n');
                i += 1;
                continue;
            }
            _ => {
                return Err(format!(
                    "Invalid option '{arg}' (directives are --name value)"
                ))
            }
        };
        let mut values = Vec::new();
        i += 1;
        while i < rest.len() && !(rest[i].starts_with("--") && rest[i].len() > 2) {
            values.push(rest[i].as_str());
            i += 1;
        }
        if name == "config" {
            // Rostrum's older form: --config NAME=VALUE.
            for kv in &values {
                let (k, v) = kv
                    .split_once('=')
                    .ok_or_else(|| format!("--config expects NAME=VALUE, got '{kv}'"))?;
                directives.push_str(&format!("{k} {}\n", quoted(v)));
            }
            continue;
        }
        directives.push_str(name);
        if values.is_empty() {
            directives.push_str(" \"\"");
        }
        for v in values {
            directives.push(' ');
            directives.push_str(&quoted(v));
        }
        directives.push('\n');
    }
    Ok(Invocation::Serve {
        config_file,
        directives,
    })
}

fn build_config(config_file: Option<&str>, directives: &str) -> Result<Config, String> {
    let mut c = Config::default();
    if let Some(path) = config_file.filter(|p| *p != "-") {
        c.load_file(path)?;
    }
    c.load_text(directives, "command line")?;
    Ok(c)
}

/// The `worker-threads` parameter: how many threads serve connections,
/// each with its own runtime (`server::workers`). 0 (the default) means one
/// per core but one, and at least one: the core left over runs the
/// kernel's network stack, the AOF writer and, often, clients on the same
/// host.
fn worker_threads(config: &Config) -> usize {
    match config.worker_threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1).max(1)),
        n => n,
    }
}

fn log_filter(level: &str) -> &'static str {
    match level {
        "debug" => "debug",
        "verbose" => "info",
        "notice" => "info",
        "warning" => "warn",
        _ => "off",
    }
}

/// A stored parameter's value (`syslog-*`).
fn param(c: &Config, name: &str) -> String {
    config::find(name).map(|p| p.value(c)).unwrap_or_default()
}

/// How a daemonized child tells its parent it serves (`OK`) or why it
/// could not start (an error line); `None` in the foreground.
static PARENT: Mutex<Option<std::io::PipeWriter>> = Mutex::new(None);

fn tell_parent(msg: &str) {
    if let Some(mut w) = PARENT.lock().take() {
        let _ = w.write_all(msg.as_bytes());
    }
}

/// Stops the start-up: the error goes to the log, to stderr and to the
/// waiting parent of a daemonized server.
fn fail(msg: &str, pidfile: Option<&str>) -> ! {
    tracing::error!("{msg}");
    eprintln!("{msg}");
    tell_parent(&format!("ERR {msg}"));
    if let Some(p) = pidfile {
        let _ = std::fs::remove_file(p);
    }
    std::process::exit(1);
}

/// `daemonize yes`: forks; the parent waits until the child listens (or
/// fails) and exits with 0 (or 1, printing why), so that a service
/// manager's `Type=forking` unit or an init script sees a serving server
/// once the start command returns. The child leaves the terminal's session
/// and points its standard streams at /dev/null.
fn daemonize() -> Result<(), String> {
    let (mut from_child, to_parent) =
        std::io::pipe().map_err(|e| format!("Can't create a pipe: {e}"))?;
    let devnull = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map_err(|e| format!("Can't open /dev/null: {e}"))?;
    // SAFETY: fork(2) is called from `main` before any thread exists: the
    // tokio runtime, the AOF writer and every other thread start after it,
    // the log writes synchronously, and jemalloc's background threads are
    // off. A single-threaded process's child holds a consistent copy of
    // every lock and of the allocator, so it may go on as usual; the
    // parent only reads the pipe and exits.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(format!("Can't fork: {}", std::io::Error::last_os_error())),
        0 => {
            drop(from_child);
            use std::os::fd::AsRawFd;
            let null = devnull.as_raw_fd();
            // SAFETY: setsid(2) and dup2(2) only change this process's
            // session and file table; `null` is a valid open descriptor
            // (owned by `devnull`, alive here) and 0-2 are the standard
            // streams, whose Rust handles then write to /dev/null.
            unsafe {
                libc::setsid();
                libc::dup2(null, 0);
                libc::dup2(null, 1);
                libc::dup2(null, 2);
            }
            *PARENT.lock() = Some(to_parent);
            Ok(())
        }
        _ => {
            drop(to_parent);
            let mut msg = String::new();
            let _ = from_child.read_to_string(&mut msg);
            if msg == "OK" {
                std::process::exit(0);
            }
            let why = msg
                .strip_prefix("ERR ")
                .unwrap_or("the server exited while starting");
            eprintln!("{why}");
            std::process::exit(1);
        }
    }
}

/// `supervised`: tells the service manager the server is ready, as
/// redis-server does: systemd through `$NOTIFY_SOCKET` (`READY=1`), upstart
/// (when `$UPSTART_JOB` is set) by stopping itself with SIGSTOP.
fn notify_supervisor(mode: &str, state: &str) {
    let systemd = std::env::var_os("NOTIFY_SOCKET");
    let upstart = std::env::var_os("UPSTART_JOB").is_some();
    let mode = match mode {
        "auto" if systemd.is_some() => "systemd",
        "auto" if upstart => "upstart",
        m => m,
    };
    match mode {
        "systemd" => {
            let Some(path) = systemd else {
                tracing::warn!("systemd supervision requested, but NOTIFY_SOCKET not found");
                return;
            };
            let path = path.to_string_lossy().into_owned();
            let sent = std::os::unix::net::UnixDatagram::unbound().and_then(|s| {
                match path.strip_prefix('@') {
                    Some(name) => {
                        use std::os::linux::net::SocketAddrExt;
                        let addr =
                            std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
                        s.send_to_addr(state.as_bytes(), &addr)
                    }
                    None => s.send_to(state.as_bytes(), &path),
                }
            });
            if let Err(e) = sent {
                tracing::warn!("Can't notify systemd ({state}): {e}");
            }
        }
        "upstart" if upstart && state == "READY=1" => {
            let _ = std::process::Command::new("kill")
                .args(["-STOP", &std::process::id().to_string()])
                .status();
        }
        _ => {}
    }
}

/// The start-up line: version, port, and what persists the data.
fn startup_line(c: &Config, config_file: Option<&str>) -> String {
    let persistence = if c.appendonly {
        let dir = std::fs::canonicalize(&c.dir)
            .map(|d| d.display().to_string())
            .unwrap_or_else(|_| c.dir.clone());
        format!(
            "AOF on (appendfsync {}), data files in {}/{} (manifest {}.manifest)",
            c.appendfsync,
            dir,
            c.appenddirname(),
            c.appendfilename
        )
    } else {
        "AOF off (appendonly no): data is kept in memory only".to_string()
    };
    format!(
        "Rostrum {} (Redis {} compatible), pid {}, port {}, config file {}, persistence: {}",
        env!("CARGO_PKG_VERSION"),
        rostrum::commands::connection::REDIS_VERSION,
        std::process::id(),
        c.port,
        config_file.unwrap_or("none"),
        persistence
    )
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("check-aof") {
        let ToolCli {
            tool: Tool::CheckAof { fix, file },
        } = ToolCli::parse();
        let code = rostrum::persistence::check::run(
            &file,
            fix,
            &mut std::io::stdin().lock(),
            &mut std::io::stdout(),
        );
        std::process::exit(code);
    }
    let (config_file, directives) = match parse_command_line(&args) {
        Ok(Invocation::Version) => {
            println!(
                "Rostrum server v={} redis={} malloc=jemalloc bits={}",
                env!("CARGO_PKG_VERSION"),
                rostrum::commands::connection::REDIS_VERSION,
                usize::BITS
            );
            return;
        }
        Ok(Invocation::Help) => {
            println!("{USAGE}");
            return;
        }
        Ok(Invocation::Serve {
            config_file,
            directives,
        }) => (config_file, directives),
        Err(e) => {
            eprintln!("{e}\n\n{USAGE}");
            std::process::exit(1);
        }
    };
    let config = match build_config(config_file.as_deref(), &directives) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let log = logging::Settings {
        logfile: &config.logfile,
        syslog: param(&config, "syslog-enabled") == "yes",
        ident: &param(&config, "syslog-ident"),
        facility: &param(&config, "syslog-facility"),
        filter: log_filter(&config.loglevel),
    };
    if let Err(e) = logging::init(&log) {
        eprintln!("{e}");
        std::process::exit(1);
    }
    if config.daemonize {
        if let Err(e) = daemonize() {
            fail(&e, None);
        }
    }
    // Where the pid goes: `pidfile`, or (daemonized) a default one.
    let pidfile = match (config.pidfile.as_str(), config.daemonize) {
        ("", false) => None,
        ("", true) => Some("/var/run/rostrum.pid".to_string()),
        (p, _) => Some(p.to_string()),
    };
    if let Some(p) = &pidfile {
        if let Err(e) = std::fs::write(p, format!("{}\n", std::process::id())) {
            tracing::warn!("Failed to write PID file {p}: {e}");
        }
    }
    let pidfile = pidfile.as_deref();
    tracing::info!("{}", startup_line(&config, config_file.as_deref()));

    // `rename-command`: the command table is built with the new names
    // before anything looks a command up.
    let renames: Vec<(String, String)> = config
        .rename_commands
        .iter()
        .map(|r| (r.from.clone(), r.to.clone()))
        .collect();
    if let Err((i, e)) = rostrum::commands::table::build_with_renames(&renames) {
        let msg = match config.rename_commands.get(i) {
            Some(r) => r.error(e),
            None => e.to_string(),
        };
        fail(&msg, pidfile);
    }
    if let Err(e) = rostrum::commands::acl::check_config_users(&config) {
        fail(&e, pidfile);
    }
    let threads = worker_threads(&config);
    let server = Server::new(config, config_file.clone().filter(|p| p != "-"));
    // One runtime of one worker per `worker-threads` (see
    // `server::workers`): the first also runs the listeners and the
    // background tasks; the others only the connections placed on them.
    let mut runtimes = Vec::with_capacity(threads);
    for _ in 0..threads {
        let idle = server.clone();
        let built = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            // A worker with nothing left to run: what its clients wrote can
            // go to disk now (`appendfsync always` groups them in one
            // fsync); then it may spin a while before sleeping
            // (`park-spin-us`).
            .on_thread_park(move || {
                server::workers::worker_idle();
                idle.aof.worker_idle();
                idle.spin_before_park();
            })
            .enable_all()
            .build();
        match built {
            Ok(r) => runtimes.push(r),
            Err(e) => fail(&format!("cannot start the runtime: {e}"), pidfile),
        }
    }
    let workers = server::Workers::new(runtimes.iter().map(|r| r.handle().clone()).collect());
    let Some(runtime) = runtimes.first() else {
        fail("cannot start the runtime: no worker threads", pidfile);
    };
    // The TLS certificates, read before anything else can fail late.
    if let Err(e) = server.tls.reload(&server.config.read()) {
        fail(&format!("Failed to configure TLS: {e}"), pidfile);
    }
    // Load the AOF before accepting clients.
    if let Err(e) = rostrum::persistence::start(&server) {
        fail(&e, pidfile);
    }
    let supervised = server.config.read().supervised.clone();
    let result = runtime.block_on(server::run(server.clone(), workers, || {
        tell_parent("OK");
        notify_supervisor(&supervised, "READY=1");
    }));
    notify_supervisor(&supervised, "STOPPING=1");
    // The boards dropped on the way out still own their archive files.
    rostrum::engine::leaderboard::disk::keep_files_on_exit();
    // SIGTERM / SIGINT with save points: the final save SHUTDOWN would make.
    if result.is_ok()
        && !server
            .aof
            .exit_saved
            .load(std::sync::atomic::Ordering::Acquire)
        && !server.config.read().save.is_empty()
    {
        tracing::info!("Saving the final RDB snapshot before exiting.");
        if !journal::save_blocking(&server.aof) {
            tracing::warn!("Error trying to save the DB before exiting.");
        }
    }
    journal::shutdown_flush(&server.aof);
    if let Err(e) = result {
        fail(
            &format!("Could not create server TCP listening socket: {e}"),
            pidfile,
        );
    }
    if let Some(p) = pidfile {
        let _ = std::fs::remove_file(p);
    }
    // At warning level, as redis-server logs it (and so syslogs it).
    tracing::warn!("Rostrum is now ready to exit, bye bye...");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serve(args: &[&str]) -> (Option<String>, String) {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        match parse_command_line(&args) {
            Ok(Invocation::Serve {
                config_file,
                directives,
            }) => (config_file, directives),
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn directives_as_redis_server_reads_them() {
        assert_eq!(serve(&[]), (None, String::new()));
        let (file, text) = serve(&[
            "/etc/redis.conf",
            "--maxmemory",
            "100mb",
            "--save",
            "",
            "--bind",
            "127.0.0.1",
            "::1",
            "--appendonly",
            "yes",
        ]);
        assert_eq!(file.as_deref(), Some("/etc/redis.conf"));
        assert_eq!(
            text,
            "maxmemory \"100mb\"\nsave \"\"\nbind \"127.0.0.1\" \"::1\"\nappendonly \"yes\"\n"
        );
        // No value at all, and the older --config NAME=VALUE.
        let (_, text) = serve(&["--save", "--config", "hz=20", "park-spin-us=5"]);
        assert_eq!(text, "save \"\"\nhz \"20\"\npark-spin-us \"5\"\n");
        // A value needing quotes survives the config file syntax.
        let (_, text) = serve(&["--requirepass", "a \"b\\"]);
        let c = build_config(None, &text).expect("valid");
        assert_eq!(c.requirepass.as_deref(), Some(&b"a \"b\\"[..]));
        assert!(parse_command_line(&["--".to_string()]).is_err());
        assert_eq!(
            parse_command_line(&["-v".to_string()]),
            Ok(Invocation::Version)
        );
    }

    #[test]
    fn command_line_values_are_validated_as_the_config_file() {
        let c =
            build_config(None, &serve(&["--maxmemory", "100mb", "--save", ""]).1).expect("valid");
        assert_eq!(c.maxmemory, 100 << 20);
        assert_eq!(c.save, "");
        let e = build_config(None, &serve(&["--maxmemory", "lots"]).1).unwrap_err();
        assert!(e.contains("maxmemory"), "{e}");
        let e = build_config(None, &serve(&["--no-such-thing", "1"]).1).unwrap_err();
        assert!(e.contains("no-such-thing"), "{e}");
    }
}
