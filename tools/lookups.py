"""What a tool backend is handed and what it hands back, whichever tool and backend it is. Plain values."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


class ToolError(Exception):
    """A dispatch that failed. Transient failures of a read may be retried; `gone`: what was asked about
    is not there (a service no longer listed), which a re-check reports as its source gone."""

    def __init__(self, message: str, *, transient: bool = False, gone: bool = False):
        super().__init__(message)
        self.transient = transient
        self.gone = gone


class ApprovalRequired(Exception):
    """The backend found that this call needs a supervisor's approval it does not have.

    Raised by a backend that learns only from its reply that the call is gated
    (a job the operator's service marks sensitive); the reply is dropped, never
    kept or shown, and the call waits for a supervisor like one gated before dispatch.
    """


@dataclass(frozen=True)
class ToolResult:
    content: dict[str, Any]
    source_ref: str


@dataclass(frozen=True)
class Lookup:
    """How one dispatch may proceed.

    `timeout`: seconds the backend may wait in all (min(operation timeout, time
    left), as the loop computed it; None outside a run). `approved`: a
    supervisor approved this exact call.
    """

    timeout: float | None = None
    approved: bool = False


UNBOUNDED = Lookup()


def iso(value: datetime | None) -> str | None:
    """A time as results give it: ISO 8601, UTC written Z."""
    return value.isoformat().replace("+00:00", "Z") if value else None
