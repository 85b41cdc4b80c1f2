"""What the personaq API returns: request statuses, terminal records,
results, attempt events and personas.

Every model keeps the JSON object it was read from in ``raw``, so a field a
newer server adds is not lost.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, List, Optional, Union

#: Statuses of a request that has not ended yet.
PENDING_STATUSES = ("queued", "running", "retrying")
#: Terminal outcomes: the request has its terminal record.
TERMINAL_STATUSES = ("succeeded", "quarantined", "deferred", "escalated", "deadline_exceeded", "cancelled")

_RFC3339 = re.compile(
    r"^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$")


def parse_time(value: Any) -> Optional[datetime]:
    """An RFC 3339 timestamp (as Go writes it, with up to nanoseconds) as an
    aware datetime; ``None`` for an absent or zero time."""
    if not isinstance(value, str) or not value:
        return None
    m = _RFC3339.match(value)
    if not m:
        raise ValueError("not an RFC 3339 time: %r" % value)
    date, clock, frac, zone = m.groups()
    micro = (frac or "0")[:6].ljust(6, "0")
    tz = "+00:00" if zone in ("Z", "z") else zone
    t = datetime.fromisoformat("%sT%s.%s%s" % (date, clock, micro, tz))
    if t.year <= 1:
        return None
    return t


def format_time(t: datetime) -> str:
    """An aware datetime as RFC 3339 in UTC (naive datetimes are taken as UTC)."""
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Record:
    """A request's **terminal record**: written once, by the replica that
    settles the request, and never overwritten. ``outcome`` is where the
    request ended; ``reason`` why it stopped (absent when it succeeded)."""

    request_id: str
    task_id: str
    step: str
    persona: str
    outcome: str
    attempts: int
    reason: Optional[str] = None
    agent: Optional[str] = None
    progress: Optional[Dict[str, int]] = None
    last_error: Optional[str] = None
    detail: Optional[str] = None
    duration_ms: int = 0
    quarantine_seq: Optional[int] = None
    blocked: bool = False
    correlation_id: Optional[str] = None
    at: Optional[datetime] = None
    submitted_at: Optional[datetime] = None
    output_ref: Optional[Dict[str, Any]] = None
    usage: Optional[Dict[str, Any]] = None
    #: Who cancelled a ``cancelled`` request (the API token's name, ``cli``,
    #: ``console``, …); its reason text is ``detail``.
    cancelled_by: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Record":
        return cls(
            request_id=d.get("request_id", ""), task_id=d.get("task_id", ""), step=d.get("step", ""),
            persona=d.get("persona", ""), outcome=d.get("outcome", ""), attempts=int(d.get("attempts") or 0),
            reason=d.get("reason"), agent=d.get("agent"), progress=d.get("progress"),
            last_error=d.get("last_error"), detail=d.get("detail"), duration_ms=int(d.get("duration_ms") or 0),
            quarantine_seq=d.get("quarantine_seq"), blocked=bool(d.get("blocked")),
            correlation_id=d.get("correlation_id"), at=parse_time(d.get("at")),
            submitted_at=parse_time(d.get("submitted_at")), output_ref=d.get("output_ref"),
            usage=d.get("usage"), cancelled_by=d.get("cancelled_by"), raw=d)

    @property
    def succeeded(self) -> bool:
        return self.outcome == "succeeded"

    @property
    def has_inline_output(self) -> bool:
        """The output is in the record itself (up to 64 KiB)."""
        return "output" in self.raw


@dataclass
class RequestStatus:
    """Where a request is: ``status`` is ``queued``, ``running``,
    ``retrying`` or a terminal outcome; ``record`` is the terminal record
    once there is one. ``deadline`` is the step deadline (the step budget
    the request runs under, from its submission)."""

    request_id: str
    status: str
    persona: str = ""
    task_id: str = ""
    step: str = ""
    attempts: int = 0
    deadline: Optional[datetime] = None
    created_at: Optional[datetime] = None
    next_attempt_at: Optional[datetime] = None
    last_error: Optional[str] = None
    record: Optional[Record] = None
    #: True when ``submit`` was answered 200: the same request id with the
    #: same content had already been accepted (an idempotent resubmit).
    duplicate: bool = False
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)
    #: The inline output exactly as the server sent it, when there is one.
    output_bytes: Optional[bytes] = field(default=None, repr=False)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "RequestStatus":
        rec = d.get("record")
        return cls(
            request_id=d.get("request_id", ""), status=d.get("status", ""), persona=d.get("persona", ""),
            task_id=d.get("task_id", ""), step=d.get("step", ""), attempts=int(d.get("attempts") or 0),
            deadline=parse_time(d.get("deadline")), created_at=parse_time(d.get("created_at")),
            next_attempt_at=parse_time(d.get("next_attempt_at")), last_error=d.get("last_error"),
            record=Record.from_dict(rec) if isinstance(rec, dict) else None, raw=d)

    @classmethod
    def from_json(cls, body: bytes) -> "RequestStatus":
        """Decode a request status body, keeping the inline output's bytes."""
        text = body.decode("utf-8")
        st = cls.from_dict(json.loads(text))
        if st.record is not None and st.record.has_inline_output:
            span = _member_span(text, ("record", "output"))
            if span is not None:
                st.output_bytes = text[span[0]:span[1]].encode("utf-8")
        return st

    @property
    def terminal(self) -> bool:
        """The request has ended: its terminal record is in ``record``."""
        return self.status in TERMINAL_STATUSES or self.record is not None

    def remaining(self, now: Optional[datetime] = None) -> Optional[timedelta]:
        """Time left until the step deadline, when known."""
        if self.deadline is None:
            return None
        return self.deadline - (now or datetime.now(timezone.utc))


