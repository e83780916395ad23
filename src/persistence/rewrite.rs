//! AOF rewrite: a compact file of the current data, written while clients
//! keep being served, then swapped in atomically.
//!
//! The rewrite shows the data as it was at one instant T0 (taken with
//! every shard locked for a moment), plus every change fed since T0. The
//! data as of T0 is the point-in-time snapshot of
//! `state::journal::snapshot` (shards captured before they change, big
//! sorted sets walked in steps with copy-before-write per member), written
//! as commands, or in RDB format with `aof-use-rdb-preamble yes` (the new
//! base file is then an RDB file followed by the changes as commands,
//! which Redis 7 loads too); the active expiry cycle waits until the
//! rewrite ends. Replaying the changes collected since T0 on top gives
//! exactly the current data. At the end, the collected changes are
//! appended in pieces and the temp file fsynced while writers go on; the
//! next incr and manifest are written and fsynced
//! (`aofdir::Layout::prepare_rewrite`); then, under the feed mutex, only
//! the temp file is moved in as the new base and the new manifest over
//! the old (two renames and one fsync of the folder,
//! `aofdir::PreparedRewrite::commit`). The changes fed since the last
//! piece become the first records of the new incr, which the writer
//! writes and fsyncs under its policy like anything fed next (Redis 7
//! too keeps them in the incr); the old files are deleted.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::aofdir::Layout;
use super::rdb;
use crate::state::journal::encode::write_command;
use crate::state::journal::snapshot::{self, Format, Job};
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

/// Runs one rewrite to the end; returns the new file's size.
fn rewrite_once(server: &Server) -> Result<u64, String> {
    let aof = &server.aof;
    let layout = Layout::of(server);
    let temp = layout
        .root
        .join(format!("temp-rewriteaof-bg-{}.aof", std::process::id()));
    let file =
        File::create(&temp).map_err(|e| io_err(&format!("Can't create {}", temp.display()), e))?;
    let format = {
        let c = server.config.read();
        if c.aof_use_rdb_preamble() {
            // The base names the boards' period files, as LB.ATTACH does
            // in the command form, instead of copying them.
            Format::Rdb(crate::engine::rdb::encode::EncodeOptions {
                archive_refs: true,
                ..c.rdb_options()
            })
        } else {
            Format::Aof
        }
    };
    let job = Arc::new(Job::with_format(format));
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
    let result = write_and_swap(server, &job, &libraries, file, &temp, &layout);
    aof.aof_last_cow.store(job.cow.peak(), Ordering::Relaxed);
    if result.is_err() {
        abandon(server, &temp);
    }
    if result.is_ok() {
        if let Err(e) = layout.delete_history() {
            tracing::warn!("{e}");
        }
    }
    result
}

