"""The LB.* leaderboard commands through redis-py's generic
`execute_command`, sync in RESP2 and RESP3, a transaction, and asyncio.

    python3 lb_check.py --port P

Prints one line per check group and a closing `N passed, N failed`; exits 1
on any failure.
"""
import argparse
import asyncio

import redis
import redis.asyncio as aioredis

from checks import expect, run_groups


def expect_error(r, want, *args):
    """The command fails with a redis.ResponseError whose text is `want`
    (redis-py drops a leading `ERR `; other codes stay)."""
    try:
        got = r.execute_command(*args)
    except redis.ResponseError as e:
        expect(str(e), want, f"error of {args!r}")
        return
    raise AssertionError(f"{args!r} should fail, got {got!r}")


def fill(r, key, ranking):
    """A board of four: carl 110, bob 100 (at 3), alice 100 (at 5), dan 50."""
    x = r.execute_command
    expect(x("LB.CREATE", key, "RANKING", ranking), "OK", f"LB.CREATE {key}")
    x("LB.SUBMIT", key, "alice", 100, "AT", 5, "META", "hi")
    x("LB.SUBMIT", key, "bob", 100, "AT", 3)
    x("LB.SUBMIT", key, "carl", 110, "AT", 7)
    x("LB.SUBMIT", key, "dan", 50, "SUBSCORE", 2, "AT", 9)


