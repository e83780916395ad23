"""ACL users through redis-py: a score service (`~lb:* +@leaderboard`), a
read-only web front, an admin; commands, keys (read vs write patterns) and
channels allowed and refused, ACL LOG, selectors, MULTI and scripts (with
the caller's permissions), the clients of a deleted user or of a user that
lost a channel disconnected, CLIENT KILL USER, and the aclfile (ACL SAVE,
ACL LOAD).

    python3 acl_check.py --port P --aclfile PATH

The server runs with `aclfile PATH`; the file starts with the default user
off and `user admin on >adminpw ~* &* +@all`. Prints one line per check
group and a closing `N passed, N failed`; exits 1 on any failure.
"""
import argparse
import time

import redis

from checks import expect, run_groups

SCORES = "on >scorepw ~lb:* resetchannels +@leaderboard +eval"
WEB = "on >webpw %R~lb:* %R~site:* resetchannels &news:* -@all +@read +@transaction +subscribe +ping"
ETL = "on >etlpw %R~src:* %W~dst:* +@all"


def client(args, user, password, **kw):
    return redis.Redis(
        port=args.port,
        username=user,
        password=password,
        decode_responses=True,
        socket_timeout=10,
        **kw,
    )


def refused(what, f, kind="NoPermissionError", text=None):
    """`f()` fails with the exception class named `kind` (whose message
    contains `text`, when given)."""
    try:
        got = f()
    except redis.RedisError as e:
        kinds = (kind,) if isinstance(kind, str) else kind
        if type(e).__name__ not in kinds:
            raise AssertionError(f"{what}: {type(e).__name__} ({e}), want one of {kinds}")
        if text is not None and text not in str(e):
            raise AssertionError(f"{what}: {text!r} not in {str(e)!r}")
        return
    raise AssertionError(f"{what} should be refused, got {got!r}")


