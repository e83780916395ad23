//! Configuration: the parameters Rostrum implements, with redis.conf's names
//! (and old aliases), read from a config file, the command line, and CONFIG
//! GET / SET at run time. One table, [`PARAMS`], drives all of them.

use std::collections::BTreeMap;

use super::notify;
use crate::engine::hash::HashLimits;
use crate::engine::list::ListLimits;
use crate::engine::rdb::encode::EncodeOptions;
use crate::engine::rdb::Limits;
use crate::engine::zset::ZSetLimits;

/// Every configuration value.
#[derive(Debug, Clone)]
pub struct Config {
    pub bind: Vec<String>,
    pub port: u16,
    pub protected_mode: bool,
    pub requirepass: Option<Vec<u8>>,
    /// `user` lines of the config file, as written (the ACL family reads
    /// them at start-up).
    pub acl_users: Vec<String>,
    /// `rename-command FROM TO` lines of the config file (and command
    /// line), in order (`TO` empty: hidden). Applied to the command table
    /// once at start-up; not a parameter (CONFIG GET / SET don't know it,
    /// as in Redis).
    pub rename_commands: Vec<RenameCommand>,
    pub loglevel: String,
    pub logfile: String,
    pub databases: usize,
    /// Threads serving connections (a Rostrum parameter), each with its
    /// own runtime and its own connections (`server::workers`); 0: one per
    /// core but one (at least one).
    pub worker_threads: usize,
    /// Microseconds an idle worker spins before it sleeps (a Rostrum
    /// parameter); 0: it sleeps at once.
    pub park_spin_us: u64,
    /// Port of the HTTP listener (`/metrics`, live boards; a Rostrum
    /// parameter); 0: off.
    pub http_port: u64,
    /// Address the HTTP listener binds (a Rostrum parameter).
    pub http_bind: String,
    /// `tracking-table-max-keys`: most keys the tracking table holds, 0
    /// for no limit.
    pub tracking_table_max_keys: u64,
    pub proto_max_bulk_len: u64,
    pub client_query_buffer_limit: u64,
    pub maxclients: u64,
    pub timeout: u64,
    pub tcp_keepalive: u64,
    pub hz: u64,
    pub slowlog_log_slower_than: i64,
    pub slowlog_max_len: u64,
    pub latency_monitor_threshold: u64,
    /// `latency-tracking`: per-command latency histograms (INFO
    /// latencystats).
    pub latency_tracking: bool,
    /// `latency-tracking-info-percentiles`, canonical text.
    pub latency_tracking_info_percentiles: String,
    pub zset_max_listpack_entries: u64,
    pub zset_max_listpack_value: u64,
    pub set_max_intset_entries: u64,
    pub list_max_listpack_size: i64,
    pub hash_max_listpack_entries: u64,
    pub hash_max_listpack_value: u64,
    /// Longest LB.* metadata accepted, in bytes.
    pub lb_max_meta_bytes: u64,
    /// Event ids (`ID`) each board remembers.
    pub lb_dedup_window: u64,
    /// `debug-clock-offset-ms`: the test clock (see `state::clock`).
    pub debug_clock_offset_ms: i64,
    pub appendonly: bool,
    pub appendfilename: String,
    pub appendfsync: String,
    pub dir: String,
    pub dbfilename: String,
    pub save: String,
    /// `stop-writes-on-bgsave-error`: refuse writes while the last
    /// background save failed (and save points are set).
    pub stop_writes_on_bgsave_error: bool,
    /// `rdbcompression`: LZF for RDB strings over 20 bytes.
    pub rdbcompression: bool,
    /// `rdbchecksum`: a CRC-64 at the end of RDB files (else 0).
    pub rdbchecksum: bool,
    pub maxmemory: u64,
    pub maxmemory_policy: String,
    pub maxmemory_samples: u64,
    pub maxmemory_eviction_tenacity: u64,
    /// `maxmemory-clients`: bytes all clients' buffers may hold before the
    /// biggest clients are closed; a negative value is a percentage of
    /// `maxmemory` (Redis's encoding); 0: no limit.
    pub maxmemory_clients: i64,
    pub lfu_log_factor: u64,
    pub lfu_decay_time: u64,
    pub busy_reply_threshold: u64,
    /// Most memory the Lua VM may hold (a Rostrum parameter); 0: no limit.
    pub lua_maxmemory: u64,
    pub aof_load_truncated: bool,
    pub auto_aof_rewrite_percentage: u64,
    pub auto_aof_rewrite_min_size: u64,
    /// Every class spelled out (`notify::flags_spelled_out`).
    pub notify_keyspace_events: String,
    pub daemonize: bool,
    pub supervised: String,
    pub pidfile: String,
    /// Values of the parameters Rostrum accepts but does not act on, by
    /// name (absent: the default).
    pub other: BTreeMap<&'static str, String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: vec!["127.0.0.1".into()],
            port: 6379,
            protected_mode: true,
            requirepass: None,
            acl_users: Vec::new(),
            rename_commands: Vec::new(),
            loglevel: "notice".into(),
            logfile: String::new(),
            databases: 16,
            worker_threads: 0,
            park_spin_us: 0,
            http_port: 0,
            http_bind: "127.0.0.1".to_string(),
            tracking_table_max_keys: 1_000_000,
            proto_max_bulk_len: 512 * 1024 * 1024,
            client_query_buffer_limit: 1024 * 1024 * 1024,
            maxclients: 10000,
            timeout: 0,
            tcp_keepalive: 300,
            hz: 10,
            slowlog_log_slower_than: 10000,
            slowlog_max_len: 128,
            latency_monitor_threshold: 0,
            latency_tracking: true,
            latency_tracking_info_percentiles: "50 99 99.9".into(),
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
            set_max_intset_entries: 512,
            list_max_listpack_size: -2,
            hash_max_listpack_entries: 512,
            hash_max_listpack_value: 64,
            lb_max_meta_bytes: 4096,
            lb_dedup_window: 100000,
            debug_clock_offset_ms: 0,
            appendonly: false,
            appendfilename: "appendonly.aof".into(),
            appendfsync: "everysec".into(),
            dir: ".".into(),
            dbfilename: "dump.rdb".into(),
            save: String::new(),
            stop_writes_on_bgsave_error: true,
            rdbcompression: true,
            rdbchecksum: true,
            maxmemory: 0,
            maxmemory_policy: "noeviction".into(),
            maxmemory_samples: 5,
            maxmemory_eviction_tenacity: 10,
            maxmemory_clients: 0,
            lfu_log_factor: 10,
            lfu_decay_time: 1,
            busy_reply_threshold: 5000,
            lua_maxmemory: 256 * 1024 * 1024,
            aof_load_truncated: true,
            auto_aof_rewrite_percentage: 100,
            auto_aof_rewrite_min_size: 64 * 1024 * 1024,
            notify_keyspace_events: String::new(),
            daemonize: false,
            supervised: "no".into(),
            pidfile: String::new(),
            other: BTreeMap::new(),
        }
    }
}

