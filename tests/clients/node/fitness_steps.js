// Scenario 1: daily step counts with a friends board (fitness app).
//
// Phones upload the day's running total; a queue delivers the uploads in
// bursts, out of order, and each burst is applied as one MULTI of
// ZADD ... GT CH with many member/score pairs. Friends are a set; the
// friends board is one ZINTER with WEIGHTS 1 0. Only the last days stay in
// memory: the oldest daily key gets a short TTL and must vanish.
"use strict";
const { eq, ok, Rng, byRank, pairs, results, sleep } = require("./check");

const DAYS = ["20250413", "20250414", "20250415"];
const USERS = 3000;
const PAIRS_PER_ZADD = 500;
const ZADDS_PER_BURST = 4;
const THREE_DAYS = 3 * 86400;

/** Every upload of one day, [member, running total], in arrival order. */
function uploadsForDay(rng) {
  const uploads = [];
  for (let uid = 1; uid <= USERS; uid++) {
    if (rng.random() < 0.1) continue; // did not open the app that day
    const n = rng.range(1, 4);
    const totals = Array.from({ length: n }, () => rng.range(0, 40000)).sort((a, b) => a - b);
    for (const steps of totals) uploads.push([`user:${uid}`, steps]);
  }
  return rng.shuffle(uploads); // the queue does not keep order
}

/** Maps of up to PAIRS_PER_ZADD members; a member uploaded twice in one
 *  batch keeps its larger total (what GT would keep anyway). */
function batches(uploads) {
  const out = [];
  let batch = new Map();
  for (const [member, steps] of uploads) {
    if (!batch.has(member) && batch.size === PAIRS_PER_ZADD) {
      out.push(batch);
      batch = new Map();
    }
    batch.set(member, Math.max(steps, batch.get(member) ?? steps));
  }
  if (batch.size) out.push(batch);
  return out;
}

/** Applies one ZADD GT CH to the model; returns the count CH reports. */
function applyModel(board, batch) {
  let changed = 0;
  for (const [member, steps] of batch) {
    if (!board.has(member) || steps > board.get(member)) {
      board.set(member, steps);
      changed++;
    }
  }
  return changed;
}

async function loadDay(redis, key, uploads, board) {
  const all = batches(uploads);
  for (let i = 0; i < all.length; i += ZADDS_PER_BURST) {
    const burst = all.slice(i, i + ZADDS_PER_BURST);
    const multi = redis.multi(); // a burst lands whole or not at all
    for (const batch of burst) {
      const args = [];
      for (const [member, steps] of batch) args.push(steps, member);
      multi.zadd(key, "GT", "CH", ...args);
    }
    multi.expire(key, THREE_DAYS);
    const replies = results(await multi.exec());
    const expected = burst.map((b) => applyModel(board, b)).concat([1]);
    eq(replies, expected, `${key}: ZADD GT CH counts of a burst`);
  }
}

async function run(redis) {
  const rng = new Rng(20250415);
  const boards = new Map();
  for (const day of DAYS) {
    const key = `step_rank:${day}`;
    const board = new Map();
    boards.set(day, board);
    await loadDay(redis, key, uploadsForDay(rng), board);
    eq(await redis.zcard(key), board.size, `${key}: ZCARD`);
    const top10 = pairs(await redis.zrevrange(key, 0, 9, "WITHSCORES"));
    eq(top10, byRank(board).slice(0, 10), `${key}: top 10`);
    const [member, steps] = rng.choice([...board]);
    eq(await redis.zscore(key, member), String(steps), `${key}: ZSCORE ${member}`);
  }

  // A friend list of 300 ids, some of whom never uploaded today.
  const today = DAYS[DAYS.length - 1];
  const dayKey = `step_rank:${today}`;
  const friendsKey = "friends:1001";
  const ids = rng.sample(Array.from({ length: USERS + 599 }, (_, i) => i + 1), 300);
  const friends = ids.map((id) => `user:${id}`);
  eq(await redis.sadd(friendsKey, ...friends), friends.length, "SADD friends");
  eq(await redis.sadd(friendsKey, ...friends.slice(0, 10)), 0, "SADD of friends already there");
  eq((await redis.smembers(friendsKey)).sort(), [...friends].sort(), "SMEMBERS friends");
  eq(await redis.sismember(friendsKey, friends[0]), 1, "SISMEMBER of a friend");
  eq(await redis.sismember(friendsKey, "user:1001"), 0, "SISMEMBER of a stranger");

  const friendSet = new Set(friends);
  const board = boards.get(today);
  const friendBoard = new Map([...board].filter(([m]) => friendSet.has(m)));
  const expected = byRank(friendBoard);

  // One round trip: the plain set counts as a sorted set of score 1,
  // weighted 0, so each score is the day's steps. ZINTER answers in
  // ascending order; the app shows it descending.
  const inter = pairs(await redis.zinter(2, dayKey, friendsKey, "WEIGHTS", 1, 0, "WITHSCORES"));
  eq(inter, [...expected].reverse(), "ZINTER ... WEIGHTS 1 0 order");
  eq(byRank(new Map(inter)), expected, "friends board");

  // The way most apps do it today: members, then one ZMSCORE.
  const members = await redis.smembers(friendsKey);
  const scores = await redis.zmscore(dayKey, ...members);
  const byHand = new Map();
  members.forEach((m, i) => scores[i] !== null && byHand.set(m, Number(scores[i])));
  eq(byRank(byHand), expected, "friends board by SMEMBERS + ZMSCORE");

  // Hot and cold: the oldest day leaves memory.
  const oldest = `step_rank:${DAYS[0]}`;
  eq(await redis.expire(oldest, 1), 1, "EXPIRE on the oldest day");
  eq(await redis.ttl(oldest), 1, "TTL of the oldest day");
  for (const day of DAYS.slice(1)) {
    const ttl = await redis.ttl(`step_rank:${day}`);
    ok(ttl >= THREE_DAYS - 5 && ttl <= THREE_DAYS, `TTL of ${day} is ${ttl}`);
  }
  const deadline = Date.now() + 5000;
  while ((await redis.exists(oldest)) && Date.now() < deadline) await sleep(100);
  eq(await redis.exists(oldest), 0, "the expired day is gone");
  eq(await redis.zrevrange(oldest, 0, 9, "WITHSCORES"), [], "top 10 of the expired day");
  eq(await redis.zcard(oldest), 0, "ZCARD of the expired day");
  for (const day of DAYS.slice(1)) {
    eq(await redis.zcard(`step_rank:${day}`), boards.get(day).size, `${day} still hot`);
  }
}

module.exports = { run };
