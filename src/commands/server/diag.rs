//! Diagnostics: SLOWLOG, LATENCY and MEMORY.
//!
//! The slow log is filled by the dispatcher. Rostrum records no latency
//! events, so LATENCY answers with valid empty data for them; LATENCY
//! HISTOGRAM reports the per-command histograms INFO latencystats reads.

use super::super::args::{self, is, text};
use super::super::table::{flags::*, table, Command, CommandSpec, KeySpec};
use super::super::Ctx;
use super::command::subs_of;
use super::info::MemoryFigures;
use super::srv;
use crate::error::{CmdError, CmdResult};
use crate::state::latency::Counts;

const ADMIN_FLAGS: u32 = ADMIN | NOSCRIPT | LOADING | STALE;
const HELP_FLAGS: u32 = LOADING | STALE;
const HELP_SUMMARY: &str = "Show helpful text about the different subcommands";

/// SLOWLOG's subcommands.
pub const SLOWLOG: &[CommandSpec] = &[
    srv(
        "get",
        -2,
        ADMIN | LOADING | STALE,
        slowlog_get,
        "Get the slow log's entries",
        "2.2.12",
        "O(N) where N is the number of entries returned",
    ),
    srv(
        "len",
        2,
        ADMIN | LOADING | STALE,
        slowlog_len,
        "Get the slow log's length",
        "2.2.12",
        "O(1)",
    ),
    srv(
        "reset",
        2,
        ADMIN | LOADING | STALE,
        slowlog_reset,
        "Clear all entries from the slow log",
        "2.2.12",
        "O(N) where N is the number of entries in the slowlog",
    ),
    srv(
        "help",
        2,
        HELP_FLAGS,
        slowlog_help,
        HELP_SUMMARY,
        "6.2.0",
        "O(1)",
    ),
];

/// LATENCY's subcommands.
pub const LATENCY: &[CommandSpec] = &[
    srv(
        "latest",
        2,
        ADMIN_FLAGS,
        latency_latest,
        "Return the latest latency samples for all events",
        "2.8.13",
        "O(1)",
    ),
    srv(
        "history",
        3,
        ADMIN_FLAGS,
        latency_history,
        "Return timestamp-latency samples for the event",
        "2.8.13",
        "O(1)",
    ),
    srv(
        "reset",
        -2,
        ADMIN_FLAGS,
        latency_reset,
        "Reset latency data for one or more events",
        "2.8.13",
        "O(1)",
    ),
    srv(
        "doctor",
        2,
        ADMIN_FLAGS,
        latency_doctor,
        "Return a human readable latency analysis report",
        "2.8.13",
        "O(1)",
    ),
    srv(
        "graph",
        3,
        ADMIN_FLAGS,
        latency_graph,
        "Return a latency graph for the event",
        "2.8.13",
        "O(1)",
    ),
    srv(
        "histogram",
        -2,
        ADMIN_FLAGS,
        latency_histogram,
        "Return the cumulative distribution of latencies of a subset of commands or all.",
        "7.0.0",
        "O(N) where N is the number of commands with latency information being retrieved.",
    ),
    srv(
        "help",
        2,
        HELP_FLAGS,
        latency_help,
        HELP_SUMMARY,
        "2.8.13",
        "O(1)",
    ),
];

/// MEMORY's subcommands.
pub const MEMORY: &[CommandSpec] = &[
    CommandSpec {
        keys: KeySpec::Range {
            first: 2,
            last: 2,
            step: 1,
        },
        ..srv(
            "usage",
            -3,
            READONLY,
            memory_usage,
            "Estimate the memory usage of a key",
            "4.0.0",
            "O(N) where N is the number of samples.",
        )
    },
    srv(
        "stats",
        2,
        0,
        memory_stats,
        "Show memory usage details",
        "4.0.0",
        "O(1)",
    ),
    srv(
        "doctor",
        2,
        0,
        memory_doctor,
        "Outputs memory problems report",
        "4.0.0",
        "O(1)",
    ),
    srv(
        "malloc-stats",
        2,
        0,
        memory_malloc_stats,
        "Show allocator internal stats",
        "4.0.0",
        "Depends on how much memory is allocated, could be slow",
    ),
    srv(
        "purge",
        2,
        0,
        memory_purge,
        "Ask the allocator to release memory",
        "4.0.0",
        "Depends on how much memory is allocated, could be slow",
    ),
    srv(
        "help",
        2,
        HELP_FLAGS,
        memory_help,
        HELP_SUMMARY,
        "4.0.0",
        "O(1)",
    ),
];

