//! Durability above the command layer: what drives the dispatcher or walks
//! the keyspace. The journal every write is fed to (the AOF's format, its
//! writer thread, copy-before-write) is `state::journal`, below `commands`.
//!
//! - [`start`] loads the AOF at start-up ([`load`] replays each file
//!   through the dispatcher) and starts the writer and rewrite threads;
//! - [`aofdir`] is the AOF's files in Redis 7.0's layout (`appendonlydir/`,
//!   its manifest, base and incr files, the upgrade of a single file);
//! - [`rewrite`] writes a compact file of the current data in the
//!   background (BGREWRITEAOF, SAVE, automatic rewrite) and swaps it in;
//! - [`rdb`] saves and loads `dir`/`dbfilename` (SAVE, BGSAVE, the save
//!   points, start-up with `appendonly no`);
//! - [`check`] is `rostrum check-aof`.

pub mod aofdir;
pub mod check;
pub mod load;
pub mod rdb;
pub mod rewrite;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::state::journal::writer;
use crate::state::Server;

/// After loading: reports every closed period whose archive file could
/// not be opened (by its file's name; the period stays, unavailable), and
/// deletes the files of the archive folder that no loaded board refers to
/// (periods dropped while a rewrite was under way, copies a replay of the
/// AOF or an RDB file wrote again under a new name).
fn check_archives(server: &Server) {
    use crate::engine::leaderboard::{disk, ArchiveData};
    use crate::engine::Value;
    let folder = disk::folder(std::path::Path::new(&server.config.read().dir));
    let mut referenced = std::collections::HashSet::new();
    for i in 0..crate::engine::SHARD_COUNT {
        let g = server.keyspace.lock_one(i, false);
        for (dbi, d) in g.shard().dbs.iter().enumerate() {
            for (key, e) in d.iter() {
                let Value::Leaderboard(b) = &e.value else {
                    continue;
                };
                for a in b.season().into_iter().flat_map(|s| s.archives()) {
                    match &a.data {
                        ArchiveData::Memory(_) => {}
                        ArchiveData::Disk(d) => {
                            referenced.insert(d.name());
                        }
                        ArchiveData::Unavailable(u) => {
                            tracing::warn!(
                                "Archive file {} of period {} of '{}' (db {dbi}) can't be used: {}; the period is unavailable",
                                folder.join(&u.name).display(),
                                a.number,
                                String::from_utf8_lossy(key),
                                u.reason
                            );
                            referenced.insert(u.name.clone());
                        }
                    }
                }
            }
        }
    }
    for path in disk::files_in(&folder) {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !referenced.contains(&name) {
            tracing::info!("Deleting {}: no board refers to it", path.display());
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Start-up: loads the AOF when `appendonly` is on (before any client is
/// accepted), opens it for appending, and starts the writer and rewrite
/// threads. An error means the server must not start.
pub fn start(server: &Arc<Server>) -> Result<(), String> {
    if server.aof.started.swap(true, Ordering::AcqRel) {
        return Ok(());
    }
    let (on, truncated_ok) = {
        let c = server.config.read();
        (c.appendonly, c.aof_load_truncated)
    };
    if on {
        let layout = aofdir::Layout::of(server);
        let manifest = layout.upgrade_or_read()?;
        if let Some(m) = &manifest {
            server.aof.set_loading(true);
            let r = load_files(server, &layout, m, truncated_ok);
            server.aof.set_loading(false);
            r?;
            // The replay's lookups are not the clients'.
            server.stats.zero(|h| &h.keyspace_hits);
            server.stats.zero(|h| &h.keyspace_misses);
        }
        let rdb_base = server.config.read().aof_use_rdb_preamble();
        let (file, size, before) = layout.open_for_append(
            manifest,
            |rdb| {
                if rdb {
                    rdb::empty_file(server, true)
                } else {
                    Vec::new()
                }
            },
            rdb_base,
        )?;
        server.aof.base_size.store(before, Ordering::Relaxed);
        server.aof.current_size.store(size, Ordering::Relaxed);
        server.aof.feed.lock().install = Some((file, size));
        server.aof.set_state_on();
    } else {
        // Without the AOF, the RDB file is the data (as Redis loads it).
        server.aof.set_loading(true);
        let r = rdb::load_at_start(server);
        server.aof.set_loading(false);
        r?;
    }
    check_archives(server);
    let s = server.clone();
    let w = std::thread::Builder::new()
        .name("aof-writer".into())
        .spawn(move || writer::run(&s.aof))
        .map_err(|e| format!("can't start the AOF writer thread: {e}"))?;
    *server.aof.writer_thread.lock() = Some(w);
    let s = server.clone();
    std::thread::Builder::new()
        .name("aof-rewrite".into())
        .spawn(move || rewrite::run(&s))
        .map_err(|e| format!("can't start the AOF rewrite thread: {e}"))?;
    Ok(())
}

/// Loads the manifest's base then its incrs, in order. Only the last file
/// may end with a command cut short (`aof-load-truncated`), as in Redis 7.
fn load_files(
    server: &Server,
    layout: &aofdir::Layout,
    m: &aofdir::Manifest,
    truncated_ok: bool,
) -> Result<(), String> {
    let files: Vec<&aofdir::AofFile> = m.load_order().collect();
    for (i, f) in files.iter().enumerate() {
        let path = layout.file(&f.name);
        if !path.is_file() {
            return Err(format!(
                "The AOF file {} doesn't exist (named by the manifest {})",
                path.display(),
                layout.manifest_path().display()
            ));
        }
        let last = i + 1 == files.len();
        load::load_file(server, &path, truncated_ok && last)?;
    }
    Ok(())
}
