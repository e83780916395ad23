// What must survive a restart: every key with no TTL or a long one, read
// back byte for byte (boards with their score text, bitmaps, sets).
"use strict";

const LONG_TTL_MS = 60000;

/** {key: [type, hasTtl, value]} as JSON-friendly data. */
async function snapshot(redis) {
  const keys = [];
  let cursor = "0";
  do {
    const [next, batch] = await redis.scan(cursor, "COUNT", 1000);
    keys.push(...batch);
    cursor = next;
  } while (cursor !== "0");

  const meta = redis.pipeline();
  for (const key of keys) meta.pttl(key).type(key);
  const replies = (await meta.exec()).map(([err, v]) => {
    if (err) throw err;
    return v;
  });
  const kept = [];
  const values = redis.pipeline();
  keys.forEach((key, i) => {
    const pttl = replies[2 * i];
    const kind = replies[2 * i + 1];
    if (pttl >= 0 && pttl < LONG_TTL_MS) return; // short-lived by design
    if (kind === "zset") values.zrange(key, 0, -1, "WITHSCORES");
    else if (kind === "string") values.getBuffer(key);
    else if (kind === "set") values.smembers(key);
    else throw new Error(`unexpected type ${kind} of ${key}`);
    kept.push([key, kind, pttl > 0]);
  });
  const state = {};
  (await values.exec()).forEach(([err, value], i) => {
    if (err) throw err;
    const [key, kind, hasTtl] = kept[i];
    if (kind === "string") value = value.toString("hex");
    else if (kind === "set") value = value.sort();
    state[key] = [kind, hasTtl, value];
  });
  return state;
}

/** Fails naming the first keys that differ. */
function compare(before, after) {
  const missing = Object.keys(before).filter((k) => !(k in after)).sort();
  const extra = Object.keys(after).filter((k) => !(k in before)).sort();
  const changed = Object.keys(before)
    .filter((k) => k in after && JSON.stringify(before[k]) !== JSON.stringify(after[k]))
    .sort();
  if (missing.length || extra.length || changed.length) {
    throw new Error(
      `after the restart: ${missing.length} keys missing ${missing.slice(0, 5)}, ` +
        `${extra.length} new ${extra.slice(0, 5)}, ${changed.length} changed ${changed.slice(0, 5)}`,
    );
  }
}

module.exports = { snapshot, compare };
