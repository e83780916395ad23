//! TLS (issue 25): a server with `tls-port`, certificates made by the test
//! (tests/common/certs.rs), reached through redis-cli `--tls`,
//! redis-benchmark `--tls`, a rustls client of the test's own, and the
//! server's own outgoing side (`server::tls::connect`). Client
//! certificates required, optional and off; plaintext, untrusted and
//! expired certificates refused while good clients go on being served; a
//! certificate swapped by CONFIG SET used by the next connection; every
//! connection path (pipelining, Pub/Sub, MONITOR, blocking, output limits,
//! CLIENT KILL) over TLS. redis-py and ioredis over TLS: tests/clients.rs.
mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::certs::Pki;
use common::{free_port, TestServer};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A server with TLS on a port of its own beside its plain one, with
/// `extra` arguments.
fn start(pki: &Pki, extra: &[&str]) -> (TestServer, u16) {
    for _ in 0..5 {
        let tls_port = free_port();
        let mut args = pki.server_args(tls_port);
        args.extend(extra.iter().map(|s| s.to_string()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let server = TestServer::start(&refs);
        // The TLS port is bound with the plain one: it is ready too.
        if TcpStream::connect(("127.0.0.1", tls_port)).is_ok() {
            return (server, tls_port);
        }
    }
    panic!("no TLS server");
}

/// A client configuration trusting `ca`, presenting `cert` (a name in
/// the PKI: `client`, `expired`, ...) if given.
fn client_config(pki: &Pki, ca: &str, cert: Option<&str>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(pki.path(&format!("{ca}.crt"))).expect("ca") {
        roots.add(c.expect("ca cert")).expect("add ca");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let b = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots);
    let config = match cert {
        Some(name) => {
            let certs: Vec<CertificateDer<'static>> =
                CertificateDer::pem_file_iter(pki.path(&format!("{name}.crt")))
                    .expect("cert")
                    .map(|c| c.expect("cert"))
                    .collect();
            let key = PrivateKeyDer::from_pem_file(pki.path(&format!("{name}.key"))).expect("key");
            b.with_client_auth_cert(certs, key).expect("client cert")
        }
        None => b.with_no_client_auth(),
    };
    Arc::new(config)
}

/// Connects over TLS and finishes the handshake (client side: a server
/// that refuses the client's certificate says so on the first read).
fn connect(port: u16, config: Arc<rustls::ClientConfig>) -> std::io::Result<Tls> {
    let tcp = TcpStream::connect(("127.0.0.1", port))?;
    tcp.set_read_timeout(Some(Duration::from_secs(5)))?;
    let name = ServerName::try_from("localhost").expect("name");
    let conn = rustls::ClientConnection::new(config, name).map_err(std::io::Error::other)?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    while tls.conn.is_handshaking() {
        tls.conn.complete_io(&mut tls.sock)?;
    }
    Ok(tls)
}

/// Sends `bytes`, reads until `want` bytes came (or the connection ended).
fn roundtrip<S: Read + Write>(s: &mut S, bytes: &[u8], want: usize) -> std::io::Result<Vec<u8>> {
    s.write_all(bytes)?;
    s.flush()?;
    read_n(s, want)
}

fn read_n<S: Read>(s: &mut S, want: usize) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    while out.len() < want {
        match s.read(&mut buf)? {
            0 => break,
            n => out.extend_from_slice(&buf[..n]),
        }
    }
    Ok(out)
}

/// Whether a client with this configuration is served (PING answers).
fn served(port: u16, config: Arc<rustls::ClientConfig>) -> bool {
    match connect(port, config) {
        Ok(mut s) => roundtrip(&mut s, b"PING\r\n", 7).is_ok_and(|r| r == b"+PONG\r\n"),
        Err(_) => false,
    }
}

/// Runs redis-cli with `args`; its exit success and standard output.
fn cli(args: &[&str]) -> (bool, String) {
    let mut child = Command::new("redis-cli")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("redis-cli");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().expect("redis-cli output");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// redis-cli's TLS arguments for `port`, trusting `ca`, with `cert`.
fn tls_args(pki: &Pki, port: u16, ca: &str, cert: Option<&str>) -> Vec<String> {
    let mut a = vec![
        "-p".to_string(),
        port.to_string(),
        "--tls".into(),
        "--cacert".into(),
        pki.path(&format!("{ca}.crt")),
    ];
    if let Some(c) = cert {
        a.extend([
            "--cert".into(),
            pki.path(&format!("{c}.crt")),
            "--key".into(),
            pki.path(&format!("{c}.key")),
        ]);
    }
    a
}

fn cli_tls(pki: &Pki, port: u16, cert: Option<&str>, cmd: &[&str]) -> (bool, String) {
    let mut a = tls_args(pki, port, "ca", cert);
    a.extend(cmd.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = a.iter().map(String::as_str).collect();
    cli(&refs)
}

#[test]
fn redis_cli_with_client_certificates_required() {
    let pki = Pki::new();
    let (server, port) = start(&pki, &[]);
    let (ok, out) = cli_tls(&pki, port, Some("client"), &["PING"]);
    assert!(ok && out.trim() == "PONG", "{out}");
    let (_, out) = cli_tls(&pki, port, Some("client"), &["SET", "k", "over tls"]);
    assert_eq!(out.trim(), "OK");
    let (_, out) = cli_tls(&pki, port, Some("client"), &["GET", "k"]);
    assert_eq!(out.trim(), "over tls");
    // Refused: no certificate, an expired one, one from another CA.
    for cert in [None, Some("expired"), Some("untrusted")] {
        let (_, out) = cli_tls(&pki, port, cert, &["PING"]);
        assert!(!out.contains("PONG"), "{cert:?}: {out}");
    }
    // The plain port serves as before.
    let mut c = server.conn();
    let v: String = redis::cmd("GET").arg("k").query(&mut c).expect("GET");
    assert_eq!(v, "over tls");
}

#[test]
fn bad_clients_are_refused_while_good_ones_are_served() {
    let pki = Pki::new();
    let (_server, port) = start(&pki, &[]);
    let good = client_config(&pki, "ca", Some("client"));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Good clients keep working all along.
    let workers: Vec<_> = (0..3)
        .map(|i| {
            let good = good.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut s = connect(port, good.clone()).expect("good client");
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let cmd = format!("*2\r\n$4\r\nINCR\r\n$2\r\nc{i}\r\n");
                    let r = roundtrip(&mut s, cmd.as_bytes(), 3).expect("INCR over TLS");
                    assert!(r.starts_with(b":"), "{r:?}");
                    n += 1;
                    // And new good connections are accepted meanwhile.
                    if n.is_multiple_of(50) {
                        assert!(served(port, good.clone()), "new good client refused");
                    }
                }
                n
            })
        })
        .collect();
    for _ in 0..5 {
        // No certificate, expired, untrusted.
        assert!(!served(port, client_config(&pki, "ca", None)));
        assert!(!served(port, client_config(&pki, "ca", Some("expired"))));
        assert!(!served(port, client_config(&pki, "ca", Some("untrusted"))));
        // Plaintext RESP to the TLS port: no reply but a TLS alert, then
        // the connection closes.
        let mut raw = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        raw.set_read_timeout(Some(Duration::from_secs(5))).ok();
        let r = roundtrip(&mut raw, b"*1\r\n$4\r\nPING\r\n", usize::MAX).unwrap_or_default();
        assert!(!r.windows(4).any(|w| w == b"PONG"), "{r:?}");
        // A client trusting another CA refuses the server.
        assert!(connect(port, client_config(&pki, "ca2", Some("client"))).is_err());
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in workers {
        assert!(w.join().expect("worker") > 0);
    }
}

#[test]
fn a_handshake_that_never_ends_does_not_stall_others() {
    let pki = Pki::new();
    let (_server, port) = start(&pki, &[]);
    // Connections that never say anything, and one that stops half way
    // through a ClientHello.
    let mut idle: Vec<TcpStream> = (0..20)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).expect("connect"))
        .collect();
    let mut half = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    half.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
        .expect("write");
    let good = client_config(&pki, "ca", Some("client"));
    let started = Instant::now();
    for _ in 0..10 {
        assert!(served(port, good.clone()));
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    // The server drops them once the handshake time is up (10 s).
    half.set_read_timeout(Some(Duration::from_secs(20))).ok();
    let mut buf = [0u8; 64];
    let waited = Instant::now();
    let n = half.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0, "half handshake answered {:?}", &buf[..n]);
    assert!(waited.elapsed() < Duration::from_secs(15));
    idle[0].set_read_timeout(Some(Duration::from_secs(5))).ok();
    assert_eq!(idle[0].read(&mut buf).unwrap_or(0), 0);
    idle.clear();
    assert!(served(port, good));
}

