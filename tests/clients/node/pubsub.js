// Pub/Sub through ioredis: subscribe, pattern-subscribe, shard channels,
// unsubscribe, messages from MULTI/EXEC and scripts, and a subscriber's
// reconnection re-subscribing.
//
//     node pubsub.js --port P
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

async function waitFor(cond, what, ms = 5000) {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function channelsAndPatterns() {
  const sub = new Redis({ port });
  const pub = new Redis({ port });
  try {
    const got = [];
    sub.on("message", (ch, msg) => got.push(["message", ch, msg]));
    sub.on("pmessage", (pat, ch, msg) => got.push(["pmessage", pat, ch, msg]));
    sub.on("smessage", (ch, msg) => got.push(["smessage", ch, msg]));
    assert.strictEqual(await sub.subscribe("news", "sport"), 2);
    assert.strictEqual(await sub.psubscribe("n*"), 3);
    assert.strictEqual(await sub.ssubscribe("shard"), 1);
    assert.strictEqual(await pub.publish("news", "hello"), 2);
    assert.strictEqual(await pub.spublish("shard", "s"), 1);
    await waitFor(() => got.length === 3, "three messages");
    assert.deepStrictEqual(got, [
      ["message", "news", "hello"],
      ["pmessage", "n*", "news", "hello"],
      ["smessage", "shard", "s"],
    ]);
    assert.deepStrictEqual(await pub.pubsub("NUMSUB", "news", "sport"), ["news", 1, "sport", 1]);
    assert.strictEqual(await pub.pubsub("NUMPAT"), 1);
    // Transactions and scripts publish too.
    got.length = 0;
    const tx = await pub.multi().publish("sport", "tx").set("k", "v").exec();
    assert.deepStrictEqual(tx, [[null, 1], [null, "OK"]]);
    assert.strictEqual(await pub.eval("return redis.call('publish', KEYS[1], ARGV[1])", 1, "news", "lua"), 2);
    await waitFor(() => got.length === 3, "messages from EXEC and EVAL");
    assert.deepStrictEqual(got[0], ["message", "sport", "tx"]);
    assert.deepStrictEqual(got[1], ["message", "news", "lua"]);
    // (Named: ioredis waits for a count of 0 after a bare UNSUBSCRIBE,
    // which the pattern still held would never give.)
    await sub.unsubscribe("news", "sport");
    await sub.punsubscribe("n*");
    await sub.sunsubscribe("shard");
    assert.strictEqual(await pub.publish("news", "x"), 0);
    assert.strictEqual(await pub.spublish("shard", "x"), 0);
    // Out of subscriber mode: ordinary commands again.
    assert.strictEqual(await sub.get("k"), "v");
  } finally {
    sub.disconnect();
    pub.disconnect();
  }
}

async function resubscribesAfterReconnect() {
  const sub = new Redis({ port, retryStrategy: () => 50 });
  const admin = new Redis({ port });
  try {
    const got = [];
    sub.on("message", (ch, msg) => got.push(msg));
    await sub.subscribe("live");
    const list = await admin.client("LIST", "TYPE", "pubsub");
    const id = /id=(\d+)/.exec(list)[1];
    await admin.client("KILL", "ID", id);
    // Publish until the re-subscribed connection receives.
    const deadline = Date.now() + 5000;
    while (got.length === 0 && Date.now() < deadline) {
      await admin.publish("live", "again");
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(got.length > 0, "no message after ioredis re-subscribed");
  } finally {
    sub.disconnect();
    admin.disconnect();
  }
}

async function main() {
  let passed = 0;
  let failed = 0;
  for (const [name, step] of [
    ["ioredis channels, patterns, shard channels", channelsAndPatterns],
    ["ioredis re-subscribes after CLIENT KILL", resubscribesAfterReconnect],
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
  console.log(`node pubsub: ${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

main();
