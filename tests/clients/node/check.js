// Assertions, a seeded random source and the plain-JS model of a sorted
// set's order.
"use strict";
const assert = require("node:assert/strict");

/** Fails with both values when they differ (deep comparison). */
function eq(actual, expected, what) {
  assert.deepStrictEqual(actual, expected, what);
}

/** Fails when `cond` is false. */
function ok(cond, what) {
  assert.ok(cond, what);
}

/** A small seeded generator (mulberry32) with Python-like helpers. */
class Rng {
  constructor(seed) {
    this.state = seed >>> 0;
  }
  random() {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  /** An integer in [lo, hi). */
  range(lo, hi) {
    return lo + Math.floor(this.random() * (hi - lo));
  }
  choice(items) {
    return items[this.range(0, items.length)];
  }
  shuffle(items) {
    for (let i = items.length - 1; i > 0; i--) {
      const j = this.range(0, i + 1);
      [items[i], items[j]] = [items[j], items[i]];
    }
    return items;
  }
  /** `k` distinct items of `items`. */
  sample(items, k) {
    return this.shuffle([...items]).slice(0, k);
  }
}

/** Byte order of ASCII member names, as Redis compares them. */
function byteCompare(a, b) {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** [member, score] pairs of a Map in ZREVRANGE order: score high to low,
 *  equal scores by member, also high to low. */
function byRank(scores) {
  return [...scores].sort((x, y) => y[1] - x[1] || byteCompare(y[0], x[0]));
}

/** A flat WITHSCORES reply as [member, Number(score)] pairs. */
function pairs(flat) {
  const out = [];
  for (let i = 0; i < flat.length; i += 2) out.push([flat[i], Number(flat[i + 1])]);
  return out;
}

/** The results of a pipeline or MULTI, failing on the first error. */
function results(replies) {
  return replies.map(([err, value]) => {
    if (err) throw err;
    return value;
  });
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

module.exports = { eq, ok, Rng, byRank, pairs, results, sleep };
