// The LB.* leaderboard commands through ioredis's generic call() (RESP2),
// errors, WRONGTYPE, and LB writes inside multi()/exec().
//
//     node lb.js --port P
//
// Prints one line per check group and a closing `N passed, N failed`;
// exits 1 on any failure.
"use strict";
const assert = require("assert");
const Redis = require("ioredis");

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

const port = Number(arg("--port"));

async function expectError(r, want, ...args) {
  let got;
  try {
    got = await r.call(...args);
  } catch (e) {
    assert.strictEqual(e.message, want, `error of ${JSON.stringify(args)}`);
    return;
  }
  throw new Error(`${JSON.stringify(args)} should fail, got ${JSON.stringify(got)}`);
}

// A board of four: carl 110, bob 100 (at 3), alice 100 (at 5), dan 50.
async function fill(r, key, ranking) {
  assert.strictEqual(await r.call("LB.CREATE", key, "RANKING", ranking), "OK");
  await r.call("LB.SUBMIT", key, "alice", 100, "AT", 5, "META", "hi");
  await r.call("LB.SUBMIT", key, "bob", 100, "AT", 3);
  await r.call("LB.SUBMIT", key, "carl", 110, "AT", 7);
  await r.call("LB.SUBMIT", key, "dan", 50, "SUBSCORE", 2, "AT", 9);
}

async function writes() {
  const r = new Redis({ port });
  try {
    const c = (...a) => r.call(...a);
    assert.strictEqual(await c("LB.CREATE", "daily", "ORDER", "DESC", "POLICY", "BEST", "TIEBREAK",
      "EARLIEST", "RANKING", "COMPETITION", "CAPACITY", 1000), "OK");
    assert.strictEqual(await c("TYPE", "daily"), "leaderboard");
    assert.deepStrictEqual(await c("LB.SUBMIT", "daily", "alice", 4200, "SUBSCORE", 3, "META", "lvl7"), [4200, 1, 1]);
    assert.deepStrictEqual(await c("LB.SUBMIT", "daily", "alice", 4000), [4200, 1, 0]);
    assert.deepStrictEqual(await c("LB.SUBMIT", "daily", "bob", 4300, "AT", 1732400000000), [4300, 1, 1]);
    const entry = await c("LB.GET", "daily", "alice");
    assert.deepStrictEqual([...entry.slice(0, 4), entry[5]], [2, "alice", 4200, 3, "lvl7"]);
    assert.ok(Number.isInteger(entry[4]) && entry[4] > 0, `time ${entry[4]}`);
    assert.deepStrictEqual(await c("LB.GET", "daily", "bob"), [1, "bob", 4300, 0, 1732400000000, null]);
    assert.deepStrictEqual(await c("LB.INCR", "likes", "post:9", 42), [42, 1, 1]);
    assert.deepStrictEqual(await c("LB.INCR", "likes", "post:8", 50), [50, 1, 1]);
    assert.deepStrictEqual(await c("LB.INCR", "likes", "post:9", -1, "AT", 10, "META", "m"), [41, 2, 1]);
    assert.deepStrictEqual(await c("LB.INCR", "votes", "post:9", 1, "ID", "vote:7f3a"), [1, 1, 1]);
    assert.deepStrictEqual(await c("LB.INCR", "votes", "post:9", 1, "ID", "vote:7f3a"), [1, 1, 0]);
    assert.deepStrictEqual(await c("LB.SUBMIT", "votes", "post:1", 5, "ID", "vote:7f3a"), [5, null, 0]);
    await c("LB.CREATE", "set", "POLICY", "SET", "ORDER", "ASC");
    await c("LB.SUBMIT", "set", "a", 10);
    assert.deepStrictEqual(await c("LB.SUBMIT", "set", "a", 50), [50, 1, 1]);
    assert.deepStrictEqual(await c("LB.SUBMIT", "set", "b", 20), [20, 1, 1]);
    await c("LB.CREATE", "incr", "POLICY", "INCR");
    await c("LB.SUBMIT", "incr", "a", 10);
    assert.deepStrictEqual(await c("LB.SUBMIT", "incr", "a", 5), [15, 1, 1]);
    await c("LB.CREATE", "cap", "CAPACITY", 2, "TIEBREAK", "LATEST");
    await c("LB.SUBMIT", "cap", "a", 10);
    await c("LB.SUBMIT", "cap", "b", 20);
    assert.deepStrictEqual(await c("LB.SUBMIT", "cap", "c", 5), [5, null, 0]);
    assert.deepStrictEqual(await c("LB.SUBMIT", "cap", "d", 30), [30, 1, 1]);
    assert.deepStrictEqual(await c("LB.TOP", "cap", 5), [[1, "d", 30], [2, "b", 20]]);
    assert.deepStrictEqual(await c("LB.MSUBMIT", "day", "a", 5, "week", "a", 5, "incr", "a", 5),
      [[5, 1, 1], [5, 1, 1], [20, 1, 1]]);
    await expectError(r, "ERR score is not a 64-bit integer", "LB.MSUBMIT", "day", "b", 1, "incr", "a", "x");
    assert.strictEqual(await c("LB.SCORE", "day", "b"), null);
    assert.strictEqual(await c("LB.REM", "set", "a", "b", "nobody"), 2);
    assert.strictEqual(await c("TYPE", "set"), "leaderboard");
    assert.strictEqual(await c("LB.COUNT", "set"), 0);
  } finally {
    r.disconnect();
  }
}