def writes_check(port, protocol):
    r = redis.Redis(port=port, protocol=protocol, decode_responses=True, socket_timeout=10)
    x = r.execute_command
    p = f"lb{protocol}:"
    try:
        # LB.CREATE with every option.
        expect(x("LB.CREATE", p + "daily", "ORDER", "DESC", "POLICY", "BEST", "TIEBREAK", "EARLIEST",
                 "RANKING", "COMPETITION", "CAPACITY", 1000), "OK", "LB.CREATE all options")
        expect(x("TYPE", p + "daily"), "leaderboard", "TYPE")
        # LB.SUBMIT: BEST keeps the better score.
        expect(x("LB.SUBMIT", p + "daily", "alice", 4200, "SUBSCORE", 3, "META", "lvl7"), [4200, 1, 1], "SUBMIT")
        expect(x("LB.SUBMIT", p + "daily", "alice", 4000), [4200, 1, 0], "SUBMIT below BEST")
        expect(x("LB.SUBMIT", p + "daily", "bob", 4300, "AT", 1732400000000), [4300, 1, 1], "SUBMIT AT")
        entry = x("LB.GET", p + "daily", "alice")
        expect(entry[:4] + entry[5:], [2, "alice", 4200, 3, "lvl7"], "LB.GET")
        expect(isinstance(entry[4], int) and entry[4] > 0, True, f"LB.GET time {entry[4]!r}")
        expect(x("LB.GET", p + "daily", "bob"), [1, "bob", 4300, 0, 1732400000000, None], "LB.GET with AT")
        # LB.INCR, and ID applying a write once.
        expect(x("LB.INCR", p + "likes", "post:9", 42), [42, 1, 1], "INCR")
        expect(x("LB.INCR", p + "likes", "post:8", 50), [50, 1, 1], "INCR other")
        expect(x("LB.INCR", p + "likes", "post:9", -1, "AT", 10, "META", "m"), [41, 2, 1], "INCR -1")
        expect(x("LB.INCR", p + "votes", "post:9", 1, "ID", "vote:7f3a"), [1, 1, 1], "INCR ID")
        expect(x("LB.INCR", p + "votes", "post:9", 1, "ID", "vote:7f3a"), [1, 1, 0], "INCR ID retried")
        expect(x("LB.SUBMIT", p + "votes", "post:1", 5, "ID", "vote:7f3a"), [5, None, 0], "SUBMIT ID seen")
        expect(x("LB.SUBMIT", p + "votes", "post:1", 5, "ID", "vote:7f3b"), [5, 1, 1], "SUBMIT ID")
        # POLICY SET / INCR, ORDER ASC, TIEBREAK LATEST, CAPACITY.
        x("LB.CREATE", p + "set", "POLICY", "SET", "ORDER", "ASC")
        x("LB.SUBMIT", p + "set", "a", 10)
        expect(x("LB.SUBMIT", p + "set", "a", 50), [50, 1, 1], "POLICY SET")
        expect(x("LB.SUBMIT", p + "set", "b", 20), [20, 1, 1], "ORDER ASC")
        x("LB.CREATE", p + "incr", "POLICY", "INCR")
        x("LB.SUBMIT", p + "incr", "a", 10)
        expect(x("LB.SUBMIT", p + "incr", "a", 5), [15, 1, 1], "POLICY INCR")
        x("LB.CREATE", p + "late", "TIEBREAK", "LATEST")
        x("LB.SUBMIT", p + "late", "a", 1, "AT", 1)
        x("LB.SUBMIT", p + "late", "b", 1, "AT", 2)
        expect(x("LB.TOP", p + "late", 2), [[1, "b", 1], [2, "a", 1]], "TIEBREAK LATEST")
        x("LB.CREATE", p + "cap", "CAPACITY", 2)
        x("LB.SUBMIT", p + "cap", "a", 10)
        x("LB.SUBMIT", p + "cap", "b", 20)
        expect(x("LB.SUBMIT", p + "cap", "c", 5), [5, None, 0], "below CAPACITY")
        expect(x("LB.SUBMIT", p + "cap", "d", 30), [30, 1, 1], "into CAPACITY")
        expect(x("LB.TOP", p + "cap", 5), [[1, "d", 30], [2, "b", 20]], "CAPACITY kept")
        # LB.MSUBMIT, atomic.
        expect(x("LB.MSUBMIT", p + "day", "a", 5, p + "week", "a", 5, p + "incr", "a", 5),
               [[5, 1, 1], [5, 1, 1], [20, 1, 1]], "MSUBMIT")
        expect(x("LB.MSUBMIT", p + "day", "a", 3, p + "incr", "a", 3), [[5, 1, 0], [23, 1, 1]], "MSUBMIT again")
        expect_error(r, "score is not a 64-bit integer", "LB.MSUBMIT", p + "day", "b", 1, p + "incr", "a", "x")
        expect(x("LB.SCORE", p + "day", "b"), None, "nothing of a failed MSUBMIT")
        # LB.REM; an emptied board stays.
        expect(x("LB.REM", p + "set", "a", "b", "nobody"), 2, "LB.REM")
        expect(x("TYPE", p + "set"), "leaderboard", "emptied board stays")
        expect(x("LB.COUNT", p + "set"), 0, "emptied board count")
        expect(x("LB.REM", p + "nokey", "a"), 0, "LB.REM no key")
    finally:
        r.close()


