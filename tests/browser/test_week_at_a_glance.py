"""A supervisor's week at a glance, at 1400 and 390 px, in Debian's Chromium, with screenshots: the dashboard's
periods and comparisons, one time zone on every page (summaries and evidence included), and tables and calls
that stay readable on a phone."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from engine.models import Approval, PacketReview, ReviewPacket, Run
from engine.services import investigation_start
from staff.reviews import packet_review
from tests.support.staff import PASSWORD, make_runs
from tickets.models import Ticket

WIDTHS = {"desktop": 1400, "phone": 390}
SMALLEST_LABEL_PX = 11

# The smallest size, in CSS pixels as drawn, of any text in the dashboard's charts: an HTML element's computed
# font size, or an SVG text's font size times the scale its SVG is drawn at.
CHART_TEXT_SIZES = """() => {
  const sizes = [];
  document.querySelectorAll("#outcomes .chart").forEach((chart) => {
    chart.querySelectorAll("*").forEach((el) => {
      const own = Array.from(el.childNodes).some((n) => n.nodeType === 3 && n.data.trim());
      if (!own || el.closest("title")) return;
      let size = parseFloat(getComputedStyle(el).fontSize);
      if (el instanceof SVGElement && el.getScreenCTM()) size *= el.getScreenCTM().a;
      sizes.push([size, el.tagName, el.textContent.trim().slice(0, 30)]);
    });
  });
  return sizes;
}"""

# Where each call on the page wraps: the characters either side of every line break inside it.
CALL_WRAPS = """() => Array.from(document.querySelectorAll("code.sa-call")).map((code) => {
  const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT), range = document.createRange();
  const wraps = [];
  let before = null;
  while (walker.nextNode()) {
    const node = walker.currentNode;
    for (let i = 0; i < node.length; i++) {
      range.setStart(node, i); range.setEnd(node, i + 1);
      const box = range.getClientRects()[0];
      if (!box || !box.width) continue;
      if (before && box.top > before.top + 2) wraps.push(before.ch + "|" + node.data[i]);
      before = {ch: node.data[i], top: box.top};
    }
  }
  return [code.textContent, wraps];
})"""
BREAKS_AFTER = set(" _/,:=&?.")


def _fits(page, width: int) -> None:
    scrolled = page.evaluate("document.documentElement.scrollWidth")
    assert scrolled <= width, f"{page.url} scrolls sideways at {width} px ({scrolled} px wide)"


def _calls_break_between_words(page) -> int:
    calls = page.evaluate(CALL_WRAPS)
    for text, wraps in calls:
        inside = [w for w in wraps if w[0] not in BREAKS_AFTER and w[2] != " "]
        assert not inside, f"{text!r} wraps inside a word at {inside}"
    return len(calls)


@pytest.fixture
def fortnight(supervisor_user, demo_committed) -> dict[str, ReviewPacket]:
    """Four runs this morning (one accepted with its reply edited, two rejected for different reasons, one
    pending) and two eight days ago (one accepted with its reply as suggested, one rejected)."""
    now = timezone.now()
    runs = make_runs(
        4, endings=[("COMPLETED", ""), ("COMPLETED", ""), ("NEEDS_HELP", ""), ("COMPLETED", "")], created_at=now
    )
    earlier = make_runs(2, endings=[("COMPLETED", ""), ("NEEDS_HELP", "")], created_at=now - timedelta(days=8))
    ReviewPacket.objects.filter(run__in=[runs[0], earlier[0]]).update(reply="Ask a workspace owner to make you editor")
    packets = {name: ReviewPacket.objects.get(run=r) for name, r in zip("abcdef", [*runs, *earlier], strict=True)}
    u = supervisor_user
    packet_review(
        packet_id=packets["a"].pk, reviewer=u, decision="accepted", reply="Ask a workspace owner to make you Editor"
    )
    packet_review(packet_id=packets["b"].pk, reviewer=u, decision="rejected", reason="wrong_conclusion", note="J-41")
    packet_review(packet_id=packets["c"].pk, reviewer=u, decision="rejected", reason="no_article", note="none")
    packet_review(packet_id=packets["e"].pk, reviewer=u, decision="accepted")
    packet_review(packet_id=packets["f"].pk, reviewer=u, decision="rejected", reason="wrong_conclusion", note="no")
    return packets


@pytest.mark.parametrize("size", WIDTHS)
def test_the_week_at_a_glance(page, live_server, login, shot, fortnight, size):
    width = WIDTHS[size]
    page.set_viewport_size({"width": width, "height": 900})
    login("supervisor", PASSWORD)
    page.goto(f"{live_server.url}/admin/outcomes/")
    expect(page.locator('#presets a[aria-current="true"]')).to_have_text("Last 7 days")
    expect(page.locator("#figure-runs .value")).to_have_text("4")
    expect(page.locator("#figure-runs .previous")).to_have_text("2")  # the 7 days before
    expect(page.locator("#figure-runs .change")).to_have_text("+2")
    expect(page.locator("#figure-acceptance_rate .value")).to_have_text("33.33%")
    expect(page.locator("#figure-acceptance_rate .previous")).to_have_text("50%")
    expect(page.locator("#figure-acceptance_rate .change")).to_have_text("−16.67 pts")
    expect(page.locator("#figure-reply_use_rate .value")).to_have_text("100%")
    expect(page.locator("#figure-reply_edit_distance .value")).to_have_text("2.5%")  # 1 character of 40
    expect(page.locator("#figure-reply_edit_distance .previous")).to_have_text("0%")
    expect(page.locator("#reason-rows")).to_contain_text("Wrong conclusion")
    expect(page.locator("#reason-rows")).to_contain_text("No article answers it")
    shot(f"80-dashboard-last-7-days-{size}")
    _fits(page, width)
    sizes = page.evaluate(CHART_TEXT_SIZES)
    assert len(sizes) > 10 and min(s for s, *_ in sizes) >= SMALLEST_LABEL_PX, sorted(sizes)[:3]

    page.locator("#presets a", has_text="Last 30 days").click()
    expect(page.locator('#presets a[aria-current="true"]')).to_have_text("Last 30 days")
    expect(page.locator("#figure-runs .value")).to_have_text("6")
    expect(page.locator("#figure-runs .previous")).to_have_text("0")
    page.locator("#presets a", has_text="Today").click()
    expect(page.locator("#figure-runs .value")).to_have_text("4")
    expect(page.locator("#previous-period")).to_have_text(re.compile(r"^(\d{4}-\d\d-\d\d) to \1$"))  # yesterday
    shot(f"81-dashboard-today-{size}")

    page.locator("#reason-rows a", has_text="Wrong conclusion").click()
    expect(page).to_have_url(re.compile(r"/admin/agentrun/reviewpacket/\?.*reason=wrong_conclusion"))
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(1)  # this period's, not the one of eight days ago
    expect(rows.first.locator("a.sa-open")).to_have_attribute("href", re.compile(f"/reviewpacket/{fortnight['b'].pk}/"))
    shot(f"82-rejected-for-a-wrong-conclusion-{size}")
    _fits(page, width)


@pytest.mark.parametrize("size", WIDTHS)
def test_a_reversed_or_garbled_period_is_a_form_error(page, live_server, login, shot, fortnight, size):
    page.set_viewport_size({"width": WIDTHS[size], "height": 900})
    login("supervisor", PASSWORD)
    page.goto(f"{live_server.url}/admin/outcomes/")
    page.fill("#period-first", "2026-05-02")
    page.fill("#period-last", "2026-05-01")
    page.locator("#period button").click()
    expect(page.locator("#period-errors")).to_contain_text(
        "The first day, 2026-05-02, is after the last day, 2026-05-01"
    )
    expect(page.locator("#figures")).to_have_count(0)
    expect(page.locator("#total-runs")).to_have_count(0)
    shot(f"83-dashboard-reversed-period-{size}")
    page.goto(f"{live_server.url}/admin/outcomes/?first=next+tuesday&last=2026-05-01")
    expect(page.locator("#period-errors")).to_contain_text("“next tuesday”, is not a date: write it YYYY-MM-DD")
    expect(page.locator("#figures")).to_have_count(0)
    _fits(page, WIDTHS[size])


@pytest.mark.parametrize("size", WIDTHS)
def test_one_time_zone_on_every_page_summaries_and_evidence_included(
    page, live_server, login, shot, supervisor_user, ticket_t1001, size
):
    page.set_viewport_size({"width": WIDTHS[size], "height": 900})
    login("supervisor", PASSWORD)
    page.goto(f"{live_server.url}/admin/agentrun/staffpreference/")
    options = page.locator("select.sa-zones option")
    assert 350 < options.count() < 500
    assert "Factory" not in options.all_inner_texts() and "localtime" not in options.all_inner_texts()
    page.fill("#zone-search", "kathm")
    expect(page.locator("select.sa-zones option:not([hidden])")).to_have_count(1)
    expect(page.locator("#zone-count")).to_have_text("1 zone matches")
    page.fill("#zone-search", "+05:30")
    expect(page.locator("select.sa-zones option:not([hidden])")).to_have_count(3)  # Kolkata (common, all), Colombo
    page.fill("#zone-search", "new york")
    expect(page.locator("select.sa-zones option:not([hidden])")).to_have_count(2)  # among the common ones, and all
    page.fill("#zone-search", "kolkata")
    page.press("#zone-search", "Enter")
    expect(page.locator("select.sa-zones")).to_have_value("Asia/Kolkata")
    shot(f"84-zone-picker-searched-{size}")
    page.locator("input[name=_save]").click()
    expect(page.locator(".messagelist")).to_contain_text("Times are now shown in Asia/Kolkata.")

    page.goto(f"{live_server.url}/admin/tickets/ticket/{ticket_t1001.pk}/change/")
    page.click("#investigate")
    expect(page.locator("#run-progress")).to_have_attribute("data-status", "COMPLETED")
    page.click("#open-packet")
    failed = "2026-09-14 15:32:00 IST"  # J-42 failed at 2026-09-14T10:02:00Z
    for part in ("#summary", "#open-questions", "#evidence-E1 .excerpt"):
        expect(page.locator(part)).to_contain_text(failed)
        assert "10:02:00Z" not in page.locator(part).inner_text(), part
    expect(page.locator("#summary time").first).to_have_attribute("title", "stored as 2026-09-14T10:02:00Z")
    expect(page.locator("#packet")).to_contain_text(" IST · review state")  # the packet's own time, the same zone
    assert " UTC" not in page.locator("#packet").inner_text()
    shot(f"85-packet-in-one-zone-{size}")
    _fits(page, WIDTHS[size])
    packet = ReviewPacket.objects.get()
    assert "2026-09-14T10:02:00Z" in packet.summary  # stored as it was written


@pytest.fixture
def busy_day(supervisor_user, demo_committed) -> dict[str, str]:
    """A run waiting for approval (its call on the run's page and the approvals list), a packet of a refused
    call, and a queue of packets; the pages whose tables are checked."""
    done = investigation_start(ticket=Ticket.objects.get(ref="T-1001"))
    waiting = investigation_start(ticket=Ticket.objects.get(ref="T-1006"))
    assert Approval.objects.filter(run_id=waiting.pk).exists()
    make_runs(6)
    packet = ReviewPacket.objects.get(run_id=done.pk)
    return {
        "approvals": "/admin/agentrun/approval/",
        "queue": "/admin/agentrun/reviewpacket/",
        "tickets": "/admin/tickets/ticket/",
        "run": f"/admin/agentrun/run/{waiting.pk}/change/",
        "packet": f"/admin/agentrun/reviewpacket/{packet.pk}/change/",
    }


# Each list's status column, which must stay on screen in every row.
STATUS_CELLS = {
    "approvals": "#result_list tbody td.field-shown_state",
    "queue": "#result_list tbody td.field-review_state",
    "tickets": "#result_list tbody td.field-latest_run_status",
    "run": "#approvals tbody tr > td:nth-child(3)",
}


@pytest.mark.parametrize("size", WIDTHS)
def test_tables_keep_their_status_in_view_and_calls_break_between_words(page, live_server, login, shot, busy_day, size):
    width = WIDTHS[size]
    page.set_viewport_size({"width": width, "height": 900})
    login("supervisor", PASSWORD)
    calls = 0
    for name, url in busy_day.items():
        page.goto(live_server.url + url)
        shot(f"86-{name}-{size}")
        _fits(page, width)
        if name in STATUS_CELLS:
            cells = page.locator(STATUS_CELLS[name])
            assert cells.count() >= 1, name
            for i in range(cells.count()):
                box = cells.nth(i).bounding_box()
                assert box and box["width"] > 0 and 0 <= box["x"] and box["x"] + box["width"] <= width, (name, i, box)
                assert cells.nth(i).inner_text().strip(), (name, i)
            if size == "phone" and name != "run":  # a card: the column's name beside its value
                expect(cells.first).to_have_attribute("data-label", re.compile(r"state|latest run", re.IGNORECASE))
        calls += _calls_break_between_words(page)
    assert calls >= 4  # the approvals list, the run's page and the packet's attempts show calls
    assert PacketReview.objects.count() == 0 and Run.objects.filter(status="WAITING_APPROVAL").count() == 1
