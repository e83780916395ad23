//! Hostile input on raw sockets: truncated and malformed frames, absurd
//! lengths, garbage, deep nesting, huge arguments, long pipelines and
//! clients that vanish mid-command. After each, the server must still serve
//! other clients and keep the data written before. The error lines are the
//! ones Redis 7.0.15 sends (checked against redis-server), and the
//! connection is closed after a protocol error, as Redis does.
mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{read_at_least, roundtrip, TestServer};

const INVALID_BULK: &[u8] = b"-ERR Protocol error: invalid bulk length\r\n";
const INVALID_MULTIBULK: &[u8] = b"-ERR Protocol error: invalid multibulk length\r\n";
const UNBALANCED: &[u8] = b"-ERR Protocol error: unbalanced quotes in request\r\n";
const TOO_BIG_INLINE: &[u8] = b"-ERR Protocol error: too big inline request\r\n";

/// A command as a RESP multibulk.
fn resp(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// A bulk string reply.
fn bulk(s: &[u8]) -> Vec<u8> {
    let mut out = format!("${}\r\n", s.len()).into_bytes();
    out.extend_from_slice(s);
    out.extend_from_slice(b"\r\n");
    out
}

/// A server holding one key written before the hostile input arrives.
fn server() -> TestServer {
    let srv = TestServer::start(&[]);
    let mut s = srv.raw();
    s.write_all(&resp(&[b"SET", b"sentinel", b"intact"]))
        .expect("write");
    assert_eq!(read_at_least(&mut s, 5), b"+OK\r\n");
    srv
}

/// The server answers PING on a new connection and still holds the key
/// written by [`server`].
fn assert_healthy(srv: &TestServer) {
    let mut s = srv.raw();
    let mut ask = resp(&[b"PING"]);
    ask.extend(resp(&[b"GET", b"sentinel"]));
    s.write_all(&ask).expect("write");
    let want = b"+PONG\r\n$6\r\nintact\r\n";
    assert_eq!(read_at_least(&mut s, want.len()), want);
}

/// Reads until the server closes the connection (true) or 5 s pass without
/// it closing (false). Returns what arrived.
fn read_until_closed(s: &mut TcpStream) -> (Vec<u8>, bool) {
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return (out, true),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return (out, true),
            Err(_) => return (out, false),
        }
    }
}

/// Nothing arrives for a moment and the connection stays open.
fn assert_silent(s: &mut TcpStream) {
    s.set_read_timeout(Some(Duration::from_millis(300))).ok();
    let mut buf = [0u8; 1024];
    match s.read(&mut buf) {
        Ok(0) => panic!("the server closed the connection"),
        Ok(n) => panic!("unexpected reply: {:?}", String::from_utf8_lossy(&buf[..n])),
        Err(e) => assert!(
            matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
            "{e}"
        ),
    }
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
}

/// Sends `input` on a fresh connection; the server must answer exactly
/// `reply` and close the connection; other clients are unaffected.
fn assert_rejected(srv: &TestServer, input: &[u8], reply: &[u8]) {
    let mut s = srv.raw();
    // The server may close before reading everything: a failed write is
    // fine, the reply is what counts.
    let _ = s.write_all(input);
    let (got, closed) = read_until_closed(&mut s);
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(reply),
        "input {:?}",
        String::from_utf8_lossy(&input[..input.len().min(60)])
    );
    assert!(closed, "connection left open after a protocol error");
    assert_healthy(srv);
}

#[test]
fn truncated_frames_wait_for_the_rest() {
    let srv = server();
    let mut s = srv.raw();
    s.set_nodelay(true).ok();
    s.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nva")
        .expect("write");
    assert_silent(&mut s);
    assert_healthy(&srv);
    s.write_all(b"lue\r\n").expect("write");
    assert_eq!(read_at_least(&mut s, 5), b"+OK\r\n");

    // The same pipeline (multibulk and inline) cut at every byte.
    let mut pipeline = resp(&[b"ECHO", b"hello"]);
    pipeline.extend_from_slice(b"ECHO \"in line\"\r\n");
    pipeline.extend(resp(&[b"GET", b"k"]));
    let mut want = bulk(b"hello");
    want.extend(bulk(b"in line"));
    want.extend(bulk(b"value"));
    for cut in 1..pipeline.len() {
        s.write_all(&pipeline[..cut]).expect("write");
        std::thread::sleep(Duration::from_millis(2));
        s.write_all(&pipeline[cut..]).expect("write");
        assert_eq!(read_at_least(&mut s, want.len()), want, "cut at {cut}");
    }

    // Byte by byte, a header cut inside its length digits.
    let cmd = resp(&[b"ECHO", &[b'x'; 1234]]);
    for b in &cmd[..cmd.len() - 1] {
        s.write_all(std::slice::from_ref(b)).expect("write");
    }
    assert_silent(&mut s);
    s.write_all(&cmd[cmd.len() - 1..]).expect("write");
    let want = bulk(&[b'x'; 1234]);
    assert_eq!(read_at_least(&mut s, want.len()), want);
    assert_healthy(&srv);
}

