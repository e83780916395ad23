"""Scenario 4: one vote per user and topic, live tally.

Who voted is a bitmap per topic (bit = user id); the tally is the sorted set
`topic_rank`. The vote is one Lua script (GETBIT, SETBIT, ZINCRBY), loaded
with register_script and sent in pipelines; duplicates must count once. A
per-user lock is `SET lock:user:<id> 1 NX EX 5`. After a restart with the
AOF on, `verify` finds the votes remembered.
"""
import random

from check import by_rank, eq, true

VOTE = """
if redis.call('GETBIT', KEYS[1], tonumber(ARGV[1])) == 1 then
  return 0
end
redis.call('SETBIT', KEYS[1], tonumber(ARGV[1]), 1)
redis.call('ZINCRBY', KEYS[2], 1, ARGV[2])
return 1
"""

TOPICS = [f"topic_{i}" for i in range(1, 6)]
VOTERS = 3000
MAX_USER = 1_000_000
BATCH = 500


def ballots(rng):
    """(user id, topic) in sending order, about 30% of them resent."""
    users = rng.sample(range(MAX_USER), VOTERS - 2) + [0, MAX_USER - 1]
    sent = []
    for user in users:
        for topic in rng.sample(TOPICS, rng.randint(1, 3)):
            sent.append((user, topic))
    for ballot in rng.sample(sent, len(sent) * 3 // 10):
        sent.insert(rng.randrange(len(sent) + 1), ballot)
    return sent


def vote(script, client, user, topic):
    return script(keys=[f"vote:topic:{topic}", "topic_rank"], args=[user, topic], client=client)


def write(r):
    rng = random.Random(7)
    script = r.register_script(VOTE)
    voters = {topic: set() for topic in TOPICS}
    sent = ballots(rng)
    for i in range(0, len(sent), BATCH):
        batch = sent[i : i + BATCH]
        pipe = r.pipeline(transaction=False)
        for user, topic in batch:
            vote(script, pipe, user, topic)
        expected = []
        for user, topic in batch:
            expected.append(0 if user in voters[topic] else 1)
            voters[topic].add(user)
        eq(pipe.execute(), expected, "vote script replies (1 = counted)")

    tally = {topic: len(users) for topic, users in voters.items()}
    eq(r.zrevrange("topic_rank", 0, 9, withscores=True), [(t, float(n)) for t, n in by_rank(tally)], "live ranking")
    for topic, users in voters.items():
        key = f"vote:topic:{topic}"
        eq(r.bitcount(key), len(users), f"{key}: BITCOUNT")
        eq(r.strlen(key), max(users) // 8 + 1, f"{key}: bitmap sized to the highest bit")
        for user in rng.sample(sorted(users), 50):
            eq(r.getbit(key, user), 1, f"{key}: GETBIT of voter {user}")
        for user in rng.sample(range(MAX_USER), 50):
            eq(r.getbit(key, user), int(user in users), f"{key}: GETBIT of user {user}")
    # A single vote through EVALSHA, outside any pipeline.
    user, topic = sent[0]
    eq(vote(script, r, user, topic), 0, "a resent vote")

    # The per-user lock.
    lock = "lock:user:1001"
    true(r.set(lock, 1, nx=True, ex=5), "the lock is free")
    eq(r.set(lock, 1, nx=True, ex=5), None, "the lock is held")
    true(0 < r.ttl(lock) <= 5, "the lock expires")
    eq(r.delete(lock), 1, "release the lock")
    true(r.set(lock, 1, nx=True, ex=5), "the lock is free again")
    eq(r.delete(lock), 1, "release the lock again")


def verify(r):
    """After a restart: votes are still counted once and new ones still land
    (the script cache is empty now; register_script loads it again)."""
    rng = random.Random(7)
    sent = ballots(rng)
    script = r.register_script(VOTE)
    before = dict(r.zrevrange("topic_rank", 0, -1, withscores=True))
    pipe = r.pipeline(transaction=False)
    for user, topic in sent[:100]:
        vote(script, pipe, user, topic)
    eq(pipe.execute(), [0] * 100, "votes resent after the restart")
    voted = {(u, t) for u, t in sent}
    newcomer = next(u for u in range(MAX_USER) if (u, "topic_1") not in voted)
    eq(vote(script, r, newcomer, "topic_1"), 1, "a new vote after the restart")
    eq(r.getbit("vote:topic:topic_1", newcomer), 1, "the new voter's bit")
    eq(r.zscore("topic_rank", "topic_1"), before["topic_1"] + 1, "topic_1 tally")
