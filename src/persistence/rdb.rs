//! RDB files: `dir`/`dbfilename` written by SAVE, BGSAVE, the `save`
//! points and SHUTDOWN, and loaded at start-up when `appendonly` is off.
//!
//! A save shows the data as it was at one instant: it takes every shard
//! lock for a moment (T0), then writes the point-in-time snapshot of
//! `state::journal::snapshot` (the AOF rewrite's, here in RDB format):
//! shards captured before a command changes them, big sorted sets walked
//! in steps with copy-before-write per member, so no client waits on it. The file is written to `temp-<pid>.rdb`, fsynced,
//! renamed over the old one and the directory fsynced, so a crash at any
//! moment leaves the previous file whole. The bytes are `engine::rdb`'s.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crate::commands;
use crate::commands::server::MemoryFigures;
use crate::engine::rdb::crc64::crc64;
use crate::engine::rdb::{decode, encode};
use crate::protocol::Reply;
use crate::state::client::{ClientInfo, ClientState};
use crate::state::journal::snapshot::{self, Format, Job};
use crate::state::journal::{self, Aof};
use crate::state::{unix_ms, Server};

/// Where the RDB file lives: `dir`/`dbfilename`.
pub fn rdb_path(server: &Server) -> PathBuf {
    let c = server.config.read();
    PathBuf::from(&c.dir).join(&c.dbfilename)
}

/// Whether neither RDB save points nor the AOF are on (Redis's
/// `allPersistenceDisabled`).
pub fn persistence_off(server: &Server) -> bool {
    let c = server.config.read();
    !c.appendonly && c.save_points().is_empty()
}

/// `rdb-del-sync-files yes`: removes the RDB file a full sync used (on a
/// primary after a disk-based sync read it, on a replica after loading it)
/// when persistence is off, so that no file of data the instance does not
/// persist stays on its disk, as Redis 7.0 does.
pub fn del_sync_file(server: &Server) {
    if server.config.read().param("rdb-del-sync-files") != "yes" || !persistence_off(server) {
        return;
    }
    let path = rdb_path(server);
    match std::fs::remove_file(&path) {
        Ok(()) => tracing::info!(
            "Removing the RDB file used to sync replicas ({}): rdb-del-sync-files is on and persistence is off",
            path.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!("Can't remove the sync RDB file {}: {e}", path.display()),
    }
}

/// A replica under `repl-diskless-load disabled`: the RDB received from its
/// primary is written to a temp file, fsynced and moved over
/// `dir`/`dbfilename` before it is loaded, as Redis does.
pub fn write_sync_file(server: &Server, data: &[u8]) -> Result<(), String> {
    let path = rdb_path(server);
    let temp = path.with_file_name(format!(
        "temp-{}.{}.rdb",
        unix_ms() / 1000,
        std::process::id()
    ));
    let r = (|| -> std::io::Result<()> {
        let mut f = File::create(&temp)?;
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(&temp, &path)
    })();
    r.map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        format!(
            "Failed trying to rename the temp DB into {} in MASTER <-> REPLICA synchronization: {e}",
            path.display()
        )
    })
}

/// A file writer that keeps the CRC-64 of what went through it.
pub(super) struct Sink<W: Write = BufWriter<File>> {
    pub(super) w: W,
    crc: u64,
    checksum: bool,
}

impl<W: Write> Sink<W> {
    /// A sink writing to `w`, with a checksum when `checksum`.
    pub(super) fn new(w: W, checksum: bool) -> Sink<W> {
        Sink {
            w,
            crc: 0,
            checksum,
        }
    }

    /// Writes the CRC-64 trailer (0 without `rdbchecksum`).
    pub(super) fn put_checksum(&mut self) -> Result<(), String> {
        let crc = if self.checksum { self.crc } else { 0 };
        self.w
            .write_all(&crc.to_le_bytes())
            .map_err(|e| format!("Write error saving DB on disk: {e}"))
    }

    fn put(&mut self, data: &[u8]) -> Result<(), String> {
        if self.checksum {
            self.crc = crc64(self.crc, data);
        }
        self.w
            .write_all(data)
            .map_err(|e| format!("Write error saving DB on disk: {e}"))
    }
}

