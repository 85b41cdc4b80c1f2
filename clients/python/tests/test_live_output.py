"""Live output against a live personaq: streaming personas served by the Go
harness (clients/streaming_test.go): ``streamer`` plays the script in its
input (text events, gates the test opens, a hang-up that fails an attempt,
a fill past the cap), ``reviewer`` streams two lines. The tests pace the
persona with gates instead of sleeping: a chunk is seen before the next is
written, a connection is cut between two chunks, a second caller arrives
before the rest is written."""

import asyncio
import socket
import threading
import unittest
import urllib.request
import uuid
from typing import List, Optional, Tuple

import _support
from _support import LiveCase, task
import personaq

CAP = 1 << 20  # the runtime's default live output cap per attempt


def gates_url() -> str:
    return _support.live_env("PERSONAQ_STREAM_GATES", "streaming personas")


def gate() -> str:
    return "g-" + uuid.uuid4().hex


def open_gate(name: str) -> None:
    req = urllib.request.Request(gates_url() + "/gates/" + name, method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 204, r.status


def script(*attempts: list) -> dict:
    return {"attempts": list(attempts)}


def texts(items) -> List[Tuple[int, int, str]]:
    """(attempt, offset, text) of the chunks that carry text."""
    return [(c.attempt, c.offset, c.text) for c in items if isinstance(c, personaq.OutputChunk) and c.text]


def shape(items) -> List[str]:
    out = []
    for it in items:
        if isinstance(it, personaq.OutputSuperseded):
            out.append("superseded %d by %d" % (it.supersedes, it.attempt))
        elif it.text:
            out.append("%d:%s" % (it.attempt, it.text))
    return out


def assert_contiguous(tc: unittest.TestCase, items) -> None:
    """Each attempt's chunks start at 0 and follow each other: none lost,
    none twice."""
    held = {}
    for c in items:
        if isinstance(c, personaq.OutputChunk):
            tc.assertEqual(c.offset, held.get(c.attempt, 0), "attempt %d: chunk at %d" % (c.attempt, c.offset))
            held[c.attempt] = c.end


class CuttingProxy:
    """A TCP proxy in front of the API that can cut every open connection
    (as a load balancer or a flaky network does); it records the
    Last-Event-ID each event stream was opened with."""

    def __init__(self, target: str) -> None:
        host, _, port = target.split("://", 1)[1].split("/", 1)[0].partition(":")
        self.target = (host, int(port))
        self.lsock = socket.create_server(("127.0.0.1", 0))
        self.url = "http://127.0.0.1:%d" % self.lsock.getsockname()[1]
        self.lock = threading.Lock()
        self.open: List[socket.socket] = []
        self.last_event_ids: List[Optional[str]] = []
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        while True:
            try:
                down, _ = self.lsock.accept()
            except OSError:
                return
            up = socket.create_connection(self.target)
            with self.lock:
                self.open += [down, up]
            threading.Thread(target=self.pump, args=(down, up, True), daemon=True).start()
            threading.Thread(target=self.pump, args=(up, down, False), daemon=True).start()

    def pump(self, src: socket.socket, dst: socket.socket, request: bool) -> None:
        first = request
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if first:
                    first = False
                    self.note(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def note(self, head: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        if "/events" not in lines[0]:
            return
        last = None
        for line in lines[1:]:
            k, _, v = line.partition(":")
            if k.strip().lower() == "last-event-id":
                last = v.strip()
        with self.lock:
            self.last_event_ids.append(last)

    def cut(self) -> None:
        with self.lock:
            socks, self.open = self.open, []
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self.lsock.close()
        self.cut()


class LiveOutputTest(LiveCase):
    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        gates_url()

    def submit(self, input: Optional[dict] = None, persona: str = "streamer") -> str:
        return self.client.submit(persona, task("py-live"), input=input).request_id

    def test_chunks_come_in_order_as_they_are_written(self):
        g1, g2 = gate(), gate()
        rid = self.submit(script([{"text": "Reading "}, {"gate": g1}, {"text": "the code. "}, {"gate": g2},
                                  {"text": "Sound."}]))
        items = []
        with self.client.live_output(rid) as live:
            for item in live:
                items.append(item)
                seen = "".join(t for _, _, t in texts(items))
                # The next text is written only once this one was seen: three chunks, not one.
                if seen == "Reading ":
                    open_gate(g1)
                elif seen == "Reading the code. ":
                    open_gate(g2)
        self.assertEqual(texts(items), [(1, 0, "Reading "), (1, 8, "the code. "), (1, 18, "Sound.")])
        self.assertTrue(items[-1].final)
        self.assertEqual([c.final for c in items[:-1]], [False] * (len(items) - 1))
        self.assertTrue(all(c.request_id == rid and c.id for c in items))
        self.assertEqual(live.status.status, "succeeded")
        self.assertEqual(live.status.record.raw["output"], "Reading the code. Sound.")
        self.assertEqual(live.last_event_id, "terminal")

    def test_a_retry_supersedes_the_earlier_attempts_output(self):
        rid = self.submit(script([{"text": "First try, cut short"}, {"drop": True}], [{"text": "Second try."}]))
        live = self.client.live_output(rid)
        items = list(live)
        self.assertEqual(shape(items), ["1:First try, cut short", "superseded 1 by 2", "2:Second try."])
        sup = [i for i in items if isinstance(i, personaq.OutputSuperseded)]
        self.assertEqual([(s.attempt, s.supersedes, s.request_id) for s in sup], [(2, 1, rid)])
        assert_contiguous(self, items)
        self.assertEqual([c.attempt for c in items if isinstance(c, personaq.OutputChunk) and c.final], [1, 2])
        self.assertEqual((live.status.status, live.status.record.attempts), ("succeeded", 2))

    def test_a_caller_arriving_mid_stream_gets_it_all_once(self):
        g1, g2 = gate(), gate()
        rid = self.submit(script([{"text": "one "}, {"gate": g1}, {"text": "two "}, {"gate": g2}, {"text": "three"}]))
        first = self.client.live_output(rid)
        early = [next(first)]
        open_gate(g1)
        early.append(next(first))
        self.assertEqual(texts(early), [(1, 0, "one "), (1, 4, "two ")])
        late = self.client.live_output(rid)
        late_items = [next(late)]  # connected: "three" is not written yet
        open_gate(g2)
        late_items += list(late)
        early += list(first)
        self.assertEqual(texts(late_items), [(1, 0, "one "), (1, 4, "two "), (1, 8, "three")])
        self.assertEqual(texts(late_items), texts(early))
        assert_contiguous(self, late_items)
        # The same output stream positions (how attempt events interleave may differ).
        self.assertEqual([i.id.split(".")[1] for i in late_items], [i.id.split(".")[1] for i in early])
        self.assertEqual(late.status.status, "succeeded")

    def test_a_dropped_connection_resumes_without_loss_or_repeat(self):
        g1, g2 = gate(), gate()
        rid = self.submit(script([{"text": "one "}, {"gate": g1}, {"text": "two "}, {"gate": g2}, {"text": "three"}]))
        proxy = CuttingProxy(self.client.endpoint.scheme + "://%s:%d" % (self.client.endpoint.host,
                                                                        self.client.endpoint.port))
        self.addCleanup(proxy.close)
        with personaq.Client(proxy.url + self.client.endpoint.prefix, timeout=20) as c:
            live = c.live_output(rid)
            items = [next(live)]
            proxy.cut()  # between "one " and "two ": the next read meets the cut
            open_gate(g1)
            items.append(next(live))
            proxy.cut()
            open_gate(g2)
            items += list(live)
        self.assertEqual(texts(items), [(1, 0, "one "), (1, 4, "two "), (1, 8, "three")])
        assert_contiguous(self, items)
        self.assertEqual(len({i.id for i in items}), len(items))
        self.assertGreaterEqual(len(proxy.last_event_ids), 3)
        self.assertIsNone(proxy.last_event_ids[0])
        self.assertEqual(proxy.last_event_ids[1].split(".")[-1], items[0].id.split(".")[-1])
        self.assertTrue(all(proxy.last_event_ids[1:]), proxy.last_event_ids)
        self.assertEqual(live.status.status, "succeeded")

    def test_resuming_after_an_item_seen_earlier(self):
        rid = self.submit(script([{"text": "one "}, {"text": "two"}, {"drop": True}], [{"text": "three"}]))
        all_items = list(self.client.live_output(rid))
        self.assertGreaterEqual(len(all_items), 3)
        for k in range(len(all_items)):
            with self.subTest(after=k):
                rest = list(self.client.live_output(rid, last_event_id=all_items[k].id))
                self.assertEqual([i.raw for i in rest], [i.raw for i in all_items[k + 1:]])

    def test_a_persona_that_streams_nothing(self):
        for persona in ("echo", "flaky"):  # flaky retries twice: no output, so nothing superseded
            with self.subTest(persona=persona):
                live = self.client.live_output(self.submit(persona=persona))
                self.assertEqual(list(live), [])
                self.assertEqual(live.status.status, "succeeded")
                self.assertEqual(live.status.record.persona, persona)

    def test_the_cap_marker_and_count(self):
        over, g = 10000, gate()
        rid = self.submit(script([{"fill": CAP + over}, {"gate": g}, {"text": "after the cap"}]))
        items, held = [], 0
        for item in self.client.live_output(rid):
            items.append(item)
            held += len(item.text)
            if item.truncated and not item.final:
                open_gate(g)  # the marker came: the rest is written, and dropped too
        self.assertEqual(held, CAP)
        assert_contiguous(self, items)
        markers = [c for c in items if c.truncated and not c.final]
        self.assertEqual(len(markers), 1)
        self.assertEqual(markers[0].text, "")
        self.assertTrue(0 < markers[0].truncated <= over, markers[0].truncated)
        self.assertTrue(items[-1].final)
        self.assertEqual(items[-1].truncated, over + len("after the cap"))

    def test_run_and_await_result_call_on_output(self):
        items = []
        res = self.client.run("streamer", task("py-live-run"), on_output=items.append, input=script(
            [{"text": "First try"}, {"drop": True}], [{"text": "Second try"}]))
        self.assertEqual(shape(items), ["1:First try", "superseded 1 by 2", "2:Second try"])
        self.assertEqual((res.output, res.record.attempts), ("Second try", 2))
        # The wait bounds the stream as it bounds a long-poll: the gate is still closed when it ends.
        g, items = gate(), []
        rid = self.submit(script([{"text": "partial"}, {"gate": g}, {"text": " and the rest"}]))
        with self.assertRaises(personaq.StepDeadlineExceeded) as cm:
            self.client.await_result(rid, wait=1.0, on_output=items.append)
        self.assertIsNone(cm.exception.record)
        self.assertIn(cm.exception.status.status, ("running", "queued"))
        self.assertEqual(texts(items), [(1, 0, "partial")])
        open_gate(g)
        items = []
        res = self.client.await_result(rid, wait=30, on_output=items.append)
        self.assertEqual(res.output, "partial and the rest")
        self.assertEqual(texts(items), [(1, 0, "partial"), (1, 7, " and the rest")])

    def test_events_leave_live_output_out(self):
        rid = self.submit(persona="reviewer")
        kinds = [ev.event for ev in self.client.events(rid)]
        self.assertEqual(set(kinds), {"attempt", "terminal"})
        self.assertEqual("".join(c.text for c in self.client.live_output(rid)),
                         "Reading the code.\nThe change is sound.\n")


class AsyncLiveOutputTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        _support.live_url()
        gates_url()
        self.client = personaq.AsyncClient(timeout=20)

    async def asyncTearDown(self) -> None:
        await self.client.close()

    async def test_chunks_in_order_and_a_retry_that_supersedes(self):
        g = gate()
        st = await self.client.submit("streamer", task("pya-live"), input=script(
            [{"text": "Draft: "}, {"gate": g}, {"text": "wrong"}, {"drop": True}], [{"text": "Final answer."}]))
        items = []
        async with self.client.live_output(st.request_id) as live:
            async for item in live:
                items.append(item)
                if texts(items) == [(1, 0, "Draft: ")]:
                    await asyncio.get_running_loop().run_in_executor(None, open_gate, g)
        self.assertEqual(shape(items), ["1:Draft: ", "1:wrong", "superseded 1 by 2", "2:Final answer."])
        assert_contiguous(self, items)
        self.assertEqual((live.status.status, live.status.record.attempts), ("succeeded", 2))

    async def test_run_calls_a_coroutine_on_output(self):
        items = []

        async def show(item):
            items.append(item)
        res = await self.client.run("reviewer", task("pya-live-run"), on_output=show)
        self.assertEqual("".join(i.text for i in items), "Reading the code.\nThe change is sound.\n")
        self.assertEqual(res.output, "Reading the code.\nThe change is sound.")

    async def test_a_late_caller_and_a_persona_that_streams_nothing(self):
        st = await self.client.submit("reviewer", task("pya-live"))
        live = self.client.live_output(st.request_id)
        items = [i async for i in live]
        self.assertEqual("".join(i.text for i in items), "Reading the code.\nThe change is sound.\n")
        again = [i async for i in self.client.live_output(st.request_id)]  # after the end: all of it, once
        self.assertEqual([i.raw for i in again], [i.raw for i in items])
        st = await self.client.submit("echo", task("pya-live"))
        live = self.client.live_output(st.request_id)
        self.assertEqual([i async for i in live], [])
        self.assertEqual(live.status.status, "succeeded")


if __name__ == "__main__":
    unittest.main()
