"""Scenario 1: daily step counts with a friends board (fitness app).

Phones upload the day's running total; a queue delivers the uploads in
bursts, out of order, and each burst is applied as one transactional
pipeline of ZADD ... GT CH with many member/score pairs. Friends are a set;
the friends board is one ZINTER with WEIGHTS 1 0. Only the last days stay
in memory: the oldest daily key gets a short TTL and must vanish.
"""
import random
import time

from check import as_float_pairs, by_rank, eq, true

DAYS = ["20250413", "20250414", "20250415"]
USERS = 3000
PAIRS_PER_ZADD = 500
ZADDS_PER_BURST = 4
THREE_DAYS = 3 * 86400


def uploads_for_day(rng):
    """Every upload of one day, (member, running total), in arrival order."""
    uploads = []
    for uid in range(1, USERS + 1):
        if rng.random() < 0.1:
            continue  # did not open the app that day
        totals = sorted(rng.randrange(0, 40000) for _ in range(rng.randint(1, 3)))
        uploads.extend((f"user:{uid}", steps) for steps in totals)
    rng.shuffle(uploads)  # the queue does not keep order
    return uploads


def batches(uploads):
    """ZADD mappings of up to PAIRS_PER_ZADD members; a member uploaded twice
    in one batch keeps its larger total (what GT would keep anyway)."""
    batch = {}
    for member, steps in uploads:
        if member not in batch and len(batch) == PAIRS_PER_ZADD:
            yield batch
            batch = {}
        batch[member] = max(steps, batch.get(member, steps))
    if batch:
        yield batch


def apply_model(board, batch):
    """Applies one ZADD GT CH to the model; returns the count CH reports."""
    changed = 0
    for member, steps in batch.items():
        if member not in board or steps > board[member]:
            board[member] = steps
            changed += 1
    return changed


def load_day(r, key, uploads, board):
    all_batches = list(batches(uploads))
    for i in range(0, len(all_batches), ZADDS_PER_BURST):
        burst = all_batches[i : i + ZADDS_PER_BURST]
        pipe = r.pipeline()  # MULTI ... EXEC: a burst lands whole or not at all
        for batch in burst:
            pipe.zadd(key, batch, gt=True, ch=True)
        pipe.expire(key, THREE_DAYS)
        replies = pipe.execute()
        expected = [apply_model(board, b) for b in burst] + [True]
        eq(replies, expected, f"{key}: ZADD GT CH counts of a burst")


def run(r):
    rng = random.Random(20250415)
    boards = {}
    for day in DAYS:
        key = f"step_rank:{day}"
        boards[day] = {}
        load_day(r, key, uploads_for_day(rng), boards[day])
        eq(r.zcard(key), len(boards[day]), f"{key}: ZCARD")
        top10 = r.zrevrange(key, 0, 9, withscores=True)
        eq(top10, as_float_pairs(by_rank(boards[day])[:10]), f"{key}: top 10")
        member, steps = rng.choice(list(boards[day].items()))
        eq(r.zscore(key, member), float(steps), f"{key}: ZSCORE {member}")

    # A friend list of 300 ids, some of whom never uploaded today.
    today = DAYS[-1]
    day_key = f"step_rank:{today}"
    friends_key = "friends:1001"
    friends = {f"user:{uid}" for uid in rng.sample(range(1, USERS + 600), 300)}
    eq(r.sadd(friends_key, *friends), len(friends), "SADD friends")
    eq(r.sadd(friends_key, *list(friends)[:10]), 0, "SADD of friends already there")
    eq(r.smembers(friends_key), friends, "SMEMBERS friends")
    some_friend = next(iter(friends))
    true(r.sismember(friends_key, some_friend), "SISMEMBER of a friend")
    true(not r.sismember(friends_key, "user:1001"), "SISMEMBER of a stranger")

    friend_board = {m: s for m, s in boards[today].items() if m in friends}
    expected_board = as_float_pairs(by_rank(friend_board))

    # One round trip: the plain set counts as a sorted set of score 1,
    # weighted 0, so each score is the day's steps. ZINTER answers in
    # ascending order; the app shows it descending.
    inter = r.zinter({day_key: 1, friends_key: 0}, withscores=True)
    eq(inter, list(reversed(expected_board)), "ZINTER ... WEIGHTS 1 0 order")
    ordered = sorted(inter, key=lambda p: (p[1], p[0]), reverse=True)
    eq(ordered, expected_board, "friends board")

    # The way most apps do it today: members, then one ZMSCORE.
    members = sorted(r.smembers(friends_key))
    scores = r.zmscore(day_key, members)
    by_hand = {m: s for m, s in zip(members, scores) if s is not None}
    eq(by_rank(by_hand), expected_board, "friends board by SMEMBERS + ZMSCORE")

    # Hot and cold: the oldest day leaves memory.
    oldest = f"step_rank:{DAYS[0]}"
    true(r.expire(oldest, 1), "EXPIRE on the oldest day")
    eq(r.ttl(oldest), 1, "TTL of the oldest day")
    for day in DAYS[1:]:
        ttl = r.ttl(f"step_rank:{day}")
        true(THREE_DAYS - 5 <= ttl <= THREE_DAYS, f"TTL of {day} is {ttl}")
    deadline = time.monotonic() + 5
    while r.exists(oldest) and time.monotonic() < deadline:
        time.sleep(0.1)
    eq(r.exists(oldest), 0, "the expired day is gone")
    eq(r.zrevrange(oldest, 0, 9, withscores=True), [], "top 10 of the expired day")
    eq(r.zcard(oldest), 0, "ZCARD of the expired day")
    for day in DAYS[1:]:
        eq(r.zcard(f"step_rank:{day}"), len(boards[day]), f"{day} still hot")
