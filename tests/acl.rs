//! ACL through a real client: command categories compared with a real
//! redis-server 7.0 (skipped without one, failed under `CI`), ACL CAT, and
//! the LB.* family's own `@leaderboard`.

mod common;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

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

/// A redis-server on a free port, stopped (by its PID) on drop.
struct RedisServer {
    child: std::process::Child,
    port: u16,
}

impl RedisServer {
    /// None (skipped) when redis-server is not installed; a failure under
    /// `CI`.
    fn start() -> Option<RedisServer> {
        let installed = Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        if !installed {
            assert!(
                std::env::var_os("CI").is_none_or(|v| v.is_empty()),
                "redis-server is not installed"
            );
            eprintln!("redis-server not installed: skipped");
            return None;
        }
        let port = common::free_port();
        let mut child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server");
        assert!(common::wait_ready(port, &mut child), "redis-server");
        Some(RedisServer { child, port })
    }

    fn conn(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .expect("client")
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("connect")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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
