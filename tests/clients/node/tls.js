// TLS through ioredis: `tls: { ca, cert, key }`, commands, a pipeline and
// Pub/Sub over TLS, and the refusals (no certificate, an expired or
// untrusted one; the server requires client certificates).
//
//     node tls.js --port P --tls-port T --certs DIR
//
// DIR holds the test certificates (tests/common/certs.rs). Prints one line
// per check group and a closing `N passed, N failed`; exits 1 on any
// failure.
"use strict";
const assert = require("assert");
const fs = require("fs");
const path = require("path");
const Redis = require("ioredis");

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

const tlsPort = Number(arg("--tls-port"));
const certs = arg("--certs");
const read = (f) => fs.readFileSync(path.join(certs, f));

function client(cert = "client", extra = {}) {
  const tls = { ca: read("ca.crt"), servername: "localhost" };
  if (cert) {
    tls.cert = read(`${cert}.crt`);
    tls.key = read(`${cert}.key`);
  }
  return new Redis({
    host: "127.0.0.1",
    port: tlsPort,
    tls,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    ...extra,
  });
}

async function commands() {
  const r = client();
  try {
    await r.connect();
    assert.strictEqual(await r.ping(), "PONG");
    await r.del("board");
    assert.strictEqual(await r.zadd("board", 10, "ann", 20, "bob"), 2);
    assert.strictEqual(await r.zincrby("board", 15, "ann"), "25");
    assert.deepStrictEqual(await r.zrevrange("board", 0, 9, "WITHSCORES"), ["ann", "25", "bob", "20"]);
    const p = r.pipeline();
    for (let i = 0; i < 500; i++) p.incr("counter");
    const res = await p.exec();
    assert.strictEqual(res[499][1], 500);
  } finally {
    r.disconnect();
  }
}

async function pubsub() {
  const sub = client();
  const pub = client();
  try {
    await sub.connect();
    await pub.connect();
    const got = [];
    sub.on("message", (ch, msg) => got.push([ch, msg]));
    assert.strictEqual(await sub.subscribe("news"), 1);
    assert.strictEqual(await pub.publish("news", "hello"), 1);
    const deadline = Date.now() + 5000;
    while (got.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    assert.deepStrictEqual(got, [["news", "hello"]]);
  } finally {
    sub.disconnect();
    pub.disconnect();
  }
}

async function refused() {
  for (const cert of [null, "expired", "untrusted"]) {
    const r = client(cert);
    r.on("error", () => {});
    let served = false;
    try {
      await r.connect();
      served = (await r.ping()) === "PONG";
    } catch (e) {
      served = false;
    } finally {
      r.disconnect();
    }
    assert.strictEqual(served, false, `served with certificate ${cert}`);
  }
  const r = client();
  try {
    await r.connect();
    assert.strictEqual(await r.ping(), "PONG");
  } finally {
    r.disconnect();
  }
}

async function main() {
  let passed = 0;
  let failed = 0;
  for (const [name, step] of [
    ["ioredis commands and a pipeline over TLS", commands],
    ["ioredis pub/sub over TLS", pubsub],
    ["ioredis refused: no, expired, untrusted certificate", refused],
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
  console.log(`node tls: ${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

main();
