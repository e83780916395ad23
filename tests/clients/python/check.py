"""Assertions and the plain-Python model of a sorted set's order."""


def eq(actual, expected, what):
    """Fails with both values when they differ."""
    if actual != expected:
        raise AssertionError(f"{what}:\n  got      {actual!r}\n  expected {expected!r}")


def true(cond, what):
    """Fails when `cond` is false."""
    if not cond:
        raise AssertionError(what)


def by_rank(scores):
    """(member, score) pairs in ZREVRANGE order: score high to low, equal
    scores by member, also high to low (members are ASCII here, so Python's
    string order is Redis's byte order)."""
    return sorted(scores.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)


def as_float_pairs(pairs):
    """The model's pairs with float scores, as redis-py returns them."""
    return [(m, float(s)) for m, s in pairs]
