//! Keyspace notifications through the `redis` crate: the events a
//! leaderboard app listens for (ZINCRBY, SETBIT, EXPIRE, expiry), the
//! setting given at start-up, events from every database, lazy expiry by a
//! write, and nothing at all while the setting is empty. The exact event
//! stream of every write command is compared with redis-server by
//! `redis-compat/cases/notify.txt`.
mod common;

use std::time::Duration;

use common::TestServer;

fn config_set(c: &mut redis::Connection, value: &str) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("notify-keyspace-events")
        .arg(value)
        .query(c)
        .expect("CONFIG SET");
}

/// The next `(channel, payload)` on a subscription.
fn next(sub: &mut redis::PubSub<'_>) -> (String, String) {
    let m = sub.get_message().expect("a message within the timeout");
    (
        m.get_channel_name().to_string(),
        m.get_payload().expect("a text payload"),
    )
}

fn pair(channel: &str, payload: &str) -> (String, String) {
    (channel.to_string(), payload.to_string())
}

#[test]
fn board_events_arrive_in_order_with_expiry() {
    let srv = TestServer::start(&["--config", "notify-keyspace-events=KEA"]);
    let mut c = srv.conn();
    let mut sub_conn = srv.conn();
    let mut sub = sub_conn.as_pubsub();
    sub.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    sub.psubscribe("__keyspace@*__:board:*").unwrap();
    let _: f64 = redis::cmd("ZINCRBY")
        .arg("board:1")
        .arg(5)
        .arg("alice")
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("SETBIT")
        .arg("board:active")
        .arg(3)
        .arg(1)
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("EXPIRE")
        .arg("board:1")
        .arg(100)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("board:flash")
        .arg(1)
        .arg("PX")
        .arg(30)
        .query(&mut c)
        .unwrap();
    // Another database: its own channel.
    let _: () = redis::cmd("SELECT").arg(5).query(&mut c).unwrap();
    let _: i64 = redis::cmd("ZADD")
        .arg("board:5")
        .arg(1)
        .arg("bob")
        .query(&mut c)
        .unwrap();
    let got: Vec<(String, String)> = (0..7).map(|_| next(&mut sub)).collect();
    assert_eq!(
        got,
        [
            pair("__keyspace@0__:board:1", "zincr"),
            pair("__keyspace@0__:board:active", "setbit"),
            pair("__keyspace@0__:board:1", "expire"),
            pair("__keyspace@0__:board:flash", "set"),
            pair("__keyspace@0__:board:flash", "expire"),
            pair("__keyspace@5__:board:5", "zadd"),
            // The active expiry cycle removes it within a few cycles.
            pair("__keyspace@0__:board:flash", "expired"),
        ]
    );
}

#[test]
fn a_write_to_an_expired_key_raises_expired_first() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    config_set(&mut c, "Egx$");
    // Active expiry off (hz 1 leaves it seconds away): the write finds it.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("hz")
        .arg(1)
        .query(&mut c)
        .unwrap();
    let mut sub_conn = srv.conn();
    let mut sub = sub_conn.as_pubsub();
    sub.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    sub.psubscribe("__keyevent@0__:*").unwrap();
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg(1)
        .arg("PX")
        .arg(1)
        .query(&mut c)
        .unwrap();
    assert_eq!(next(&mut sub), pair("__keyevent@0__:set", "k"));
    assert_eq!(next(&mut sub), pair("__keyevent@0__:expire", "k"));
    std::thread::sleep(Duration::from_millis(20));
    let _: () = redis::cmd("SET").arg("k").arg(2).query(&mut c).unwrap();
    let first = next(&mut sub);
    // Either the cycle got there first or the SET found it expired: the
    // expiry is announced before the new value either way.
    assert_eq!(first, pair("__keyevent@0__:expired", "k"));
    assert_eq!(next(&mut sub), pair("__keyevent@0__:set", "k"));
}

#[test]
fn no_events_while_the_setting_is_empty() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let mut sub_conn = srv.conn();
    let mut sub = sub_conn.as_pubsub();
    sub.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    sub.psubscribe("__key*__:*").unwrap();
    let _: () = redis::cmd("SET").arg("a").arg(1).query(&mut c).unwrap();
    let _: i64 = redis::cmd("DEL").arg("a").query(&mut c).unwrap();
    assert!(sub.get_message().is_err(), "no event may arrive");
    // Turned on at run time, the next write is announced.
    config_set(&mut c, "E$");
    let _: () = redis::cmd("SET").arg("a").arg(1).query(&mut c).unwrap();
    sub.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(next(&mut sub), pair("__keyevent@0__:set", "a"));
}
