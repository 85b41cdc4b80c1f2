"""Exceptions raised by the personaq clients.

Two families:

* :class:`Stopped` and its subclasses: the request ended without succeeding.
  Each carries the **terminal record** (``.record``), the one record every
  request ends with, so the orchestrator can act on its reason, quarantine
  sequence, attempts and last error. They mirror the Go client's sentinels
  (``ErrBlocked``, ``ErrDeferred``, ``ErrEscalated``, ``ErrStepDeadline``,
  ``ErrBudgetExhausted``).
* :class:`APIError` and its subclasses: the HTTP API refused or could not
  serve a call. They are chosen from the problem document's ``type``
  (RFC 9457), never from its text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional

if TYPE_CHECKING:  # pragma: no cover
    from .models import Record, RequestStatus

PROBLEM_PREFIX = "urn:personaq:problem:"


class PersonaqError(Exception):
    """Base class of every error the personaq client raises."""


class Stopped(PersonaqError):
    """The request ended without succeeding.

    ``record`` is its terminal record (``None`` only for
    :class:`StepDeadlineExceeded` raised by the client itself, when no record
    arrived within the step budget plus the grace period); ``status`` is the
    request status the record came with.
    """

    def __init__(self, record: Optional["Record"], status: Optional["RequestStatus"] = None,
                 message: Optional[str] = None) -> None:
        self.record = record
        self.status = status
        super().__init__(message or _stopped_message(record, type(self).__name__))


def _stopped_message(record: Optional["Record"], kind: str) -> str:
    if record is None:
        return kind
    msg = "task %s step %s %s: %s after %d attempt(s)" % (
        record.task_id, record.step, record.outcome, record.reason or "-", record.attempts)
    if record.quarantine_seq:
        msg += " (quarantine seq %d)" % record.quarantine_seq
    if record.last_error:
        msg += ": " + record.last_error
    elif record.detail:
        msg += ": " + record.detail
    return msg


class Blocked(Stopped):
    """The request was quarantined: retries exhausted, a terminal failure,
    an invalid message, an unknown persona or the budget spent. The task step
    cannot go on until someone acts (replays or fixes it)."""


class BudgetExhausted(Blocked):
    """Another attempt would have overspent the request's token or cost
    budget (reason ``budget_exhausted``); the request was quarantined."""


class Deferred(Stopped):
    """The persona plateaued at the same point across agents (adaptive
    retry): the step can be revisited later."""


class Escalated(Stopped):
    """Retries ran out without a plateau (no progress at all, or variable
    progress): someone should look."""


class StepDeadlineExceeded(Stopped):
    """The step budget ran out before the request ended: the record's outcome
    is ``deadline_exceeded``, or no record arrived by the step deadline plus
    the grace period (then ``record`` is ``None``)."""


class Cancelled(Stopped):
    """The request was cancelled before it ended (outcome ``cancelled``)."""


_STOPPED_BY_OUTCOME = {
    "quarantined": Blocked,
    "deferred": Deferred,
    "escalated": Escalated,
    "deadline_exceeded": StepDeadlineExceeded,
    "cancelled": Cancelled,
}


def stopped_error(record: "Record", status: Optional["RequestStatus"] = None) -> Stopped:
    """The :class:`Stopped` subclass for a terminal record that did not succeed."""
    if record.reason == "budget_exhausted":
        return BudgetExhausted(record, status)
    return _STOPPED_BY_OUTCOME.get(record.outcome, Stopped)(record, status)


class APIError(PersonaqError):
    """The API answered with an error. ``status`` is the HTTP status (0 when
    no answer came), ``problem`` the RFC 9457 problem document."""

    def __init__(self, status: int, problem: Mapping[str, Any]) -> None:
        self.status = status
        self.problem: Dict[str, Any] = dict(problem)
        super().__init__(self._message())

    @property
    def type(self) -> str:
        """The problem type, e.g. ``urn:personaq:problem:conflict``."""
        return str(self.problem.get("type", ""))

    @property
    def title(self) -> str:
        return str(self.problem.get("title", ""))

    @property
    def detail(self) -> str:
        return str(self.problem.get("detail", ""))

    @property
    def field(self) -> Optional[str]:
        """The offending JSON field or query parameter, when there is one."""
        f = self.problem.get("field")
        return str(f) if f is not None else None

    def _message(self) -> str:
        parts = ["HTTP %d" % self.status if self.status else "no answer"]
        if self.title:
            parts.append(self.title)
        if self.detail:
            parts.append(self.detail)
        return ": ".join(parts)


class InvalidRequest(APIError):
    """A field, query parameter or the JSON itself was refused (400);
    ``field`` names it."""


class TooLarge(InvalidRequest):
    """The request body is over the server's size bound (413)."""

    @property
    def limit_bytes(self) -> Optional[int]:
        v = self.problem.get("limit_bytes")
        return int(v) if v is not None else None


