"""A restart of the API process while clients wait: `personaq api` is
started beside the live personaq (on its NATS), killed while a client awaits
a request through it, and started again on the same port; the client
reconnects and gets the terminal record. Needs PERSONAQ_BIN (the personaq
binary) and PERSONAQ_NATS_URL, which the Go harness sets."""

import asyncio
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.request

import _support
from _support import task
import personaq


def restart_env():
    bin_, nats = os.environ.get("PERSONAQ_BIN", ""), os.environ.get("PERSONAQ_NATS_URL", "")
    if not (bin_ and nats):
        if os.environ.get("PERSONAQ_REQUIRE_LIVE") == "1":
            raise AssertionError("PERSONAQ_BIN and PERSONAQ_NATS_URL must be set with PERSONAQ_REQUIRE_LIVE=1")
        raise unittest.SkipTest("PERSONAQ_BIN and PERSONAQ_NATS_URL not set: cannot start `personaq api`")
    return bin_, nats


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class APIRestartTest(unittest.TestCase):
    def setUp(self) -> None:
        _support.live_url()
        self.bin, self.nats = restart_env()
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.log = tempfile.TemporaryFile()
        self.addCleanup(self.log.close)
        self.procs = []
        self.addCleanup(self.stop_all)

    def start_api(self) -> subprocess.Popen:
        p = subprocess.Popen([self.bin, "api", "--listen", "127.0.0.1:%d" % self.port, "--nats-url", self.nats],
                             stdout=self.log, stderr=self.log, env=dict(os.environ))
        self.procs.append(p)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if p.poll() is not None:
                self.fail("personaq api exited (%d):\n%s" % (p.returncode, self.output()))
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=2) as r:
                    if r.status == 200:
                        return p
            except OSError:
                time.sleep(0.1)
        self.fail("personaq api not healthy within 30s:\n" + self.output())

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")

    def stop_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()

    def restart(self, api: subprocess.Popen, sig: int) -> subprocess.Popen:
        api.send_signal(sig)
        api.wait(15)
        time.sleep(1.0)  # the waiting client meets refused connections meanwhile
        return self.start_api()

    def test_run_survives_a_killed_api(self):
        api = self.start_api()
        out = {}

        def orchestrate() -> None:
            with personaq.Client(self.url) as c:
                try:
                    c.run(persona="slowpoke", task_id=task("py-restart"))
                except personaq.Stopped as e:
                    out["error"] = e
                except Exception as e:  # reported below
                    out["unexpected"] = e

        th = threading.Thread(target=orchestrate)
        th.start()
        time.sleep(1.0)
        self.assertTrue(th.is_alive())
        self.restart(api, signal.SIGKILL)
        th.join(60)
        self.assertNotIn("unexpected", out, out)
        self.assertIsInstance(out.get("error"), personaq.Blocked, out)
        self.assertEqual(out["error"].record.reason, "exhausted")

    def test_async_waiters_survive_a_restart(self):
        api = self.start_api()

        async def main():
            async with personaq.AsyncClient(self.url) as c:
                t = task("pya-restart")
                sts = [await c.submit("flaky" if i % 2 else "slowpoke", t, step="s%d" % i) for i in range(6)]
                waits = [asyncio.ensure_future(c.result(st.request_id, wait=60)) for st in sts]
                events = asyncio.ensure_future(self.collect(c, sts[1].request_id))
                await asyncio.sleep(0.5)
                await asyncio.get_running_loop().run_in_executor(None, self.restart, api, signal.SIGTERM)
                return await asyncio.gather(*waits), await events

        done, events = asyncio.run(main())
        self.assertEqual([st.status for st in done], ["quarantined", "succeeded"] * 3)
        kinds = [e.kind for e in events]
        self.assertEqual(kinds[-1], "terminal")
        self.assertEqual(len([e.id for e in events]), len({e.id for e in events}), kinds)
        self.assertEqual(kinds.count("started"), 3, kinds)

    @staticmethod
    async def collect(c: personaq.AsyncClient, request_id: str):
        return [e async for e in c.events(request_id)]


if __name__ == "__main__":
    unittest.main()
