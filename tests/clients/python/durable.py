"""What must survive a restart: every key with no TTL or a long one, read
back byte for byte (boards with their score text, bitmaps, sets)."""

LONG_TTL_MS = 60_000


def snapshot(r):
    """{key: [type, has_ttl, value]} as JSON-friendly data. `r` must not
    decode responses: bitmaps are binary."""
    keys = list(r.scan_iter(count=1000))
    pipe = r.pipeline(transaction=False)
    for key in keys:
        pipe.pttl(key)
        pipe.type(key)
    meta = pipe.execute()
    kept = []
    for key, pttl, kind in zip(keys, meta[0::2], meta[1::2]):
        if 0 <= pttl < LONG_TTL_MS:
            continue  # short-lived by design: may expire across the restart
        kind = kind.decode()
        if kind == "zset":
            pipe.zrange(key, 0, -1, withscores=True, score_cast_func=bytes)
        elif kind == "string":
            pipe.get(key)
        elif kind == "set":
            pipe.smembers(key)
        else:
            raise AssertionError(f"unexpected type {kind} of {key!r}")
        kept.append((key.decode(), kind, pttl > 0))
    state = {}
    for (key, kind, has_ttl), value in zip(kept, pipe.execute()):
        if kind == "zset":
            value = [[m.decode(), s.decode()] for m, s in value]
        elif kind == "string":
            value = value.hex()
        else:
            value = sorted(m.decode() for m in value)
        state[key] = [kind, has_ttl, value]
    return state


def compare(before, after):
    """Fails naming the first keys that differ."""
    missing = sorted(set(before) - set(after))
    extra = sorted(set(after) - set(before))
    changed = sorted(k for k in set(before) & set(after) if before[k] != after[k])
    if missing or extra or changed:
        raise AssertionError(
            f"after the restart: {len(missing)} keys missing {missing[:5]}, "
            f"{len(extra)} new {extra[:5]}, {len(changed)} changed {changed[:5]}"
        )