def reads_check(port, protocol):
    r = redis.Redis(port=port, protocol=protocol, decode_responses=True, socket_timeout=10)
    x = r.execute_command
    b = f"lbr{protocol}:b"
    try:
        fill(r, b, "ORDINAL")
        top = [[1, "carl", 110], [2, "bob", 100], [3, "alice", 100], [4, "dan", 50]]
        expect(x("LB.TOP", b, 10), top, "LB.TOP")
        expect(x("LB.TOP", b, 1, "OFFSET", 2, "WITHSUBSCORE", "WITHTIME", "WITHMETA"),
               [[3, "alice", 100, 0, 5, "hi"]], "LB.TOP OFFSET WITH*")
        expect(x("LB.TOP", b, 1, "WITHMETA"), [[1, "carl", 110, None]], "LB.TOP WITHMETA nil")
        expect(x("LB.TOP", b, "PERCENT", 50), top[:2], "LB.TOP PERCENT 50")
        expect(x("LB.TOP", b, "PERCENT", 1), top[:1], "LB.TOP PERCENT 1")
        expect(x("LB.TOP", "lbr-nokey", 3), [], "LB.TOP no key")
        expect(x("LB.RANGE", b, 2, 3), top[1:3], "LB.RANGE")
        expect(x("LB.RANGE", b, -1, -1, "WITHSUBSCORE"), [[4, "dan", 50, 2]], "LB.RANGE negative")
        expect(x("LB.RANGE", b, 3, 2), [], "LB.RANGE empty")
        expect(x("LB.AROUND", b, "bob", 3), top[:3], "LB.AROUND")
        expect(x("LB.AROUND", b, "dan", 2), top[2:], "LB.AROUND at the end")
        expect(x("LB.AROUND", b, "nobody", 2), [], "LB.AROUND nobody")
        expect(x("LB.GET", b, "alice"), [3, "alice", 100, 0, 5, "hi"], "LB.GET")
        expect(x("LB.GET", b, "dan"), [4, "dan", 50, 2, 9, None], "LB.GET no meta")
        expect(x("LB.GET", b, "nobody"), None, "LB.GET nobody")
        expect(x("LB.SCORE", b, "carl"), 110, "LB.SCORE")
        expect(x("LB.SCORE", b, "nobody"), None, "LB.SCORE nobody")
        expect(x("LB.RANK", b, "alice"), 3, "LB.RANK")
        expect(x("LB.RANK", "lbr-nokey", "alice"), None, "LB.RANK no key")
        expect(x("LB.MRANK", b, "alice", "x", "carl"), [3, None, 1], "LB.MRANK")
        # A double: RESP3 has a type for it; RESP2 sends its text.
        expect(x("LB.PERCENT", b, "carl"), 25.0 if protocol == 3 else "25", "LB.PERCENT")
        expect(x("LB.PERCENT", b, "alice"), 75.0 if protocol == 3 else "75", "LB.PERCENT alice")
        expect(x("LB.PERCENT", b, "x"), None, "LB.PERCENT nobody")
        expect(x("LB.COUNT", b), 4, "LB.COUNT")
        expect(x("LB.COUNT", b, 60, 110), 3, "LB.COUNT range")
        expect(x("LB.COUNT", "lbr-nokey"), 0, "LB.COUNT no key")
        info = x("LB.INFO", b)
        if protocol == 3:
            expect(type(info), dict, "LB.INFO is a map in RESP3")
        else:
            expect(type(info), list, "LB.INFO is a flat array in RESP2")
            expect(len(info), 28, "LB.INFO fields")
            info = dict(zip(info[::2], info[1::2]))
        expect(list(info), ["order", "policy", "tiebreak", "ranking", "capacity", "size", "memory",
                            "reset", "tz", "history", "archive", "period", "start", "next"], "LB.INFO keys")
        expect({k: v for k, v in info.items() if k not in ("memory", "start")},
               {"order": "DESC", "policy": "BEST", "tiebreak": "EARLIEST", "ranking": "ORDINAL",
                "capacity": 0, "size": 4, "reset": "NEVER", "tz": "+00:00", "history": 1,
                "archive": "MEMORY", "period": 1, "next": None}, "LB.INFO")
        expect(isinstance(info["start"], int), True, f"LB.INFO start {info['start']!r}")
        expect(isinstance(info["memory"], int) and info["memory"] > 0, True, f"LB.INFO memory {info['memory']!r}")
        expect(x("LB.INFO", "lbr-nokey"), None, "LB.INFO no key")
    finally:
        r.close()


