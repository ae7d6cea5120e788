"""Evidence: numbered per ticket, deduplicated, truncated but still evidence (CONFORMANCE §2, §5)."""

from __future__ import annotations

import json

import pytest
from django.db import transaction

from engine.loop import run_advance
from engine.models import Run
from engine.selectors import run_report
from engine.services import run_start
from tickets.models import Evidence, Ticket
from tickets.selectors import SessionScope
from tickets.services import evidence_record
from tools.base import call_key, canonical_json
from tools.registry import TOOLS

pytestmark = pytest.mark.usefixtures("settle")

J42 = {"call": {"tool": "read_job_status", "args": {"job_id": "J-42"}}}
J41 = {"call": {"tool": "read_job_status", "args": {"job_id": "J-41"}}}
DOCS = {"call": {"tool": "search_docs", "args": {"query": "EXPORT_ROLE_REQUIRED"}}}
EXPORT = {"call": {"tool": "read_service_status", "args": {"service": "export"}}}
HANDOFF = {"handoff": "h"}


def draft(*refs):
    return {"draft": {"summary": "s", "evidence": list(refs), "open_questions": []}}


def refs_of(report):
    return [d["evidence"] for d in report["dispatched"]]


def run_on(ticket, model, **script):
    run = run_start(ticket=ticket, model_name="replay", model_script={"model": model, **script})
    return run_report(run_id=run_advance(run.pk).pk)


# --- through the loop -------------------------------------------------------------------------


def test_results_are_numbered_in_order_of_first_appearance(play):
    report = play([J42, DOCS, EXPORT, draft("E3")])
    assert refs_of(report) == ["E1", "E2", "E3"]
    assert report["evidence"] == ["E1", "E2", "E3"]
    run = Run.objects.get(pk=report["run"])
    rows = Evidence.objects.filter(ticket=run.ticket).order_by("number")
    assert [(e.ref, e.tool, e.source_ref) for e in rows] == [
        ("E1", "read_job_status", "J-42"),
        ("E2", "search_docs", rows[1].source_ref),
        ("E3", "read_service_status", "service:export"),
    ]
    assert "DOC-EXPORT-7@r3" in rows[1].source_ref
    assert rows[0].args == {"job_id": "J-42"} and rows[1].args == {"query": "export_role_required", "max_results": 3}
    assert all(e.run_id == run.pk and not e.truncated for e in rows)


def test_an_identical_result_reuses_its_reference(play):
    report = play([J42, DOCS, J42, draft("E1")])
    assert refs_of(report) == ["E1", "E2", "E1"]
    assert report["evidence"] == ["E1", "E2"]
    assert Evidence.objects.filter(ticket=Run.objects.get(pk=report["run"]).ticket).count() == 2


def test_the_same_tool_with_other_arguments_is_new_evidence(play):
    report = play([J42, J41, draft("E2")])
    assert refs_of(report) == ["E1", "E2"]


def test_evidence_numbering_is_per_ticket_across_runs(ticket_t1001):
    first = run_on(ticket_t1001, [J42, HANDOFF])
    second = run_on(ticket_t1001, [DOCS, J42, draft("E1", "E2")])
    assert first["evidence"] == ["E1"]
    assert refs_of(second) == ["E2", "E1"]
    assert second["evidence"] == ["E2", "E1"]
    assert second["packet"]["evidence"] == ["E1", "E2"]
    assert Evidence.objects.filter(ticket=ticket_t1001).count() == 2


def test_a_draft_may_cite_evidence_from_an_earlier_run_on_the_ticket(ticket_t1001):
    run_on(ticket_t1001, [J42, HANDOFF])
    report = run_on(ticket_t1001, [draft("E1")])
    assert (report["status"], report["tool_attempts"], report["packet"]["evidence"]) == ("COMPLETED", 0, ["E1"])


def test_another_tickets_evidence_cannot_be_cited(play):
    first = play([J42, DOCS, HANDOFF])
    assert first["evidence"] == ["E1", "E2"]
    report = play([J42, draft("E2")])  # a fresh copy of the ticket has only E1
    assert (report["status"], report["validation_errors"]) == ("MODEL_ERROR", 1)