fn slowlog_get(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    if a.len() > 3 {
        return Err(CmdError::err(format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try SLOWLOG HELP.",
            text(a[1])
        )));
    }
    let count = match a.get(2) {
        None => 10,
        Some(arg) => match args::int(arg) {
            Ok(-1) => usize::MAX,
            Ok(n) if n >= 0 => n as usize,
            _ => return Err(CmdError::err("count should be greater than or equal to -1")),
        },
    };
    let entries: Vec<_> = ctx
        .server
        .slowlog
        .lock()
        .iter()
        .take(count)
        .cloned()
        .collect();
    let out = &mut *ctx.out;
    out.array(entries.len());
    for e in entries {
        out.array(6);
        out.int(e.id as i64);
        out.int(e.time_s as i64);
        out.int(e.duration_us as i64);
        out.array(e.args.len());
        for arg in &e.args {
            out.bulk(arg);
        }
        out.bulk(e.addr.as_bytes());
        out.bulk(&e.name);
    }
    Ok(())
}

fn slowlog_len(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    let n = ctx.server.slowlog.lock().len();
    ctx.out.int(n as i64);
    Ok(())
}

fn slowlog_reset(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    ctx.server.slowlog.lock().clear();
    ctx.out.ok();
    Ok(())
}

fn slowlog_help(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    ctx.out.help(
        "SLOWLOG",
        &[
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ],
    );
    Ok(())
}

fn latency_latest(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    ctx.out.array(0);
    Ok(())
}

fn latency_history(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    ctx.out.array(0);
    Ok(())
}

fn latency_reset(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    ctx.out.int(0);
    Ok(())
}

fn latency_graph(_ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    Err(CmdError::err(format!(
        "No samples available for event '{}'",
        text(a[2])
    )))
}

fn latency_doctor(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    let threshold = ctx.server.config.read().latency_monitor_threshold;
    let report = if threshold == 0 {
        "Latency monitoring is disabled. Set it up with \"CONFIG SET latency-monitor-threshold <milliseconds>\" to collect latency events.\n"
    } else {
        "No latency events were recorded by this instance.\n"
    };
    ctx.out.verbatim(report.as_bytes());
    Ok(())
}

/// LATENCY HISTOGRAM [command ...]: each named command's (a container's:
/// each of its subcommands') calls and cumulative latency distribution
/// (`Counts::cdf`), for those with calls recorded; every such command when
/// none is named. Unknown names are skipped, as in Redis.
fn latency_histogram(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    // This client's own calls so far (a pipeline's earlier commands) count.
    crate::commands::flush_stats(ctx.server, ctx.client);
    let t = table();
    let named: Vec<&Command> = if a.len() == 2 {
        t.all_slots()
    } else {
        a[2..]
            .iter()
            .filter_map(|name| t.get_full_callable(name))
            .flat_map(|c| std::iter::once(c).chain(subs_of(c)))
            .collect()
    };
    let with_calls: Vec<(&Command, Counts)> = named
        .into_iter()
        .map(|c| (c, ctx.server.command_latency(c.id)))
        .filter(|(_, counts)| counts.total() > 0)
        .collect();
    let out = &mut ctx.out;
    out.map(with_calls.len());
    for (c, counts) in with_calls {
        let cdf = counts.cdf();
        out.bulk(c.full_name.as_bytes());
        out.map(2);
        out.bulk(b"calls");
        out.int(counts.total() as i64);
        out.bulk(b"histogram_usec");
        out.map(cdf.len());
        for (us, count) in cdf {
            out.int(us as i64);
            out.int(count as i64);
        }
    }
    Ok(())
}

fn latency_help(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    ctx.out.help(
        "LATENCY",
        &[
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
        ],
    );
    Ok(())
}

/// Bytes a key costs beyond its value: the key's bytes, its hash table
/// slot and the entry header.
fn key_overhead(key: &[u8]) -> usize {
    key.len() + 48
}

fn memory_usage(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    match &a[3..] {
        [] => {}
        [opt, n] if is(opt, "samples") => {
            if args::int(n)? < 0 {
                return Err(CmdError::Syntax);
            }
        }
        _ => return Err(CmdError::Syntax),
    }
    let key = a[2];
    let now = ctx.keys.now_ms;
    let size = ctx
        .keys
        .part(key)?
        .get(key, now)
        .map(|e| key_overhead(key) + e.value.memory_usage());
    match size {
        Some(n) => ctx.out.int(n as i64),
        None => ctx.out.null(),
    }
    Ok(())
}

