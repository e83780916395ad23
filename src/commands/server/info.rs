//! INFO: the server's state as `field:value` lines grouped in sections, with
//! Redis 7.0's section and field names. Figures Rostrum has no counterpart
//! for (RDB, replication, forks, defrag, ...) are reported as an idle Redis
//! master would report them.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::super::table::{flags::*, table, CommandSpec};
use super::super::Ctx;
use super::{client, srv};
use crate::commands::connection::REDIS_VERSION;
use crate::error::CmdResult;
use crate::state::pubsub::Kind;
use crate::state::Server;
use crate::state::{unix_ms, unix_us};

/// INFO [section ...].
pub const INFO: CommandSpec = srv(
    "info",
    -1,
    LOADING | STALE,
    info,
    "Get information and statistics about the server",
    "1.0.0",
    "O(1)",
);

/// Every section in output order: (name, header, in the default set).
const SECTIONS: &[(&str, &str, bool)] = &[
    ("server", "Server", true),
    ("clients", "Clients", true),
    ("memory", "Memory", true),
    ("persistence", "Persistence", true),
    ("stats", "Stats", true),
    ("replication", "Replication", true),
    ("cpu", "CPU", true),
    ("modules", "Modules", true),
    ("commandstats", "Commandstats", false),
    ("errorstats", "Errorstats", true),
    ("latencystats", "Latencystats", false),
    ("cluster", "Cluster", true),
    ("keyspace", "Keyspace", true),
    ("leaderboards", "Leaderboards", false),
];

fn info(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    // This client's calls so far count, those of a pipeline's earlier
    // commands too (held until its batch ends otherwise).
    crate::commands::flush_stats(ctx.server, ctx.client);
    let mut wanted = [false; SECTIONS.len()];
    if a.len() == 1 {
        for (w, s) in wanted.iter_mut().zip(SECTIONS) {
            *w = s.2;
        }
    }
    for arg in &a[1..] {
        let arg = String::from_utf8_lossy(arg).to_ascii_lowercase();
        for (w, s) in wanted.iter_mut().zip(SECTIONS) {
            *w |= match arg.as_str() {
                "all" | "everything" => true,
                "default" => s.2,
                name => name == s.0,
            };
        }
    }
    let mut text = String::new();
    for (i, (name, header, _)) in SECTIONS.iter().enumerate() {
        if !wanted[i] {
            continue;
        }
        if !text.is_empty() {
            text.push_str("\r\n");
        }
        let _ = write!(text, "# {header}\r\n");
        section(ctx, name, &mut text);
    }
    ctx.out.verbatim(text.as_bytes());
    Ok(())
}

/// Appends `name:value\r\n` lines.
struct Lines<'a>(&'a mut String);

impl Lines<'_> {
    fn put(&mut self, name: &str, value: impl std::fmt::Display) {
        let _ = write!(self.0, "{name}:{value}\r\n");
    }
}

fn section(ctx: &Ctx, name: &str, text: &mut String) {
    let mut l = Lines(text);
    let server = ctx.server;
    match name {
        "server" => server_section(server, &mut l),
        "clients" => clients_section(server, &mut l),
        "memory" => memory_section(server, &mut l),
        "persistence" => persistence_section(server, &mut l),
        "stats" => stats_section(ctx, &mut l),
        "replication" => replication_section(server, &mut l),
        "cpu" => cpu_section(&mut l),
        "commandstats" => commandstats_section(server, &mut l),
        "errorstats" => {
            let mut errors: Vec<(String, u64)> = server
                .error_stats
                .lock()
                .iter()
                .map(|(k, v)| (k.clone(), *v))
                .collect();
            errors.sort();
            for (code, n) in errors {
                l.put(&format!("errorstat_{code}"), format!("count={n}"));
            }
        }
        "latencystats" => latencystats_section(server, &mut l),
        "cluster" => l.put("cluster_enabled", 0),
        "keyspace" => keyspace_section(ctx, &mut l),
        "leaderboards" => leaderboards_section(ctx, &mut l),
        // modules: Rostrum has none to report.
        _ => {}
    }
}

