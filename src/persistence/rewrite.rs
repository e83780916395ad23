//! AOF rewrite: a compact file of the current data, written while clients
//! keep being served, then swapped in atomically.
//!
//! The rewrite shows the data as it was at one instant T0 (taken with
//! every shard locked for a moment), plus every change fed since T0. It
//! reads the shards one at a time; a command that is about to change a
//! shard the rewrite has not read yet first writes that shard out as it
//! is ([`presave`], "copy before write"), and the active expiry cycle
//! waits until the rewrite ends. So each shard is captured before any
//! change made after T0, and replaying the changes collected since T0 on
//! top gives exactly the current data. At the end, under the feed mutex,
//! the collected changes are appended, the temp file is fsynced, renamed
//! over the AOF, the directory fsynced, and the writer continues on it.

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use smallvec::SmallVec;

use super::encode::{write_command, write_select};
use super::writer::{check_fault, error_text};
use super::{aof_path, Stream};
use crate::commands::table::{flags, CommandSpec, KeySpec};
use crate::engine::bitmap::CHUNK_BYTES;
use crate::engine::keyspace::{Locked, Shard, ShardGuard, SHARD_COUNT};
use crate::engine::set::{Member, SetValue};
use crate::engine::string::StrValue;
use crate::engine::zset::ZSet;
use crate::engine::Value;
use crate::protocol::number::{format_double, MAX_DOUBLE_CHARS};
use crate::server::client::ClientState;
use crate::server::state::{unix_ms, Server};

/// Most elements per ZADD / SADD command in a rewritten file (Redis's
/// AOF_REWRITE_ITEMS_PER_CMD).
pub const ITEMS_PER_COMMAND: usize = 64;

/// A running rewrite, shared with the dispatcher.
pub struct Job {
    /// Shards already written out (by the rewrite or by [`presave`]).
    done: Vec<AtomicBool>,
    /// Shards written out by commands, waiting to go to the file.
    chunks: Mutex<Vec<Vec<u8>>>,
    /// Set to give up (shutdown).
    pub(crate) abort: AtomicBool,
}

impl Job {
    fn new() -> Self {
        Job {
            done: (0..SHARD_COUNT).map(|_| AtomicBool::new(false)).collect(),
            chunks: Mutex::new(Vec::new()),
            abort: AtomicBool::new(false),
        }
    }

    fn is_done(&self, i: usize) -> bool {
        self.done.get(i).is_some_and(|d| d.load(Ordering::Acquire))
    }

    fn mark_done(&self, i: usize) {
        if let Some(d) = self.done.get(i) {
            d.store(true, Ordering::Release);
        }
    }
}

/// The elements of a sorted set, for its ZADD commands.
fn zset_items(z: &ZSet) -> impl Iterator<Item = (&[u8], f64)> {
    z.iter()
}

/// The members of a set, for its SADD commands (intset members formatted).
fn set_members(s: &SetValue) -> impl Iterator<Item = Cow<'_, [u8]>> {
    s.iter().map(|m| match m {
        Member::Int(n) => Cow::Owned(itoa::Buffer::new().format(n).as_bytes().to_vec()),
        Member::Bytes(b) => Cow::Borrowed(b),
    })
}

/// Appends `ZADD key score member ...` commands of at most
/// [`ITEMS_PER_COMMAND`] pairs.
pub fn write_zadds<'a>(
    out: &mut Vec<u8>,
    key: &[u8],
    items: impl Iterator<Item = (&'a [u8], f64)>,
) {
    let mut batch: Vec<(Vec<u8>, &'a [u8])> = Vec::with_capacity(ITEMS_PER_COMMAND);
    let flush = |batch: &mut Vec<(Vec<u8>, &'a [u8])>, out: &mut Vec<u8>| {
        if batch.is_empty() {
            return;
        }
        let mut args: Vec<&[u8]> = Vec::with_capacity(2 + batch.len() * 2);
        args.push(b"ZADD");
        args.push(key);
        for (score, member) in batch.iter() {
            args.push(score);
            args.push(member);
        }
        write_command(out, args.into_iter());
        batch.clear();
    };
    let mut num = [0u8; MAX_DOUBLE_CHARS];
    for (member, score) in items {
        let n = format_double(score, &mut num);
        batch.push((num[..n].to_vec(), member));
        if batch.len() == ITEMS_PER_COMMAND {
            flush(&mut batch, out);
        }
    }
    flush(&mut batch, out);
}

/// Appends `SADD key member ...` commands of at most [`ITEMS_PER_COMMAND`]
/// members.
pub fn write_sadds<'a>(
    out: &mut Vec<u8>,
    key: &[u8],
    members: impl Iterator<Item = Cow<'a, [u8]>>,
) {
    let mut batch: Vec<Cow<'a, [u8]>> = Vec::with_capacity(ITEMS_PER_COMMAND);
    let flush = |batch: &mut Vec<Cow<'a, [u8]>>, out: &mut Vec<u8>| {
        if batch.is_empty() {
            return;
        }
        let mut args: Vec<&[u8]> = Vec::with_capacity(2 + batch.len());
        args.push(b"SADD");
        args.push(key);
        args.extend(batch.iter().map(|m| m.as_ref()));
        write_command(out, args.into_iter());
        batch.clear();
    };
    for m in members {
        batch.push(m);
        if batch.len() == ITEMS_PER_COMMAND {
            flush(&mut batch, out);
        }
    }
    flush(&mut batch, out);
}

