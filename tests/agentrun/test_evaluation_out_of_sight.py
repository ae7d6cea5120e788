"""A candidate model's evaluation runs stay out of what staff and monitoring read about the service: the run
list (API and admin) unless asked for, the approvals (list, header, e-mail, webhook, gauges), the counters
and the outcomes dashboard. The comparison page still opens each run's timeline."""

from __future__ import annotations

from datetime import date

import pytest
from django.contrib.auth.models import User

from engine.approvals import approvals_waiting
from engine.loop import run_advance
from engine.models import Approval, Evaluation, ReviewPacket, Run, WebhookDelivery
from engine.roles import SUPERVISORS
from engine.selectors import queue_figures
from engine.services import approval_answer, run_start
from engine.statuses import Status
from evaluation.services import case_claim, evaluation_create, evaluation_run
from staff.dashboard import outcomes
from staff.periods import Period
from staff.reviews import packet_review
from tests.support.metrics import scrape, value
from tests.support.staff import bearer, make_user
from tickets.models import Job, Ticket

pytestmark = pytest.mark.usefixtures("settle")


def counted(samples, name: str) -> float:
    return sum(v for (sample, _), v in samples.items() if sample == name)


@pytest.fixture
def accepted(demo_committed, roles, mailoutbox):
    """An accepted packet of a run whose job lookup a supervisor (with an address) granted."""
    make_user("sue", SUPERVISORS)
    User.objects.filter(username="sue").update(email="sue@example.com")
    Job.objects.filter(ref="J-42").update(sensitive=True)
    run = run_advance(run_start(ticket=Ticket.objects.get(ref="T-1001"), model_name="rules").pk)
    assert run.status == Status.WAITING_APPROVAL and len(mailoutbox) == 1
    approval_answer(run_id=run.pk, grant=True, decided_by="sue", resume=False)
    run = run_advance(run.pk)
    assert run.status == Status.COMPLETED
    packet_review(packet_id=run.packet.pk, reviewer=User.objects.get(username="sue"), decision="accepted", note="")
    return run


def test_an_evaluation_s_waiting_call_is_nobody_s_to_answer_and_it_answers_it_itself(
    hook, accepted, mailoutbox, supervisor_client
):
    deliveries, mails = WebhookDelivery.objects.count(), len(mailoutbox)
    assert deliveries >= 2  # the original's approval and packet events
    evaluation = evaluation_create(candidate_model="rules")
    case = case_claim(case_id=evaluation.cases.get().pk)
    waiting = run_advance(case.candidate_run_id)

    assert waiting.status == Status.WAITING_APPROVAL and waiting.approvals.get().state == Approval.State.PENDING
    assert not approvals_waiting().exists()
    assert queue_figures().approvals_waiting == 0
    page = supervisor_client.get("/admin/agentrun/approval/")
    assert page.status_code == 200 and page.context["cl"].result_count == 1  # the original's, answered
    assert supervisor_client.get("/admin/").context["approvals_waiting"] == []
    assert len(mailoutbox) == mails and WebhookDelivery.objects.count() == deliveries

    evaluation = evaluation_run(Evaluation.objects.get(pk=evaluation.pk))
    candidate = Run.objects.get(pk=waiting.pk)
    assert evaluation.finished_at and evaluation.figures["agreement"] == 1.0
    assert candidate.status == Status.COMPLETED and candidate.approvals.get().state == Approval.State.USED
    assert len(mailoutbox) == mails and WebhookDelivery.objects.count() == deliveries


def test_evaluation_runs_are_listed_only_when_asked_for(accepted, client, staff_user, supervisor_client):
    evaluation = evaluation_run(evaluation_create(candidate_model="rules"))
    candidate = evaluation.cases.get().candidate_run
    auth = bearer(staff_user)

    runs = client.get("/api/runs", **auth).json()
    assert runs["count"] == 1 and [r["id"] for r in runs["items"]] == [accepted.pk]
    asked = client.get("/api/runs?purpose=evaluation", **auth).json()
    assert asked["count"] == 1 and [r["id"] for r in asked["items"]] == [candidate.pk]
    assert client.get("/api/runs?purpose=other", **auth).status_code == 422
    assert client.get(f"/api/runs?ticket={accepted.ticket.ref}", **auth).json()["count"] == 1
    assert client.get(f"/api/runs/{candidate.pk}", **auth).json()["timeline"]  # its timeline, by id

    listing = supervisor_client.get("/admin/agentrun/run/")
    assert [r.pk for r in listing.context["cl"].result_list] == [accepted.pk]
    listing = supervisor_client.get("/admin/agentrun/run/?purpose=evaluation")
    assert [r.pk for r in listing.context["cl"].result_list] == [candidate.pk]
    assert supervisor_client.get(f"/admin/agentrun/run/{candidate.pk}/change/").status_code == 200
    ticket_page = supervisor_client.get(f"/admin/tickets/ticket/{accepted.ticket_id}/change/")
    assert f"/admin/agentrun/run/{accepted.pk}/change/" in ticket_page.content.decode()
    assert f"/admin/agentrun/run/{candidate.pk}/change/" not in ticket_page.content.decode()
    # The outcomes dashboard and the review queue count the investigation only.
    today = date.today()
    assert outcomes(period=Period(today, today)).total_runs == 1
    assert ReviewPacket.objects.filter(run=candidate).exists()
    queue = supervisor_client.get("/admin/agentrun/reviewpacket/?state=all")
    assert queue.context["cl"].result_count == 1


def test_evaluation_runs_are_not_counted_in_the_metrics(accepted, settings):
    settings.AGENT_METRICS = True
    before = scrape()
    evaluation = evaluation_run(evaluation_create(candidate_model="rules"))
    after = scrape()

    assert evaluation.cases.get().candidate_run.model_requests >= 2
    for name in (
        "supportagent_runs_started_total",
        "supportagent_runs_ended_total",
        "supportagent_model_requests_total",
        "supportagent_tool_dispatches_total",
        "supportagent_tokens_total",
    ):
        assert counted(after, name) == counted(before, name), name
    assert value(after, "supportagent_approvals_waiting") == 0
    # The same model investigating is counted.
    run_advance(run_start(ticket=Ticket.objects.get(ref="T-1002"), model_name="rules").pk)
    assert (
        counted(scrape(), "supportagent_runs_started_total") == counted(before, "supportagent_runs_started_total") + 1
    )
