"""Zendesk's Tickets API for tests: a threaded HTTP server on 127.0.0.1 that takes ticket updates as Zendesk does.

`PUT /api/v2/tickets/{id}.json` with `{"ticket": {"comment": {"body": ..., "public": ...}}}` adds the
comment to the ticket and answers 200 with `ticket` and `audit` (its `Comment` event), as Update
Ticket does. Like Zendesk: a request without the API token's basic authentication
(`{email}/token:{token}`) is a 401 `{"error": "Couldn't authenticate you"}`; a ticket it does not
have is a 404 `RecordNotFound`; a closed ticket is a 422 `RecordInvalid` with "Status: closed
prevents ticket update"; a body that is not JSON, or names no comment, is a 400. `answers` are taken
first, one per request (a status, a body, headers such as Retry-After). Every request is kept in
`received`, with its time.

`zendesk_configure` points the settings at a server (the lead's browser tests give it their
live_server's URL for the packet links); the `zendesk` fixture (tests/conftest.py) does both.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.localserver import local_server, local_url

EMAIL = "agent@acme.example"
TOKEN = "zd-api-token-5f2c9a0b7e1d4c3a"
SITE = "https://support.example.com"
UPDATE = re.compile(r"^/api/v2/tickets/(?P<id>[0-9]+)\.json$")
CLOSED = {
    "error": "RecordInvalid",
    "description": "Record validation errors",
    "details": {"status": [{"description": "Status: closed prevents ticket update"}]},
}


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: Any = None  # bytes as they are, anything else as JSON
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: bytes
    at: float  # time.monotonic()

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class ZendeskServer:
    """`tickets` maps a ticket id to its status ("open", "pending", "solved", "closed"); `comments` keeps
    each ticket's comments as added, `{"body": ..., "public": ...}`."""

    tickets: dict[int, str] = field(default_factory=dict)
    credentials: tuple[str, str] = (EMAIL, TOKEN)
    answers: list[Answer] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server = local_server(self._handler())

    @property
    def base(self) -> str:
        return local_url(self._server)

    def notes(self, ticket_id: int) -> list[str]:
        """The bodies of the private comments on the ticket, in the order they were added."""
        with self._lock:
            return [c["body"] for c in self.comments.get(ticket_id, []) if c.get("public") is False]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _answer(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
        with self._lock:
            self.received.append(Received(method, path, headers, body, time.monotonic()))
            if self.answers:
                return self.answers.pop(0)
            return self._update(method, path, headers, body)

    def _update(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
        if headers.get("authorization") != basic(f"{self.credentials[0]}/token", self.credentials[1]):
            return Answer(401, {"error": "Couldn't authenticate you"})
        match = UPDATE.match(path)
        if match is None or method != "PUT":
            return Answer(404, {"error": "InvalidEndpoint", "description": "Not found"})
        ticket_id = int(match.group("id"))
        if ticket_id not in self.tickets:
            return Answer(404, {"error": "RecordNotFound", "description": "Not found"})
        comment = _comment(body)
        if comment is None:
            return Answer(400, {"error": "InvalidValue", "description": "Parameter ticket is required"})
        if self.tickets[ticket_id] == "closed":
            return Answer(422, CLOSED)
        self.comments.setdefault(ticket_id, []).append(comment)
        return Answer(200, self._updated(ticket_id, comment))

    def _updated(self, ticket_id: int, comment: dict[str, Any]) -> dict[str, Any]:
        number = sum(len(c) for c in self.comments.values())
        event = {"id": 9000 + number, "type": "Comment", "body": comment["body"], "public": comment["public"]}
        return {
            "ticket": {
                "id": ticket_id,
                "status": self.tickets[ticket_id],
                "url": f"{self.base}/api/v2/tickets/{ticket_id}.json",
            },
            "audit": {"id": 8000 + number, "ticket_id": ticket_id, "events": [event]},
        }

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                answer = server._answer(self.command, self.path, headers, body)
                data = answer.body if isinstance(answer.body, bytes) else json.dumps(answer.body).encode()
                self.send_response(answer.status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            do_PUT = do_POST = do_GET = _serve

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


def _comment(body: bytes) -> dict[str, Any] | None:
    """The comment an Update Ticket body adds (public unless it says false, as Zendesk takes it), or None."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    comment = data.get("ticket", {}).get("comment") if isinstance(data, dict) else None
    if not isinstance(comment, dict) or not isinstance(comment.get("body") or comment.get("html_body"), str):
        return None
    return {"body": comment.get("body") or comment["html_body"], "public": comment.get("public", True)}


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def zendesk_configure(settings, server: ZendeskServer, *, site_url: str = SITE, **switches: bool) -> None:
    """Point Zendesk's settings at `server`, with both notes on (or as `switches` say: `written=False`,
    `review=False`), packet links under `site_url`, and a short backoff; the packet webhook stays as it was."""
    settings.ZENDESK_URL, (settings.ZENDESK_EMAIL, settings.ZENDESK_API_TOKEN) = server.base, server.credentials
    settings.AGENT_SITE_URL = site_url
    settings.AGENT_ZENDESK_NOTE_ON_WRITTEN = switches.get("written", True)
    settings.AGENT_ZENDESK_NOTE_ON_REVIEW = switches.get("review", True)
    settings.AGENT_PACKET_WEBHOOK_BACKOFF_SECONDS = 0.05
    settings.AGENT_PACKET_WEBHOOK_TIMEOUT = 5.0