/// A compressed (sparse) bitmap as SETRANGE commands: its last byte first
/// (which sets the length), then each block holding a set bit, so the
/// rewrite never builds the whole zero-filled string.
fn write_sparse_string(out: &mut Vec<u8>, key: &[u8], s: &StrValue) {
    let len = s.len() as u64;
    if len == 0 {
        write_command(out, [&b"SET"[..], key, b""].into_iter());
        return;
    }
    let mut num = itoa::Buffer::new();
    let mut last = [0u8; 1];
    s.read_bytes(len - 1, &mut last);
    write_command(
        out,
        [&b"SETRANGE"[..], key, num.format(len - 1).as_bytes(), &last].into_iter(),
    );
    let mut block = vec![0u8; CHUNK_BYTES];
    for k in s.nonzero_blocks() {
        let start = k * CHUNK_BYTES as u64;
        let n = (len - start.min(len)).min(CHUNK_BYTES as u64) as usize;
        let Some(buf) = block.get_mut(..n) else {
            continue;
        };
        s.read_bytes(start, buf);
        write_command(
            out,
            [&b"SETRANGE"[..], key, num.format(start).as_bytes(), buf].into_iter(),
        );
    }
}

/// Appends the commands that recreate `key` holding `value`.
pub fn write_value(out: &mut Vec<u8>, key: &[u8], value: &Value) {
    match value {
        Value::Str(s) if s.is_compressed() => write_sparse_string(out, key, s),
        Value::Str(s) => write_command(out, [&b"SET"[..], key, &s.as_bytes()].into_iter()),
        Value::ZSet(z) => write_zadds(out, key, zset_items(z)),
        Value::Set(s) => write_sadds(out, key, set_members(s)),
    }
}

/// Appends every live key of a shard (all databases) as commands, each
/// database after its SELECT.
pub fn write_shard(out: &mut Vec<u8>, shard: &Shard, now_ms: u64) {
    let mut num = itoa::Buffer::new();
    for (i, db) in shard.dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        let mut selected = false;
        for (key, entry) in db.iter() {
            let at = entry.expire_at();
            if at.is_some_and(|t| t <= now_ms) {
                continue;
            }
            if !selected {
                write_select(out, i);
                selected = true;
            }
            write_value(out, key, &entry.value);
            if let Some(t) = at {
                let ms = num.format(t).as_bytes();
                write_command(out, [&b"PEXPIREAT"[..], key, ms].into_iter());
            }
        }
    }
}

/// The shards a command may change, `None` for every shard.
fn shards_written(
    server: &Server,
    client: &ClientState,
    spec: &CommandSpec,
    args: &[&[u8]],
) -> Option<SmallVec<[usize; 4]>> {
    let ks = &server.keyspace;
    match spec.keys {
        KeySpec::All if spec.name == "exec" => {
            let mut out = SmallVec::new();
            for q in client.multi.as_deref().unwrap_or(&[]) {
                let a: Vec<&[u8]> = q.args.iter().map(|x| x.as_slice()).collect();
                let Ok(cmd) = crate::commands::resolve(&a) else {
                    continue;
                };
                if matches!(cmd.spec.keys, KeySpec::All) {
                    return None;
                }
                for i in cmd.spec.key_indexes(&a) {
                    if let Some(k) = a.get(i) {
                        out.push(ks.shard_of(k));
                    }
                }
            }
            Some(out)
        }
        KeySpec::All => None,
        _ => Some(
            spec.key_indexes(args)
                .into_iter()
                .filter_map(|i| args.get(i).map(|k| ks.shard_of(k)))
                .collect(),
        ),
    }
}

/// Copy before write: writes out, as they are now, the shards a command
/// holds for writing and may change, unless the rewrite already has them.
pub fn presave(
    server: &Server,
    job: &Job,
    client: &ClientState,
    spec: &CommandSpec,
    args: &[&[u8]],
    locked: &Locked<'_>,
) {
    let may_write = spec.has(flags::WRITE) || spec.has(flags::MAY_REPLICATE) || spec.name == "exec";
    if !may_write {
        return;
    }
    let shards = match shards_written(server, client, spec, args) {
        Some(s) => s,
        None => (0..SHARD_COUNT).collect(),
    };
    for i in shards {
        if job.is_done(i) {
            continue;
        }
        // Only a write lock keeps the shard still (and the rewrite out).
        let Some(ShardGuard::Write(g)) = locked.guard(i) else {
            continue;
        };
        let mut chunk = Vec::new();
        write_shard(&mut chunk, g, unix_ms());
        job.chunks.lock().push(chunk);
        job.mark_done(i);
    }
}