fn write_and_swap(
    server: &Server,
    job: &Arc<Job>,
    libraries: &[Vec<u8>],
    file: File,
    temp: &Path,
    layout: &Layout,
) -> Result<u64, String> {
    let aof = &server.aof;
    let w = BufWriter::with_capacity(1 << 20, file);
    let rdb_base = matches!(job.format, Format::Rdb(_));
    let w = if rdb_base {
        // The RDB preamble: the same writer as BGSAVE's.
        let mut sink = rdb::Sink::new(w, server.config.read().rdbchecksum);
        rdb::write_all(server, job, libraries, None, &mut sink, true)?;
        sink.put_checksum()?;
        sink.w
    } else {
        write_commands(server, job, libraries, w)?
    };
    let mut file = w
        .into_inner()
        .map_err(|e| io_err("Error writing the rewritten AOF", e.into_error()))?;
    // Catch up with the changes collected so far without stopping writers,
    // so that little is left for the final step. Each piece taken starts
    // the next with a SELECT, so what is left stands on its own.
    for _ in 0..16 {
        let piece = {
            let mut f = aof.feed.lock();
            match f.rewrite.as_mut() {
                Some(rw) if rw.buf.len() >= 64 * 1024 => {
                    rw.db = None;
                    std::mem::take(&mut rw.buf)
                }
                _ => break,
            }
        };
        write_all(aof, &mut file, &piece)?;
    }
    check_fault(aof).map_err(|e| io_err("Error fsyncing the rewritten AOF", e))?;
    file.sync_data()
        .map_err(|e| io_err("Error fsyncing the rewritten AOF", e))?;
    let mut size = file
        .metadata()
        .map_err(|e| io_err("Error fsyncing the rewritten AOF", e))?
        .len();
    // The next incr and manifest, written and fsynced before writers stop.
    let prepared = layout.prepare_rewrite(rdb_base)?;

    // The swap, with feeding stopped: what was fed since the last piece
    // becomes the start of the new incr (written by the AOF writer under
    // its fsync policy, as what is fed next), so only the renames and one
    // fsync of the folder happen here.
    let mut f = aof.feed.lock();
    let rest = f.rewrite.take().unwrap_or_default();
    if aof.enabled() {
        let incr = match prepared.commit(temp) {
            Ok(incr) => incr,
            Err(e) => {
                // Collecting stopped with the take: the rewrite is over.
                drop(f);
                return Err(e);
            }
        };
        drop(file);
        f.install = Some((incr, 0));
        // A new file: its first command selects the database.
        f.main.db = None;
        // The new incr's first write carries a `#TS:` line.
        f.main.ts = 0;
        if rest.buf.is_empty() {
            f.main.buf.clear();
            // Everything fed so far is in the new, fsynced base.
            aof.publish_synced(f.fed);
        } else {
            // What is left holds everything in `main` not yet written
            // (and more): the writer writes it to the new incr and then
            // publishes the fed offset.
            f.main.buf.clear();
            if aof.timestamps() {
                journal::encode::annotate_time(&mut f.main, crate::state::unix_ms() / 1000);
            }
            f.main.buf.extend_from_slice(&rest.buf);
            f.main.db = rest.db;
        }
        aof.set_state_on();
        aof.base_size.store(size, Ordering::Relaxed);
        aof.current_size.store(0, Ordering::Relaxed);
        *aof.job.write() = None;
        aof.set_rewriting(false);
        drop(f);
        aof.wake_writer.notify_one();
        return Ok(size);
    }
    // The AOF is off: nothing is fed any more, the rest goes to the base.
    drop(f);
    let finish = (|| -> Result<(), String> {
        write_all(aof, &mut file, &rest.buf)?;
        check_fault(aof).map_err(|e| io_err("Error fsyncing the rewritten AOF", e))?;
        file.sync_data()
            .map_err(|e| io_err("Error fsyncing the rewritten AOF", e))
    })();
    if let Err(e) = finish {
        prepared.abandon();
        return Err(e);
    }
    size += rest.buf.len() as u64;
    drop(file);
    prepared.commit(temp)?;
    *aof.job.write() = None;
    aof.set_rewriting(false);
    aof.wake_writer.notify_one();
    Ok(size)
}

/// The snapshot as commands (`aof-use-rdb-preamble no`): the function
/// libraries, then each shard.
fn write_commands(
    server: &Server,
    job: &Arc<Job>,
    libraries: &[Vec<u8>],
    mut w: BufWriter<File>,
) -> Result<BufWriter<File>, String> {
    let aof = &server.aof;
    let mut chunk = Vec::new();
    // As Redis's rewrite: the base starts with the time it was taken.
    if aof.timestamps() {
        crate::state::journal::encode::write_time_annotation(
            &mut chunk,
            crate::state::clock::unix_ms() / 1000,
        );
    }
    for code in libraries {
        write_command(&mut chunk, [&b"FUNCTION"[..], b"LOAD", code].into_iter());
    }
    write_all(aof, &mut w, &chunk)?;
    snapshot::write_all(&server.keyspace, job, &mut |b| write_all(aof, &mut w, b))?;
    Ok(w)
}

/// What the snapshot thread runs next.
enum Next {
    Rewrite,
    RdbSave,
    /// A diskless full sync's snapshot, for these replicas.
    ReplSnapshot(Vec<tokio::sync::oneshot::Sender<journal::ReplSnapshot>>),
}

/// The snapshot thread: runs the AOF rewrites and RDB saves asked for, one
/// at a time (as Redis runs one child at a time); a scheduled one starts
/// when the running one ends.
pub fn run(server: &Server) {
    let aof = &server.aof;
    loop {
        let next = {
            let mut st = aof.rewrite.lock();
            while !st.requested && !st.rdb_requested && st.repl_waiters.is_empty() && !st.stop {
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
            if !st.repl_waiters.is_empty() {
                Next::ReplSnapshot(std::mem::take(&mut st.repl_waiters))
            } else if st.rdb_requested {
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
            Next::ReplSnapshot(waiters) => {
                tracing::info!(
                    "Starting a snapshot for {} replica(s), target: replicas sockets",
                    waiters.len()
                );
                let r = std::sync::Arc::new(super::rdb::snapshot_bytes(server));
                for w in waiters {
                    let _ = w.send(r.clone());
                }
            }
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
