"""How PostgreSQL plans a statement run again and again on one connection (DATABASE_PLAN_CACHE_MODE, DATABASE_JIT):
the web process plans each for its values (the pending packets are a few among a year's) and compiles none, a
worker lets PostgreSQL keep one plan for its steps' statements."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from supportagent.settings import database_config

ROOT = Path(__file__).resolve().parents[2]

# Runs the review queue's first statement 20 times on one connection, the way the process named by `entry` is
# set up, and prints the plan cache mode and the plans PostgreSQL made for the connection's prepared statements.
PLANS = """
import importlib, json, sys
importlib.import_module(sys.argv[1])
import django
django.setup()
from django.db import connection
from engine.models import ReviewPacket
queue = ReviewPacket.objects.filter(review_state="pending").order_by("-created_at", "-id")
for _ in range(20):
    list(queue.values_list("pk", flat=True)[:1])
with connection.cursor() as cursor:
    cursor.execute("SELECT current_setting('plan_cache_mode'), current_setting('jit'), "
                   "coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0) FROM pg_prepared_statements")
    mode, jit, generic, custom = cursor.fetchone()
print(json.dumps({"mode": mode, "jit": jit, "generic": int(generic), "custom": int(custom)}))
"""


def _plans(entry: str) -> dict:
    settings = connection.settings_dict
    url = f"postgres://{settings['USER']}@{settings['HOST']}:{settings['PORT']}/{settings['NAME']}"
    kept = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_", "CELERY_"))}
    done = subprocess.run(
        [sys.executable, "-c", PLANS, entry],
        cwd=ROOT,
        env={**kept, "DJANGO_SETTINGS_MODULE": "supportagent.settings", "DATABASE_URL": url},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


postgresql = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's plan cache")


@postgresql
def test_the_web_process_plans_a_statement_run_again_and_again_for_its_values(transactional_db):
    plans = _plans("supportagent.wsgi")
    assert plans["mode"] == "force_custom_plan" and plans["jit"] == "off"
    assert plans["custom"] >= 15 and plans["generic"] == 0


@postgresql
def test_a_worker_lets_postgresql_keep_one_plan_for_a_statement_it_has_run_five_times(transactional_db):
    plans = _plans("supportagent.celery")  # the workers' app
    assert plans["mode"] == "auto" and plans["jit"] == "on"
    assert plans["generic"] > 0


@pytest.mark.parametrize(
    "given, sent",
    [
        ({}, "-c plan_cache_mode=auto -c jit=on"),
        ({"DATABASE_PLAN_CACHE_MODE": "force_custom_plan"}, "-c plan_cache_mode=force_custom_plan -c jit=on"),
        ({"DATABASE_PLAN_CACHE_MODE": "AUTO"}, "-c plan_cache_mode=auto -c jit=on"),
        ({"DATABASE_JIT": "false"}, "-c plan_cache_mode=auto -c jit=off"),
        ({"DATABASE_JIT": "true"}, "-c plan_cache_mode=auto -c jit=on"),
    ],
)
def test_the_plan_cache_mode_and_jit_are_read_from_the_environment(monkeypatch, given, sent):
    monkeypatch.setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/any")
    for name in ("DATABASE_PLAN_CACHE_MODE", "DATABASE_JIT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in given.items():
        monkeypatch.setenv(name, value)
    assert database_config()["OPTIONS"]["options"] == sent


def test_a_jit_switch_that_is_not_one_is_refused_by_name(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/any")
    monkeypatch.setenv("DATABASE_JIT", "off -c work_mem=1TB")
    with pytest.raises(ImproperlyConfigured, match="DATABASE_JIT"):
        database_config()


def test_a_plan_cache_mode_postgresql_would_not_take_is_refused_by_name(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/any")
    monkeypatch.setenv("DATABASE_PLAN_CACHE_MODE", "force_custom_plan -c work_mem=1TB")
    with pytest.raises(ImproperlyConfigured, match="DATABASE_PLAN_CACHE_MODE must be one of auto, force_custom_plan"):
        database_config()
