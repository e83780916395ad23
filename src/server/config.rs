//! Configuration: the parameters Rostrum implements, with redis.conf's names
//! (and old aliases), read from a config file, the command line, and CONFIG
//! GET / SET at run time. One table, [`PARAMS`], drives all of them.

use std::fmt::Write as _;

/// Every configuration value.
#[derive(Debug, Clone)]
pub struct Config {
    pub bind: Vec<String>,
    pub port: u16,
    pub protected_mode: bool,
    pub requirepass: Option<Vec<u8>>,
    pub loglevel: String,
    pub logfile: String,
    pub databases: usize,
    pub proto_max_bulk_len: u64,
    pub client_query_buffer_limit: u64,
    pub maxclients: u64,
    pub timeout: u64,
    pub tcp_keepalive: u64,
    pub hz: u64,
    pub slowlog_log_slower_than: i64,
    pub slowlog_max_len: u64,
    pub latency_monitor_threshold: u64,
    pub zset_max_listpack_entries: u64,
    pub zset_max_listpack_value: u64,
    pub set_max_intset_entries: u64,
    pub appendonly: bool,
    pub appendfilename: String,
    pub appendfsync: String,
    pub dir: String,
    pub dbfilename: String,
    pub save: String,
    pub maxmemory: u64,
    pub maxmemory_policy: String,
    pub busy_reply_threshold: u64,
    pub aof_load_truncated: bool,
    pub auto_aof_rewrite_percentage: u64,
    pub auto_aof_rewrite_min_size: u64,
    pub notify_keyspace_events: String,
    pub daemonize: bool,
    pub supervised: String,
    pub pidfile: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: vec!["127.0.0.1".into()],
            port: 6379,
            protected_mode: true,
            requirepass: None,
            loglevel: "notice".into(),
            logfile: String::new(),
            databases: 16,
            proto_max_bulk_len: 512 * 1024 * 1024,
            client_query_buffer_limit: 1024 * 1024 * 1024,
            maxclients: 10000,
            timeout: 0,
            tcp_keepalive: 300,
            hz: 10,
            slowlog_log_slower_than: 10000,
            slowlog_max_len: 128,
            latency_monitor_threshold: 0,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
            set_max_intset_entries: 512,
            appendonly: false,
            appendfilename: "appendonly.aof".into(),
            appendfsync: "everysec".into(),
            dir: ".".into(),
            dbfilename: "dump.rdb".into(),
            save: String::new(),
            maxmemory: 0,
            maxmemory_policy: "noeviction".into(),
            busy_reply_threshold: 5000,
            aof_load_truncated: true,
            auto_aof_rewrite_percentage: 100,
            auto_aof_rewrite_min_size: 64 * 1024 * 1024,
            notify_keyspace_events: String::new(),
            daemonize: false,
            supervised: "no".into(),
            pidfile: String::new(),
        }
    }
}

/// How a parameter's value is written and checked.
#[derive(Clone, Copy)]
pub enum Kind {
    /// `yes` / `no`.
    Bool,
    /// An integer in a range.
    Int { min: i64, max: i64 },
    /// A byte count accepting `k`, `kb`, `m`, `mb`, `g`, `gb` suffixes.
    Memory { max: u64 },
    /// One of fixed words.
    Enum(&'static [&'static str]),
    /// Free text.
    Text,
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
    /// Reads the value as CONFIG GET prints it.
    pub get: fn(&Config) -> String,
    /// Stores an already validated value.
    pub set: fn(&mut Config, &str),
}