fn server_section(server: &Server, l: &mut Lines) {
    let uptime = server.started.elapsed().as_secs();
    let config = server.config.read();
    l.put("redis_version", REDIS_VERSION);
    l.put("rostrum_version", env!("CARGO_PKG_VERSION"));
    l.put("redis_git_sha1", "00000000");
    l.put("redis_git_dirty", 0);
    l.put("redis_build_id", "0");
    l.put("redis_mode", "standalone");
    l.put("os", os_name());
    l.put("arch_bits", usize::BITS);
    l.put("monotonic_clock", "POSIX clock_gettime");
    l.put("multiplexing_api", "epoll");
    l.put("atomicvar_api", "c11-builtin");
    l.put("gcc_version", "0.0.0");
    l.put("process_id", std::process::id());
    l.put("process_supervised", "no");
    l.put("run_id", &server.run_id);
    l.put("tcp_port", server.port.load(Ordering::Relaxed));
    l.put("server_time_usec", unix_us());
    l.put("uptime_in_seconds", uptime);
    l.put("uptime_in_days", uptime / 86400);
    l.put("hz", config.hz);
    l.put("configured_hz", config.hz);
    l.put("lru_clock", (unix_ms() / 1000) & ((1 << 24) - 1));
    l.put(
        "executable",
        std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
    );
    l.put(
        "config_file",
        server
            .config_file
            .as_deref()
            .map(|p| {
                std::fs::canonicalize(p)
                    .map(|a| a.display().to_string())
                    .unwrap_or_else(|_| p.to_string())
            })
            .unwrap_or_default(),
    );
    l.put("io_threads_active", 0);
}

/// `Linux <release> <machine>`, as Redis prints uname.
fn os_name() -> String {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let os = match std::env::consts::OS {
        "linux" => "Linux",
        "macos" => "Darwin",
        other => other,
    };
    format!("{os} {} {}", release.trim(), std::env::consts::ARCH)
}

fn clients_section(server: &Server, l: &mut Lines) {
    let (mut max_in, mut max_out) = (0, 0);
    for c in server.clients.iter() {
        // The read buffer's size, as Redis counts its query buffers.
        let input = c.qbuf.load(Ordering::Relaxed) + c.qbuf_free.load(Ordering::Relaxed);
        max_in = max_in.max(input);
        max_out = max_out.max(client::OutputFigures::of(c.value()).omem);
    }
    l.put("connected_clients", server.clients.len());
    l.put("cluster_connections", 0);
    l.put("maxclients", server.config.read().maxclients);
    l.put("client_recent_max_input_buffer", max_in);
    l.put("client_recent_max_output_buffer", max_out);
    l.put(
        "blocked_clients",
        server.blocked_clients.load(Ordering::Relaxed),
    );
    l.put("tracking_clients", server.tracking.figures().clients);
    l.put("clients_in_timeout_table", 0);
}

/// Bytes the clients' buffers hold: read buffers, reply buffers and
/// queued messages (INFO `mem_clients_normal`).
fn client_buffers(server: &Server) -> usize {
    server.clients.iter().map(|c| c.buffer_memory()).sum()
}

/// The replication stream's buffer, as Redis 7.0 reports its shared
/// replication buffer: all of it (`mem_total_replication_buffers`), the
/// part up to `repl-backlog-size` (`mem_replication_backlog`) and the rest,
/// held for replicas that lag (`mem_clients_slaves`).
pub struct ReplicationBuffers {
    pub total: u64,
    pub backlog: u64,
    pub replicas: u64,
}

impl ReplicationBuffers {
    pub fn read(server: &Server) -> Self {
        let (total, size) = server.aof.backlog.held();
        let backlog = total.min(size);
        ReplicationBuffers {
            total,
            backlog,
            replicas: total - backlog,
        }
    }
}

/// The process's memory figures, from jemalloc and /proc.
pub struct MemoryFigures {
    /// Bytes held by live allocations (INFO used_memory): what Redis's
    /// own allocation counter reports. That is jemalloc's `stats.allocated`
    /// less the freed blocks the threads' caches keep for reuse, which
    /// jemalloc counts as allocated until a cache flushes them.
    pub used: u64,
    /// Bytes allocated as jemalloc counts them (`stats.allocated`, INFO
    /// allocator_allocated), thread caches included.
    pub allocated: u64,
    /// Bytes in active pages (jemalloc `stats.active`).
    pub active: u64,
    /// Bytes in resident allocator pages (jemalloc `stats.resident`).
    pub resident: u64,
    /// Resident set size of the process.
    pub rss: u64,
    /// Highest `used` seen.
    pub peak: u64,
    /// Allocated at start-up (not measured: 0).
    pub startup: u64,
}