/// How a parameter's value is written and checked.
#[derive(Clone, Copy)]
pub enum Kind {
    /// `yes` / `no`.
    Bool,
    /// An integer in a range (Redis's `string2ll` syntax).
    Int { min: i64, max: i64 },
    /// A byte count accepting `k`, `kb`, `m`, `mb`, `g`, `gb` suffixes.
    Memory { max: u64 },
    /// `maxmemory-clients`: a memory value, or a percentage (`10%`).
    MemoryOrPercent,
    /// One of fixed words.
    Enum(&'static [&'static str]),
    /// Free text.
    Text,
    /// `save`: pairs of `seconds changes`, or empty.
    Save,
    /// `notify-keyspace-events`: event class characters.
    KeyspaceEvents,
    /// `client-output-buffer-limit`: `class hard soft seconds` groups.
    BufferLimit,
    /// `latency-tracking-info-percentiles`: numbers between 0 and 100.
    Percentiles,
}

/// Where a parameter's value lives.
#[derive(Clone, Copy)]
enum Access {
    /// A typed field of [`Config`] the server reads.
    Field {
        get: fn(&Config) -> String,
        set: fn(&mut Config, &str),
    },
    /// Accepted for compatibility with redis.conf and CONFIG GET, kept as
    /// text in [`Config::other`]; Rostrum does not act on it.
    Stored { default: &'static str },
}

/// One configuration parameter.
pub struct Param {
    /// Name, as redis.conf spells it.
    pub name: &'static str,
    /// Older names that still work (CONFIG GET answers under the name asked).
    pub aliases: &'static [&'static str],
    /// Value syntax.
    pub kind: Kind,
    /// Only settable at start-up.
    pub immutable: bool,
    /// Not settable at run time unless protected configs are enabled (as
    /// Redis's `enable-protected-configs no`).
    pub protected: bool,
    access: Access,
}

impl Param {
    /// The value as CONFIG GET prints it.
    pub fn value(&self, c: &Config) -> String {
        match self.access {
            Access::Field { get, .. } => get(c),
            Access::Stored { default } => c
                .other
                .get(self.name)
                .cloned()
                .unwrap_or_else(|| default.to_string()),
        }
    }

    /// Stores a value already put in canonical form by [`canonical`].
    fn store(&self, c: &mut Config, v: &str) {
        match self.access {
            Access::Field { set, .. } => set(c, v),
            Access::Stored { .. } => {
                c.other.insert(self.name, v.to_string());
            }
        }
    }
}

const fn field(
    name: &'static str,
    aliases: &'static [&'static str],
    kind: Kind,
    get: fn(&Config) -> String,
    set: fn(&mut Config, &str),
) -> Param {
    Param {
        name,
        aliases,
        kind,
        immutable: false,
        protected: false,
        access: Access::Field { get, set },
    }
}

const fn stored(
    name: &'static str,
    aliases: &'static [&'static str],
    kind: Kind,
    default: &'static str,
) -> Param {
    Param {
        name,
        aliases,
        kind,
        immutable: false,
        protected: false,
        access: Access::Stored { default },
    }
}

const fn immutable(p: Param) -> Param {
    Param {
        immutable: true,
        ..p
    }
}

const fn protected(p: Param) -> Param {
    Param {
        protected: true,
        ..p
    }
}

const BOOL: Kind = Kind::Bool;
const fn int(min: i64, max: i64) -> Kind {
    Kind::Int { min, max }
}
const INT_MAX: i64 = i32::MAX as i64;
const NON_NEG: Kind = int(0, INT_MAX);
const MEMORY: Kind = Kind::Memory {
    max: i64::MAX as u64,
};

