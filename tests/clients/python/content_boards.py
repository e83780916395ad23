"""Scenario 3: real-time boards for likes, comments and points.

Events come from a queue that may deliver one twice; the consumer is
idempotent: SET seen:<event id> NX EX marks an event, and only a first
delivery is applied with ZINCRBY. The top 10 is watched after every batch
(an app pushes it only when it changed); temporary boards carry a TTL.
"""
import random
import time

from check import as_float_pairs, by_rank, eq, true

ARTICLES = 300
EVENTS = 4000
BATCH = 200
SEEN_TTL = 3600
WEEK = 7 * 86400


def make_events(rng):
    """(event id, board, member, delta); about one in five delivered twice."""
    events = []
    for seq in range(EVENTS):
        article = f"article:{rng.randrange(1, ARTICLES + 1)}"
        kind = rng.choice(["likes", "likes", "comments", "points"])
        if kind == "likes":
            delta = 1 if rng.random() < 0.8 else -1  # unlike
        elif kind == "comments":
            delta = 1
        else:
            delta = rng.randrange(1, 11)
        events.append((f"{article}:{kind}:{1_744_700_000 + seq}", f"rank:{kind}", article, delta))
    redelivered = rng.sample(events, EVENTS // 5)
    for event in redelivered:
        events.insert(rng.randrange(len(events) + 1), event)
    return events


def consume(r, batch, boards, seen):
    """Applies one batch: SET NX for every event, then ZINCRBY for the new."""
    pipe = r.pipeline(transaction=False)
    for event_id, _, _, _ in batch:
        pipe.set(f"seen:{event_id}", 1, nx=True, ex=SEEN_TTL)
    first = pipe.execute()
    expected_first = []
    for event_id, _, _, _ in batch:
        expected_first.append(True if event_id not in seen else None)
        seen.add(event_id)
    eq(first, expected_first, "SET NX EX marks only first deliveries")

    pipe = r.pipeline()
    expected = []
    for (_, board, member, delta), is_first in zip(batch, first):
        if is_first:
            pipe.zincrby(board, delta, member)
            scores = boards.setdefault(board, {})
            scores[member] = scores.get(member, 0) + delta
            expected.append(float(scores[member]))
    eq(pipe.execute(), expected, "ZINCRBY replies")


def run(r):
    rng = random.Random(42)
    events = make_events(rng)
    boards, seen = {}, set()
    last_top, pushes, expected_pushes = None, 0, 0
    model_last = None
    for i in range(0, len(events), BATCH):
        consume(r, events[i : i + BATCH], boards, seen)
        top = r.zrevrange("rank:likes", 0, 9, withscores=True)
        model_top = as_float_pairs(by_rank(boards["rank:likes"])[:10])
        eq(top, model_top, "top 10 likes after a batch")
        pushes += top != last_top
        expected_pushes += model_top != model_last
        last_top, model_last = top, model_top
    eq(pushes, expected_pushes, "pushes of a changed top 10")
    eq(len(seen), EVENTS, "distinct events")

    for board, scores in boards.items():
        top100 = r.zrevrange(board, 0, 99, withscores=True)
        eq(top100, as_float_pairs(by_rank(scores)[:100]), f"{board}: top 100")
        eq(r.zcard(board), len(scores), f"{board}: ZCARD")
    some_event = events[0][0]
    ttl = r.ttl(f"seen:{some_event}")
    true(SEEN_TTL - 5 <= ttl <= SEEN_TTL, f"TTL of a dedupe mark is {ttl}")

    # Temporary boards: a weekly one with a week's TTL, set in one MULTI.
    weekly = "rank:likes:week:2025-16"
    pipe = r.pipeline()
    pipe.zincrby(weekly, 1, "article:1")
    pipe.zincrby(weekly, 1, "article:2")
    pipe.zincrby(weekly, 1, "article:1")
    pipe.expire(weekly, WEEK)
    eq(pipe.execute(), [1.0, 1.0, 2.0, True], "weekly board in a transaction")
    true(WEEK - 5 <= r.ttl(weekly) <= WEEK, "weekly board TTL")
    eq(r.zrevrange(weekly, 0, -1, withscores=True), [("article:1", 2.0), ("article:2", 1.0)], "weekly board")

    # A short-lived board vanishes when its TTL runs out.
    hourly = "rank:likes:hour:2025041510"
    pipe = r.pipeline()
    pipe.zincrby(hourly, 1, "article:1")
    pipe.pexpire(hourly, 300)
    pipe.execute()
    true(0 < r.pttl(hourly) <= 300, "hourly board PTTL")
    deadline = time.monotonic() + 5
    while r.exists(hourly) and time.monotonic() < deadline:
        time.sleep(0.05)
    eq(r.exists(hourly), 0, "the hourly board is gone")
    eq(r.zscore(hourly, "article:1"), None, "ZSCORE on the gone board")
