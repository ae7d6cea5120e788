"""read_job_status: one of the customer's jobs, from our own Job table or the operator's job service.

AGENT_JOB_ID_PATTERN is the shape of the operator's job ids (a regular expression a whole id matches):
the argument's schema, the description a model is offered and the rule-based investigator's reading
of ticket text all follow it. AGENT_JOB_STATUS_BACKEND chooses the backend at each call. Only a verified session may look up a
job, and only its own account's. With the database backend the policy knows both before dispatch,
and whether the job is sensitive (then the call waits for a supervisor). With the http backend the
policy needs a verified session (no request is sent otherwise); the service is asked
AGENT_JOB_STATUS_URL (`{job_id}` filled in, URL-quoted) with the verified account's code in the
`X-Account` header and the AGENT_JOB_STATUS_AUTH_HEADER; a 404, or a reply about another account,
is Forbidden (what the database backend gives for a job the session may not see), and whether a job
is sensitive is known only from the reply: the backend raises ApprovalRequired unless the call was
approved.
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from django.conf import settings
from pydantic import AwareDatetime, Field, StrictBool, field_validator

from kit.sources import cut_excerpt
from tickets.models import CustomerSession
from tickets.selectors import (
    Forbidden,
    SessionScope,
    account_code,
    account_has_sensitive_jobs,
    job_get_for_session,
    job_refusal_reason,
)
from tools.base import ResultView, Tool, ToolArgs, by_setting, never
from tools.httpbackends import Reply, http_get, parse_reply, refuse_status
from tools.lookups import UNBOUNDED, ApprovalRequired, Lookup, ToolError, ToolResult, iso

NAME = "read_job_status"
BACKEND = "AGENT_JOB_STATUS_BACKEND"
ACCOUNT_HEADER = "X-Account"
# Job statuses are the job system's own words (an open set); this one makes a job's end its `failed_at`.
FAILED_JOB = "failed"

log = logging.getLogger("agentrun")


MAX_JOB_ID_LENGTH = 200


# --- the operator's job ids ----------------------------------------------------------------------


def job_id_pattern() -> re.Pattern[str]:
    """AGENT_JOB_ID_PATTERN, compiled (ASCII: `\\d` is 0-9 only), read at each call so tests may change it."""
    return _compiled(settings.AGENT_JOB_ID_PATTERN)


@functools.cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.ASCII)


def canonical_job_id(value: str) -> str:
    """The id as written when the pattern takes it, else in the one case it takes (`j-42` is J-42, an
    upper-case UUID its lower case); else as written, for validation to refuse."""
    pattern = job_id_pattern()
    return next((c for c in (value, value.upper(), value.lower()) if pattern.fullmatch(c)), value)


def job_ids_in(text: str) -> list[str]:
    """The job ids a text names, each once, in order, canonical: what the rule-based investigator looks up.
    An id stands alone (no letter or digit right before or after it); case does not matter."""
    finder = re.compile(rf"(?<!\w)(?:{settings.AGENT_JOB_ID_PATTERN})(?!\w)", re.ASCII | re.IGNORECASE)
    found = (canonical_job_id(m.group(0)) for m in finder.finditer(text))
    return list(dict.fromkeys(i for i in found if job_id_pattern().fullmatch(i)))


def _job_id_schema(schema: dict[str, Any]) -> None:
    """The argument's JSON schema as a model is offered it, from the pattern configured now."""
    schema["pattern"] = f"^(?:{settings.AGENT_JOB_ID_PATTERN})$"
    schema["description"] = f"The job id: the whole id matches the regular expression {settings.AGENT_JOB_ID_PATTERN}."


class ReadJobStatusArgs(ToolArgs):
    """Read the status of one of the customer's jobs."""

    case_rules = {"job_id": canonical_job_id}

    job_id: str = Field(
        min_length=1, max_length=MAX_JOB_ID_LENGTH, description="The job id.", json_schema_extra=_job_id_schema
    )

    @field_validator("job_id")
    @classmethod
    def _operator_shape(cls, value: str) -> str:
        if not job_id_pattern().fullmatch(value):
            raise ValueError(f"a job id matches the regular expression {settings.AGENT_JOB_ID_PATTERN}")
        return value


@dataclass(frozen=True)
class JobView:
    """A job as either backend read it."""

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


# --- the database backend: our own Job table ---------------------------------------------------


def allowed_in_database(scope: SessionScope, args: dict[str, Any]) -> bool:
    try:
        job_get_for_session(scope=scope, job_ref=args["job_id"])
    except Forbidden:
        return False
    return True