NOPERM_CMD = "no permissions to run the '{}' command"
NOPERM_KEY = "no permissions to access one of the keys used as arguments"
NOPERM_CHANNEL = "no permissions to access one of the channels used as arguments"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--aclfile", required=True)
    args = ap.parse_args()
    admin = client(args, "admin", "adminpw")

    def users():
        expect(admin.acl_whoami(), "admin", "ACL WHOAMI")
        refused("the default user is off", lambda: redis.Redis(port=args.port).ping(),
                "AuthenticationError")
        refused("a wrong password", lambda: client(args, "admin", "nope").ping(),
                "AuthenticationError")
        for name, rules in (("scores", SCORES), ("web", WEB), ("etl", ETL)):
            expect(admin.execute_command("ACL", "SETUSER", name, "reset", *rules.split()), "OK",
                   f"ACL SETUSER {name}")
        expect(sorted(admin.acl_users()), ["admin", "default", "etl", "scores", "web"], "ACL USERS")
        u = admin.acl_getuser("web")
        expect(u["keys"], ["%R~lb:*", "%R~site:*"], "web's keys")
        expect(u["channels"], ["&news:*"], "web's channels")
        expect(client(args, "web", "webpw").zcard("lb:x"), 0, "logged in as web")

    def score_service():
        s = client(args, "scores", "scorepw")
        x = s.execute_command
        expect(x("LB.SUBMIT", "lb:season1", "ann", 300), [300, 1, 1], "LB.SUBMIT")
        expect(x("LB.INCR", "lb:season1", "bob", 250), [250, 2, 1], "LB.INCR")
        expect(x("LB.TOP", "lb:season1", 2)[0][:2], [1, "ann"], "LB.TOP")
        refused("ZADD (not @leaderboard)", lambda: s.zadd("lb:season1", {"x": 1}),
                text=NOPERM_CMD.format("zadd"))
        refused("LB.SUBMIT outside lb:*", lambda: x("LB.SUBMIT", "other", "ann", 1),
                text=NOPERM_KEY)
        refused("PUBLISH (no channels)", lambda: s.publish("news:1", "x"),
                text=NOPERM_CMD.format("publish"))

    def web_front():
        admin.zadd("lb:weekly", {"ann": 10, "bob": 20})
        admin.set("site:motd", "hello")
        w = client(args, "web", "webpw")
        expect(w.zrevrange("lb:weekly", 0, -1, withscores=True), [("bob", 20.0), ("ann", 10.0)],
               "ZREVRANGE")
        expect(w.zrevrank("lb:weekly", "ann"), 1, "ZREVRANK")
        expect(w.get("site:motd"), "hello", "GET")
        expect(w.execute_command("LB.TOP", "lb:season1", 1)[0][1], "ann", "LB.TOP (@read)")
        refused("ZINCRBY", lambda: w.zincrby("lb:weekly", 1, "ann"), text=NOPERM_CMD.format("zincrby"))
        refused("LB.SUBMIT", lambda: w.execute_command("LB.SUBMIT", "lb:weekly2", "a", 1),
                text=NOPERM_CMD.format("lb.submit"))
        refused("GET outside the patterns", lambda: w.get("secret"), text=NOPERM_KEY)
        refused("FLUSHALL", lambda: w.flushall(), text=NOPERM_CMD.format("flushall"))

    def read_write_patterns():
        admin.set("src:a", "1")
        admin.rpush("src:list", "x", "y")
        admin.zadd("src:z", {"m": 1})
        e = client(args, "etl", "etlpw")
        expect(e.get("src:a"), "1", "GET a read key")
        expect(e.copy("src:a", "dst:a"), True, "COPY read -> write")
        expect(e.zunionstore("dst:u", ["src:z"]), 1, "ZUNIONSTORE")
        expect(e.set("dst:b", "2"), True, "SET a write key")
        refused("GET a write-only key", lambda: e.get("dst:a"), text=NOPERM_KEY)
        refused("SET a read-only key", lambda: e.set("src:a", "2"), text=NOPERM_KEY)
        refused("COPY write -> read", lambda: e.copy("dst:a", "src:b"), text=NOPERM_KEY)
        # LMOVE reads and removes from its source: read alone is not enough.
        refused("LMOVE from a read-only key", lambda: e.lmove("src:list", "dst:l"), text=NOPERM_KEY)
        refused("GETDEL a read-only key", lambda: e.getdel("src:a"), text=NOPERM_KEY)
        # EXISTS looks at no value: any pattern will do.
        expect(e.exists("dst:a", "src:a"), 2, "EXISTS")
        expect(admin.acl_dryrun("etl", "rename", "src:a", "dst:c"),
               "This user has no permissions to access the 'src:a' key", "DRYRUN RENAME")
        expect(admin.acl_dryrun("etl", "sort", "src:list", "alpha", "store", "dst:s"), "OK",
               "DRYRUN SORT STORE")

    def channels():
        admin.acl_log_reset()
        w = client(args, "web", "webpw")
        p = w.pubsub()
        p.subscribe("news:today")
        expect(p.get_message(timeout=5)["type"], "subscribe", "SUBSCRIBE an allowed channel")
        expect(admin.publish("news:today", "hi"), 1, "PUBLISH reaches web")
        m = p.get_message(timeout=5)
        expect((m["channel"], m["data"]), ("news:today", "hi"), "message")
        refused("SUBSCRIBE outside &news:*", lambda: w.execute_command("SUBSCRIBE", "chat"),
                text=NOPERM_CHANNEL)
        log = admin.acl_log()
        expect((log[0]["reason"], log[0]["object"], log[0]["username"]), ("channel", "chat", "web"),
               "ACL LOG of the channel")
        # Losing the channel ends the subscription: the connection closes.
        # (redis-py then reconnects and subscribes again, which is refused.)
        subscriber = [c["id"] for c in admin.client_list() if c["user"] == "web" and c["sub"] == "1"]
        expect(len(subscriber), 1, "one subscriber")
        admin.execute_command("ACL", "SETUSER", "web", "resetchannels", "&news:archive")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if all(c["id"] != subscriber[0] for c in admin.client_list()):
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the subscriber of a lost channel is still connected")
        refused("subscribing again", lambda: p.get_message(timeout=1), text=NOPERM_CHANNEL)
        expect(admin.publish("news:today", "again"), 0, "nobody subscribed any more")
        admin.execute_command("ACL", "SETUSER", "web", "resetchannels", "&news:*")

    def acl_log():
        admin.acl_log_reset()
        w = client(args, "web", "webpw")
        refused("ZADD", lambda: w.zadd("lb:weekly", {"x": 1}))
        refused("GET", lambda: w.get("secret"))
        refused("AUTH", lambda: client(args, "web", "bad").ping(), "AuthenticationError")
        log = admin.acl_log()
        # (Without redis-py's CLIENT SETINFO on connecting, refused too.)
        got = [(e["reason"], e["context"], e["object"], e["username"]) for e in log
               if e["object"] != "client|setinfo"]
        expect(got, [("auth", "toplevel", "AUTH", "web"), ("key", "toplevel", "secret", "web"),
                     ("command", "toplevel", "zadd", "web")], "ACL LOG entries")
        expect(log[2]["count"], 1, "count")
        refused("ZADD again", lambda: w.zadd("lb:weekly", {"x": 1}))
        expect(admin.acl_log(count=1)[0]["count"], 2, "a repeated refusal counts")
        zadd = next(e for e in admin.acl_log() if e["object"] == "zadd")
        # (redis-py parses client-info into a dict.)
        expect(zadd["client-info"]["user"], "web", "client-info")

    def multi_and_scripts():
        admin.acl_log_reset()
        w = client(args, "web", "webpw")
        p = w.pipeline(transaction=True)
        p.zrevrange("lb:weekly", 0, 0)
        p.zadd("lb:weekly", {"x": 1})
        refused("a refused command inside MULTI", p.execute, text=NOPERM_CMD.format("zadd"))
        p = w.pipeline(transaction=True)
        p.get("site:motd")
        p.zcard("lb:weekly")
        expect(p.execute(), ["hello", 2], "an allowed transaction")
        expect(admin.acl_log(count=1)[0]["context"], "multi", "ACL LOG context multi")
        s = client(args, "scores", "scorepw")
        expect(s.eval("return redis.call('LB.SUBMIT', KEYS[1], 'cy', 5)[1]", 1, "lb:season1"), 5,
               "redis.call with the caller's rights")
        refused("redis.call of a command the caller may not run",
                lambda: s.eval("return redis.call('ZADD', KEYS[1], 1, 'x')", 1, "lb:season1"),
                "ResponseError", "can't run this command or subcommand")
        refused("redis.call on a key the caller may not touch",
                lambda: s.eval("return redis.call('LB.SUBMIT', 'other', 'x', 1)", 0),
                "ResponseError", "can't access at least one of the keys")
        refused("EVAL declaring a key outside the patterns",
                lambda: s.eval("return 1", 1, "other"), text=NOPERM_KEY)
        e = admin.acl_log(count=1)[0]
        expect((e["context"], e["reason"]), ("toplevel", "key"), "EVAL's own key check")
        e = admin.acl_log(count=2)[1]
        expect((e["context"], e["reason"], e["object"]), ("lua", "key", "other"), "ACL LOG context lua")

    def selectors():
        admin.execute_command("ACL", "SETUSER", "report", "reset", "on", ">reportpw", "+@read",
                              "~lb:*", "(+@write ~tmp:*)")
        r = client(args, "report", "reportpw")
        expect(r.zcard("lb:weekly"), 2, "root permissions")
        expect(r.set("tmp:x", "1"), True, "the selector's write")
        refused("a write no selector allows", lambda: r.set("lb:x", "1"), text=NOPERM_KEY)
        refused("a read no selector allows", lambda: r.get("tmp:x"), text=NOPERM_KEY)
        sel = admin.acl_getuser("report")["selectors"][0]
        if isinstance(sel, list):
            sel = dict(zip(sel[::2], sel[1::2]))
        expect(sel["keys"], "~tmp:*", "ACL GETUSER selectors")
        expect(admin.acl_dryrun("report", "set", "tmp:y", "1"), "OK", "DRYRUN through a selector")

    def deleted_user():
        w = client(args, "web", "webpw")
        expect(w.ping(), True, "web connected")
        w2 = client(args, "web", "webpw")
        expect(w2.ping(), True, "another web connection")
        expect(admin.acl_deluser("web"), 1, "ACL DELUSER")
        # (redis-py reconnects once, and that login fails.)
        refused("a deleted user's client", w.ping, ("ConnectionError", "AuthenticationError"))
        listed = [c for c in admin.client_list() if c.get("user") == "web"]
        expect(listed, [], "no client of web is left")
        refused("logging in as a deleted user", lambda: client(args, "web", "webpw").ping(),
                "AuthenticationError")
        admin.execute_command("ACL", "SETUSER", "web", "reset", *WEB.split())

    def client_kill_user():
        a = client(args, "scores", "scorepw")
        b = client(args, "scores", "scorepw")
        a.execute_command("LB.COUNT", "lb:season1")
        b.execute_command("LB.COUNT", "lb:season1")
        expect(admin.client_kill_filter(user="scores"), 2, "CLIENT KILL USER")
        left = [x for x in admin.client_list() if x.get("user") == "scores"]
        expect(left, [], "no client of scores is left")
        refused("CLIENT KILL USER nosuch", lambda: admin.client_kill_filter(user="nosuch"),
                "ResponseError", "No such user 'nosuch'")
        c = client(args, "scores", "scorepw")
        c.execute_command("LB.COUNT", "lb:season1")
        cid = next(x["id"] for x in admin.client_list() if x.get("user") == "scores")
        expect(admin.client_kill_filter(user="etl", _id=cid), 0, "USER and ID that do not agree")
        expect(admin.client_kill_filter(user="scores", _id=cid), 1, "USER and ID")
        expect(admin.client_kill_filter(user="admin", skipme=True), 0, "USER admin SKIPME yes")

    def aclfile():
        expect(admin.acl_save(), True, "ACL SAVE")
        with open(args.aclfile) as f:
            saved = f.read().splitlines()
        names = sorted(line.split()[1] for line in saved)
        expect(names, ["admin", "default", "etl", "report", "scores", "web"], "users in the file")
        line = next(x for x in saved if x.startswith("user web "))
        expect(" %R~lb:* %R~site:* resetchannels &news:* " in line, True, f"web's line {line!r}")
        # A user added after the save is gone after LOAD; one written to the
        # file appears.
        admin.execute_command("ACL", "SETUSER", "temp", "on", "nopass", "+ping")
        with open(args.aclfile, "a") as f:
            f.write("user archiver on >archpw ~lb:* +@read\n")
        expect(admin.acl_load(), True, "ACL LOAD")
        expect(sorted(admin.acl_users()),
               ["admin", "archiver", "default", "etl", "report", "scores", "web"], "users after LOAD")
        expect(client(args, "archiver", "archpw").zcard("lb:weekly"), 2, "a user from the file")
        # A bad file is refused as a whole.
        with open(args.aclfile, "a") as f:
            f.write("user broken on +nosuchcommand\n")
        refused("ACL LOAD of a bad file", admin.acl_load, "ResponseError", "nosuchcommand")
        expect("archiver" in admin.acl_users(), True, "users kept after a failed LOAD")
        with open(args.aclfile, "w") as f:
            f.write("\n".join(saved) + "\n")
        expect(admin.acl_load(), True, "ACL LOAD of the saved file")

    run_groups("acl (redis-py)", [
        ("users", users),
        ("score service", score_service),
        ("web front", web_front),
        ("read and write key patterns", read_write_patterns),
        ("channels", channels),
        ("ACL LOG", acl_log),
        ("MULTI and scripts", multi_and_scripts),
        ("selectors", selectors),
        ("clients of a deleted user", deleted_user),
        ("CLIENT KILL USER", client_kill_user),
        ("aclfile SAVE and LOAD", aclfile),
    ])


if __name__ == "__main__":
    main()
