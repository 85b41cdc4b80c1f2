"""Cancellation against a live personaq (`personaq dev`, token named
``env``): POST /v1/requests/{id}/cancel and POST /v1/tasks/{task_id}/cancel
through Client and AsyncClient. A queued request is made by filling
slowpoke's eight slots with long attempts; a running one is slowpoke with a
30 s attempt timeout; a request waiting for a retry is flaky with a 30 s
backoff."""

import asyncio
import os
import tempfile
import threading
import time
import unittest
import uuid

from _support import APIProcessCase, LiveCase, task
import personaq

#: slowpoke's attempts last until their timeout: 30 s keeps one running.
LONG_ATTEMPT = {"attempt_timeout_ms": 30000, "max_attempts": 1}
#: flaky fails attempt 1 at once; a 30 s backoff keeps it waiting to retry.
LONG_BACKOFF = {"backoff_ms": [30000]}
#: The replica's slots per persona in `personaq dev`.
DEV_CONCURRENCY = 8


def await_status(c: personaq.Client, request_id: str, want: str, within: float = 15.0) -> personaq.RequestStatus:
    """Polls the request until its status is want."""
    end = time.monotonic() + within
    while True:
        st = c.status(request_id)
        if st.status == want or time.monotonic() > end:
            if st.status != want:
                raise AssertionError("request %s is %s, not %s, after %.0fs" % (request_id, st.status, want, within))
            return st
        time.sleep(0.05)


def events_until(c: personaq.Client, request_id: str, kind: str, within: float = 10.0):
    """The request's events, read again until one of kind is among them
    (a cancelled attempt's event is published by the replica just after
    the canceller wrote the record)."""
    end = time.monotonic() + within
    while True:
        events = list(c.events(request_id))
        if kind in [e.kind for e in events] or time.monotonic() > end:
            return events
        time.sleep(0.1)


class CancelTest(LiveCase):
    def assert_cancelled_record(self, rec: personaq.Record, reason: str) -> None:
        self.assertEqual((rec.outcome, rec.reason, rec.detail, rec.cancelled_by),
                         ("cancelled", "cancelled", reason, "env"))

    def test_cancel_a_running_request(self):
        st = self.client.submit("slowpoke", task("py-cancel-run"), policy_overrides=LONG_ATTEMPT)
        await_status(self.client, st.request_id, "running")
        t0 = time.monotonic()
        got = self.client.cancel(st.request_id, reason="the orchestrator gave up")
        self.assertEqual((got.request_id, got.status), (st.request_id, "cancelled"))
        self.assert_cancelled_record(got.record, "the orchestrator gave up")
        with self.assertRaises(personaq.Cancelled) as cm:
            self.client.await_result(st.request_id, wait=30)
        self.assertIsInstance(cm.exception, personaq.Stopped)
        self.assert_cancelled_record(cm.exception.record, "the orchestrator gave up")
        self.assertEqual(cm.exception.status.status, "cancelled")
        events = events_until(self.client, st.request_id, "cancelled")
        kinds = [e.kind for e in events]
        self.assertIn("cancelled", kinds, "the running attempt was stopped by the cancel")
        self.assertLess(time.monotonic() - t0, 20, "the 30 s attempt was stopped, not waited out")
        self.assertEqual(kinds.count("started"), 1, kinds)
        self.assertLess(kinds.index("started"), kinds.index("cancelled"))
        self.assertEqual(kinds[-1], "terminal")
        self.assertEqual(events[-1].status.record.outcome, "cancelled")

    def test_run_raises_cancelled(self):
        rid, out = str(uuid.uuid4()), {}

        def orchestrate() -> None:
            with personaq.Client(timeout=20) as c:
                try:
                    out["result"] = c.run(persona="slowpoke", task_id=task("py-cancel-runner"), request_id=rid,
                                          policy_overrides=LONG_ATTEMPT)
                except Exception as e:  # checked below
                    out["error"] = e

        th = threading.Thread(target=orchestrate)
        th.start()
        self.addCleanup(th.join, 30)
        end = time.monotonic() + 15
        while time.monotonic() < end:
            try:
                if self.client.status(rid).status == "running":
                    break
            except personaq.NotFound:
                pass  # not submitted yet
            time.sleep(0.05)
        self.client.cancel(rid, reason="run stopped")
        th.join(30)
        self.assertIsInstance(out.get("error"), personaq.Cancelled, out)
        self.assert_cancelled_record(out["error"].record, "run stopped")

    def test_cancel_a_queued_request(self):
        fill = task("py-cancel-fill")
        self.addCleanup(self.client.cancel_task, fill, "test over")
        fillers = [self.client.submit("slowpoke", fill, step="s%d" % i, policy_overrides=LONG_ATTEMPT)
                   for i in range(DEV_CONCURRENCY)]
        for f in fillers:
            await_status(self.client, f.request_id, "running")
        st = self.client.submit("slowpoke", task("py-cancel-queued"), policy_overrides=LONG_ATTEMPT)
        self.assertEqual(self.client.result(st.request_id, wait=0.5).status, "queued", "slowpoke's slots are full")
        got = self.client.cancel(st.request_id, reason="no longer needed")
        self.assertEqual(got.status, "cancelled")
        self.assert_cancelled_record(got.record, "no longer needed")
        self.assertEqual(got.record.attempts, 0)
        self.assertEqual(len(self.client.cancel_task(fill, "free the slots").cancelled), DEV_CONCURRENCY)
        with self.assertRaises(personaq.Cancelled) as cm:
            self.client.await_result(st.request_id, wait=30)
        self.assert_cancelled_record(cm.exception.record, "no longer needed")
        time.sleep(0.5)  # slots free: a replica that ran it would have said started by now
        kinds = [e.kind for e in self.client.events(st.request_id)]
        self.assertEqual(kinds, ["queued", "terminal"], "a request cancelled while queued never runs")

    def test_cancel_after_success_keeps_the_succeeded_record(self):
        res = self.client.run(persona="echo", task_id=task("py-cancel-late"), input={"n": 1})
        with self.assertRaises(personaq.AlreadyEnded) as cm:
            self.client.cancel(res.request_id, reason="too late")
        e = cm.exception
        self.assertIsInstance(e, personaq.Conflict)
        self.assertEqual(e.status, 409)
        self.assertEqual((e.record.outcome, e.record.request_id), ("succeeded", res.request_id))
        self.assertEqual(e.request.status, "succeeded")
        self.assertEqual(self.client.await_result(res.request_id, wait=1).output["input"], {"n": 1})

    def test_cancel_a_task_across_two_personas(self):
        t = task("py-cancel-task")
        slow = self.client.submit("slowpoke", t, step="plan", policy_overrides=LONG_ATTEMPT)
        flaky = self.client.submit("flaky", t, step="code", policy_overrides=LONG_BACKOFF)
        other = self.client.submit("echo", task("py-cancel-other"), input=1)
        await_status(self.client, slow.request_id, "running")
        await_status(self.client, flaky.request_id, "retrying")
        got = self.client.cancel_task(t, reason="workflow cancelled")
        self.assertIsInstance(got, personaq.TaskCancel)
        self.assertEqual(got.task_id, t)
        self.assertEqual(sorted((s.persona, s.status) for s in got.cancelled),
                         [("flaky", "cancelled"), ("slowpoke", "cancelled")])
        self.assertEqual(got.already_ended, [])
        for s in (slow, flaky):
            with self.subTest(persona=s.persona), self.assertRaises(personaq.Cancelled) as cm:
                self.client.await_result(s.request_id, wait=30)
            self.assert_cancelled_record(cm.exception.record, "workflow cancelled")
        self.assertEqual(self.client.result(other.request_id, wait=30).status, "succeeded",
                         "another task's request is untouched")
        self.assertEqual(self.client.cancel_task(t).cancelled, [], "nothing open is left")

    def test_cancel_an_unknown_request(self):
        with self.assertRaises(personaq.NotFound) as cm:
            self.client.cancel(task("no-such-request"))
        self.assertNotIsInstance(cm.exception, personaq.NoOutput)
        self.assertEqual(cm.exception.status, 404)

    def test_async_cancel(self):
        async def main():
            async with personaq.AsyncClient() as c:
                st = await c.submit("slowpoke", task("pya-cancel"), policy_overrides=LONG_ATTEMPT)
                got = await c.cancel(st.request_id, reason="async")
                with self.assertRaises(personaq.Cancelled) as cm:
                    await c.await_result(st.request_id, wait=30)
                with self.assertRaises(personaq.AlreadyEnded) as late:
                    await c.cancel(st.request_id)
                t = task("pya-cancel-task")
                await c.submit("slowpoke", t, policy_overrides=LONG_ATTEMPT)
                tc = await c.cancel_task(t, reason="async task")
                return got, cm.exception, late.exception, tc
        got, stopped, late, tc = asyncio.run(main())
        self.assert_cancelled_record(got.record, "async")
        self.assert_cancelled_record(stopped.record, "async")
        self.assertEqual(late.record.outcome, "cancelled", "the record that won is the first cancel's")
        self.assertEqual([s.record.detail for s in tc.cancelled], ["async task"])