macro_rules! p_int {
    ($name:literal, $aliases:expr, $field:ident, $min:expr, $max:expr, $imm:expr) => {
        Param {
            name: $name,
            aliases: $aliases,
            kind: Kind::Int {
                min: $min,
                max: $max,
            },
            immutable: $imm,
            get: |c| c.$field.to_string(),
            set: |c, v| {
                if let Ok(n) = v.parse() {
                    c.$field = n;
                }
            },
        }
    };
}
macro_rules! p_mem {
    ($name:literal, $field:ident, $max:expr) => {
        Param {
            name: $name,
            aliases: &[],
            kind: Kind::Memory { max: $max },
            immutable: false,
            get: |c| c.$field.to_string(),
            set: |c, v| {
                if let Some(n) = parse_memory(v) {
                    c.$field = n;
                }
            },
        }
    };
}
macro_rules! p_bool {
    ($name:literal, $field:ident, $imm:expr) => {
        Param {
            name: $name,
            aliases: &[],
            kind: Kind::Bool,
            immutable: $imm,
            get: |c| if c.$field { "yes".into() } else { "no".into() },
            set: |c, v| c.$field = v.eq_ignore_ascii_case("yes"),
        }
    };
}
macro_rules! p_enum {
    ($name:literal, $field:ident, $words:expr, $imm:expr) => {
        Param {
            name: $name,
            aliases: &[],
            kind: Kind::Enum($words),
            immutable: $imm,
            get: |c| c.$field.clone(),
            set: |c, v| c.$field = v.to_ascii_lowercase(),
        }
    };
}
macro_rules! p_text {
    ($name:literal, $field:ident, $imm:expr) => {
        Param {
            name: $name,
            aliases: &[],
            kind: Kind::Text,
            immutable: $imm,
            get: |c| c.$field.clone(),
            set: |c, v| c.$field = v.to_string(),
        }
    };
}

