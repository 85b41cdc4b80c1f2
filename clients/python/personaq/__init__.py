"""personaq: submit persona requests to a personaq service over its HTTP
API and await their **terminal record**, with the standard library only.

Every request ends in exactly one terminal record: ``succeeded`` with the
persona's output, or stopped (``quarantined``, ``deferred``, ``escalated``,
``deadline_exceeded``, ``cancelled``) with the reason, the attempts and the
last error. :meth:`Client.run` submits a request and awaits that record
under the request's **step budget** (every attempt, retry and backoff the
persona's policy allows, adaptive retry included): it returns a
:class:`Result`, or raises the :class:`Stopped` subclass of the outcome.
:class:`AsyncClient` makes the same calls from asyncio code.
``live_output`` follows what a streaming persona writes while it works.
"""

from .aio import AsyncClient
from .client import Client
from .errors import (AlreadyEnded, APIError, Blocked, BudgetExhausted, Cancelled, Conflict, Deferred, Escalated,
                     Forbidden, InvalidRequest, NoOutput, NotFound, OutputMismatch, PersonaqError, StepDeadlineExceeded,
                     Stopped, TooLarge, Unauthorized, Unavailable, UnknownPersona)
from .live import AsyncLiveOutput, LiveOutput
from .models import (PENDING_STATUSES, TERMINAL_STATUSES, Event, LiveItem, OutputChunk, OutputSuperseded, Page, Persona,
                     Record, RequestStatus, Result, TaskCancel)

__version__ = "0.1.0"

__all__ = [
    "AsyncClient", "Client",
    "AlreadyEnded", "APIError", "Blocked", "BudgetExhausted", "Cancelled", "Conflict", "Deferred", "Escalated",
    "Forbidden", "InvalidRequest", "NoOutput", "NotFound", "OutputMismatch", "PersonaqError", "StepDeadlineExceeded",
    "Stopped", "TooLarge", "Unauthorized", "Unavailable", "UnknownPersona",
    "PENDING_STATUSES", "TERMINAL_STATUSES", "Event", "Page", "Persona", "Record", "RequestStatus", "Result",
    "TaskCancel", "LiveOutput", "AsyncLiveOutput", "LiveItem", "OutputChunk", "OutputSuperseded",
]
