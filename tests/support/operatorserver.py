"""The operator's own services for tests: a threaded HTTP server on 127.0.0.1 serving jobs and a Statuspage summary.

GET /jobs/<id> answers from `jobs` (a dict of reply bodies by job id), scoped by the
`X-Account` header as the operator's API would be (another account's job is a 404)
unless `scope_by_account` is off; GET /api/v2/summary.json answers `summary`. Both
dicts can be changed per test. `answers` are taken first, one per request (a
status, a body, a delay, a reply sent a few bytes at a time). Every request is
kept in `received`. Closing the server cuts any delay short.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from tests.support.localserver import local_server, local_url
from tickets.models import Incident, Job, Service

SUMMARY_PATH = "/api/v2/summary.json"
# An operator's own status page, in Statuspage's shape. Its components "API" and "Management Portal" and its
# incident "Unplanned Database Outage", which lists no `components` (the whole page's), are Statuspage's
# documented `/api/v2/summary.json` example (the API page every Statuspage page serves, e.g.
# metastatuspage.com/api); "Git Operations" and "API Requests" are githubstatus.com's component names and
# fields; "API Endpoints" is a component group (`group: true`, its members' ids in `components`) whose members
# "API (US)" and "API (EU)" carry its `group_id`, as Statuspage gives groups. Times moved to the demo's year.
STATUSPAGE_FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "statuspage_summary.json"


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: Any = None  # None: what the data says
    delay_seconds: float = 0.0
    trickle_seconds: float = 0.0  # the body sent a byte at a time, this long between bytes


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]


@dataclass
class OperatorServer:
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=lambda: {"components": [], "incidents": []})
    answers: list[Answer] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    scope_by_account: bool = True

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server = local_server(self._handler())

    @property
    def base(self) -> str:
        return local_url(self._server)

    @property
    def job_url(self) -> str:
        return f"{self.base}/jobs/{{job_id}}"

    @property
    def summary_url(self) -> str:
        return self.base + SUMMARY_PATH

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()

    def _answer(self, path: str, headers: dict[str, str]) -> Answer:
        with self._lock:
            self.received.append(Received(path, headers))
            scripted = self.answers.pop(0) if self.answers else Answer()
        if scripted.body is not None or scripted.status != 200:
            return scripted
        body, status = self._from_data(path, headers)
        return Answer(status, body, scripted.delay_seconds, scripted.trickle_seconds)

    def _from_data(self, path: str, headers: dict[str, str]) -> tuple[Any, int]:
        if path == SUMMARY_PATH:
            return self.summary, 200
        job = self.jobs.get(unquote(path.removeprefix("/jobs/"))) if path.startswith("/jobs/") else None
        if job is None or (self.scope_by_account and job["account"] != headers.get("x-account")):
            return {"error": "not found"}, 404
        return job, 200

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                answer = server._answer(self.path, {k.lower(): v for k, v in self.headers.items()})
                if answer.delay_seconds and server._closing.wait(answer.delay_seconds):
                    return
                data = answer.body if isinstance(answer.body, bytes) else json.dumps(answer.body).encode()
                self.send_response(answer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self._write(data, answer.trickle_seconds)

            def _write(self, data: bytes, trickle: float) -> None:
                try:
                    if not trickle:
                        self.wfile.write(data)
                        return
                    for byte in data:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        if server._closing.wait(trickle):
                            return
                except (BrokenPipeError, ConnectionResetError):  # the client gave up: nothing to send it
                    return

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


# --- the demo data set, as the operator's services would serve it ----------------------------


def _iso(value) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def job_reply(job: Job) -> dict[str, Any]:
    requester = job.requested_by
    return {
        "job_id": job.ref,
        "account": job.account.code,
        "kind": job.kind,
        "status": job.status,
        "error_code": job.error_code or None,
        "requested_by": requester.email if requester else None,
        "requester_current_role": requester.role if requester else None,
        "created_at": _iso(job.created_at),
        "finished_at": _iso(job.finished_at),
        "sensitive": job.sensitive,
    }


STATUSPAGE_STATUS = {"degraded": "degraded_performance"}


def statuspage_summary() -> dict[str, Any]:
    """Our services and incidents in a Statuspage summary's shape (every incident listed, resolved ones too)."""
    components = [
        {
            "id": f"cmp-{s.name}",
            "name": s.name.capitalize(),
            "status": STATUSPAGE_STATUS.get(s.status, s.status),
            "created_at": "2026-01-01T00:00:00Z",
            "position": n,
            "group": False,
            "only_show_if_degraded": False,
        }
        for n, s in enumerate(Service.objects.order_by("name"), start=1)
    ]
    incidents = [
        {
            "id": i.ref,
            "name": i.title,
            "status": i.status,
            "impact": "minor",
            "created_at": _iso(i.started_at),
            "started_at": _iso(i.started_at),
            "resolved_at": _iso(i.resolved_at),
            "shortlink": "https://stspg.io/x",
            "incident_updates": [],
            "components": [{"id": f"cmp-{i.service.name}", "name": i.service.name.capitalize()}],
        }
        for i in Incident.objects.select_related("service")
    ]
    return {
        "page": {"id": "demo", "name": "Demo", "url": "https://status.example"},
        "status": {"indicator": "minor", "description": "Minor Service Outage"},
        "components": components,
        "incidents": incidents,
        "scheduled_maintenances": [],
    }


def operator_page() -> dict[str, Any]:
    """tests/fixtures/statuspage_summary.json, a fresh copy (a test may change it)."""
    return json.loads(STATUSPAGE_FIXTURE.read_text())


def demo_jobs() -> dict[str, dict[str, Any]]:
    return {job.ref: job_reply(job) for job in Job.objects.select_related("account", "requested_by")}