def needs_approval_in_database(scope: SessionScope, args: dict[str, Any]) -> bool:
    try:
        return job_get_for_session(scope=scope, job_ref=args["job_id"]).sensitive
    except Forbidden:
        return False


def read_from_database(scope: SessionScope, args: dict[str, Any], lookup: Lookup = UNBOUNDED) -> ToolResult:
    job = job_get_for_session(scope=scope, job_ref=args["job_id"])
    requester = job.requested_by
    return job_result(
        JobView(
            job_id=job.ref,
            kind=job.kind,
            status=job.status,
            error_code=job.error_code or None,
            requested_by=requester.email if requester else None,
            requester_current_role=requester.role if requester else None,
            created_at=job.created_at,
            finished_at=job.finished_at,
        )
    )


# --- the http backend: the operator's job service ------------------------------------------------


class JobReply(Reply):
    """The job endpoint's reply (docs/help-desks/services.md)."""

    job_id: str
    account: str
    kind: str
    status: str
    error_code: str | None = None
    requested_by: str | None = None
    requester_current_role: str | None = None
    created_at: AwareDatetime
    finished_at: AwareDatetime | None = None
    sensitive: StrictBool


def allowed_over_http(scope: SessionScope, args: dict[str, Any]) -> bool:
    """Before dispatch: a verified session. The account match is the backend's (it cannot be known earlier)."""
    return scope.verified


def read_over_http(scope: SessionScope, args: dict[str, Any], lookup: Lookup = UNBOUNDED) -> ToolResult:
    if not scope.verified:  # again, so that no request ever leaves for an unverified session
        raise Forbidden("job lookups need a verified session")
    account, what = account_code(account_id=scope.account_id), "the job status service"
    url = settings.AGENT_JOB_STATUS_URL.replace("{job_id}", quote(args["job_id"], safe=""))
    status, body = http_get(url, {ACCOUNT_HEADER: account, **_auth_header()}, lookup.timeout, what=what)
    if status == 404:
        raise Forbidden(
            "no such job for this session",
            staff_reason=f"{args['job_id']} does not exist: the job status service answered 404.",
        )
    refuse_status(status, what=what, credential="AGENT_JOB_STATUS_AUTH_HEADER")
    job = parse_reply(JobReply, body, what=what)
    if job.account != account:
        log.warning("the job status service answered for another account; the reply was refused")
        raise Forbidden(
            "no such job for this session", staff_reason=f"{args['job_id']} belongs to another account ({job.account})."
        )
    if job.job_id != args["job_id"]:
        raise ToolError("the job status service answered about another job; the reply was refused")
    if job.sensitive and not lookup.approved:
        raise ApprovalRequired(f"job {job.job_id} is marked sensitive")
    return job_result(
        JobView(
            job_id=job.job_id,
            kind=job.kind,
            status=job.status,
            error_code=job.error_code or None,
            requested_by=job.requested_by,
            requester_current_role=job.requester_current_role,
            created_at=job.created_at,
            finished_at=job.finished_at,
        )
    )


def _auth_header() -> dict[str, str]:
    configured = settings.AGENT_JOB_STATUS_AUTH_HEADER
    return {configured[0]: configured[1]} if configured else {}


# --- around the call -------------------------------------------------------------------------------


def refusal_reason(scope: SessionScope, args: dict[str, Any]) -> str:
    """Why the session may not read the job, for staff only (one more read, on the refusal's path only)."""
    return job_refusal_reason(scope=scope, job_ref=args["job_id"])


def may_need_approval(session: CustomerSession) -> bool:
    """A verified session's lookup may wait when one of its account's jobs is sensitive (with the http
    backend only the reply says so); an unverified one's is refused before approval is considered."""
    if not session.verified:
        return False
    if getattr(settings, BACKEND) == "http":
        return True
    return account_has_sensitive_jobs(account_id=session.account_id)


class JobStatusView(ResultView):
    kind = "job"
    FIELDS = ("kind", "status", "error_code", "requested_by", "requester_current_role", "failed_at")

    def excerpt(self, content: dict[str, Any], width: int) -> str:
        return cut_excerpt(
            ", ".join(f"{k}: {content.get(k)}" for k in self.FIELDS if content.get(k) is not None), width
        )


TOOL = Tool(
    NAME,
    ReadJobStatusArgs,
    policy=by_setting(BACKEND, database=allowed_in_database, http=allowed_over_http),
    backend=by_setting(BACKEND, database=read_from_database, http=read_over_http),
    reads="the job status service",
    view=JobStatusView(),
    needs_approval=by_setting(BACKEND, database=needs_approval_in_database, http=never),
    may_need_approval=may_need_approval,
    refusal_reason=refusal_reason,
    verified_only=True,
)