/// Ends a snapshot: the dispatcher stops copying shards out.
fn end_snapshot(aof: &Aof) {
    *aof.job.write() = None;
    aof.set_rewriting(false);
}

fn fsync_dir(path: &Path) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    File::open(dir)?.sync_all()
}

/// Writes one RDB file of the current data to `path`; returns its size
/// and the change count at T0. Runs on the snapshot thread (or alone).
pub fn save(server: &Server, path: &Path) -> Result<(u64, u64), String> {
    let aof = &server.aof;
    let temp = path.with_file_name(format!("temp-{}.rdb", std::process::id()));
    let file = File::create(&temp).map_err(|e| {
        format!(
            "Failed opening the temp RDB file {} (in server root dir {}) for saving: {e}",
            temp.display(),
            std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_default()
        )
    })?;
    let (opts, checksum) = {
        let c = server.config.read();
        (c.rdb_options(), c.rdbchecksum)
    };
    let job = Arc::new(Job::with_format(Format::Rdb(opts)));
    let libraries;
    let dirty_at_start;
    let repl_point;
    {
        // T0: no command runs while the snapshot starts.
        let all = server.keyspace.lock_all(true);
        job.begin(&all);
        libraries = server.scripting.library_codes();
        dirty_at_start = journal::dirty(aof);
        // The replication id and offset this snapshot is at (a full sync
        // sends the file and the stream after that offset).
        repl_point = aof.backlog.sync_point();
        *aof.job.write() = Some(job.clone());
        aof.set_rewriting(true);
    }
    let mut sink = Sink::new(BufWriter::with_capacity(1 << 20, file), checksum);
    let result = write_all(
        server,
        &job,
        &libraries,
        Some(&repl_point),
        &mut sink,
        false,
    );
    end_snapshot(aof);
    aof.rdb_last_cow.store(job.cow.peak(), Ordering::Relaxed);
    let finish = result.and_then(|()| {
        sink.put_checksum()?;
        let file = sink
            .w
            .into_inner()
            .map_err(|e| format!("Write error saving DB on disk: {}", e.error()))?;
        file.sync_all()
            .map_err(|e| format!("Write error saving DB on disk (fsync): {e}"))?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        std::fs::rename(&temp, path).map_err(|e| {
            format!(
                "Error moving temp DB file {} on the final destination {}: {e}",
                temp.display(),
                path.display()
            )
        })?;
        fsync_dir(path)
            .map_err(|e| format!("Failed to fsync the directory of {}: {e}", path.display()))?;
        Ok(size)
    });
    match finish {
        Ok(size) => Ok((size, dirty_at_start)),
        Err(e) => {
            let _ = std::fs::remove_file(&temp);
            Err(e)
        }
    }
}

/// A diskless full sync's RDB: the same point-in-time snapshot as a save,
/// written into memory instead of `dir`/`dbfilename` (which it leaves
/// alone), with the replication id and offset it is at. Runs on the
/// snapshot thread, one snapshot at a time.
pub fn snapshot_bytes(server: &Server) -> Result<(Vec<u8>, String, u64), String> {
    let aof = &server.aof;
    let (opts, checksum) = {
        let c = server.config.read();
        (c.rdb_options(), c.rdbchecksum)
    };
    let job = Arc::new(Job::with_format(Format::Rdb(opts)));
    let libraries;
    let repl_point;
    {
        let all = server.keyspace.lock_all(true);
        job.begin(&all);
        libraries = server.scripting.library_codes();
        repl_point = aof.backlog.sync_point();
        *aof.job.write() = Some(job.clone());
        aof.set_rewriting(true);
    }
    let mut sink = Sink::new(Vec::new(), checksum);
    let result = write_all(
        server,
        &job,
        &libraries,
        Some(&repl_point),
        &mut sink,
        false,
    );
    end_snapshot(aof);
    result.and_then(|()| sink.put_checksum())?;
    Ok((sink.w, repl_point.0, repl_point.1))
}