#[test]
fn auth_clients_optional_and_no() {
    let pki = Pki::new();
    let (_s, port) = start(&pki, &["--tls-auth-clients", "optional"]);
    assert!(served(port, client_config(&pki, "ca", None)));
    assert!(served(port, client_config(&pki, "ca", Some("client"))));
    // A certificate, if sent, must be good.
    assert!(!served(port, client_config(&pki, "ca", Some("untrusted"))));
    assert!(!served(port, client_config(&pki, "ca", Some("expired"))));
    let (_s2, port2) = start(&pki, &["--tls-auth-clients", "no"]);
    assert!(served(port2, client_config(&pki, "ca", None)));
    let (ok, out) = cli_tls(&pki, port2, None, &["PING"]);
    assert!(ok && out.trim() == "PONG", "{out}");
    // CONFIG SET switches it for the next connection.
    let (_, out) = cli_tls(
        &pki,
        port2,
        None,
        &["CONFIG", "SET", "tls-auth-clients", "yes"],
    );
    assert_eq!(out.trim(), "OK");
    assert!(!served(port2, client_config(&pki, "ca", None)));
    assert!(served(port2, client_config(&pki, "ca", Some("client"))));
}

#[test]
fn tls_only_with_port_0() {
    let pki = Pki::new();
    let tls_port = free_port();
    let dir = common::temp_dir("tls-only");
    let mut args = pki.server_args(tls_port);
    args.extend(["--port".into(), "0".into(), "--save".into(), "".into()]);
    let mut child = Command::new(common::server_binary())
        .args(&args)
        .current_dir(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let good = client_config(&pki, "ca", Some("client"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !served(tls_port, good.clone()) {
        assert!(Instant::now() < deadline, "no TLS-only server");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (_, out) = cli_tls(&pki, tls_port, Some("client"), &["CONFIG", "GET", "port"]);
    assert_eq!(out.split_whitespace().collect::<Vec<_>>(), ["port", "0"]);
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn config_get_set_and_a_certificate_swapped_at_run_time() {
    let pki = Pki::new();
    let (server, port) = start(&pki, &[]);
    let mut c = server.conn();
    // Redis 7.0's defaults, as CONFIG GET shows them.
    let get = |c: &mut redis::Connection, name: &str| -> String {
        let v: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg(name)
            .query(c)
            .expect("CONFIG GET");
        v.get(1).cloned().unwrap_or_default()
    };
    for (name, want) in [
        ("tls-auth-clients", "yes"),
        ("tls-session-caching", "yes"),
        ("tls-session-cache-size", "20480"),
        ("tls-session-cache-timeout", "300"),
        ("tls-prefer-server-ciphers", "no"),
        ("tls-replication", "no"),
        ("tls-cluster", "no"),
        ("tls-protocols", ""),
        ("tls-ciphers", ""),
        ("tls-ciphersuites", ""),
        ("tls-key-file-pass", ""),
        ("tls-ca-cert-dir", ""),
    ] {
        assert_eq!(get(&mut c, name), want, "{name}");
    }
    assert_eq!(get(&mut c, "tls-port"), port.to_string());
    let tls_params: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("tls-*")
        .query(&mut c)
        .expect("CONFIG GET tls-*");
    assert_eq!(tls_params.len(), 2 * 20, "{tls_params:?}");
    let set = |c: &mut redis::Connection, pairs: &[&str]| -> Result<(), String> {
        let mut cmd = redis::cmd("CONFIG");
        cmd.arg("SET");
        for p in pairs {
            cmd.arg(*p);
        }
        cmd.query::<()>(c).map_err(|e| e.to_string())
    };
    let e = set(&mut c, &["tls-auth-clients", "maybe"]).unwrap_err();
    assert!(
        e.contains("argument(s) must be one of the following: no, yes, optional"),
        "{e}"
    );
    let e = set(&mut c, &["tls-protocols", "TLSv1.1"]).unwrap_err();
    assert!(e.contains("TLSv1.1 is not supported"), "{e}");
    let e = set(&mut c, &["tls-ciphers", "RC4-MD5"]).unwrap_err();
    assert!(e.contains("Unsupported TLSv1.2 cipher 'RC4-MD5'"), "{e}");
    assert!(set(&mut c, &["tls-ciphers", "ECDHE-RSA-AES128-GCM-SHA256"]).is_ok());
    assert!(set(
        &mut c,
        &["tls-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256"]
    )
    .is_ok());
    assert!(set(&mut c, &["tls-protocols", "TLSv1.2 TLSv1.3"]).is_ok());
    assert!(set(&mut c, &["tls-prefer-server-ciphers", "yes"]).is_ok());
    assert!(set(&mut c, &["tls-session-caching", "no"]).is_ok());
    assert!(set(&mut c, &["tls-replication", "yes"]).is_ok());
    // tls-port moves at run time (tests/listeners.rs); its own value is
    // no change.
    assert!(set(&mut c, &["tls-port", &port.to_string()]).is_ok());

    // A client trusting only the second CA is refused; after CONFIG SET
    // puts the second CA's server certificate in place, the next
    // connection gets it.
    let (_, out) = cli(&tls_args(&pki, port, "ca2", Some("client"))
        .iter()
        .map(String::as_str)
        .chain(["PING"])
        .collect::<Vec<_>>());
    assert!(!out.contains("PONG"), "{out}");
    let old = served(port, client_config(&pki, "ca", Some("client")));
    assert!(old);
    // A bad file is refused and the old configuration kept.
    let e = set(
        &mut c,
        &[
            "tls-cert-file",
            &pki.path("server2.crt"),
            "tls-key-file",
            "/nonexistent.key",
        ],
    )
    .unwrap_err();
    assert!(
        e.contains(
            "(possibly related to argument 'tls-cert-file') - Unable to update TLS configuration."
        ),
        "{e}"
    );
    assert_eq!(get(&mut c, "tls-cert-file"), pki.path("server.crt"));
    assert_eq!(get(&mut c, "tls-key-file"), pki.path("server.key"));
    assert!(served(port, client_config(&pki, "ca", Some("client"))));
    // A certificate with another's key.
    let e = set(&mut c, &["tls-cert-file", &pki.path("server2.crt")]).unwrap_err();
    assert!(e.contains("Unable to update TLS configuration."), "{e}");
    // Both, good.
    set(
        &mut c,
        &[
            "tls-cert-file",
            &pki.path("server2.crt"),
            "tls-key-file",
            &pki.path("server2.key"),
        ],
    )
    .expect("swap");
    let (ok, out) = cli(&tls_args(&pki, port, "ca2", Some("client"))
        .iter()
        .map(String::as_str)
        .chain(["PING"])
        .collect::<Vec<_>>());
    assert!(ok && out.trim() == "PONG", "{out}");
    assert!(!served(port, client_config(&pki, "ca", Some("client"))));
}

/// Pipelining, Pub/Sub, MONITOR, a blocked client, CLIENT KILL and the
/// output buffer limit, over TLS.
#[test]
fn every_connection_path_over_tls() {
    let pki = Pki::new();
    let (server, port) = start(&pki, &[]);
    let good = client_config(&pki, "ca", Some("client"));
    let mut a = connect(port, good.clone()).expect("a");
    // Pipelining: 2,000 commands in one write, 2,000 replies.
    let mut batch = Vec::new();
    for i in 0..2000 {
        batch.extend_from_slice(
            format!(
                "*4\r\n$7\r\nZINCRBY\r\n$5\r\nboard\r\n$1\r\n1\r\n$4\r\np{:03}\r\n",
                i % 1000
            )
            .as_bytes(),
        );
    }
    a.write_all(&batch).expect("write");
    let mut got = Vec::new();
    while got.iter().filter(|&&b| b == b'\n').count() < 4000 {
        got.extend(read_n(&mut a, 1).expect("read"));
    }
    let text = String::from_utf8_lossy(&got);
    assert_eq!(
        text.matches("$1\r\n2\r\n").count(),
        1000,
        "second increments"
    );

    // Pub/Sub: a subscriber over TLS gets a message published over TLS.
    let mut sub = connect(port, good.clone()).expect("sub");
    let r = roundtrip(&mut sub, b"SUBSCRIBE news\r\n", 33).expect("subscribe");
    assert!(r.ends_with(b":1\r\n"), "{r:?}");
    // MONITOR over TLS sees the publish.
    let mut mon = connect(port, good.clone()).expect("monitor");
    assert_eq!(
        roundtrip(&mut mon, b"MONITOR\r\n", 5).expect("monitor"),
        b"+OK\r\n"
    );
    let r = roundtrip(&mut a, b"PUBLISH news hello\r\n", 4).expect("publish");
    assert_eq!(r, b":1\r\n");
    let msg = read_n(&mut sub, 38).expect("message");
    assert_eq!(
        msg,
        b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n".to_vec()
    );
    let line = read_n(&mut mon, 20).expect("monitor line");
    assert!(
        String::from_utf8_lossy(&line).contains("\"PUBLISH\""),
        "{line:?}"
    );

    // Blocking: BLPOP over TLS woken by a push over TLS.
    let mut blocked = connect(port, good.clone()).expect("blocked");
    blocked.write_all(b"BLPOP q 10\r\n").expect("BLPOP");
    blocked.flush().expect("flush");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        roundtrip(&mut a, b"RPUSH q job\r\n", 4).expect("rpush"),
        b":1\r\n"
    );
    assert_eq!(
        read_n(&mut blocked, 20).expect("popped"),
        b"*2\r\n$1\r\nq\r\n$3\r\njob\r\n".to_vec()
    );

    // CLIENT KILL of a TLS client (the subscriber) from the plain port.
    let mut c = server.conn();
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut c)
        .expect("list");
    let sub_line = list
        .lines()
        .find(|l| l.contains("cmd=subscribe"))
        .expect("subscriber listed");
    assert!(
        sub_line.contains(&format!("laddr=127.0.0.1:{port}")),
        "{sub_line}"
    );
    let id = sub_line
        .split(' ')
        .find_map(|f| f.strip_prefix("id="))
        .expect("id");
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(id)
        .query(&mut c)
        .expect("kill");
    assert_eq!(killed, 1);
    assert!(read_n(&mut sub, 1).map_or(true, |r| r.is_empty()));

    // The output buffer limit: a 2 MB reply past a 1 MB hard limit
    // closes the TLS client, as a plain one.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("client-output-buffer-limit")
        .arg("normal 1mb 0 0")
        .query(&mut c)
        .expect("limit");
    let big = "x".repeat(2 << 20);
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(&big)
        .query(&mut c)
        .expect("SET");
    let r = roundtrip(&mut a, b"GET big\r\n", 1).unwrap_or_default();
    assert!(r.is_empty(), "got {} bytes", r.len());
    // Others are still served.
    assert!(served(port, good));
}

#[test]
fn redis_benchmark_over_tls() {
    let pki = Pki::new();
    let (_s, port) = start(&pki, &[]);
    let mut child = Command::new("redis-benchmark")
        .args(tls_args(&pki, port, "ca", Some("client")))
        .args(["-n", "2000", "-c", "4", "-t", "ping,set,get,zadd", "-q"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("redis-benchmark");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().ok().flatten().is_none() {
        assert!(Instant::now() < deadline, "redis-benchmark took too long");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for t in ["PING_INLINE", "SET", "GET", "ZADD"] {
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with(&format!("{t}:"))
                    && l.contains("requests per second")),
            "{t}: {text}"
        );
    }
}

/// The outgoing side (`server::tls::connect`, for replication) presents
/// the configured certificate: a server requiring client certificates
/// serves it.
#[test]
fn outgoing_link_uses_the_configured_certificates() {
    let pki = Pki::new();
    let (_s, port) = start(&pki, &[]);
    let mut config = rostrum::state::Config::default();
    for (k, v) in [
        ("tls-replication", "yes".to_string()),
        ("tls-cert-file", pki.path("client.crt")),
        ("tls-key-file", pki.path("client.key")),
        ("tls-ca-cert-file", pki.path("ca.crt")),
    ] {
        config.apply(k, &v).expect("apply");
    }
    let server = rostrum::state::Server::new(config, None);
    server.tls.reload(&server.config.read()).expect("reload");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = rostrum::server::tls::connect(&server, "127.0.0.1", port)
            .await
            .expect("connect");
        s.write_all(b"PING\r\n").await.expect("write");
        let mut buf = [0u8; 7];
        s.read_exact(&mut buf).await.expect("read");
        assert_eq!(&buf, b"+PONG\r\n");
    });
    // Without a CA there is nothing to check the other side with: as in
    // Redis, the configuration is refused.
    let mut bare = rostrum::state::Config::default();
    for (k, v) in [
        ("tls-replication", "yes".to_string()),
        ("tls-cert-file", pki.path("client.crt")),
        ("tls-key-file", pki.path("client.key")),
        ("tls-auth-clients", "no".to_string()),
    ] {
        bare.apply(k, &v).expect("apply");
    }
    let server = rostrum::state::Server::new(bare, None);
    server.tls.reload(&server.config.read()).expect("reload");
    rt.block_on(async {
        let e = rostrum::server::tls::connect(&server, "127.0.0.1", port)
            .await
            .expect_err("no CA, no outgoing TLS");
        assert!(e.to_string().contains("tls-ca-cert-file"), "{e}");
    });
}

/// An encrypted PKCS#8 key opens with `tls-key-file-pass`; a wrong one
/// stops the start with a clear error.
#[test]
fn encrypted_key_with_tls_key_file_pass() {
    use pkcs8::der::Decode;
    let pki = Pki::new();
    let pem = std::fs::read_to_string(pki.path("server.key")).expect("key");
    let (_, doc) = pkcs8::Document::from_pem(&pem).expect("pem");
    let params = pkcs8::pkcs5::pbes2::Parameters::generate_pbkdf2_sha256_aes256cbc(
        2048, &[3u8; 16], [5u8; 16],
    )
    .expect("params");
    let enc = pkcs8::PrivateKeyInfoRef::from_der(doc.as_bytes())
        .expect("pkcs8")
        .encrypt_with_params(params, "s3cret")
        .expect("encrypt");
    let enc_pem = enc
        .to_pem("ENCRYPTED PRIVATE KEY", pkcs8::LineEnding::LF)
        .expect("pem");
    let enc_path = pki.path("server.enc.key");
    std::fs::write(&enc_path, enc_pem.as_bytes()).expect("write");
    let tls_port = free_port();
    let mut args = pki.server_args(tls_port);
    args[5] = enc_path.clone();
    args.extend(["--tls-key-file-pass".into(), "s3cret".into()]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let _s = TestServer::start(&refs);
    assert!(served(tls_port, client_config(&pki, "ca", Some("client"))));
    // The wrong password: the server does not start, and says why.
    let mut child = Command::new(common::server_binary())
        .args(&args[..args.len() - 1])
        .arg("wrong")
        .args(["--port", &free_port().to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run");
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().ok().flatten().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("started with a wrong tls-key-file-pass");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Failed to configure TLS") && err.contains("decrypt"),
        "{err}"
    );
}
