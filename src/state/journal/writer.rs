//! Writing the AOF. Replies wait for their commands' records: written to
//! the file (`everysec`, `no`), as Redis writes before it replies, so a
//! killed process loses no acknowledged write; or fsynced too (`always`).
//! Under `everysec` and `no` the worker about to send replies writes
//! what was fed itself ([`write_through`], one write(2) for every command
//! fed before it: a cheap syscall, no thread to wake); the writer thread
//! fsyncs once a second, without holding up those writes, and retries
//! after a write error. Under `always` the writer thread writes and
//! fsyncs, one fsync covering every write buffered before it (group
//! commit), so no tokio worker waits for the disk. Either way the offset
//! done is published for the clients waiting on it.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
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
pub(crate) struct Target {
    file: File,
    /// A second handle on the same file, fsynced without holding
    /// [`Output`]'s lock (`everysec`), so workers writing meanwhile do not
    /// wait for the disk.
    sync: Option<Arc<File>>,
    /// Bytes in the file.
    size: u64,
}

impl Target {
    fn new(file: File, size: u64) -> Self {
        let sync = file.try_clone().ok().map(Arc::new);
        Target { file, sync, size }
    }
}

/// The writing side of the AOF, shared by the writer thread and the
/// workers that write their clients' records themselves before replying
/// ([`write_through`]). Lock order: this, then `Aof::feed`.
#[derive(Default)]
pub(crate) struct Output {
    target: Option<Target>,
    /// Bytes taken from the feed but not yet written (kept across errors).
    pending: Vec<u8>,
    /// The fed offset `pending` ends at.
    pending_end: u64,
    /// Written since the last fsync.
    unsynced: bool,
    /// The last write or fsync failed: only the writer thread retries
    /// (once a second).
    failing: bool,
    next_retry: Option<Instant>,
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

/// Under `always`, how long fed writes may wait for an idle worker's kick
/// ([`super::Aof::worker_idle`]) before the writer goes ahead anyway (a
/// worker that never runs out of clients).
const KICK_WAIT: Duration = Duration::from_millis(1);

/// Under `everysec` and `no`: writes what was fed up to `offset` (or
/// more) to the file from the calling worker, as Redis writes before it
/// replies; the writer thread only fsyncs once a second, and takes over
/// while writes fail or a rewrite swaps the file. Returns once the
/// offset is published (or left to the writer thread).
pub fn write_through(aof: &Aof, offset: u64) {
    if aof.written(offset) {
        return;
    }
    let mut o = aof.output.lock();
    if aof.written(offset) {
        return;
    }
    let mut f = aof.feed.lock();
    if o.failing || o.target.is_none() || f.install.is_some() || f.close || f.stop {
        drop(f);
        aof.wake_writer.notify_one();
        return;
    }
    if !f.main.buf.is_empty() {
        let o = &mut *o;
        if o.pending.is_empty() {
            std::mem::swap(&mut o.pending, &mut f.main.buf);
        } else {
            o.pending.append(&mut f.main.buf);
        }
        o.pending_end = f.fed;
    }
    drop(f);
    write_pending(aof, &mut o, Fsync::Everysec);
}

/// Writes `o.pending`; under `always` fsyncs it too. Publishes the offset
/// replies wait for: after the write (or its failure: as Redis, the
/// replies go out, the data stays for the retry and later writes are
/// refused) under `everysec` and `no`; after the fsync under `always`.
fn write_pending(aof: &Aof, o: &mut Output, policy: Fsync) {
    let Some(t) = o.target.as_mut() else {
        return;
    };
    if o.pending.is_empty() {
        return;
    }
    let end = o.pending_end;
    match write_out(aof, t, &mut o.pending) {
        Ok(()) => {
            o.unsynced = true;
            if policy == Fsync::Always {
                match fsync(aof, t) {
                    Ok(()) => {
                        o.unsynced = false;
                        recovered(aof, &mut o.failing);
                        aof.publish_synced(end);
                        // The next fsync waits for the worker to send
                        // these replies and take the commands they bring
                        // back.
                        aof.await_fresh_kick(end);
                    }
                    Err(e) => fail(aof, &e, o),
                }
            } else {
                recovered(aof, &mut o.failing);
                aof.publish_synced(end);
            }
        }
        Err(e) => {
            fail(aof, &e, o);
            if policy != Fsync::Always {
                aof.publish_synced(end);
            }
        }
    }
}

/// The writer loop; returns when the server shuts down.
pub fn run(aof: &Aof) {
    let mut last_fsync = Instant::now();
    let mut last_tick = Instant::now();
    loop {
        let mut o = aof.output.lock();
        let mut f = aof.feed.lock();
        if let Some((file, size)) = f.install.take() {
            // A rewrite replaced the file with one holding everything fed
            // so far: what is pending belonged to the old one.
            o.pending.clear();
            o.target = Some(Target::new(file, size));
            o.unsynced = false;
            if o.failing {
                recovered(aof, &mut o.failing);
            }
        }
        if f.close {
            f.close = false;
            let o = &mut *o;
            if let Some(t) = o.target.as_mut() {
                o.pending.append(&mut f.main.buf);
                if write_out(aof, t, &mut o.pending).is_err() {
                    tracing::warn!("Can't write the rest of the AOF before closing it");
                }
                let _ = fsync(aof, t);
            }
            o.pending.clear();
            f.main.buf.clear();
            o.target = None;
            o.failing = false;
            continue;
        }
        let now = Instant::now();
        let policy = aof.fsync();
        let wait = if o.failing {
            // After an error: retry once a second, whatever arrives.
            o.next_retry
                .map_or(Duration::ZERO, |t| t.saturating_duration_since(now))
        } else if f.main.buf.is_empty() && o.pending.is_empty() {
            Duration::from_millis(1000).saturating_sub(last_tick.elapsed())
        } else if policy == Fsync::Always && o.pending.is_empty() && f.kick_to <= o.pending_end {
            // Until a worker goes idle (`Aof::worker_idle`), at most
            // KICK_WAIT: the writes of its turn share one fsync.
            KICK_WAIT
        } else {
            Duration::ZERO
        };
        if !f.stop && !wait.is_zero() {
            // Workers write meanwhile (`write_through`).
            drop(o);
            aof.wake_writer.wait_for(&mut f, wait);
            // A rewrite may have swapped the file while we waited: what is
            // fed from now on belongs to the new file, so install it first
            // (writing it to the old, replaced file would lose it).
            if f.install.is_some() || f.close {
                continue;
            }
            drop(f);
            o = aof.output.lock();
            f = aof.feed.lock();
            if f.install.is_some() || f.close {
                continue;
            }
        }
        let stop = f.stop;
        let retry_due = !o.failing || o.next_retry.is_none_or(|t| Instant::now() >= t) || stop;
        if retry_due && !f.main.buf.is_empty() {
            let o = &mut *o;
            if o.pending.is_empty() {
                std::mem::swap(&mut o.pending, &mut f.main.buf);
            } else {
                o.pending.append(&mut f.main.buf);
            }
            o.pending_end = f.fed;
        }
        drop(f);

        let policy = aof.fsync();
        if o.target.is_some() {
            if retry_due {
                write_pending(aof, &mut o, policy);
            }
            let due = last_fsync.elapsed() >= Duration::from_secs(1);
            if o.unsynced && !o.failing && (stop || (policy == Fsync::Everysec && due)) {
                // Fsynced through the second handle, without the lock:
                // what was written before this point is covered.
                o.unsynced = false;
                let sync = o.target.as_ref().and_then(|t| t.sync.clone());
                drop(o);
                let r = match &sync {
                    Some(file) => check_fault(aof).and_then(|()| file.sync_data()),
                    None => Ok(()),
                };
                o = aof.output.lock();
                match r {
                    Ok(()) => last_fsync = Instant::now(),
                    Err(e) => {
                        o.unsynced = true;
                        fail(aof, &e, &mut o);
                    }
                }
            }
        } else {
            // No file (AOF off, or waiting for its first rewrite): no
            // reply waits for it.
            o.pending.clear();
            aof.publish_synced(o.pending_end);
        }
        let failing = o.failing;
        drop(o);
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

fn fail(aof: &Aof, e: &io::Error, o: &mut Output) {
    let text = error_text(e);
    if !o.failing {
        tracing::warn!("Error writing to the AOF file: {text}");
    }
    o.failing = true;
    o.next_retry = Some(Instant::now() + Duration::from_secs(1));
    aof.set_write_error(Some(text));
}

fn recovered(aof: &Aof, failing: &mut bool) {
    if *failing || aof.write_error().is_some() {
        tracing::warn!("AOF write error looks solved, Rostrum can write again.");
    }
    *failing = false;
    aof.set_write_error(None);
}
