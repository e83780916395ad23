//! Who may connect and where: `protected-mode` as Redis 7.0 applies it
//! (a client from a non-loopback address refused with Redis's -DENIED line
//! while the default user has `nopass`; exercised through this host's own
//! non-loopback address when it has one), and `port` / `tls-port` moved by
//! CONFIG SET without a restart (redis-cli `--tls`, the redis crate).

mod common;

use std::io::{Read, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::certs::Pki;
use common::{err, free_port, q, TestServer};

const DENIED_START: &str = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface.";

/// This host's address on the interface a packet out would take (no
/// packet is sent), when it is not loopback.
fn outside_address() -> Option<IpAddr> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("192.0.2.1:9").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// What a client connecting to `ip:port` gets for PING: the first line.
fn ping_line(ip: IpAddr, port: u16) -> String {
    let mut s = TcpStream::connect((ip, port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let _ = s.write_all(b"PING\r\n");
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.ends_with(b"\r\n") {
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    String::from_utf8_lossy(&buf).trim_end().to_string()
}

#[test]
fn protected_mode_refuses_outside_clients_without_a_password() {
    let outside = outside_address();
    let bind = match outside {
        Some(ip) => format!("127.0.0.1 {ip}"),
        None => "127.0.0.1".to_string(),
    };
    let srv = TestServer::start(&["--bind", &bind]);
    let mut c = srv.conn();
    assert_eq!(
        q(&mut c, &["CONFIG", "GET", "protected-mode"]),
        "[protected-mode yes]"
    );
    let lo: IpAddr = "127.0.0.1".parse().expect("ip");
    assert_eq!(ping_line(lo, srv.port), "+PONG");
    let Some(ip) = outside else {
        eprintln!("no non-loopback address on this host: only loopback checked");
        return;
    };
    // The default user has nopass: refused with Redis's line, and closed.
    let line = ping_line(ip, srv.port);
    assert!(line.starts_with(DENIED_START), "{line}");
    assert!(
        line.ends_with("accepting connections from the outside."),
        "{line}"
    );
    let info = common::info(&mut c, "stats");
    assert_eq!(
        info.get("rejected_connections").map(String::as_str),
        Some("1")
    );
    // A password (requirepass): served, and asked to authenticate.
    assert_eq!(q(&mut c, &["CONFIG", "SET", "requirepass", "pw"]), "OK");
    assert!(ping_line(ip, srv.port).starts_with("-NOAUTH"));
    // ACL: nopass again refuses; a password given by ACL serves (Redis 7.0
    // looks at the default user, not at requirepass).
    assert_eq!(q(&mut c, &["ACL", "SETUSER", "default", "nopass"]), "OK");
    assert!(ping_line(ip, srv.port).starts_with("-DENIED"));
    assert_eq!(
        q(&mut c, &["ACL", "SETUSER", "default", "resetpass", ">pw2"]),
        "OK"
    );
    assert!(ping_line(ip, srv.port).starts_with("-NOAUTH"));
    assert_eq!(q(&mut c, &["AUTH", "pw2"]), "OK");
    assert_eq!(q(&mut c, &["ACL", "SETUSER", "default", "nopass"]), "OK");
    // Protected mode off: everyone is served.
    assert_eq!(q(&mut c, &["CONFIG", "SET", "protected-mode", "no"]), "OK");
    assert_eq!(ping_line(ip, srv.port), "+PONG");
    assert_eq!(
        q(&mut c, &["CONFIG", "GET", "protected-mode"]),
        "[protected-mode no]"
    );
}

/// Whether a connection to `port` on loopback is refused, waiting up to
/// 2 s for the listener to close.
fn closed(port: u16) -> bool {
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        if TcpStream::connect(("127.0.0.1", port)).is_err() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn conn_to(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .expect("client")
        .get_connection_with_timeout(Duration::from_secs(5))
        .expect("connect")
}

#[test]
fn config_set_port_moves_the_listener() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let new_port = free_port();
    let p = new_port.to_string();
    assert_eq!(q(&mut c, &["CONFIG", "SET", "port", &p]), "OK");
    assert_eq!(q(&mut conn_to(new_port), &["PING"]), "PONG");
    assert!(closed(srv.port), "the old port still accepts");
    // Clients already connected stay.
    assert_eq!(q(&mut c, &["CONFIG", "GET", "port"]), format!("[port {p}]"));
    let info = common::info(&mut c, "server");
    assert_eq!(info.get("tcp_port"), Some(&p));
    // A port taken by someone else: Redis's error, the listener stays.
    let taken = TcpListener::bind(("127.0.0.1", 0)).expect("bind");
    let t = taken.local_addr().expect("addr").port().to_string();
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "port", &t]),
        "ResponseError: CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port. Check server logs."
    );
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "port", "70000"]),
        "ResponseError: CONFIG SET failed (possibly related to argument 'port') - argument must be between 0 and 65535 inclusive"
    );
    assert_eq!(q(&mut c, &["CONFIG", "GET", "port"]), format!("[port {p}]"));
    assert_eq!(q(&mut conn_to(new_port), &["PING"]), "PONG");
}