def ranks_among_friends_check(port, protocol):
    r = redis.Redis(port=port, protocol=protocol, decode_responses=True, socket_timeout=10)
    x = r.execute_command
    comp, dense, friends = f"lbf{protocol}:comp", f"lbf{protocol}:dense", f"lbf{protocol}:friends"
    try:
        fill(r, comp, "COMPETITION")
        fill(r, dense, "DENSE")
        x("LB.SUBMIT", comp, "eve", 40)
        x("LB.SUBMIT", dense, "eve", 40)
        expect(x("LB.TOP", comp, 10),
               [[1, "carl", 110], [2, "bob", 100], [2, "alice", 100], [4, "dan", 50], [5, "eve", 40]],
               "COMPETITION")
        expect(x("LB.TOP", dense, 10),
               [[1, "carl", 110], [2, "bob", 100], [2, "alice", 100], [3, "dan", 50], [4, "eve", 40]], "DENSE")
        expect(x("LB.RANK", comp, "dan"), 4, "LB.RANK COMPETITION")
        expect(x("LB.RANK", dense, "dan"), 3, "LB.RANK DENSE")
        expect(x("LB.AMONG", comp, "eve", "alice", "bob", "nobody", "WITHGLOBAL"),
               [[1, "bob", 100, 2], [1, "alice", 100, 2], [3, "eve", 40, 5]], "LB.AMONG WITHGLOBAL")
        among = x("LB.AMONG", comp, "eve", "dan", "WITHTIME", "WITHGLOBAL")
        expect(among[0], [1, "dan", 50, 9, 4], "LB.AMONG WITHTIME first")
        expect((among[1][:3], among[1][4]), ([2, "eve", 40], 5), "LB.AMONG WITHTIME second")
        expect(x("LB.AMONG", comp, "alice"), [[1, "alice", 100]], "LB.AMONG one")
        expect(x("SADD", friends, "alice", "dan", "stranger"), 3, "SADD")
        expect(x("LB.FRIENDS", comp, friends, "INCLUDE", "eve", "WITHGLOBAL"),
               [[1, "alice", 100, 2], [2, "dan", 50, 4], [3, "eve", 40, 5]], "LB.FRIENDS INCLUDE WITHGLOBAL")
        expect(x("LB.FRIENDS", comp, friends, "WITHMETA"), [[1, "alice", 100, "hi"], [2, "dan", 50, None]],
               "LB.FRIENDS WITHMETA")
        expect(x("LB.FRIENDS", comp, f"lbf{protocol}:nokey", "INCLUDE", "eve"), [[1, "eve", 40]],
               "LB.FRIENDS no set")
        expect(x("LB.FRIENDS", f"lbf{protocol}:nokey", friends), [], "LB.FRIENDS no board")
    finally:
        r.close()


def errors_check(port, protocol):
    r = redis.Redis(port=port, protocol=protocol, decode_responses=True, socket_timeout=10)
    x = r.execute_command
    p = f"lbe{protocol}:"
    wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value"
    try:
        x("LB.CREATE", p + "b", "ORDER", "ASC")
        x("SET", p + "str", "x")
        expect_error(r, f"key '{p}b' already exists", "LB.CREATE", p + "b")
        expect_error(r, "unknown option 'FOO'", "LB.CREATE", p + "n", "FOO", 1)
        expect_error(r, "invalid value 'UP'", "LB.CREATE", p + "n", "ORDER", "UP")
        expect_error(r, "syntax error", "LB.CREATE", p + "n", "ORDER")
        expect_error(r, "score is not a 64-bit integer", "LB.SUBMIT", p + "b", "a", "1.5")
        expect_error(r, "unknown option 'FOO'", "LB.SUBMIT", p + "b", "a", 1, "FOO", 2)
        expect_error(r, "unknown option 'SUBSCORE'", "LB.INCR", p + "b", "a", 1, "SUBSCORE", 2)
        expect_error(r, "wrong number of arguments for 'lb.submit' command", "LB.SUBMIT", p + "b", "a")
        expect_error(r, "wrong number of arguments for 'lb.msubmit' command", "LB.MSUBMIT", p + "b", "a", 1, "c")
        expect_error(r, "unknown option 'WITHFOO'", "LB.TOP", p + "b", 1, "WITHFOO")
        expect_error(r, "metadata is too long", "LB.SUBMIT", p + "b", "c", 1, "META", "x" * 4097)
        x("LB.SUBMIT", p + "b", "a", 10)
        expect_error(r, "increment or decrement would overflow", "LB.INCR", p + "b", "a", 2**63 - 1)
        expect(x("LB.SCORE", p + "b", "a"), 10, "nothing changed by an overflow")
        for args in [
            ("LB.SUBMIT", p + "str", "a", 1),
            ("LB.INCR", p + "str", "a", 1),
            ("LB.TOP", p + "str", 1),
            ("LB.GET", p + "str", "a"),
            ("LB.REM", p + "str", "a"),
            ("LB.INFO", p + "str"),
            ("LB.FRIENDS", p + "b", p + "str"),
            ("ZADD", p + "b", 1, "a"),
            ("GET", p + "b"),
        ]:
            expect_error(r, wrongtype, *args)
        expect(x("EXISTS", p + "n"), 0, "no board from a failed create")
    finally:
        r.close()


