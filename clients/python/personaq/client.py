"""The synchronous client: :class:`Client`."""

from __future__ import annotations

import http.client
import ssl
import time
from typing import Any, Callable, Iterable, Iterator, List, Mapping, Optional, TypeVar, Union

from . import _wire as w
from .errors import APIError, Conflict, StepDeadlineExceeded, stopped_error
from .live import LiveOutput
from .models import Event, LiveItem, Page, Persona, RequestStatus, Result, TaskCancel
from ._transport import Answer, Transport

T = TypeVar("T")


class Client:
    """A client of the personaq HTTP API.

    ``base_url`` defaults to ``$PERSONAQ_URL`` (else ``http://127.0.0.1:8080``,
    where ``personaq dev`` serves it), ``token`` to ``$PERSONAQ_API_TOKEN``.
    ``timeout`` bounds each call that does not wait for a request to end,
    reconnects included; waiting calls are bounded by their wait or the step
    budget instead. Every call reconnects, with backoff, after a connection
    error or a ``503`` until its bound: the API process may restart while a
    client waits. Thread-safe; use as a context manager or call
    :meth:`close`.
    """

    def __init__(self, base_url: Optional[str] = None, token: Optional[str] = None, timeout: float = 30.0,
                 *, grace: float = w.DEFAULT_GRACE, ssl_context: Optional[ssl.SSLContext] = None) -> None:
        self.endpoint = w.Endpoint.parse(base_url)
        self.timeout = float(timeout)
        self.grace = float(grace)
        self._token = w.resolve_token(token)
        self._http = Transport(self.endpoint, ssl_context)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the kept-alive connections."""
        self._http.close()

    # -- submitting and awaiting ------------------------------------------------

    def submit(self, persona: str, task_id: str, *, step: str = "main", input: Any = None,
               request_id: Optional[str] = None, agents: Union[None, str, Mapping[str, str]] = None,
               policy: Optional[str] = None, policy_overrides: Optional[Mapping[str, Any]] = None,
               deadline: Optional[w.Deadline] = None, progress_total: Optional[int] = None,
               correlation_id: Optional[str] = None, budget: Optional[Mapping[str, Any]] = None,
               extra: Optional[Mapping[str, Any]] = None) -> RequestStatus:
        """Submit a persona request; returns its status once JetStream stored it.

        ``request_id`` defaults to a new UUID, so a submit repeated after a
        lost answer is idempotent (``duplicate`` is then True). ``deadline``
        is the step deadline (a datetime, an RFC 3339 string, or a duration
        from now); by default the server sets now + the persona's **step
        budget**. ``agents`` is ``{"primary": …, "fallback": …}`` (or the
        primary's name): adaptive retry alternates them. Raises
        :class:`~personaq.UnknownPersona`, :class:`~personaq.Conflict` (the
        id was used for other content), :class:`~personaq.InvalidRequest`.
        """
        rid, body = w.submit_body(persona, task_id, step, input, request_id, agents, policy, policy_overrides,
                                  deadline, progress_total, correlation_id, budget, extra)
        status, _, data = self._retrying(
            lambda: self._call("POST", self.endpoint.path("/requests"), body, self.timeout),
            time.monotonic() + self.timeout)
        st = RequestStatus.from_json(data)
        st.duplicate = status == 200
        return st

    def status(self, request_id: str) -> RequestStatus:
        """The request's current status (and terminal record once it ended)."""
        return self.result(request_id)

    def result(self, request_id: str, wait: Optional[w.Seconds] = None) -> RequestStatus:
        """The request's status, long-polling up to ``wait`` for it to end.

        A wait longer than the server's 60 s bound is several long-polls;
        connection errors and ``503`` are retried with backoff until the wait
        ends. Returns the status when the request ended (``terminal``) or the
        wait did; raises :class:`~personaq.NotFound` for an unknown id.
        """
        total = w.seconds(wait) or 0.0
        end = time.monotonic() + total
        if total <= 0:
            return self._retrying(lambda: self._get_status(request_id, None), time.monotonic() + self.timeout)
        backoff = w.Backoff()
        while True:
            remaining = end - time.monotonic()
            try:
                st = self._get_status(request_id, min(max(remaining, 0.0), w.MAX_SERVER_WAIT))
            except APIError as e:
                if not w.transient(e) or end - time.monotonic() <= 0:
                    raise
                time.sleep(min(backoff.next(getattr(e, "retry_after", None)), max(end - time.monotonic(), 0)))
                continue
            backoff.reset()
            if st.terminal or end - time.monotonic() <= 0:
                return st

    def run(self, persona: str, task_id: str, *, step: str = "main", input: Any = None,
            wait: Optional[w.Seconds] = None, on_output: Optional[Callable[[LiveItem], None]] = None,
            **submit_args: Any) -> Result:
        """Submit a persona request and await its terminal record under its
        step budget: the step deadline the server returned, plus ``grace``.

        Returns a :class:`~personaq.Result` whose ``output`` is the persona's
        answer. A request that ended otherwise raises the
        :class:`~personaq.Stopped` subclass of its outcome, carrying the
        terminal record: :class:`~personaq.Blocked` (quarantined;
        :class:`~personaq.BudgetExhausted` when the budget ended it),
        :class:`~personaq.Deferred`, :class:`~personaq.Escalated`,
        :class:`~personaq.StepDeadlineExceeded`, :class:`~personaq.Cancelled`.
        ``wait`` replaces the step deadline as the bound. ``on_output`` is
        called with each item of the request's live output as it comes (see
        :meth:`live_output`): the wait then follows the event stream instead
        of long-polling. Other keyword arguments are those of :meth:`submit`.
        """
        st = self.submit(persona, task_id, step=step, input=input, **submit_args)
        if not st.terminal:
            st = self._await(st.request_id, self._run_wait(st, wait), on_output)
        return self._finish(st)

    def await_result(self, request_id: str, wait: w.Seconds, *,
                     on_output: Optional[Callable[[LiveItem], None]] = None) -> Result:
        """Await a submitted request for up to ``wait`` and return it as
        :meth:`run` does (an orchestrator that restarted mid-step awaits the
        same request id again), calling ``on_output`` as :meth:`run` does."""
        return self._finish(self._await(request_id, w.seconds(wait), on_output))

    def _await(self, request_id: str, wait: Optional[float], on_output: Optional[Callable[[LiveItem], None]]
               ) -> RequestStatus:
        """The request's status once it ended or ``wait`` did, following its
        live output when there is an ``on_output`` to call."""
        if on_output is None:
            return self.result(request_id, wait=wait)
        with LiveOutput(self._event_stream(request_id, None, 60.0, time.monotonic() + (wait or 0.0))) as live:
            for item in live:
                on_output(item)
        return live.status if live.status is not None else self.status(request_id)

    def _run_wait(self, st: RequestStatus, wait: Optional[w.Seconds]) -> Optional[float]:
        if wait is not None:
            return w.seconds(wait)
        left = st.remaining()
        return left.total_seconds() + self.grace if left is not None else 7 * 24 * 3600.0

    def _finish(self, st: RequestStatus) -> Result:
        if not st.terminal or st.record is None:
            raise StepDeadlineExceeded(None, st, "request %s has no terminal record after its step budget "
                                       "(status %s, deadline %s)" % (st.request_id, st.status, st.deadline))
        if not st.record.succeeded:
            raise stopped_error(st.record, st)
        data = st.output_bytes
        if data is None and st.record.output_ref:
            data = w.check_output(st.record, self.output(st.request_id))
        return Result(st.request_id, st.record, st, data or b"")

    # -- reading ---------------------------------------------------------------

    def output(self, request_id: str) -> bytes:
        """The output bytes of a request that succeeded, of any size.
        Raises :class:`~personaq.NoOutput` when it has none (yet)."""
        path = w.request_path(self.endpoint, request_id, "/output")
        return self._retrying(lambda: self._call("GET", path, None, self.timeout)[2],
                              time.monotonic() + self.timeout)

    def events(self, request_id: str, last_event_id: Optional[str] = None, *,
               reconnect_for: float = 60.0) -> Iterator[Event]:
        """The request's events as they happen: attempt events (``queued``,
        ``started``, ``failed``, …), then the ``terminal`` event with the
        terminal record, then the iterator ends.

        A dropped connection is resumed with ``Last-Event-ID`` (no event lost
        or repeated), retrying with backoff for up to ``reconnect_for``
        seconds without progress. Pass ``last_event_id`` to resume after an
        event seen earlier.
        """
        stream = self._event_stream(request_id, last_event_id, reconnect_for)
        try:
            for ev in stream:
                if ev.event in ("attempt", "terminal"):
                    yield ev
        finally:
            stream.close()

    def live_output(self, request_id: str, last_event_id: Optional[str] = None, *,
                    reconnect_for: float = 60.0) -> LiveOutput:
        """The request's **live output** as its persona writes it: an
        iterator of :class:`~personaq.OutputChunk` (each attempt's text in
        order, with its attempt and offset) and
        :class:`~personaq.OutputSuperseded` (a retry started over: discard
        what you show of the attempts it names), ending when the request
        does (the iterator's ``status`` is then the terminal status). A
        caller arriving mid-stream gets the output from its start. Resumes a
        dropped connection with ``Last-Event-ID`` (nothing lost, nothing
        twice), as :meth:`events` does; ``last_event_id`` resumes after an
        item seen earlier (its ``id``). A persona that streams nothing
        yields nothing.
        """
        return LiveOutput(self._event_stream(request_id, last_event_id, reconnect_for))

    def _event_stream(self, request_id: str, last_event_id: Optional[str], reconnect_for: float,
                      until: Optional[float] = None) -> Iterator[Event]:
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
                conn, resp = self._http.stream(path, hdrs, left())
            except APIError as e:
                give_up = give_up or time.monotonic() + reconnect_for
                if not w.transient(e) or time.monotonic() >= give_up:
                    raise
                time.sleep(max(min(backoff.next(getattr(e, "retry_after", None)), left()), 0))
                continue
            try:
                parser = w.SSEParser()
                for line in iter(resp.readline, b""):
                    if until is not None:  # keep-alives come every few seconds: a wait ends on time
                        if left() <= 0:
                            return
                        if conn.sock is not None:
                            conn.sock.settimeout(left())
                    ev = parser.line(line)
                    if ev is None:
                        continue
                    last, give_up = ev.id or last, None
                    backoff.reset()
                    yield ev
                    if ev.terminal:
                        return
            except (OSError, http.client.HTTPException):
                pass
            finally:
                conn.close()
            give_up = give_up or time.monotonic() + reconnect_for
            if time.monotonic() >= give_up:
                raise w.unreachable(ConnectionError("event stream of %s ended without its terminal event" % request_id))
            time.sleep(max(min(backoff.next(), left()), 0))

    def requests(self, task_id: Optional[str] = None, persona: Union[None, str, Iterable[str]] = None,
                 status: Union[None, str, Iterable[str]] = None, limit: Optional[int] = None) -> Iterator[RequestStatus]:
        """Requests, newest first, filtered by task, persona(s) and
        status(es), following the pages (``limit`` per page) to the last."""
        cursor: Optional[str] = None
        while True:
            page = self.requests_page(task_id, persona, status, limit, cursor)
            yield from page.requests
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def requests_page(self, task_id: Optional[str] = None, persona: Union[None, str, Iterable[str]] = None,
                      status: Union[None, str, Iterable[str]] = None, limit: Optional[int] = None,
                      cursor: Optional[str] = None) -> Page:
        """One page of requests; pass its ``next_cursor`` for the next one."""
        path = self.endpoint.path("/requests", w.list_query(task_id, persona, status, limit, cursor))
        return w.page_from(self._get(path))

    def personas(self) -> List[Persona]:
        """The served personas, with their retry policy and step budget."""
        return w.personas_from(self._get(self.endpoint.path("/personas")))

    # -- cancelling --------------------------------------------------------------

    def cancel(self, request_id: str, reason: Optional[str] = None) -> RequestStatus:
        """Cancel a request (token scope ``cancel``): queued, it never runs;
        waiting for a retry, it runs no further attempt; running, its attempt
        is stopped. Returns its status, whose record is the cancelled one
        (``detail`` is ``reason``, ``cancelled_by`` the token's name).

        Raises :class:`~personaq.AlreadyEnded` (a :class:`~personaq.Conflict`)
        carrying the record that won when the request had already ended (a
        call repeated after a lost answer returns the cancelled status its
        first try stored instead),
        :class:`~personaq.NotFound` for an unknown id,
        :class:`~personaq.Forbidden` without the scope.
        """
        path, body, tries = w.request_path(self.endpoint, request_id, "/cancel"), w.cancel_body(reason), [0]

        def once() -> bytes:
            tries[0] += 1
            return self._call("POST", path, body, self.timeout)[2]
        try:
            return RequestStatus.from_json(self._retrying(once, time.monotonic() + self.timeout))
        except Conflict as e:
            return w.cancel_conflict(e, tries[0] > 1)

    def cancel_task(self, task_id: str, reason: Optional[str] = None) -> TaskCancel:
        """Cancel every open request of a task, whatever its persona or step
        (token scope ``cancel``). Returns a :class:`~personaq.TaskCancel`:
        the statuses it cancelled, and those of requests that had ended
        another way first."""
        return TaskCancel.from_dict(w.decode_json(
            self._post(w.task_cancel_path(self.endpoint, task_id), w.cancel_body(reason))))

    def _post(self, path: str, body: bytes) -> bytes:
        return self._retrying(lambda: self._call("POST", path, body, self.timeout)[2],
                              time.monotonic() + self.timeout)

    # -- plumbing ----------------------------------------------------------------

    def _get(self, path: str) -> bytes:
        return self._retrying(lambda: self._call("GET", path, None, self.timeout)[2],
                              time.monotonic() + self.timeout)

    def _get_status(self, request_id: str, wait: Optional[float]) -> RequestStatus:
        path = w.request_path(self.endpoint, request_id)
        if wait is not None:
            path += "?" + w.urlencode(w.wait_query(wait))
        _, _, data = self._call("GET", path, None, self.timeout + (wait or 0.0))
        return RequestStatus.from_json(data)

    def _call(self, method: str, path: str, body: Optional[bytes], timeout: float) -> Answer:
        status, headers, data = self._http.call(method, path, w.headers(self._token), body, timeout)
        if status >= 300:
            raise w.error_from(status, data, headers.get("Retry-After"))
        return status, headers, data

    @staticmethod
    def _retrying(fn: Callable[[], T], until: float) -> T:
        backoff = w.Backoff()
        while True:
            try:
                return fn()
            except APIError as e:
                left = until - time.monotonic()
                if not w.transient(e) or left <= 0:
                    raise
                time.sleep(min(backoff.next(getattr(e, "retry_after", None)), left))

