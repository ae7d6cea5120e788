"""The fixed dispatch table: exactly three read-only tools.

Each tool has an argument schema (agentrun.schemas), a policy that authorizes
a call against the run's customer session before dispatch, and a backend that
scopes its own queries by that session again, so that even a wrong policy
cannot leak another account's data.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tickets.selectors import (
    Forbidden,
    SessionScope,
    documents_search,
    excerpt,
    job_get_for_session,
    query_terms,
    service_get_with_incidents,
)

from .schemas import ARG_SCHEMAS, ToolArgs


class ToolError(Exception):
    """A dispatch that failed. Transient failures of a read may be retried."""

    def __init__(self, message: str, *, transient: bool = False):
        super().__init__(message)
        self.transient = transient


@dataclass(frozen=True)
class ToolResult:
    content: dict[str, Any]
    source_ref: str


Policy = Callable[[SessionScope, dict[str, Any]], bool]
Backend = Callable[[SessionScope, dict[str, Any]], ToolResult]


@dataclass(frozen=True)
class Tool:
    name: str
    args: type[ToolArgs]
    policy: Policy
    backend: Backend
    needs_approval: Policy = lambda scope, args: False

    @property
    def description(self) -> str:
        return (self.args.__doc__ or "").strip()


def _iso(value) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


# --- search_docs ---------------------------------------------------------------


def search_docs(scope: SessionScope, args: dict[str, Any]) -> ToolResult:
    revisions = documents_search(query=args["query"], limit=args["max_results"])
    terms = query_terms(args["query"])
    results = [
        {
            "id": r.document.code,
            "revision": r.label,
            "title": r.document.title,
            "excerpt": excerpt(r.body, terms),
        }
        for r in revisions
    ]
    source = ", ".join(f"{r['id']}@{r['revision']}" for r in results) or "no matching documents"
    return ToolResult({"query": args["query"], "results": results}, source)


# --- read_job_status -------------------------------------------------------------


def read_job_status_allowed(scope: SessionScope, args: dict[str, Any]) -> bool:
    try:
        job_get_for_session(scope=scope, job_ref=args["job_id"])
    except Forbidden:
        return False
    return True


def read_job_status_needs_approval(scope: SessionScope, args: dict[str, Any]) -> bool:
    try:
        return job_get_for_session(scope=scope, job_ref=args["job_id"]).sensitive
    except Forbidden:
        return False


def read_job_status(scope: SessionScope, args: dict[str, Any]) -> ToolResult:
    job = job_get_for_session(scope=scope, job_ref=args["job_id"])
    requester = job.requested_by
    content = {
        "job_id": job.ref,
        "kind": job.kind,
        "status": job.status,
        "error_code": job.error_code or None,
        "requested_by": requester.email if requester else None,
        "requester_current_role": requester.role if requester else None,
        "created_at": _iso(job.created_at),
        "failed_at": _iso(job.finished_at) if job.status == "failed" else None,
        "finished_at": _iso(job.finished_at),
    }
    return ToolResult(content, job.ref)


# --- read_service_status ---------------------------------------------------------


def read_service_status(scope: SessionScope, args: dict[str, Any]) -> ToolResult:
    service, incidents = service_get_with_incidents(name=args["service"])
    content = {
        "service": service.name,
        "status": service.status,
        "incidents": [
            {
                "id": i.ref,
                "title": i.title,
                "status": i.status,
                "started_at": _iso(i.started_at),
                "resolved_at": _iso(i.resolved_at),
            }
            for i in incidents
        ],
    }
    return ToolResult(content, f"service:{service.name}")


def _anyone(scope: SessionScope, args: dict[str, Any]) -> bool:
    return True


TOOLS: dict[str, Tool] = {
    "search_docs": Tool("search_docs", ARG_SCHEMAS["search_docs"], _anyone, search_docs),
    "read_job_status": Tool(
        "read_job_status",
        ARG_SCHEMAS["read_job_status"],
        read_job_status_allowed,
        read_job_status,
        needs_approval=read_job_status_needs_approval,
    ),
    "read_service_status": Tool(
        "read_service_status", ARG_SCHEMAS["read_service_status"], _anyone, read_service_status
    ),
}
assert TOOLS.keys() == ARG_SCHEMAS.keys()