def test_an_empty_search_result_is_evidence_too(play):
    nothing = {"call": {"tool": "search_docs", "args": {"query": "zebra quantum pineapple"}}}
    report = play([nothing, draft("E1")])
    assert report["status"] == "COMPLETED"
    assert [(d["outcome"], d["evidence"]) for d in report["dispatched"]] == [("ok", "E1")]
    evidence = Evidence.objects.get(ticket=Run.objects.get(pk=report["run"]).ticket)
    assert json.loads(evidence.content)["results"] == []


def test_failed_and_timed_out_attempts_are_not_evidence(play, settle):
    report = play(
        [J42, J41, EXPORT, draft("E1")],
        budget={"operation_timeout_seconds": 1.0},
        faults={"read_job_status": [{"fail": "error"}, {"delay_seconds": 2.0}]},
    )
    assert [(d["outcome"], d["evidence"]) for d in report["dispatched"]] == [
        ("error", None),
        ("timeout", None),
        ("ok", "E1"),
    ]
    settle()
    assert Evidence.objects.filter(ticket=Run.objects.get(pk=report["run"]).ticket).count() == 1


def test_a_long_result_is_truncated_marked_and_still_evidence(play):
    report = play([DOCS, draft("E1")], budget={"max_tool_result_chars": 120})
    assert report["status"] == "COMPLETED"
    assert report["dispatched"][0]["outcome"] == "ok"
    evidence = Evidence.objects.get(ticket=Run.objects.get(pk=report["run"]).ticket)
    assert evidence.truncated and len(evidence.content) == 120


def result_text(session, tool, args):
    return canonical_json(TOOLS[tool].backend(SessionScope.of(session), args).content)


def test_a_result_exactly_at_the_limit_is_not_truncated(play, dana_session):
    size = len(result_text(dana_session, "read_job_status", {"job_id": "J-42"}))
    at = play([J42, draft("E1")], budget={"max_tool_result_chars": size})
    over = play([J42, draft("E1")], budget={"max_tool_result_chars": size - 1})
    at_row = Evidence.objects.get(ticket=Run.objects.get(pk=at["run"]).ticket)
    over_row = Evidence.objects.get(ticket=Run.objects.get(pk=over["run"]).ticket)
    assert (at_row.truncated, len(at_row.content)) == (False, size)
    assert (over_row.truncated, len(over_row.content)) == (True, size - 1)


def test_the_limit_is_measured_in_characters_of_the_canonical_json(play, dana_session):
    text = result_text(dana_session, "search_docs", {"query": "export role", "max_results": 3})
    report = play(
        [{"call": {"tool": "search_docs", "args": {"query": "export role"}}}, draft("E1")],
        budget={"max_tool_result_chars": 50},
    )
    evidence = Evidence.objects.get(ticket=Run.objects.get(pk=report["run"]).ticket)
    assert evidence.content == text[:50]


# --- evidence_record, the one place that numbers and dedupes -----------------------------------------


@pytest.fixture
def two_tickets(demo):
    original = Ticket.objects.get(ref="T-1001")
    copies = [
        Ticket.objects.create(
            ref=f"T-EV-{i}",
            account=original.account,
            session=original.session,
            subject=original.subject,
            body=original.body,
        )
        for i in (1, 2)
    ]
    return copies


def record(ticket, content, *, tool="read_job_status", args=None, truncated=False):
    args = args or {"job_id": "J-42"}
    with transaction.atomic():
        return evidence_record(
            ticket_id=ticket.pk,
            tool=tool,
            args=args,
            args_key=call_key(tool, args),
            content=content,
            source_ref="J-42",
            truncated=truncated,
            run_id=None,
        )


def test_evidence_record_numbers_per_ticket(two_tickets):
    a, b = two_tickets
    assert [record(a, "x").ref, record(a, "y").ref, record(b, "y").ref, record(a, "z").ref] == ["E1", "E2", "E1", "E3"]


def test_evidence_record_reuses_identical_content_whatever_the_capture_time(two_tickets):
    a, _ = two_tickets
    first = record(a, '{"status":"failed"}')
    again = record(a, '{"status":"failed"}')
    assert again.pk == first.pk and again.captured_at == first.captured_at
    assert Evidence.objects.filter(ticket=a).count() == 1


