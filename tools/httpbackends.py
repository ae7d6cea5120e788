"""What the tools that read the operator's own services over HTTP share: one GET, bounded by the run's deadline.

A tool's HTTP backend (in its own module: `read_job_status`, `read_service_status`) sends one
`http_get`, refuses any status but 200 (`refuse_status`), and parses the reply into a pydantic
model first (`parse_reply`), then maps it to the same result its database backend gives, so the
model and the packet see the same thing whichever backend read it.

Errors: no answer in time, a lost connection, 5xx and 429 are transient (the loop retries them as
`max_read_retries` allows); 401/403 are a configuration error; a reply that does not fit its schema
is refused. A credential never reaches a log or a stored error.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, TypeVar

import httpx2
from pydantic import BaseModel, ConfigDict, ValidationError

from tools.lookups import ToolError

log = logging.getLogger("agentrun")

MAX_REPLY_BYTES = 2 * 1024 * 1024
TIMEOUT_WITHOUT_DEADLINE = 30.0  # outside a run (a shell, a test calling a backend): no wait is unbounded


class Reply(BaseModel):
    """A reply's schema: the fields a backend reads; anything else the service sends is ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)


R = TypeVar("R", bound=Reply)


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


def http_get(url: str, headers: dict[str, str], timeout: float | None, *, what: str) -> tuple[int, bytes]:
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


def refuse_status(status: int, *, what: str, credential: str | None) -> None:
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


def parse_reply(schema: type[R], body: bytes, *, what: str) -> R:
    """The reply as `schema`, or a non-transient failure naming what did not fit (never the values)."""
    try:
        return schema.model_validate_json(body)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or 'the reply'}: {error['msg']}" for error in exc.errors()[:5]
        )
        raise ToolError(f"{what} sent a reply that does not fit its schema ({problems})"[:500]) from None