macro_rules! num_field {
    ($name:literal, $aliases:expr, $kind:expr, $field:ident) => {
        field(
            $name,
            $aliases,
            $kind,
            |c| c.$field.to_string(),
            |c, v| {
                if let Ok(n) = v.parse() {
                    c.$field = n;
                }
            },
        )
    };
}
macro_rules! bool_field {
    ($name:literal, $field:ident) => {
        field(
            $name,
            &[],
            Kind::Bool,
            |c| yes_no(c.$field).into(),
            |c, v| c.$field = v == "yes",
        )
    };
}
macro_rules! text_field {
    ($name:literal, $kind:expr, $field:ident) => {
        field(
            $name,
            &[],
            $kind,
            |c| c.$field.clone(),
            |c, v| c.$field = v.to_string(),
        )
    };
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

const LOGLEVELS: &[&str] = &["debug", "verbose", "notice", "warning", "nothing"];
const FSYNC: &[&str] = &["everysec", "always", "no"];
const POLICIES: &[&str] = &[
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "noeviction",
];
const SUPERVISED: &[&str] = &["upstart", "systemd", "auto", "no"];

/// Every parameter Rostrum knows, in redis.conf's names. Parameters of
/// Redis features Rostrum lacks (replication, RDB, ...) are
/// accepted and answered so that stock config files and tools work, but
/// have no effect.
pub static PARAMS: &[Param] = &[
    // Network and clients.
    immutable(field(
        "bind",
        &[],
        Kind::Text,
        |c| c.bind.join(" "),
        |c, v| c.bind = v.split_whitespace().map(str::to_string).collect(),
    )),
    num_field!("port", &[], int(0, 65535), port),
    bool_field!("protected-mode", protected_mode),
    field(
        "requirepass",
        &[],
        Kind::Text,
        |c| {
            c.requirepass
                .as_ref()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .unwrap_or_default()
        },
        |c, v| c.requirepass = (!v.is_empty()).then(|| v.as_bytes().to_vec()),
    ),
    num_field!("maxclients", &[], int(1, u32::MAX as i64), maxclients),
    num_field!("timeout", &[], NON_NEG, timeout),
    num_field!("tcp-keepalive", &[], NON_NEG, tcp_keepalive),
    immutable(stored("tcp-backlog", &[], NON_NEG, "511")),
    immutable(stored("unixsocket", &[], Kind::Text, "")),
    immutable(stored("unixsocketperm", &[], NON_NEG, "0")),
    num_field!("proto-max-bulk-len", &[], MEMORY, proto_max_bulk_len),
    num_field!(
        "client-query-buffer-limit",
        &[],
        MEMORY,
        client_query_buffer_limit
    ),
    stored(
        "client-output-buffer-limit",
        &[],
        Kind::BufferLimit,
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
    ),
    immutable(stored("io-threads", &[], int(1, 128), "1")),
    immutable(stored("io-threads-do-reads", &[], BOOL, "no")),
    // Rostrum's own: the threads that serve connections and run commands.
    immutable(num_field!(
        "worker-threads",
        &[],
        int(0, 1024),
        worker_threads
    )),
    // Rostrum's own: how long an idle worker spins before it sleeps.
    num_field!("park-spin-us", &[], int(0, 1000), park_spin_us),
    // Rostrum's own: the HTTP listener (read at start-up).
    immutable(num_field!("http-port", &[], int(0, 65535), http_port)),
    immutable(text_field!("http-bind", Kind::Text, http_bind)),
    // General.
    text_field!("loglevel", Kind::Enum(LOGLEVELS), loglevel),
    immutable(text_field!("logfile", Kind::Text, logfile)),
    immutable(stored("syslog-enabled", &[], BOOL, "no")),
    immutable(stored("syslog-ident", &[], Kind::Text, "redis")),
    immutable(stored(
        "syslog-facility",
        &[],
        Kind::Enum(&[
            "user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7",
        ]),
        "local0",
    )),
    immutable(num_field!("databases", &[], int(1, INT_MAX), databases)),
    field(
        "hz",
        &[],
        NON_NEG,
        |c| c.hz.to_string(),
        // Redis keeps hz within [1, 500] whatever is asked.
        |c, v| {
            if let Ok(n) = v.parse::<u64>() {
                c.hz = n.clamp(1, 500);
            }
        },
    ),
    stored("dynamic-hz", &[], BOOL, "yes"),
    immutable(bool_field!("daemonize", daemonize)),
    immutable(text_field!(
        "supervised",
        Kind::Enum(SUPERVISED),
        supervised
    )),
    immutable(text_field!("pidfile", Kind::Text, pidfile)),
    stored("always-show-logo", &[], BOOL, "no"),
    immutable(stored("set-proc-title", &[], BOOL, "yes")),
    stored(
        "proc-title-template",
        &[],
        Kind::Text,
        "{title} {listen-addr} {server-mode}",
    ),
    immutable(stored("disable-thp", &[], BOOL, "yes")),
    stored("jemalloc-bg-thread", &[], BOOL, "yes"),
    stored("crash-log-enabled", &[], BOOL, "yes"),
    stored("crash-memcheck-enabled", &[], BOOL, "yes"),
    stored(
        "oom-score-adj",
        &[],
        Kind::Enum(&["no", "yes", "relative", "absolute"]),
        "no",
    ),
    stored("oom-score-adj-values", &[], Kind::Text, "0 200 800"),
    stored("acllog-max-len", &[], NON_NEG, "128"),
    immutable(stored("aclfile", &[], Kind::Text, "")),
    stored(
        "acl-pubsub-default",
        &[],
        Kind::Enum(&["allchannels", "resetchannels"]),
        "resetchannels",
    ),
    immutable(stored("cluster-enabled", &[], BOOL, "no")),
    // TLS: state::tls builds the rustls configurations from these (CONFIG
    // SET rebuilds them, refusing a change that does not build).
    stored("tls-port", &[], int(0, 65535), "0"),
    stored("tls-cert-file", &[], Kind::Text, ""),
    stored("tls-key-file", &[], Kind::Text, ""),
    stored("tls-key-file-pass", &[], Kind::Text, ""),
    stored("tls-client-cert-file", &[], Kind::Text, ""),
    stored("tls-client-key-file", &[], Kind::Text, ""),
    stored("tls-client-key-file-pass", &[], Kind::Text, ""),
    // No DHE suites in rustls: accepted, not used.
    stored("tls-dh-params-file", &[], Kind::Text, ""),
    stored("tls-ca-cert-file", &[], Kind::Text, ""),
    stored("tls-ca-cert-dir", &[], Kind::Text, ""),
    stored(
        "tls-auth-clients",
        &[],
        Kind::Enum(&["no", "yes", "optional"]),
        "yes",
    ),
    stored("tls-protocols", &[], Kind::Text, ""),
    stored("tls-ciphers", &[], Kind::Text, ""),
    stored("tls-ciphersuites", &[], Kind::Text, ""),
    stored("tls-prefer-server-ciphers", &[], BOOL, "no"),
    stored("tls-session-caching", &[], BOOL, "yes"),
    stored("tls-session-cache-size", &[], NON_NEG, "20480"),
    // rustls's session cache has no expiry: accepted, not used.
    stored("tls-session-cache-timeout", &[], NON_NEG, "300"),
    stored("tls-replication", &[], BOOL, "no"),
    // No cluster: accepted (TLS for a cluster bus Rostrum does not have).
    stored("tls-cluster", &[], BOOL, "no"),
    // Slow log and latency.
    num_field!(
        "slowlog-log-slower-than",
        &[],
        int(-1, i64::MAX),
        slowlog_log_slower_than
    ),
    num_field!("slowlog-max-len", &[], int(0, i64::MAX), slowlog_max_len),
    num_field!(
        "latency-monitor-threshold",
        &[],
        int(0, i64::MAX),
        latency_monitor_threshold
    ),
    bool_field!("latency-tracking", latency_tracking),
    text_field!(
        "latency-tracking-info-percentiles",
        Kind::Percentiles,
        latency_tracking_info_percentiles
    ),
    // Memory and eviction.
    num_field!("maxmemory", &[], MEMORY, maxmemory),
    text_field!("maxmemory-policy", Kind::Enum(POLICIES), maxmemory_policy),
    num_field!("maxmemory-samples", &[], int(1, INT_MAX), maxmemory_samples),
    num_field!(
        "maxmemory-eviction-tenacity",
        &[],
        int(0, 100),
        maxmemory_eviction_tenacity
    ),
    field(
        "maxmemory-clients",
        &[],
        Kind::MemoryOrPercent,
        |c| match c.maxmemory_clients {
            n if n < 0 => format!("{}%", -n),
            n => n.to_string(),
        },
        |c, v| {
            let n = match v.strip_suffix('%') {
                Some(p) => p.parse::<i64>().map(|p| -p),
                None => v.parse(),
            };
            if let Ok(n) = n {
                c.maxmemory_clients = n;
            }
        },
    ),
    num_field!("lfu-log-factor", &[], NON_NEG, lfu_log_factor),
    num_field!("lfu-decay-time", &[], NON_NEG, lfu_decay_time),
    stored("active-expire-effort", &[], int(1, 10), "1"),
    stored("activerehashing", &[], BOOL, "yes"),
    stored("activedefrag", &[], BOOL, "no"),
    stored("lazyfree-lazy-eviction", &[], BOOL, "no"),
    stored("lazyfree-lazy-expire", &[], BOOL, "no"),
    stored("lazyfree-lazy-server-del", &[], BOOL, "no"),
    stored("lazyfree-lazy-user-del", &[], BOOL, "no"),
    stored("lazyfree-lazy-user-flush", &[], BOOL, "no"),
    num_field!(
        "tracking-table-max-keys",
        &[],
        int(0, i64::MAX),
        tracking_table_max_keys
    ),
    // Encodings.
    num_field!(
        "zset-max-listpack-entries",
        &["zset-max-ziplist-entries"],
        int(0, i64::MAX),
        zset_max_listpack_entries
    ),
    num_field!(
        "zset-max-listpack-value",
        &["zset-max-ziplist-value"],
        int(0, i64::MAX),
        zset_max_listpack_value
    ),
    num_field!(
        "set-max-intset-entries",
        &[],
        int(0, i64::MAX),
        set_max_intset_entries
    ),
    num_field!(
        "hash-max-listpack-entries",
        &["hash-max-ziplist-entries"],
        int(0, i64::MAX),
        hash_max_listpack_entries
    ),
    num_field!(
        "hash-max-listpack-value",
        &["hash-max-ziplist-value"],
        MEMORY,
        hash_max_listpack_value
    ),
    num_field!("lb-max-meta-bytes", &[], MEMORY, lb_max_meta_bytes),
    num_field!("lb-dedup-window", &[], int(0, i64::MAX), lb_dedup_window),
    num_field!(
        "debug-clock-offset-ms",
        &[],
        int(i64::MIN, i64::MAX),
        debug_clock_offset_ms
    ),
    num_field!(
        "list-max-listpack-size",
        &["list-max-ziplist-size"],
        int(i32::MIN as i64, INT_MAX),
        list_max_listpack_size
    ),
    stored("list-compress-depth", &[], NON_NEG, "0"),
    stored("hll-sparse-max-bytes", &[], MEMORY, "3000"),
    stored("stream-node-max-bytes", &[], MEMORY, "4096"),
    stored("stream-node-max-entries", &[], int(0, i64::MAX), "100"),
    // Persistence.
    bool_field!("appendonly", appendonly),
    immutable(text_field!("appendfilename", Kind::Text, appendfilename)),
    immutable(stored("appenddirname", &[], Kind::Text, "appendonlydir")),
    text_field!("appendfsync", Kind::Enum(FSYNC), appendfsync),
    bool_field!("aof-load-truncated", aof_load_truncated),
    num_field!(
        "auto-aof-rewrite-percentage",
        &[],
        NON_NEG,
        auto_aof_rewrite_percentage
    ),
    num_field!(
        "auto-aof-rewrite-min-size",
        &[],
        MEMORY,
        auto_aof_rewrite_min_size
    ),
    stored("aof-use-rdb-preamble", &[], BOOL, "yes"),
    stored("aof-timestamp-enabled", &[], BOOL, "no"),
    stored("aof-rewrite-incremental-fsync", &[], BOOL, "yes"),
    stored("no-appendfsync-on-rewrite", &[], BOOL, "no"),
    protected(text_field!("dir", Kind::Text, dir)),
    protected(text_field!("dbfilename", Kind::Text, dbfilename)),
    text_field!("save", Kind::Save, save),
    bool_field!("stop-writes-on-bgsave-error", stop_writes_on_bgsave_error),
    bool_field!("rdbcompression", rdbcompression),
    immutable(bool_field!("rdbchecksum", rdbchecksum)),
    stored("rdb-save-incremental-fsync", &[], BOOL, "yes"),
    // Read by replication (`persistence::rdb::del_sync_file`).
    stored("rdb-del-sync-files", &[], BOOL, "no"),
    // DEBUG's and MODULE's gates (`commands::debug::refusal`).
    immutable(stored(
        "enable-debug-command",
        &[],
        Kind::Enum(&["no", "yes", "local"]),
        "no",
    )),
    immutable(stored(
        "enable-module-command",
        &[],
        Kind::Enum(&["no", "yes", "local"]),
        "no",
    )),
    field(
        "notify-keyspace-events",
        &[],
        Kind::KeyspaceEvents,
        |c| notify::flags_string(notify::parse_flags(&c.notify_keyspace_events).unwrap_or(0)),
        |c, v| c.notify_keyspace_events = v.to_string(),
    ),
    num_field!(
        "busy-reply-threshold",
        &["lua-time-limit"],
        int(0, i64::MAX),
        busy_reply_threshold
    ),
    // Rostrum's own: the Lua VM's memory limit, settable at run time.
    num_field!("lua-maxmemory", &[], MEMORY, lua_maxmemory),
    stored("shutdown-timeout", &[], NON_NEG, "10"),
    // Replication (read through `Config::param`; see state::replication).
    stored(
        "replica-serve-stale-data",
        &["slave-serve-stale-data"],
        BOOL,
        "yes",
    ),
    stored("replica-read-only", &["slave-read-only"], BOOL, "yes"),
    immutable(stored("replicaof", &["slaveof"], Kind::Text, "")),
    stored("masterauth", &[], Kind::Text, ""),
    stored("masteruser", &[], Kind::Text, ""),
    stored("replica-lazy-flush", &["slave-lazy-flush"], BOOL, "no"),
    stored(
        "replica-ignore-maxmemory",
        &["slave-ignore-maxmemory"],
        BOOL,
        "yes",
    ),
    stored("replica-priority", &["slave-priority"], NON_NEG, "100"),
    // Shown as INFO's replica_announced: Sentinel leaves a replica with
    // `no` out of its replies.
    stored("replica-announced", &[], BOOL, "yes"),
    stored(
        "replica-announce-ip",
        &["slave-announce-ip"],
        Kind::Text,
        "",
    ),
    stored(
        "replica-announce-port",
        &["slave-announce-port"],
        int(0, 65535),
        "0",
    ),
    stored("repl-diskless-sync", &[], BOOL, "yes"),
    stored("repl-diskless-sync-delay", &[], NON_NEG, "5"),
    stored("repl-diskless-sync-max-replicas", &[], NON_NEG, "0"),
    stored(
        "repl-diskless-load",
        &[],
        Kind::Enum(&["disabled", "on-empty-db", "swapdb"]),
        "disabled",
    ),
    stored("repl-disable-tcp-nodelay", &[], BOOL, "no"),
    stored("repl-backlog-size", &[], MEMORY, "1048576"),
    stored("repl-backlog-ttl", &[], NON_NEG, "3600"),
    stored("repl-timeout", &[], int(1, INT_MAX), "60"),
    stored(
        "repl-ping-replica-period",
        &["repl-ping-slave-period"],
        int(1, INT_MAX),
        "10",
    ),
    stored(
        "min-replicas-to-write",
        &["min-slaves-to-write"],
        NON_NEG,
        "0",
    ),
    stored(
        "min-replicas-max-lag",
        &["min-slaves-max-lag"],
        NON_NEG,
        "10",
    ),
];

/// Finds a parameter by name or alias, in any case.
pub fn find(name: &str) -> Option<&'static Param> {
    PARAMS.iter().find(|p| {
        p.name.eq_ignore_ascii_case(name) || p.aliases.iter().any(|a| a.eq_ignore_ascii_case(name))
    })
}

