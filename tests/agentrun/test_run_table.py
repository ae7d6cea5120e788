"""The run table on PostgreSQL: each page keeps room for the updates every step makes.

A step rewrites its run's row; with room left on the page and no indexed column
changed, PostgreSQL keeps the new version there and writes none of the run's
indexes (a heap-only update). Counted by the server for this transaction.
"""

from __future__ import annotations

import pytest
from django.db import connection

from engine.budgets import Budget
from engine.models import Run
from engine.services import run_start
from tickets.models import Ticket

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="a PostgreSQL storage setting")


def _updates_so_far() -> tuple[int, int]:
    """Rows of the run table this transaction updated, and how many of those updates stayed on their page."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relname = %s", [Run._meta.db_table]
        )
        return cursor.fetchone()


def test_the_steps_of_many_runs_update_their_rows_in_place(demo):
    first = run_start(ticket=Ticket.objects.get(ref="T-1001"), budget=Budget())
    runs = Run.objects.bulk_create(
        [
            Run(**{f.attname: getattr(first, f.attname) for f in Run._meta.concrete_fields if not f.primary_key})
            for _ in range(150)
        ]
    )
    updated, in_place = _updates_so_far()
    for run in Run.objects.filter(pk__in=[run.pk for run in runs]):  # a step: counters and the lease, not the status
        run.model_requests += 1
        run.version += 1
        run.lease_owner = "worker-a"
        run.save(update_fields=run.fields_changed())
    updated_now, in_place_now = _updates_so_far()
    assert updated_now - updated == len(runs)
    assert in_place_now - in_place >= 0.9 * len(runs)


def test_the_table_leaves_half_of_each_page_to_updates(db):
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = %s", [Run._meta.db_table])
        assert cursor.fetchone()[0] == ["fillfactor=50"]
