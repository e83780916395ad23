//! ACL through a real client: command categories compared with a real
//! redis-server 7.0 (skipped without one, failed under `CI`), ACL CAT, and
//! the LB.* family's own `@leaderboard`.

mod common;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::redis_server::RedisServer;
use common::{cmd, err, q, TestServer};

/// Every command's and subcommand's ACL categories, from COMMAND.
fn categories(c: &mut redis::Connection) -> BTreeMap<String, Vec<String>> {
    fn text(v: &redis::Value) -> String {
        match v {
            redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            redis::Value::SimpleString(s) => s.clone(),
            other => format!("{other:?}"),
        }
    }
    fn items(v: &redis::Value) -> &[redis::Value] {
        match v {
            redis::Value::Array(a) | redis::Value::Set(a) => a,
            _ => &[],
        }
    }
    fn walk(e: &redis::Value, out: &mut BTreeMap<String, Vec<String>>) {
        let e = items(e);
        let (Some(name), Some(cats)) = (e.first(), e.get(6)) else {
            return;
        };
        out.insert(text(name), items(cats).iter().map(text).collect());
        if let Some(subs) = e.get(9) {
            for s in items(subs) {
                walk(s, out);
            }
        }
    }
    let all: redis::Value = redis::cmd("COMMAND").query(c).expect("COMMAND");
    let mut out = BTreeMap::new();
    for e in items(&all) {
        walk(e, &mut out);
    }
    out
}

/// COMMAND INFO's categories equal redis-server 7.0's for every command and
/// subcommand both have.
#[test]
fn categories_equal_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let want = categories(&mut redis.conn());
    let srv = TestServer::start(&[]);
    let got = categories(&mut srv.conn());
    let mut common = 0;
    let mut differ = Vec::new();
    for (name, cats) in &got {
        if let Some(w) = want.get(name) {
            common += 1;
            if w != cats {
                differ.push(format!("{name}: redis {w:?}, rostrum {cats:?}"));
            }
        }
    }
    assert!(common > 250, "only {common} commands in common");
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

/// LB.* commands are @leaderboard, and @read or @write by their flags; ACL
/// CAT lists the categories and a category's commands.
#[test]
fn leaderboard_category_and_acl_cat() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let cats = categories(&mut c);
    let top = cats.get("lb.top").cloned().unwrap_or_default();
    assert!(top.contains(&"@leaderboard".into()) && top.contains(&"@read".into()));
    let submit = cats.get("lb.submit").cloned().unwrap_or_default();
    assert!(submit.contains(&"@leaderboard".into()) && submit.contains(&"@write".into()));
    for (name, cats) in &cats {
        assert_eq!(
            name.starts_with("lb."),
            cats.contains(&"@leaderboard".to_string()),
            "{name}"
        );
    }
    let all: Vec<String> = redis::cmd("ACL").arg("CAT").query(&mut c).expect("ACL CAT");
    assert_eq!(all.first().map(String::as_str), Some("keyspace"));
    assert!(all.contains(&"leaderboard".to_string()));
    let mut lb: Vec<String> = redis::cmd("ACL")
        .arg("CAT")
        .arg("leaderboard")
        .query(&mut c)
        .expect("ACL CAT leaderboard");
    lb.sort();
    let mut want: Vec<String> = cats
        .keys()
        .filter(|n| n.starts_with("lb.") && !n.contains('|'))
        .cloned()
        .collect();
    want.sort();
    assert_eq!(lb, want);
    assert!(err(&mut c, &["ACL", "CAT", "nosuch"]).contains("Unknown category 'nosuch'"));
    assert_eq!(q(&mut c, &["ACL", "WHOAMI"]), "default");
}

fn conn_as(srv: &TestServer, user: &str, pass: &str) -> redis::Connection {
    let mut c = srv.conn();
    assert_eq!(q(&mut c, &["AUTH", user, pass]), "OK");
    c
}