impl MemoryFigures {
    /// Reads the current figures and updates the recorded peak.
    pub fn read(server: &Server) -> Self {
        use tikv_jemalloc_ctl::stats;
        let (used, allocated) = crate::state::memory::allocator_used();
        server.memory.note_reading(used);
        let active = stats::active::read().unwrap_or(0) as u64;
        let resident = stats::resident::read().unwrap_or(0) as u64;
        let peak = server
            .info_marks
            .peak_memory
            .fetch_max(used, Ordering::Relaxed)
            .max(used);
        MemoryFigures {
            used,
            allocated,
            active,
            resident,
            rss: proc_kb("/proc/self/status", "VmRSS:") * 1024,
            peak,
            startup: 0,
        }
    }
}

/// A `Name: N kB` line of a /proc file, in kB (0 when absent).
fn proc_kb(path: &str, field: &str) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// Bytes as Redis's `bytesToHuman` prints them (`967.55K`, `0B`).
pub fn human(n: u64) -> String {
    const UNITS: [(&str, f64); 5] = [
        ("K", 1024.0),
        ("M", 1048576.0),
        ("G", 1073741824.0),
        ("T", 1099511627776.0),
        ("P", 1125899906842624.0),
    ];
    if n < 1024 {
        return format!("{n}B");
    }
    let d = n as f64;
    for (i, (unit, size)) in UNITS.iter().enumerate() {
        let next = UNITS.get(i + 1).map_or(f64::INFINITY, |u| u.1);
        if d < next {
            return format!("{:.2}{unit}", d / size);
        }
    }
    format!("{n}B")
}

fn memory_section(server: &Server, l: &mut Lines) {
    let m = MemoryFigures::read(server);
    let (maxmemory, policy) = {
        let c = server.config.read();
        (c.maxmemory, c.maxmemory_policy.clone())
    };
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let total_system = proc_kb("/proc/meminfo", "MemTotal:") * 1024;
    let dataset = m.used.saturating_sub(m.startup);
    l.put("used_memory", m.used);
    l.put("used_memory_human", human(m.used));
    l.put("used_memory_rss", m.rss);
    l.put("used_memory_rss_human", human(m.rss));
    l.put("used_memory_peak", m.peak);
    l.put("used_memory_peak_human", human(m.peak));
    l.put(
        "used_memory_peak_perc",
        format!("{:.2}%", 100.0 * ratio(m.used, m.peak)),
    );
    l.put("used_memory_overhead", m.startup);
    l.put("used_memory_startup", m.startup);
    l.put("used_memory_dataset", dataset);
    l.put(
        "used_memory_dataset_perc",
        format!("{:.2}%", 100.0 * ratio(dataset, m.used)),
    );
    l.put("allocator_allocated", m.allocated);
    l.put("allocator_active", m.active);
    l.put("allocator_resident", m.resident);
    l.put("total_system_memory", total_system);
    l.put("total_system_memory_human", human(total_system));
    scripting_memory(server, l);
    l.put("maxmemory", maxmemory);
    l.put("maxmemory_human", human(maxmemory));
    l.put("maxmemory_policy", policy);
    l.put(
        "allocator_frag_ratio",
        format!("{:.2}", ratio(m.active, m.allocated)),
    );
    l.put("allocator_frag_bytes", m.active.saturating_sub(m.allocated));
    l.put(
        "allocator_rss_ratio",
        format!("{:.2}", ratio(m.resident, m.active)),
    );
    l.put("allocator_rss_bytes", m.resident.saturating_sub(m.active));
    l.put(
        "rss_overhead_ratio",
        format!("{:.2}", ratio(m.rss, m.resident)),
    );
    l.put("rss_overhead_bytes", m.rss.saturating_sub(m.resident));
    l.put(
        "mem_fragmentation_ratio",
        format!("{:.2}", ratio(m.rss, m.used)),
    );
    l.put("mem_fragmentation_bytes", m.rss.saturating_sub(m.used));
    l.put("mem_clients_normal", client_buffers(server));
    let repl = ReplicationBuffers::read(server);
    l.put(
        "mem_not_counted_for_evict",
        crate::state::memory::not_counted(server),
    );
    l.put("mem_replication_backlog", repl.backlog);
    l.put("mem_total_replication_buffers", repl.total);
    l.put("mem_clients_slaves", repl.replicas);
    l.put("mem_cluster_links", 0);
    l.put("mem_aof_buffer", 0);
    l.put("mem_allocator", "jemalloc-5.3.0");
    l.put("active_defrag_running", 0);
    l.put("lazyfree_pending_objects", 0);
    l.put("lazyfreed_objects", 0);
}