/// Parses a byte count as Redis's `memtoull` (`1gb`, `512mb`, `100k`, `42`).
pub fn parse_memory(s: &str) -> Option<u64> {
    let lower = s.to_ascii_lowercase();
    let (digits, mul) = [
        ("gb", 1u64 << 30),
        ("g", 1_000_000_000),
        ("mb", 1 << 20),
        ("m", 1_000_000),
        ("kb", 1 << 10),
        ("k", 1000),
        ("b", 1),
    ]
    .iter()
    .find_map(|(suf, mul)| lower.strip_suffix(suf).map(|d| (d.to_string(), *mul)))
    .unwrap_or((lower.clone(), 1));
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(mul)
}

/// Checks `value` for `param` and returns it in the form CONFIG GET prints
/// (`1gb` becomes `1073741824`, `YES` becomes `yes`). `current` is the
/// present value, for parameters whose settings merge into it. The error
/// is the text CONFIG SET puts after `... - `.
pub fn canonical(param: &Param, value: &str, current: &str) -> Result<String, String> {
    match param.kind {
        Kind::Bool => {
            if value.eq_ignore_ascii_case("yes") || value.eq_ignore_ascii_case("no") {
                Ok(value.to_ascii_lowercase())
            } else {
                Err("argument must be 'yes' or 'no'".into())
            }
        }
        Kind::Int { min, max } => match crate::protocol::number::parse_i64(value.as_bytes()) {
            Some(n) if n >= min && n <= max => Ok(n.to_string()),
            Some(_) => Err(format!(
                "argument must be between {min} and {max} inclusive"
            )),
            None => Err("argument couldn't be parsed into an integer".into()),
        },
        Kind::Memory { max } => match parse_memory(value) {
            Some(n) if n <= max => Ok(n.to_string()),
            Some(_) => Err(format!("argument must be between 0 and {max} inclusive")),
            None => Err("argument must be a memory value".into()),
        },
        Kind::MemoryOrPercent => {
            let bad = || "argument must be a memory or percent value".to_string();
            match value.strip_suffix('%') {
                Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
                    match p.parse::<u64>() {
                        Ok(0) => Ok("0".into()),
                        Ok(n) if n <= 100 => Ok(format!("{n}%")),
                        _ => Err("percentage argument must be less or equal to 100".into()),
                    }
                }
                Some(_) => Err(bad()),
                None if value.is_empty() => Ok("0".into()),
                None => match parse_memory(value) {
                    Some(n) if n <= i64::MAX as u64 => Ok(n.to_string()),
                    _ => Err(bad()),
                },
            }
        }
        Kind::Enum(words) => {
            if words.iter().any(|w| w.eq_ignore_ascii_case(value)) {
                Ok(value.to_ascii_lowercase())
            } else {
                Err("argument(s) must be one of the following: ".to_string() + &words.join(", "))
            }
        }
        Kind::Text => Ok(value.to_string()),
        Kind::Save => canonical_save(value),
        Kind::KeyspaceEvents => super::notify::parse_flags(value)
            .map(super::notify::flags_spelled_out)
            .ok_or_else(|| "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into()),
        Kind::BufferLimit => merge_buffer_limits(value, current),
        Kind::Percentiles => super::latency::parse_percentiles(value).map(|ps| {
            ps.iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        }),
    }
}