/// Every parameter Rostrum implements.
pub static PARAMS: &[Param] = &[
    Param {
        name: "bind",
        aliases: &[],
        kind: Kind::Text,
        immutable: false,
        get: |c| c.bind.join(" "),
        set: |c, v| c.bind = v.split_whitespace().map(str::to_string).collect(),
    },
    p_int!("port", &[], port, 0, 65535, true),
    p_bool!("protected-mode", protected_mode, false),
    Param {
        name: "requirepass",
        aliases: &[],
        kind: Kind::Text,
        immutable: false,
        get: |c| {
            c.requirepass
                .as_ref()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .unwrap_or_default()
        },
        set: |c, v| {
            c.requirepass = if v.is_empty() {
                None
            } else {
                Some(v.as_bytes().to_vec())
            }
        },
    },
    p_enum!(
        "loglevel",
        loglevel,
        &["debug", "verbose", "notice", "warning", "nothing"],
        false
    ),
    p_text!("logfile", logfile, true),
    p_int!("databases", &[], databases, 1, i32::MAX as i64, true),
    p_mem!("proto-max-bulk-len", proto_max_bulk_len, i64::MAX as u64),
    p_mem!(
        "client-query-buffer-limit",
        client_query_buffer_limit,
        i64::MAX as u64
    ),
    p_int!("maxclients", &[], maxclients, 1, u32::MAX as i64, false),
    p_int!("timeout", &[], timeout, 0, i32::MAX as i64, false),
    p_int!(
        "tcp-keepalive",
        &[],
        tcp_keepalive,
        0,
        i32::MAX as i64,
        false
    ),
    p_int!("hz", &[], hz, 0, i32::MAX as i64, false),
    p_int!(
        "slowlog-log-slower-than",
        &[],
        slowlog_log_slower_than,
        -1,
        i64::MAX,
        false
    ),
    p_int!("slowlog-max-len", &[], slowlog_max_len, 0, i64::MAX, false),
    p_int!(
        "latency-monitor-threshold",
        &[],
        latency_monitor_threshold,
        0,
        i64::MAX,
        false
    ),
    p_int!(
        "zset-max-listpack-entries",
        &["zset-max-ziplist-entries"],
        zset_max_listpack_entries,
        0,
        i64::MAX,
        false
    ),
    p_int!(
        "zset-max-listpack-value",
        &["zset-max-ziplist-value"],
        zset_max_listpack_value,
        0,
        i64::MAX,
        false
    ),
    p_int!(
        "set-max-intset-entries",
        &[],
        set_max_intset_entries,
        0,
        i64::MAX,
        false
    ),
    p_bool!("appendonly", appendonly, false),
    p_text!("appendfilename", appendfilename, true),
    p_enum!(
        "appendfsync",
        appendfsync,
        &["always", "everysec", "no"],
        false
    ),
    p_text!("dir", dir, false),
    p_text!("dbfilename", dbfilename, false),
    p_text!("save", save, false),
    p_mem!("maxmemory", maxmemory, i64::MAX as u64),
    p_enum!(
        "maxmemory-policy",
        maxmemory_policy,
        &[
            "volatile-lru",
            "volatile-lfu",
            "volatile-random",
            "volatile-ttl",
            "allkeys-lru",
            "allkeys-lfu",
            "allkeys-random",
            "noeviction"
        ],
        false
    ),
    p_int!(
        "busy-reply-threshold",
        &["lua-time-limit"],
        busy_reply_threshold,
        0,
        i64::MAX,
        false
    ),
    p_bool!("aof-load-truncated", aof_load_truncated, false),
    p_int!(
        "auto-aof-rewrite-percentage",
        &[],
        auto_aof_rewrite_percentage,
        0,
        i32::MAX as i64,
        false
    ),
    p_mem!(
        "auto-aof-rewrite-min-size",
        auto_aof_rewrite_min_size,
        i64::MAX as u64
    ),
    p_text!("notify-keyspace-events", notify_keyspace_events, false),
    p_bool!("daemonize", daemonize, true),
    p_enum!(
        "supervised",
        supervised,
        &["upstart", "systemd", "auto", "no"],
        true
    ),
    p_text!("pidfile", pidfile, true),
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

/// Checks `value` for `param`; the error is the text after `ERR ` that
/// CONFIG SET would give (without the parameter prefix).
pub fn validate(param: &Param, value: &str) -> Result<(), String> {
    match param.kind {
        Kind::Bool => {
            if value.eq_ignore_ascii_case("yes") || value.eq_ignore_ascii_case("no") {
                Ok(())
            } else {
                Err("argument must be 'yes' or 'no'".into())
            }
        }
        Kind::Int { min, max } => match value.parse::<i64>() {
            Ok(n) if n >= min && n <= max => Ok(()),
            Ok(_) => Err(format!(
                "argument must be between {min} and {max} inclusive"
            )),
            Err(_) => Err("argument couldn't be parsed into an integer".into()),
        },
        Kind::Memory { max } => match parse_memory(value) {
            Some(n) if n <= max => Ok(()),
            Some(_) => Err(format!("argument must be between 0 and {max} inclusive")),
            None => Err("argument must be a memory value".into()),
        },
        Kind::Enum(words) => {
            if words.iter().any(|w| w.eq_ignore_ascii_case(value)) {
                Ok(())
            } else {
                Err("argument(s) must be one of the following: ".to_string() + &words.join(", "))
            }
        }
        Kind::Text => Ok(()),
    }
}

impl Config {
    /// Applies one `name value...` setting (config file line or command
    /// line), validating it.
    pub fn apply(&mut self, name: &str, value: &str) -> Result<(), String> {
        let param = find(name)
            .ok_or_else(|| format!("Bad directive or wrong number of arguments: '{name}'"))?;
        validate(param, value).map_err(|e| format!("'{name}' {e}"))?;
        (param.set)(self, value);
        Ok(())
    }

    /// Reads a redis.conf-style file: `name value ...` lines, `#` comments.
    /// An unknown name or bad value is an error naming the line.
    pub fn load_file(&mut self, path: &str) -> Result<(), String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("Fatal error, can't open config file '{path}': {e}"))?;
        for (no, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let words = crate::protocol::request::split_args(line.as_bytes()).ok_or_else(|| {
                config_error(path, no + 1, raw, "Unbalanced quotes in configuration line")
            })?;
            let Some((name, rest)) = words.split_first() else {
                continue;
            };
            let name = String::from_utf8_lossy(name).into_owned();
            let value = rest
                .iter()
                .map(|w| String::from_utf8_lossy(w).into_owned())
                .collect::<Vec<_>>()
                .join(" ");
            self.apply(&name, &value)
                .map_err(|e| config_error(path, no + 1, raw, &e))?;
        }
        Ok(())
    }

    /// The file CONFIG REWRITE writes: every parameter that differs from
    /// its default.
    pub fn render_changed(&self) -> String {
        let def = Config::default();
        let mut out = String::new();
        for p in PARAMS {
            let v = (p.get)(self);
            if v != (p.get)(&def) {
                let _ = writeln!(out, "{} {}", p.name, quote(&v));
            }
        }
        out
    }
}

fn quote(v: &str) -> String {
    if !v.is_empty()
        && v.bytes()
            .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\'')
    {
        v.to_string()
    } else {
        format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""))
    }
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
    fn aliases() {
        let mut c = Config::default();
        c.apply("zset-max-ziplist-entries", "5").unwrap();
        assert_eq!(c.zset_max_listpack_entries, 5);
        assert!(c.apply("appendfsync", "sometimes").is_err());
    }
}
