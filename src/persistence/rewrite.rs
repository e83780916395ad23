//! AOF rewrite: a compact file of the current data, written while clients
//! keep being served, then swapped in atomically.
//!
//! The rewrite shows the data as it was at one instant T0 (taken with
//! every shard locked for a moment), plus every change fed since T0. The
//! data as of T0 is the point-in-time snapshot of
//! `state::journal::snapshot` (shards captured before they change, big
//! sorted sets walked in steps with copy-before-write per member), written
//! as commands; the active expiry cycle waits until the rewrite ends.
//! Replaying the changes collected since T0 on top gives exactly the
//! current data. At the end, under the feed mutex,
//! the collected changes are appended, the temp file is fsynced, renamed
//! over the AOF, the directory fsynced, and the writer continues on it.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::aof_path;
use crate::state::journal::encode::write_command;
use crate::state::journal::snapshot::{self, Job};
use crate::state::journal::writer::{check_fault, error_text};
use crate::state::journal::{self, Aof, Stream};
use crate::state::Server;

fn io_err(what: &str, e: std::io::Error) -> String {
    format!("{what}: {}", error_text(&e))
}

fn write_all(aof: &Aof, w: &mut impl Write, data: &[u8]) -> Result<(), String> {
    check_fault(aof).map_err(|e| io_err("Error writing the rewritten AOF", e))?;
    w.write_all(data)
        .map_err(|e| io_err("Error writing the rewritten AOF", e))
}

/// Gives up a rewrite: stops collecting changes, removes the temp file.
fn abandon(server: &Server, temp: &Path) {
    let aof = &server.aof;
    aof.feed.lock().rewrite = None;
    *aof.job.write() = None;
    aof.set_rewriting(false);
    let _ = std::fs::remove_file(temp);
}

fn fsync_dir(path: &Path) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    File::open(dir)?.sync_all()
}

/// Runs one rewrite to the end; returns the new file's size.
fn rewrite_once(server: &Server) -> Result<u64, String> {
    let aof = &server.aof;
    let path = aof_path(server);
    let temp = path.with_file_name(format!("temp-rewriteaof-bg-{}.aof", std::process::id()));
    let file =
        File::create(&temp).map_err(|e| io_err(&format!("Can't create {}", temp.display()), e))?;
    let job = Arc::new(Job::new());
    let libraries;
    {
        // T0: no command is running while the rewrite starts collecting.
        let all = server.keyspace.lock_all(true);
        job.begin(&all);
        // Function libraries change only with every shard locked.
        libraries = server.scripting.library_codes();
        aof.feed.lock().rewrite = Some(Stream::default());
        *aof.job.write() = Some(job.clone());
        aof.set_rewriting(true);
    }
    let result = write_and_swap(server, &job, &libraries, file, &temp, &path);
    aof.aof_last_cow.store(job.cow.peak(), Ordering::Relaxed);
    if result.is_err() {
        abandon(server, &temp);
    }
    result
}