_DECODER = json.JSONDecoder()
_WS = re.compile(r"[ \t\n\r]*")


def _member_span(text: str, path: tuple, pos: int = 0) -> Optional[tuple]:
    """The (start, end) offsets in ``text`` of the JSON value at ``path``
    (object member names), so a value is kept byte for byte."""
    pos = _WS.match(text, pos).end()
    if pos >= len(text) or text[pos] != "{":
        return None
    pos = _WS.match(text, pos + 1).end()
    while pos < len(text) and text[pos] != "}":
        key, pos = _DECODER.raw_decode(text, pos)
        pos = _WS.match(text, pos).end() + 1  # the colon
        start = _WS.match(text, pos).end()
        _, end = _DECODER.raw_decode(text, start)
        if key == path[0]:
            return (start, end) if len(path) == 1 else _member_span(text, path[1:], start)
        pos = _WS.match(text, end).end()
        if pos < len(text) and text[pos] == ",":
            pos = _WS.match(text, pos + 1).end()
    return None


@dataclass
class TaskCancel:
    """What ``cancel_task`` did: ``cancelled`` are the statuses (with their
    cancelled records) of the task's requests it cancelled, ``already_ended``
    those of open requests that ended another way before their cancel was
    stored (they keep that record). Both may be empty."""

    task_id: str
    cancelled: List[RequestStatus]
    already_ended: List[RequestStatus]
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "TaskCancel":
        return cls(task_id=d.get("task_id", ""),
                   cancelled=[RequestStatus.from_dict(s) for s in d.get("cancelled") or []],
                   already_ended=[RequestStatus.from_dict(s) for s in d.get("already_ended") or []], raw=d)


@dataclass
class Result:
    """A request that succeeded: ``output`` is the persona's answer (its
    JSON decoded), ``output_bytes`` the same answer byte for byte, ``record``
    the terminal record (attempts, agent, usage, …)."""

    request_id: str
    record: Record
    status: RequestStatus
    output_bytes: bytes

    @property
    def output(self) -> Any:
        """The persona's answer, decoded from JSON (``None`` when it gave none)."""
        if not self.output_bytes:
            return None
        return json.loads(self.output_bytes)

    @property
    def text(self) -> str:
        """The persona's answer as text (UTF-8)."""
        return self.output_bytes.decode("utf-8")


