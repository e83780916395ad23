"""Scenario 3 through redis-py: the real-time board fed from a stream.

Producers XADD like/unlike events (each with an event id); two consumers
of one group apply them to `rank:likes` with ZINCRBY, each event's ZINCRBY
and XACK in one transaction; consumer A is killed mid-batch (it applies
part of a batch and stops without acking the rest); B claims A's pending
entries with XAUTOCLAIM. The board must equal the sum of the events, each
counted once; then it is rebuilt from the stream alone and compared.
Both protocols (RESP2, RESP3).

    python3 stream_check.py --port P
"""
import argparse
import threading
from collections import Counter

import redis

from checks import expect, run_groups

POSTS = 25
EVENTS_PER_PRODUCER = 400


def produce(port, protocol, stream, producer, want, lock):
    r = redis.Redis(port=port, protocol=protocol, decode_responses=True, socket_timeout=10)
    local = Counter()
    for i in range(EVENTS_PER_PRODUCER):
        post = f"post:{(i * 7 + producer) % POSTS}"
        delta = -1 if i % 4 == 3 else 1
        local[post] += delta
        r.xadd(stream, {"event": f"p{producer}-e{i}", "post": post, "delta": delta})
    with lock:
        want.update(local)
    r.close()


def apply(r, stream, group, board, entries):
    for entry_id, fields in entries:
        with r.pipeline(transaction=True) as p:
            p.zincrby(board, int(fields["delta"]), fields["post"])
            p.xack(stream, group, entry_id)
            p.execute()


def scenario(port, protocol):
    r = redis.Redis(port=port, protocol=protocol, decode_responses=True, socket_timeout=10)
    stream, group, board = f"events:{protocol}", "appliers", f"rank:likes:{protocol}"
    r.delete(stream, board)
    expect(r.xgroup_create(stream, group, id="0", mkstream=True), True, "XGROUP CREATE MKSTREAM")
    want, lock = Counter(), threading.Lock()
    producers = [threading.Thread(target=produce, args=(port, protocol, stream, n, want, lock))
                 for n in range(2)]
    for t in producers:
        t.start()
    for t in producers:
        t.join()
    expect(r.xlen(stream), 2 * EVENTS_PER_PRODUCER, "XLEN after the producers")

    # Consumer A takes a batch of 60, applies 20 and is killed.
    a = redis.Redis(port=port, protocol=protocol, decode_responses=True, socket_timeout=10)
    batch = a.xreadgroup(group, "a", {stream: ">"}, count=60)
    entries = batch[stream][0] if protocol == 3 else batch[0][1]
    expect(len(entries), 60, "A's batch")
    apply(a, stream, group, board, entries[:20])
    a.close()
    expect(r.xpending(stream, group)["pending"], 40, "A's unacked entries")

    # Consumer B works through everything new, blocking briefly at the end.
    b = redis.Redis(port=port, protocol=protocol, decode_responses=True, socket_timeout=10)
    while True:
        got = b.xreadgroup(group, "b", {stream: ">"}, count=100, block=50)
        if not got:
            break
        entries = got[stream][0] if protocol == 3 else got[0][1]
        apply(b, stream, group, board, entries)

    # B claims what A left pending.
    cursor, claimed = "0-0", 0
    while True:
        cursor, entries, deleted = b.xautoclaim(stream, group, "b", 0, start_id=cursor, count=15)
        expect(deleted, [], "deleted ids in XAUTOCLAIM")
        claimed += len(entries)
        apply(b, stream, group, board, entries)
        if cursor == "0-0":
            break
    expect(claimed, 40, "entries claimed from A")
    summary = r.xpending(stream, group)
    expect(summary["pending"], 0, "nothing pending at the end")

    got = {m: int(s) for m, s in r.zrange(board, 0, -1, withscores=True)}
    expect(got, {k: v for k, v in want.items()}, "board equals the sum of the events")

    # The board rebuilt from the stream alone.
    rebuilt, seen, last = Counter(), set(), "-"
    while True:
        page = r.xrange(stream, min=last, max="+", count=200)
        if not page:
            break
        for entry_id, fields in page:
            expect(fields["event"] in seen, False, "event ids are unique")
            seen.add(fields["event"])
            rebuilt[fields["post"]] += int(fields["delta"])
        last = "(" + page[-1][0]
    expect(len(seen), 2 * EVENTS_PER_PRODUCER, "events in the stream")
    expect(dict(rebuilt), got, "board rebuilt from the stream")
    groups = r.xinfo_groups(stream)
    expect(groups[0]["lag"], 0, "group lag")
    expect(groups[0]["entries-read"], 2 * EVENTS_PER_PRODUCER, "group entries-read")
    r.close()
    b.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    args = ap.parse_args()
    run_groups("streams", [
        ("scenario 3 pipeline, RESP2", lambda: scenario(args.port, 2)),
        ("scenario 3 pipeline, RESP3", lambda: scenario(args.port, 3)),
    ])


if __name__ == "__main__":
    main()
