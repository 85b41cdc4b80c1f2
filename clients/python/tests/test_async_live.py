"""The asyncio client against a live personaq: run, stopped outcomes,
events, many concurrent awaits, and an event loop that keeps running while
they wait."""

import asyncio
import unittest
import uuid
from datetime import timedelta

import _support
from _support import task
import personaq


class AsyncLiveTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        _support.live_url()
        self.client = personaq.AsyncClient(timeout=20)

    async def asyncTearDown(self) -> None:
        await self.client.close()

    async def test_run_echo(self):
        res = await self.client.run(persona="echo", task_id=task("pya-echo"), input={"goal": "x"})
        self.assertEqual(res.output["input"], {"goal": "x"})
        self.assertEqual(await self.client.output(res.request_id), res.output_bytes)

    async def test_stopped_outcomes(self):
        cases = [
            (personaq.Blocked, dict(persona="terminal")),
            (personaq.BudgetExhausted, dict(persona="flaky", budget={"max_tokens": 1000})),
            (personaq.Deferred, dict(persona="plateau", agents={"primary": "agent-a", "fallback": "agent-b"},
                                     progress_total=9)),
            (personaq.Escalated, dict(persona="slowpoke", progress_total=9)),
            (personaq.StepDeadlineExceeded, dict(persona="slowpoke", deadline=timedelta(seconds=1))),
        ]

        async def one(exc, kwargs):
            with self.assertRaises(exc) as cm:
                await self.client.run(task_id=task("pya-stop"), **kwargs)
            return cm.exception.record

        records = await asyncio.gather(*(one(exc, kw) for exc, kw in cases))
        self.assertEqual([r.outcome for r in records],
                         ["quarantined", "quarantined", "deferred", "escalated", "deadline_exceeded"])

    async def test_many_concurrent_runs_and_a_loop_that_keeps_ticking(self):
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.05)
                ticks += 1

        tick = asyncio.ensure_future(ticker())
        t = task("pya-many")
        results = await asyncio.gather(*(self.client.run(persona="flaky", task_id=t, step="s%d" % i, input=i)
                                         for i in range(40)))
        tick.cancel()
        self.assertEqual(sorted(r.output["input"] for r in results), list(range(40)))
        # flaky takes ~1.5 s (three attempts); a blocked loop would not tick.
        self.assertGreater(ticks, 10)

    async def test_events_and_resume(self):
        st = await self.client.submit("flaky", task("pya-events"))
        events = [e async for e in self.client.events(st.request_id)]
        self.assertIn("queued", [e.kind for e in events])
        self.assertEqual(events[-1].kind, "terminal")
        resumed = [e async for e in self.client.events(st.request_id, last_event_id=events[2].id)]
        self.assertEqual([e.id for e in resumed], [e.id for e in events[3:]])

    async def test_errors(self):
        with self.assertRaises(personaq.UnknownPersona):
            await self.client.submit("plannr", task("pya-unknown"))
        with self.assertRaises(personaq.NotFound):
            await self.client.result(str(uuid.uuid4()))
        rid = str(uuid.uuid4())
        await self.client.submit("echo", task("pya-conflict"), request_id=rid)
        with self.assertRaises(personaq.Conflict):
            await self.client.submit("echo", task("pya-conflict"), request_id=rid)
        async with personaq.AsyncClient(token="wrong") as bad:
            with self.assertRaises(personaq.Unauthorized):
                await bad.personas()

    async def test_wait_and_list(self):
        t = task("pya-list")
        st = await self.client.submit("slowpoke", t)
        now = await self.client.result(st.request_id, wait=0.3)
        self.assertFalse(now.terminal)
        listed = [s.request_id async for s in self.client.requests(task_id=t)]
        self.assertEqual(listed, [st.request_id])
        self.assertIn("echo", [p.name for p in await self.client.personas()])


if __name__ == "__main__":
    unittest.main()
