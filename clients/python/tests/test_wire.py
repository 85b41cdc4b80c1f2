"""Offline tests of what both clients share: parsing request statuses,
terminal records, problem documents and event streams."""

import json
import unittest
from datetime import datetime, timedelta, timezone

import _support  # noqa: F401  (puts the package on the path)
import personaq
from personaq import _wire as w
from personaq.models import RequestStatus, parse_time


class ParseTest(unittest.TestCase):
    def test_go_times_with_nanoseconds(self):
        t = parse_time("2026-11-26T12:00:00.123456789Z")
        self.assertEqual(t, datetime(2026, 11, 26, 12, 0, 0, 123456, tzinfo=timezone.utc))
        self.assertEqual(parse_time("2026-11-26T13:00:00+01:00"), datetime(2026, 11, 26, 12, tzinfo=timezone.utc))
        self.assertIsNone(parse_time("0001-01-01T00:00:00Z"))
        self.assertIsNone(parse_time(None))
        with self.assertRaises(ValueError):
            parse_time("yesterday")

    def test_inline_output_kept_byte_for_byte(self):
        out = '{"b": 1.50,  "a":"\\u00e9", "n": [1, {"x": null}]}'
        body = ('{"request_id":"r1","status":"succeeded","record":{"request_id":"r1","outcome":"succeeded",'
                '"attempts":1, "usage":{"input_tokens":1}, "output" : %s ,"at":"2026-11-26T12:00:00Z"}}' % out)
        st = RequestStatus.from_json(body.encode())
        self.assertTrue(st.terminal)
        self.assertEqual(st.output_bytes, out.encode())
        self.assertEqual(json.loads(st.output_bytes)["a"], "é")

    def test_no_output_when_record_has_none(self):
        body = b'{"request_id":"r1","status":"quarantined","record":{"outcome":"quarantined","reason":"terminal"}}'
        st = RequestStatus.from_json(body)
        self.assertIsNone(st.output_bytes)
        self.assertEqual(st.record.reason, "terminal")

    def test_pending_status_is_not_terminal(self):
        st = RequestStatus.from_json(b'{"request_id":"r","status":"retrying","attempts":2,"last_error":"x"}')
        self.assertFalse(st.terminal)
        self.assertEqual(st.attempts, 2)


class ErrorMappingTest(unittest.TestCase):
    def test_problem_types_choose_the_class(self):
        cases = {
            "unauthorized": personaq.Unauthorized, "forbidden": personaq.Forbidden,
            "invalid-json": personaq.InvalidRequest, "invalid-field": personaq.InvalidRequest,
            "invalid-query": personaq.InvalidRequest, "too-large": personaq.TooLarge,
            "unknown-persona": personaq.UnknownPersona, "conflict": personaq.Conflict,
            "not-found": personaq.NotFound, "no-output": personaq.NoOutput, "unavailable": personaq.Unavailable,
        }
        for slug, cls in cases.items():
            with self.subTest(slug=slug):
                body = json.dumps({"type": "urn:personaq:problem:" + slug, "status": 418}).encode()
                # The type wins over the status.
                self.assertIs(type(w.error_from(418, body, None)), cls)

    def test_extensions(self):
        e = w.error_from(422, json.dumps({"type": "urn:personaq:problem:unknown-persona", "field": "persona",
                                          "served_personas": ["echo", "flaky"]}).encode(), None)
        self.assertEqual(e.served_personas, ["echo", "flaky"])
        self.assertEqual(e.field, "persona")
        c = w.error_from(409, json.dumps({"type": "urn:personaq:problem:conflict",
                                          "request": {"request_id": "r9", "status": "queued"}}).encode(), None)
        self.assertEqual(c.request.request_id, "r9")
        u = w.error_from(503, b'{"type":"urn:personaq:problem:unavailable"}', "2")
        self.assertEqual(u.retry_after, 2.0)
        self.assertTrue(w.transient(u))
        self.assertFalse(w.transient(c))

    def test_not_a_problem_document_falls_back_on_the_status(self):
        e = w.error_from(404, b"404 page not found\n", None)
        self.assertIs(type(e), personaq.NotFound)
        self.assertIn("page not found", str(e))

    def test_stopped_class_by_outcome_and_reason(self):
        def rec(outcome, reason=None):
            return personaq.Record.from_dict({"outcome": outcome, "reason": reason, "attempts": 1,
                                              "task_id": "t", "step": "s"})
        from personaq.errors import stopped_error
        self.assertIs(type(stopped_error(rec("quarantined", "exhausted"))), personaq.Blocked)
        self.assertIs(type(stopped_error(rec("quarantined", "budget_exhausted"))), personaq.BudgetExhausted)
        self.assertIsInstance(stopped_error(rec("quarantined", "budget_exhausted")), personaq.Blocked)
        self.assertIs(type(stopped_error(rec("deferred", "deferred"))), personaq.Deferred)
        self.assertIs(type(stopped_error(rec("escalated", "escalated"))), personaq.Escalated)
        self.assertIs(type(stopped_error(rec("deadline_exceeded", "deadline_exceeded"))),
                      personaq.StepDeadlineExceeded)
        self.assertIs(type(stopped_error(rec("cancelled"))), personaq.Cancelled)
        err = stopped_error(rec("quarantined", "terminal"))
        self.assertEqual(err.record.reason, "terminal")
        self.assertIn("task t step s quarantined: terminal after 1 attempt(s)", str(err))


