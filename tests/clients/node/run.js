// The five leaderboard scenarios through ioredis.
//
//   node run.js --port P                       # everything, no restart
//   node run.js --port P --phase write --state F
//   (restart the server with the AOF on)
//   node run.js --port P --phase verify --state F
//
// `write` flushes the server, runs every scenario and saves what must
// survive a restart to F; `verify` checks the restarted server holds exactly
// that and that votes still count once. Prints one line per check group and
// a closing `N passed, N failed`; exits 1 on any failure.
"use strict";
const fs = require("node:fs");
const { parseArgs } = require("node:util");
const Redis = require("ioredis");

const contentBoards = require("./content_boards");
const durable = require("./durable");
const fitnessSteps = require("./fitness_steps");
const gamePower = require("./game_power");
const pollVotes = require("./poll_votes");
const prizeCampaign = require("./prize_campaign");

const SCENARIOS = [
  ["1 daily steps and friends board", fitnessSteps.run],
  ["2 game power ranking, ties by time", gamePower.run],
  ["3 likes/comments/points, idempotent consumers", contentBoards.run],
  ["4 one vote per user, live tally", pollVotes.write],
  ["5 prize campaign, packed scores up to 2^53", prizeCampaign.run],
];

async function main() {
  const { values: opts } = parseArgs({
    options: {
      host: { type: "string", default: "127.0.0.1" },
      port: { type: "string" },
      phase: { type: "string", default: "all" },
      state: { type: "string" },
    },
  });
  if (!opts.port || !["all", "write", "verify"].includes(opts.phase) || (opts.phase !== "all" && !opts.state)) {
    console.error("usage: node run.js --port P [--phase all|write|verify] [--state FILE]");
    process.exit(2);
  }
  // No reconnects: a server that goes away is a failure, not a retry loop.
  const connect = () =>
    new Redis({ host: opts.host, port: Number(opts.port), retryStrategy: () => null, commandTimeout: 20000 });
  const redis = connect();

  const steps = [];
  if (opts.phase !== "verify") {
    await redis.flushall();
    steps.push(...SCENARIOS);
  }
  if (opts.phase === "write") {
    steps.push(["save the durable state", async (r) => save(r, opts.state)]);
  }
  if (opts.phase === "verify") {
    steps.push([
      "restart: every durable key identical",
      async (r) => durable.compare(JSON.parse(fs.readFileSync(opts.state, "utf8")), await durable.snapshot(r)),
    ]);
  }
  if (opts.phase !== "write") steps.push(["4 votes still count once after a restart", pollVotes.verify]);

  let passed = 0;
  let failed = 0;
  for (const [name, step] of steps) {
    const started = Date.now();
    try {
      await step(redis, connect);
      passed++;
      console.log(`ok   ${name} (${((Date.now() - started) / 1000).toFixed(2)} s)`);
    } catch (err) {
      failed++;
      console.log(`FAIL ${name}\n${err.stack ?? err}`);
    }
  }
  console.log(`node ${opts.phase}: ${passed} passed, ${failed} failed`);
  redis.disconnect();
  process.exitCode = failed ? 1 : 0;
}

async function save(redis, path) {
  const state = await durable.snapshot(redis);
  if (Object.keys(state).length < 10) throw new Error(`only ${Object.keys(state).length} durable keys to compare`);
  fs.writeFileSync(path, JSON.stringify(state));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