fn canonical_save(value: &str) -> Result<String, String> {
    if value.is_empty() {
        return Ok(String::new());
    }
    let invalid = || "Invalid save parameters".to_string();
    let words: Vec<&str> = value.split(' ').collect();
    if !words.len().is_multiple_of(2) {
        return Err(invalid());
    }
    let mut out = Vec::with_capacity(words.len());
    for w in words {
        match crate::protocol::number::parse_i64(w.as_bytes()) {
            Some(n) if n >= 0 => out.push(n.to_string()),
            _ => return Err(invalid()),
        }
    }
    Ok(out.join(" "))
}

/// Applies `class hard soft seconds` groups to the current limits.
fn merge_buffer_limits(value: &str, current: &str) -> Result<String, String> {
    const CLASSES: [&str; 3] = ["normal", "slave", "pubsub"];
    let mut limits: Vec<[String; 3]> = CLASSES
        .iter()
        .map(|_| ["0".to_string(), "0".to_string(), "0".to_string()])
        .collect();
    let cur: Vec<&str> = current.split_whitespace().collect();
    for group in cur.chunks(4) {
        if let [class, h, s, t] = group {
            if let Some(i) = CLASSES.iter().position(|c| c == class) {
                limits[i] = [h.to_string(), s.to_string(), t.to_string()];
            }
        }
    }
    let words: Vec<&str> = value.split_whitespace().collect();
    if !words.len().is_multiple_of(4) {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    for group in words.chunks(4) {
        let [class, hard, soft, secs] = group else {
            continue;
        };
        let class = match class.to_ascii_lowercase().as_str() {
            "normal" => 0,
            "slave" | "replica" => 1,
            "pubsub" => 2,
            _ => {
                return Err("Invalid client class specified in buffer limit configuration.".into())
            }
        };
        let bad = || "Error in hard, soft or soft_seconds setting in buffer limit configuration.";
        let hard = parse_memory(hard).ok_or_else(bad)?;
        let soft = parse_memory(soft).ok_or_else(bad)?;
        let secs = crate::protocol::number::parse_i64(secs.as_bytes())
            .filter(|n| *n >= 0)
            .ok_or_else(bad)?;
        limits[class] = [hard.to_string(), soft.to_string(), secs.to_string()];
    }
    Ok(CLASSES
        .iter()
        .zip(&limits)
        .map(|(c, [h, s, t])| format!("{c} {h} {s} {t}"))
        .collect::<Vec<_>>()
        .join(" "))
}

/// Why CONFIG SET refused one parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetError {
    /// No such parameter (the name as given).
    Unknown(String),
    /// The parameter (name as given) and the reason.
    Failed(String, String),
}

