"""LB.WATCH / LB.UNWATCH through redis-py, in RESP2 (subscribe mode) and
RESP3 (pushes): a scripted sequence of submits gives a snapshot, then
exactly the net change of each step.

    python3 lbwatch_check.py --port P

Prints one line per check group and a closing `N passed, N failed`; exits 1
on any failure.
"""
import argparse

import redis

from checks import expect, run_groups


def watcher(port, protocol):
    """A dedicated connection of redis-py's, read message by message."""
    r = redis.Redis(port=port, protocol=protocol, decode_responses=True, socket_timeout=5)
    conn = r.connection_pool.get_connection()
    if protocol == 3:
        # Pushes are handed back to read_response(push_request=True).
        conn._parser.set_pubsub_push_handler(lambda m: m)
    return r, conn


def read_message(conn, protocol):
    m = conn.read_response(push_request=(protocol == 3))
    kind, key, version, items = m
    return kind, key, version, [tuple(i) for i in items]


def step(r, *commands):
    """One step, atomically (MULTI/EXEC): it lands in one interval."""
    p = r.pipeline(transaction=True)
    for c in commands:
        p.execute_command(*c)
    p.execute()


def scripted(port, protocol):
    r = redis.Redis(port=port, decode_responses=True)
    key = f"race{protocol}"
    r.delete(key)
    r.execute_command("LB.CREATE", key, "POLICY", "SET", "TIEBREAK", "EARLIEST")
    r.execute_command("LB.SUBMIT", key, "a", 10)
    r.execute_command("LB.SUBMIT", key, "b", 20)
    _, conn = watcher(port, protocol)
    conn.send_command("LB.WATCH", key, 3, "INTERVAL", 20)
    snap = conn.read_response()
    expect(snap, ["lb.snapshot", key, 1, [[1, "b", 20], [2, "a", 10]]], "snapshot")
    steps = [
        ([("LB.SUBMIT", key, "c", 15)], 2, [(2, "c", 15), (3, "a", 10)]),
        ([("LB.SUBMIT", key, "a", 30)], 3, [(1, "a", 30), (2, "b", 20), (3, "c", 15)]),
        # x enters and leaves within one interval, d stays below: nothing.
        ([("LB.SUBMIT", key, "x", 99), ("LB.SUBMIT", key, "d", 5), ("LB.REM", key, "x")], None, None),
        # A tie: d reaches b's 20 after b, so it ranks below it.
        ([("LB.SUBMIT", key, "d", 20)], 4, [(3, "d", 20)]),
        ([("LB.REM", key, "a"), ("LB.SUBMIT", key, "b", 19)], 5, [(1, "d", 20), (2, "b", 19), (3, "c", 15)]),
        ([("DEL", key)], 6, [(1, None), (2, None), (3, None)]),
    ]
    for commands, version, items in steps:
        step(r, *commands)
        if version is None:
            continue
        expect(read_message(conn, protocol), ("lb.diff", key, version, items), f"diff {version}")
    if protocol == 2:
        conn.send_command("GET", "k")
        try:
            conn.read_response()
            raise AssertionError("GET ran in subscribe mode")
        except redis.ResponseError as e:
            expect("Can't execute 'get'" in str(e), True, "subscribe mode refuses GET")
    conn.send_command("LB.UNWATCH")
    expect(conn.read_response(), ["lb.unwatch", [key], 0], "LB.UNWATCH")
    conn.send_command("GET", "k")
    expect(conn.read_response(), None, "a normal connection again")
    conn.disconnect()


def face(port, protocol):
    """The pub/sub face: SUBSCRIBE to the board's channel (what a client
    that knows only Pub/Sub does) gives `message`s whose payload is the
    WebSocket's JSON, a snapshot then the same net changes."""
    import json

    r = redis.Redis(port=port, decode_responses=True)
    key = f"face{protocol}"
    channel = f"__lbwatch@0__:3:{key}"
    r.delete(key)
    r.execute_command("LB.CREATE", key, "POLICY", "SET", "TIEBREAK", "EARLIEST")
    r.execute_command("LB.SUBMIT", key, "a", 10)
    r.execute_command("LB.SUBMIT", key, "b", 20)
    sub = redis.Redis(port=port, protocol=protocol, decode_responses=True, socket_timeout=5)
    p = sub.pubsub()
    p.subscribe(channel)

    def next_message():
        m = p.get_message(timeout=5)
        while m is not None and m["type"] != "message":
            m = p.get_message(timeout=5)
        if m is None:
            raise AssertionError("no message within 5 s")
        expect(m["channel"], channel, "channel")
        return json.loads(m["data"])

    expect(
        next_message(),
        {"type": "snapshot", "key": key, "version": 1, "entries": [[1, "b", 20], [2, "a", 10]]},
        "snapshot",
    )
    expect(r.pubsub_numsub(channel), [(channel, 1)], "PUBSUB NUMSUB")
    expect(channel in r.pubsub_channels("__lbwatch@*"), True, "PUBSUB CHANNELS")
    steps = [
        ([("LB.SUBMIT", key, "c", 15)], 2, [[2, "c", 15], [3, "a", 10]]),
        ([("LB.SUBMIT", key, "a", 30)], 3, [[1, "a", 30], [2, "b", 20], [3, "c", 15]]),
        ([("LB.SUBMIT", key, "x", 99), ("LB.SUBMIT", key, "d", 5), ("LB.REM", key, "x")], None, None),
        ([("LB.SUBMIT", key, "d", 20)], 4, [[3, "d", 20]]),
        ([("LB.REM", key, "a"), ("LB.SUBMIT", key, "b", 19)], 5, [[1, "d", 20], [2, "b", 19], [3, "c", 15]]),
        ([("DEL", key)], 6, [[1, None], [2, None], [3, None]]),
    ]
    for commands, version, items in steps:
        step(r, *commands)
        if version is None:
            continue
        expect(
            next_message(),
            {"type": "diff", "key": key, "version": version, "entries": items},
            f"diff {version}",
        )
    p.unsubscribe(channel)
    p.get_message(timeout=1)
    expect(r.pubsub_numsub(channel), [(channel, 0)], "left after UNSUBSCRIBE")
    p.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--phase", default="lbwatch")
    args = ap.parse_args()
    run_groups(
        "lbwatch_check",
        [
            ("RESP2 watcher in subscribe mode", lambda: scripted(args.port, 2)),
            ("RESP3 watcher with pushes", lambda: scripted(args.port, 3)),
            ("RESP2 pub/sub face (SUBSCRIBE __lbwatch@0__:3:key)", lambda: face(args.port, 2)),
            ("RESP3 pub/sub face", lambda: face(args.port, 3)),
        ],
    )


if __name__ == "__main__":
    main()