def test_evidence_record_tells_apart_tool_arguments_and_content(two_tickets):
    a, _ = two_tickets
    base = record(a, "same")
    assert record(a, "same", args={"job_id": "J-41"}).pk != base.pk
    assert record(a, "same", tool="search_docs", args={"job_id": "J-42"}).pk != base.pk
    assert record(a, "other").pk != base.pk
    assert Evidence.objects.filter(ticket=a).count() == 4


# --- what the model is shown ------------------------------------------------------------------------


class Shown:
    """The replay model, remembering each prompt it is sent, with a fixed prompt overhead."""

    def __init__(self, script, overhead=0):
        from providers import ReplayAdapter

        outer = self

        class Adapter(ReplayAdapter):
            def input_overhead_bytes(self) -> int:
                return overhead

            def request(self, spec):
                outer.prompts.append(spec.context.prompt)
                return super().request(spec)

        self.prompts: list[str] = []
        self.adapter = Adapter(script)


def test_the_model_is_shown_each_evidence_item_once(ticket_t1001):
    script = [J42, DOCS, J42, draft("E1")]
    run = run_start(ticket=ticket_t1001, model_name="replay", model_script={"model": script})
    shown = Shown(script)
    assert run_advance(run.pk, adapter=shown.adapter).status == "COMPLETED"
    last = shown.prompts[-1]
    assert last.count("E1 from read_job_status") == 1 and last.count("E2 from search_docs") == 1
    assert "EXPORT_ROLE_REQUIRED" in last


def test_the_prompt_fits_the_input_cap_less_the_adapters_overhead(ticket_t1001):
    from engine.budgets import Budget
    from providers.context import utf8_len

    script = [J42, DOCS, EXPORT, draft("E1")]
    budget = Budget.from_mapping({"max_input_tokens": 1500})
    run = run_start(ticket=ticket_t1001, model_name="replay", budget=budget, model_script={"model": script})
    shown = Shown(script, overhead=300)
    assert run_advance(run.pk, adapter=shown.adapter).status == "COMPLETED"
    assert len(shown.prompts) == 4
    assert all(utf8_len(p) <= 1500 - 300 for p in shown.prompts)


def test_a_runs_data_blocks_keep_one_id_of_its_own(ticket_t1001):
    import re

    from providers.context import fence_id

    ids = []
    for _ in range(2):
        script = [J42, DOCS, draft("E1")]
        run = run_start(ticket=ticket_t1001, model_name="replay", model_script={"model": script})
        shown = Shown(script)
        assert run_advance(run.pk, adapter=shown.adapter).status == "COMPLETED"
        ids.append({fence for p in shown.prompts for fence in re.findall(r'<data id="([0-9a-f]+)">', p)})
    assert all(len(run_ids) == 1 for run_ids in ids)  # the same in each request: a cacheable start
    assert ids[0] != ids[1] and fence_id("", []) not in ids[0] | ids[1]  # keyed by the run, not guessable


def test_parallel_runs_on_one_ticket_number_evidence_without_gaps_or_copies(ticket_t1001):
    import threading

    from django.db import connections

    close = {"handoff": "h"}
    scripts = [[J42, DOCS, EXPORT, J41, close], [DOCS, J42, J41, EXPORT, close], [EXPORT, J41, J42, DOCS, close]]
    runs = [run_start(ticket=ticket_t1001, model_name="replay", model_script={"model": s}) for s in scripts]
    errors: list[str] = []

    def drive(run_id: int) -> None:
        try:
            run_advance(run_id)
        except Exception as exc:  # reported below
            errors.append(repr(exc))
        finally:
            connections.close_all()

    workers = [threading.Thread(target=drive, args=(run.pk,)) for run in runs]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert errors == []
    assert sorted(Evidence.objects.filter(ticket=ticket_t1001).values_list("number", flat=True)) == [1, 2, 3, 4]
    for run in runs:
        report = run_report(run_id=run.pk)
        assert report["status"] == "NEEDS_HELP"
        assert sorted(report["evidence"]) == ["E1", "E2", "E3", "E4"]