/// A score service (`~lb:* +@leaderboard`), a read-only front (`%R~lb:*
/// +@read`) and an admin: allowed and refused commands, keys read vs
/// written, channels, MULTI and scripts, ACL LOG, and a deleted user's
/// clients disconnected.
#[test]
fn users_for_a_game_backend() {
    let srv = TestServer::start(&[]);
    let mut admin = srv.conn();
    for rules in [
        &[
            "scores",
            "on",
            ">s3cret",
            "~lb:*",
            "+@leaderboard",
            "&scores",
        ][..],
        &[
            "web", "on", ">w3b", "%R~lb:*", "+@read", "+eval", "+multi", "+exec",
        ][..],
    ] {
        let mut args = vec!["ACL", "SETUSER"];
        args.extend_from_slice(rules);
        assert_eq!(q(&mut admin, &args), "OK");
    }
    let mut scores = conn_as(&srv, "scores", "s3cret");
    assert!(err(&mut scores, &["ACL", "WHOAMI"]).contains("no permissions"));
    let _ = q(&mut scores, &["LB.SUBMIT", "lb:season", "ada", "10"]);
    assert!(err(&mut scores, &["LB.SUBMIT", "other", "ada", "10"])
        .contains("no permissions to access one of the keys"));
    assert!(
        err(&mut scores, &["GET", "lb:season"]).contains("no permissions to run the 'get' command")
    );

    let mut web = conn_as(&srv, "web", "w3b");
    let _ = q(&mut web, &["LB.TOP", "lb:season", "3"]);
    assert!(err(&mut web, &["LB.SUBMIT", "lb:season", "bob", "1"])
        .contains("no permissions to run the 'lb.submit' command"));
    assert!(err(&mut web, &["GET", "secret"]).contains("no permissions to access one of the keys"));
    assert!(err(
        &mut web,
        &["EVAL", "return redis.call('set','lb:x','1')", "0"]
    )
    .contains("can't run this command or subcommand"));
    let log = q(&mut admin, &["ACL", "LOG"]);
    assert!(log.contains("web") && log.contains("scores"), "{log}");
    assert!(q(&mut admin, &["CLIENT", "LIST"]).contains("user=web"));

    // Deleting a user disconnects its clients.
    assert_eq!(q(&mut admin, &["ACL", "DELUSER", "web"]), "1");
    std::thread::sleep(Duration::from_millis(200));
    assert!(cmd(&["PING"]).query::<redis::Value>(&mut web).is_err());
    assert!(err(&mut admin, &["AUTH", "web", "w3b"]).contains("WRONGPASS"));
}

/// One step of a redis-cli session: a redis-cli invocation (optionally
/// logged in, optionally with commands on its standard input), or a
/// change to the server's aclfile.
enum Step {
    Cli {
        login: Option<(&'static str, &'static str)>,
        args: &'static [&'static str],
        stdin: Option<&'static str>,
    },
    /// Appends a line to the aclfile (then ACL LOAD reads it).
    AppendAclfile(&'static str),
    /// The aclfile's text.
    ReadAclfile,
}

fn cli(args: &'static [&'static str]) -> Step {
    Step::Cli {
        login: None,
        args,
        stdin: None,
    }
}

fn cli_as(user: &'static str, pass: &'static str, args: &'static [&'static str]) -> Step {
    Step::Cli {
        login: Some((user, pass)),
        args,
        stdin: None,
    }
}

