"""The synchronous client against a live personaq serving the demo
personas (`personaq dev --per-persona 0`): success, every stopped outcome,
idempotent resubmit, conflict, unknown persona, bad token, long-poll past
the wait, event streams and large outputs."""

import unittest
import uuid
from datetime import timedelta
from unittest import mock

import _support
from _support import LiveCase, task
import personaq
from personaq import _wire as w

AB = {"primary": "agent-a", "fallback": "agent-b"}


class RunTest(LiveCase):
    def test_echo_succeeds_with_the_output(self):
        res = self.client.run(persona="echo", task_id=task("py-echo"), step="plan", input={"goal": "add retries"})
        self.assertEqual(res.output["input"], {"goal": "add retries"})
        self.assertEqual(res.output["persona"], "echo")
        self.assertEqual(res.record.outcome, "succeeded")
        self.assertEqual(res.record.attempts, 1)
        self.assertEqual(res.status.step, "plan")
        self.assertEqual(res.output_bytes, self.client.output(res.request_id))

    def test_flaky_succeeds_on_attempt_3(self):
        res = self.client.run(persona="flaky", task_id=task("py-flaky"), input={"n": 1})
        self.assertEqual(res.record.attempts, 3)
        self.assertEqual(res.output["attempt"], 3)

    def test_validator_succeeds_on_attempt_2_with_feedback(self):
        res = self.client.run(persona="validator", task_id=task("py-validator"))
        self.assertEqual(res.record.attempts, 2)
        self.assertTrue(res.output["fixed"])

    def test_terminal_is_blocked(self):
        with self.assertRaises(personaq.Blocked) as cm:
            self.client.run(persona="terminal", task_id=task("py-terminal"))
        rec = cm.exception.record
        self.assertEqual((rec.outcome, rec.reason, rec.attempts), ("quarantined", "terminal", 1))
        self.assertTrue(rec.quarantine_seq)
        self.assertIn("malformed", rec.last_error)
        self.assertNotIsInstance(cm.exception, personaq.BudgetExhausted)

    def test_slowpoke_is_blocked_exhausted(self):
        with self.assertRaises(personaq.Blocked) as cm:
            self.client.run(persona="slowpoke", task_id=task("py-slowpoke"))
        self.assertEqual((cm.exception.record.reason, cm.exception.record.attempts), ("exhausted", 4))
        self.assertEqual(cm.exception.status.status, "quarantined")

    def test_budget_exhausted(self):
        # Each flaky attempt reports 1,500 tokens: a 1,000-token budget stops it after one.
        with self.assertRaises(personaq.BudgetExhausted) as cm:
            self.client.run(persona="flaky", task_id=task("py-budget"), budget={"max_tokens": 1000})
        self.assertIsInstance(cm.exception, personaq.Blocked)
        self.assertEqual(cm.exception.record.reason, "budget_exhausted")

    def test_plateau_is_deferred(self):
        with self.assertRaises(personaq.Deferred) as cm:
            self.client.run(persona="plateau", task_id=task("py-plateau"), agents=AB, progress_total=9)
        rec = cm.exception.record
        self.assertEqual((rec.outcome, rec.attempts, rec.agent), ("deferred", 4, "agent-b"))
        self.assertEqual(rec.progress, {"completed": 5, "total": 9})

    def test_no_progress_at_all_is_escalated(self):
        # slowpoke never reports progress: with progress tracked, every attempt counts as 0/9.
        with self.assertRaises(personaq.Escalated) as cm:
            self.client.run(persona="slowpoke", task_id=task("py-escalated"), progress_total=9)
        self.assertEqual(cm.exception.record.reason, "escalated")

    def test_step_deadline_exceeded(self):
        with self.assertRaises(personaq.StepDeadlineExceeded) as cm:
            self.client.run(persona="slowpoke", task_id=task("py-deadline"), deadline=timedelta(seconds=1))
        self.assertIsNotNone(cm.exception.record)
        self.assertEqual(cm.exception.record.outcome, "deadline_exceeded")

    def test_large_output_comes_from_the_object_store(self):
        blob = "x" * (100 * 1024)
        res = self.client.run(persona="echo", task_id=task("py-large"), input={"blob": blob})
        self.assertIsNotNone(res.record.output_ref)
        self.assertGreater(len(res.output_bytes), 64 * 1024)
        self.assertEqual(res.output["input"]["blob"], blob)
        self.assertEqual(self.client.output(res.request_id), res.output_bytes)


class SubmitTest(LiveCase):
    def test_idempotent_resubmit(self):
        rid, t = str(uuid.uuid4()), task("py-idem")
        first = self.client.submit("echo", t, request_id=rid, input={"a": 1})
        self.assertFalse(first.duplicate)
        self.assertEqual((first.request_id, first.status), (rid, "queued"))
        self.assertIsNotNone(first.deadline)
        again = self.client.submit("echo", t, request_id=rid, input={"a": 1})
        self.assertTrue(again.duplicate)
        self.assertEqual(again.deadline, first.deadline)
        self.assertTrue(self.client.result(rid, wait=30).terminal)

    def test_same_id_other_content_conflicts(self):
        rid, t = str(uuid.uuid4()), task("py-conflict")
        self.client.submit("echo", t, request_id=rid, input={"a": 1})
        with self.assertRaises(personaq.Conflict) as cm:
            self.client.submit("echo", t, request_id=rid, input={"a": 2})
        self.assertEqual(cm.exception.status, 409)
        self.assertEqual(cm.exception.request.request_id, rid)

    def test_unknown_persona(self):
        with self.assertRaises(personaq.UnknownPersona) as cm:
            self.client.submit("plannr", task("py-unknown"))
        self.assertEqual(cm.exception.status, 422)
        self.assertEqual(cm.exception.field, "persona")
        self.assertIn("echo", cm.exception.served_personas)

    def test_invalid_field(self):
        with self.assertRaises(personaq.InvalidRequest) as cm:
            self.client.submit("echo", "not a valid task id!")
        self.assertEqual((cm.exception.status, cm.exception.field), (400, "task_id"))
        with self.assertRaises(personaq.InvalidRequest) as cm:
            self.client.submit("echo", task("py-field"), extra={"no_such_field": 1})
        self.assertEqual(cm.exception.field, "no_such_field")

    def test_explicit_deadline_is_kept(self):
        st = self.client.submit("echo", task("py-deadline-kept"), deadline=timedelta(minutes=3))
        self.assertTrue(timedelta(minutes=2) < st.remaining() <= timedelta(minutes=3), st.remaining())


