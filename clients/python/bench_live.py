"""Live output latency of the Python client: from the persona's write to
the caller of ``live_output``'s iterator, against a personaq serving the
harness's ``streamer`` persona (clients/streaming_test.go), whose ``stamps``
step writes lines holding the time they were written.

    PERSONAQ_BENCH=1 go test -run TestPythonLiveOutputLatency -v ./clients/

One request at a time on the sync iterator (200 lines, one every 10 ms),
then 10 concurrent requests on the asyncio iterator (100 lines each). The
latency includes the runtime's coalescing (a chunk waits up to 25 ms for
more text), NATS, the API's event stream and the client's parsing.
"""

import asyncio
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import personaq  # noqa: E402


def pct(samples, q):
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))] / 1e6


def stamps(n, every_ms=10):
    return {"attempts": [[{"stamps": n, "every_ms": every_ms}]]}


class Lines:
    """Write→caller latencies of the stamp lines in a request's chunks."""

    def __init__(self):
        self.tail, self.lat = "", []

    def add(self, item):
        if not isinstance(item, personaq.OutputChunk):
            return
        now = time.time_ns()
        self.tail += item.text
        *lines, self.tail = self.tail.split("\n")
        self.lat += [now - int(line) for line in lines if line]


def sync_run(n):
    with personaq.Client() as c:
        rid = c.submit("streamer", "bench-live-" + uuid.uuid4().hex[:8], input=stamps(n)).request_id
        lines = Lines()
        for item in c.live_output(rid):
            lines.add(item)
    return lines.lat


async def async_runs(k, n):
    async with personaq.AsyncClient() as c:
        async def one(i):
            st = await c.submit("streamer", "bench-live-" + uuid.uuid4().hex[:8], step="s%d" % i, input=stamps(n))
            lines = Lines()
            async for item in c.live_output(st.request_id):
                lines.add(item)
            return lines.lat
        return [x for lat in await asyncio.gather(*(one(i) for i in range(k))) for x in lat]


def main():
    lat = sync_run(200)
    print("sync iterator, 1 request × 200 lines (one per 10 ms): write→caller p50 %.1f ms p99 %.1f ms (n=%d)"
          % (pct(lat, .5), pct(lat, .99), len(lat)))
    lat = asyncio.run(async_runs(10, 100))
    print("async iterator, 10 concurrent requests × 100 lines: write→caller p50 %.1f ms p99 %.1f ms (n=%d)"
          % (pct(lat, .5), pct(lat, .99), len(lat)))


if __name__ == "__main__":
    main()