@dataclass
class Event:
    """One event of a request's event stream: an attempt event
    (``event == "attempt"``; ``kind`` is ``queued``, ``started``, ``failed``
    or ``cancelled``) or the final ``terminal`` event, whose ``status``
    carries the terminal record. ``id`` resumes the stream after it. (The
    stream's live output events are read with ``live_output``.)"""

    event: str
    id: Optional[str]
    data: Dict[str, Any]
    status: Optional[RequestStatus] = None

    @property
    def kind(self) -> str:
        """The attempt event's kind, or ``terminal``."""
        if self.event == "terminal":
            return "terminal"
        return str(self.data.get("kind", ""))

    @property
    def attempt(self) -> int:
        return int(self.data.get("attempt") or 0)

    @property
    def terminal(self) -> bool:
        return self.event == "terminal"


@dataclass
class OutputChunk:
    """A piece of a running request's **live output**: text one attempt
    wrote while it worked, as it came. An attempt's chunks arrive in order;
    their ``text`` put together is what the attempt wrote (up to the cap).
    Live output is for watching: the terminal record still holds the
    output a caller acts on.

    ``offset`` counts the UTF-8 bytes of the attempt's output before
    ``text`` (a reader holding fewer missed a chunk). ``truncated`` counts
    the bytes dropped over the per-attempt cap so far, on the one marker
    sent when the cap is crossed and on the final chunk. ``final`` marks
    the attempt's last chunk. ``id`` is the event id: pass it as
    ``last_event_id`` to resume after this chunk."""

    request_id: str
    attempt: int
    offset: int
    #: The text (the wire's ``data``).
    text: str
    truncated: int = 0
    final: bool = False
    at: Optional[datetime] = None
    id: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d: Dict[str, Any], event_id: Optional[str] = None) -> "OutputChunk":
        return cls(request_id=d.get("request_id", ""), attempt=int(d.get("attempt") or 0),
                   offset=int(d.get("offset") or 0), text=d.get("data") or "",
                   truncated=int(d.get("truncated") or 0), final=bool(d.get("final")),
                   at=parse_time(d.get("at")), id=event_id, raw=d)

    @property
    def end(self) -> int:
        """The attempt's offset after this chunk (UTF-8 bytes)."""
        return self.offset + len(self.text.encode("utf-8"))


@dataclass
class OutputSuperseded:
    """A retry started over: the live output of every attempt up to
    ``supersedes`` is void (discard what you show of it); ``attempt``'s
    chunks follow. Sent only when an earlier attempt wrote output. ``id``
    is the event id, as on :class:`OutputChunk`."""

    request_id: str
    attempt: int
    supersedes: int
    at: Optional[datetime] = None
    id: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d: Dict[str, Any], event_id: Optional[str] = None) -> "OutputSuperseded":
        return cls(request_id=d.get("request_id", ""), attempt=int(d.get("attempt") or 0),
                   supersedes=int(d.get("supersedes") or 0), at=parse_time(d.get("at")), id=event_id, raw=d)


#: What a live output iterator yields.
LiveItem = Union[OutputChunk, OutputSuperseded]


def live_item(ev: "Event") -> Optional[LiveItem]:
    """The live output item an event carries (``None`` for attempt and
    terminal events)."""
    if ev.event == "output":
        return OutputChunk.from_dict(ev.data, ev.id)
    if ev.event == "output_superseded":
        return OutputSuperseded.from_dict(ev.data, ev.id)
    return None


@dataclass
class Persona:
    """A served persona: its retry policy summary and **step budget** (how
    long a request may take across all its attempts, retries and backoff)."""

    name: str
    policy: str = ""
    max_attempts: int = 0
    attempt_timeout_ms: int = 0
    schedule: str = ""
    step_budget_ms: int = 0
    replicas: int = 0
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Persona":
        return cls(name=d.get("name", ""), policy=d.get("policy", ""),
                   max_attempts=int(d.get("max_attempts") or 0),
                   attempt_timeout_ms=int(d.get("attempt_timeout_ms") or 0), schedule=d.get("schedule", ""),
                   step_budget_ms=int(d.get("step_budget_ms") or 0), replicas=int(d.get("replicas") or 0), raw=d)

    @property
    def step_budget(self) -> timedelta:
        return timedelta(milliseconds=self.step_budget_ms)


@dataclass
class Page:
    """One page of ``GET /v1/requests``: statuses newest first, and the
    cursor of the next page (``None`` on the last)."""

    requests: List[RequestStatus]
    next_cursor: Optional[str] = None
