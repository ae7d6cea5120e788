"""A help desk's webhook endpoint on 127.0.0.1, the settings that point packet events at it, and replay runs
whose packets it hears of. The `receivers` and `hook` fixtures (tests/agentrun/conftest.py) start them."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from django.db import connection

from engine.budgets import Budget
from engine.loop import run_advance
from engine.models import ReviewPacket, Run
from engine.services import run_start

SECRET = "whsec-test-0123456789abcdef"
SITE = "https://support.example.com"
J42 = {"call": {"tool": "read_job_status", "args": {"job_id": "J-42"}}}
DRAFT = {"draft": {"summary": "The export needs the admin role.", "evidence": ["E1"], "open_questions": []}}


@dataclass(frozen=True)
class Received:
    headers: dict[str, str]
    body: bytes
    packet_committed: bool  # the packet was visible to another connection when the event arrived


class Receiver:
    """A help desk's endpoint on 127.0.0.1: each POST gets the next status (the last one repeats),
    after `delay` seconds; it keeps what it received."""

    def __init__(self, statuses=(200,), delay: float = 0.0):
        self.statuses, self.delay = list(statuses), delay
        self.received: list[Received] = []
        self.answered = 0
        self._lock, self._closing = threading.Lock(), threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/hooks/supportagent"

    def events(self) -> list[dict]:
        return [json.loads(r.body) for r in self.received]

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()

    def _handler(self):
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                run_id = json.loads(body)["run"]["id"]
                try:
                    committed = ReviewPacket.objects.filter(run_id=run_id).exists()
                finally:
                    connection.close()
                with receiver._lock:
                    receiver.received.append(Received(dict(self.headers), body, committed))
                    status = receiver.statuses[min(len(receiver.received), len(receiver.statuses)) - 1]
                receiver._closing.wait(receiver.delay)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()
                with receiver._lock:
                    receiver.answered += 1

            def log_message(self, *args):
                pass

        return Handler


def configure(settings, url: str, **extra) -> None:
    settings.AGENT_PACKET_WEBHOOK_URL, settings.AGENT_PACKET_WEBHOOK_SECRET = url, SECRET
    settings.AGENT_SITE_URL = SITE
    settings.AGENT_PACKET_WEBHOOK_BACKOFF_SECONDS = 0.05
    settings.AGENT_PACKET_WEBHOOK_TIMEOUT = 5.0
    for name, value in extra.items():
        setattr(settings, f"AGENT_PACKET_WEBHOOK_{name.upper()}", value)


def investigate(ticket, script=(J42, DRAFT)) -> Run:
    run = run_start(ticket=ticket, model_name="replay", budget=Budget(), model_script={"model": list(script)})
    return run_advance(run.pk)
