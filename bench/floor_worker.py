"""The floor loop as a Celery task, for the benchmark's concurrency figure.

    celery -A floor_worker worker ...      # from bench/, with the project on PYTHONPATH

Configured from the same Django settings as the real workers (late
acknowledgement, prefetch of one, no results), so that the floor and the loop
differ only in the loop. Each worker thread keeps one plain psycopg connection.
"""

from __future__ import annotations

import os
import threading

import psycopg
from celery import Celery

from floor import floor_drive

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "supportagent.settings")

app = Celery("floor", set_as_current=False)
app.config_from_object("django.conf:settings", namespace="CELERY")
_local = threading.local()


def _connection() -> psycopg.Connection:
    conn = getattr(_local, "conn", None)
    if conn is None or conn.closed:
        conn = _local.conn = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True)
    return conn


@app.task(name="bench.floor_drive", ignore_result=True)
def floor_task(run_id: int, latency: float) -> None:
    floor_drive(_connection(), run_id, latency)