#[test]
fn negative_and_huge_lengths() {
    let srv = server();
    // A negative count is an empty request: skipped, as in Redis.
    let mut s = srv.raw();
    s.write_all(b"*-5\r\n*0\r\nPING\r\n").expect("write");
    assert_eq!(read_at_least(&mut s, 7), b"+PONG\r\n");

    assert_rejected(&srv, b"*1\r\n$-2\r\n", INVALID_BULK);
    assert_rejected(&srv, b"*1\r\n$-1\r\n", INVALID_BULK);
    assert_rejected(&srv, b"*1\r\n$2147483648\r\n", INVALID_BULK);
    assert_rejected(&srv, b"*1\r\n$536870913\r\n", INVALID_BULK);
    assert_rejected(&srv, b"*1\r\n$99999999999999999999\r\n", INVALID_BULK);
    assert_rejected(&srv, b"*2147483648\r\n", INVALID_MULTIBULK);
    assert_rejected(&srv, b"*-99999999999999999999\r\n", INVALID_MULTIBULK);
    assert_rejected(&srv, b"*x\r\n", INVALID_MULTIBULK);

    // A length line without its end: the server waits, then judges it.
    let mut s = srv.raw();
    s.write_all(b"*1\r\n$600000000").expect("write");
    assert_silent(&mut s);
    s.write_all(b"\r\n").expect("write");
    let (got, closed) = read_until_closed(&mut s);
    assert_eq!(got, INVALID_BULK);
    assert!(closed);

    // Counts and lengths within the limits are trusted only as far as bytes
    // arrive: nothing is reserved up front, the client just waits.
    let mut s = srv.raw();
    s.write_all(b"*1000000000\r\n$4\r\nPING\r\n")
        .expect("write");
    assert_silent(&mut s);
    let mut t = srv.raw();
    t.write_all(b"*1\r\n$536870912\r\nabc").expect("write");
    assert_silent(&mut t);
    assert_healthy(&srv);
    drop(s);
    drop(t);
    assert_healthy(&srv);
}