/// (Rules are categories or one single command per user: redis-server 7.0
/// lists a user's single commands in its command table's hash order, which
/// changes from run to run.)
///
/// The users of a game backend set up, used and saved through redis-cli:
/// a score service, a read-only web front and an admin, selectors and a
/// write-only pattern, as redis-cli would type them.
fn redis_cli_session() -> Vec<Step> {
    use Step::{AppendAclfile, ReadAclfile};
    vec![
        cli(&[
            "ACL",
            "SETUSER",
            "scores",
            "on",
            ">s3cret",
            "~lb:*",
            "&scores",
            "+@sortedset",
            "+@pubsub",
        ]),
        cli(&[
            "ACL",
            "SETUSER",
            "web",
            "on",
            ">w3b",
            "%R~lb:*",
            "&news:*",
            "+@read",
            "+@transaction",
        ]),
        cli(&[
            "ACL",
            "SETUSER",
            "admin",
            "on",
            ">adm1n",
            "~*",
            "&*",
            "+@all",
            "-flushall",
        ]),
        cli(&[
            "ACL",
            "SETUSER",
            "sel",
            "on",
            ">p",
            "~a:*",
            "+get",
            "(~b:* +set)",
        ]),
        cli(&["ACL", "SETUSER", "wo", "on", ">p", "%W~w:*", "+@all"]),
        cli(&["ACL", "SETUSER", "broken", "+nosuch"]),
        cli(&["ACL", "SETUSER", "broken", "%X~k"]),
        cli(&["ACL", "USERS"]),
        // The score service: its board and channel, nothing else.
        cli_as("scores", "s3cret", &["ZADD", "lb:season", "10", "ada"]),
        cli_as("scores", "s3cret", &["ZINCRBY", "lb:season", "5", "ada"]),
        cli_as("scores", "s3cret", &["ZADD", "other", "1", "x"]),
        cli_as("scores", "s3cret", &["GET", "lb:season"]),
        cli_as("scores", "s3cret", &["PUBLISH", "scores", "hi"]),
        cli_as("scores", "s3cret", &["PUBLISH", "news:1", "hi"]),
        cli_as("scores", "s3cret", &["ACL", "WHOAMI"]),
        cli_as("scores", "s3cret", &["CONFIG", "GET", "port"]),
        // The web front reads boards and never writes.
        cli_as(
            "web",
            "w3b",
            &["ZREVRANGE", "lb:season", "0", "-1", "WITHSCORES"],
        ),
        cli_as("web", "w3b", &["ZSCORE", "lb:season", "ada"]),
        cli_as("web", "w3b", &["ZADD", "lb:season", "1", "bob"]),
        cli_as("web", "w3b", &["GET", "secret"]),
        cli_as("web", "w3b", &["PUBLISH", "news:1", "hi"]),
        cli_as("web", "w3b", &["ACL", "WHOAMI"]),
        Step::Cli {
            login: Some(("web", "w3b")),
            args: &[],
            stdin: Some("MULTI\nZSCORE lb:season ada\nGET secret\nZADD lb:season 1 x\nEXEC\n"),
        },
        // The admin may do everything but FLUSHALL.
        cli_as("admin", "adm1n", &["SET", "secret", "v"]),
        cli_as("admin", "adm1n", &["FLUSHALL"]),
        // Selectors and a write-only pattern.
        cli_as("sel", "p", &["GET", "a:1"]),
        cli_as("sel", "p", &["SET", "b:1", "x"]),
        cli_as("sel", "p", &["GET", "b:1"]),
        cli_as("sel", "p", &["SET", "a:1", "x"]),
        cli_as("wo", "p", &["SET", "w:1", "x"]),
        cli_as("wo", "p", &["GET", "w:1"]),
        cli_as("wo", "p", &["LPUSH", "w:l", "x"]),
        cli_as("wo", "p", &["LPOP", "w:l"]),
        // Logging in: a wrong password, an unknown user, a disabled one,
        // AUTH typed as a command.
        cli_as("web", "nope", &["ACL", "WHOAMI"]),
        cli_as("nobody", "x", &["ACL", "WHOAMI"]),
        cli(&["ACL", "SETUSER", "wo", "off"]),
        cli_as("wo", "p", &["ACL", "WHOAMI"]),
        cli(&["AUTH", "web", "wrong"]),
        cli(&["AUTH", "web", "w3b", "extra"]),
        cli(&["AUTH", "onlypassword"]),
        // What the admin sees.
        cli(&["ACL", "DRYRUN", "web", "ZADD", "lb:x", "1", "a"]),
        cli(&["ACL", "DRYRUN", "web", "GET", "secret"]),
        cli(&["ACL", "DRYRUN", "web", "GET", "lb:x"]),
        cli(&["ACL", "GETUSER", "web"]),
        cli(&["ACL", "GETUSER", "sel"]),
        cli(&["ACL", "LIST"]),
        cli(&["ACL", "LOG"]),
        cli(&["ACL", "LOG", "50"]),
        cli(&["ACL", "LOG", "2"]),
        cli(&["ACL", "LOG", "RESET"]),
        cli(&["ACL", "LOG"]),
        // ACL SAVE writes the aclfile; ACL LOAD reads an edited one, and
        // refuses a broken one whole.
        cli(&["ACL", "SAVE"]),
        ReadAclfile,
        AppendAclfile("user archiver on >arch ~season:* +@read +@write"),
        cli(&["ACL", "LOAD"]),
        cli(&["ACL", "USERS"]),
        cli_as("archiver", "arch", &["SET", "season:1", "x"]),
        cli_as("archiver", "arch", &["SET", "lb:1", "x"]),
        AppendAclfile("user bad on +nosuch"),
        cli(&["ACL", "LOAD"]),
        cli(&["ACL", "USERS"]),
    ]
}

/// What redis-cli printed (stdout, then stderr, then its exit status), with
/// ACL LOG's age and client line (which differ from run to run) blanked.
fn run_cli(port: u16, login: Option<(&str, &str)>, args: &[&str], stdin: Option<&str>) -> String {
    use std::io::Write;
    let mut cmd = Command::new("timeout");
    cmd.args(["10", "redis-cli", "--no-raw", "-p", &port.to_string()]);
    if let Some((user, pass)) = login {
        cmd.args(["--user", user, "--pass", pass]);
    }
    let mut child = cmd
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("redis-cli");
    if let Some(mut input) = child.stdin.take() {
        let _ = input.write_all(stdin.unwrap_or("").as_bytes());
    }
    let out = child.wait_with_output().expect("redis-cli output");
    let mut text = String::new();
    let mut blank_next = false;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if blank_next {
            let cut = line.find(") ").map_or(0, |i| i + 2);
            text.push_str(&line[..cut]);
            text.push_str("<varies>\n");
        } else {
            text.push_str(line);
            text.push('\n');
        }
        blank_next = line.ends_with("\"age-seconds\"") || line.ends_with("\"client-info\"");
    }
    format!(
        "{text}[stderr] {}[status] {:?}",
        String::from_utf8_lossy(&out.stderr),
        out.status.code()
    )
}

