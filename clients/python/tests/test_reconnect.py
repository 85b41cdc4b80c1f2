"""Offline tests of the clients' reconnects and long-poll loop against a
scripted local HTTP server (the standard library's): a 503 with
Retry-After, an API that is down and then comes up (a restart while a
client waits), an event stream dropped mid-way, and waits longer than the
server's 60 s bound split into several long-polls."""

import asyncio
import json
import socket
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, List, Optional
from unittest import mock
from urllib.parse import parse_qs, urlsplit

import _support  # noqa: F401
import personaq
from personaq import _wire as w

TERMINAL = {"request_id": "r1", "status": "succeeded", "persona": "echo", "task_id": "t", "step": "main",
            "attempts": 1, "record": {"request_id": "r1", "task_id": "t", "step": "main", "persona": "echo",
                                      "outcome": "succeeded", "attempts": 1, "output": {"ok": True}}}
RUNNING = {"request_id": "r1", "status": "running", "persona": "echo", "task_id": "t", "step": "main", "attempts": 1}


class Script(BaseHTTPRequestHandler):
    """Answers each request with the next function of the server's script."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        srv = self.server
        with srv.lock:
            srv.seen.append((self.path, dict(self.headers)))
            step = srv.script.pop(0) if len(srv.script) > 1 else srv.script[0]
        step(self)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        srv = self.server
        with srv.lock:
            srv.seen.append((self.path, dict(self.headers), body))
            step = srv.script.pop(0) if len(srv.script) > 1 else srv.script[0]
        step(self)

    def log_message(self, *args) -> None:
        pass

    def send_json(self, status: int, body: dict, headers: Optional[dict] = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        ctype = "application/problem+json" if status >= 400 else "application/json"
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def send_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


def unavailable(h: Script) -> None:
    h.send_json(503, {"type": "urn:personaq:problem:unavailable", "status": 503}, {"Retry-After": "0"})


def terminal(h: Script) -> None:
    h.send_json(200, TERMINAL)


def running_after_wait(h: Script) -> None:
    wait = parse_qs(urlsplit(h.path).query).get("wait", ["0s"])[0]
    time.sleep(float(wait.rstrip("s")))
    h.send_json(200, RUNNING)


def sse(events: List[bytes], end: bool) -> Callable[[Script], None]:
    """An event stream (chunked, as Go's server sends it) that sends events
    and then either ends cleanly (end) or drops the connection."""
    def step(h: Script) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        h.send_chunk(b": keep-alive\n\n")
        for ev in events:
            h.send_chunk(ev)
        if end:
            h.wfile.write(b"0\r\n\r\n")
        h.close_connection = True
    return step


def attempt(seq: int, kind: str) -> bytes:
    return b'event: attempt\nid: %d\ndata: {"kind":"%s","attempt":1}\n\n' % (seq, kind.encode())


TERMINAL_EVENT = b"event: terminal\nid: terminal\ndata: " + json.dumps(TERMINAL).encode() + b"\n\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, script: List[Callable[[Script], None]], port: int = 0) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Script)
        self.httpd.daemon_threads = True
        self.httpd.script, self.httpd.seen, self.httpd.lock = list(script), [], threading.Lock()
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]

    @property
    def seen(self):
        return self.httpd.seen

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class ReconnectTest(unittest.TestCase):
    def serve(self, script, port=0) -> Server:
        srv = Server(script, port)
        self.addCleanup(srv.stop)
        return srv

    def test_503_is_retried_until_the_answer(self):
        srv = self.serve([unavailable, unavailable, terminal])
        with personaq.Client(srv.url, token="t", timeout=5) as c:
            st = c.result("r1", wait=5)
        self.assertEqual(st.status, "succeeded")
        self.assertEqual(len(srv.seen), 3)
        self.assertEqual(srv.seen[0][1]["Authorization"], "Bearer t")

    def test_503_past_the_wait_is_raised(self):
        srv = self.serve([unavailable])
        with personaq.Client(srv.url, token="t", timeout=5) as c, self.assertRaises(personaq.Unavailable):
            c.result("r1", wait=0.3)

    def test_api_down_then_up_while_waiting(self):
        port = free_port()
        out = {}

        def wait() -> None:
            with personaq.Client("http://127.0.0.1:%d" % port, token="t", timeout=5) as c:
                out["status"] = c.result("r1", wait=10)

        th = threading.Thread(target=wait)
        th.start()
        time.sleep(0.6)  # the client meets a refused connection first
        self.assertTrue(th.is_alive())
        self.serve([terminal], port)
        th.join(10)
        self.assertEqual(out["status"].status, "succeeded")

    def test_waits_longer_than_the_server_bound_are_several_polls(self):
        srv = self.serve([running_after_wait, running_after_wait, terminal])
        with mock.patch.object(w, "MAX_SERVER_WAIT", 0.2), personaq.Client(srv.url, token="t") as c:
            st = c.result("r1", wait=30)
        self.assertEqual(st.status, "succeeded")
        waits = [parse_qs(urlsplit(p).query)["wait"][0] for p, _ in srv.seen]
        self.assertEqual(waits, ["0.200s", "0.200s", "0.200s"])

    def test_wait_ends_with_the_current_status(self):
        srv = self.serve([running_after_wait])
        t0 = time.monotonic()
        with mock.patch.object(w, "MAX_SERVER_WAIT", 0.2), personaq.Client(srv.url, token="t") as c:
            st = c.result("r1", wait=0.5)
        self.assertEqual(st.status, "running")
        self.assertGreaterEqual(time.monotonic() - t0, 0.5)

    def test_event_stream_resumes_after_a_drop(self):
        srv = self.serve([sse([attempt(1, "queued"), attempt(2, "started")], end=False),
                          sse([attempt(3, "failed")], end=True),
                          sse([attempt(4, "started"), TERMINAL_EVENT], end=True)])
        with personaq.Client(srv.url, token="t") as c:
            events = list(c.events("r1"))
        self.assertEqual([e.id for e in events], ["1", "2", "3", "4", "terminal"])
        self.assertEqual([h.get("Last-Event-ID") for _, h in srv.seen], [None, "2", "3"])
        self.assertEqual(events[-1].status.output_bytes, b'{"ok": true}')


def output(seq: str, attempt: int, offset: int, data: str, final: bool = False) -> bytes:
    chunk = {"schema_version": 1, "request_id": "r1", "attempt": attempt, "offset": offset, "data": data,
             "at": "2026-11-27T03:04:05.006Z"}
    if final:
        chunk["final"] = True
    return b"event: output\nid: %s\ndata: %s\n\n" % (seq.encode(), json.dumps(chunk).encode())


SUPERSEDED = (b'event: output_superseded\nid: 4.3\ndata: {"schema_version":1,"request_id":"r1","attempt":2,'
              b'"offset":0,"data":"","supersedes":1,"at":"2026-11-27T03:04:05.006Z"}\n\n')


class LiveOutputOfflineTest(unittest.TestCase):
    """The live output iterators over a scripted stream dropped mid-way:
    items typed, attempt events left out, Last-Event-ID the last event's
    id whatever its kind."""

    SCRIPT = [
        [attempt(1, "started"), output("1.1", 1, 0, "Hé, "), output("1.2", 1, 5, "world", final=True)],
        [attempt(3, "failed").replace(b"id: 3", b"id: 3.2"), SUPERSEDED],
        [output("4.5", 2, 0, "again", final=True), TERMINAL_EVENT],
    ]

    def serve(self) -> Server:
        srv = Server([sse(self.SCRIPT[0], end=False), sse(self.SCRIPT[1], end=False), sse(self.SCRIPT[2], end=True)])
        self.addCleanup(srv.stop)
        return srv

    def check(self, srv: Server, items, live) -> None:
        self.assertEqual([type(i).__name__ for i in items],
                         ["OutputChunk", "OutputChunk", "OutputSuperseded", "OutputChunk"])
        c = items[1]
        self.assertEqual((c.attempt, c.offset, c.text, c.final, c.end, c.id), (1, 5, "world", True, 10, "1.2"))
        self.assertEqual(items[0].end, 5)  # UTF-8 bytes: é is two
        self.assertEqual((items[2].attempt, items[2].supersedes, items[2].id), (2, 1, "4.3"))
        self.assertEqual(items[0].at.year, 2026)
        self.assertEqual([h.get("Last-Event-ID") for _, h in srv.seen], [None, "1.2", "4.3"])
        self.assertEqual((live.status.status, live.last_event_id), ("succeeded", "terminal"))

    def test_sync(self):
        srv = self.serve()
        with personaq.Client(srv.url, token="t") as c:
            live = c.live_output("r1")
            items = list(live)
        self.check(srv, items, live)

    def test_async(self):
        srv = self.serve()

        async def main():
            async with personaq.AsyncClient(srv.url, token="t") as c:
                live = c.live_output("r1")
                return [i async for i in live], live
        items, live = asyncio.run(main())
        self.check(srv, items, live)

    def test_events_leave_output_out_but_resume_after_it(self):
        srv = self.serve()
        with personaq.Client(srv.url, token="t") as c:
            kinds = [(e.event, e.id) for e in c.events("r1")]
        self.assertEqual(kinds, [("attempt", "1"), ("attempt", "3.2"), ("terminal", "terminal")])
        self.assertEqual([h.get("Last-Event-ID") for _, h in srv.seen], [None, "1.2", "4.3"])


CANCELLED = dict(RUNNING, status="cancelled", record={
    "request_id": "r1", "task_id": "t", "step": "main", "persona": "echo", "outcome": "cancelled",
    "reason": "cancelled", "attempts": 1, "detail": "gave up", "cancelled_by": "ci"})
CONFLICT = {"type": "urn:personaq:problem:conflict", "title": "Conflict", "status": 409,
            "detail": "request r1 already ended: succeeded", "request": TERMINAL}


def cancelled(h: Script) -> None:
    if h.path.startswith("/v1/tasks/"):
        h.send_json(200, {"task_id": "t 1", "cancelled": [CANCELLED], "already_ended": [TERMINAL]})
    else:
        h.send_json(200, CANCELLED)


def conflict(h: Script) -> None:
    h.send_json(409, CONFLICT)


def cancelled_conflict(h: Script) -> None:
    h.send_json(409, dict(CONFLICT, detail="request r1 already ended: cancelled", request=CANCELLED))


def no_answer(h: Script) -> None:
    h.close_connection = True  # the request was read (and, say, served); the answer is lost


class CancelRequestTest(unittest.TestCase):
    """The cancel calls' routes, bodies and answers (the live tests are in
    test_cancel)."""

    def test_sync_and_async_cancel_requests(self):
        srv = Server([cancelled])
        self.addCleanup(srv.stop)
        with personaq.Client(srv.url, token="t") as c:
            st = c.cancel("r/1", reason="gave up")
            self.assertEqual((st.status, st.record.outcome, st.record.detail, st.record.cancelled_by),
                             ("cancelled", "cancelled", "gave up", "ci"))
            tc = c.cancel_task("t 1")
            self.assertIsInstance(tc, personaq.TaskCancel)
            self.assertEqual(tc.task_id, "t 1")
            self.assertEqual([(s.request_id, s.record.outcome) for s in tc.cancelled], [("r1", "cancelled")])
            self.assertEqual([s.record.outcome for s in tc.already_ended], ["succeeded"])

        async def main():
            async with personaq.AsyncClient(srv.url, token="t") as c:
                st = await c.cancel("r1")
                tc = await c.cancel_task("t1", reason="abandoned")
                return st, tc
        st, tc = asyncio.run(main())
        self.assertEqual(st.record.cancelled_by, "ci")
        self.assertEqual(len(tc.cancelled), 1)
        self.assertEqual([(p, json.loads(b)) for p, _, b in srv.seen], [
            ("/v1/requests/r%2F1/cancel", {"reason": "gave up"}), ("/v1/tasks/t%201/cancel", {}),
            ("/v1/requests/r1/cancel", {}), ("/v1/tasks/t1/cancel", {"reason": "abandoned"})])
        self.assertEqual({h["Authorization"] for _, h, _ in srv.seen}, {"Bearer t"})

    def test_a_cancel_too_late_is_already_ended_with_the_record(self):
        srv = Server([conflict])
        self.addCleanup(srv.stop)
        with personaq.Client(srv.url, token="t") as c:
            with self.assertRaises(personaq.AlreadyEnded) as cm:
                c.cancel("r1")
            self.assertIsInstance(cm.exception, personaq.Conflict)
            self.assertEqual(cm.exception.status, 409)
            self.assertEqual(cm.exception.record.outcome, "succeeded")
            self.assertEqual(cm.exception.request.status, "succeeded")
            # The same problem from submit is a plain Conflict: the id was used for other content.
            with self.assertRaises(personaq.Conflict) as cm:
                c.submit("echo", "t", request_id="r1")
            self.assertNotIsInstance(cm.exception, personaq.AlreadyEnded)

        async def main():
            async with personaq.AsyncClient(srv.url, token="t") as c:
                await c.cancel("r1")
        with self.assertRaises(personaq.AlreadyEnded) as cm:
            asyncio.run(main())
        self.assertEqual(cm.exception.record.outcome, "succeeded")


    def test_a_cancel_repeated_after_a_lost_answer_is_the_cancelled_status(self):
        for name, make in (("sync", self.cancel_sync), ("async", self.cancel_async)):
            with self.subTest(client=name):
                srv = Server([no_answer, cancelled_conflict])
                self.addCleanup(srv.stop)
                st = make(srv.url)
                self.assertEqual((st.status, st.record.outcome, st.record.cancelled_by), ("cancelled", "cancelled", "ci"))
                self.assertEqual(len(srv.seen), 2)
                # Without a lost answer first, the same 409 is AlreadyEnded: someone else cancelled.
                srv = Server([cancelled_conflict])
                self.addCleanup(srv.stop)
                with self.assertRaises(personaq.AlreadyEnded) as cm:
                    make(srv.url)
                self.assertEqual(cm.exception.record.outcome, "cancelled")

    @staticmethod
    def cancel_sync(url: str) -> personaq.RequestStatus:
        with personaq.Client(url, token="t", timeout=5) as c:
            return c.cancel("r1", reason="gave up")

    @staticmethod
    def cancel_async(url: str) -> personaq.RequestStatus:
        async def main():
            async with personaq.AsyncClient(url, token="t", timeout=5) as c:
                return await c.cancel("r1", reason="gave up")
        return asyncio.run(main())


class AsyncReconnectTest(ReconnectTest.__base__):
    serve = ReconnectTest.serve

    def test_503_is_retried_until_the_answer(self):
        srv = self.serve([unavailable, unavailable, terminal])

        async def main():
            async with personaq.AsyncClient(srv.url, token="t", timeout=5) as c:
                return await c.result("r1", wait=5)
        self.assertEqual(asyncio.run(main()).status, "succeeded")
        self.assertEqual(len(srv.seen), 3)

    def test_api_down_then_up_while_waiting(self):
        port = free_port()

        async def main():
            async with personaq.AsyncClient("http://127.0.0.1:%d" % port, token="t", timeout=5) as c:
                waiter = asyncio.ensure_future(c.result("r1", wait=10))
                await asyncio.sleep(0.6)
                self.assertFalse(waiter.done())
                self.serve([terminal], port)
                return await waiter
        self.assertEqual(asyncio.run(main()).status, "succeeded")

    def test_waits_longer_than_the_server_bound_are_several_polls(self):
        srv = self.serve([running_after_wait, running_after_wait, terminal])

        async def main():
            async with personaq.AsyncClient(srv.url, token="t") as c:
                return await c.result("r1", wait=30)
        with mock.patch.object(w, "MAX_SERVER_WAIT", 0.2):
            self.assertEqual(asyncio.run(main()).status, "succeeded")
        self.assertEqual(len(srv.seen), 3)

    def test_event_stream_resumes_after_a_drop(self):
        srv = self.serve([sse([attempt(1, "queued"), attempt(2, "started")], end=False),
                          sse([attempt(3, "failed"), TERMINAL_EVENT], end=True)])

        async def main():
            async with personaq.AsyncClient(srv.url, token="t") as c:
                return [e async for e in c.events("r1")]
        events = asyncio.run(main())
        self.assertEqual([e.id for e in events], ["1", "2", "3", "terminal"])
        self.assertEqual([h.get("Last-Event-ID") for _, h in srv.seen], [None, "2"])


if __name__ == "__main__":
    unittest.main()
