// ACL users through ioredis: the score service (`~lb:* +@leaderboard`),
// the read-only web front and the admin; commands, keys (read vs write
// patterns) and channels allowed and refused, ACL LOG, selectors, MULTI
// and scripts with the caller's permissions, the clients of a deleted user
// or of a user that lost a channel disconnected, CLIENT KILL USER, and the
// aclfile (ACL SAVE, ACL LOAD).
//
//     node acl.js --port P --aclfile PATH
//
// The server runs with `aclfile PATH`; the file starts with the default
// user off and `user admin on >adminpw ~* &* +@all`. Prints one line per
// check group and a closing `N passed, N failed`; exits 1 on any failure.
"use strict";
const assert = require("assert");
const fs = require("fs");
const Redis = require("ioredis");

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

const port = Number(arg("--port"));
const aclfile = arg("--aclfile");

const SCORES = "on >scorepw ~lb:* resetchannels +@leaderboard +eval";
const WEB = "on >webpw %R~lb:* %R~site:* resetchannels &news:* -@all +@read +@transaction +subscribe +ping";
const ETL = "on >etlpw %R~src:* %W~dst:* +@all";

const NOPERM_KEY = "NOPERM this user has no permissions to access one of the keys used as arguments";
const NOPERM_CHANNEL = "NOPERM this user has no permissions to access one of the channels used as arguments";
const noperm = (cmd) => `NOPERM this user has no permissions to run the '${cmd}' command`;

const open = [];

/** A connected client as `username`; no reconnection, no retries. (The
 * AUTH is the first command on the connection: a refused login shows in
 * the first command's error.) */
async function client(username, password, extra = {}) {
  const r = new Redis({
    host: "127.0.0.1",
    port,
    username,
    password,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
    // (The ready check sends INFO, which most of these users may not run.)
    enableReadyCheck: false,
    ...extra,
  });
  r.on("error", () => {});
  open.push(r);
  await r.connect();
  return r;
}

/** The promise is rejected with an error whose message starts `want` (or
 * one of `want`). */
async function refused(what, promise, want) {
  let got;
  const wants = Array.isArray(want) ? want : [want];
  try {
    got = await promise;
  } catch (e) {
    assert.ok(wants.some((w) => e.message.startsWith(w)),
      `${what}: got ${JSON.stringify(e.message)}, want ${JSON.stringify(want)}`);
    return;
  }
  assert.fail(`${what} should be refused, got ${JSON.stringify(got)}`);
}

// A refused AUTH: ioredis reports WRONGPASS, or closes the connection, or
// the next command finds it unauthenticated.
const LOGIN_REFUSED = ["WRONGPASS", "NOAUTH", "Connection is closed", "Stream isn't writeable"];

/** Logs in as `username` and sends PING. */
async function login(username, password) {
  const r = await client(username, password);
  return r.call("ECHO", "x");
}

