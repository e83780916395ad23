// Scenario 5: prize campaign with strict, fair ranking.
//
// Scores pack the time into the low digits: `points * 10^7 + (A - t)`, so
// equal points rank the earlier scorer first. Integer scores up to 2^53 must
// come back exactly, as integers in the reply text (never `1e+15`), and
// ranks must be exact after concurrent ZINCRBYs from several connections.
"use strict";
const { eq, ok, Rng, byRank, pairs, results } = require("./check");

const KEY = "campaign:spring";
const END = 1760000000; // campaign end, unix seconds
const A = END + 2000000;
const START = END - 92 * 86400;
const USERS = 500;
const CONNECTIONS = 4;
const INCRS_PER_CONNECTION = 150;

const packed = (points, t) => points * 1e7 + (A - t);

async function checkBoard(redis, scores) {
  const model = byRank(scores);
  const flat = await redis.zrevrange(KEY, 0, -1, "WITHSCORES");
  const texts = [];
  for (let i = 0; i < flat.length; i += 2) texts.push([flat[i], flat[i + 1]]);
  eq(texts, model.map(([m, s]) => [m, String(s)]), "campaign board, score texts");
  return model.map(([m]) => m);
}

async function run(redis, connect) {
  const rng = new Rng(5);
  const commonPoints = Array.from({ length: 20 }, () => rng.range(0, 900000000));
  const scores = new Map();
  for (let uid = 1; uid <= USERS; uid++) {
    const points = rng.random() < 0.4 ? rng.choice(commonPoints) : rng.range(0, 900000000);
    scores.set(`user:${uid}`, packed(points, rng.range(START, END + 1)));
  }
  scores.set("edge:2^53", 2 ** 53);
  scores.set("edge:2^53-1", 2 ** 53 - 1);
  scores.set("example", 1000000001999999);
  const members = [...scores.keys()];
  const pipe = redis.pipeline();
  for (let i = 0; i < members.length; i += 100) {
    const args = [];
    for (const m of members.slice(i, i + 100)) args.push(scores.get(m), m);
    pipe.zadd(KEY, ...args);
  }
  eq(results(await pipe.exec()).reduce((a, b) => a + b, 0), scores.size, "members added");
  eq(await redis.zscore(KEY, "example"), "1000000001999999", "ZSCORE text");
  eq(await redis.zrange(KEY, 0, 0, "REV", "WITHSCORES"), ["edge:2^53", "9007199254740992"], "2^53 as text");
  let order = await checkBoard(redis, scores);

  // Equal points: the later scorer ranks lower.
  const early = packed(123456789, START + 10);
  const late = packed(123456789, START + 20);
  await redis.zadd(KEY, early, "tie:early", late, "tie:late");
  scores.set("tie:early", early);
  scores.set("tie:late", late);
  eq(await redis.zrevrank(KEY, "tie:late"), (await redis.zrevrank(KEY, "tie:early")) + 1, "equal points: later ranks lower");

  // Concurrent updates from several connections: points scored at a later
  // time add dp * 10^7 minus the time that passed.
  const players = order.filter((m) => m.startsWith("user:") && scores.get(m) < 6e15).slice(0, 40);
  const plans = Array.from({ length: CONNECTIONS }, () =>
    Array.from({ length: INCRS_PER_CONNECTION }, () => [rng.choice(players), rng.range(1, 1000) * 1e7 - rng.range(0, 86400)]),
  );
  const clients = plans.map(() => connect());
  try {
    await Promise.all(
      plans.map(async (plan, i) => {
        for (const [member, delta] of plan) {
          const text = await clients[i].zincrby(KEY, delta, member);
          ok(/^\d+$/.test(text), `ZINCRBY ${member} gave ${text}`);
        }
      }),
    );
  } finally {
    await Promise.all(clients.map((c) => c.quit()));
  }
  for (const plan of plans) for (const [member, delta] of plan) scores.set(member, scores.get(member) + delta);
  order = await checkBoard(redis, scores);

  // Prizes for place 10 and 11 differ: ranks must be exact.
  for (let place = 0; place < 30; place++) {
    eq(await redis.zrevrank(KEY, order[place]), place, `ZREVRANK of place ${place}`);
  }
  eq(
    pairs(await redis.zrevrange(KEY, 9, 10, "WITHSCORES")),
    [order[9], order[10]].map((m) => [m, scores.get(m)]),
    "places 10 and 11",
  );
  eq(await redis.zcount(KEY, `(${scores.get(order[10])}`, "+inf"), 10, "ZCOUNT above place 11");
}

module.exports = { run };
