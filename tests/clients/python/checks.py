"""What the check scripts (pubsub_check.py, lb_check.py) share: the
assertion they use and the runner that prints one line per check group."""
import sys
import time
import traceback


def expect(got, want, what):
    if got != want:
        raise AssertionError(f"{what}: got {got!r}, want {want!r}")


def run_groups(title, steps):
    """Runs `(name, step)` pairs, printing `ok` or `FAIL` (with the
    traceback) for each and a closing `N passed, N failed`; exits 1 on any
    failure."""
    passed = failed = 0
    for name, step in steps:
        started = time.monotonic()
        try:
            step()
        except Exception:
            failed += 1
            print(f"FAIL {name}\n{traceback.format_exc()}", flush=True)
        else:
            passed += 1
            print(f"ok   {name} ({time.monotonic() - started:.2f} s)", flush=True)
    print(f"{title}: {passed} passed, {failed} failed", flush=True)
    sys.exit(1 if failed else 0)