fn io_err(what: &str, e: std::io::Error) -> String {
    format!("{what}: {}", error_text(&e))
}

fn write_all(aof: &super::Aof, w: &mut impl Write, data: &[u8]) -> Result<(), String> {
    check_fault(aof).map_err(|e| io_err("Error writing the rewritten AOF", e))?;
    w.write_all(data)
        .map_err(|e| io_err("Error writing the rewritten AOF", e))
}

fn flush_chunks(aof: &super::Aof, job: &Job, w: &mut impl Write) -> Result<(), String> {
    let chunks = std::mem::take(&mut *job.chunks.lock());
    for c in chunks {
        write_all(aof, w, &c)?;
    }
    Ok(())
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
        let _all = server.keyspace.lock_all(true);
        // Function libraries change only with every shard locked.
        libraries = server.scripting.library_codes();
        aof.feed.lock().rewrite = Some(Stream::default());
        *aof.job.write() = Some(job.clone());
        aof.set_rewriting(true);
    }
    let result = write_and_swap(server, &job, &libraries, file, &temp, &path);
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
    for i in 0..SHARD_COUNT {
        if job.abort.load(Ordering::Acquire) {
            return Err("rewrite aborted".into());
        }
        flush_chunks(aof, job, &mut w)?;
        if job.is_done(i) {
            continue;
        }
        {
            let g = server.keyspace.lock_one(i, false);
            if !job.is_done(i) {
                write_shard(&mut chunk, g.shard(), unix_ms());
                job.mark_done(i);
            }
        }
        write_all(aof, &mut w, &chunk)?;
        chunk.clear();
    }
    flush_chunks(aof, job, &mut w)?;
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

/// The rewrite thread: runs the rewrites asked for, one at a time.
pub fn run(server: &Server) {
    let aof = &server.aof;
    loop {
        {
            let mut st = aof.rewrite.lock();
            while !st.requested && !st.stop {
                aof.wake_rewriter.wait(&mut st);
            }
            if st.stop {
                return;
            }
            st.requested = false;
            st.started = Some(Instant::now());
        }
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
                super::saved(server);
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
        if st.scheduled {
            st.scheduled = false;
            st.requested = true;
        }
        aof.rewrite_done.notify_all();
    }
}

/// Once a second (from the writer thread): the automatic rewrite when the
/// file grew by `auto-aof-rewrite-percentage` over its size after the last
/// rewrite and is over `auto-aof-rewrite-min-size`, and a retry of the
/// first rewrite after the AOF was turned on.
pub fn cron(server: &Server) {
    let aof = &server.aof;
    {
        let st = aof.rewrite.lock();
        if st.requested || st.started.is_some() || st.stop {
            return;
        }
    }
    if aof.waiting_rewrite() {
        super::request_rewrite(server);
        return;
    }
    if !aof.enabled() {
        return;
    }
    let (perc, min) = {
        let c = server.config.read();
        (c.auto_aof_rewrite_percentage, c.auto_aof_rewrite_min_size)
    };
    let cur = aof.current_size.load(Ordering::Relaxed);
    let base = aof.base_size.load(Ordering::Relaxed).max(1);
    if perc == 0 || cur <= min {
        return;
    }
    let growth = cur.saturating_sub(base).saturating_mul(100) / base;
    if growth >= perc {
        tracing::info!("Starting automatic rewriting of AOF on {growth}% growth");
        super::request_rewrite(server);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zadd_batches_are_bounded() {
        let members: Vec<Vec<u8>> = (0..130).map(|i| format!("m{i}").into_bytes()).collect();
        let mut out = Vec::new();
        write_zadds(&mut out, b"k", members.iter().map(|m| (m.as_slice(), 0.1)));
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.matches("ZADD").count(), 3);
        assert!(text.starts_with("*130\r\n$4\r\nZADD\r\n$1\r\nk\r\n$19\r\n0.10000000000000001\r\n"));
        assert!(text.contains("*6\r\n$4\r\nZADD"));
        let mut out = Vec::new();
        write_sadds(
            &mut out,
            b"s",
            members.iter().take(65).map(|m| Cow::Borrowed(m.as_slice())),
        );
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.matches("SADD").count(), 2);
        assert!(text.contains("*3\r\n$4\r\nSADD\r\n$1\r\ns\r\n$3\r\nm64\r\n"));
    }
}