impl Config {
    /// The limits values read from RDB (a file or RESTORE) are built with.
    pub fn rdb_limits(&self) -> Limits {
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        Limits {
            zset: ZSetLimits::new(self.zset_max_listpack_entries, self.zset_max_listpack_value),
            hash: HashLimits {
                max_listpack_entries: size(self.hash_max_listpack_entries),
                max_listpack_value: size(self.hash_max_listpack_value),
            },
            list: ListLimits {
                max_listpack_size: self.list_max_listpack_size,
            },
            max_intset: size(self.set_max_intset_entries),
            lb_max_meta: size(self.lb_max_meta_bytes),
            lb_dedup_window: size(self.lb_dedup_window),
        }
    }

    /// How values are written to RDB (a file or DUMP).
    pub fn rdb_options(&self) -> EncodeOptions {
        EncodeOptions {
            compress: self.rdbcompression,
            list_fill: self.list_max_listpack_size,
            archive_refs: false,
        }
    }

    /// `appenddirname`: the AOF's folder under `dir`.
    pub fn appenddirname(&self) -> &str {
        self.other
            .get("appenddirname")
            .map(String::as_str)
            .unwrap_or("appendonlydir")
    }

    /// `aof-use-rdb-preamble`: the AOF's base file is RDB (else commands).
    pub fn aof_use_rdb_preamble(&self) -> bool {
        self.other
            .get("aof-use-rdb-preamble")
            .is_none_or(|v| v == "yes")
    }

    /// The `save` points as (seconds, changes) pairs.
    pub fn save_points(&self) -> Vec<(u64, u64)> {
        let nums: Vec<u64> = self
            .save
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        nums.chunks_exact(2).map(|p| (p[0], p[1])).collect()
    }

    /// Applies one `name value...` setting (config file line or command
    /// line), validating it.
    pub fn apply(&mut self, name: &str, value: &str) -> Result<(), String> {
        let param = find(name)
            .ok_or_else(|| format!("Bad directive or wrong number of arguments: '{name}'"))?;
        let v = canonical(param, value, &param.value(self)).map_err(|e| format!("'{name}' {e}"))?;
        param.store(self, &v);
        Ok(())
    }

