"""The evaluations in the admin in a real browser (Debian's Chromium): the list, the comparison page with its
per-case table linking both runs' timelines, and its CSV export; at 1400 px and 390 px, with screenshots."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from engine.loop import run_advance
from engine.models import Evaluation, ReviewPacket, Run
from engine.services import run_start
from engine.statuses import Status
from evaluation.services import evaluation_create, evaluation_run
from staff.reviews import packet_review
from tests.support.staff import PASSWORD
from tickets.models import Ticket

WIDTHS = {"desktop": 1400, "phone": 390}
TICKETS = ("T-1001", "T-1002", "T-1004")


@pytest.fixture
def evaluation(supervisor_user, demo_committed) -> Evaluation:
    """A rules evaluation of three reviewed packets (a draft accepted, the others as reviewed)."""
    lead = User.objects.create_user("lead")
    for ref in TICKETS:
        run = run_advance(run_start(ticket=Ticket.objects.get(ref=ref), model_name="rules").pk)
        packet = ReviewPacket.objects.get(run=run)
        accept = packet.summary is not None
        packet_review(
            packet_id=packet.pk,
            reviewer=lead,
            decision="accepted" if accept else "rejected",
            reason="" if accept else "wrong_conclusion",
            note="" if accept else "no draft",
        )
    return evaluation_run(evaluation_create(candidate_model="rules", reviewed=Evaluation.Reviewed.ALL))


@pytest.mark.parametrize("size", WIDTHS)
def test_the_list_the_comparison_its_run_links_and_the_csv(page, live_server, login, shot, evaluation, size):
    width = WIDTHS[size]
    page.set_viewport_size({"width": width, "height": 900})
    login("supervisor", PASSWORD)
    page.goto(f"{live_server.url}/admin/agentrun/evaluation/")
    row = page.locator("#result_list tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("rules")
    expect(row).to_contain_text("100%")  # agreement
    shot(f"60-evaluations-{size}")
    assert page.evaluate("document.documentElement.scrollWidth") <= width

    row.locator("a").first.click()
    expect(page).to_have_url(re.compile(rf"/admin/agentrun/evaluation/{evaluation.pk}/change/$"))
    expect(page.locator("#content h1")).to_have_text(f"Evaluation {evaluation.pk}: rules against reviewed packets")
    cases = page.locator("#evaluation-cases tbody tr")
    expect(cases).to_have_count(len(TICKETS))
    expect(page.locator("#figure-agreement")).to_contain_text("100 % (")  # agreeing cases of accepted ones
    shot(f"61-evaluation-comparison-{size}")
    assert page.evaluate("document.documentElement.scrollWidth") <= width, "the page scrolls sideways"

    first = evaluation.cases.select_related("original_run__ticket").order_by("pk").first()
    row = cases.first
    expect(row).to_contain_text(first.original_run.ticket.ref)
    expect(row).to_contain_text("agrees")
    expect(row).to_contain_text(Status(first.status).label)  # the status as staff read it everywhere
    row.get_by_role("link", name=f"run {first.original_run_id}").click()
    expect(page.locator("#run-status")).to_have_attribute("data-status", first.original_run.status)
    expect(page.locator("#timeline")).to_be_visible()
    page.go_back()
    page.locator("#evaluation-cases tbody tr").first.get_by_role("link", name=f"run {first.candidate_run_id}").click()
    candidate = Run.objects.get(pk=first.candidate_run_id)
    assert candidate.purpose == Run.Purpose.EVALUATION
    expect(page.locator("#run-status")).to_have_attribute("data-status", candidate.status)
    expect(page.locator("#timeline")).to_contain_text("search_docs")
    shot(f"62-evaluation-candidate-run-{size}")
    page.go_back()

    href = page.locator("#evaluation-csv").get_attribute("href")
    assert href == f"/admin/agentrun/evaluation/{evaluation.pk}/csv/"
    csv = page.request.get(live_server.url + href)
    lines = csv.text().strip().splitlines()
    assert csv.headers["content-type"] == "text/csv" and lines[0].startswith("original run,candidate run,ticket")
    assert len(lines) == 1 + len(TICKETS) and lines[1].startswith(f"{first.original_run_id},{first.candidate_run_id},")
