"""supportagent.rows: statements built once must read and write exactly what the ORM would."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.db.transaction import TransactionManagementError
from django.utils import timezone

from supportagent.rows import (
    column,
    field,
    row_find,
    row_get,
    row_insert,
    row_insert_later,
    row_update,
    row_update_later,
    rows_select,
    table,
    writes_together,
)
from agentrun.models import BudgetDefaults
from agentrun.statuses import Status
from tickets.models import Evidence, Job, Ticket


@pytest.fixture
def ticket(demo) -> Ticket:
    return Ticket.objects.get(ref="T-1001")


def _evidence(ticket: Ticket, **overrides) -> Evidence:
    values = dict(
        ticket=ticket, number=90, tool="search_docs", args={"query": "é\u2028x", "max_results": 3},
        content='{"results": []}', content_hash="h" * 64, source_ref="", truncated=True,
        captured_at=timezone.now().replace(microsecond=123456),
    )
    return Evidence(**(values | overrides))


def test_an_inserted_row_reads_back_as_the_orm_reads_it(ticket):
    evidence = _evidence(ticket)
    row_insert(evidence)
    assert evidence.pk is not None and not evidence._state.adding
    by_orm = Evidence.objects.get(pk=evidence.pk)
    by_rows = row_get(Evidence, evidence.pk)
    for f in Evidence._meta.concrete_fields:
        assert getattr(by_rows, f.attname) == getattr(by_orm, f.attname) == getattr(evidence, f.attname), f.name
    assert by_rows.args == {"query": "é\u2028x", "max_results": 3}
    assert by_rows.truncated is True
    assert by_rows.captured_at.tzinfo is not None


def test_an_update_writes_only_the_named_fields(ticket):
    evidence = _evidence(ticket)
    row_insert(evidence)
    evidence.tool, evidence.args, evidence.source_ref = "read_job_status", {"job_id": "J-1"}, "changed in memory only"
    assert row_update(evidence, ["tool", "args"]) == 1
    stored = Evidence.objects.get(pk=evidence.pk)
    assert (stored.tool, stored.args, stored.source_ref) == ("read_job_status", {"job_id": "J-1"}, "")


def test_values_of_other_types_are_converted_by_their_fields(ticket):
    """Only exact plain values skip the fields' conversions; the rest are converted as the ORM converts them."""
    evidence = _evidence(ticket, number="91", truncated=1, tool=Status.RUNNING)
    row_insert(evidence)
    stored = Evidence.objects.get(pk=evidence.pk)
    assert (stored.number, stored.truncated, stored.tool) == (91, True, Status.RUNNING.value)


def test_a_field_that_sets_itself_on_save_is_set(db):
    defaults = BudgetDefaults(pk=1, updated_by="a", updated_at=timezone.now() - timedelta(days=3))
    row_insert(defaults)
    defaults.updated_by = "b"
    before = timezone.now()
    row_update(defaults, ["updated_by", "updated_at"])
    stored = BudgetDefaults.objects.get(pk=1)
    assert stored.updated_by == "b" and stored.updated_at >= before


def test_an_update_of_a_missing_row_changes_nothing(ticket):
    ghost = _evidence(ticket, pk=10**9)
    assert row_update(ghost, ["tool"]) == 0


def test_find_matches_every_condition_and_says_none_when_nothing_does(ticket):
    job = Job.objects.get(ref="J-42")
    assert row_find(Job, ref="J-42", account=job.account_id).pk == job.pk
    assert row_find(Job, ref="J-42", account=job.account_id + 1000) is None
    assert row_get(Job, 10**9) is None


def test_a_null_foreign_key_and_datetime_read_back_as_none(ticket):
    job = Job.objects.get(ref="J-42")
    Job.objects.filter(pk=job.pk).update(requested_by=None, finished_at=None)
    found = row_get(Job, job.pk)
    assert found.requested_by_id is None and found.finished_at is None
    assert found.created_at == job.created_at


def test_a_row_lock_needs_a_transaction(demo_committed):
    ticket = Ticket.objects.get(ref="T-1001")
    with pytest.raises(TransactionManagementError):
        row_find(Ticket, lock=True, pk=ticket.pk)
    with transaction.atomic():
        assert row_find(Ticket, lock=True, pk=ticket.pk).ref == "T-1001"


def test_a_hand_written_select_is_converted_per_field(ticket):
    evidence = _evidence(ticket, captured_at=timezone.now() - timedelta(days=1))
    row_insert(evidence)
    sql = f"SELECT {column(Evidence, 'args')}, {column(Evidence, 'truncated')} FROM {table(Evidence)} WHERE id = %s"
    assert rows_select([field(Evidence, "args"), field(Evidence, "truncated")], sql, [evidence.pk]) == [
        [{"query": "é\u2028x", "max_results": 3}, True]
    ]


# --- writes sent together ---------------------------------------------------------------


class _Statements:
    def __init__(self):
        self.sql: list[str] = []

    def __call__(self, execute, sql, params, many, context):
        self.sql.append(sql)
        return execute(sql, params, many, context)


def test_held_writes_are_sent_together(ticket):
    first, second = _evidence(ticket, number=91, content_hash="a" * 64), _evidence(ticket, number=92)
    row_insert(first)
    statements = _Statements()
    with connection.execute_wrapper(statements):
        with writes_together():
            first.tool = "read_service_status"
            row_update_later(first, ["tool"])
            row_insert_later(second)
            ticket.evidence_count = 92
            row_update_later(ticket, ["evidence_count"])
            assert statements.sql == []  # nothing sent yet
        # On PostgreSQL one statement, handed to the connection, which sends it with the next
        # statement (or COMMIT); elsewhere one each, sent as the block ends.
        Ticket.objects.filter(pk=ticket.pk).exists()
    expected = 1 if connection.vendor == "postgresql" else 3
    assert len(statements.sql) == expected + 1
    assert Evidence.objects.get(pk=first.pk).tool == "read_service_status"
    assert Evidence.objects.filter(ticket=ticket, number=92).exists()
    assert Ticket.objects.get(pk=ticket.pk).evidence_count == 92


def test_any_other_statement_sends_held_writes_first(ticket):
    evidence = _evidence(ticket)
    with writes_together():
        row_insert_later(evidence)
        assert Evidence.objects.filter(ticket=ticket, number=90).count() == 1  # the read saw the write


def test_an_update_can_name_its_row_by_other_fields(ticket):
    evidence = _evidence(ticket)
    row_insert(evidence)
    by_number = Evidence(ticket=ticket, number=90, source_ref="found by ticket and number")
    row_update_later(by_number, ["source_ref"], by=("ticket", "number"))  # outside a block: sent at once
    assert Evidence.objects.get(pk=evidence.pk).source_ref == "found by ticket and number"


def test_held_writes_need_a_transaction(demo_committed):
    with pytest.raises(TransactionManagementError):
        with writes_together():
            pass
