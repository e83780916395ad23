// Scenario 2: game server power ranking with ties broken by time.
//
// The score is `power + (BASE - t) / BASE`: equal power, the player who got
// there first ranks higher. Every score the client reads back must be the
// very number it sent (the server prints 17 significant digits, as Redis).
"use strict";
const { eq, ok, Rng, byRank, pairs } = require("./check");

const BASE = 317242022400; // a far-future unix second (year 12023)

const tieScore = (power, t) => power + (BASE - t) / BASE;

/** C's %.17g for the plain (non-exponent) numbers of this board. */
function g17(x) {
  const s = x.toPrecision(17);
  return s.includes(".") ? s.replace(/\.?0+$/, "") : s;
}

/** Map member -> [power, t], with many equal powers. */
function makeBoard(rng, players) {
  const powers = Array.from({ length: players / 4 }, () => rng.range(1000000, 2000000));
  const board = new Map();
  for (let pid = 1; pid <= players; pid++) {
    const power = rng.random() < 0.5 ? rng.choice(powers) : rng.range(1000000, 2000000);
    board.set(`player:${pid}`, [power, rng.range(1700000000, 1760000000)]);
  }
  return board;
}

async function checkBoard(redis, key, scores) {
  const model = byRank(scores);
  const flat = await redis.zrevrange(key, 0, -1, "WITHSCORES");
  eq(pairs(flat), model, `${key}: whole board`);
  const texts = flat.filter((_, i) => i % 2 === 1);
  eq(texts, model.map(([, s]) => g17(s)), `${key}: score texts`);
}

async function runBoard(redis, rng, key, players) {
  const board = makeBoard(rng, players);
  const scores = new Map([...board].map(([m, [p, t]]) => [m, tieScore(p, t)]));
  const args = [];
  for (const [m, s] of scores) args.push(s, m);
  eq(await redis.zadd(key, ...args), players, `${key}: ZADD`);
  await checkBoard(redis, key, scores);

  // Top 3 as the game asks for it: ZRANGE ... REV WITHSCORES.
  const top3 = pairs(await redis.zrange(key, 0, 2, "REV", "WITHSCORES"));
  eq(top3, byRank(scores).slice(0, 3), `${key}: top 3`);

  // Equal power: who got there first ranks higher.
  const byPower = new Map();
  for (const [member, [power, t]] of board) {
    if (!byPower.has(power)) byPower.set(power, []);
    byPower.get(power).push([t, member]);
  }
  const ties = [...byPower.values()].filter((g) => g.length > 1);
  ok(ties.length > 0, `${key}: the board has equal powers`);
  for (const group of ties) {
    group.sort((a, b) => a[0] - b[0]);
    const ranks = [];
    for (const [, member] of group) ranks.push(await redis.zrevrank(key, member));
    eq(ranks, [...ranks].sort((a, b) => a - b), `${key}: earlier time ranks higher`);
  }

  // A player's place and score.
  const order = byRank(scores).map(([m]) => m);
  for (const member of rng.sample(order, 20)) {
    eq(await redis.zrevrank(key, member), order.indexOf(member), `${key}: ZREVRANK ${member}`);
    eq(Number(await redis.zscore(key, member)), scores.get(member), `${key}: ZSCORE ${member}`);
  }

  // Power gained in a fight: ZINCRBY keeps the time part.
  for (const member of rng.sample(order, 10)) {
    const delta = rng.range(1, 50000);
    const expected = scores.get(member) + delta;
    eq(Number(await redis.zincrby(key, delta, member)), expected, `${key}: ZINCRBY ${member}`);
    scores.set(member, expected);
  }
  // A new power record re-stamps the time part: ZADD XX with the new score.
  const member = order[order.length - 1];
  const [power] = board.get(member);
  scores.set(member, tieScore(power + 1000000, 1760000100));
  eq(await redis.zadd(key, "XX", "CH", scores.get(member), member), 1, `${key}: ZADD XX CH`);
  eq(await redis.zadd(key, "XX", 1, "player:new"), 0, `${key}: ZADD XX of a new member`);
  const after = byRank(scores).map(([m]) => m);
  eq(await redis.zrevrank(key, member), after.indexOf(member), `${key}: rank after the record`);
  await checkBoard(redis, key, scores);
}

async function run(redis) {
  const rng = new Rng(339);
  await runBoard(redis, rng, "leaderboard:339", 300); // past 128 members: skiplist
  await runBoard(redis, rng, "leaderboard:340", 60); // compact encoding
  eq(await redis.zrevrank("leaderboard:339", "player:none"), null, "ZREVRANK of a stranger");
}

module.exports = { run };