def transaction_check(port, protocol):
    r = redis.Redis(port=port, protocol=protocol, decode_responses=True, socket_timeout=10)
    k = f"lbt{protocol}:b"
    try:
        pipe = r.pipeline(transaction=True)
        pipe.execute_command("LB.CREATE", k, "POLICY", "INCR")
        pipe.execute_command("LB.SUBMIT", k, "a", 5)
        pipe.execute_command("LB.INCR", k, "a", 2)
        pipe.execute_command("LB.MSUBMIT", k, "b", 9, k, "c", 1)
        pipe.execute_command("LB.TOP", k, 10)
        pipe.execute_command("LB.REM", k, "c")
        expect(pipe.execute(), ["OK", [5, 1, 1], [7, 1, 1], [[9, 1, 1], [1, 3, 1]],
                                [[1, "b", 9], [2, "a", 7], [3, "c", 1]], 1], "MULTI/EXEC with LB writes")
        # A WATCHed board broken by a write.
        with r.pipeline(transaction=True) as pipe:
            pipe.watch(k)
            r.execute_command("LB.SUBMIT", k, "d", 1)
            pipe.multi()
            pipe.execute_command("LB.COUNT", k)
            try:
                pipe.execute()
            except redis.WatchError:
                pass
            else:
                raise AssertionError("EXEC should fail after a write to the WATCHed board")
        expect(r.execute_command("LB.COUNT", k), 3, "LB.COUNT after the transactions")
    finally:
        r.close()


async def async_check(port, protocol):
    r = aioredis.Redis(port=port, protocol=protocol, decode_responses=True, socket_timeout=10)
    x = r.execute_command
    k = f"lba{protocol}:b"
    try:
        expect(await x("LB.CREATE", k, "RANKING", "DENSE"), "OK", "async LB.CREATE")
        expect(await x("LB.SUBMIT", k, "a", 3, "META", "m"), [3, 1, 1], "async LB.SUBMIT")
        expect(await x("LB.INCR", k, "b", 3), [3, 1, 1], "async LB.INCR")
        expect(await x("LB.TOP", k, 5, "WITHMETA"), [[1, "a", 3, "m"], [1, "b", 3, None]], "async LB.TOP")
        results = await asyncio.gather(*(x("LB.INCR", k, f"m{i}", i) for i in range(20)))
        expect([res[0] for res in results], list(range(20)), "async concurrent LB.INCR")
        expect(await x("LB.COUNT", k), 22, "async LB.COUNT")
        info = await x("LB.INFO", k)
        if protocol == 2:
            info = dict(zip(info[::2], info[1::2]))
        expect((info["ranking"], info["size"]), ("DENSE", 22), "async LB.INFO")
        try:
            await x("LB.TOP", k, "x")
        except redis.ResponseError as e:
            expect(str(e).startswith("value is not an integer"), True, f"async error {e}")
        else:
            raise AssertionError("async LB.TOP x should fail")
    finally:
        await r.aclose()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    opts = parser.parse_args()
    steps = []
    for protocol in (2, 3):
        for what, check in [
            ("LB writes", writes_check),
            ("LB reads", reads_check),
            ("LB rank styles, AMONG, FRIENDS", ranks_among_friends_check),
            ("LB errors and WRONGTYPE", errors_check),
            ("LB in a transaction", transaction_check),
        ]:
            steps.append((f"{what}, RESP{protocol}", lambda c=check, pr=protocol: c(opts.port, pr)))
        steps.append((f"asyncio LB, RESP{protocol}", lambda pr=protocol: asyncio.run(async_check(opts.port, pr))))
    run_groups("python lb", steps)


if __name__ == "__main__":
    main()
