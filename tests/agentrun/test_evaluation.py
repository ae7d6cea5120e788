"""evaluate: a candidate model run over the tickets of reviewed packets, compared with them."""

from __future__ import annotations

import importlib
import json
import re
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse

from engine.loop import run_advance
from engine.models import Evaluation, EvaluationCase, PacketReview, ReviewPacket, Run
from engine.services import run_start
from evaluation.replay import NOT_RECORDED
from evaluation.services import CaseResult, case_result, evaluation_create, evaluation_run
from staff.reviews import packet_review
from tickets.models import Job, Ticket

pytestmark = pytest.mark.usefixtures("settle")

TICKETS = ("T-1001", "T-1002", "T-1004", "T-1007")
DOCS = {"call": {"tool": "search_docs", "args": {"query": "EXPORT_ROLE_REQUIRED"}}}
DOCS_ONLY = [
    DOCS,
    {"draft": {"summary": "The export failed for a role (E1).", "evidence": ["E1"], "open_questions": []}},
]


@pytest.fixture
def reviewed(dana_session):
    """20 packets of rules runs on Dana's tickets, reviewed: drafts accepted, the others rejected."""
    lead = User.objects.create_user("lead")
    runs = []
    for n in range(20):
        ticket = Ticket.objects.get(ref=TICKETS[n % len(TICKETS)])
        run = run_advance(run_start(ticket=ticket, model_name="rules").pk)
        packet = ReviewPacket.objects.get(run=run)
        accept = packet.summary is not None
        packet_review(
            packet_id=packet.pk,
            reviewer=lead,
            decision="accepted" if accept else "rejected",
            reason="" if accept else "wrong_conclusion",
            note="" if accept else "no draft",
        )
        runs.append(run)
    return runs


