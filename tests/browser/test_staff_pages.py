"""Every staff page as a supervisor sees it, at 1400 px and at 390 px (no sideways scrolling), with screenshots;
and the outcomes dashboard's daily trend, whose bars open their runs."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from engine.models import Approval, ReviewPacket, Run
from engine.services import investigation_start
from tests.support.staff import PASSWORD, make_runs
from tickets.models import Ticket

WIDTHS = {"desktop": 1400, "phone": 390}


@pytest.fixture
def seeded(supervisor_user, demo_committed) -> dict[str, str]:
    """Runs for the demo's tickets (a completed one, a refused one, one waiting for approval); the pages to visit."""
    done = investigation_start(ticket=Ticket.objects.get(ref="T-1001"))
    investigation_start(ticket=Ticket.objects.get(ref="T-1002"))
    investigation_start(ticket=Ticket.objects.get(ref="T-1004"))  # no article answers it: a knowledge gap
    waiting = investigation_start(ticket=Ticket.objects.get(ref="T-1006"))
    make_runs(6)
    ticket = Ticket.objects.get(ref="T-1001")
    packet = ReviewPacket.objects.get(run_id=done.pk)
    approval = Approval.objects.filter(run_id=waiting.pk).first()
    pages = {
        "index": "/admin/",
        "tickets": "/admin/tickets/ticket/",
        "ticket": f"/admin/tickets/ticket/{ticket.pk}/change/",
        "runs": "/admin/agentrun/run/",
        "run": f"/admin/agentrun/run/{done.pk}/change/",
        "packet": f"/admin/agentrun/reviewpacket/{packet.pk}/change/",
        "queue": "/admin/agentrun/reviewpacket/",
        "approvals": "/admin/agentrun/approval/",
        "dashboard": "/admin/outcomes/",
        "gaps": "/admin/knowledge-gaps/",
        "evaluations": "/admin/agentrun/evaluation/",
    }
    if approval:
        pages["approval"] = f"/admin/agentrun/approval/{approval.pk}/change/"
    return pages


@pytest.mark.parametrize("size", WIDTHS)
def test_every_staff_page_fits_its_width(page, live_server, login, shot, seeded, size):
    page.set_viewport_size({"width": WIDTHS[size], "height": 900})
    login("supervisor", PASSWORD)
    for name, url in seeded.items():
        response = page.goto(live_server.url + url)
        assert response.status == 200, (name, response.status)
        expect(page.locator("#site-name")).to_contain_text("supportagent")
        shot(f"50-{name}-{size}")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= WIDTHS[size], f"{name} scrolls sideways at {WIDTHS[size]} px ({width} px wide)"


def test_the_daily_trend_is_drawn_and_a_bar_opens_its_runs(
    page, live_server, login, shot, supervisor_user, demo_committed
):
    make_runs(5)  # today: completed, handed to a person, three other endings
    login("supervisor", PASSWORD)
    page.goto(f"{live_server.url}/admin/outcomes/")
    chart = page.locator("#chart-daily svg")
    expect(chart).to_be_visible()
    expect(chart.locator("a.bar-link")).to_have_count(3)
    shot("51-dashboard-daily-trend")
    chart.locator("a.bar-link", has=page.locator("rect[fill='#e0a526']")).click()
    expect(page).to_have_url(re.compile(r"/admin/agentrun/run/\?.*status__in=NEEDS_HELP"))
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    assert Run.objects.filter(status="NEEDS_HELP").count() == 1
    shot("52-daily-trend-bar-to-runs")
