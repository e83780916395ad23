// node-redis (the `redis` package, v5) against Rostrum: client-side caching
// with RESP3 (a cached GET served locally until another client's SET
// invalidates it, and FLUSHALL clearing the cache), and Pub/Sub (subscribe,
// receive, pSubscribe, unsubscribe) in RESP2 and RESP3.
//
//     node caching.js --port P
//
// Prints one line per check group and a closing `N passed, N failed`;
// exits 1 on any failure.
"use strict";
const assert = require("assert");
const { createClient, BasicClientSideCache } = require("redis");

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

const port = Number(arg("--port"));
const url = `redis://127.0.0.1:${port}`;

async function waitFor(cond, what, ms = 5000) {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function connect(options = {}) {
  const c = createClient({ url, ...options });
  c.on("error", () => {});
  await c.connect();
  return c;
}

async function cachedGetInvalidated() {
  const cache = new BasicClientSideCache({ ttl: 0, maxEntries: 0 });
  const cached = await connect({ RESP: 3, clientSideCache: cache });
  const writer = await connect();
  try {
    await writer.set("user:1", "ann");
    assert.strictEqual(await cached.get("user:1"), "ann");
    assert.strictEqual(await cached.get("user:1"), "ann");
    let s = cache.stats();
    assert.deepStrictEqual([s.hitCount, s.missCount], [1, 1]);
    // The server remembers the read, so another client's write reaches the
    // cache as an invalidation.
    const info = await cached.sendCommand(["CLIENT", "TRACKINGINFO"]);
    assert.deepStrictEqual(info.flags, ["on"]);
    await writer.set("user:1", "bob");
    await waitFor(async () => cache.size() === 0, "the invalidation of user:1");
    assert.strictEqual(await cached.get("user:1"), "bob");
    s = cache.stats();
    assert.deepStrictEqual([s.hitCount, s.missCount], [1, 2]);
    // FLUSHALL's null invalidation empties the whole cache.
    await cached.get("user:2");
    assert.ok(cache.size() > 0);
    await writer.flushAll();
    await waitFor(async () => cache.size() === 0, "FLUSHALL's invalidation");
    assert.strictEqual(await cached.get("user:1"), null);
  } finally {
    cached.destroy();
    writer.destroy();
  }
}

async function pubSub(resp) {
  const sub = await connect({ RESP: resp });
  const pub = await connect();
  try {
    const got = [];
    await sub.subscribe("news", (msg, ch) => got.push(["message", ch, msg]));
    await sub.pSubscribe("n*", (msg, ch) => got.push(["pmessage", ch, msg]));
    assert.strictEqual(await pub.publish("news", "hello"), 2);
    await waitFor(async () => got.length === 2, "two messages");
    got.sort();
    assert.deepStrictEqual(got, [
      ["message", "news", "hello"],
      ["pmessage", "news", "hello"],
    ]);
    await sub.unsubscribe("news");
    assert.strictEqual(await pub.publish("news", "x"), 1, "only the pattern is left");
    await sub.pUnsubscribe("n*");
    assert.strictEqual(await pub.publish("news", "x"), 0);
    await waitFor(async () => got.length === 3, "the pattern's last message");
    // Out of subscriber mode: ordinary commands again. (node-redis 5.9 in
    // RESP2 hands these replies back as Buffers after an unsubscribe, with
    // redis-server too.)
    await sub.set("after", "sub");
    assert.strictEqual(String(await sub.get("after")), "sub");
  } finally {
    sub.destroy();
    pub.destroy();
  }
}

async function main() {
  let passed = 0;
  let failed = 0;
  for (const [name, step] of [
    ["node-redis client-side cache (RESP3)", cachedGetInvalidated],
    ["node-redis subscribe, pSubscribe, unsubscribe (RESP2)", () => pubSub(2)],
    ["node-redis subscribe, pSubscribe, unsubscribe (RESP3)", () => pubSub(3)],
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
  console.log(`node-redis: ${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

main();