class CancelScopeTest(APIProcessCase):
    """`personaq api --config` with named tokens beside dev, on its NATS: a
    token without the cancel scope is refused, and the record names the
    token that cancelled."""

    def setUp(self) -> None:
        super().setUp()
        cfg = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
        self.addCleanup(os.unlink, cfg.name)
        cfg.write("""
personas:
  echo:
    invoker: {type: demo, demo: echo}
api:
  tokens:
    - {name: orchestrator, token: orchestrator-token-0001, scopes: [submit, read]}
    - {name: janitor, token: janitor-token-00000001, scopes: [cancel]}
""")
        cfg.close()
        self.api_args = ("--config", cfg.name)
        self.start_api()

    def test_a_token_without_the_cancel_scope_is_forbidden(self):
        with personaq.Client(self.url, token="orchestrator-token-0001") as orch, \
                personaq.Client(self.url, token="janitor-token-00000001") as janitor:
            st = orch.submit("slowpoke", task("py-cancel-scope"), policy_overrides=LONG_ATTEMPT)
            with self.assertRaises(personaq.Forbidden) as cm:
                orch.cancel(st.request_id, reason="not mine to cancel")
            self.assertEqual((cm.exception.status, cm.exception.scope), (403, "cancel"))
            with self.assertRaises(personaq.Forbidden):
                orch.cancel_task(st.task_id)
            self.assertIn(orch.status(st.request_id).status, personaq.PENDING_STATUSES)
            got = janitor.cancel(st.request_id, reason="cleanup")
            self.assertEqual((got.record.cancelled_by, got.record.detail), ("janitor", "cleanup"))
            with self.assertRaises(personaq.Cancelled) as cm:
                orch.await_result(st.request_id, wait=30)
            self.assertEqual(cm.exception.record.cancelled_by, "janitor")


if __name__ == "__main__":
    unittest.main()
