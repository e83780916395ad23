"""Scenario 2: game server power ranking with ties broken by time.

The score is `power + (BASE - t) / BASE`: equal power, the player who got
there first ranks higher. Every score the client reads back must be the very
float it sent (the server prints 17 significant digits, as Redis does).
"""
import random

from check import by_rank, eq, true

BASE = 317242022400  # a far-future unix second (year 12023)


def tie_score(power, t):
    return power + (BASE - t) / BASE


def make_board(rng, players):
    """{member: (power, t)} with many equal powers."""
    powers = [rng.randrange(1_000_000, 2_000_000) for _ in range(players // 4)]
    board = {}
    for pid in range(1, players + 1):
        power = rng.choice(powers) if rng.random() < 0.5 else rng.randrange(1_000_000, 2_000_000)
        board[f"player:{pid}"] = (power, rng.randrange(1_700_000_000, 1_760_000_000))
    return board


def check_board(r, key, scores):
    model = by_rank(scores)
    whole = r.zrevrange(key, 0, -1, withscores=True)
    eq(whole, model, f"{key}: whole board")
    raw = r.zrevrange(key, 0, -1, withscores=True, score_cast_func=str)
    for (member, text), (_, sent) in zip(raw, model):
        eq(text, "%.17g" % sent, f"{key}: score text of {member}")


def run_board(r, rng, key, players):
    board = make_board(rng, players)
    scores = {m: tie_score(p, t) for m, (p, t) in board.items()}
    eq(r.zadd(key, scores), players, f"{key}: ZADD")
    check_board(r, key, scores)

    # Top 3 as the game asks for it: ZRANGE ... REV WITHSCORES.
    flat = r.execute_command("ZRANGE", key, 0, 2, "REV", "WITHSCORES")
    top3 = list(zip(flat[0::2], map(float, flat[1::2])))
    eq(top3, by_rank(scores)[:3], f"{key}: top 3")

    # Equal power: who got there first ranks higher.
    by_power = {}
    for member, (power, t) in board.items():
        by_power.setdefault(power, []).append((t, member))
    ties = [sorted(group) for group in by_power.values() if len(group) > 1]
    true(ties, f"{key}: the board has equal powers")
    for group in ties:
        ranks = [r.zrevrank(key, member) for _, member in group]
        eq(ranks, sorted(ranks), f"{key}: earlier time ranks higher among {group}")

    # A player's place and score.
    order = [m for m, _ in by_rank(scores)]
    for member in rng.sample(order, 20):
        eq(r.zrevrank(key, member), order.index(member), f"{key}: ZREVRANK {member}")
        eq(r.zscore(key, member), scores[member], f"{key}: ZSCORE {member}")

    # Power gained in a fight: ZINCRBY keeps the time part.
    for member in rng.sample(order, 10):
        delta = rng.randrange(1, 50_000)
        expected = scores[member] + delta
        eq(r.zincrby(key, delta, member), expected, f"{key}: ZINCRBY {member}")
        scores[member] = expected
    # A new power record re-stamps the time part: ZADD XX with the new score.
    member = order[-1]
    power, _ = board[member]
    scores[member] = tie_score(power + 1_000_000, 1_760_000_100)
    eq(r.zadd(key, {member: scores[member]}, xx=True, ch=True), 1, f"{key}: ZADD XX CH")
    eq(r.zadd(key, {"player:new": 1.0}, xx=True), 0, f"{key}: ZADD XX of a new member")
    eq(r.zrevrank(key, member), [m for m, _ in by_rank(scores)].index(member), f"{key}: rank after the record")
    check_board(r, key, scores)


def run(r):
    rng = random.Random(339)
    run_board(r, rng, "leaderboard:339", 300)  # past 128 members: skiplist
    run_board(r, rng, "leaderboard:340", 60)  # compact encoding
    eq(r.zrevrank("leaderboard:339", "player:none"), None, "ZREVRANK of a stranger")
