//! The `rostrum` binary: parses the command line and the optional config
//! file, then serves until SHUTDOWN or SIGTERM. `rostrum check-aof` checks
//! and repairs an append-only file instead.

use clap::{Parser, Subcommand};
use rostrum::server;
use rostrum::state::{journal, Config, Server};

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// A leaderboard server that speaks the Redis protocol.
#[derive(Parser, Debug)]
#[command(
    name = "rostrum",
    version,
    about,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    /// A tool to run instead of the server.
    #[command(subcommand)]
    tool: Option<Tool>,
    /// Optional redis.conf-style config file (`name value` lines).
    config_file: Option<String>,
    /// TCP port to listen on.
    #[arg(long)]
    port: Option<u16>,
    /// Addresses to bind (space separated, or repeat the option).
    #[arg(long, num_args = 1..)]
    bind: Vec<String>,
    /// Password clients must give with AUTH.
    #[arg(long)]
    requirepass: Option<String>,
    /// Log level: debug, verbose, notice, warning, nothing.
    #[arg(long)]
    loglevel: Option<String>,
    /// Number of databases.
    #[arg(long)]
    databases: Option<usize>,
    /// Working directory for the AOF.
    #[arg(long)]
    dir: Option<String>,
    /// Enable the append-only file (yes/no).
    #[arg(long)]
    appendonly: Option<String>,
    /// AOF fsync policy: always, everysec, no.
    #[arg(long)]
    appendfsync: Option<String>,
    /// AOF file name.
    #[arg(long)]
    appendfilename: Option<String>,
    /// Maximum number of connected clients.
    #[arg(long)]
    maxclients: Option<u64>,
    /// Any other parameter, as `name=value` (repeatable).
    #[arg(long = "config", value_name = "NAME=VALUE")]
    extra: Vec<String>,
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

/// The `worker-threads` parameter. 0 (the default) means one per core but
/// one, and at least one: the core left over runs the kernel's network
/// stack, the AOF writer and, often, clients on the same host. Measured on
/// 2 cores, a second worker costs more in cross-thread hand-offs and lock
/// contention on a hot board (ZADD, scripts) than it gains.
fn worker_threads(config: &Config) -> usize {
    match config.worker_threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1).max(1)),
        n => n,
    }
}

fn build_config(cli: &Cli) -> Result<Config, String> {
    let mut c = Config::default();
    if let Some(path) = &cli.config_file {
        c.load_file(path)?;
    }
    let mut set = |name: &str, v: Option<String>| -> Result<(), String> {
        match v {
            Some(v) => c.apply(name, &v),
            None => Ok(()),
        }
    };
    set("port", cli.port.map(|p| p.to_string()))?;
    set("bind", (!cli.bind.is_empty()).then(|| cli.bind.join(" ")))?;
    set("requirepass", cli.requirepass.clone())?;
    set("loglevel", cli.loglevel.clone())?;
    set("databases", cli.databases.map(|d| d.to_string()))?;
    set("dir", cli.dir.clone())?;
    set("appendonly", cli.appendonly.clone())?;
    set("appendfsync", cli.appendfsync.clone())?;
    set("appendfilename", cli.appendfilename.clone())?;
    set("maxclients", cli.maxclients.map(|d| d.to_string()))?;
    for kv in &cli.extra {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("--config expects NAME=VALUE, got '{kv}'"))?;
        c.apply(k, v)?;
    }
    Ok(c)
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

fn main() {
    let cli = Cli::parse();
    if let Some(Tool::CheckAof { fix, file }) = &cli.tool {
        let code = rostrum::persistence::check::run(
            file,
            *fix,
            &mut std::io::stdin().lock(),
            &mut std::io::stdout(),
        );
        std::process::exit(code);
    }
    let config = match build_config(&cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(log_filter(&config.loglevel)));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .init();
    tracing::info!(
        "Rostrum {} starting (Redis {} compatible)",
        env!("CARGO_PKG_VERSION"),
        rostrum::commands::connection::REDIS_VERSION
    );

    let threads = worker_threads(&config);
    let server = Server::new(config, cli.config_file.clone());
    let idle = server.clone();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        // A worker with nothing left to run: what its clients wrote can go
        // to disk now (`appendfsync always` groups them in one fsync); then
        // it may spin a while before sleeping (`park-spin-us`).
        .on_thread_park(move || {
            idle.aof.worker_idle();
            idle.spin_before_park();
        })
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    // Load the AOF before accepting clients.
    if let Err(e) = rostrum::persistence::start(&server) {
        tracing::error!("{e}");
        eprintln!("{e}");
        std::process::exit(1);
    }
    let result = runtime.block_on(server::run(server.clone()));
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
        eprintln!("Could not create server TCP listening socket: {e}");
        std::process::exit(1);
    }
    tracing::info!("Rostrum is now ready to exit, bye bye...");
}