def evaluate(*args: str) -> dict:
    out = __import__("io").StringIO()
    call_command("evaluate", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def cases_of(report: dict, ref: str) -> list[dict]:
    ids = set(Run.objects.filter(ticket__ref=ref, purpose=Run.Purpose.INVESTIGATION).values_list("pk", flat=True))
    return [c for c in report["cases"] if c["original_run_id"] in ids]


def test_the_rules_model_agrees_with_every_reviewed_packet_on_recorded_tools(reviewed):
    evidence_before = dict(Ticket.objects.filter(evaluation_copy=False).values_list("ref", "evidence_count"))
    report = evaluate("--model", "rules", "--reviewed", "all")
    figures = report["figures"]
    assert report["finished"] and figures["cases"] == 20
    assert figures["accepted_cases"] >= 10
    assert figures["agreement"] == 1.0 and figures["regressions"] == []
    assert all(c["overlap"] == 1.0 and not c["regression"] for c in report["cases"])
    # Agreement is with accepted packets; matching a rejected one is reported apart (rules hand off on T-1002).
    assert {c["result"] for c in report["cases"]} == {"agreed", "agreed_with_rejected"}
    assert all(c["agreed"] == (c["original_review"] == "accepted") for c in report["cases"])
    assert figures["agreed"] == figures["accepted_cases"] and figures["agreed_with_rejected"] == 20 - figures["agreed"]
    t1001 = cases_of(report, "T-1001")
    assert len(t1001) == 5 and all(c["drafted"] and len(c["accepted_sources"]) >= 2 for c in t1001)
    # Evaluation runs stay out of the queue and of the real tickets' evidence numbering.
    candidates = Run.objects.filter(purpose=Run.Purpose.EVALUATION)
    assert candidates.count() == 20 and not candidates.filter(ticket__evaluation_copy=False).exists()
    assert dict(Ticket.objects.filter(evaluation_copy=False).values_list("ref", "evidence_count")) == evidence_before
    assert ReviewPacket.objects.filter(run__purpose=Run.Purpose.INVESTIGATION).count() == 20


def test_a_candidate_that_skips_the_job_lookup_shows_regressions(reviewed, tmp_path):
    script = tmp_path / "docs-only.json"
    script.write_text(json.dumps(DOCS_ONLY))
    report = evaluate("--model", "replay", "--script", str(script))
    t1001 = cases_of(report, "T-1001")
    assert len(t1001) == 5
    for case in t1001:
        assert case["regression"] and case["drafted"] and 0 < case["overlap"] < 1
        assert not any("read_job_status" in source for source in case["cited_sources"])
    assert set(report["figures"]["regressions"]) >= {c["original_run_id"] for c in t1001}
    assert report["figures"]["agreement"] < 1
    # A call the original run never made is answered as a failure the model is shown.
    elsewhere = [c for c in report["cases"] if c not in t1001]
    assert elsewhere
    other = Run.objects.get(pk=elsewhere[0]["candidate_run_id"])
    assert any(NOT_RECORDED in o.text for o in other.observations.all())


def test_live_tools_after_a_data_change_show_the_difference(reviewed):
    Job.objects.filter(ref="J-42").update(status="succeeded", error_code="")
    recorded = evaluate("--model", "rules")
    assert recorded["figures"]["regressions"] == []
    live = evaluate("--model", "rules", "--live-tools")
    t1001 = cases_of(live, "T-1001")
    assert t1001 and all(c["regression"] and c["overlap"] < 1 for c in t1001)
    assert live["figures"]["agreement"] < 1


def test_an_interrupted_evaluation_resumes_without_running_a_finished_case_again(reviewed):
    evaluation = evaluation_create(candidate_model="rules", reviewed=Evaluation.Reviewed.ALL)

    def interrupt_after_five(done: int, total: int) -> None:
        if done == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        evaluation_run(evaluation, progress=interrupt_after_five)
    finished = dict(evaluation.cases.filter(state=EvaluationCase.State.DONE).values_list("pk", "candidate_run_id"))
    assert len(finished) == 5
    evaluation.refresh_from_db()
    assert evaluation.finished_at is None
    # The same arguments again resume the unfinished evaluation.
    report = evaluate("--model", "rules", "--reviewed", "all")
    assert report["evaluation"] == evaluation.pk and report["finished"]
    assert Run.objects.filter(purpose=Run.Purpose.EVALUATION).count() == 20
    again = dict(evaluation.cases.filter(pk__in=finished).values_list("pk", "candidate_run_id"))
    assert again == finished
    assert report["figures"]["agreement"] == 1.0
    # --resume of a finished evaluation runs nothing.
    assert evaluate("--resume", str(evaluation.pk))["figures"] == report["figures"]
    assert Run.objects.filter(purpose=Run.Purpose.EVALUATION).count() == 20


def test_supervisors_see_the_list_the_comparison_and_the_csv(reviewed, supervisor_client, staff_client):
    report = evaluate("--model", "rules", "--limit", "3")
    evaluation = Evaluation.objects.get(pk=report["evaluation"])
    listing = supervisor_client.get("/admin/agentrun/evaluation/")
    assert listing.status_code == 200 and b"rules" in listing.content
    page = supervisor_client.get(f"/admin/agentrun/evaluation/{evaluation.pk}/change/")
    assert page.status_code == 200
    for case in evaluation.cases.all():
        assert f"/admin/agentrun/run/{case.original_run_id}/change/".encode() in page.content
        assert f"/admin/agentrun/run/{case.candidate_run_id}/change/".encode() in page.content
    csv = supervisor_client.get(f"/admin/agentrun/evaluation/{evaluation.pk}/csv/")
    lines = csv.content.decode().strip().splitlines()
    assert csv["Content-Type"] == "text/csv" and len(lines) == 4 and lines[0].startswith("original run,")
    assert staff_client.get(f"/admin/agentrun/evaluation/{evaluation.pk}/change/").status_code == 403
    # The candidate runs' packets are not in the review queue.
    queue = supervisor_client.get("/admin/agentrun/reviewpacket/?state=all")
    assert queue.context["cl"].result_count == 20


# --- one result per case, and the header counted from the rows ----------------------------------------------


@pytest.mark.parametrize(
    "review,drafted,original_drafted,overlap,expected",
    [
        ("accepted", True, True, 1.0, CaseResult.AGREED),
        ("accepted", False, False, 1.0, CaseResult.AGREED),  # an accepted handoff handed off again: not a regression
        ("rejected", True, True, 1.0, CaseResult.AGREED_WITH_REJECTED),
        ("rejected", False, False, 1.0, CaseResult.AGREED_WITH_REJECTED),
        ("accepted", False, True, 1.0, CaseResult.REGRESSION),  # the accepted draft is lost
        ("accepted", True, True, 0.5, CaseResult.REGRESSION),  # fewer of its sources
        ("accepted", True, False, 1.0, CaseResult.DIFFERS),  # drafts where the accepted packet handed off
        ("rejected", True, True, 0.5, CaseResult.DIFFERS),
        ("rejected", False, True, 1.0, CaseResult.DIFFERS),
    ],
)
def test_each_case_has_exactly_one_result(review, drafted, original_drafted, overlap, expected):
    assert (
        case_result(
            done=True, original_review=review, drafted=drafted, original_drafted=original_drafted, overlap=overlap
        )
        == expected
    )
    assert (
        case_result(
            done=False, original_review=review, drafted=drafted, original_drafted=original_drafted, overlap=overlap
        )
        == CaseResult.PENDING
    )


def _rows(page: str) -> list[str]:
    return re.findall(r'<td class="case-result">([^<]*)</td>', page)


def _figure(page: str, name: str) -> str:
    return re.search(rf'<td id="figure-{name}">([^<]*)</td>', page).group(1)


def test_an_accepted_handoff_handed_off_again_agrees_and_is_no_regression(dana_session):
    lead = User.objects.create_user("lead")
    t1001 = Ticket.objects.get(ref="T-1001")
    vague = Ticket.objects.create(
        ref="T-VAGUE", account=t1001.account, session=t1001.session, subject="Hi", body="Can someone call me back?"
    )
    run = run_advance(run_start(ticket=vague, model_name="rules").pk)
    packet_review(packet_id=ReviewPacket.objects.get(run=run).pk, reviewer=lead, decision="accepted")
    report = evaluate("--model", "rules")
    (case,) = report["cases"]
    assert not case["drafted"] and case["status"] == "NEEDS_HELP"
    assert (case["agreed"], case["regression"]) == (True, False)
    assert case["result"] == "agreed"
    assert report["figures"]["regressions"] == [] and report["figures"]["agreement"] == 1.0


def test_agreeing_with_a_rejected_packet_is_not_agreement_and_the_header_counts_the_rows(reviewed, supervisor_client):
    report = evaluate("--model", "rules", "--reviewed", "all")
    rejected = [c for c in report["cases"] if c["original_review"] == "rejected"]
    assert rejected and all(c["result"] == "agreed_with_rejected" and not c["agreed"] for c in rejected)
    page = supervisor_client.get(f"/admin/agentrun/evaluation/{report['evaluation']}/change/").content.decode()
    rows = _rows(page)
    assert len(rows) == 20
    assert rows.count("agrees with a rejected packet") == len(rejected)
    accepted = 20 - len(rejected)
    assert rows.count("agrees") == accepted
    assert _figure(page, "agreement") == f"100 % ({accepted} of {accepted})"
    assert _figure(page, "agreed-with-rejected") == f"{len(rejected)} of {len(rejected)} (not counted as agreement)"
    assert _figure(page, "regressions") == "0" and _figure(page, "cases") == "20 of 20"


def test_a_regression_is_never_also_an_agreement_and_the_header_counts_it(reviewed, tmp_path, supervisor_client):
    script = tmp_path / "docs-only.json"
    script.write_text(json.dumps(DOCS_ONLY))
    report = evaluate("--model", "replay", "--script", str(script))
    assert not any(c["agreed"] and c["regression"] for c in report["cases"])
    regressions = [c for c in report["cases"] if c["result"] == "regression"]
    assert regressions and set(report["figures"]["regressions"]) == {c["original_run_id"] for c in regressions}
    page = supervisor_client.get(f"/admin/agentrun/evaluation/{report['evaluation']}/change/").content.decode()
    rows = _rows(page)
    assert rows.count("regression") == len(regressions) == int(_figure(page, "regressions"))
    agreed = rows.count("agrees")
    assert _figure(page, "agreement").endswith(f"({agreed} of {report['figures']['accepted_cases']})")


def test_costs_are_shown_in_dollars(reviewed, supervisor_client):
    report = evaluate("--model", "rules", "--limit", "2")
    EvaluationCase.objects.filter(evaluation_id=report["evaluation"]).update(
        cost_micros=1_250_000, original_cost_micros=500_000
    )
    page = supervisor_client.get(f"/admin/agentrun/evaluation/{report['evaluation']}/change/").content.decode()
    assert _figure(page, "cost") == "$1.25 (original runs: $0.50)"
    assert "<td>$1.25</td>" in page and "<td>$0.50</td>" in page
    assert "µ$" not in page


# --- starting one from the admin ----------------------------------------------------------------------------


def test_a_supervisor_starts_an_evaluation_from_the_admin_and_it_runs_inline(reviewed, supervisor_client):
    listing = supervisor_client.get("/admin/agentrun/evaluation/").content.decode()
    assert 'id="start-evaluation"' in listing
    form = supervisor_client.get(reverse("admin:agentrun_evaluation_start"))
    assert form.status_code == 200 and b'value="rules"' in form.content
    response = supervisor_client.post(
        reverse("admin:agentrun_evaluation_start"), {"candidate_model": "rules", "reviewed": "all", "limit": "3"}
    )
    evaluation = Evaluation.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:agentrun_evaluation_change", args=[evaluation.pk])
    assert (evaluation.candidate_model, evaluation.reviewed, evaluation.limit) == ("rules", "all", 3)
    assert evaluation.created_by == "supervisor" and evaluation.finished_at is not None
    assert evaluation.figures["cases"] == 3
    assert Run.objects.filter(purpose=Run.Purpose.EVALUATION).count() == 3


def test_a_model_that_is_not_offered_is_refused_and_nothing_is_created(reviewed, supervisor_client):
    response = supervisor_client.post(
        reverse("admin:agentrun_evaluation_start"), {"candidate_model": "replay", "reviewed": "accepted"}
    )
    assert response.status_code == 200 and b"Select a valid choice" in response.content
    assert not Evaluation.objects.exists()


def test_support_staff_may_not_start_an_evaluation(reviewed, staff_client):
    assert b'id="start-evaluation"' not in staff_client.get("/admin/agentrun/evaluation/").content
    assert staff_client.get(reverse("admin:agentrun_evaluation_start")).status_code == 403
    response = staff_client.post(
        reverse("admin:agentrun_evaluation_start"), {"candidate_model": "rules", "reviewed": "all", "limit": "3"}
    )
    assert response.status_code == 403 and b"Only Supervisors may start evaluations" in response.content
    assert not Evaluation.objects.exists() and not Run.objects.filter(purpose=Run.Purpose.EVALUATION).exists()


# --- the reviewed packet's reason ----------------------------------------------------------------------------


def _no_article_packet(reviewed) -> ReviewPacket:
    """A T-1004 packet (invoices) accepted, then rejected on purpose because no article answers it."""
    packet = ReviewPacket.objects.filter(run__in=reviewed, run__ticket__ref="T-1004").order_by("pk").first()
    packet_review(
        packet_id=packet.pk,
        reviewer=User.objects.get(username="lead"),
        decision="rejected",
        reason="no_article",
        note="There is no article on late invoices.",
        change_decision=True,
    )
    return packet


def test_the_comparison_names_why_each_rejected_packet_was_rejected(reviewed, supervisor_client):
    no_article = _no_article_packet(reviewed)
    out = __import__("io").StringIO()
    call_command("evaluate", "--model", "rules", "--reviewed", "all", stdout=out)
    assert "rejected packets by the reviewer's reason: wrong conclusion 5, no article answers it 1" in out.getvalue()
    evaluation = Evaluation.objects.get()
    assert evaluation.figures["rejected_by_reason"] == {"wrong_conclusion": 5, "no_article": 1}
    report = evaluate("--resume", str(evaluation.pk))
    by_run = {c["original_run_id"]: c for c in report["cases"]}
    assert (by_run[no_article.run_id]["original_reason"], by_run[no_article.run_id]["original_reason_label"]) == (
        "no_article",
        "no article answers it",
    )
    accepted = [c for c in report["cases"] if c["original_review"] == "accepted"]
    assert accepted and all((c["original_reason"], c["original_reason_label"]) == ("", None) for c in accepted)

    page = supervisor_client.get(f"/admin/agentrun/evaluation/{evaluation.pk}/change/").content.decode()
    reviews = re.findall(r'<td class="original-review">(.*?)</td>', page)
    assert reviews.count('rejected: <span class="original-reason">no article answers it</span>') == 1
    assert reviews.count('rejected: <span class="original-reason">wrong conclusion</span>') == 5
    assert reviews.count("accepted") == 14
    rows = supervisor_client.get(f"/admin/agentrun/evaluation/{evaluation.pk}/csv/").content.decode().splitlines()
    assert rows[0].startswith("original run,candidate run,ticket,original review,original reason,")
    assert sum(",rejected,no_article," in row for row in rows) == 1


def test_cases_recorded_before_the_reason_was_kept_get_the_decision_they_were_made_on(reviewed):
    from django.apps import apps

    no_article = _no_article_packet(reviewed)
    evaluation = evaluation_create(candidate_model="rules", reviewed=Evaluation.Reviewed.ALL)
    packet_review(  # after the evaluation started: not the decision its case was made on
        packet_id=no_article.pk,
        reviewer=User.objects.get(username="lead"),
        decision="rejected",
        reason="unclear",
        note="Unclear after all.",
        change_decision=True,
    )
    PacketReview.objects.filter(packet=no_article).update(created_at=evaluation.started_at)  # the first two then
    PacketReview.objects.filter(packet=no_article, reason="unclear").update(
        created_at=evaluation.started_at + timedelta(seconds=1)
    )
    EvaluationCase.objects.update(original_reason="")
    [path] = Path(__file__).resolve().parents[2].glob("engine/migrations/*_evaluation_case_original_reason.py")
    migration = importlib.import_module(f"engine.migrations.{path.stem}")
    migration.reasons_of_earlier_cases(apps, None)
    reasons = dict(evaluation.cases.values_list("original_run_id", "original_reason"))
    assert reasons[no_article.run_id] == "no_article"
    assert Counter(reasons.values()) == {"": 14, "wrong_conclusion": 5, "no_article": 1}
