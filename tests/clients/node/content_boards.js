// Scenario 3: real-time boards for likes, comments and points.
//
// Events come from a queue that may deliver one twice; the consumer is
// idempotent: SET seen:<event id> 1 NX EX marks an event, and only a first
// delivery is applied with ZINCRBY. The top 10 is watched after every batch
// (an app pushes it only when it changed); temporary boards carry a TTL.
"use strict";
const { eq, ok, Rng, byRank, pairs, results, sleep } = require("./check");

const ARTICLES = 300;
const EVENTS = 4000;
const BATCH = 200;
const SEEN_TTL = 3600;
const WEEK = 7 * 86400;

/** [event id, board, member, delta]; about one in five delivered twice. */
function makeEvents(rng) {
  const events = [];
  for (let seq = 0; seq < EVENTS; seq++) {
    const article = `article:${rng.range(1, ARTICLES + 1)}`;
    const kind = rng.choice(["likes", "likes", "comments", "points"]);
    let delta;
    if (kind === "likes") delta = rng.random() < 0.8 ? 1 : -1; // -1: unlike
    else if (kind === "comments") delta = 1;
    else delta = rng.range(1, 11);
    events.push([`${article}:${kind}:${1744700000 + seq}`, `rank:${kind}`, article, delta]);
  }
  for (const event of rng.sample(events, EVENTS / 5)) {
    events.splice(rng.range(0, events.length + 1), 0, event);
  }
  return events;
}

/** Applies one batch: SET NX for every event, then ZINCRBY for the new. */
async function consume(redis, batch, boards, seen) {
  const marks = redis.pipeline();
  for (const [id] of batch) marks.set(`seen:${id}`, 1, "EX", SEEN_TTL, "NX");
  const first = results(await marks.exec());
  const expectedFirst = batch.map(([id]) => {
    const fresh = !seen.has(id);
    seen.add(id);
    return fresh ? "OK" : null;
  });
  eq(first, expectedFirst, "SET NX EX marks only first deliveries");

  const multi = redis.multi();
  const expected = [];
  batch.forEach(([, board, member, delta], i) => {
    if (first[i] !== "OK") return;
    multi.zincrby(board, delta, member);
    if (!boards.has(board)) boards.set(board, new Map());
    const scores = boards.get(board);
    scores.set(member, (scores.get(member) ?? 0) + delta);
    expected.push(String(scores.get(member)));
  });
  eq(results(await multi.exec()), expected, "ZINCRBY replies");
}

async function run(redis) {
  const rng = new Rng(42);
  const events = makeEvents(rng);
  const boards = new Map();
  const seen = new Set();
  let lastTop = null;
  let modelLast = null;
  let pushes = 0;
  let expectedPushes = 0;
  for (let i = 0; i < events.length; i += BATCH) {
    await consume(redis, events.slice(i, i + BATCH), boards, seen);
    const top = pairs(await redis.zrevrange("rank:likes", 0, 9, "WITHSCORES"));
    const modelTop = byRank(boards.get("rank:likes")).slice(0, 10);
    eq(top, modelTop, "top 10 likes after a batch");
    if (JSON.stringify(top) !== JSON.stringify(lastTop)) pushes++;
    if (JSON.stringify(modelTop) !== JSON.stringify(modelLast)) expectedPushes++;
    lastTop = top;
    modelLast = modelTop;
  }
  eq(pushes, expectedPushes, "pushes of a changed top 10");
  eq(seen.size, EVENTS, "distinct events");

  for (const [board, scores] of boards) {
    const top100 = pairs(await redis.zrevrange(board, 0, 99, "WITHSCORES"));
    eq(top100, byRank(scores).slice(0, 100), `${board}: top 100`);
    eq(await redis.zcard(board), scores.size, `${board}: ZCARD`);
  }
  const ttl = await redis.ttl(`seen:${events[0][0]}`);
  ok(ttl >= SEEN_TTL - 5 && ttl <= SEEN_TTL, `TTL of a dedupe mark is ${ttl}`);

  // Temporary boards: a weekly one with a week's TTL, set in one MULTI.
  const weekly = "rank:likes:week:2025-16";
  const replies = await redis
    .multi()
    .zincrby(weekly, 1, "article:1")
    .zincrby(weekly, 1, "article:2")
    .zincrby(weekly, 1, "article:1")
    .expire(weekly, WEEK)
    .exec();
  eq(results(replies), ["1", "1", "2", 1], "weekly board in a transaction");
  const weekTtl = await redis.ttl(weekly);
  ok(weekTtl >= WEEK - 5 && weekTtl <= WEEK, "weekly board TTL");
  eq(pairs(await redis.zrevrange(weekly, 0, -1, "WITHSCORES")), [["article:1", 2], ["article:2", 1]], "weekly board");

  // A short-lived board vanishes when its TTL runs out.
  const hourly = "rank:likes:hour:2025041510";
  await redis.multi().zincrby(hourly, 1, "article:1").pexpire(hourly, 300).exec();
  const pttl = await redis.pttl(hourly);
  ok(pttl > 0 && pttl <= 300, "hourly board PTTL");
  const deadline = Date.now() + 5000;
  while ((await redis.exists(hourly)) && Date.now() < deadline) await sleep(50);
  eq(await redis.exists(hourly), 0, "the hourly board is gone");
  eq(await redis.zscore(hourly, "article:1"), null, "ZSCORE on the gone board");
}

module.exports = { run };