/// The scripting lines of the memory section. Rostrum runs EVAL scripts
/// and functions in one Lua VM: its heap is reported as the eval VM's
/// (`used_memory_lua`, `used_memory_vm_eval`) and as the total, with 0 for
/// a separate functions VM.
fn scripting_memory(server: &Server, l: &mut Lines) {
    let running = &server.scripting.running;
    let m = &running.memory;
    let vm = m.vm_bytes.load(Ordering::Relaxed);
    let scripts = m.scripts_bytes.load(Ordering::Relaxed);
    let functions = m.functions_bytes.load(Ordering::Relaxed);
    let (libraries, function_count) = *running.counts.lock();
    l.put("used_memory_lua", vm);
    l.put("used_memory_vm_eval", vm);
    l.put("used_memory_lua_human", human(vm));
    l.put("used_memory_scripts_eval", scripts);
    l.put(
        "number_of_cached_scripts",
        m.scripts.load(Ordering::Relaxed),
    );
    l.put("number_of_functions", function_count);
    l.put("number_of_libraries", libraries);
    l.put("used_memory_vm_functions", 0);
    l.put("used_memory_vm_total", vm);
    l.put("used_memory_vm_total_human", human(vm));
    l.put("used_memory_functions", functions);
    l.put("used_memory_scripts", scripts + functions);
    l.put("used_memory_scripts_human", human(scripts + functions));
}

fn persistence_section(server: &Server, l: &mut Lines) {
    for (name, value) in crate::state::journal::info_fields(&server.aof) {
        l.put(name, value);
    }
}

/// Commands per second since the previous sample (at least 100 ms ago),
/// Redis's `instantaneous_ops_per_sec` without its background sampler.
fn ops_per_sec(server: &Server, processed: u64) -> u64 {
    let mut sample = server.info_marks.ops_sample.lock();
    let now = Instant::now();
    let rate = match *sample {
        Some((at, count, rate)) => {
            let secs = now.duration_since(at).as_secs_f64();
            if secs < 0.1 {
                return rate as u64;
            }
            processed.saturating_sub(count) as f64 / secs
        }
        None => 0.0,
    };
    *sample = Some((now, processed, rate));
    rate.round() as u64
}

