"""What the synchronous and asyncio clients share: the routes, bodies and
query strings of the API, error decoding, the reconnect backoff and the
event-stream parser. No I/O here."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import ssl
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union
from urllib.parse import quote, urlencode, urlsplit

from . import errors
from .models import Event, Persona, Page, Record, RequestStatus, format_time

#: The longest wait the server honours in one long-poll.
MAX_SERVER_WAIT = 60.0
#: How long ``run`` waits past the step deadline for the terminal record.
DEFAULT_GRACE = 5.0
DEFAULT_URL = "http://127.0.0.1:8080"
USER_AGENT = "personaq-python/0.1"

Seconds = Union[float, int, timedelta]
Deadline = Union[datetime, str, timedelta, float, int]


@dataclass(frozen=True)
class Endpoint:
    """Where the API is: scheme, host, port and the path prefix before /v1."""

    scheme: str
    host: str
    port: int
    prefix: str

    @classmethod
    def parse(cls, base_url: Optional[str]) -> "Endpoint":
        url = base_url or os.environ.get("PERSONAQ_URL") or DEFAULT_URL
        if "://" not in url:
            url = "http://" + url
        u = urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError("invalid base_url %r: want http(s)://host[:port]" % url)
        prefix = u.path.rstrip("/")
        if prefix.endswith("/v1"):
            prefix = prefix[:-3]
        port = u.port or (443 if u.scheme == "https" else 80)
        return cls(u.scheme, u.hostname, port, prefix)

    @property
    def tls(self) -> bool:
        return self.scheme == "https"

    def path(self, route: str, query: Optional[Iterable[Tuple[str, str]]] = None) -> str:
        p = self.prefix + "/v1" + route
        q = list(query or [])
        return p + ("?" + urlencode(q) if q else "")


def resolve_token(token: Optional[str]) -> Optional[str]:
    return token if token is not None else os.environ.get("PERSONAQ_API_TOKEN") or None


def seconds(v: Optional[Seconds]) -> Optional[float]:
    if v is None:
        return None
    if isinstance(v, timedelta):
        return v.total_seconds()
    return float(v)


def headers(token: Optional[str], accept: str = "application/json") -> Dict[str, str]:
    h = {"Accept": accept, "User-Agent": USER_AGENT}
    if token:
        h["Authorization"] = "Bearer " + token
    return h


def request_path(ep: Endpoint, request_id: str, sub: str = "") -> str:
    return ep.path("/requests/" + quote(request_id, safe="") + sub)


def wait_query(wait: float) -> List[Tuple[str, str]]:
    return [("wait", "%.3fs" % max(wait, 0.0))]


def deadline_value(d: Deadline) -> str:
    """A step deadline as the RFC 3339 string the API takes: a datetime, a
    string as is, or a duration (timedelta or seconds) from now."""
    if isinstance(d, str):
        return d
    if isinstance(d, datetime):
        return format_time(d)
    return format_time(datetime.now(timezone.utc) + timedelta(seconds=seconds(d) or 0.0))


def submit_body(persona: str, task_id: str, step: str, input: Any, request_id: Optional[str],
                agents: Union[None, str, Mapping[str, str]], policy: Optional[str],
                policy_overrides: Optional[Mapping[str, Any]], deadline: Optional[Deadline],
                progress_total: Optional[int], correlation_id: Optional[str],
                budget: Optional[Mapping[str, Any]], extra: Optional[Mapping[str, Any]]) -> Tuple[str, bytes]:
    """The request id (a new UUID unless given: resubmitting with it is then
    idempotent) and the JSON body of ``POST /v1/requests``."""
    rid = request_id or str(uuid.uuid4())
    body: Dict[str, Any] = {"request_id": rid, "persona": persona, "task_id": task_id, "step": step}
    if input is not None:
        body["input"] = input
    if agents is not None:
        body["agents"] = {"primary": agents} if isinstance(agents, str) else dict(agents)
    optional = {"policy": policy, "policy_overrides": policy_overrides, "progress_total": progress_total,
                "correlation_id": correlation_id, "budget": budget}
    body.update({k: v for k, v in optional.items() if v is not None})
    if deadline is not None:
        body["deadline"] = deadline_value(deadline)
    body.update(extra or {})
    return rid, json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def list_query(task_id: Optional[str], persona: Union[None, str, Iterable[str]],
               status: Union[None, str, Iterable[str]], limit: Optional[int],
               cursor: Optional[str]) -> List[Tuple[str, str]]:
    q: List[Tuple[str, str]] = []
    if task_id:
        q.append(("task_id", task_id))
    for name, v in (("persona", persona), ("status", status)):
        if v:
            q.append((name, v if isinstance(v, str) else ",".join(v)))
    if limit:
        q.append(("limit", str(int(limit))))
    if cursor:
        q.append(("cursor", cursor))
    return q


def retry_after(value: Optional[str]) -> Optional[float]:
    """The Retry-After header in seconds (delta-seconds form only)."""
    try:
        return max(float(value), 0.0) if value else None
    except ValueError:
        return None


def error_from(status: int, body: bytes, retry_after_header: Optional[str]) -> errors.APIError:
    """The APIError for a non-2xx answer (its problem document, or one made
    up from the status when the body is not one)."""
    try:
        problem = json.loads(body.decode("utf-8")) if body else {}
    except (UnicodeDecodeError, ValueError):
        problem = {}
    if not isinstance(problem, dict):
        problem = {}
    if not problem:
        problem = {"status": status, "detail": body[:200].decode("utf-8", "replace")}
    return errors.api_error(status, problem, retry_after(retry_after_header))


def unreachable(exc: BaseException) -> errors.Unavailable:
    """The error for a call that got no answer (connection refused, reset, …).
    A certificate that fails verification is not retried."""
    err = errors.Unavailable(0, {"type": errors.PROBLEM_PREFIX + "unavailable",
                                 "title": "API unreachable", "detail": "%s: %s" % (type(exc).__name__, exc)})
    err.retryable = not isinstance(exc, ssl.SSLCertVerificationError)
    return err


def transient(err: errors.APIError) -> bool:
    """Worth retrying: no answer, or a 503 (the API cannot reach NATS, or is
    restarting behind a proxy)."""
    if isinstance(err, errors.Unavailable):
        return err.retryable
    return err.status in (502, 503, 504)


class Backoff:
    """Reconnect delays: 100 ms doubling to 2 s, with jitter; a server's
    Retry-After wins when it gives one."""

    def __init__(self, first: float = 0.1, cap: float = 2.0) -> None:
        self.first, self.cap, self.n = first, cap, 0

    def next(self, hint: Optional[float] = None) -> float:
        if hint is not None:
            return min(hint, 30.0)
        d = min(self.first * (2 ** self.n), self.cap)
        self.n += 1
        return d * (0.5 + random.random() / 2)

    def reset(self) -> None:
        self.n = 0


def cancel_body(reason: Optional[str]) -> bytes:
    """The body of the cancel routes: ``{"reason": …}``, or ``{}``."""
    return json.dumps({"reason": reason} if reason else {}).encode("utf-8")


def task_cancel_path(endpoint: "Endpoint", task_id: str) -> str:
    return endpoint.path("/tasks/" + quote(task_id, safe="") + "/cancel")


def cancel_conflict(err: errors.Conflict, retried: bool) -> RequestStatus:
    """A cancel route's 409: raises :class:`~personaq.AlreadyEnded` (the
    request had ended; the problem's ``request`` carries the record that
    won). On a repeated call (the earlier one got no answer) a cancelled
    record is returned instead: the earlier call's cancel went through and
    only its answer was lost."""
    ended = errors.AlreadyEnded(err.status, err.problem)
    st = ended.request
    if retried and st is not None and st.record is not None and st.record.outcome == "cancelled":
        return st
    raise ended from None


def decode_json(body: bytes) -> Any:
    return json.loads(body.decode("utf-8"))


def personas_from(body: bytes) -> List[Persona]:
    return [Persona.from_dict(p) for p in decode_json(body).get("personas") or []]


def page_from(body: bytes) -> Page:
    d = decode_json(body)
    return Page([RequestStatus.from_dict(r) for r in d.get("requests") or []], d.get("next_cursor") or None)


def check_output(record: Record, data: bytes) -> bytes:
    """Check fetched output against the record's output_ref (size, SHA-256)."""
    ref = record.output_ref or {}
    size, digest = ref.get("size"), str(ref.get("digest") or "")
    if size is not None and int(size) != len(data):
        raise errors.OutputMismatch("output of %s: %d bytes, record says %s" % (record.request_id, len(data), size))
    if digest.startswith("SHA-256="):
        want = digest[len("SHA-256="):].rstrip("=")
        got = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")
        if got != want:
            raise errors.OutputMismatch("output of %s: digest SHA-256=%s, record says %s" % (
                record.request_id, got, digest))
    return data


class SSEParser:
    """An incremental text/event-stream parser: feed it lines, it returns
    the event each blank line completes."""

    def __init__(self) -> None:
        self._event, self._id, self._data = "", None, []  # type: str, Optional[str], List[str]

    def line(self, raw: bytes) -> Optional[Event]:
        text = raw.decode("utf-8").rstrip("\r\n")
        if text == "":
            return self._dispatch()
        if text.startswith(":"):
            return None
        name, _, value = text.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self._id = value
        return None

    def _dispatch(self) -> Optional[Event]:
        if not self._data:
            self._event = ""
            return None
        kind, data = self._event or "message", "\n".join(self._data)
        self._event, self._data = "", []
        return event_from(kind, self._id, data)


def event_from(kind: str, event_id: Optional[str], data: str) -> Event:
    if kind == "terminal":
        st = RequestStatus.from_json(data.encode("utf-8"))
        return Event(kind, event_id, st.raw, st)
    return Event(kind, event_id, json.loads(data))
