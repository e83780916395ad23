//! `GET /metrics`: the server in Prometheus's text format (0.0.4).
//!
//! The INFO fields become metrics under the names redis_exporter gives
//! them where it has one (`redis_connected_clients`,
//! `redis_memory_used_bytes`, `redis_commands_total{cmd}`,
//! `redis_db_keys{db}`, `redis_aof_enabled`, ...), and `redis_<field>`
//! otherwise; Rostrum adds its own under `rostrum_`: each board's entries
//! and watchers, and the live boards' counters. INFO is run through the
//! dispatcher like any client's, so the figures are the ones INFO shows.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::commands;
use crate::engine::Value;
use crate::protocol::Reply;
use crate::state::client::{ClientInfo, ClientState};
use crate::state::Server;

/// At most this many boards get an entries series per scrape.
pub const MAX_BOARDS: usize = 1000;

/// INFO fields redis_exporter renames: (field, metric, counter?).
const RENAMED: &[(&str, &str, bool)] = &[
    ("used_memory", "redis_memory_used_bytes", false),
    ("used_memory_rss", "redis_memory_used_rss_bytes", false),
    ("used_memory_peak", "redis_memory_used_peak_bytes", false),
    ("used_memory_lua", "redis_memory_used_lua_bytes", false),
    (
        "used_memory_scripts",
        "redis_memory_used_scripts_bytes",
        false,
    ),
    (
        "used_memory_dataset",
        "redis_memory_used_dataset_bytes",
        false,
    ),
    (
        "used_memory_overhead",
        "redis_memory_used_overhead_bytes",
        false,
    ),
    (
        "used_memory_startup",
        "redis_memory_used_startup_bytes",
        false,
    ),
    ("maxmemory", "redis_memory_max_bytes", false),
    (
        "total_connections_received",
        "redis_connections_received_total",
        true,
    ),
    (
        "total_commands_processed",
        "redis_commands_processed_total",
        true,
    ),
    (
        "rejected_connections",
        "redis_rejected_connections_total",
        true,
    ),
    ("total_net_input_bytes", "redis_net_input_bytes_total", true),
    (
        "total_net_output_bytes",
        "redis_net_output_bytes_total",
        true,
    ),
    ("expired_keys", "redis_expired_keys_total", true),
    ("evicted_keys", "redis_evicted_keys_total", true),
    ("keyspace_hits", "redis_keyspace_hits_total", true),
    ("keyspace_misses", "redis_keyspace_misses_total", true),
    // redis_exporter's `redis_total_error_replies` and the `_sec` names
    // below fail `promtool check metrics`; these are their lint-clean forms.
    ("total_error_replies", "redis_error_replies_total", true),
    (
        "instantaneous_ops_per_sec",
        "redis_instantaneous_operations_per_second",
        false,
    ),
    ("current_save_keys_total", "redis_current_save_keys", false),
    ("used_memory_vm_total", "redis_memory_used_vm_bytes", false),
    (
        "expired_time_cap_reached_count",
        "redis_expired_time_cap_reached_total",
        true,
    ),
    (
        "aof_current_rewrite_time_sec",
        "redis_aof_current_rewrite_duration_seconds",
        false,
    ),
    (
        "rdb_current_bgsave_time_sec",
        "redis_rdb_current_bgsave_duration_seconds",
        false,
    ),
    ("used_cpu_sys", "redis_cpu_sys_seconds_total", true),
    ("used_cpu_user", "redis_cpu_user_seconds_total", true),
    (
        "used_cpu_sys_children",
        "redis_cpu_sys_children_seconds_total",
        true,
    ),
    (
        "used_cpu_user_children",
        "redis_cpu_user_children_seconds_total",
        true,
    ),
    (
        "aof_last_rewrite_time_sec",
        "redis_aof_last_rewrite_duration_seconds",
        false,
    ),
    ("aof_current_size", "redis_aof_current_size_bytes", false),
    ("aof_base_size", "redis_aof_base_size_bytes", false),
    (
        "rdb_last_bgsave_time_sec",
        "redis_rdb_last_bgsave_duration_seconds",
        false,
    ),
    (
        "rdb_last_save_time",
        "redis_rdb_last_save_timestamp_seconds",
        false,
    ),
];

