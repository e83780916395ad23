//! The AOF writer thread: takes what [`super::feed`] buffered, writes it to
//! the file and fsyncs it per `appendfsync`, so no tokio worker ever waits
//! for the disk. Replies wait for their commands' records: written
//! (`everysec`, `no`: as Redis writes before it replies, a killed process
//! loses no acknowledged write) or fsynced (`always`). One write(2), and
//! under `always` one fsync, covers every command fed before it (group
//! commit); the offset done is published for the clients waiting on it.
//! Once a second it also fsyncs (`everysec`), and retries after a write
//! error.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{Aof, Fsync};

/// Opens (creating if needed) the AOF for appending; returns it and its size.
pub fn open_append(path: &Path) -> io::Result<(File, u64)> {
    let f = OpenOptions::new().create(true).append(true).open(path)?;
    let size = f.metadata()?.len();
    Ok((f, size))
}

/// The text Redis prints for an I/O error (strerror, without Rust's
/// "(os error N)").
pub fn error_text(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// The test fault switch: fails like a full disk while its file exists.
pub(crate) fn check_fault(aof: &Aof) -> io::Result<()> {
    match &aof.fault {
        Some(p) if p.exists() => Err(io::Error::from_raw_os_error(libc::ENOSPC)),
        _ => Ok(()),
    }
}

/// The file being appended to.
struct Target {
    file: File,
    /// Bytes in the file.
    size: u64,
}

/// Writes `data` at the end of the file. On failure the file is cut back to
/// its previous size when possible, so the data can be written again whole;
/// otherwise the bytes that did reach the file are dropped from `data`.
fn write_out(aof: &Aof, t: &mut Target, data: &mut Vec<u8>) -> io::Result<()> {
    let mut done = 0;
    let result = (|| {
        check_fault(aof)?;
        while done < data.len() {
            match t.file.write(&data[done..]) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    })();
    match result {
        Ok(()) => {
            t.size += done as u64;
            aof.current_size.store(t.size, Ordering::Relaxed);
            data.clear();
            Ok(())
        }
        Err(e) => {
            if done > 0 && t.file.set_len(t.size).is_err() {
                // The partial write stays: don't write it twice.
                t.size += done as u64;
                aof.current_size.store(t.size, Ordering::Relaxed);
                data.drain(..done);
            }
            Err(e)
        }
    }
}

fn fsync(aof: &Aof, t: &Target) -> io::Result<()> {
    check_fault(aof)?;
    t.file.sync_data()
}

/// How long fed writes may wait for an idle worker's kick
/// ([`super::Aof::worker_idle`]) before the writer goes ahead anyway (a
/// worker that never runs out of clients). Until then, what is fed goes
/// out in one write(2) per worker turn, as Redis writes once per event
/// loop turn, not one per command.
const KICK_WAIT: Duration = Duration::from_millis(1);

/// The writer loop; returns when the server shuts down.
pub fn run(aof: &Aof) {
    let mut target: Option<Target> = None;
    // Bytes taken from the feed but not yet written (kept across errors).
    let mut pending: Vec<u8> = Vec::new();
    let mut pending_end: u64 = 0;
    let mut unsynced = false;
    let mut last_fsync = Instant::now();
    let mut last_tick = Instant::now();
    let mut failing = false;
    let mut next_retry = Instant::now();
    loop {
        let mut f = aof.feed.lock();
        if let Some((file, size)) = f.install.take() {
            // A rewrite replaced the file with one holding everything fed
            // so far: what is pending belonged to the old one.
            pending.clear();
            target = Some(Target { file, size });
            unsynced = false;
            if failing {
                recovered(aof, &mut failing);
            }
        }
        if f.close {
            f.close = false;
            if let Some(t) = target.as_mut() {
                pending.append(&mut f.main.buf);
                if write_out(aof, t, &mut pending).is_err() {
                    tracing::warn!("Can't write the rest of the AOF before closing it");
                }
                let _ = fsync(aof, t);
            }
            pending.clear();
            f.main.buf.clear();
            target = None;
            failing = false;
            continue;
        }
        let now = Instant::now();
        let wait = if failing {
            // After an error: retry once a second, whatever arrives.
            next_retry.saturating_duration_since(now)
        } else if f.main.buf.is_empty() && pending.is_empty() {
            Duration::from_millis(1000).saturating_sub(last_tick.elapsed())
        } else if pending.is_empty() && f.kick_to <= pending_end {
            // Until a worker goes idle (`Aof::worker_idle`), at most
            // KICK_WAIT: the writes of its turn share one write (and
            // fsync).
            KICK_WAIT
        } else {
            Duration::ZERO
        };
        if !f.stop && !wait.is_zero() {
            aof.wake_writer.wait_for(&mut f, wait);
            // A rewrite may have swapped the file while we waited: what is
            // fed from now on belongs to the new file, so install it first
            // (writing it to the old, replaced file would lose it).
            if f.install.is_some() || f.close {
                continue;
            }
        }
        let stop = f.stop;
        let retry_due = !failing || Instant::now() >= next_retry || stop;
        if retry_due && !f.main.buf.is_empty() {
            if pending.is_empty() {
                std::mem::swap(&mut pending, &mut f.main.buf);
            } else {
                pending.append(&mut f.main.buf);
            }
            pending_end = f.fed;
        }
        drop(f);

        let policy = aof.fsync();
        if let Some(t) = target.as_mut() {
            if !pending.is_empty() && retry_due {
                match write_out(aof, t, &mut pending) {
                    Ok(()) => {
                        unsynced = true;
                        if policy == Fsync::Always {
                            match fsync(aof, t) {
                                Ok(()) => {
                                    unsynced = false;
                                    last_fsync = Instant::now();
                                    recovered(aof, &mut failing);
                                    aof.publish_synced(pending_end);
                                    // The next fsync waits for the worker
                                    // to send these replies and take the
                                    // commands they bring back.
                                    aof.await_fresh_kick(pending_end);
                                }
                                Err(e) => fail(aof, &e, &mut failing, &mut next_retry),
                            }
                        } else {
                            recovered(aof, &mut failing);
                            aof.publish_synced(pending_end);
                            aof.await_fresh_kick(pending_end);
                        }
                    }
                    Err(e) => {
                        fail(aof, &e, &mut failing, &mut next_retry);
                        if policy != Fsync::Always {
                            // As Redis: the write was tried, the data stays
                            // buffered for the retry, the replies go out
                            // (later writes are refused while it fails).
                            aof.publish_synced(pending_end);
                        }
                    }
                }
            }
            let due = last_fsync.elapsed() >= Duration::from_secs(1);
            if unsynced && !failing && (stop || (policy == Fsync::Everysec && due)) {
                match fsync(aof, t) {
                    Ok(()) => {
                        unsynced = false;
                        last_fsync = Instant::now();
                    }
                    Err(e) => fail(aof, &e, &mut failing, &mut next_retry),
                }
            }
        } else {
            // No file (AOF off, or waiting for its first rewrite): no
            // reply waits for it.
            pending.clear();
            aof.publish_synced(pending_end);
        }
        if stop {
            let mut f = aof.feed.lock();
            if f.main.buf.is_empty() || failing {
                f.stopped = true;
                return;
            }
            continue;
        }
        if last_tick.elapsed() >= Duration::from_secs(1) {
            last_tick = Instant::now();
        }
    }
}

fn fail(aof: &Aof, e: &io::Error, failing: &mut bool, next_retry: &mut Instant) {
    let text = error_text(e);
    if !*failing {
        tracing::warn!("Error writing to the AOF file: {text}");
    }
    *failing = true;
    *next_retry = Instant::now() + Duration::from_secs(1);
    aof.set_write_error(Some(text));
}

fn recovered(aof: &Aof, failing: &mut bool) {
    if *failing || aof.write_error().is_some() {
        tracing::warn!("AOF write error looks solved, Rostrum can write again.");
    }
    *failing = false;
    aof.set_write_error(None);
}
