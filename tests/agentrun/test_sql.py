"""engine.sql: the named statements read what the ORM reads, and a step's writes go together."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.transaction import TransactionManagementError
from django.utils import timezone

from engine.budgets import Budget
from engine.models import ModelRequest, Observation, Run, ToolAttempt
from engine.services import run_start
from engine.sql import StepWrites, context_rows, run_locked, run_relocked
from tickets.models import Evidence, Ticket


@pytest.fixture
def run(demo) -> Run:
    return run_start(ticket=Ticket.objects.get(ref="T-1001"), budget=Budget())


def _attempt(run: Run, seq: int, tool: str, **values) -> ToolAttempt:
    return ToolAttempt.objects.create(
        run=run, seq=seq, tool=tool, args={"q": "é\u2028x"}, call_key=f"k{seq}", started_at=timezone.now(), **values
    )


def test_the_locked_run_reads_as_the_orm_reads_it_with_its_session_ticket_and_tally(run):
    ModelRequest.objects.create(run=run, seq=1, reserved_tokens=1, reserved_cost_micros=1, started_at=timezone.now())
    _attempt(run, 1, "search_docs")
    _attempt(run, 2, "search_docs")
    _attempt(run, 3, "read_job_status")
    by_orm = Run.objects.select_related("session", "ticket").get(pk=run.pk)
    with transaction.atomic():
        locked = run_locked(run_id=run.pk, ticket=True)
    for f in Run._meta.concrete_fields:
        assert getattr(locked, f.attname) == getattr(by_orm, f.attname), f.name
    assert locked.session.ref == by_orm.session.ref and locked.ticket.ref == "T-1001"
    assert (locked.tally.requests, locked.tally.attempts) == (1, 3)
    assert (
        locked.tally.of("search_docs"),
        locked.tally.of("read_job_status"),
        locked.tally.of("read_service_status"),
    ) == (2, 1, 0)


def test_a_missing_run_is_said_so(db):
    with transaction.atomic(), pytest.raises(Run.DoesNotExist):
        run_locked(run_id=10**9)


def test_the_relocked_run_takes_up_what_others_changed(run):
    with transaction.atomic():
        held = run_locked(run_id=run.pk)
    Run.objects.filter(pk=run.pk).update(cancel_requested=True)
    with transaction.atomic():
        again = run_relocked(run=held)
    assert again is held and again.cancel_requested is True  # the same object, brought up to date
    Run.objects.filter(pk=run.pk).update(version=7)  # another writer moved the run on: read whole
    with transaction.atomic():
        whole = run_relocked(run=held)
    assert whole is not held and whole.version == 7


def test_the_context_rows_are_the_tickets_evidence_the_runs_attempts_and_its_last_notes(run):
    evidence = Evidence.objects.create(
        ticket=run.ticket,
        number=41,
        tool="search_docs",
        args={"query": "x"},
        content="{}",
        content_hash="h" * 64,
        truncated=True,
        captured_at=timezone.now(),
    )
    _attempt(run, 1, "search_docs", evidence=evidence, outcome="ok")
    _attempt(run, 2, "read_job_status", outcome="timeout")
    for n in range(7):
        Observation.objects.create(run=run, kind="validation_error", text=f"note {n}")
    Observation.objects.create(run=run, kind=Observation.Kind.DISCARDED, text="never shown")
    shown, attempts, notes = context_rows(ticket_id=run.ticket_id, run_id=run.pk, last_notes=5)
    assert (41, "search_docs", {"query": "x"}, "{}", "", True) in shown
    assert attempts == (
        ("search_docs", {"q": "é\u2028x"}, "ok", 41),
        ("read_job_status", {"q": "é\u2028x"}, "timeout", None),
    )
    assert notes == ("note 2", "note 3", "note 4", "note 5", "note 6")


class _Statements:
    def __init__(self):
        self.sql: list[str] = []

    def __call__(self, execute, sql, params, many, context):
        self.sql.append(sql)
        return execute(sql, params, many, context)


def test_a_steps_writes_go_together_and_write_what_the_orm_would(run):
    _attempt(run, 1, "search_docs")
    statements = _Statements()
    with transaction.atomic(), connection.execute_wrapper(statements):
        with StepWrites() as writes:
            writes.insert(
                ModelRequest(run_id=run.pk, seq=1, reserved_tokens=5, reserved_cost_micros=6, started_at=timezone.now())
            )
            writes.update(
                ToolAttempt, {"run_id": run.pk, "seq": 1}, outcome="ok", latency_ms=12, args={"q": "é\u2028y"}
            )
            run.model_requests, run.version = 1, run.version + 1
            writes.save(run, ["model_requests", "version"])
            assert statements.sql == []  # nothing sent before the step's end
    # The same three statements everywhere; PostgreSQL gets them as one.
    assert len(statements.sql) == (1 if connection.vendor == "postgresql" else 3)
    assert ModelRequest.objects.get(run=run, seq=1).reserved_tokens == 5
    assert ToolAttempt.objects.filter(run=run, seq=1, outcome="ok", latency_ms=12, args={"q": "é\u2028y"}).exists()
    assert Run.objects.filter(pk=run.pk, model_requests=1, version=run.version).exists()


def test_held_writes_are_not_seen_until_sent(run):
    with transaction.atomic(), StepWrites() as writes:
        writes.update(Run, {"pk": run.pk}, stop_note="seen")
        assert Run.objects.get(pk=run.pk).stop_note == ""
        writes.send()
        assert Run.objects.get(pk=run.pk).stop_note == "seen"
        assert writes.statements == []


def test_an_update_names_its_rows_by_plain_columns_and_lists(run):
    for seq, outcome in [(1, "pending"), (2, "ok"), (3, "timeout")]:
        _attempt(run, seq, "search_docs", outcome=outcome)
    with transaction.atomic(), StepWrites() as writes:
        writes.update(ToolAttempt, {"run_id": run.pk, "outcome": ["pending", "timeout"]}, outcome="interrupted")
    assert list(run.attempts.order_by("seq").values_list("outcome", flat=True)) == ["interrupted", "ok", "interrupted"]


def test_a_held_save_writes_only_the_named_fields(run):
    with transaction.atomic(), StepWrites() as writes:
        run.stop_note, run.evidence_refs, run.detail = "saved", ["E1", "E2"], "changed in memory only"
        writes.save(run, ["stop_note", "evidence_refs"])
    stored = Run.objects.get(pk=run.pk)
    assert (stored.stop_note, stored.evidence_refs, stored.detail) == ("saved", ["E1", "E2"], "")


def test_a_failing_held_write_fails_the_step(run):
    with pytest.raises(IntegrityError):
        with transaction.atomic(), StepWrites() as writes:
            writes.update(Run, {"pk": run.pk}, stop_note="never")
            writes.insert(
                ModelRequest(run_id=run.pk, seq=1, reserved_tokens=1, reserved_cost_micros=1, started_at=timezone.now())
            )
            writes.insert(
                ModelRequest(run_id=run.pk, seq=1, reserved_tokens=1, reserved_cost_micros=1, started_at=timezone.now())
            )  # the same (run, seq) twice
    assert Run.objects.get(pk=run.pk).stop_note == ""


def test_a_step_that_raises_sends_nothing(run):
    statements = _Statements()
    with pytest.raises(RuntimeError), transaction.atomic(), connection.execute_wrapper(statements):
        with StepWrites() as writes:
            writes.update(Run, {"pk": run.pk}, stop_note="never")
            raise RuntimeError("the step failed")
    assert statements.sql == []


def test_held_writes_need_a_transaction(demo_committed):
    with pytest.raises(TransactionManagementError):
        StepWrites()
