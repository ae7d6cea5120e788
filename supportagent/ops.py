"""The operators' endpoints: /healthz, /readyz and /metrics (docs/production/monitoring.md).

Served by OpsMiddleware, first in the chain, before anything reads the Host
header or redirects to HTTPS: load balancers and Prometheus reach a process by
its own address, over plain HTTP. No login; nothing sensitive in a body (a
failed check is named, never its error, which may hold a host or a user).
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
from collections.abc import Callable

import psycopg
import redis
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.http import HttpRequest, HttpResponse, JsonResponse
from prometheus_client import CONTENT_TYPE_LATEST

from engine.metrics import exposition
from engine.waiting import Finished, Raised, call_with_timeout

log = logging.getLogger("supportagent")
CHECK_SECONDS = 1.0


# --- readiness --------------------------------------------------------------------


def database_answers() -> None:
    """SELECT 1 on a connection of its own (not the pool's: a check must not wait behind runs)."""
    wrapper = connections[DEFAULT_DB_ALIAS]
    if wrapper.vendor != "postgresql":
        with wrapper.cursor() as cursor:
            cursor.execute("SELECT 1")
        return
    with psycopg.connect(**wrapper.get_connection_params(), connect_timeout=2, autocommit=True) as conn:
        conn.execute("SELECT 1")


def broker_answers() -> None:
    client = redis.Redis.from_url(
        settings.CELERY_BROKER_URL, socket_connect_timeout=CHECK_SECONDS, socket_timeout=CHECK_SECONDS
    )
    try:
        client.ping()
    finally:
        client.close()


def readiness() -> dict[str, str]:
    """Each dependency's answer: "ok", "unavailable" or "timeout" (no answer within CHECK_SECONDS)."""
    checks: dict[str, Callable[[], None]] = {"database": database_answers}
    if settings.CELERY_BROKER_URL:
        checks["broker"] = broker_answers
    return {name: _check(name, check) for name, check in checks.items()}


def _check(name: str, check: Callable[[], None]) -> str:
    result = call_with_timeout(check, CHECK_SECONDS)
    if isinstance(result, Finished):
        return "ok"
    if isinstance(result, Raised):
        log.warning("readiness: the %s did not answer (%s)", name, type(result.error).__name__)
        return "unavailable"
    log.warning("readiness: the %s did not answer within %s s", name, CHECK_SECONDS)
    return "timeout"


# --- metrics access ------------------------------------------------------------------


def metrics_allowed(request: HttpRequest) -> bool:
    """From an address in AGENT_METRICS_ALLOWED, or with AGENT_METRICS_TOKEN as a bearer token."""
    token = settings.AGENT_METRICS_TOKEN
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    if token and scheme.lower() == "bearer" and hmac.compare_digest(presented.strip().encode(), token.encode()):
        return True
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    address = getattr(address, "ipv4_mapped", None) or address
    return any(address in network for network in settings.AGENT_METRICS_ALLOWED)


# --- views ------------------------------------------------------------------------------


def healthz(request: HttpRequest) -> HttpResponse:
    """The process answers (nothing else is asked)."""
    return JsonResponse({"status": "ok"})


def readyz(request: HttpRequest) -> HttpResponse:
    checks = readiness()
    ready = all(answer == "ok" for answer in checks.values())
    return JsonResponse({"status": "ok" if ready else "unavailable", "checks": checks}, status=200 if ready else 503)


def metrics(request: HttpRequest) -> HttpResponse:
    if not metrics_allowed(request):
        return JsonResponse(
            {
                "code": "forbidden",
                "message": "Metrics are served to the allowed addresses, or with the metrics bearer token.",
            },
            status=403,
        )
    return HttpResponse(exposition(queue=True), content_type=CONTENT_TYPE_LATEST)


VIEWS = {"/healthz": healthz, "/readyz": readyz, "/metrics": metrics}


class OpsMiddleware:
    """Answers the operators' paths before the rest of the chain (host check, HTTPS redirect, sessions)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        view = VIEWS.get(request.path_info)
        if view is None:
            return self.get_response(request)
        if request.method not in ("GET", "HEAD"):
            return JsonResponse({"code": "method_not_allowed", "message": "Only GET."}, status=405)
        response = view(request)
        response["Cache-Control"] = "no-store"
        return response