#[test]
fn non_resp_garbage() {
    let srv = server();
    // A line that is not RESP is an inline command: unknown, not fatal.
    let mut s = srv.raw();
    s.write_all(b"GARBAGE !@# stuff\r\n:1\r\nPING\r\n")
        .expect("write");
    let want: &[u8] =
        b"-ERR unknown command 'GARBAGE', with args beginning with: '!@#' 'stuff' \r\n\
-ERR unknown command ':1', with args beginning with: \r\n+PONG\r\n";
    assert_eq!(
        String::from_utf8_lossy(&read_at_least(&mut s, want.len())),
        String::from_utf8_lossy(want)
    );

    // A TLS ClientHello: Redis looks for the inline newline with strchr, so
    // the NUL bytes keep the request incomplete until it is too big.
    let mut s = srv.raw();
    s.write_all(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\nPING\r\n")
        .expect("write");
    assert_silent(&mut s);
    let filler = vec![b'z'; 70_000];
    let _ = s.write_all(&filler);
    let (got, closed) = read_until_closed(&mut s);
    assert_eq!(got, TOO_BIG_INLINE);
    assert!(closed);

    // An endless line.
    assert_rejected(&srv, &[b'g'; 70_000], TOO_BIG_INLINE);
    assert_healthy(&srv);
}

#[test]
fn expected_bulk_got_something_else() {
    let srv = server();
    assert_rejected(
        &srv,
        b"*1\r\n:1\r\n",
        b"-ERR Protocol error: expected '$', got ':'\r\n",
    );
    assert_rejected(
        &srv,
        b"*2\r\n$4\r\nECHO\r\n+hi\r\n",
        b"-ERR Protocol error: expected '$', got '+'\r\n",
    );
    // Replies to the commands before the bad one are sent; none after it.
    let mut input = resp(&[b"PING"]);
    input.extend_from_slice(b"*1\r\n:1\r\n");
    input.extend(resp(&[b"PING"]));
    assert_rejected(
        &srv,
        &input,
        b"+PONG\r\n-ERR Protocol error: expected '$', got ':'\r\n",
    );
}

#[test]
fn unbalanced_inline_quotes() {
    let srv = server();
    assert_rejected(&srv, b"SET a \"b\r\n", UNBALANCED);
    assert_rejected(&srv, b"ECHO 'a\r\n", UNBALANCED);
    assert_rejected(&srv, b"ECHO \"a\"b\r\n", UNBALANCED);
    assert_rejected(
        &srv,
        b"PING\r\nECHO \"a\r\nPING\r\n",
        &[b"+PONG\r\n", UNBALANCED].concat(),
    );
    // Nothing was written by the rejected SET.
    let mut s = srv.raw();
    s.write_all(&resp(&[b"GET", b"a"])).expect("write");
    assert_eq!(read_at_least(&mut s, 5), b"$-1\r\n");
}

#[test]
fn deep_nesting_is_refused_not_followed() {
    let srv = server();
    let input = b"*1\r\n".repeat(8_000);
    assert_rejected(
        &srv,
        &input,
        b"-ERR Protocol error: expected '$', got '*'\r\n",
    );
}

#[test]
fn one_megabyte_argument_in_pieces() {
    let srv = server();
    let value: Vec<u8> = (0..1024 * 1024).map(|i| (i % 251) as u8).collect();
    let input = resp(&[b"SET", b"big", &value]);
    let mut s = srv.raw();
    s.set_nodelay(true).ok();
    for (i, piece) in input.chunks(16 * 1024).enumerate() {
        s.write_all(piece).expect("write");
        if i % 4 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    assert_eq!(read_at_least(&mut s, 5), b"+OK\r\n");
    s.write_all(&resp(&[b"GET", b"big"])).expect("write");
    let want = bulk(&value);
    let got = read_at_least(&mut s, want.len());
    assert!(
        got == want,
        "GET big returned {} bytes, not the value",
        got.len()
    );
    assert_healthy(&srv);
}

#[test]
fn ten_thousand_pipelined_commands_in_one_write() {
    let srv = server();
    let mut input = Vec::new();
    let mut want = Vec::new();
    for i in 0..10_000u32 {
        let n = i.to_string();
        let n = n.as_bytes();
        match i % 4 {
            0 => {
                input.extend(resp(&[b"SET", &[b"key:", n].concat(), n]));
                want.extend_from_slice(b"+OK\r\n");
            }
            1 => {
                input.extend(resp(&[
                    b"GET",
                    &[b"key:", (i - 1).to_string().as_bytes()].concat(),
                ]));
                want.extend(bulk((i - 1).to_string().as_bytes()));
            }
            2 => {
                input.extend_from_slice(&[b"ECHO ", n, b"\r\n"].concat());
                want.extend(bulk(n));
            }
            _ => {
                input.extend(resp(&[b"ECHO", n]));
                want.extend(bulk(n));
            }
        }
    }
    let s = srv.raw();
    let mut writer = s.try_clone().expect("clone");
    // Write on another thread: the replies arrive while the requests are
    // still being written, and nobody must wait on a full socket buffer.
    let sending = std::thread::spawn(move || writer.write_all(&input));
    let mut s = s;
    let got = read_at_least(&mut s, want.len());
    sending.join().expect("writer").expect("write");
    assert_eq!(got.len(), want.len(), "replies missing");
    if let Some(at) = got.iter().zip(&want).position(|(a, b)| a != b) {
        panic!(
            "replies differ at byte {at}: got {:?}, want {:?}",
            String::from_utf8_lossy(&got[at.saturating_sub(20)..(at + 40).min(got.len())]),
            String::from_utf8_lossy(&want[at.saturating_sub(20)..(at + 40).min(want.len())])
        );
    }
    assert_healthy(&srv);
}

#[test]
fn client_vanishing_mid_command() {
    let srv = server();
    // Complete commands before the cut are applied; the cut one is not.
    let mut input = resp(&[b"SET", b"done", b"yes"]);
    input.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$4\r\nhalf\r\n$10\r\nabc");
    let mut s = srv.raw();
    s.write_all(&input).expect("write");
    assert_eq!(read_at_least(&mut s, 5), b"+OK\r\n");
    drop(s);

    // Mid big argument, and mid length line.
    let mut s = srv.raw();
    s.write_all(b"*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$1048576\r\n")
        .expect("write");
    s.write_all(&vec![b'x'; 100_000]).expect("write");
    drop(s);
    let mut s = srv.raw();
    s.write_all(b"*2\r\n$3\r\nGET\r\n$12").expect("write");
    drop(s);

    assert_healthy(&srv);
    let mut s = srv.raw();
    let mut ask = resp(&[b"GET", b"done"]);
    ask.extend(resp(&[b"GET", b"half"]));
    ask.extend(resp(&[b"GET", b"big"]));
    s.write_all(&ask).expect("write");
    let want = b"$3\r\nyes\r\n$-1\r\n$-1\r\n";
    assert_eq!(read_at_least(&mut s, want.len()), want);
}

/// Unknown command names are echoed byte for byte, cut at a NUL, as Redis's
/// `%.128s` does.
#[test]
fn unknown_command_names_are_echoed_raw() {
    let srv = TestServer::start(&[]);
    let mut s = srv.raw();
    let want: &[u8] = b"-ERR unknown command '\xff\xfe', with args beginning with: 'a' \r\n";
    let got = roundtrip(&mut s, b"*2\r\n$2\r\n\xff\xfe\r\n$1\r\na\r\n", want.len());
    assert_eq!(got, want);
    let want: &[u8] = b"-ERR unknown command 'PI', with args beginning with: \r\n";
    let got = roundtrip(&mut s, b"*1\r\n$4\r\nPI\x00G\r\n", want.len());
    assert_eq!(got, want);
}