/// Runs the session against the server on `port` whose aclfile is
/// `aclfile`; one output per step.
fn run_session(port: u16, aclfile: &std::path::Path) -> Vec<String> {
    redis_cli_session()
        .iter()
        .map(|step| match step {
            Step::Cli { login, args, stdin } => run_cli(port, *login, args, *stdin),
            Step::AppendAclfile(line) => {
                let mut text = std::fs::read_to_string(aclfile).expect("read aclfile");
                if !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(line);
                text.push('\n');
                std::fs::write(aclfile, text).expect("write aclfile");
                String::new()
            }
            Step::ReadAclfile => std::fs::read_to_string(aclfile).expect("read aclfile"),
        })
        .collect()
}

fn describe(step: &Step) -> String {
    match step {
        Step::Cli { login, args, stdin } => format!(
            "redis-cli{} {}{}",
            login.map_or(String::new(), |(u, p)| format!(" --user {u} --pass {p}")),
            args.join(" "),
            stdin.map_or(String::new(), |s| format!(" <<< {s:?}"))
        ),
        Step::AppendAclfile(line) => format!("append {line:?} to the aclfile"),
        Step::ReadAclfile => "the aclfile".into(),
    }
}

/// The game backend's users through the real redis-cli (`--user --pass`,
/// commands on stdin, ACL SETUSER/LOG/SAVE/LOAD typed at it): every line it
/// prints, NOPERM and AUTH errors included, is what it prints against
/// redis-server 7.0 for the same session (skipped without one, failed under
/// `CI`); the key lines are also checked as text.
#[test]
fn redis_cli_session_matches_redis_server() {
    let installed = Command::new("redis-cli")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok();
    if !installed {
        assert!(
            std::env::var_os("CI").is_none_or(|v| v.is_empty()),
            "redis-cli is not installed"
        );
        eprintln!("redis-cli not installed: skipped");
        return;
    }
    let first = "user default on nopass ~* &* +@all\n";
    let rdir = common::temp_dir("acl-cli-redis");
    std::fs::write(rdir.join("users.acl"), first).expect("aclfile");
    let sdir = common::temp_dir("acl-cli-rostrum");
    std::fs::write(sdir.join("users.acl"), first).expect("aclfile");
    let srv = TestServer::start_in(sdir.clone(), &["--aclfile", "users.acl"]);
    let got = run_session(srv.port, &sdir.join("users.acl"));
    let steps = redis_cli_session();
    let at = |want: &str| {
        let i = steps
            .iter()
            .position(|s| describe(s) == want)
            .unwrap_or_else(|| panic!("no step {want}"));
        got[i].as_str()
    };
    let warn = "Warning: Using a password with '-a' or '-u' option on the command line interface may not be safe.\n";
    let key =
        "(error) NOPERM this user has no permissions to access one of the keys used as arguments\n";
    assert_eq!(
        at("redis-cli --user scores --pass s3cret ZADD other 1 x"),
        format!("{key}[stderr] {warn}[status] Some(0)")
    );
    assert!(at("redis-cli --user scores --pass s3cret GET lb:season")
        .starts_with("(error) NOPERM this user has no permissions to run the 'get' command\n"));
    assert!(at("redis-cli --user scores --pass s3cret PUBLISH news:1 hi").starts_with(
        "(error) NOPERM this user has no permissions to access one of the channels used as arguments\n"
    ));
    assert!(at("redis-cli --user web --pass w3b ZADD lb:season 1 bob")
        .starts_with("(error) NOPERM this user has no permissions to run the 'zadd' command\n"));
    assert!(at("redis-cli --user wo --pass p GET w:1").starts_with(key));
    assert!(at("redis-cli --user sel --pass p SET b:1 x").starts_with("OK\n"));
    assert!(at("redis-cli --user web --pass nope ACL WHOAMI")
        .contains("AUTH failed: WRONGPASS invalid username-password pair or user is disabled."));
    let log = at("redis-cli ACL LOG 50");
    for want in [
        "\"auth\"",
        "\"key\"",
        "\"channel\"",
        "\"command\"",
        "\"multi\"",
    ] {
        assert!(log.contains(want), "{want} in {log}");
    }
    assert!(at("the aclfile").contains("user web on #"));
    assert!(at("redis-cli --user archiver --pass arch SET season:1 x").starts_with("OK\n"));

    let Some(redis) = RedisServer::start_with(Some(&rdir), None, &["--aclfile", "users.acl"])
    else {
        return;
    };
    let want = run_session(redis.port, &rdir.join("users.acl"));
    let differ: Vec<String> = steps
        .iter()
        .zip(want.iter().zip(&got))
        .filter(|(_, (w, g))| w != g)
        .map(|(s, (w, g))| format!("{}:\n  redis-server:\n{w}\n  rostrum:\n{g}", describe(s)))
        .collect();
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}
