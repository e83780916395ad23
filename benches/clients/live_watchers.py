"""The client side of benches/live_benchmark.sh: W connections that either
watch a board (LB.WATCH, counting the diffs they receive) or poll it the
way applications do without push (ZREVRANGE 0 9 WITHSCORES every
--every-ms, counting replies), for --secs seconds. Raw asyncio sockets, so
the client's own parsing stays out of the way.

    python3 live_watchers.py --port P --mode watch|poll --clients W --secs S
"""
import argparse
import asyncio
import time


async def watcher(port, key, n, counts, stop):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(f"LB.WATCH {key} {n}\r\n".encode())
    await w.drain()
    while not stop.is_set():
        try:
            data = await asyncio.wait_for(r.read(65536), 0.5)
        except asyncio.TimeoutError:
            continue
        if not data:
            break
        counts[0] += data.count(b"lb.diff")
        counts[1] += len(data)
    w.close()


async def poller(port, key, every, counts, stop):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    cmd = f"*5\r\n$9\r\nZREVRANGE\r\n${len(key)}\r\n{key}\r\n$1\r\n0\r\n$1\r\n9\r\n$10\r\nWITHSCORES\r\n".encode()
    while not stop.is_set():
        started = time.monotonic()
        w.write(cmd)
        await w.drain()
        head = await r.readline()
        n = int(head[1:])
        for _ in range(n):
            await r.readline()
            await r.readline()
        counts[0] += 1
        await asyncio.sleep(max(0.0, every - (time.monotonic() - started)))
    w.close()


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--mode", choices=["watch", "poll"], required=True)
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--secs", type=float, default=5)
    ap.add_argument("--key", default="live")
    ap.add_argument("--every-ms", type=float, default=100)
    a = ap.parse_args()
    counts = [0, 0]
    stop = asyncio.Event()
    if a.mode == "watch":
        tasks = [asyncio.create_task(watcher(a.port, a.key, 10, counts, stop)) for _ in range(a.clients)]
    else:
        tasks = [asyncio.create_task(poller(a.port, a.key, a.every_ms / 1000, counts, stop)) for _ in range(a.clients)]
    await asyncio.sleep(a.secs)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    print(f"{a.mode} clients={a.clients} secs={a.secs} messages={counts[0]} per_sec={counts[0] / a.secs:.0f}")


asyncio.run(main())