async function reads() {
  const r = new Redis({ port });
  try {
    const c = (...a) => r.call(...a);
    await fill(r, "b", "ORDINAL");
    const top = [[1, "carl", 110], [2, "bob", 100], [3, "alice", 100], [4, "dan", 50]];
    assert.deepStrictEqual(await c("LB.TOP", "b", 10), top);
    assert.deepStrictEqual(await c("LB.TOP", "b", 1, "OFFSET", 2, "WITHSUBSCORE", "WITHTIME", "WITHMETA"),
      [[3, "alice", 100, 0, 5, "hi"]]);
    assert.deepStrictEqual(await c("LB.TOP", "b", 1, "WITHMETA"), [[1, "carl", 110, null]]);
    assert.deepStrictEqual(await c("LB.TOP", "b", "PERCENT", 50), top.slice(0, 2));
    assert.deepStrictEqual(await c("LB.TOP", "nokey", 3), []);
    assert.deepStrictEqual(await c("LB.RANGE", "b", 2, 3), top.slice(1, 3));
    assert.deepStrictEqual(await c("LB.RANGE", "b", -1, -1, "WITHSUBSCORE"), [[4, "dan", 50, 2]]);
    assert.deepStrictEqual(await c("LB.AROUND", "b", "bob", 3), top.slice(0, 3));
    assert.deepStrictEqual(await c("LB.AROUND", "b", "nobody", 2), []);
    assert.deepStrictEqual(await c("LB.GET", "b", "dan"), [4, "dan", 50, 2, 9, null]);
    assert.strictEqual(await c("LB.GET", "b", "nobody"), null);
    assert.strictEqual(await c("LB.SCORE", "b", "carl"), 110);
    assert.strictEqual(await c("LB.RANK", "b", "alice"), 3);
    assert.deepStrictEqual(await c("LB.MRANK", "b", "alice", "x", "carl"), [3, null, 1]);
    assert.strictEqual(await c("LB.PERCENT", "b", "carl"), "25");
    assert.strictEqual(await c("LB.PERCENT", "b", "x"), null);
    assert.strictEqual(await c("LB.COUNT", "b"), 4);
    assert.strictEqual(await c("LB.COUNT", "b", 60, 110), 3);
    const info = await c("LB.INFO", "b");
    assert.deepStrictEqual(info.slice(0, 13), ["order", "DESC", "policy", "BEST", "tiebreak", "EARLIEST",
      "ranking", "ORDINAL", "capacity", 0, "size", 4, "memory"]);
    assert.ok(Number.isInteger(info[13]) && info[13] > 0, `memory ${info[13]}`);
    assert.strictEqual(await c("LB.INFO", "nokey"), null);
    // Rank styles, LB.AMONG and LB.FRIENDS.
    await fill(r, "comp", "COMPETITION");
    await c("LB.SUBMIT", "comp", "eve", 40);
    assert.deepStrictEqual(await c("LB.TOP", "comp", 10),
      [[1, "carl", 110], [2, "bob", 100], [2, "alice", 100], [4, "dan", 50], [5, "eve", 40]]);
    assert.deepStrictEqual(await c("LB.AMONG", "comp", "eve", "alice", "bob", "nobody", "WITHGLOBAL"),
      [[1, "bob", 100, 2], [1, "alice", 100, 2], [3, "eve", 40, 5]]);
    assert.strictEqual(await c("SADD", "friends", "alice", "dan", "stranger"), 3);
    assert.deepStrictEqual(await c("LB.FRIENDS", "comp", "friends", "INCLUDE", "eve", "WITHGLOBAL"),
      [[1, "alice", 100, 2], [2, "dan", 50, 4], [3, "eve", 40, 5]]);
    assert.deepStrictEqual(await c("LB.FRIENDS", "comp", "friends", "WITHMETA"),
      [[1, "alice", 100, "hi"], [2, "dan", 50, null]]);
  } finally {
    r.disconnect();
  }
}