    /// CONFIG SET: applies every `(name, value)` pair or none of them.
    /// Immutable and protected parameters, unknown names, repeated names
    /// and invalid values are refused.
    pub fn set_many(&mut self, pairs: &[(&str, &str)]) -> Result<(), SetError> {
        // Names first (the first bad one wins), then values, as Redis.
        let mut params = Vec::with_capacity(pairs.len());
        for (i, (name, _)) in pairs.iter().enumerate() {
            let param = find(name).ok_or_else(|| SetError::Unknown(name.to_string()))?;
            let fail = |why: &str| SetError::Failed(name.to_string(), why.to_string());
            if param.immutable {
                return Err(fail("can't set immutable config"));
            }
            if param.protected {
                return Err(fail("can't set protected config"));
            }
            if pairs[..i].iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
                return Err(fail("duplicate parameter"));
            }
            params.push(param);
        }
        let mut next = self.clone();
        for (param, (name, value)) in params.iter().zip(pairs) {
            let v = canonical(param, value, &param.value(&next))
                .map_err(|e| SetError::Failed(name.to_string(), e))?;
            param.store(&mut next, &v);
        }
        *self = next;
        Ok(())
    }

    /// The value of parameter `name` as CONFIG GET prints it (empty if
    /// unknown).
    pub fn param(&self, name: &str) -> String {
        find(name).map(|p| p.value(self)).unwrap_or_default()
    }

    /// CONFIG GET: `(name as matched, value)` for every parameter whose
    /// name or alias matches one of the glob `patterns`, each once.
    pub fn get_matching(&self, patterns: &[&[u8]]) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        let mut push = |name: &str, p: &Param| {
            if !out.iter().any(|(n, _)| n == name) {
                out.push((name.to_string(), p.value(self)));
            }
        };
        for pat in patterns {
            let has_glob = pat.iter().any(|b| matches!(b, b'*' | b'?' | b'['));
            if !has_glob {
                // An exact name answers under the spelling asked, as Redis.
                if let Ok(name) = std::str::from_utf8(pat) {
                    if let Some(p) = find(name) {
                        push(name, p);
                    }
                }
                continue;
            }
            for p in PARAMS {
                for name in std::iter::once(&p.name).chain(p.aliases) {
                    if crate::engine::glob::matches(pat, name.as_bytes(), true) {
                        push(name, p);
                    }
                }
            }
        }
        out
    }

    /// Reads a redis.conf-style file: `name value ...` lines, `#` comments.
    /// An unknown name or bad value is an error naming the line.
    pub fn load_file(&mut self, path: &str) -> Result<(), String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("Fatal error, can't open config file '{path}': {e}"))?;
        self.load_text(&text, path)
    }

    /// Applies the text of a config file (`path` only names it in errors).
    pub fn load_text(&mut self, text: &str, path: &str) -> Result<(), String> {
        let mut saw_save = false;
        for (no, raw) in text.lines().enumerate() {
            let Some((name, value)) =
                directive(raw).map_err(|e| config_error(path, no + 1, raw, e))?
            else {
                continue;
            };
            // Several `save` lines add up, as in redis.conf.
            let value = if name.eq_ignore_ascii_case("save") && saw_save && !value.is_empty() {
                let prev = self.save.clone();
                if prev.is_empty() {
                    value
                } else {
                    format!("{prev} {value}")
                }
            } else {
                value
            };
            if name.eq_ignore_ascii_case("save") {
                saw_save = true;
            }
            if name.eq_ignore_ascii_case("user") {
                self.acl_users.push(value);
                continue;
            }
            if name.eq_ignore_ascii_case("rename-command") {
                // Re-split: `rename-command FLUSHALL ""` has an empty word.
                let words =
                    crate::protocol::request::split_args(raw.trim().as_bytes()).unwrap_or_default();
                let [_, from, to] = &words[..] else {
                    let e = "Bad directive or wrong number of arguments";
                    return Err(config_error(path, no + 1, raw, e));
                };
                self.rename_commands.push(RenameCommand {
                    from: String::from_utf8_lossy(from).into_owned(),
                    to: String::from_utf8_lossy(to).into_owned(),
                    path: path.to_string(),
                    line: no + 1,
                    raw: raw.to_string(),
                });
                continue;
            }
            self.apply(&name, &value)
                .map_err(|e| config_error(path, no + 1, raw, &e))?;
        }
        Ok(())
    }
}

/// A `rename-command FROM TO` directive, with where it was written (for
/// the fatal error when the command table refuses it).
#[derive(Debug, Clone)]
pub struct RenameCommand {
    pub from: String,
    /// Empty: the command is hidden.
    pub to: String,
    path: String,
    line: usize,
    raw: String,
}

impl RenameCommand {
    /// Redis's fatal config error naming this directive's line.
    pub fn error(&self, msg: &str) -> String {
        config_error(&self.path, self.line, &self.raw, msg)
    }
}

/// Splits a config file line into its directive name and value; `None` for
/// blank lines and comments.
fn directive(raw: &str) -> Result<Option<(String, String)>, &'static str> {
    let line = raw.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let words = crate::protocol::request::split_args(line.as_bytes())
        .ok_or("Unbalanced quotes in configuration line")?;
    let Some((name, rest)) = words.split_first() else {
        return Ok(None);
    };
    let name = String::from_utf8_lossy(name).into_owned();
    let value = rest
        .iter()
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    Ok(Some((name, value)))
}

