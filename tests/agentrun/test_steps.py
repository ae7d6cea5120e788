"""engine.steps: every field a step sets on its run is saved, on every path the loop takes."""

from __future__ import annotations

import pytest

from engine import loop
from engine.models import ReviewPacket, Run, ToolAttempt
from engine.packets import packet_attempt
from engine.steps import run_begin, run_record

J42 = {"call": {"tool": "read_job_status", "args": {"job_id": "J-42"}}}
J77 = {"call": {"tool": "read_job_status", "args": {"job_id": "J-77"}}}
DOCS = {"call": {"tool": "search_docs", "args": {"query": "EXPORT_ROLE_REQUIRED"}}}
RAW = {"raw": "I think the job failed."}
DRAFT = {"draft": {"summary": "The requester is a viewer.", "evidence": ["E1"], "open_questions": []}}


def _stored(run: Run) -> dict:
    return {f.attname: getattr(run, f.attname) for f in Run._meta.concrete_fields}


@pytest.fixture
def steps_checked(monkeypatch):
    """The loop's steps, each followed by a comparison of the run it returns with the row it committed."""
    checked: list[int] = []

    def compared(step):
        def call(**kwargs):
            nxt = step(**kwargs)
            if nxt.run is not None:
                assert _stored(Run.objects.get(pk=nxt.run.pk)) == _stored(nxt.run), step.__name__
                checked.append(nxt.run.version)
            return nxt

        return call

    monkeypatch.setattr(loop, "run_begin", compared(run_begin))
    monkeypatch.setattr(loop, "run_record", compared(run_record))
    return checked


# The loop's paths: the model's replies, the run's setup, and the status it ends with.
PATHS = [
    ([J42, DOCS, DRAFT], {}, "COMPLETED"),
    ([RAW, {"draft": {"summary": " ", "evidence": []}}, RAW], {"budget": {"max_model_requests": 3}}, "MODEL_LIMIT"),
    ([J42, J77], {}, "INVALID_OR_FORBIDDEN"),
    ([J42, J42], {"faults": {"read_job_status": [{"fail": "error"}]}}, "NO_PROGRESS"),
    ([J42, DRAFT], {"faults": {"read_job_status": [{"fail": "transient"}, None]}}, "COMPLETED"),
    ([J42, DRAFT], {"require_approval": ["read_job_status"], "approval": "grant"}, "COMPLETED"),
    ([J42, DRAFT], {"require_approval": ["read_job_status"], "approval": "deny"}, "INVALID_OR_FORBIDDEN"),
    ([J42, {"error": "provider said 500"}], {}, "MODEL_ERROR"),
    ([{"handoff": "a person should call the customer"}], {}, "NEEDS_HELP"),
    (
        [J42, DRAFT],
        {
            "budget": {"deadline_seconds": 45, "operation_timeout_seconds": 5},
            "start": {"elapsed_seconds": 44.0},
            "faults": {"read_job_status": [{"delay_seconds": 2.5}]},
        },
        "DEADLINE",
    ),
]


@pytest.mark.usefixtures("settle")
@pytest.mark.parametrize(("model", "fields", "status"), PATHS)
def test_every_field_a_step_sets_is_saved(play, steps_checked, model, fields, status):
    report = play(model, **fields)
    assert report["status"] == status
    assert len(steps_checked) >= 2  # the first step and at least one after it were compared


def test_the_packet_lists_the_attempt_the_last_step_settled(play, settle):
    """The step that settles an attempt and ends the run sends the attempt's outcome before the packet reads it."""
    report = play(
        [J42, DRAFT],
        budget={"deadline_seconds": 45, "operation_timeout_seconds": 5},
        start={"elapsed_seconds": 44.0},
        faults={"read_job_status": [{"delay_seconds": 2.5}]},
    )
    settle()
    assert [a["outcome"] for a in ReviewPacket.objects.get(run_id=report["run"]).attempts] == ["timeout"]


@pytest.mark.parametrize(("model", "fields", "status"), PATHS)
def test_the_packet_lists_every_attempt_as_stored(play, settle, model, fields, status):
    """The attempts the steps list for the packet are the rows they wrote, on every path (a run taken up
    again after an approval lists them as read)."""
    report = play(model, **fields)
    settle()
    rows = (
        ToolAttempt.objects.filter(run_id=report["run"])
        .order_by("seq")
        .values_list("seq", "tool", "args", "outcome", "call_id", "error", "evidence__number")
    )
    assert ReviewPacket.objects.get(run_id=report["run"]).attempts == [packet_attempt(*row) for row in rows]


def test_a_run_knows_any_field_set_since_it_was_read(demo):
    from engine.budgets import Budget
    from engine.services import run_start
    from tickets.models import Ticket

    run = Run.objects.get(pk=run_start(ticket=Ticket.objects.get(ref="T-1001"), budget=Budget()).pk)
    assert run.fields_changed() == []
    for field in Run._meta.concrete_fields:
        if field.primary_key:
            continue
        was = getattr(run, field.attname)
        setattr(run, field.attname, object())  # no field is listed by hand: any one set is seen
        assert run.fields_changed() == [field.name]
        setattr(run, field.attname, was)
    run.evidence_refs.append("E9")  # changed in place, too
    assert run.fields_changed() == ["evidence_refs"]
    run.fields_saved(["evidence_refs"])
    assert run.fields_changed() == []
