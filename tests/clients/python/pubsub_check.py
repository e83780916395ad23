"""Pub/Sub and keyspace notifications through redis-py, sync and asyncio,
in RESP2 and RESP3.

    python3 pubsub_check.py --port P

Prints one line per check group and a closing `N passed, N failed`; exits 1
on any failure.
"""
import argparse
import asyncio
import time

import redis
import redis.asyncio as aioredis

from checks import expect, run_groups


def next_message(p, timeout=5.0):
    """The next message or confirmation (redis-py's get_message may return
    None before the timeout when nothing is parsed yet)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = p.get_message(timeout=deadline - time.monotonic())
        if m is not None:
            return m
    raise AssertionError("no message within the timeout")


def sync_check(port, protocol):
    r = redis.Redis(port=port, protocol=protocol, decode_responses=True, socket_timeout=10)
    p = r.pubsub()
    p.subscribe("news", "sport")
    p.psubscribe("n*")
    kinds = [(m["type"], m["channel"], m["data"]) for m in (next_message(p) for _ in range(3))]
    expect(kinds, [("subscribe", "news", 1), ("subscribe", "sport", 2), ("psubscribe", "n*", 3)], "confirmations")
    expect(r.publish("news", "hello"), 2, "PUBLISH receivers")
    expect(next_message(p), {"type": "message", "pattern": None, "channel": "news", "data": "hello"}, "message")
    expect(next_message(p), {"type": "pmessage", "pattern": "n*", "channel": "news", "data": "hello"}, "pmessage")
    expect(r.pubsub_numsub("news", "sport", "none"), [("news", 1), ("sport", 1), ("none", 0)], "NUMSUB")
    expect(r.pubsub_numpat(), 1, "NUMPAT")
    expect(sorted(r.pubsub_channels()), ["news", "sport"], "CHANNELS")
    expect(r.pubsub_channels("s*"), ["sport"], "CHANNELS pattern")
    if protocol == 2:
        # The health check redis-py sends while subscribed (RESP2 answers
        # it as a message).
        p.ping("check")
        m = next_message(p)
        expect((m["type"], m["data"]), ("pong", "check"), "PING while subscribed")
    p.unsubscribe("sport")
    expect(next_message(p)["type"], "unsubscribe", "UNSUBSCRIBE confirmation")
    expect(r.publish("sport", "x"), 0, "PUBLISH after UNSUBSCRIBE")
    p.close()
    # A handler thread.
    got = []
    p2 = r.pubsub(ignore_subscribe_messages=True)
    p2.subscribe(**{"feed": lambda m: got.append(m["data"])})
    worker = p2.run_in_thread(sleep_time=0.01)
    for i in range(200):
        r.publish("feed", str(i))
    deadline = time.monotonic() + 10
    while len(got) < 200 and time.monotonic() < deadline:
        time.sleep(0.01)
    worker.stop()
    worker.join(5)
    p2.close()
    expect(got, [str(i) for i in range(200)], "messages through run_in_thread")
    # Shard channels.
    p3 = r.pubsub()
    p3.ssubscribe("shard")
    expect(next_message_sharded(p3)["type"], "ssubscribe", "SSUBSCRIBE confirmation")
    expect(r.spublish("shard", "s"), 1, "SPUBLISH receivers")
    m = next_message_sharded(p3)
    expect((m["type"], m["channel"], m["data"]), ("smessage", "shard", "s"), "smessage")
    expect(r.pubsub_shardnumsub("shard"), [("shard", 1)], "SHARDNUMSUB")
    p3.close()
    # Every connection closed: nothing left subscribed.
    deadline = time.monotonic() + 5
    while r.pubsub_numsub("news", "feed") != [("news", 0), ("feed", 0)] and time.monotonic() < deadline:
        time.sleep(0.02)
    expect(r.pubsub_numsub("news", "feed"), [("news", 0), ("feed", 0)], "NUMSUB after close")
    r.close()


def next_message_sharded(p, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = p.get_sharded_message(timeout=deadline - time.monotonic())
        if m is not None:
            return m
    raise AssertionError("no sharded message within the timeout")


async def async_check(port, protocol):
    r = aioredis.Redis(port=port, protocol=protocol, decode_responses=True, socket_timeout=10)
    p = r.pubsub()
    await p.subscribe("alpha")
    await p.psubscribe("a*")

    async def next_async():
        for _ in range(100):
            m = await p.get_message(timeout=5.0)
            if m is not None:
                return m
        raise AssertionError("no message")

    kinds = [(await next_async())["type"] for _ in range(2)]
    expect(kinds, ["subscribe", "psubscribe"], "async confirmations")
    expect(await r.publish("alpha", "1"), 2, "async PUBLISH receivers")
    m1, m2 = await next_async(), await next_async()
    expect((m1["type"], m1["data"]), ("message", "1"), "async message")
    expect((m2["type"], m2["pattern"], m2["data"]), ("pmessage", "a*", "1"), "async pmessage")
    # Messages from a transaction and a script.
    async with r.pipeline(transaction=True) as pipe:
        pipe.publish("alpha", "tx")
        pipe.set("k", "v")
        expect(await pipe.execute(), [2, True], "EXEC replies")
    expect(await r.eval("return redis.call('publish', 'alpha', 'lua')", 0), 2, "EVAL publish")
    data = [(await next_async())["data"] for _ in range(4)]
    expect(data, ["tx", "tx", "lua", "lua"], "messages from EXEC and EVAL")
    await p.unsubscribe()
    await p.punsubscribe()
    # (The calls only send: wait for both confirmations.)
    left = {(await next_async())["type"] for _ in range(2)}
    expect(left, {"unsubscribe", "punsubscribe"}, "async unsubscribe confirmations")
    expect(await r.publish("alpha", "x"), 0, "async PUBLISH after unsubscribing")
    await p.aclose()
    await r.aclose()


def keyspace_check(port, protocol):
    """Keyspace events for ZINCRBY, SETBIT, EXPIRE and expiry, as a
    leaderboard app listening for board changes sees them."""
    r = redis.Redis(port=port, protocol=protocol, decode_responses=True, socket_timeout=10)
    r.config_set("notify-keyspace-events", "KEA")
    try:
        p = r.pubsub()
        p.psubscribe("__keyspace@0__:board:*", "__keyevent@0__:expired")
        for _ in range(2):
            expect(next_message(p)["type"], "psubscribe", "PSUBSCRIBE confirmation")
        r.zincrby("board:weekly", 10, "alice")
        r.setbit("board:daily-active", 7, 1)
        r.expire("board:weekly", 100)
        r.set("board:flash", "1", px=50)
        got = [next_message(p) for _ in range(6)]
        events = [(m["channel"], m["data"]) for m in got]
        expect(events, [
            ("__keyspace@0__:board:weekly", "zincr"),
            ("__keyspace@0__:board:daily-active", "setbit"),
            ("__keyspace@0__:board:weekly", "expire"),
            ("__keyspace@0__:board:flash", "set"),
            ("__keyspace@0__:board:flash", "expire"),
            ("__keyspace@0__:board:flash", "expired"),
        ], "keyspace events")
        m = next_message(p)
        expect((m["channel"], m["data"]), ("__keyevent@0__:expired", "board:flash"), "keyevent expired")
        p.close()
    finally:
        r.config_set("notify-keyspace-events", "")
        r.delete("board:weekly", "board:daily-active")
        r.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    opts = parser.parse_args()
    steps = []
    for protocol in (2, 3):
        steps.append((f"sync pubsub, RESP{protocol}", lambda pr=protocol: sync_check(opts.port, pr)))
        steps.append((f"asyncio pubsub, RESP{protocol}", lambda pr=protocol: asyncio.run(async_check(opts.port, pr))))
        steps.append((f"keyspace events, RESP{protocol}", lambda pr=protocol: keyspace_check(opts.port, pr)))
    run_groups("python pubsub", steps)


if __name__ == "__main__":
    main()