async function errorsAndMulti() {
  const r = new Redis({ port });
  try {
    const wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
    await r.call("LB.CREATE", "e:b");
    await r.set("e:str", "x");
    await expectError(r, "ERR key 'e:b' already exists", "LB.CREATE", "e:b");
    await expectError(r, "ERR unknown option 'FOO'", "LB.CREATE", "e:n", "FOO", 1);
    await expectError(r, "ERR invalid value 'UP'", "LB.CREATE", "e:n", "ORDER", "UP");
    await expectError(r, "ERR score is not a 64-bit integer", "LB.SUBMIT", "e:b", "a", "1.5");
    await expectError(r, "ERR wrong number of arguments for 'lb.submit' command", "LB.SUBMIT", "e:b", "a");
    await expectError(r, "ERR metadata is too long", "LB.SUBMIT", "e:b", "a", 1, "META", "x".repeat(4097));
    await r.call("LB.SUBMIT", "e:b", "a", 10);
    await expectError(r, "ERR increment or decrement would overflow", "LB.INCR", "e:b", "a", "9223372036854775807");
    await expectError(r, wrongtype, "LB.SUBMIT", "e:str", "a", 1);
    await expectError(r, wrongtype, "LB.TOP", "e:str", 1);
    await expectError(r, wrongtype, "LB.FRIENDS", "e:b", "e:str");
    await expectError(r, wrongtype, "ZADD", "e:b", 1, "a");
    // LB writes in MULTI/EXEC.
    const tx = await r.multi()
      .call("LB.CREATE", "t:b", "POLICY", "INCR")
      .call("LB.SUBMIT", "t:b", "a", 5)
      .call("LB.INCR", "t:b", "a", 2)
      .call("LB.MSUBMIT", "t:b", "b", 9, "t:b", "c", 1)
      .call("LB.TOP", "t:b", 10)
      .call("LB.REM", "t:b", "c")
      .exec();
    assert.deepStrictEqual(tx, [[null, "OK"], [null, [5, 1, 1]], [null, [7, 1, 1]],
      [null, [[9, 1, 1], [1, 3, 1]]], [null, [[1, "b", 9], [2, "a", 7], [3, "c", 1]]], [null, 1]]);
    assert.strictEqual(await r.call("LB.COUNT", "t:b"), 2);
  } finally {
    r.disconnect();
  }
}

async function main() {
  let passed = 0;
  let failed = 0;
  for (const [name, step] of [
    ["ioredis LB writes", writes],
    ["ioredis LB reads, rank styles, AMONG, FRIENDS", reads],
    ["ioredis LB errors, WRONGTYPE, multi()", errorsAndMulti],
  ]) {
    const started = Date.now();
    try {
      await step();
      passed++;
      console.log(`ok   ${name} (${((Date.now() - started) / 1000).toFixed(2)} s)`);
    } catch (e) {
      failed++;
      console.log(`FAIL ${name}\n${e.stack}`);
    }
  }
  console.log(`node lb: ${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

main();