fn config_error(path: &str, line: usize, raw: &str, msg: &str) -> String {
    format!("*** FATAL CONFIG FILE ERROR ({path}) ***\nReading the configuration file, at line {line}\n>>> '{raw}'\n{msg}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_units() {
        assert_eq!(parse_memory("1gb"), Some(1 << 30));
        assert_eq!(parse_memory("100k"), Some(100_000));
        assert_eq!(parse_memory("42"), Some(42));
        assert_eq!(parse_memory("x"), None);
    }

    #[test]
    fn file_errors_name_the_line() {
        let dir = std::env::temp_dir().join(format!("rostrum-conf-{}", std::process::id()));
        std::fs::write(&dir, "port 7000\n# c\nnosuch 1\n").unwrap();
        let mut c = Config::default();
        let e = c.load_file(dir.to_str().unwrap()).unwrap_err();
        assert!(e.contains("line 3"), "{e}");
        assert!(e.contains("nosuch"), "{e}");
        assert_eq!(c.port, 7000);
        std::fs::remove_file(&dir).ok();
    }

    #[test]
    fn canonical_forms_and_errors() {
        let c = Config::default();
        let get = |name: &str, v: &str| {
            let p = find(name).unwrap();
            canonical(p, v, &p.value(&c))
        };
        assert_eq!(get("maxmemory", "1GB").unwrap(), "1073741824");
        assert_eq!(
            get("maxmemory", "1.5gb").unwrap_err(),
            "argument must be a memory value"
        );
        assert_eq!(get("appendonly", "YES").unwrap(), "yes");
        assert_eq!(
            get("hz", "05").unwrap_err(),
            "argument couldn't be parsed into an integer"
        );
        assert_eq!(
            get("timeout", "-1").unwrap_err(),
            "argument must be between 0 and 2147483647 inclusive"
        );
        assert_eq!(get("save", "3600 1 300 100").unwrap(), "3600 1 300 100");
        assert_eq!(get("save", "").unwrap(), "");
        for bad in ["1 2 3", "-1 2", " 10 20", "x 1"] {
            assert_eq!(get("save", bad).unwrap_err(), "Invalid save parameters");
        }
        // Kept spelled out (CONFIG GET shows `AKE`: see `notify`).
        assert_eq!(
            get("notify-keyspace-events", "KEA").unwrap(),
            "g$lshzxetdKE"
        );
        assert_eq!(
            get("notify-keyspace-events", "Kgn$lshzxetdm").unwrap(),
            "g$lshzxetdnKm"
        );
        assert_eq!(get("notify-keyspace-events", "gE").unwrap(), "gE");
        assert!(get("notify-keyspace-events", "q").is_err());
        assert_eq!(
            get("client-output-buffer-limit", "normal 1mb 2mb 3").unwrap(),
            "normal 1048576 2097152 3 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        );
        assert_eq!(
            get("client-output-buffer-limit", "replica 0 0 0").unwrap(),
            "normal 0 0 0 slave 0 0 0 pubsub 33554432 8388608 60"
        );
        assert!(get("client-output-buffer-limit", "normal 0 0").is_err());
    }

    #[test]
    fn set_many_is_all_or_nothing() {
        let mut c = Config::default();
        assert_eq!(
            c.set_many(&[("hz", "20"), ("maxmemory", "x")]),
            Err(SetError::Failed(
                "maxmemory".into(),
                "argument must be a memory value".into()
            ))
        );
        assert_eq!(c.hz, 10);
        // A bad name is reported before any bad value.
        assert_eq!(
            c.set_many(&[("hz", "x"), ("nosuch", "1")]),
            Err(SetError::Unknown("nosuch".into()))
        );
        assert!(matches!(
            c.set_many(&[("databases", "1")]),
            Err(SetError::Failed(_, e)) if e == "can't set immutable config"
        ));
        assert!(matches!(
            c.set_many(&[("dir", "/")]),
            Err(SetError::Failed(_, e)) if e == "can't set protected config"
        ));
        c.set_many(&[("hz", "1000"), ("zset-max-ziplist-value", "32")])
            .unwrap();
        assert_eq!((c.hz, c.zset_max_listpack_value), (500, 32));
    }

    #[test]
    fn get_matching_names_and_aliases() {
        let c = Config::default();
        let got = c.get_matching(&[b"slave-read-*", b"REPLICA-READ-ONLY"]);
        assert_eq!(
            got,
            vec![
                ("slave-read-only".to_string(), "yes".to_string()),
                ("REPLICA-READ-ONLY".to_string(), "yes".to_string())
            ]
        );
        assert!(c.get_matching(&[b"*"]).len() > PARAMS.len());
    }

    #[test]
    fn stock_redis_conf_directives_load() {
        let text = "bind 127.0.0.1 -::1\nprotected-mode yes\ntcp-backlog 511\ntimeout 0\n\
            tcp-keepalive 300\nloglevel notice\nlogfile \"\"\ndatabases 16\n\
            always-show-logo no\nset-proc-title yes\n\
            proc-title-template \"{title} {listen-addr} {server-mode}\"\n\
            stop-writes-on-bgsave-error yes\nrdbcompression yes\nrdbchecksum yes\n\
            dbfilename dump.rdb\nrdb-del-sync-files no\ndir ./\nreplica-serve-stale-data yes\n\
            replica-read-only yes\nrepl-diskless-sync yes\nrepl-diskless-sync-delay 5\n\
            repl-diskless-sync-max-replicas 0\nrepl-diskless-load disabled\n\
            repl-disable-tcp-nodelay no\nreplica-priority 100\nacllog-max-len 128\n\
            lazyfree-lazy-eviction no\nlazyfree-lazy-expire no\nlazyfree-lazy-server-del no\n\
            replica-lazy-flush no\nlazyfree-lazy-user-del no\nlazyfree-lazy-user-flush no\n\
            oom-score-adj no\noom-score-adj-values 0 200 800\ndisable-thp yes\n\
            appendonly no\nappendfilename \"appendonly.aof\"\nappenddirname \"appendonlydir\"\n\
            appendfsync everysec\nno-appendfsync-on-rewrite no\nauto-aof-rewrite-percentage 100\n\
            auto-aof-rewrite-min-size 64mb\naof-load-truncated yes\naof-use-rdb-preamble yes\n\
            aof-timestamp-enabled no\nslowlog-log-slower-than 10000\nslowlog-max-len 128\n\
            latency-monitor-threshold 0\nnotify-keyspace-events \"\"\n\
            hash-max-listpack-entries 512\nhash-max-listpack-value 64\n\
            list-max-listpack-size -2\nlist-compress-depth 0\nset-max-intset-entries 512\n\
            zset-max-listpack-entries 128\nzset-max-listpack-value 64\nhll-sparse-max-bytes 3000\n\
            stream-node-max-bytes 4096\nstream-node-max-entries 100\nactiverehashing yes\n\
            client-output-buffer-limit normal 0 0 0\n\
            client-output-buffer-limit replica 256mb 64mb 60\n\
            client-output-buffer-limit pubsub 32mb 8mb 60\nhz 10\ndynamic-hz yes\n\
            aof-rewrite-incremental-fsync yes\nrdb-save-incremental-fsync yes\n\
            jemalloc-bg-thread yes\n";
        let mut c = Config::default();
        c.load_text(text, "redis.conf").unwrap();
        assert_eq!(c.bind, ["127.0.0.1", "-::1"]);
        assert_eq!(
            c.get_matching(&[b"client-output-buffer-limit"])[0].1,
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        );
    }

    #[test]
    fn aliases() {
        let mut c = Config::default();
        c.apply("zset-max-ziplist-entries", "5").unwrap();
        assert_eq!(c.zset_max_listpack_entries, 5);
        assert!(c.apply("appendfsync", "sometimes").is_err());
    }

    #[test]
    fn hash_limits_have_redis_defaults_and_aliases() {
        let mut c = Config::default();
        assert_eq!(
            (c.hash_max_listpack_entries, c.hash_max_listpack_value),
            (512, 64)
        );
        c.apply("hash-max-ziplist-entries", "7").unwrap();
        c.apply("hash-max-ziplist-value", "1kb").unwrap();
        assert_eq!(
            (c.hash_max_listpack_entries, c.hash_max_listpack_value),
            (7, 1024)
        );
        assert!(c.apply("hash-max-listpack-value", "-1").is_err());
    }
}
