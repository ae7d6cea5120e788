"""The account-data tools read from the operator's own services over HTTP.

`read_job_status` asks AGENT_JOB_STATUS_URL (`{job_id}` filled in, URL-quoted)
with the verified account's code in the `X-Account` header and the
AGENT_JOB_STATUS_AUTH_HEADER; `read_service_status` reads a Statuspage
summary (AGENT_SERVICE_STATUS_URL, `/api/v2/summary.json`). Each reply is
parsed into a pydantic model first and mapped to the same result the
database backends give (tools.lookups), so the model and the packet see
the same thing whichever backend read it.

Errors: no answer in time, a lost connection, 5xx and 429 are transient (the
loop retries them as `max_read_retries` allows); 401/403 are a configuration
error; a reply that does not fit its schema is refused. A job's 404, and a
reply about another account, are Forbidden: the outcome the database backend
gives for a job the session may not see. The credential never reaches a log
or a stored error.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any
from urllib.parse import quote

import httpx2
from django.conf import settings
from pydantic import AwareDatetime, BaseModel, ConfigDict, StrictBool, ValidationError

from tickets.selectors import Forbidden, SessionScope, account_code
from tools.lookups import (
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

log = logging.getLogger("agentrun")

ACCOUNT_HEADER = "X-Account"
MAX_REPLY_BYTES = 2 * 1024 * 1024
TIMEOUT_WITHOUT_DEADLINE = 30.0  # outside a run (a shell, a test calling a backend): no wait is unbounded


# --- the replies' schemas ---------------------------------------------------------------


class Reply(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


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


class Component(Reply):
    id: str
    name: str
    status: str


class ComponentRef(Reply):
    id: str
    name: str = ""


class Incident(Reply):
    id: str
    name: str
    status: str
    created_at: AwareDatetime
    started_at: AwareDatetime | None = None
    resolved_at: AwareDatetime | None = None
    components: list[ComponentRef] = []


class Summary(Reply):
    """The part of a Statuspage `/api/v2/summary.json` these lookups read."""

    components: list[Component]
    incidents: list[Incident] = []


# --- read_job_status ---------------------------------------------------------------------


def read_job_status_allowed(scope: SessionScope, args: dict[str, Any]) -> bool:
    """Before dispatch: a verified session. The account match is the backend's (it cannot be known earlier)."""
    return scope.verified


def read_job_status(scope: SessionScope, args: dict[str, Any], lookup: Lookup = UNBOUNDED) -> ToolResult:
    if not scope.verified:  # again, so that no request ever leaves for an unverified session
        raise Forbidden("job lookups need a verified session")
    account = account_code(account_id=scope.account_id)
    url = settings.AGENT_JOB_STATUS_URL.replace("{job_id}", quote(args["job_id"], safe=""))
    headers = {ACCOUNT_HEADER: account, **_auth_header()}
    status, body = _get(url, headers, lookup.timeout, what="the job status service")
    if status == 404:
        raise Forbidden("no such job for this session",
                        staff_reason=f"{args['job_id']} does not exist: the job status service answered 404.")
    _refuse_status(status, what="the job status service", credential="AGENT_JOB_STATUS_AUTH_HEADER")
    job = _parse(JobReply, body, what="the job status service")
    if job.account != account:
        log.warning("the job status service answered for another account; the reply was refused")
        raise Forbidden("no such job for this session",
                        staff_reason=f"{args['job_id']} belongs to another account ({job.account}).")
    if job.job_id != args["job_id"]:
        raise ToolError("the job status service answered about another job; the reply was refused")
    if job.sensitive and not lookup.approved:
        raise ApprovalRequired(f"job {job.job_id} is marked sensitive")
    return job_result(JobView(
        job_id=job.job_id, kind=job.kind, status=job.status, error_code=job.error_code or None,
        requested_by=job.requested_by, requester_current_role=job.requester_current_role,
        created_at=job.created_at, finished_at=job.finished_at,
    ))


def _auth_header() -> dict[str, str]:
    configured = settings.AGENT_JOB_STATUS_AUTH_HEADER
    return {configured[0]: configured[1]} if configured else {}


# --- read_service_status -------------------------------------------------------------------


