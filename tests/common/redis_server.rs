//! A real redis-server 7.0 beside Rostrum in a test: on a free loopback
//! port, without persistence unless asked, stopped by its PID on drop.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running redis-server, killed on drop (its folder, if it made one,
/// removed).
pub struct RedisServer {
    pub child: Child,
    pub port: u16,
    /// The working directory it was started in.
    pub dir: Option<PathBuf>,
    owns_dir: bool,
}

/// Whether redis-server can be run here. Missing, a test skips (and says
/// so), except under `CI`, where it fails.
pub fn redis_installed() -> bool {
    let installed = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !installed {
        assert!(
            std::env::var_os("CI").is_none_or(|v| v.is_empty()),
            "redis-server is not installed"
        );
        eprintln!("redis-server not installed: skipped");
    }
    installed
}

impl RedisServer {
    /// A plain redis-server; None (skipped) when it is not installed.
    pub fn start() -> Option<RedisServer> {
        Self::start_with(None, None, &[])
    }

    /// As [`RedisServer::start`], in `dir` (its working directory), with
    /// `conf` as its config file and `extra` arguments after the port and
    /// the persistence settings (so they can override them).
    pub fn start_with(
        dir: Option<&Path>,
        conf: Option<&Path>,
        extra: &[&str],
    ) -> Option<RedisServer> {
        if !redis_installed() {
            return None;
        }
        // A port found free can be taken before redis-server binds it.
        for _ in 0..5 {
            let port = super::free_port();
            let mut cmd = Command::new("redis-server");
            if let Some(d) = dir {
                cmd.current_dir(d);
            }
            if let Some(c) = conf {
                cmd.arg(c);
            }
            let mut child = cmd
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .args(extra)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn redis-server");
            if super::wait_ready(port, &mut child) {
                return Some(RedisServer {
                    child,
                    port,
                    dir: dir.map(Path::to_path_buf),
                    owns_dir: false,
                });
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("redis-server did not start");
    }

    /// A redis-server in a fresh temporary folder of its own (removed on
    /// drop), with `extra` arguments; panics when it cannot start.
    pub fn start_in_temp(tag: &str, extra: &[&str]) -> RedisServer {
        let dir = super::temp_dir(tag);
        let mut r =
            Self::start_with(Some(&dir), None, extra).expect("redis-server is not installed");
        r.owns_dir = true;
        r
    }

    /// The folder it runs in (the current one when none was given).
    pub fn dir(&self) -> &Path {
        self.dir.as_deref().unwrap_or(Path::new("."))
    }

    /// Stops it now with SIGKILL (by its PID) and waits for it, keeping
    /// its folder (a test may start another server on the same files).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// A client connection to it.
    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .expect("client")
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("connect")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        if self.owns_dir {
            if let Some(d) = &self.dir {
                let _ = std::fs::remove_dir_all(d);
            }
        }
    }
}