class WireTest(unittest.TestCase):
    def test_endpoint(self):
        ep = w.Endpoint.parse("http://127.0.0.1:9999/v1/")
        self.assertEqual((ep.host, ep.port, ep.prefix), ("127.0.0.1", 9999, ""))
        self.assertEqual(ep.path("/requests", [("task_id", "a b")]), "/v1/requests?task_id=a+b")
        self.assertEqual(w.Endpoint.parse("https://h/pq").path("/personas"), "/pq/v1/personas")
        self.assertEqual(w.Endpoint.parse("https://h").port, 443)
        self.assertEqual(w.request_path(ep, "a/b"), "/v1/requests/a%2Fb")
        with self.assertRaises(ValueError):
            w.Endpoint.parse("ftp://h")

    def test_submit_body(self):
        rid, body = w.submit_body("echo", "t1", "plan", {"x": 1}, None, "agent-a", None, None,
                                  timedelta(seconds=10), 9, None, {"max_tokens": 5}, None)
        d = json.loads(body)
        self.assertEqual(d["request_id"], rid)
        self.assertEqual(d["agents"], {"primary": "agent-a"})
        self.assertEqual(d["progress_total"], 9)
        self.assertEqual(d["budget"], {"max_tokens": 5})
        self.assertNotIn("policy", d)
        left = parse_time(d["deadline"]) - datetime.now(timezone.utc)
        self.assertTrue(timedelta(seconds=8) < left <= timedelta(seconds=10), left)
        _, again = w.submit_body("echo", "t1", "main", None, "fixed-id", None, None, None, None, None, None, None, None)
        self.assertEqual(json.loads(again), {"request_id": "fixed-id", "persona": "echo", "task_id": "t1", "step": "main"})

    def test_list_query(self):
        q = w.list_query("t1", ["echo", "flaky"], "succeeded", 2, "c1")
        self.assertEqual(q, [("task_id", "t1"), ("persona", "echo,flaky"), ("status", "succeeded"),
                             ("limit", "2"), ("cursor", "c1")])

    def test_output_checked_against_its_reference(self):
        import base64
        import hashlib
        data = b"x" * 70000
        digest = "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()
        rec = personaq.Record.from_dict({"request_id": "r", "outcome": "succeeded",
                                         "output_ref": {"size": len(data), "digest": digest}})
        self.assertEqual(w.check_output(rec, data), data)
        with self.assertRaises(personaq.OutputMismatch):
            w.check_output(rec, data[:-1] + b"y")
        with self.assertRaises(personaq.OutputMismatch):
            w.check_output(rec, data[:-1])


class SSEParserTest(unittest.TestCase):
    def test_events_comments_and_multiline_data(self):
        p = w.SSEParser()
        lines = [b": keep-alive\n", b"event: attempt\n", b"id: 7\n", b'data: {"kind":"failed",\n',
                 b'data: "attempt":2}\r\n', b"\n", b"\n",
                 b"event: terminal\n", b"id: terminal\n",
                 b'data: {"request_id":"r","status":"succeeded","record":{"outcome":"succeeded","output":[1, 2]}}\n',
                 b"\n"]
        events = [e for e in (p.line(l) for l in lines) if e is not None]
        self.assertEqual([(e.event, e.id, e.kind) for e in events],
                         [("attempt", "7", "failed"), ("terminal", "terminal", "terminal")])
        self.assertEqual(events[0].attempt, 2)
        self.assertEqual(events[1].status.output_bytes, b"[1, 2]")
        self.assertTrue(events[1].terminal)


if __name__ == "__main__":
    unittest.main()
