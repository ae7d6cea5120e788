"""A crash can never make a spent request or a dispatched attempt disappear; resuming never resets counters."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import IntegrityError, OperationalError, connection, transaction
from django.utils import timezone

from engine import loop
from engine.loop import run_advance
from engine.models import ModelRequest, Observation, ReviewPacket, Run
from engine.operations import DispatchOp, ModelOp, OpResult
from engine.packetview import packet_view
from engine.selectors import run_report
from engine.services import run_start
from engine.steps import run_begin, run_record
from engine.waiting import Finished
from providers import ModelResponse, TokenUsage
from tickets.models import Account

pytestmark = pytest.mark.usefixtures("settle")

J42 = {"call": {"tool": "read_job_status", "args": {"job_id": "J-42"}}}
DOCS = {"call": {"tool": "search_docs", "args": {"query": "export"}}}
DRAFT = {"draft": {"summary": "s", "evidence": ["E1"], "open_questions": []}}


def worker_dies(run_id: int) -> None:
    """The worker driving the run is gone: its lease runs out."""
    Run.objects.filter(pk=run_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def test_a_request_in_flight_at_a_crash_stays_counted_and_charged(ticket_t1001):
    run = run_start(
        ticket=ticket_t1001,
        model_name="replay",
        model_script={"model": [J42, J42, DRAFT]},
        resume_from={"model_requests": 1},
    )
    step = run_begin(run_id=run.pk, owner="worker-that-dies")
    assert isinstance(step.op, ModelOp)
    assert Run.objects.get(pk=run.pk).model_requests == 2  # committed before the request was made
    worker_dies(run.pk)
    run = run_advance(run.pk)
    report = run_report(run_id=run.pk)
    assert report["status"] == "COMPLETED"
    assert report["model_requests"] == 4
    assert report["tokens"] == {"reserved": 0, "used": 9000 + 1100}  # nobody knows what the lost one spent
    outcomes = list(ModelRequest.objects.filter(run=run).order_by("seq").values_list("outcome", flat=True))
    assert outcomes == ["interrupted", "ok", "ok"]


def test_a_dispatch_in_flight_at_a_crash_stays_counted_and_is_reported_interrupted(ticket_t1001):
    run = run_start(ticket=ticket_t1001, model_name="replay", model_script={"model": [J42, DOCS, DRAFT]})
    step = run_begin(run_id=run.pk, owner="worker-that-dies")
    reply = OpResult(Finished(ModelResponse(J42, TokenUsage(500, 50))), False, timezone.now())
    step = run_record(run=step.run, owner="worker-that-dies", op=step.op, result=reply)
    assert isinstance(step.op, DispatchOp)
    assert Run.objects.get(pk=run.pk).tool_attempts == 1  # committed before the dispatch
    worker_dies(run.pk)
    run = run_advance(run.pk)
    report = run_report(run_id=run.pk)
    assert report["status"] == "COMPLETED"
    assert [(d["tool"], d["outcome"]) for d in report["dispatched"]] == [
        ("read_job_status", "interrupted"),
        ("search_docs", "ok"),
    ]
    assert (report["tool_attempts"], report["model_requests"]) == (2, 3)


def test_the_rules_make_a_lookup_a_crash_cut_off_again_after_another_and_complete_the_packet(ticket_t1001):
    """A worker dies during J-42's lookup. The resumed run's rules do not repeat it at once (the call just made:
    NO_PROGRESS) but after another lookup, and the packet cites J-42's record like a quiet day's."""
    run = run_start(ticket=ticket_t1001, model_name="rules")
    step = run_begin(run_id=run.pk, owner="worker-that-dies")
    reply = OpResult(Finished(ModelResponse(J42, TokenUsage())), False, timezone.now())
    step = run_record(run=step.run, owner="worker-that-dies", op=step.op, result=reply)
    assert isinstance(step.op, DispatchOp)
    worker_dies(run.pk)
    run = run_advance(run.pk)

    report = run_report(run_id=run.pk)
    dispatched = [(d["tool"], d["args"], d["outcome"]) for d in report["dispatched"]]
    assert dispatched[0] == ("read_job_status", {"job_id": "J-42"}, "interrupted")
    assert dispatched[1][0] != "read_job_status"
    assert ("read_job_status", {"job_id": "J-42"}, "ok") in dispatched[2:]
    assert report["status"] == "COMPLETED"
    packet = ReviewPacket.objects.get(run=run)
    assert "EXPORT_ROLE_REQUIRED" in packet.summary and not packet.summary.startswith("Incomplete")
    assert not packet_view(run=run, packet=packet).incomplete


@pytest.mark.skipif(connection.vendor != "postgresql", reason="ends its own PostgreSQL session")
def test_a_step_whose_commit_landed_before_its_connection_was_lost_is_kept_and_the_run_goes_on(
    ticket_t1001, monkeypatch
):
    """The step reserving the first dispatch commits; then the server ends the session, so the
    loop never hears that it did. Its retry finds the run one version on, still its own: nothing
    is discarded, and the run resumes at once (the reserved attempt is settled as interrupted)."""
    run = run_start(ticket=ticket_t1001, model_name="replay", model_script={"model": [J42, DOCS, DRAFT]})
    real_record, tries = loop.run_record, []

    def commit_then_lose_the_connection(**step):
        tries.append(step["retry"])
        nxt = real_record(**step)
        if len(tries) == 1:
            with connection.cursor() as cursor:  # what a failover just after COMMIT does
                cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        return nxt

    monkeypatch.setattr(loop, "run_record", commit_then_lose_the_connection)
    run = run_advance(run.pk)

    report = run_report(run_id=run.pk)
    assert tries[:2] == [False, True]
    assert report["status"] == "COMPLETED"
    assert [(d["tool"], d["outcome"]) for d in report["dispatched"]] == [
        ("read_job_status", "interrupted"),
        ("search_docs", "ok"),
    ]
    assert (report["tool_attempts"], report["model_requests"]) == (2, 3)
    assert not Observation.objects.filter(run=run, kind=Observation.Kind.DISCARDED).exists()


# --- a lost connection: engine.loop.on_fresh_connection -----------------------------


@pytest.fixture
def other():
    """A second session on the test database, outside Django."""
    import psycopg

    s = connection.settings_dict
    conn = psycopg.connect(
        dbname=s["NAME"],
        host=s["HOST"] or None,
        port=s["PORT"] or None,
        user=s["USER"] or None,
        password=s["PASSWORD"] or None,
        autocommit=True,
    )
    yield conn
    conn.close()


def _visible(other, code: str) -> bool:
    return other.execute(f"SELECT 1 FROM {Account._meta.db_table} WHERE code = %s", [code]).fetchone() is not None


def _try_counting(body):
    """on_fresh_connection over `body(retry)` in a transaction; the tries it made (and its error, if any)."""
    tries = []

    def call(retry):
        tries.append(retry)
        with transaction.atomic():
            body(retry)

    try:
        loop.on_fresh_connection(call)
    except Exception as error:  # the test reads which error ended the tries
        return tries, error
    return tries, None


def _backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


postgres_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="ends PostgreSQL sessions")
committed = pytest.mark.django_db(transaction=True)


@postgres_only
@committed
def test_a_transaction_whose_session_is_terminated_is_tried_again_on_a_new_connection(other):
    pids = []

    def body(retry):
        pids.append(_backend_pid())
        if not retry:  # what a restart or a failover does
            other.execute("SELECT pg_terminate_backend(%s)", [pids[-1]])
        Account.objects.create(code=f"LOST{len(pids)}", name="x")

    tries, error = _try_counting(body)

    assert (tries, error) == ([False, True], None)
    assert pids[0] != pids[1]
    assert not _visible(other, "LOST1") and _visible(other, "LOST2")


@postgres_only
@committed
def test_a_failing_statement_or_a_statement_timeout_is_not_tried_again(other):
    import psycopg

    def duplicate(retry):
        Account.objects.create(code="TWICE", name="x")
        Account.objects.create(code="TWICE", name="x")

    def too_slow(retry):
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL statement_timeout = 50")
            cursor.execute("SELECT pg_sleep(1)")

    tries, error = _try_counting(duplicate)
    assert tries == [False] and isinstance(error, IntegrityError)
    tries, error = _try_counting(too_slow)
    assert tries == [False] and isinstance(error.__cause__, psycopg.errors.QueryCanceled)


@postgres_only
@committed
def test_a_connection_that_stays_lost_stops_after_three_tries(other):
    def body(retry):
        other.execute("SELECT pg_terminate_backend(%s)", [_backend_pid()])
        Account.objects.create(code="NEVER", name="x")

    tries, error = _try_counting(body)

    assert tries == [False, True, True]
    assert isinstance(error, OperationalError)
    assert not _visible(other, "NEVER")