class AuthTest(LiveCase):
    def test_wrong_and_missing_token(self):
        for token in ("wrong-token", ""):
            with self.subTest(token=token), personaq.Client(token=token) as bad:
                with self.assertRaises(personaq.Unauthorized) as cm:
                    bad.personas()
                self.assertEqual(cm.exception.status, 401)

    def test_unknown_request_is_not_found(self):
        with self.assertRaises(personaq.NotFound):
            self.client.result(str(uuid.uuid4()))

    def test_no_output_before_the_end(self):
        st = self.client.submit("slowpoke", task("py-nooutput"))
        with self.assertRaises(personaq.NoOutput):
            self.client.output(st.request_id)


class WaitTest(LiveCase):
    def test_wait_ends_before_the_request_does(self):
        st = self.client.submit("slowpoke", task("py-wait"))
        now = self.client.result(st.request_id, wait=0.5)
        self.assertFalse(now.terminal)
        self.assertIn(now.status, personaq.PENDING_STATUSES)
        self.assertIsNone(now.record)

    def test_wait_past_the_server_bound_polls_again(self):
        # The server's 60 s bound lowered to 0.5 s on the client: a 4 s
        # request needs several long-polls.
        st = self.client.submit("slowpoke", task("py-poll"))
        calls = []
        real = self.client._get_status
        with mock.patch.object(w, "MAX_SERVER_WAIT", 0.5), \
                mock.patch.object(self.client, "_get_status", lambda rid, wait: calls.append(wait) or real(rid, wait)):
            done = self.client.result(st.request_id, wait=60)
        self.assertEqual(done.status, "quarantined")
        self.assertGreater(len(calls), 2)
        self.assertTrue(all(c <= 0.5 for c in calls), calls)

    def test_await_result_after_the_end(self):
        st = self.client.submit("echo", task("py-await"), input=[1, 2, 3])
        self.client.result(st.request_id, wait=30)
        res = self.client.await_result(st.request_id, wait=1)
        self.assertEqual(res.output["input"], [1, 2, 3])


class EventsTest(LiveCase):
    def test_attempt_events_then_the_terminal_one(self):
        st = self.client.submit("flaky", task("py-events"))
        events = list(self.client.events(st.request_id))
        kinds = [e.kind for e in events]
        # queued is published by the submit path, started by the replica:
        # a fast replica's started can come first.
        self.assertEqual(kinds.count("queued"), 1, kinds)
        self.assertEqual(kinds.count("started"), 3)
        self.assertEqual(kinds.count("failed"), 2)
        self.assertEqual(kinds[-1], "terminal")
        self.assertEqual(events[-1].status.record.outcome, "succeeded")
        self.assertEqual(len({e.id for e in events}), len(events))

    def test_resume_after_an_event(self):
        st = self.client.submit("flaky", task("py-resume"))
        events = list(self.client.events(st.request_id))
        resumed = list(self.client.events(st.request_id, last_event_id=events[1].id))
        self.assertEqual([(e.id, e.kind) for e in resumed], [(e.id, e.kind) for e in events[2:]])
        again = list(self.client.events(st.request_id, last_event_id="terminal"))
        self.assertEqual([e.kind for e in again], ["terminal"])

    def test_unknown_request_events(self):
        with self.assertRaises(personaq.NotFound):
            next(self.client.events(str(uuid.uuid4())))


class ListTest(LiveCase):
    def test_requests_of_a_task_newest_first_across_pages(self):
        t = task("py-list")
        ids = [self.client.submit("echo", t, step="s%d" % i).request_id for i in range(3)]
        listed = list(self.client.requests(task_id=t, limit=1))
        self.assertEqual([s.request_id for s in listed], ids[::-1])
        page = self.client.requests_page(task_id=t, limit=2)
        self.assertEqual(len(page.requests), 2)
        self.assertTrue(page.next_cursor)
        for rid in ids:
            self.client.result(rid, wait=30)
        done = list(self.client.requests(task_id=t, status="succeeded"))
        self.assertEqual(len(done), 3)
        self.assertEqual(list(self.client.requests(task_id=t, persona="flaky")), [])

    def test_personas_with_their_step_budget(self):
        by_name = {p.name: p for p in self.client.personas()}
        for name in ("echo", "flaky", "terminal", "slowpoke", "plateau", "validator"):
            self.assertIn(name, by_name)
        echo = by_name["echo"]
        self.assertEqual(echo.max_attempts, 4)
        self.assertGreater(echo.step_budget, timedelta(seconds=30))


if __name__ == "__main__":
    unittest.main()