fn stats_section(ctx: &Ctx, l: &mut Lines) {
    let server = ctx.server;
    let st = &server.stats;
    let get = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    let processed = st.total(|h| &h.commands_processed);
    let expired = super::expired_keys(ctx)
        .saturating_sub(server.info_marks.expired_at_reset.load(Ordering::Relaxed));
    l.put("total_connections_received", get(&st.connections_received));
    l.put("total_commands_processed", processed);
    l.put("instantaneous_ops_per_sec", ops_per_sec(server, processed));
    l.put("total_net_input_bytes", st.total(|h| &h.net_input_bytes));
    l.put("total_net_output_bytes", st.total(|h| &h.net_output_bytes));
    l.put("total_net_repl_input_bytes", 0);
    l.put("total_net_repl_output_bytes", 0);
    for name in [
        "instantaneous_input_kbps",
        "instantaneous_output_kbps",
        "instantaneous_input_repl_kbps",
        "instantaneous_output_repl_kbps",
    ] {
        l.put(name, "0.00");
    }
    l.put("rejected_connections", get(&st.rejected_connections));
    let repl = &server.replication;
    l.put("sync_full", repl.sync_full.load(Ordering::Relaxed));
    l.put(
        "sync_partial_ok",
        repl.sync_partial_ok.load(Ordering::Relaxed),
    );
    l.put(
        "sync_partial_err",
        repl.sync_partial_err.load(Ordering::Relaxed),
    );
    l.put("expired_keys", expired);
    l.put("expired_stale_perc", "0.00");
    l.put("expired_time_cap_reached_count", 0);
    l.put("expire_cycle_cpu_milliseconds", 0);
    l.put(
        "evicted_keys",
        ctx.server.memory.evicted_keys.load(Ordering::Relaxed),
    );
    l.put(
        "evicted_clients",
        ctx.server.memory.evicted_clients.load(Ordering::Relaxed),
    );
    for name in [
        "total_eviction_exceeded_time",
        "current_eviction_exceeded_time",
    ] {
        l.put(name, 0);
    }
    l.put("keyspace_hits", st.total(|h| &h.keyspace_hits));
    l.put("keyspace_misses", st.total(|h| &h.keyspace_misses));
    let ps = &server.pubsub;
    l.put("pubsub_channels", ps.len(Kind::Channel));
    l.put("pubsub_patterns", ps.len(Kind::Pattern));
    l.put("pubsubshard_channels", ps.len(Kind::Shard));
    for name in [
        "latest_fork_usec",
        "total_forks",
        "migrate_cached_sockets",
        "slave_expires_tracked_keys",
        "active_defrag_hits",
        "active_defrag_misses",
        "active_defrag_key_hits",
        "active_defrag_key_misses",
        "total_active_defrag_time",
        "current_active_defrag_time",
    ] {
        l.put(name, 0);
    }
    let t = server.tracking.figures();
    l.put("tracking_total_keys", t.keys);
    l.put("tracking_total_items", t.items);
    l.put("tracking_total_prefixes", t.prefixes);
    l.put(
        "unexpected_error_replies",
        get(&st.unexpected_error_replies),
    );
    l.put("total_error_replies", get(&st.total_error_replies));
    l.put("dump_payload_sanitizations", 0);
    l.put("total_reads_processed", st.total(|h| &h.reads_processed));
    l.put("total_writes_processed", st.total(|h| &h.writes_processed));
    l.put("io_threaded_reads_processed", 0);
    l.put("io_threaded_writes_processed", 0);
    l.put("reply_buffer_shrinks", 0);
    l.put("reply_buffer_expands", 0);
    l.put("rostrum_hot_shard_moves", get(&st.hot_shard_moves));
    l.put("rostrum_hot_shard_guests", get(&st.hot_shard_guests));
}

