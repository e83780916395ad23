"""Scenario 5: prize campaign with strict, fair ranking.

Scores pack the time into the low digits: `points * 10^7 + (A - t)`, so
equal points rank the earlier scorer first. Integer scores up to 2^53 must
come back exactly, as integers in the reply text (never `1e+15`), and ranks
must be exact after concurrent ZINCRBYs from several connections.
"""
import random
import threading

from check import by_rank, eq, true

KEY = "campaign:spring"
END = 1_760_000_000  # campaign end, unix seconds
A = END + 2_000_000
START = END - 92 * 86400
USERS = 500
THREADS = 4
INCRS_PER_THREAD = 150


def packed(points, t):
    return points * 10**7 + (A - t)


def check_board(r, scores):
    model = by_rank(scores)
    raw = r.zrevrange(KEY, 0, -1, withscores=True, score_cast_func=str)
    eq([m for m, _ in raw], [m for m, _ in model], "campaign order")
    for (member, text), (_, score) in zip(raw, model):
        eq(text, str(score), f"score text of {member}")
    parsed = r.zrevrange(KEY, 0, -1, withscores=True)
    eq([int(s) for _, s in parsed], [s for _, s in model], "scores parsed by redis-py")
    return [m for m, _ in model]


def run(r):
    rng = random.Random(5)
    common_points = [rng.randrange(0, 900_000_000) for _ in range(20)]
    scores = {}
    for uid in range(1, USERS + 1):
        points = rng.choice(common_points) if rng.random() < 0.4 else rng.randrange(0, 900_000_000)
        scores[f"user:{uid}"] = packed(points, rng.randrange(START, END + 1))
    scores["edge:2^53"] = 2**53
    scores["edge:2^53-1"] = 2**53 - 1
    scores["example"] = 1000000001999999
    members = list(scores)
    pipe = r.pipeline()
    for i in range(0, len(members), 100):
        pipe.zadd(KEY, {m: scores[m] for m in members[i : i + 100]})
    eq(sum(pipe.execute()), len(scores), "members added")
    eq(r.zscore(KEY, "example"), 1000000001999999.0, "ZSCORE")
    eq(r.zrange(KEY, 0, 0, desc=True, withscores=True, score_cast_func=str), [("edge:2^53", "9007199254740992")], "2^53 as text")
    order = check_board(r, scores)

    # Equal points: the later scorer ranks lower.
    t1, t2 = START + 10, START + 20
    r.zadd(KEY, {"tie:early": packed(123_456_789, t1), "tie:late": packed(123_456_789, t2)})
    scores["tie:early"], scores["tie:late"] = packed(123_456_789, t1), packed(123_456_789, t2)
    eq(r.zrevrank(KEY, "tie:late"), r.zrevrank(KEY, "tie:early") + 1, "equal points: later ranks lower")

    # Concurrent updates from several connections: points scored at a later
    # time add dp * 10^7 minus the time that passed.
    players = [m for m in order if m.startswith("user:") and scores[m] < 6 * 10**15]
    plans = []
    for _ in range(THREADS):
        plan = []
        for _ in range(INCRS_PER_THREAD):
            member = rng.choice(players[:40])  # fight over the top places
            plan.append((member, rng.randrange(1, 1000) * 10**7 - rng.randrange(0, 86400)))
        plans.append(plan)
    errors = []

    def worker(plan):
        try:
            for member, delta in plan:  # a Redis client is thread-safe
                new = r.zincrby(KEY, delta, member)
                if new != int(new):
                    errors.append(f"ZINCRBY {member} gave {new!r}")
        except Exception as e:  # reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(plan,)) for plan in plans]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    eq(errors, [], "concurrent ZINCRBY")
    for plan in plans:
        for member, delta in plan:
            scores[member] += delta
    true(max(scores.values()) <= 2**53, "scores stay within 2^53")
    order = check_board(r, scores)

    # Prizes for place 10 and 11 differ: ranks must be exact.
    for place in range(0, 30):
        eq(r.zrevrank(KEY, order[place]), place, f"ZREVRANK of place {place}")
    tenth = r.zrevrange(KEY, 9, 10, withscores=True, score_cast_func=int)
    eq(tenth, [(order[9], scores[order[9]]), (order[10], scores[order[10]])], "places 10 and 11")
    above = r.zcount(KEY, f"({scores[order[10]]}", "+inf")
    eq(above, 10, "ZCOUNT above place 11")
