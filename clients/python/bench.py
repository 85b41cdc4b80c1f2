"""Latency of the Python client against a running personaq (`personaq dev`):
GET of a finished request's status over a kept-alive connection, run() of
the echo persona (200 ms of work) one at a time, and 64 concurrent runs on
AsyncClient.

    PERSONAQ_URL=http://127.0.0.1:8080 PERSONAQ_API_TOKEN=… python3 clients/python/bench.py
"""

import asyncio
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import personaq  # noqa: E402


def ms(samples, q):
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))] * 1000


def timed(fn, n):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


async def concurrent_runs(n):
    async with personaq.AsyncClient() as c:
        t = "bench-" + uuid.uuid4().hex[:8]
        t0 = time.perf_counter()
        await asyncio.gather(*(c.run(persona="echo", task_id=t, step="s%d" % i) for i in range(n)))
        return time.perf_counter() - t0


def main():
    with personaq.Client() as c:
        done = c.submit("echo", "bench-" + uuid.uuid4().hex[:8])
        c.result(done.request_id, wait=30)
        gets = timed(lambda: c.status(done.request_id), 300)
        runs = timed(lambda: c.run(persona="echo", task_id="bench-" + uuid.uuid4().hex[:8]), 30)
    print("GET status (kept-alive, terminal record): p50 %.2f ms p99 %.2f ms (n=300)" % (ms(gets, .5), ms(gets, .99)))
    print("run(echo) one at a time, 200 ms of persona work included: p50 %.0f ms p99 %.0f ms (n=30)"
          % (ms(runs, .5), ms(runs, .99)))
    print("AsyncClient, 64 concurrent run(echo): %.2f s wall" % asyncio.run(concurrent_runs(64)))


if __name__ == "__main__":
    main()
