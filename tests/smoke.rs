//! The server starts, answers through the `redis` crate, and stops.
mod common;

use common::TestServer;

#[test]
fn ping_set_get_through_redis_crate() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    let v: String = redis::cmd("GET").arg("k").query(&mut c).unwrap();
    assert_eq!(v, "v");
    let n: i64 = redis::cmd("DEL")
        .arg("k")
        .arg("nope")
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 1);
    let err = redis::cmd("NOSUCH")
        .arg("x")
        .query::<()>(&mut c)
        .unwrap_err();
    assert!(err.to_string().contains("unknown command"), "{err}");
}