class Unauthorized(APIError):
    """No token, or a wrong one (401)."""


class Forbidden(APIError):
    """The token lacks the scope the route needs (403); ``scope`` names it."""

    @property
    def scope(self) -> Optional[str]:
        v = self.problem.get("scope")
        return str(v) if v is not None else None


class NotFound(APIError):
    """No request with that id (404)."""


class NoOutput(NotFound):
    """The request has no output: not finished, or not succeeded.
    ``request_status`` is its status (``queued``, ``quarantined``, …)."""

    @property
    def request_status(self) -> Optional[str]:
        v = self.problem.get("status")
        return str(v) if v is not None else None


class Conflict(APIError):
    """The request id was already accepted with different content (409);
    from a cancel call it is :class:`AlreadyEnded`. ``request`` is the
    stored request's status."""

    @property
    def request(self) -> Optional["RequestStatus"]:
        from .models import RequestStatus

        stored = self.problem.get("request")
        return RequestStatus.from_dict(stored) if isinstance(stored, dict) else None


class AlreadyEnded(Conflict):
    """A cancel came too late: the request had already ended another way
    (409 from a cancel route). ``request`` is its status and ``record`` the
    terminal record that won (e.g. the succeeded one); it is kept."""

    @property
    def record(self) -> Optional["Record"]:
        """The terminal record the request ended with."""
        st = self.request
        return st.record if st is not None else None


class UnknownPersona(APIError):
    """No replica serves the persona (422); ``served_personas`` lists those
    that are served."""

    @property
    def served_personas(self) -> List[str]:
        return [str(p) for p in self.problem.get("served_personas") or []]


class Unavailable(APIError):
    """The API could not be reached, or cannot reach NATS (503), for longer
    than the call was allowed to retry. ``retry_after`` is the server's hint
    in seconds, when it gave one; ``retryable`` is False when retrying
    cannot help (the server's certificate failed verification)."""

    def __init__(self, status: int, problem: Mapping[str, Any], retry_after: Optional[float] = None) -> None:
        super().__init__(status, problem)
        self.retry_after = retry_after
        self.retryable = True


class OutputMismatch(PersonaqError):
    """The output fetched for a record did not match the size or SHA-256
    digest its ``output_ref`` names."""


_API_ERROR_BY_SLUG = {
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "invalid-json": InvalidRequest,
    "invalid-field": InvalidRequest,
    "invalid-query": InvalidRequest,
    "too-large": TooLarge,
    "unknown-persona": UnknownPersona,
    "conflict": Conflict,
    "not-found": NotFound,
    "no-output": NoOutput,
    "unavailable": Unavailable,
}

_API_ERROR_BY_STATUS = {
    400: InvalidRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: TooLarge,
    422: UnknownPersona,
    503: Unavailable,
}


def api_error(status: int, problem: Mapping[str, Any], retry_after: Optional[float] = None) -> APIError:
    """The :class:`APIError` subclass for a problem document: chosen by its
    ``type``, or by the HTTP status when the type is not one of personaq's."""
    typ = str(problem.get("type", ""))
    cls = None
    if typ.startswith(PROBLEM_PREFIX):
        cls = _API_ERROR_BY_SLUG.get(typ[len(PROBLEM_PREFIX):])
    if cls is None:
        cls = _API_ERROR_BY_STATUS.get(status, APIError)
    if cls is Unavailable:
        return Unavailable(status, problem, retry_after)
    return cls(status, problem)
