"""/healthz, /readyz and /metrics: no login, nothing sensitive, the database and the broker checked, metrics
served to the allowed addresses or the bearer token only."""

from __future__ import annotations

import ipaddress
import json

from django.db import connection
from django.test import Client, override_settings

from tests.support.metrics import free_port

BROKER = "redis://127.0.0.1:6379/0"
TOKEN = "metrics-token-0123456789abcdef"


def get(path: str, **extra):
    return Client().get(path, **extra)


def test_healthz_answers_without_the_database_or_an_allowed_host():
    response = get("/healthz", HTTP_HOST="10.1.2.3:8000")  # a probe reaches the process by its address
    assert (response.status_code, response.json()) == (200, {"status": "ok"})
    assert response["Cache-Control"] == "no-store"


@override_settings(CELERY_BROKER_URL=BROKER, SECURE_SSL_REDIRECT=True)
def test_readyz_is_200_when_the_database_and_the_broker_answer(db):
    response = get("/readyz", HTTP_HOST="10.1.2.3:8000")  # over plain HTTP: not redirected
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "checks": {"database": "ok", "broker": "ok"}}


@override_settings(CELERY_BROKER_URL=BROKER)
def test_readyz_is_503_while_postgresql_is_unreachable_and_200_again_after(db, monkeypatch):
    assert connection.vendor == "postgresql", "runs on PostgreSQL: set DATABASE_URL (bin/test does)"
    port = free_port()
    with monkeypatch.context() as patched:
        patched.setitem(connection.settings_dict, "PORT", str(port))
        down = get("/readyz")
    assert down.status_code == 503
    assert down.json() == {"status": "unavailable", "checks": {"database": "unavailable", "broker": "ok"}}
    assert str(port) not in down.content.decode()
    assert get("/readyz").status_code == 200


def test_readyz_is_503_while_redis_is_unreachable_and_names_nothing_secret(db):
    port = free_port()
    with override_settings(CELERY_BROKER_URL=f"redis://:s3cret-pass@127.0.0.1:{port}/0"):
        down = get("/readyz")
    body = down.content.decode()
    assert down.status_code == 503
    assert json.loads(body) == {"status": "unavailable", "checks": {"database": "ok", "broker": "unavailable"}}
    assert "s3cret" not in body and str(port) not in body
    with override_settings(CELERY_BROKER_URL=BROKER):
        assert get("/readyz").status_code == 200


def test_readyz_without_a_broker_checks_the_database_only(db):
    with override_settings(CELERY_BROKER_URL=""):
        assert get("/readyz").json() == {"status": "ok", "checks": {"database": "ok"}}


def test_the_operators_paths_answer_get_only():
    assert Client().post("/healthz").status_code == 405


def test_metrics_are_served_to_loopback_by_default(db):
    response = get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    assert b"supportagent_runs_queued" in response.content


def test_metrics_refuse_an_address_not_allowed(db):
    response = get("/metrics", REMOTE_ADDR="203.0.113.9")
    assert response.status_code == 403
    assert b"supportagent_" not in response.content


@override_settings(AGENT_METRICS_TOKEN=TOKEN)
def test_metrics_with_the_token_from_anywhere_and_not_with_another(db):
    far = {"REMOTE_ADDR": "203.0.113.9"}
    assert get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}", **far).status_code == 200
    assert get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN[:-1]}x", **far).status_code == 403
    assert get("/metrics", HTTP_AUTHORIZATION=f"Basic {TOKEN}", **far).status_code == 403


def test_metrics_allowed_networks_come_from_the_setting(db):
    with override_settings(AGENT_METRICS_ALLOWED=(ipaddress.ip_network("10.0.0.0/8"),)):
        assert get("/metrics", REMOTE_ADDR="10.20.30.40").status_code == 200
        assert get("/metrics", REMOTE_ADDR="::ffff:10.20.30.40").status_code == 200
        assert get("/metrics").status_code == 403  # loopback is no longer listed