def read_service_status(scope: SessionScope, args: dict[str, Any], lookup: Lookup = UNBOUNDED) -> ToolResult:
    """The component named like the service (case-insensitively) and the incidents the page lists for it."""
    what = "the status page"
    status, body = _get(settings.AGENT_SERVICE_STATUS_URL, {"Accept": "application/json"}, lookup.timeout, what=what)
    _refuse_status(status, what=what, credential=None)
    summary = _parse(Summary, body, what=what)
    wanted = args["service"].casefold()
    component = next((c for c in summary.components if c.name.casefold() == wanted), None)
    if component is None:
        raise ToolError(not_listed(args["service"]))
    incidents = [
        IncidentView(i.id, i.name, i.status, i.started_at or i.created_at, i.resolved_at)
        for i in summary.incidents
        if any(ref.id == component.id or ref.name.casefold() == wanted for ref in i.components)
    ]
    return service_result(args["service"], _component_status(component.status), incidents)


def _component_status(status: str) -> str:
    """Statuspage's `degraded_performance` is what our own table calls `degraded`; the rest as the page says."""
    return "degraded" if status == "degraded_performance" else status


# --- one GET, bounded by the deadline --------------------------------------------------------


_client: httpx2.Client | None = None
_client_pid = 0
_client_lock = threading.Lock()


def http_client() -> httpx2.Client:
    """One client per process, shared by its threads (its connection pool is thread-safe); a forked child makes its own."""
    global _client, _client_pid
    with _client_lock:
        if _client is None or _client_pid != os.getpid():
            _client = httpx2.Client(follow_redirects=False, limits=httpx2.Limits(max_keepalive_connections=20))
            _client_pid = os.getpid()
        return _client


class _UntilDeadline(dict):
    """httpx's per-request timeouts, each phase (pool, connect, write, every read) given the time left.

    httpx bounds each phase on its own, so a server that trickles its reply a
    few bytes at a time would hold the thread past the deadline; the transport
    asks this mapping before every phase, so every wait ends at the deadline.
    """

    def __init__(self, deadline: float):
        super().__init__(connect=None, read=None, write=None, pool=None)
        self.deadline = deadline

    def get(self, key: str, default: Any = None) -> float:
        return max(self.deadline - time.monotonic(), 0.001)

    def __getitem__(self, key: str) -> float:
        return self.get(key)


def _get(url: str, headers: dict[str, str], timeout: float | None, *, what: str) -> tuple[int, bytes]:
    """(status, body) of a GET that ends by `timeout` seconds from now, whatever the server does."""
    deadline = time.monotonic() + (TIMEOUT_WITHOUT_DEADLINE if timeout is None else timeout)
    client = http_client()
    request = client.build_request("GET", url, headers=headers, extensions={"timeout": _UntilDeadline(deadline)})
    try:
        response = client.send(request, stream=True)
        try:
            return response.status_code, _read_body(response, deadline, what)
        finally:
            response.close()
    except httpx2.TimeoutException:
        raise ToolError(f"{what} did not answer in time", transient=True) from None
    except httpx2.TransportError as exc:
        raise ToolError(f"{what} could not be reached ({type(exc).__name__})", transient=True) from None


def _read_body(response: httpx2.Response, deadline: float, what: str) -> bytes:
    body = bytearray()
    for chunk in response.iter_bytes():
        body += chunk
        if len(body) > MAX_REPLY_BYTES:
            raise ToolError(f"{what} sent a reply larger than {MAX_REPLY_BYTES} bytes; it was refused")
        if time.monotonic() > deadline:
            raise ToolError(f"{what} did not answer in time", transient=True)
    return bytes(body)


def _refuse_status(status: int, *, what: str, credential: str | None) -> None:
    """Raise for any status but 200: transient for 5xx and 429, a configuration error for 401/403."""
    if status == 200:
        return
    if status >= 500 or status == 429:
        raise ToolError(f"{what} answered HTTP {status}", transient=True)
    if status in (401, 403):
        fix = f"check {credential}" if credential else "check that the page needs no credentials"
        log.error("%s refused our credentials (HTTP %s): %s", what, status, fix)
        raise ToolError(f"configuration error: {what} refused our credentials (HTTP {status}); {fix}")
    raise ToolError(f"{what} answered HTTP {status}")


def _parse(schema: type[Reply], body: bytes, *, what: str):
    """The reply as `schema`, or a non-transient failure naming what did not fit (never the values)."""
    try:
        return schema.model_validate_json(body)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or 'the reply'}: {error['msg']}" for error in exc.errors()[:5]
        )
        raise ToolError(f"{what} sent a reply that does not fit its schema ({problems})"[:500]) from None
