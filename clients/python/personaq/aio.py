"""The asyncio client: :class:`AsyncClient`, the same calls as
:class:`~personaq.Client` as coroutines (and an async iterator of events),
for async orchestrators. It never blocks the event loop: its HTTP runs on
asyncio streams, one socket per call in flight."""

from __future__ import annotations

import asyncio
import ssl
import time
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable, List, Mapping, Optional, TypeVar, Union

from . import _wire as w
from ._aiotransport import AsyncAnswer, AsyncTransport
from .errors import APIError, Conflict, StepDeadlineExceeded, stopped_error
from .live import AsyncLiveOutput
from .models import Event, LiveItem, Page, Persona, RequestStatus, Result, TaskCancel

T = TypeVar("T")
_STREAM_ERRORS = (OSError, EOFError, asyncio.TimeoutError, ValueError)


class AsyncClient:
    """An asyncio client of the personaq HTTP API; see
    :class:`~personaq.Client` for what each call does. Use it as an async
    context manager or call :meth:`close`. One instance belongs to one event
    loop."""

    def __init__(self, base_url: Optional[str] = None, token: Optional[str] = None, timeout: float = 30.0,
                 *, grace: float = w.DEFAULT_GRACE, ssl_context: Optional[ssl.SSLContext] = None) -> None:
        self.endpoint = w.Endpoint.parse(base_url)
        self.timeout = float(timeout)
        self.grace = float(grace)
        self._token = w.resolve_token(token)
        self._http = AsyncTransport(self.endpoint, ssl_context)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the kept-alive connections."""
        self._http.close()

    async def submit(self, persona: str, task_id: str, *, step: str = "main", input: Any = None,
                     request_id: Optional[str] = None, agents: Union[None, str, Mapping[str, str]] = None,
                     policy: Optional[str] = None, policy_overrides: Optional[Mapping[str, Any]] = None,
                     deadline: Optional[w.Deadline] = None, progress_total: Optional[int] = None,
                     correlation_id: Optional[str] = None, budget: Optional[Mapping[str, Any]] = None,
                     extra: Optional[Mapping[str, Any]] = None) -> RequestStatus:
        """Submit a persona request (see :meth:`personaq.Client.submit`)."""
        rid, body = w.submit_body(persona, task_id, step, input, request_id, agents, policy, policy_overrides,
                                  deadline, progress_total, correlation_id, budget, extra)
        status, _, data = await self._retrying(
            lambda: self._call("POST", self.endpoint.path("/requests"), body, self.timeout),
            time.monotonic() + self.timeout)
        st = RequestStatus.from_json(data)
        st.duplicate = status == 200
        return st

    async def status(self, request_id: str) -> RequestStatus:
        """The request's current status (and terminal record once it ended)."""
        return await self.result(request_id)

    async def result(self, request_id: str, wait: Optional[w.Seconds] = None) -> RequestStatus:
        """The request's status, long-polling up to ``wait`` for it to end
        (see :meth:`personaq.Client.result`)."""
        total = w.seconds(wait) or 0.0
        end = time.monotonic() + total
        if total <= 0:
            return await self._retrying(lambda: self._get_status(request_id, None), time.monotonic() + self.timeout)
        backoff = w.Backoff()
        while True:
            remaining = end - time.monotonic()
            try:
                st = await self._get_status(request_id, min(max(remaining, 0.0), w.MAX_SERVER_WAIT))
            except APIError as e:
                if not w.transient(e) or end - time.monotonic() <= 0:
                    raise
                await asyncio.sleep(min(backoff.next(getattr(e, "retry_after", None)),
                                        max(end - time.monotonic(), 0)))
                continue
            backoff.reset()
            if st.terminal or end - time.monotonic() <= 0:
                return st

    async def run(self, persona: str, task_id: str, *, step: str = "main", input: Any = None,
                  wait: Optional[w.Seconds] = None, on_output: Optional[Callable[[LiveItem], Any]] = None,
                  **submit_args: Any) -> Result:
        """Submit, then await the terminal record under the step budget
        (see :meth:`personaq.Client.run`): returns a
        :class:`~personaq.Result` or raises the :class:`~personaq.Stopped`
        subclass of the outcome. ``on_output`` (a function or a coroutine
        function) gets each live output item as it comes."""
        st = await self.submit(persona, task_id, step=step, input=input, **submit_args)
        if not st.terminal:
            st = await self._await(st.request_id, self._run_wait(st, wait), on_output)
        return await self._finish(st)

    async def await_result(self, request_id: str, wait: w.Seconds, *,
                           on_output: Optional[Callable[[LiveItem], Any]] = None) -> Result:
        """Await a submitted request for up to ``wait`` and return it as
        :meth:`run` does."""
        return await self._finish(await self._await(request_id, w.seconds(wait), on_output))

    async def _await(self, request_id: str, wait: Optional[float], on_output: Optional[Callable[[LiveItem], Any]]
                     ) -> RequestStatus:
        if on_output is None:
            return await self.result(request_id, wait=wait)
        async with AsyncLiveOutput(self._event_stream(request_id, None, 60.0,
                                                      time.monotonic() + (wait or 0.0))) as live:
            async for item in live:
                done = on_output(item)
                if asyncio.iscoroutine(done):
                    await done
        return live.status if live.status is not None else await self.status(request_id)

    def _run_wait(self, st: RequestStatus, wait: Optional[w.Seconds]) -> Optional[float]:
        if wait is not None:
            return w.seconds(wait)
        left = st.remaining()
        return left.total_seconds() + self.grace if left is not None else 7 * 24 * 3600.0

    async def _finish(self, st: RequestStatus) -> Result:
        if not st.terminal or st.record is None:
            raise StepDeadlineExceeded(None, st, "request %s has no terminal record after its step budget "
                                       "(status %s, deadline %s)" % (st.request_id, st.status, st.deadline))
        if not st.record.succeeded:
            raise stopped_error(st.record, st)
        data = st.output_bytes
        if data is None and st.record.output_ref:
            data = w.check_output(st.record, await self.output(st.request_id))
        return Result(st.request_id, st.record, st, data or b"")

    async def output(self, request_id: str) -> bytes:
        """The output bytes of a request that succeeded, of any size."""
        return await self._get(w.request_path(self.endpoint, request_id, "/output"))

    async def events(self, request_id: str, last_event_id: Optional[str] = None, *,
                     reconnect_for: float = 60.0) -> AsyncIterator[Event]:
        """The request's events as they happen, ending with the terminal one;
        resumes with ``Last-Event-ID`` after a dropped connection (see
        :meth:`personaq.Client.events`)."""
        stream = self._event_stream(request_id, last_event_id, reconnect_for)
        try:
            async for ev in stream:
                if ev.event in ("attempt", "terminal"):
                    yield ev
        finally:
            await stream.aclose()

    def live_output(self, request_id: str, last_event_id: Optional[str] = None, *,
                    reconnect_for: float = 60.0) -> AsyncLiveOutput:
        """The request's live output as its persona writes it, an async
        iterator (``async for item in client.live_output(request_id)``) of
        :class:`~personaq.OutputChunk` and
        :class:`~personaq.OutputSuperseded`, ending when the request does
        (see :meth:`personaq.Client.live_output`)."""
        return AsyncLiveOutput(self._event_stream(request_id, last_event_id, reconnect_for))

    async def _event_stream(self, request_id: str, last_event_id: Optional[str], reconnect_for: float,
                            until: Optional[float] = None) -> AsyncIterator[Event]:
        """Every event of the request's stream, resumed after a drop; with
        ``until`` (a monotonic time) it also ends, without the terminal
        event, once that time has come."""
        path = w.request_path(self.endpoint, request_id, "/events")
        last, backoff, give_up = last_event_id, w.Backoff(), None  # type: Optional[str], w.Backoff, Optional[float]
        read_timeout = max(self.timeout, 45.0)

        def left() -> float:
            return read_timeout if until is None else min(read_timeout, until - time.monotonic())
        while left() > 0:
            hdrs = w.headers(self._token, "text/event-stream")
            if last:
                hdrs["Last-Event-ID"] = last
            try:
                resp = await self._http.stream(path, hdrs, left())
            except APIError as e:
                give_up = give_up or time.monotonic() + reconnect_for
                if not w.transient(e) or time.monotonic() >= give_up:
                    raise
                await asyncio.sleep(max(min(backoff.next(getattr(e, "retry_after", None)), left()), 0))
                continue
            try:
                parser = w.SSEParser()
                while left() > 0:
                    line = await asyncio.wait_for(resp.readline(), left())
                    if not line:
                        break
                    ev = parser.line(line)
                    if ev is None:
                        continue
                    last, give_up = ev.id or last, None
                    backoff.reset()
                    yield ev
                    if ev.terminal:
                        return
            except _STREAM_ERRORS:
                pass
            finally:
                resp.conn.close()
            give_up = give_up or time.monotonic() + reconnect_for
            if time.monotonic() >= give_up:
                raise w.unreachable(ConnectionError("event stream of %s ended without its terminal event" % request_id))
            await asyncio.sleep(max(min(backoff.next(), left()), 0))

    async def requests(self, task_id: Optional[str] = None, persona: Union[None, str, Iterable[str]] = None,
                       status: Union[None, str, Iterable[str]] = None,
                       limit: Optional[int] = None) -> AsyncIterator[RequestStatus]:
        """Requests, newest first, following the pages to the last."""
        cursor: Optional[str] = None
        while True:
            page = await self.requests_page(task_id, persona, status, limit, cursor)
            for st in page.requests:
                yield st
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def requests_page(self, task_id: Optional[str] = None, persona: Union[None, str, Iterable[str]] = None,
                            status: Union[None, str, Iterable[str]] = None, limit: Optional[int] = None,
                            cursor: Optional[str] = None) -> Page:
        """One page of requests; pass its ``next_cursor`` for the next one."""
        path = self.endpoint.path("/requests", w.list_query(task_id, persona, status, limit, cursor))
        return w.page_from(await self._get(path))

    async def personas(self) -> List[Persona]:
        """The served personas, with their retry policy and step budget."""
        return w.personas_from(await self._get(self.endpoint.path("/personas")))

    async def cancel(self, request_id: str, reason: Optional[str] = None) -> RequestStatus:
        """Cancel a request (scope ``cancel``); returns its status, whose
        record is the cancelled one. Raises :class:`~personaq.AlreadyEnded`
        with the record that won when it had already ended (see
        :meth:`personaq.Client.cancel`)."""
        path, body, tries = w.request_path(self.endpoint, request_id, "/cancel"), w.cancel_body(reason), [0]

        async def once() -> AsyncAnswer:
            tries[0] += 1
            return await self._call("POST", path, body, self.timeout)
        try:
            answer = await self._retrying(once, time.monotonic() + self.timeout)
        except Conflict as e:
            return w.cancel_conflict(e, tries[0] > 1)
        return RequestStatus.from_json(answer[2])

    async def cancel_task(self, task_id: str, reason: Optional[str] = None) -> TaskCancel:
        """Cancel every open request of a task (scope ``cancel``); returns a
        :class:`~personaq.TaskCancel`."""
        return TaskCancel.from_dict(w.decode_json(
            await self._post(w.task_cancel_path(self.endpoint, task_id), w.cancel_body(reason))))

    async def _post(self, path: str, body: bytes) -> bytes:
        answer = await self._retrying(lambda: self._call("POST", path, body, self.timeout),
                                      time.monotonic() + self.timeout)
        return answer[2]

    async def _get(self, path: str) -> bytes:
        answer = await self._retrying(lambda: self._call("GET", path, None, self.timeout),
                                      time.monotonic() + self.timeout)
        return answer[2]

    async def _get_status(self, request_id: str, wait: Optional[float]) -> RequestStatus:
        path = w.request_path(self.endpoint, request_id)
        if wait is not None:
            path += "?" + w.urlencode(w.wait_query(wait))
        _, _, data = await self._call("GET", path, None, self.timeout + (wait or 0.0))
        return RequestStatus.from_json(data)

    async def _call(self, method: str, path: str, body: Optional[bytes], timeout: float) -> AsyncAnswer:
        status, headers, data = await self._http.call(method, path, w.headers(self._token), body, timeout)
        if status >= 300:
            raise w.error_from(status, data, headers.get("retry-after"))
        return status, headers, data

    @staticmethod
    async def _retrying(fn: Callable[[], Awaitable[T]], until: float) -> T:
        backoff = w.Backoff()
        while True:
            try:
                return await fn()
            except APIError as e:
                left = until - time.monotonic()
                if not w.transient(e) or left <= 0:
                    raise
                await asyncio.sleep(min(backoff.next(getattr(e, "retry_after", None)), left))
