"""Live output: the iterators ``Client.live_output`` and
``AsyncClient.live_output`` return, over a request's event stream."""

from __future__ import annotations

from typing import Any, AsyncIterator, Iterator, Optional, Tuple

from .models import Event, LiveItem, RequestStatus, live_item


class _Following:
    """What both iterators keep: where the stream stands, and the terminal
    status once it came."""

    def __init__(self) -> None:
        #: The terminal status, once the iterator ended.
        self.status: Optional[RequestStatus] = None
        #: The id of the last event read (attempt events included).
        self.last_event_id: Optional[str] = None

    def _read(self, ev: Event) -> Tuple[bool, Optional[LiveItem]]:
        """(the stream ended, the live output item ev carries)."""
        self.last_event_id = ev.id or self.last_event_id
        if ev.terminal:
            self.status = ev.status
            return True, None
        return False, live_item(ev)


class LiveOutput(_Following):
    """The live output of one request, as it is written: an iterator of
    :class:`~personaq.OutputChunk` (in order, each attempt's from offset 0)
    and :class:`~personaq.OutputSuperseded` (a retry voids what earlier
    attempts wrote). It ends when the request does; ``status`` is then its
    terminal status, with the record. A dropped connection is resumed with
    ``Last-Event-ID``: nothing lost, nothing twice. ``last_event_id`` is
    where a new iterator would resume. Close it (or use it as a context
    manager) to stop early."""

    def __init__(self, events: Iterator[Event]) -> None:
        super().__init__()
        self._events = events

    def __iter__(self) -> "LiveOutput":
        return self

    def __next__(self) -> LiveItem:
        for ev in self._events:
            ended, item = self._read(ev)
            if ended:
                break
            if item is not None:
                return item
        self.close()
        raise StopIteration

    def close(self) -> None:
        """Stop following: the connection is closed."""
        close = getattr(self._events, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> "LiveOutput":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncLiveOutput(_Following):
    """:class:`LiveOutput` for asyncio: ``async for item in
    client.live_output(request_id)``; ``aclose()`` (or ``async with``)
    stops early."""

    def __init__(self, events: AsyncIterator[Event]) -> None:
        super().__init__()
        self._events = events

    def __aiter__(self) -> "AsyncLiveOutput":
        return self

    async def __anext__(self) -> LiveItem:
        async for ev in self._events:
            ended, item = self._read(ev)
            if ended:
                break
            if item is not None:
                return item
        await self.aclose()
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """Stop following: the connection is closed."""
        aclose = getattr(self._events, "aclose", None)
        if aclose is not None:
            await aclose()

    async def __aenter__(self) -> "AsyncLiveOutput":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