fn replication_section(server: &Server, l: &mut Lines) {
    let repl = &server.replication;
    let (priority, read_only, announced, backlog_size) = {
        let c = server.config.read();
        (
            c.param("replica-priority"),
            c.param("replica-read-only") == "yes",
            c.param("replica-announced") == "yes",
            c.param("repl-backlog-size"),
        )
    };
    let master = repl.master.lock().clone();
    match &master {
        None => l.put("role", "master"),
        Some(m) => {
            let link = repl.link.lock().clone();
            let applied = repl.applied.load(Ordering::Relaxed);
            l.put("role", "slave");
            l.put("master_host", &m.host);
            l.put("master_port", m.port);
            l.put("master_link_status", if link.up { "up" } else { "down" });
            l.put(
                "master_last_io_seconds_ago",
                link.last_io
                    .map(|t| t.elapsed().as_secs() as i64)
                    .unwrap_or(-1),
            );
            l.put("master_sync_in_progress", link.sync_in_progress as u8);
            l.put("slave_read_repl_offset", applied);
            l.put("slave_repl_offset", applied);
            if link.sync_in_progress {
                let left = if link.sync_size < 0 {
                    -1
                } else {
                    link.sync_size - link.sync_read as i64
                };
                l.put("master_sync_total_bytes", link.sync_size);
                l.put("master_sync_read_bytes", link.sync_read);
                l.put("master_sync_left_bytes", left);
                let perc = if link.sync_size > 0 {
                    link.sync_read as f64 * 100.0 / link.sync_size as f64
                } else {
                    0.0
                };
                l.put("master_sync_perc", format!("{perc:.2}"));
                l.put(
                    "master_sync_last_io_seconds_ago",
                    link.last_io
                        .map(|t| t.elapsed().as_secs() as i64)
                        .unwrap_or(-1),
                );
            }
            if !link.up {
                l.put(
                    "master_link_down_since_seconds",
                    link.down_since
                        .map(|t| t.elapsed().as_secs() as i64)
                        .unwrap_or(-1),
                );
            }
            l.put("slave_priority", priority);
            l.put("slave_read_only", read_only as u8);
            l.put("replica_announced", announced as u8);
        }
    }
    let replicas = repl.replicas.lock().clone();
    l.put("connected_slaves", replicas.len());
    let now = crate::state::unix_ms();
    for (i, r) in replicas.iter().enumerate() {
        l.put(
            &format!("slave{i}"),
            format!(
                "ip={},port={},state={},offset={},lag={}",
                r.ip,
                r.port,
                r.state_name(),
                r.ack_offset.load(Ordering::Relaxed),
                now.saturating_sub(r.last_ack_ms.load(Ordering::Relaxed)) / 1000
            ),
        );
    }
    if master.is_none() {
        let min = repl.min_to_write.load(Ordering::Relaxed);
        if min > 0 {
            let lag = repl.max_lag.load(Ordering::Relaxed);
            l.put("min_slaves_good_slaves", repl.good_replicas(now, lag));
        }
    }
    let failover = repl.failover.lock().state.name();
    let b = server.aof.backlog.inner.lock();
    l.put("master_failover_state", failover);
    l.put("master_replid", &b.replid);
    l.put("master_replid2", &b.replid2);
    l.put("master_repl_offset", b.end);
    l.put("second_repl_offset", b.second_offset);
    l.put("repl_backlog_active", b.active as u8);
    l.put("repl_backlog_size", backlog_size);
    l.put(
        "repl_backlog_first_byte_offset",
        if b.active { b.first_byte() } else { 0 },
    );
    l.put("repl_backlog_histlen", b.histlen());
}

/// (user, system) CPU seconds of a /proc `stat` file, and of its waited-for
/// children.
fn cpu_times(path: &str) -> ((f64, f64), (f64, f64)) {
    // Clock ticks per second as the kernel reports them to user space.
    const TICKS: f64 = 100.0;
    let text = std::fs::read_to_string(path).unwrap_or_default();
    // Fields after the command name (which may hold spaces), from `state`.
    let rest = text.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|w| w.parse().unwrap_or(0.0))
        .collect();
    let at = |i: usize| f.get(i).copied().unwrap_or(0.0) / TICKS;
    // utime, stime, cutime, cstime are fields 14-17 of stat (11-14 here).
    ((at(11), at(12)), (at(13), at(14)))
}

fn cpu_section(l: &mut Lines) {
    let ((user, sys), (cuser, csys)) = cpu_times("/proc/self/stat");
    let main = format!("/proc/self/task/{}/stat", std::process::id());
    let ((muser, msys), _) = cpu_times(&main);
    l.put("used_cpu_sys", format!("{sys:.6}"));
    l.put("used_cpu_user", format!("{user:.6}"));
    l.put("used_cpu_sys_children", format!("{csys:.6}"));
    l.put("used_cpu_user_children", format!("{cuser:.6}"));
    l.put("used_cpu_sys_main_thread", format!("{msys:.6}"));
    l.put("used_cpu_user_main_thread", format!("{muser:.6}"));
}

fn commandstats_section(server: &Server, l: &mut Lines) {
    for c in table().all_slots() {
        let s = server.command_totals(c.id);
        let (calls, usec, failed, rejected) = (s.calls, s.usec, s.failed, s.rejected);
        if calls == 0 && failed == 0 && rejected == 0 {
            continue;
        }
        let per_call = if calls == 0 {
            0.0
        } else {
            usec as f64 / calls as f64
        };
        l.put(
            &format!("cmdstat_{}", c.full_name),
            format!(
                "calls={calls},usec={usec},usec_per_call={per_call:.2},rejected_calls={rejected},failed_calls={failed}"
            ),
        );
    }
}

