"""The floor the benchmark measures the loop against: a plain psycopg loop, no framework.

A floor run commits one reservation (a counter and an operation row) before
each of the 5 operations of J-42 and does nothing else: no decisions, no
context, no evidence. `floor_worker` runs the same loop as a Celery task.
"""

from __future__ import annotations

import time

import psycopg

SCHEMA = """
CREATE TABLE IF NOT EXISTS bench_floor_run (id bigserial PRIMARY KEY, model_requests int NOT NULL DEFAULT 0,
    tool_attempts int NOT NULL DEFAULT 0, status text NOT NULL DEFAULT 'RUNNING');
CREATE TABLE IF NOT EXISTS bench_floor_op (id bigserial PRIMARY KEY, run_id bigint NOT NULL, kind text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now());
"""
OPERATIONS = ("model", "dispatch", "model", "dispatch", "model")


def floor_start(conn: psycopg.Connection) -> int:
    """A new floor run, committed; its id."""
    with conn.transaction():
        return conn.execute("INSERT INTO bench_floor_run DEFAULT VALUES RETURNING id").fetchone()[0]


def floor_reserve(conn: psycopg.Connection, run_id: int, kind: str) -> None:
    counter = "model_requests" if kind == "model" else "tool_attempts"
    with conn.transaction():
        conn.execute(f"UPDATE bench_floor_run SET {counter} = {counter} + 1 WHERE id = %s", (run_id,))
        conn.execute("INSERT INTO bench_floor_op (run_id, kind) VALUES (%s, %s)", (run_id, kind))


def floor_run(conn: psycopg.Connection) -> None:
    """One floor run, start to end, with operations that take no time (6 commits)."""
    _operations(conn, floor_start(conn), 0.0)


def floor_drive(conn: psycopg.Connection, run_id: int, latency: float) -> None:
    """Drive a started floor run: its 5 operations of `latency` seconds, then the run is marked done,
    as the loop commits the last result (6 commits)."""
    _operations(conn, run_id, latency)
    with conn.transaction():
        conn.execute("UPDATE bench_floor_run SET status = 'DONE' WHERE id = %s", (run_id,))


def _operations(conn: psycopg.Connection, run_id: int, latency: float) -> None:
    """A committed reservation before each operation, then the operation (`latency` seconds)."""
    for kind in OPERATIONS:
        floor_reserve(conn, run_id, kind)
        if latency:
            time.sleep(latency)