fn write_and_swap(
    server: &Server,
    job: &Job,
    libraries: &[Vec<u8>],
    file: File,
    temp: &Path,
    path: &Path,
) -> Result<u64, String> {
    let aof = &server.aof;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    let mut chunk = Vec::new();
    for code in libraries {
        write_command(&mut chunk, [&b"FUNCTION"[..], b"LOAD", code].into_iter());
    }
    write_all(aof, &mut w, &chunk)?;
    snapshot::write_all(&server.keyspace, job, &mut |b| write_all(aof, &mut w, b))?;
    let mut file = w
        .into_inner()
        .map_err(|e| io_err("Error writing the rewritten AOF", e.into_error()))?;
    // Catch up with the changes collected so far without stopping writers,
    // so that little is left for the final step.
    for _ in 0..16 {
        let piece = {
            let mut f = aof.feed.lock();
            match f.rewrite.as_mut() {
                Some(rw) if rw.buf.len() >= 64 * 1024 => std::mem::take(&mut rw.buf),
                _ => break,
            }
        };
        write_all(aof, &mut file, &piece)?;
    }
    check_fault(aof).map_err(|e| io_err("Error fsyncing the rewritten AOF", e))?;
    file.sync_data()
        .map_err(|e| io_err("Error fsyncing the rewritten AOF", e))?;

    // The swap, with feeding stopped.
    let mut f = aof.feed.lock();
    let rest = f.rewrite.take().unwrap_or_default();
    let finish = (|| -> Result<u64, String> {
        write_all(aof, &mut file, &rest.buf)?;
        check_fault(aof).map_err(|e| io_err("Error fsyncing the rewritten AOF", e))?;
        file.sync_data()
            .map_err(|e| io_err("Error fsyncing the rewritten AOF", e))?;
        std::fs::rename(temp, path).map_err(|e| {
            io_err(
                &format!("Error renaming {} to {}", temp.display(), path.display()),
                e,
            )
        })?;
        fsync_dir(path).map_err(|e| io_err("Error fsyncing the AOF directory", e))?;
        file.metadata()
            .map(|m| m.len())
            .map_err(|e| io_err("Error reading the rewritten AOF size", e))
    })();
    let size = match finish {
        Ok(s) => s,
        Err(e) => {
            drop(f);
            return Err(e);
        }
    };
    if aof.enabled() {
        f.install = Some((file, size));
        f.main.buf.clear();
        f.main.db = rest.db;
        aof.set_state_on();
        aof.base_size.store(size, Ordering::Relaxed);
        aof.current_size.store(size, Ordering::Relaxed);
        // Everything fed so far is in the new, fsynced file.
        aof.publish_synced(f.fed);
    }
    *aof.job.write() = None;
    aof.set_rewriting(false);
    drop(f);
    aof.wake_writer.notify_one();
    Ok(size)
}

/// What the snapshot thread runs next.
enum Next {
    Rewrite,
    RdbSave,
}

/// The snapshot thread: runs the AOF rewrites and RDB saves asked for, one
/// at a time (as Redis runs one child at a time); a scheduled one starts
/// when the running one ends.
pub fn run(server: &Server) {
    let aof = &server.aof;
    loop {
        let next = {
            let mut st = aof.rewrite.lock();
            while !st.requested && !st.rdb_requested && !st.stop {
                // Once a second: the automatic rewrite and the save points.
                if aof
                    .wake_rewriter
                    .wait_for(&mut st, Duration::from_secs(1))
                    .timed_out()
                {
                    drop(st);
                    cron(server);
                    st = aof.rewrite.lock();
                }
            }
            if st.stop {
                return;
            }
            if st.rdb_requested {
                st.rdb_requested = false;
                st.rdb_started = Some(Instant::now());
                Next::RdbSave
            } else {
                st.requested = false;
                st.started = Some(Instant::now());
                Next::Rewrite
            }
        };
        match next {
            Next::RdbSave => super::rdb::run_save(server),
            Next::Rewrite => run_rewrite(server),
        }
        let mut st = aof.rewrite.lock();
        if st.scheduled && !st.requested {
            st.scheduled = false;
            st.requested = true;
        }
        if st.rdb_scheduled && !st.rdb_requested {
            st.rdb_scheduled = false;
            st.rdb_requested = true;
        }
        aof.rewrite_done.notify_all();
    }
}

fn run_rewrite(server: &Server) {
    let aof = &server.aof;
    tracing::info!("Background append only file rewriting started");
    let t = Instant::now();
    let result = rewrite_once(server);
    let mut st = aof.rewrite.lock();
    st.started = None;
    st.finished += 1;
    st.last_secs = t.elapsed().as_secs() as i64;
    match result {
        Ok(size) => {
            st.last_ok = true;
            st.count += 1;
            st.failures = 0;
            tracing::info!(
                "Background AOF rewrite finished successfully ({size} bytes, {:.3} seconds)",
                t.elapsed().as_secs_f64()
            );
        }
        Err(e) => {
            st.last_ok = false;
            st.failures += 1;
            tracing::warn!("Background AOF rewrite failed: {e}");
        }
    }
}

/// The automatic rewrite's check, with the configuration in force.
fn cron(server: &Server) {
    let (perc, min) = {
        let c = server.config.read();
        (c.auto_aof_rewrite_percentage, c.auto_aof_rewrite_min_size)
    };
    journal::auto_rewrite(&server.aof, perc, min);
    let points = server.config.read().save_points();
    journal::save_points_cron(&server.aof, &points);
}