/// `latency_percentiles_usec_<command>:p50=...,p99=...` for every command
/// called since the last CONFIG RESETSTAT, at the configured percentiles
/// (nothing while `latency-tracking` is off).
fn latencystats_section(server: &Server, l: &mut Lines) {
    let ps = {
        let c = server.config.read();
        if !c.latency_tracking {
            return;
        }
        crate::state::latency::parse_percentiles(&c.latency_tracking_info_percentiles)
            .unwrap_or_default()
    };
    for c in table().all_slots() {
        let h = server.command_latency(c.id);
        if h.total() == 0 {
            continue;
        }
        let values: Vec<String> = ps
            .iter()
            .zip(h.percentiles(&ps))
            .map(|(p, ns)| format!("p{p}={:.3}", ns as f64 / 1000.0))
            .collect();
        l.put(
            &format!("latency_percentiles_usec_{}", c.full_name),
            values.join(","),
        );
    }
}

fn keyspace_section(ctx: &Ctx, l: &mut Lines) {
    let mut dbs: Vec<(usize, usize)> = Vec::new();
    super::for_each_shard(ctx, |s| {
        for (i, d) in s.dbs.iter().enumerate() {
            if dbs.len() <= i {
                dbs.resize(i + 1, (0, 0));
            }
            dbs[i].0 += d.len();
            dbs[i].1 += d.expires_len();
        }
    });
    for (i, (keys, expires)) in dbs.into_iter().enumerate() {
        if keys > 0 {
            l.put(
                &format!("db{i}"),
                format!("keys={keys},expires={expires},avg_ttl=0"),
            );
        }
    }
}

/// `# Leaderboards` (issue 17; not in the default set, as Redis keeps its
/// own sections): boards, entries held in memory (every period), closed
/// periods in memory, periods on disk (ARCHIVE DISK) and their files'
/// bytes (shared files of COPYs counted once per board), and the earliest boundary still to apply
/// (unix ms; 0 when no board has one).
fn leaderboards_section(ctx: &Ctx, l: &mut Lines) {
    let now = ctx.keys.now_ms;
    let (mut boards, mut seasonal, mut entries, mut archives) = (0u64, 0u64, 0u64, 0u64);
    let (mut on_disk, mut disk_bytes) = (0u64, 0u64);
    let mut next: Option<u64> = None;
    super::for_each_shard(ctx, |s| {
        for d in &s.dbs {
            for (_, e) in d.iter() {
                let crate::engine::Value::Leaderboard(b) = &e.value else {
                    continue;
                };
                if e.expire_at().is_some_and(|t| t <= now) {
                    continue;
                }
                boards += 1;
                entries += b.entries_all_periods();
                let (files, bytes) = b.disk_usage();
                on_disk += files;
                disk_bytes += bytes;
                if let Some(season) = b.season() {
                    seasonal += 1;
                    archives += season
                        .archives()
                        .filter(|a| {
                            matches!(a.data, crate::engine::leaderboard::ArchiveData::Memory(_))
                        })
                        .count() as u64;
                    if let Some(end) = season.end() {
                        next = Some(next.map_or(end, |n| n.min(end)));
                    }
                }
            }
        }
    });
    l.put("lb_boards", boards);
    l.put("lb_seasonal_boards", seasonal);
    l.put("lb_entries_in_memory", entries);
    l.put("lb_periods_in_memory", archives);
    l.put("lb_periods_on_disk", on_disk);
    l.put("lb_bytes_on_disk", disk_bytes);
    l.put("lb_next_boundary_ms", next.unwrap_or(0));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes() {
        assert_eq!(human(0), "0B");
        assert_eq!(human(1023), "1023B");
        assert_eq!(human(990776), "967.55K");
        assert_eq!(human(6823936), "6.51M");
        assert_eq!(human(25276514304), "23.54G");
    }

    #[test]
    fn own_cpu_times_parse() {
        let ((user, sys), _) = cpu_times("/proc/self/stat");
        assert!(user >= 0.0 && sys >= 0.0);
        assert_eq!(cpu_times("/nonexistent"), ((0.0, 0.0), (0.0, 0.0)));
    }
}
