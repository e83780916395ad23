"""The five leaderboard scenarios through redis-py.

    python3 run.py --port P                       # everything, no restart
    python3 run.py --port P --phase write --state F
    (restart the server with the AOF on)
    python3 run.py --port P --phase verify --state F

`write` flushes the server, runs every scenario and saves what must survive
a restart to F; `verify` checks the restarted server holds exactly that and
that votes still count once. Prints one line per check group and a closing
`N passed, N failed`; exits 1 on any failure.
"""
import argparse
import json
import os
import sys
import time
import traceback

import redis

import content_boards
import durable
import fitness_steps
import game_power
import poll_votes
import prize_campaign

SCENARIOS = [
    ("1 daily steps and friends board", fitness_steps.run),
    ("2 game power ranking, ties by time", game_power.run),
    ("3 likes/comments/points, idempotent consumers", content_boards.run),
    ("4 one vote per user, live tally", poll_votes.write),
    ("5 prize campaign, packed scores up to 2^53", prize_campaign.run),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--phase", choices=["all", "write", "verify"], default="all")
    parser.add_argument("--state", help="file for the durable state (write/verify)")
    opts = parser.parse_args()
    if opts.phase != "all" and not opts.state:
        parser.error("--state is needed with --phase write/verify")

    r = redis.Redis(host=opts.host, port=opts.port, decode_responses=True, socket_timeout=20)
    raw = redis.Redis(host=opts.host, port=opts.port, socket_timeout=20)
    steps = []
    if opts.phase in ("all", "write"):
        r.flushall()
        steps += SCENARIOS
    if opts.phase == "write":
        steps.append(("save the durable state", lambda _: save(raw, opts.state)))
    if opts.phase == "verify":
        steps.append(("restart: every durable key identical", lambda _: durable.compare(load(opts.state), durable.snapshot(raw))))
    if opts.phase in ("all", "verify"):
        steps.append(("4 votes still count once after a restart", poll_votes.verify))

    passed = failed = 0
    for name, step in steps:
        started = time.monotonic()
        try:
            step(r)
        except Exception as e:
            failed += 1
            print(f"FAIL {name}\n{where(e)}", flush=True)
        else:
            passed += 1
            print(f"ok   {name} ({time.monotonic() - started:.2f} s)", flush=True)
    print(f"python {opts.phase}: {passed} passed, {failed} failed", flush=True)
    sys.exit(1 if failed else 0)


def where(e):
    """The failure with only the scenario code's frames (not redis-py's)."""
    here = os.path.dirname(os.path.abspath(__file__))
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename.startswith(here)]
    lines = traceback.format_list(frames) + traceback.format_exception_only(e)
    return "".join(lines)


def save(raw, path):
    state = durable.snapshot(raw)
    if len(state) < 10:
        raise AssertionError(f"only {len(state)} durable keys to compare")
    with open(path, "w") as f:
        json.dump(state, f)


def load(path):
    with open(path) as f:
        return json.load(f)


if __name__ == "__main__":
    main()
