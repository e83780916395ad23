//! MULTI / EXEC / DISCARD / WATCH through the redis crate and raw sockets.
mod common;

use common::{roundtrip, TestServer};

#[test]
fn atomic_pipeline_runs_in_order() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let (a, b): (String, i64) = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("k")
        .arg("v")
        .ignore()
        .cmd("GET")
        .arg("k")
        .cmd("DEL")
        .arg("k")
        .query(&mut c)
        .unwrap();
    assert_eq!((a.as_str(), b), ("v", 1));
}

#[test]
fn watch_aborts_when_another_client_writes() {
    let srv = TestServer::start(&[]);
    let mut c1 = srv.conn();
    let mut c2 = srv.conn();
    let _: () = redis::cmd("SET").arg("w").arg("1").query(&mut c1).unwrap();
    let _: () = redis::cmd("WATCH").arg("w").query(&mut c1).unwrap();
    let _: () = redis::cmd("SET").arg("w").arg("2").query(&mut c2).unwrap();
    let _: () = redis::cmd("MULTI").query(&mut c1).unwrap();
    let _: () = redis::cmd("SET").arg("w").arg("3").query(&mut c1).unwrap();
    let r: Option<Vec<String>> = redis::cmd("EXEC").query(&mut c1).unwrap();
    assert_eq!(r, None);
    let v: String = redis::cmd("GET").arg("w").query(&mut c1).unwrap();
    assert_eq!(v, "2");
    // Without interference the next transaction goes through.
    let _: () = redis::cmd("WATCH").arg("w").query(&mut c1).unwrap();
    let _: () = redis::cmd("MULTI").query(&mut c1).unwrap();
    let _: () = redis::cmd("SET").arg("w").arg("3").query(&mut c1).unwrap();
    let r: Option<Vec<String>> = redis::cmd("EXEC").query(&mut c1).unwrap();
    assert_eq!(r, Some(vec!["OK".to_string()]));
}

#[test]
fn watched_key_expiring_aborts() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let _: () = redis::cmd("SET")
        .arg("e")
        .arg("1")
        .arg("PX")
        .arg("50")
        .query(&mut c)
        .unwrap_or(());
    let _: () = redis::cmd("WATCH").arg("e").query(&mut c).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(120));
    let _: () = redis::cmd("MULTI").query(&mut c).unwrap();
    let _: () = redis::cmd("PING").query(&mut c).unwrap();
    let r: Option<Vec<String>> = redis::cmd("EXEC").query(&mut c).unwrap();
    let exists: i64 = redis::cmd("EXISTS").arg("e").query(&mut c).unwrap();
    assert_eq!(exists, 0);
    assert_eq!(r, None, "a watched key that expired must abort EXEC");
}

#[test]
fn errors_match_redis() {
    let srv = TestServer::start(&[]);
    let mut s = srv.raw();
    let cases: &[(&[u8], &[u8])] = &[
        (b"EXEC\r\n", b"-ERR EXEC without MULTI\r\n"),
        (b"DISCARD\r\n", b"-ERR DISCARD without MULTI\r\n"),
        (b"MULTI\r\n", b"+OK\r\n"),
        (b"MULTI\r\n", b"-ERR MULTI calls can not be nested\r\n"),
        (
            b"WATCH x\r\n",
            b"-ERR WATCH inside MULTI is not allowed\r\n",
        ),
        (b"SET a 1\r\n", b"+QUEUED\r\n"),
        (
            b"NOSUCH\r\n",
            b"-ERR unknown command 'NOSUCH', with args beginning with: \r\n",
        ),
        (
            b"GET\r\n",
            b"-ERR wrong number of arguments for 'get' command\r\n",
        ),
        (
            b"EXEC\r\n",
            b"-EXECABORT Transaction discarded because of previous errors.\r\n",
        ),
        (b"GET a\r\n", b"$-1\r\n"),
        (b"MULTI\r\n", b"+OK\r\n"),
        (b"SET a 1\r\n", b"+QUEUED\r\n"),
        (b"DISCARD\r\n", b"+OK\r\n"),
        (b"MULTI\r\n", b"+OK\r\n"),
        (b"SET a 1\r\n", b"+QUEUED\r\n"),
        (b"INCR a\r\n", b"+QUEUED\r\n"),
        (b"SET b x\r\n", b"+QUEUED\r\n"),
        (b"EXEC\r\n", b"*3\r\n+OK\r\n:2\r\n+OK\r\n"),
    ];
    for (req, want) in cases {
        let got = roundtrip(&mut s, req, want.len());
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(want),
            "for {}",
            String::from_utf8_lossy(req)
        );
    }
}
