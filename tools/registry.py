"""The fixed dispatch table: exactly three read-only tools.

Each tool has an argument schema (tools.schemas), a policy that authorizes
a call against the run's customer session before dispatch, and a backend that
scopes its own queries by that session again, so that even a wrong policy
cannot leak another account's data.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist

from tickets.models import CustomerSession
from tickets.selectors import (
    Forbidden,
    SessionScope,
    account_has_sensitive_jobs,
    documents_search,
    excerpt,
    job_get_for_session,
    query_terms,
    service_get_with_incidents,
)
from tools import httpbackends
from tools.lookups import (
    RECENT_INCIDENTS,
    UNBOUNDED,
    ApprovalRequired,
    IncidentView,
    JobView,
    Lookup,
    ToolError,
    ToolResult,
    job_result,
    not_listed,
    service_result,
)
from tools.schemas import ARG_SCHEMAS, ToolArgs, ToolName

__all__ = ["TOOLS", "ApprovalRequired", "Lookup", "Tool", "ToolError", "ToolResult"]


Policy = Callable[[SessionScope, dict[str, Any]], bool]
Backend = Callable[[SessionScope, dict[str, Any], Lookup], ToolResult]


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


# --- search_docs ---------------------------------------------------------------


def search_docs(scope: SessionScope, args: dict[str, Any], lookup: Lookup = UNBOUNDED) -> ToolResult:
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


# --- read_job_status: our own Job table ---------------------------------------------


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


def read_job_status(scope: SessionScope, args: dict[str, Any], lookup: Lookup = UNBOUNDED) -> ToolResult:
    job = job_get_for_session(scope=scope, job_ref=args["job_id"])
    requester = job.requested_by
    return job_result(JobView(
        job_id=job.ref, kind=job.kind, status=job.status, error_code=job.error_code or None,
        requested_by=requester.email if requester else None,
        requester_current_role=requester.role if requester else None,
        created_at=job.created_at, finished_at=job.finished_at,
    ))


# --- read_service_status: our own Service table ---------------------------------------


def read_service_status(scope: SessionScope, args: dict[str, Any], lookup: Lookup = UNBOUNDED) -> ToolResult:
    try:
        service, incidents = service_get_with_incidents(name=args["service"], recent=RECENT_INCIDENTS)
    except ObjectDoesNotExist:
        raise ToolError(not_listed(args["service"])) from None
    return service_result(service.name, service.status, [
        IncidentView(i.ref, i.title, i.status, i.started_at, i.resolved_at) for i in incidents
    ])


# --- the table -------------------------------------------------------------------------


def _anyone(scope: SessionScope, args: dict[str, Any]) -> bool:
    return True


def _never(scope: SessionScope, args: dict[str, Any]) -> bool:
    return False


def _by_setting(setting: str, **choices: Callable) -> Callable:
    """Calls the function that `settings.<setting>` names, looked up at each call."""

    def chosen(*args: Any) -> Any:
        return choices[getattr(settings, setting)](*args)

    chosen.__name__ = f"{setting.lower()}_chosen"
    return chosen


# With the http backend, the policy needs a verified session (no request is sent otherwise) and the
# backend refuses a reply about another account as Forbidden. Whether a job is sensitive is known only
# from the reply: the backend raises ApprovalRequired unless the call was approved (tools.httpbackends).
JOB_STATUS = "AGENT_JOB_STATUS_BACKEND"
SERVICE_STATUS = "AGENT_SERVICE_STATUS_BACKEND"

TOOLS: dict[str, Tool] = {
    ToolName.SEARCH_DOCS: Tool(ToolName.SEARCH_DOCS, ARG_SCHEMAS[ToolName.SEARCH_DOCS], _anyone, search_docs),
    ToolName.READ_JOB_STATUS: Tool(
        ToolName.READ_JOB_STATUS,
        ARG_SCHEMAS[ToolName.READ_JOB_STATUS],
        _by_setting(JOB_STATUS, database=read_job_status_allowed, http=httpbackends.read_job_status_allowed),
        _by_setting(JOB_STATUS, database=read_job_status, http=httpbackends.read_job_status),
        needs_approval=_by_setting(JOB_STATUS, database=read_job_status_needs_approval, http=_never),
    ),
    ToolName.READ_SERVICE_STATUS: Tool(
        ToolName.READ_SERVICE_STATUS,
        ARG_SCHEMAS[ToolName.READ_SERVICE_STATUS],
        _anyone,
        _by_setting(SERVICE_STATUS, database=read_service_status, http=httpbackends.read_service_status),
    ),
}
assert TOOLS.keys() == ARG_SCHEMAS.keys()


def session_may_need_approval(*, session: CustomerSession, listed: list[str]) -> bool:
    """Whether a run acting for `session` may have a call wait for a supervisor: a tool is listed as
    needing approval, or the session may look up jobs and one of its account's may be sensitive (with
    the http backend only the reply says so)."""
    if listed:
        return True
    if not session.verified:
        return False  # job lookups are refused before approval is considered
    if settings.AGENT_JOB_STATUS_BACKEND == "http":
        return True
    return account_has_sensitive_jobs(account_id=session.account_id)
