"""Cancellation against a live personaq: POST /v1/requests/{id}/cancel
and POST /v1/tasks/{task_id}/cancel. These routes come with the
cancellation work; the tests run only with PERSONAQ_TEST_CANCEL=1."""

import asyncio
import os
import unittest

import _support
from _support import LiveCase, task
import personaq

ENABLED = os.environ.get("PERSONAQ_TEST_CANCEL") == "1"


@unittest.skipUnless(ENABLED, "cancel routes: set PERSONAQ_TEST_CANCEL=1 to test them")
class CancelTest(LiveCase):
    def test_cancel_a_request(self):
        st = self.client.submit("slowpoke", task("py-cancel"))
        self.client.cancel(st.request_id, reason="the orchestrator gave up")
        with self.assertRaises(personaq.Cancelled) as cm:
            self.client.await_result(st.request_id, wait=30)
        self.assertEqual(cm.exception.record.outcome, "cancelled")
        kinds = [e.kind for e in self.client.events(st.request_id)]
        self.assertIn("cancelled", kinds)
        self.assertEqual(kinds[-1], "terminal")

    def test_cancel_a_task(self):
        t = task("py-cancel-task")
        ids = [self.client.submit("slowpoke", t, step="s%d" % i).request_id for i in range(2)]
        self.client.cancel_task(t, reason="task abandoned")
        for rid in ids:
            with self.assertRaises(personaq.Cancelled):
                self.client.await_result(rid, wait=30)

    def test_cancel_an_unknown_request(self):
        with self.assertRaises(personaq.NotFound):
            self.client.cancel("no-such-request")

    def test_async_cancel(self):
        async def main():
            async with personaq.AsyncClient() as c:
                st = await c.submit("slowpoke", task("pya-cancel"))
                await c.cancel(st.request_id, reason="async")
                with self.assertRaises(personaq.Cancelled):
                    await c.await_result(st.request_id, wait=30)
        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