/** Resolves when `r` closes, or fails after `ms`. */
function closed(r, what, ms = 5000) {
  if (r.status === "end" || r.status === "close") return Promise.resolve();
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${what}: still connected after ${ms} ms`)), ms);
    r.once("end", () => {
      clearTimeout(t);
      resolve();
    });
  });
}

/** ACL LOG as objects. */
async function aclLog(admin, ...count) {
  const raw = await admin.call("ACL", "LOG", ...count);
  return raw.map((e) => {
    const o = {};
    for (let i = 0; i < e.length; i += 2) o[e[i]] = e[i + 1];
    return o;
  });
}

async function main() {
  const admin = await client("admin", "adminpw");

  async function users() {
    assert.strictEqual(await admin.call("ACL", "WHOAMI"), "admin");
    await refused("the default user is off", client(undefined, undefined).then((r) => r.ping()), "NOAUTH");
    await refused("a wrong password", login("admin", "nope"), LOGIN_REFUSED);
    for (const [name, rules] of [["scores", SCORES], ["web", WEB], ["etl", ETL]]) {
      assert.strictEqual(await admin.call("ACL", "SETUSER", name, "reset", ...rules.split(" ")), "OK");
    }
    assert.deepStrictEqual((await admin.call("ACL", "USERS")).sort(), ["admin", "default", "etl", "scores", "web"]);
    const web = await admin.call("ACL", "GETUSER", "web");
    assert.strictEqual(web[web.indexOf("keys") + 1], "%R~lb:* %R~site:*");
    assert.strictEqual(web[web.indexOf("channels") + 1], "&news:*");
  }

  async function scoreService() {
    const s = await client("scores", "scorepw");
    assert.deepStrictEqual(await s.call("LB.SUBMIT", "lb:season1", "ann", 300), [300, 1, 1]);
    assert.deepStrictEqual(await s.call("LB.INCR", "lb:season1", "bob", 250), [250, 2, 1]);
    assert.deepStrictEqual((await s.call("LB.TOP", "lb:season1", 2))[0].slice(0, 2), [1, "ann"]);
    await refused("ZADD", s.zadd("lb:season1", 1, "x"), noperm("zadd"));
    await refused("LB.SUBMIT outside lb:*", s.call("LB.SUBMIT", "other", "ann", 1), NOPERM_KEY);
    await refused("PUBLISH", s.publish("news:1", "x"), noperm("publish"));
  }

  async function webFront() {
    await admin.zadd("lb:weekly", 10, "ann", 20, "bob");
    await admin.set("site:motd", "hello");
    const w = await client("web", "webpw");
    assert.deepStrictEqual(await w.zrevrange("lb:weekly", 0, -1, "WITHSCORES"), ["bob", "20", "ann", "10"]);
    assert.strictEqual(await w.zrevrank("lb:weekly", "ann"), 1);
    assert.strictEqual(await w.get("site:motd"), "hello");
    await refused("ZINCRBY", w.zincrby("lb:weekly", 1, "ann"), noperm("zincrby"));
    await refused("LB.SUBMIT", w.call("LB.SUBMIT", "lb:weekly2", "a", 1), noperm("lb.submit"));
    await refused("GET outside the patterns", w.get("secret"), NOPERM_KEY);
    await refused("FLUSHALL", w.flushall(), noperm("flushall"));
  }

  async function readWritePatterns() {
    await admin.set("src:a", "1");
    await admin.rpush("src:list", "x", "y");
    await admin.zadd("src:z", 1, "m");
    const e = await client("etl", "etlpw");
    assert.strictEqual(await e.get("src:a"), "1");
    assert.strictEqual(await e.copy("src:a", "dst:a"), 1);
    assert.strictEqual(await e.zunionstore("dst:u", 1, "src:z"), 1);
    assert.strictEqual(await e.set("dst:b", "2"), "OK");
    await refused("GET a write-only key", e.get("dst:a"), NOPERM_KEY);
    await refused("SET a read-only key", e.set("src:a", "2"), NOPERM_KEY);
    await refused("COPY write -> read", e.copy("dst:a", "src:b"), NOPERM_KEY);
    await refused("LMOVE from a read-only key", e.lmove("src:list", "dst:l", "LEFT", "RIGHT"), NOPERM_KEY);
    await refused("SMOVE from a read-only key", e.smove("src:set", "dst:set", "m"), NOPERM_KEY);
    await refused("RENAME a read-only key", e.rename("src:a", "dst:c"), NOPERM_KEY);
    assert.strictEqual(await e.exists("dst:a", "src:a"), 2);
    assert.strictEqual(await e.sort("src:list", "ALPHA", "STORE", "dst:sorted"), 2);
  }

  async function channels() {
    await admin.call("ACL", "LOG", "RESET");
    const w = await client("web", "webpw");
    const got = [];
    w.on("message", (ch, m) => got.push([ch, m]));
    await w.subscribe("news:today");
    assert.strictEqual(await admin.publish("news:today", "hi"), 1);
    for (let i = 0; i < 100 && got.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    assert.deepStrictEqual(got, [["news:today", "hi"]]);
    await refused("SUBSCRIBE outside &news:*", w.subscribe("chat"), NOPERM_CHANNEL);
    const log = await aclLog(admin);
    assert.deepStrictEqual([log[0].reason, log[0].object, log[0].username], ["channel", "chat", "web"]);
    // Losing the channel ends the subscription: the connection closes.
    const gone = closed(w, "subscriber of a lost channel");
    await admin.call("ACL", "SETUSER", "web", "resetchannels", "&news:archive");
    await gone;
    assert.strictEqual(await admin.publish("news:today", "again"), 0);
    await admin.call("ACL", "SETUSER", "web", "resetchannels", "&news:*");
  }

  async function log() {
    await admin.call("ACL", "LOG", "RESET");
    const w = await client("web", "webpw");
    await refused("ZADD", w.zadd("lb:weekly", 1, "x"), "NOPERM");
    await refused("GET", w.get("secret"), "NOPERM");
    await refused("AUTH", login("web", "bad"), LOGIN_REFUSED);
    const entries = await aclLog(admin);
    assert.deepStrictEqual(
      // (Without ioredis's CLIENT SETINFO on connecting, refused too.)
      entries.filter((e) => e.object !== "client|setinfo").map((e) => [e.reason, e.context, e.object, e.username]),
      [["auth", "toplevel", "AUTH", "web"], ["key", "toplevel", "secret", "web"], ["command", "toplevel", "zadd", "web"]],
    );
    await refused("ZADD again", w.zadd("lb:weekly", 1, "x"), "NOPERM");
    assert.strictEqual((await aclLog(admin, 1))[0].count, 2);
  }

  async function multiAndScripts() {
    await admin.call("ACL", "LOG", "RESET");
    const w = await client("web", "webpw");
    await refused("a refused command inside MULTI",
      w.multi().zrevrange("lb:weekly", 0, 0).zadd("lb:weekly", 1, "x").exec(), "EXECABORT");
    const ok = await w.multi().get("site:motd").zcard("lb:weekly").exec();
    assert.deepStrictEqual(ok, [[null, "hello"], [null, 2]]);
    assert.strictEqual((await aclLog(admin, 1))[0].context, "multi");
    const s = await client("scores", "scorepw");
    assert.strictEqual(await s.eval("return redis.call('LB.SUBMIT', KEYS[1], 'cy', 5)[1]", 1, "lb:season1"), 5);
    await refused("redis.call of a refused command",
      s.eval("return redis.call('ZADD', KEYS[1], 1, 'x')", 1, "lb:season1"),
      "ERR The user executing the script can't run this command or subcommand");
    await refused("redis.call on a refused key",
      s.eval("return redis.call('LB.SUBMIT', 'other', 'x', 1)", 0),
      "ERR The user executing the script can't access at least one of the keys");
    await refused("EVAL declaring a key outside the patterns", s.eval("return 1", 1, "other"), NOPERM_KEY);
    const entries = await aclLog(admin, 2);
    assert.deepStrictEqual([entries[1].context, entries[1].object], ["lua", "other"]);
  }

  async function selectors() {
    await admin.call("ACL", "SETUSER", "report", "reset", "on", ">reportpw", "+@read", "~lb:*", "(+@write ~tmp:*)");
    const r = await client("report", "reportpw");
    assert.strictEqual(await r.zcard("lb:weekly"), 2);
    assert.strictEqual(await r.set("tmp:x", "1"), "OK");
    await refused("a write no selector allows", r.set("lb:x", "1"), NOPERM_KEY);
    await refused("a read no selector allows", r.get("tmp:x"), NOPERM_KEY);
    assert.strictEqual(await admin.call("ACL", "DRYRUN", "report", "set", "tmp:y", "1"), "OK");
  }

  async function deletedUser() {
    const w = await client("web", "webpw");
    const w2 = await client("web", "webpw");
    const gone = Promise.all([closed(w, "web"), closed(w2, "web 2")]);
    assert.strictEqual(await admin.call("ACL", "DELUSER", "web"), 1);
    await gone;
    const list = await admin.client("LIST");
    assert.ok(!/ user=web /.test(list), list);
    await refused("logging in as a deleted user", login("web", "webpw"), LOGIN_REFUSED);
    await admin.call("ACL", "SETUSER", "web", "reset", ...WEB.split(" "));
  }

  async function clientKillUser() {
    const a = await client("scores", "scorepw");
    const b = await client("scores", "scorepw");
    await a.call("LB.COUNT", "lb:season1");
    await b.call("LB.COUNT", "lb:season1");
    const gone = Promise.all([closed(a, "a"), closed(b, "b")]);
    // (Earlier groups' clients of scores are still open.)
    const n = (await admin.client("LIST")).split("\n").filter((l) => / user=scores /.test(l)).length;
    assert.ok(n >= 2, `${n} clients of scores`);
    assert.strictEqual(await admin.client("KILL", "USER", "scores"), n);
    await gone;
    await refused("CLIENT KILL USER nosuch", admin.client("KILL", "USER", "nosuch"), "ERR No such user 'nosuch'");
    const c = await client("scores", "scorepw");
    await c.call("LB.COUNT", "lb:season1");
    const line = (await admin.client("LIST")).split("\n").find((l) => / user=scores /.test(l));
    const id = /^id=(\d+) /.exec(line)[1];
    assert.strictEqual(await admin.client("KILL", "USER", "etl", "ID", id), 0);
    assert.strictEqual(await admin.client("KILL", "ID", id, "USER", "scores"), 1);
  }

  async function aclFile() {
    assert.strictEqual(await admin.call("ACL", "SAVE"), "OK");
    const saved = fs.readFileSync(aclfile, "utf8").trim().split("\n");
    assert.deepStrictEqual(saved.map((l) => l.split(" ")[1]).sort(), ["admin", "default", "etl", "report", "scores", "web"]);
    await admin.call("ACL", "SETUSER", "temp", "on", "nopass", "+ping");
    fs.appendFileSync(aclfile, "user archiver on >archpw ~lb:* +@read\n");
    assert.strictEqual(await admin.call("ACL", "LOAD"), "OK");
    assert.deepStrictEqual((await admin.call("ACL", "USERS")).sort(),
      ["admin", "archiver", "default", "etl", "report", "scores", "web"]);
    const a = await client("archiver", "archpw");
    assert.strictEqual(await a.zcard("lb:weekly"), 2);
    fs.appendFileSync(aclfile, "user broken on +nosuchcommand\n");
    await refused("ACL LOAD of a bad file", admin.call("ACL", "LOAD"), "ERR");
    assert.ok((await admin.call("ACL", "USERS")).includes("archiver"));
    fs.writeFileSync(aclfile, saved.join("\n") + "\n");
    assert.strictEqual(await admin.call("ACL", "LOAD"), "OK");
  }

  const groups = [
    ["users", users],
    ["score service", scoreService],
    ["web front", webFront],
    ["read and write key patterns", readWritePatterns],
    ["channels", channels],
    ["ACL LOG", log],
    ["MULTI and scripts", multiAndScripts],
    ["selectors", selectors],
    ["clients of a deleted user", deletedUser],
    ["CLIENT KILL USER", clientKillUser],
    ["aclfile SAVE and LOAD", aclFile],
  ];
  let passed = 0;
  let failed = 0;
  for (const [name, step] of groups) {
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
  console.log(`acl (ioredis): ${passed} passed, ${failed} failed`);
  for (const r of open) r.disconnect();
  process.exit(failed ? 1 : 0);
}

main().catch((e) => {
  console.log(e.stack);
  process.exit(1);
});