/// What a key with an expiry adds to its database's expiry index: one
/// `(time, slot hash)` pair of 16 bytes in a `BTreeSet`, whose 192-byte
/// leaves hold up to 11 pairs and run half to two thirds full, plus the
/// inner nodes: about 30 bytes, as `benches/key_rss.sh` measures (its `ttl`
/// keys cost 30 bytes more than its `str` keys). The expiry time itself is
/// a field of every key's entry, expiring or not, so the main table's
/// figure holds it.
const EXPIRY_INDEX_BYTES: usize = 32;

fn memory_stats(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    let m = MemoryFigures::read(ctx.server);
    let mut dbs = Vec::new();
    super::for_each_shard(ctx, |s| {
        for (i, d) in s.dbs.iter().enumerate() {
            if dbs.len() <= i {
                dbs.resize(i + 1, (0usize, 0usize));
            }
            dbs[i].0 += d.len();
            dbs[i].1 += d.expires_len();
        }
    });
    let keys: usize = dbs.iter().map(|d| d.0).sum();
    let used_dbs: Vec<(usize, (usize, usize))> = dbs
        .into_iter()
        .enumerate()
        .filter(|(_, d)| d.0 > 0)
        .collect();
    let dataset = m.used.saturating_sub(m.startup);
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let out = &mut *ctx.out;
    out.map(27 + used_dbs.len());
    let int = |out: &mut crate::protocol::Reply, k: &str, v: u64| {
        out.bulk(k.as_bytes());
        out.int(v as i64);
    };
    int(out, "peak.allocated", m.peak);
    int(out, "total.allocated", m.used);
    int(out, "startup.allocated", m.startup);
    let repl = super::info::ReplicationBuffers::read(ctx.server);
    int(out, "replication.backlog", repl.backlog);
    int(out, "clients.slaves", repl.replicas);
    for k in [
        "clients.normal",
        "cluster.links",
        "aof.buffer",
        "lua.caches",
        "functions.caches",
    ] {
        int(out, k, 0);
    }
    for (i, (k, e)) in &used_dbs {
        out.bulk(format!("db.{i}").as_bytes());
        out.map(2);
        int(out, "overhead.hashtable.main", (*k * 48) as u64);
        int(
            out,
            "overhead.hashtable.expires",
            (*e * EXPIRY_INDEX_BYTES) as u64,
        );
    }
    int(out, "overhead.total", m.startup);
    int(out, "keys.count", keys as u64);
    int(
        out,
        "keys.bytes-per-key",
        if keys == 0 { 0 } else { dataset / keys as u64 },
    );
    int(out, "dataset.bytes", dataset);
    out.bulk(b"dataset.percentage");
    out.double(100.0 * ratio(dataset, m.used));
    out.bulk(b"peak.percentage");
    out.double(100.0 * ratio(m.used, m.peak));
    int(out, "allocator.allocated", m.allocated);
    int(out, "allocator.active", m.active);
    int(out, "allocator.resident", m.resident);
    out.bulk(b"allocator-fragmentation.ratio");
    out.double(ratio(m.active, m.allocated));
    int(
        out,
        "allocator-fragmentation.bytes",
        m.active.saturating_sub(m.allocated),
    );
    out.bulk(b"allocator-rss.ratio");
    out.double(ratio(m.resident, m.active));
    int(
        out,
        "allocator-rss.bytes",
        m.resident.saturating_sub(m.active),
    );
    out.bulk(b"rss-overhead.ratio");
    out.double(ratio(m.rss, m.resident));
    int(out, "rss-overhead.bytes", m.rss.saturating_sub(m.resident));
    out.bulk(b"fragmentation");
    out.double(ratio(m.rss, m.used));
    int(out, "fragmentation.bytes", m.rss.saturating_sub(m.used));
    Ok(())
}

fn memory_doctor(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    let m = MemoryFigures::read(ctx.server);
    let report = if m.used < 5 * 1024 * 1024 {
        "This instance holds very little data: there is nothing for the memory doctor to examine yet.\n".to_string()
    } else {
        format!(
            "No memory problems found: {} bytes allocated, {} bytes resident.\n",
            m.used, m.rss
        )
    };
    ctx.out.verbatim(report.as_bytes());
    Ok(())
}

fn memory_malloc_stats(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    let m = MemoryFigures::read(ctx.server);
    let report = format!(
        "jemalloc statistics\nallocated: {}\nactive: {}\nresident: {}\n",
        m.allocated, m.active, m.resident
    );
    ctx.out.verbatim(report.as_bytes());
    Ok(())
}

fn memory_purge(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    ctx.out.ok();
    Ok(())
}

fn memory_help(ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    ctx.out.help(
        "MEMORY",
        &[
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
        ],
    );
    Ok(())
}
