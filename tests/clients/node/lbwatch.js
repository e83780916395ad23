// A live board watched through ioredis (v5: RESP2 only; in its subscriber
// mode it refuses every command but (P|S)(UN)SUBSCRIBE, PING and QUIT,
// so it cannot send LB.WATCH there, and outside it an unsolicited array
// is taken for the next command's reply). What it can do is Pub/Sub:
// SUBSCRIBE to the board's channel `__lbwatch@<db>__:<n>:<key>` (the
// pub/sub face of LB.WATCH) and read `message`s whose payload is the
// WebSocket's JSON: a snapshot, then exactly the net changes of a scripted
// sequence of submits (entering, leaving, swapping, ties, a step that
// cancels itself), the same sequence and expectations as
// tests/clients/python/lbwatch_check.py.
//
//     node lbwatch.js --port P
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

// One step, atomically (MULTI/EXEC): it lands in one interval.
async function step(r, ...commands) {
  let m = r.multi();
  for (const c of commands) m = m.call(...c);
  const res = await m.exec();
  for (const [err] of res) assert.ifError(err);
}

async function faceWatcher() {
  const key = "race";
  const channel = `__lbwatch@0__:3:${key}`;
  const r = new Redis({ port, lazyConnect: true });
  const sub = new Redis({ port, lazyConnect: true });
  const errors = [];
  sub.on("error", (e) => errors.push(e));
  const queue = [];
  let wake = null;
  sub.on("message", (ch, payload) => {
    queue.push([ch, payload]);
    if (wake) wake();
  });
  // The next message within 5 s, parsed.
  async function next() {
    const deadline = Date.now() + 5000;
    while (queue.length === 0) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error("no message within 5 s");
      await new Promise((resolve) => {
        wake = resolve;
        setTimeout(resolve, left);
      });
      wake = null;
    }
    const [ch, payload] = queue.shift();
    assert.strictEqual(ch, channel);
    return JSON.parse(payload);
  }
  try {
    await r.connect();
    await sub.connect();
    await r.del(key);
    await r.call("LB.CREATE", key, "POLICY", "SET", "TIEBREAK", "EARLIEST");
    await r.call("LB.SUBMIT", key, "a", 10);
    await r.call("LB.SUBMIT", key, "b", 20);
    assert.strictEqual(await sub.subscribe(channel), 1);
    assert.deepStrictEqual(await next(), {
      type: "snapshot", key, version: 1, entries: [[1, "b", 20], [2, "a", 10]],
    });
    assert.deepStrictEqual(await r.pubsub("NUMSUB", channel), [channel, 1]);
    assert.ok((await r.pubsub("CHANNELS", "__lbwatch@*")).includes(channel));
    const steps = [
      [[["LB.SUBMIT", key, "c", 15]], 2, [[2, "c", 15], [3, "a", 10]]],
      [[["LB.SUBMIT", key, "a", 30]], 3, [[1, "a", 30], [2, "b", 20], [3, "c", 15]]],
      // x enters and leaves within one step, d stays below: nothing.
      [[["LB.SUBMIT", key, "x", 99], ["LB.SUBMIT", key, "d", 5], ["LB.REM", key, "x"]], null, null],
      // A tie: d reaches b's 20 after b, so it ranks below it.
      [[["LB.SUBMIT", key, "d", 20]], 4, [[3, "d", 20]]],
      [[["LB.REM", key, "a"], ["LB.SUBMIT", key, "b", 19]], 5, [[1, "d", 20], [2, "b", 19], [3, "c", 15]]],
      [[["DEL", key]], 6, [[1, null], [2, null], [3, null]]],
      [[["LB.SUBMIT", key, "z", 1]], 7, [[1, "z", 1]]],
    ];
    for (const [commands, version, entries] of steps) {
      await step(r, ...commands);
      if (version === null) continue;
      assert.deepStrictEqual(await next(), { type: "diff", key, version, entries }, `diff ${version}`);
    }
    // Leaving: UNSUBSCRIBE ends the watch; nothing more arrives.
    await sub.unsubscribe(channel);
    assert.deepStrictEqual(await r.pubsub("NUMSUB", channel), [channel, 0]);
    await r.call("LB.SUBMIT", key, "y", 50);
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.deepStrictEqual(queue, [], "no message after UNSUBSCRIBE");
    // And the connection is an ordinary one again.
    assert.strictEqual(await sub.get("nope"), null);
    assert.deepStrictEqual(errors, [], "ioredis saw no stray reply");
  } finally {
    r.disconnect();
    sub.disconnect();
  }
}

async function main() {
  let passed = 0;
  let failed = 0;
  for (const [name, check] of [["ioredis watcher through the pub/sub face", faceWatcher]]) {
    const started = Date.now();
    try {
      await check();
      passed++;
      console.log(`ok   ${name} (${((Date.now() - started) / 1000).toFixed(2)} s)`);
    } catch (e) {
      failed++;
      console.log(`FAIL ${name}\n${e.stack}`);
    }
  }
  console.log(`node lbwatch: ${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

main();