/// Runs redis-cli with `args` (20 s at most); its standard output and error.
fn cli(args: &[String]) -> String {
    let mut child = Command::new("redis-cli")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("redis-cli");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !matches!(child.try_wait(), Ok(Some(_))) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let out = child.wait_with_output().expect("redis-cli output");
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

fn cli_tls(pki: &Pki, port: u16, cmd: &[&str]) -> String {
    let mut a: Vec<String> = vec!["-p".into(), port.to_string(), "--tls".into()];
    for (flag, file) in [
        ("--cacert", "ca.crt"),
        ("--cert", "client.crt"),
        ("--key", "client.key"),
    ] {
        a.push(flag.into());
        a.push(pki.path(file));
    }
    a.extend(cmd.iter().map(|s| s.to_string()));
    cli(&a)
}

#[test]
fn config_set_tls_port_opens_moves_and_closes_it() {
    let pki = Pki::new();
    // Certificates configured, no TLS port yet.
    let mut args = pki.server_args(0);
    args.extend(["--protected-mode".into(), "no".into()]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let srv = TestServer::start(&refs);
    let mut c = srv.conn();
    let first = free_port();
    assert_eq!(
        q(&mut c, &["CONFIG", "SET", "tls-port", &first.to_string()]),
        "OK"
    );
    assert_eq!(cli_tls(&pki, first, &["PING"]).trim(), "PONG");
    let second = free_port();
    assert_eq!(
        q(&mut c, &["CONFIG", "SET", "tls-port", &second.to_string()]),
        "OK"
    );
    assert_eq!(cli_tls(&pki, second, &["PING"]).trim(), "PONG");
    assert!(closed(first), "the old TLS port still accepts");
    // Taken: Redis's error, the TLS listener stays where it was.
    let taken = TcpListener::bind(("127.0.0.1", 0)).expect("bind");
    let t = taken.local_addr().expect("addr").port().to_string();
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "tls-port", &t]),
        "ResponseError: CONFIG SET failed (possibly related to argument 'tls-port') - Unable to listen on this port. Check server logs."
    );
    assert_eq!(
        q(&mut c, &["CONFIG", "GET", "tls-port"]),
        format!("[tls-port {second}]")
    );
    assert_eq!(cli_tls(&pki, second, &["PING"]).trim(), "PONG");
    // 0 closes it; the plain port goes on.
    assert_eq!(q(&mut c, &["CONFIG", "SET", "tls-port", "0"]), "OK");
    assert!(closed(second), "the TLS port still accepts");
    assert_eq!(q(&mut srv.conn(), &["PING"]), "PONG");
}

#[test]
fn tls_port_without_certificates_is_refused() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let e = err(
        &mut c,
        &["CONFIG", "SET", "tls-port", &free_port().to_string()],
    );
    assert!(
        e.starts_with("ResponseError: CONFIG SET failed (possibly related to argument 'tls-port') - Unable to update TLS configuration."),
        "{e}"
    );
    assert_eq!(q(&mut c, &["CONFIG", "GET", "tls-port"]), "[tls-port 0]");
}
