// Scenario 4: one vote per user and topic, live tally.
//
// Who voted is a bitmap per topic (bit = user id); the tally is the sorted
// set `topic_rank`. The vote is one Lua script (GETBIT, SETBIT, ZINCRBY),
// defined with defineCommand and sent in pipelines; duplicates must count
// once. A per-user lock is `SET lock:user:<id> 1 NX EX 5`. After a restart
// with the AOF on, `verify` finds the votes remembered.
"use strict";
const { eq, ok, Rng, byRank, pairs, results } = require("./check");

const VOTE = `
if redis.call('GETBIT', KEYS[1], tonumber(ARGV[1])) == 1 then
  return 0
end
redis.call('SETBIT', KEYS[1], tonumber(ARGV[1]), 1)
redis.call('ZINCRBY', KEYS[2], 1, ARGV[2])
return 1
`;

const TOPICS = [1, 2, 3, 4, 5].map((i) => `topic_${i}`);
const VOTERS = 3000;
const MAX_USER = 1000000;
const BATCH = 500;

/** Distinct ids in [0, MAX_USER). */
function someUsers(rng, n) {
  const users = new Set();
  while (users.size < n) users.add(rng.range(0, MAX_USER));
  return [...users];
}

/** [user id, topic] in sending order, about 30% of them resent. */
function ballots(rng) {
  const users = someUsers(rng, VOTERS).filter((u) => u !== 0 && u !== MAX_USER - 1);
  users.push(0, MAX_USER - 1);
  const sent = [];
  for (const user of users) {
    for (const topic of rng.sample(TOPICS, rng.range(1, 4))) sent.push([user, topic]);
  }
  for (const ballot of rng.sample(sent, Math.floor((sent.length * 3) / 10))) {
    sent.splice(rng.range(0, sent.length + 1), 0, ballot);
  }
  return sent;
}

function define(redis) {
  redis.defineCommand("vote", { numberOfKeys: 2, lua: VOTE });
}

const vote = (client, user, topic) => client.vote(`vote:topic:${topic}`, "topic_rank", user, topic);

async function write(redis) {
  const rng = new Rng(7);
  define(redis);
  const voters = new Map(TOPICS.map((t) => [t, new Set()]));
  const sent = ballots(rng);
  for (let i = 0; i < sent.length; i += BATCH) {
    const batch = sent.slice(i, i + BATCH);
    const pipe = redis.pipeline();
    for (const [user, topic] of batch) vote(pipe, user, topic);
    const expected = batch.map(([user, topic]) => {
      const counted = voters.get(topic).has(user) ? 0 : 1;
      voters.get(topic).add(user);
      return counted;
    });
    eq(results(await pipe.exec()), expected, "vote script replies (1 = counted)");
  }

  const tally = new Map([...voters].map(([t, users]) => [t, users.size]));
  eq(pairs(await redis.zrevrange("topic_rank", 0, 9, "WITHSCORES")), byRank(tally), "live ranking");
  for (const [topic, users] of voters) {
    const key = `vote:topic:${topic}`;
    eq(await redis.bitcount(key), users.size, `${key}: BITCOUNT`);
    eq(await redis.strlen(key), Math.floor(Math.max(...users) / 8) + 1, `${key}: bitmap sized to the highest bit`);
    for (const user of rng.sample([...users], 50)) {
      eq(await redis.getbit(key, user), 1, `${key}: GETBIT of voter ${user}`);
    }
    for (const user of someUsers(rng, 50)) {
      eq(await redis.getbit(key, user), users.has(user) ? 1 : 0, `${key}: GETBIT of user ${user}`);
    }
  }
  // A single vote, outside any pipeline.
  const [user, topic] = sent[0];
  eq(await vote(redis, user, topic), 0, "a resent vote");

  // The per-user lock.
  const lock = "lock:user:1001";
  eq(await redis.set(lock, 1, "EX", 5, "NX"), "OK", "the lock is free");
  eq(await redis.set(lock, 1, "EX", 5, "NX"), null, "the lock is held");
  const ttl = await redis.ttl(lock);
  ok(ttl > 0 && ttl <= 5, "the lock expires");
  eq(await redis.del(lock), 1, "release the lock");
  eq(await redis.set(lock, 1, "EX", 5, "NX"), "OK", "the lock is free again");
  eq(await redis.del(lock), 1, "release the lock again");
}

/** After a restart: votes are still counted once and new ones still land
 *  (the server's script cache is empty now). */
async function verify(redis) {
  const rng = new Rng(7);
  const sent = ballots(rng);
  define(redis);
  const before = new Map(pairs(await redis.zrevrange("topic_rank", 0, -1, "WITHSCORES")));
  const pipe = redis.pipeline();
  for (const [user, topic] of sent.slice(0, 100)) vote(pipe, user, topic);
  eq(results(await pipe.exec()), new Array(100).fill(0), "votes resent after the restart");
  const voted = new Set(sent.filter(([, t]) => t === "topic_1").map(([u]) => u));
  let newcomer = 0;
  while (voted.has(newcomer)) newcomer++;
  eq(await vote(redis, newcomer, "topic_1"), 1, "a new vote after the restart");
  eq(await redis.getbit("vote:topic:topic_1", newcomer), 1, "the new voter's bit");
  eq(Number(await redis.zscore("topic_rank", "topic_1")), before.get("topic_1") + 1, "topic_1 tally");
}

module.exports = { write, verify };
