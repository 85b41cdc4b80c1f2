"""A restart of the API process while clients wait: `personaq api` is
started beside the live personaq (on its NATS), killed while a client awaits
a request through it, and started again on the same port; the client
reconnects and gets the terminal record. Needs PERSONAQ_BIN (the personaq
binary) and PERSONAQ_NATS_URL, which the Go harness sets."""

import asyncio
import signal
import subprocess
import threading
import time
import unittest

from _support import APIProcessCase, task
import personaq


class APIRestartTest(APIProcessCase):
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