/// The RDB header: magic, AUX fields (`aof-base` 1 for an AOF's base
/// file), function libraries.
pub(super) fn write_header(
    server: &Server,
    head: &mut Vec<u8>,
    libraries: &[Vec<u8>],
    aof_base: bool,
    repl_point: Option<&(String, u64)>,
) {
    encode::write_magic(head);
    encode::write_aux(
        head,
        "redis-ver",
        commands::connection::REDIS_VERSION.as_bytes(),
    );
    encode::write_aux_int(head, "redis-bits", 64);
    encode::write_aux_int(head, "ctime", (unix_ms() / 1000) as i64);
    encode::write_aux_int(head, "used-mem", MemoryFigures::read(server).used as i64);
    // A save records the replication point it was taken at (a full sync
    // sends the stream after it); an AOF base records none of its own.
    match repl_point {
        Some((id, offset)) => {
            encode::write_aux(head, "repl-id", id.as_bytes());
            encode::write_aux_int(head, "repl-offset", *offset as i64);
        }
        None => {
            let replid: String = server.run_id.chars().rev().collect();
            encode::write_aux(head, "repl-id", replid.as_bytes());
            encode::write_aux_int(head, "repl-offset", 0);
        }
    }
    encode::write_aux_int(head, "aof-base", aof_base as i64);
    for code in libraries {
        encode::write_function(head, code);
    }
}

