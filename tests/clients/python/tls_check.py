"""TLS through redis-py: `ssl=True` with and without a client certificate,
a pipeline, Pub/Sub and asyncio over TLS, and the refusals.

    python3 tls_check.py --port P --tls-port T --certs DIR

DIR holds the test certificates (tests/common/certs.rs): ca.crt,
client.crt/.key, expired.crt/.key, untrusted.crt/.key. The server requires
client certificates (tls-auth-clients yes). Prints one line per check
group and a closing `N passed, N failed`; exits 1 on any failure.
"""
import argparse
import asyncio
import os
import time

import redis
import redis.asyncio as aioredis

from checks import expect, run_groups


def tls_client(args, cert="client", cls=redis.Redis, **kw):
    c = os.path.join(args.certs, cert) if cert else None
    return cls(
        host="localhost",
        port=args.tls_port,
        ssl=True,
        ssl_ca_certs=os.path.join(args.certs, "ca.crt"),
        ssl_certfile=c + ".crt" if c else None,
        ssl_keyfile=c + ".key" if c else None,
        decode_responses=True,
        socket_timeout=10,
        **kw,
    )


def commands(args):
    r = tls_client(args)
    expect(r.ping(), True, "PING")
    r.delete("board")
    expect(r.zadd("board", {"ann": 10, "bob": 20}), 2, "ZADD")
    expect(r.zincrby("board", 15, "ann"), 25.0, "ZINCRBY")
    expect(r.zrevrange("board", 0, 9, withscores=True), [("ann", 25.0), ("bob", 20.0)], "ZREVRANGE")
    p = r.pipeline(transaction=False)
    for i in range(500):
        p.incr("counter")
    expect(p.execute()[-1], 500, "pipeline of 500")
    r3 = tls_client(args, protocol=3)
    expect(r3.execute_command("HELLO", 3)["proto"], 3, "RESP3 over TLS")


def pubsub(args):
    r = tls_client(args)
    p = r.pubsub()
    p.subscribe("news")
    deadline = time.monotonic() + 5
    m = None
    while time.monotonic() < deadline:
        m = p.get_message(timeout=1)
        if m and m["type"] == "subscribe":
            break
    expect(m["type"], "subscribe", "confirmation")
    expect(tls_client(args).publish("news", "hello"), 1, "PUBLISH")
    while time.monotonic() < deadline:
        m = p.get_message(timeout=1)
        if m and m["type"] == "message":
            break
    expect((m["channel"], m["data"]), ("news", "hello"), "message")
    p.close()


def asyncio_client(args):
    async def run():
        r = tls_client(args, cls=aioredis.Redis)
        await r.set("a", "1")
        expect(await r.incrby("a", 41), 42, "asyncio INCRBY")
        await r.aclose()

    asyncio.run(run())


def refused(args):
    for cert in (None, "expired", "untrusted"):
        try:
            tls_client(args, cert=cert).ping()
        except (redis.exceptions.ConnectionError, OSError):
            continue
        raise AssertionError(f"served with certificate {cert}")
    # Plaintext to the TLS port.
    try:
        redis.Redis(port=args.tls_port, socket_timeout=5).ping()
    except (redis.exceptions.ConnectionError, redis.exceptions.ResponseError, OSError):
        pass
    else:
        raise AssertionError("plaintext served on the TLS port")
    # And the good client is still served.
    expect(tls_client(args).ping(), True, "PING after refusals")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--tls-port", type=int, required=True)
    ap.add_argument("--certs", required=True)
    args = ap.parse_args()
    run_groups(
        "redis-py TLS",
        [
            ("commands and a pipeline, RESP2 and RESP3", lambda: commands(args)),
            ("pub/sub", lambda: pubsub(args)),
            ("asyncio", lambda: asyncio_client(args)),
            ("refused: no, expired, untrusted certificate; plaintext", lambda: refused(args)),
        ],
    )


if __name__ == "__main__":
    main()
