"""What a tool backend is handed and what it hands back, whichever backend it is. Plain values."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

# Job statuses are the job system's own words (an open set); this one makes a job's end its `failed_at`.
FAILED_JOB = "failed"


class ToolError(Exception):
    """A dispatch that failed. Transient failures of a read may be retried."""

    def __init__(self, message: str, *, transient: bool = False):
        super().__init__(message)
        self.transient = transient


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


# --- the results' shapes: one per tool, whichever backend read it ----------------------


def iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


@dataclass(frozen=True)
class JobView:
    job_id: str
    kind: str
    status: str
    error_code: str | None
    requested_by: str | None
    requester_current_role: str | None
    created_at: datetime
    finished_at: datetime | None


def job_result(job: JobView) -> ToolResult:
    content = {
        "job_id": job.job_id,
        "kind": job.kind,
        "status": job.status,
        "error_code": job.error_code or None,
        "requested_by": job.requested_by,
        "requester_current_role": job.requester_current_role,
        "created_at": iso(job.created_at),
        "failed_at": iso(job.finished_at) if job.status == FAILED_JOB else None,
        "finished_at": iso(job.finished_at),
    }
    return ToolResult(content, job.job_id)


@dataclass(frozen=True)
class IncidentView:
    id: str
    title: str
    status: str
    started_at: datetime
    resolved_at: datetime | None


RECENT_INCIDENTS = 5


def service_result(service: str, status: str, incidents: list[IncidentView]) -> ToolResult:
    """The service's status and its most recent incidents, newest first."""
    recent = sorted(incidents, key=lambda i: i.started_at, reverse=True)[:RECENT_INCIDENTS]
    content = {
        "service": service,
        "status": status,
        "incidents": [
            {"id": i.id, "title": i.title, "status": i.status, "started_at": iso(i.started_at),
             "resolved_at": iso(i.resolved_at)}
            for i in recent
        ],
    }
    return ToolResult(content, f"service:{service}")


def not_listed(service: str) -> str:
    return f"no service named {service!r} is listed"