/// An RDB file with no keys (the first base of an empty AOF).
pub(super) fn empty_file(server: &Server, aof_base: bool) -> Vec<u8> {
    let mut out = Vec::new();
    write_header(server, &mut out, &[], aof_base, None);
    encode::write_eof(&mut out);
    let crc = if server.config.read().rdbchecksum {
        crc64(0, &out)
    } else {
        0
    };
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Writes the snapshot `job` as an RDB file, up to its EOF opcode (the
/// checksum is [`Sink::put_checksum`]'s).
pub(super) fn write_all(
    server: &Server,
    job: &Arc<Job>,
    libraries: &[Vec<u8>],
    repl_point: Option<&(String, u64)>,
    sink: &mut Sink<impl Write>,
    aof_base: bool,
) -> Result<(), String> {
    let mut head = Vec::new();
    write_header(server, &mut head, libraries, aof_base, repl_point);
    sink.put(&head)?;
    if !matches!(job.format, Format::Rdb(_)) {
        return Err("internal error: not an RDB snapshot".into());
    }
    snapshot::write_all(&server.keyspace, job, &mut |b| sink.put(b))?;
    let mut tail = Vec::new();
    encode::write_eof(&mut tail);
    sink.put(&tail)
}

/// One RDB save on the snapshot thread, with its bookkeeping (INFO,
/// LASTSAVE, the change counter, MISCONF).
pub fn run_save(server: &Server) {
    let aof = &server.aof;
    let path = rdb_path(server);
    let t = Instant::now();
    tracing::info!("Background saving started");
    let result = save(server, &path);
    let mut st = aof.rewrite.lock();
    st.rdb_started = None;
    st.rdb_finished += 1;
    st.rdb_last_secs = t.elapsed().as_secs() as i64;
    st.rdb_last_try = Some(Instant::now());
    match result {
        Ok((size, dirty_at_start)) => {
            st.rdb_last_ok = true;
            st.rdb_saves += 1;
            journal::rdb_saved(aof, dirty_at_start);
            aof.rdb_failed.store(false, Ordering::Release);
            tracing::info!(
                "DB saved on disk ({size} bytes, {:.3} seconds)",
                t.elapsed().as_secs_f64()
            );
        }
        Err(e) => {
            st.rdb_last_ok = false;
            aof.rdb_failed.store(true, Ordering::Release);
            tracing::warn!("Background saving error: {e}");
        }
    }
}

/// Start-up with `appendonly no`: loads `dir`/`dbfilename` when it exists.
/// The whole file is read and checked before any key is stored; an error
/// (naming the offset, and the key for a value it can't read) means the
/// server must not start.
pub fn load_at_start(server: &Server) -> Result<(), String> {
    let path = rdb_path(server);
    let data = match std::fs::read(&path) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(format!(
                "Fatal error loading the DB {}: {e}. Exiting.",
                path.display()
            ))
        }
    };
    let t = Instant::now();
    let (limits, databases) = {
        let c = server.config.read();
        (c.rdb_limits(), c.databases)
    };
    // A replica (`replicaof` in the config) keeps keys whose time passed:
    // its primary's DELs remove them, as Redis's replica loads its file.
    let replica = !server.config.read().param("replicaof").is_empty();
    let now = if replica { 0 } else { unix_ms() };
    let loaded = decode::read_file(&data, databases, now, &limits).map_err(|e| {
        format!(
            "Fatal error loading the DB {}: {e}. Exiting.",
            path.display()
        )
    })?;
    drop(data);
    if replica {
        resume_repl_point(server, &loaded.aux);
    }
    let count = loaded.keys.len() as u64;
    let expired = loaded.expired;
    apply_loaded(server, loaded).map_err(|e| {
        format!(
            "Fatal error loading the DB {}: {e}. Exiting.",
            path.display()
        )
    })?;
    server.aof.rdb_loaded_keys.store(count, Ordering::Relaxed);
    server
        .aof
        .rdb_expired_keys
        .store(expired, Ordering::Relaxed);
    tracing::info!(
        "Done loading RDB, keys loaded: {count}, keys expired: {expired}. DB loaded from disk: {:.3} seconds",
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A replica started with its file: the `repl-id` and `repl-offset` the
/// file was saved at become its replication point, so that it asks its
/// primary for a partial resync (`PSYNC <id> <offset+1>`), as Redis 7's
/// replica does with the file it saved at shutdown.
fn resume_repl_point(server: &Server, aux: &[(Vec<u8>, Vec<u8>)]) {
    let field = |name: &[u8]| {
        aux.iter()
            .find(|(k, _)| k.as_slice() == name)
            .and_then(|(_, v)| std::str::from_utf8(v).ok())
    };
    let (Some(id), Some(offset)) = (
        field(b"repl-id").filter(|id| id.len() == 40),
        field(b"repl-offset").and_then(|o| o.parse::<u64>().ok()),
    ) else {
        return;
    };
    if offset == 0 {
        return;
    }
    {
        let _f = server.aof.feed.lock();
        let mut b = server.aof.backlog.inner.lock();
        b.replid = id.to_string();
        b.replid2 = "0".repeat(40);
        b.second_offset = -1;
        b.end = offset;
        b.stream.buf.clear();
        b.stream.db = None;
        b.active = true;
    }
    server.aof.backlog.end_reset(offset);
    server.replication.applied.store(offset, Ordering::Release);
    tracing::info!("Replication point from the RDB file: {id}:{offset}");
}

/// Stores what an RDB file held: its function libraries, then its keys.
pub(super) fn apply_loaded(server: &Server, loaded: decode::LoadedFile) -> Result<(), String> {
    load_functions(server, &loaded.functions)?;
    let now = unix_ms();
    let folder = crate::engine::leaderboard::disk::folder(Path::new(&server.config.read().dir));
    for mut k in loaded.keys {
        // Periods of ARCHIVE DISK boards come whole from the file; they
        // go back to disk.
        if let crate::engine::Value::Leaderboard(b) = &mut k.value {
            for e in b.place_archives(&folder, &k.key, k.db as u64, true) {
                tracing::warn!("{e}");
            }
            // A seasonal board is rolled by the server's timer at its
            // boundary (one already passed is rolled at once).
            server.season_timers.arm_board(b, k.db, &k.key);
        }
        let mut g = server
            .keyspace
            .lock_one(server.keyspace.shard_of(&k.key), true);
        if let Some(db) = g.shard_mut().and_then(|s| s.dbs.get_mut(k.db)) {
            db.insert_with_expiry(&k.key, k.value, k.expire_ms, now);
        }
    }
    Ok(())
}

/// Loads function libraries as FUNCTION LOAD REPLACE does.
fn load_functions(server: &Server, codes: &[Vec<u8>]) -> Result<(), String> {
    if codes.is_empty() {
        return Ok(());
    }
    let info = Arc::new(ClientInfo::new(0, String::new(), String::new(), unix_ms()));
    let mut client = ClientState::new(info, true);
    let mut out = Reply::new(false);
    for code in codes {
        out.buf.clear();
        let args: [&[u8]; 4] = [b"FUNCTION", b"LOAD", b"REPLACE", code];
        commands::execute(server, &mut client, &mut out, &args);
        if out.buf.first() == Some(&b'-') {
            let line = String::from_utf8_lossy(&out.buf);
            return Err(format!(
                "a function library failed to load: {}",
                line.trim_end()
            ));
        }
    }
    Ok(())
}