/// INFO fields left out: another field says the same in base units.
const SKIPPED: &[&str] = &[
    "uptime_in_days",
    "arch_bits",
    "expire_cycle_cpu_milliseconds",
    // A unix time in ms (INFO leaderboards): not a quantity to chart.
    "lb_next_boundary_ms",
];

/// INFO fields that are strings, shown as 1 for `ok` and 0 otherwise.
const STATUSES: &[&str] = &[
    "aof_last_bgrewrite_status",
    "aof_last_write_status",
    "rdb_last_bgsave_status",
];

/// Metrics being written: name -> (type, help, samples), in name order.
#[derive(Default)]
struct Families(BTreeMap<String, (&'static str, String, Vec<String>)>);

impl Families {
    fn add(&mut self, name: &str, kind: &'static str, help: &str, labels: &str, value: f64) {
        self.add_sample(name, kind, help, name, labels, value);
    }

    /// A sample named `sample` in family `name` (a histogram's
    /// `_bucket`, `_sum` and `_count` belong to one family).
    fn add_sample(
        &mut self,
        name: &str,
        kind: &'static str,
        help: &str,
        sample: &str,
        labels: &str,
        value: f64,
    ) {
        let fam = self
            .0
            .entry(name.to_string())
            .or_insert_with(|| (kind, help.to_string(), Vec::new()));
        let v = if value.is_finite() {
            format!("{value}")
        } else if value.is_nan() {
            "NaN".to_string()
        } else if value > 0.0 {
            "+Inf".to_string()
        } else {
            "-Inf".to_string()
        };
        fam.2.push(format!("{sample}{labels} {v}"));
    }

    fn render(self) -> String {
        let mut out = String::new();
        for (name, (kind, help, samples)) in self.0 {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for s in samples {
                out.push_str(&s);
                out.push('\n');
            }
        }
        out
    }
}

/// A label value, escaped as the format asks.
fn label(v: &[u8]) -> String {
    let mut s = String::new();
    for c in String::from_utf8_lossy(v).chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// A metric name from an INFO field (letters, digits and `_`).
fn metric_name(field: &str) -> String {
    let mut s = String::from("redis_");
    for c in field.chars() {
        s.push(if c.is_ascii_alphanumeric() { c } else { '_' });
    }
    s
}

/// INFO everything, run as an internal client (not in CLIENT LIST).
fn info_text(server: &Server) -> String {
    let info = Arc::new(ClientInfo::new(0, String::new(), String::new(), 0));
    let mut client = ClientState::new(info, true);
    let mut out = Reply::new(false);
    commands::execute(server, &mut client, &mut out, &[b"INFO", b"everything"]);
    let text = String::from_utf8_lossy(&out.buf).into_owned();
    // A bulk string: `$len\r\n...\r\n`.
    match text.split_once("\r\n") {
        Some((_, body)) => body.to_string(),
        None => String::new(),
    }
}

/// `a=1,b=2` pairs.
fn pairs(v: &str) -> impl Iterator<Item = (&str, f64)> {
    v.split(',').filter_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        Some((k, v.parse::<f64>().ok()?))
    })
}

fn info_metrics(f: &mut Families, text: &str) {
    for line in text.lines() {
        let Some((field, value)) = line.split_once(':') else {
            continue;
        };
        if let Some(cmd) = field.strip_prefix("cmdstat_") {
            let l = format!("{{cmd=\"{}\"}}", label(cmd.as_bytes()));
            for (k, v) in pairs(value) {
                match k {
                    "calls" => f.add(
                        "redis_commands_total",
                        "counter",
                        "Calls of each command",
                        &l,
                        v,
                    ),
                    "usec" => f.add(
                        "redis_commands_duration_seconds_total",
                        "counter",
                        "Time spent in each command",
                        &l,
                        v / 1e6,
                    ),
                    "rejected_calls" => f.add(
                        "redis_commands_rejected_calls_total",
                        "counter",
                        "Calls of each command refused before running",
                        &l,
                        v,
                    ),
                    "failed_calls" => f.add(
                        "redis_commands_failed_calls_total",
                        "counter",
                        "Calls of each command that answered an error",
                        &l,
                        v,
                    ),
                    _ => {}
                }
            }
            continue;
        }
        if let Some(err) = field.strip_prefix("errorstat_") {
            let l = format!("{{err=\"{}\"}}", label(err.as_bytes()));
            for (k, v) in pairs(value) {
                if k == "count" {
                    f.add(
                        "redis_errors_total",
                        "counter",
                        "Error replies by error code",
                        &l,
                        v,
                    );
                }
            }
            continue;
        }
        if field.starts_with("db")
            && field[2..].chars().all(|c| c.is_ascii_digit())
            && field.len() > 2
        {
            let l = format!("{{db=\"{field}\"}}");
            for (k, v) in pairs(value) {
                match k {
                    "keys" => f.add("redis_db_keys", "gauge", "Keys of each database", &l, v),
                    "expires" => f.add(
                        "redis_db_keys_expiring",
                        "gauge",
                        "Keys with an expiry in each database",
                        &l,
                        v,
                    ),
                    "avg_ttl" => f.add(
                        "redis_db_avg_ttl_seconds",
                        "gauge",
                        "Average time to live of each database's keys",
                        &l,
                        v / 1000.0,
                    ),
                    _ => {}
                }
            }
            continue;
        }
        if STATUSES.contains(&field) {
            let name = metric_name(field);
            let help = format!("INFO {field} (1: ok)");
            f.add(
                &name,
                "gauge",
                &help,
                "",
                if value == "ok" { 1.0 } else { 0.0 },
            );
            continue;
        }
        let Ok(v) = value.parse::<f64>() else {
            continue;
        };
        if SKIPPED.contains(&field) {
            continue;
        }
        let (name, counter) = match RENAMED.iter().find(|(i, _, _)| *i == field) {
            Some((_, n, c)) => (n.to_string(), *c),
            None => (metric_name(field), false),
        };
        if f.0.contains_key(&name) {
            continue;
        }
        let help = format!("INFO {field}");
        f.add(
            &name,
            if counter { "counter" } else { "gauge" },
            &help,
            "",
            v,
        );
    }
}

/// Each board's entries (at most [`MAX_BOARDS`]), one shard at a time.
fn board_metrics(f: &mut Families, server: &Server) {
    let ks = &server.keyspace;
    let now = crate::state::unix_ms();
    let mut boards = 0usize;
    let mut skipped = 0u64;
    for shard in 0..crate::engine::keyspace::SHARD_COUNT {
        let g = ks.lock_one(shard, false);
        for (db, part) in g.shard().dbs.iter().enumerate() {
            for (key, entry) in part.iter() {
                let Value::Leaderboard(b) = &entry.value else {
                    continue;
                };
                if entry.expire_at().is_some_and(|t| t <= now) {
                    continue;
                }
                if boards >= MAX_BOARDS {
                    skipped += 1;
                    continue;
                }
                boards += 1;
                let l = format!("{{db=\"{db}\",key=\"{}\"}}", label(key));
                f.add(
                    "rostrum_board_entries",
                    "gauge",
                    "Entries of each leaderboard",
                    &l,
                    b.count() as f64,
                );
            }
        }
    }
    f.add(
        "rostrum_boards_not_shown",
        "gauge",
        "Leaderboards past the per-scrape limit, without an entries series",
        "",
        skipped as f64,
    );
}

/// The upper bounds of the latency histograms' buckets: 2^k ns for these
/// k (1.024 us, 4.096 us, ... 17.2 s), where the INFO latencystats
/// histogram's groups end, so each cumulative count is exact.
const LATENCY_BOUNDS_LOG2: [u32; 13] = [10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34];

/// Each command's latency histogram (`rostrum_command_duration_seconds`):
/// the INFO latencystats figures (recorded while `latency-tracking` is on,
/// as Redis does), with `_sum` from INFO commandstats' time. Commands never
/// called are left out.
fn latency_metrics(f: &mut Families, server: &Server) {
    const NAME: &str = "rostrum_command_duration_seconds";
    const HELP: &str = "How long each command took (INFO latencystats)";
    let table = commands::table::table();
    for c in table.all_slots() {
        let h = &server.command_latency(c.id);
        let count = h.total();
        if count == 0 {
            continue;
        }
        let cmd = label(c.full_name.as_bytes());
        for k in LATENCY_BOUNDS_LOG2 {
            let le = (1u64 << k) as f64 / 1e9;
            f.add_sample(
                NAME,
                "histogram",
                HELP,
                "rostrum_command_duration_seconds_bucket",
                &format!("{{cmd=\"{cmd}\",le=\"{le}\"}}"),
                h.below_pow2(k) as f64,
            );
        }
        f.add_sample(
            NAME,
            "histogram",
            HELP,
            "rostrum_command_duration_seconds_bucket",
            &format!("{{cmd=\"{cmd}\",le=\"+Inf\"}}"),
            count as f64,
        );
        f.add_sample(
            NAME,
            "histogram",
            HELP,
            "rostrum_command_duration_seconds_sum",
            &format!("{{cmd=\"{cmd}\"}}"),
            server.command_totals(c.id).usec as f64 / 1e6,
        );
        f.add_sample(
            NAME,
            "histogram",
            HELP,
            "rostrum_command_duration_seconds_count",
            &format!("{{cmd=\"{cmd}\"}}"),
            count as f64,
        );
    }
}

fn live_metrics(f: &mut Families, server: &Server) {
    let live = &server.live;
    for (db, key, n) in live.watchers_by_board() {
        let l = format!("{{db=\"{db}\",key=\"{}\"}}", label(&key));
        f.add(
            "rostrum_board_watchers",
            "gauge",
            "Watchers of each leaderboard (LB.WATCH, WebSockets)",
            &l,
            n as f64,
        );
    }
    f.add(
        "rostrum_live_groups",
        "gauge",
        "Groups of watchers sharing one diff",
        "",
        live.groups() as f64,
    );
    let c = &live.counters;
    f.add(
        "rostrum_live_diffs_total",
        "counter",
        "Diffs computed (once per group)",
        "",
        c.diffs.load(Ordering::Relaxed) as f64,
    );
    f.add(
        "rostrum_live_messages_total",
        "counter",
        "Snapshots and diffs queued to watchers",
        "",
        c.deliveries.load(Ordering::Relaxed) as f64,
    );
    f.add(
        "rostrum_live_limit_disconnections_total",
        "counter",
        "Watchers cut off at their output buffer limit",
        "",
        c.limit_disconnections.load(Ordering::Relaxed) as f64,
    );
}

/// The whole scrape.
pub fn render(server: &Server) -> String {
    let mut f = Families::default();
    f.add("redis_up", "gauge", "Whether the server answers", "", 1.0);
    info_metrics(&mut f, &info_text(server));
    board_metrics(&mut f, server);
    latency_metrics(&mut f, server);
    live_metrics(&mut f, server);
    f.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_fields_take_redis_exporter_names() {
        let mut f = Families::default();
        info_metrics(
            &mut f,
            "# Clients\r\nconnected_clients:3\r\nused_memory:100\r\nredis_version:7.0.15\r\n\
             aof_last_write_status:ok\r\ncmdstat_get:calls=2,usec=10,usec_per_call=5.00,rejected_calls=0,failed_calls=1\r\n\
             db0:keys=4,expires=1,avg_ttl=2000\r\nerrorstat_ERR:count=2\r\n",
        );
        let text = f.render();
        for want in [
            "# TYPE redis_connected_clients gauge\nredis_connected_clients 3\n",
            "redis_memory_used_bytes 100\n",
            "redis_aof_last_write_status 1\n",
            "# TYPE redis_commands_total counter\nredis_commands_total{cmd=\"get\"} 2\n",
            "redis_commands_duration_seconds_total{cmd=\"get\"} 0.00001\n",
            "redis_commands_failed_calls_total{cmd=\"get\"} 1\n",
            "redis_db_keys{db=\"db0\"} 4\n",
            "redis_db_avg_ttl_seconds{db=\"db0\"} 2\n",
            "redis_errors_total{err=\"ERR\"} 2\n",
        ] {
            assert!(text.contains(want), "{want:?} not in\n{text}");
        }
        assert!(!text.contains("redis_version"), "strings are left out");
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(label(b"a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
