"""The dashboard's periods and comparisons: presets, the viewer's days, rejection reasons, suggested replies,
and a fixed data set whose figures the page and the CSVs both show, the previous period's included."""

from __future__ import annotations

import csv
import importlib
import io
import re
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.apps import apps as django_apps
from django.db.models import F
from django.urls import reverse

from engine.models import PacketReview, ReviewPacket, Run
from staff.dashboard import outcomes, outcomes_compared
from staff.dashboard_csv import PARTS, Table, csv_rows
from staff.periods import Period, Preset, period_parse, preset_period
from staff.reviews import packet_review
from tests.support.staff import make_runs

WEDNESDAY = date(2026, 9, 16)


@pytest.mark.parametrize(
    "preset,first,last,before",
    [
        (Preset.TODAY, "2026-09-16", "2026-09-16", ("2026-09-15", "2026-09-15")),
        (Preset.WEEK, "2026-09-14", "2026-09-16", ("2026-09-07", "2026-09-09")),  # Monday to today, a week before
        (Preset.LAST_7, "2026-09-10", "2026-09-16", ("2026-09-03", "2026-09-09")),
        (Preset.LAST_30, "2026-08-18", "2026-09-16", ("2026-07-19", "2026-08-17")),
        (Preset.QUARTER, "2026-07-01", "2026-09-16", ("2026-04-01", "2026-06-17")),  # 78 days of each quarter
    ],
)
def test_each_preset_names_its_days_and_the_days_it_is_compared_with(preset, first, last, before):
    period = period_parse(first=None, last=None, preset=preset, today=WEDNESDAY)
    assert (period.first.isoformat(), period.last.isoformat()) == (first, last)
    previous = period.previous()
    assert (previous.first.isoformat(), previous.last.isoformat()) == before
    assert previous.length == period.length
    # the page's CSV links carry the dates and the preset: the same period, compared the same way
    again = period_parse(first=first, last=last, preset=preset, today=WEDNESDAY + timedelta(days=1))
    assert again == period and again.previous() == previous


def test_a_quarter_is_compared_with_at_most_the_whole_quarter_before():
    period = preset_period(Preset.QUARTER, today=date(2026, 5, 31))  # 61 days of Q2; Q1 has 90
    assert period.previous() == Period(date(2026, 1, 1), date(2026, 3, 2))
    late = Period(date(2026, 7, 1), date(2026, 9, 30), preset=Preset.QUARTER)  # all 92 days of Q3; Q2 has 91
    assert late.previous() == Period(date(2026, 4, 1), date(2026, 6, 30))


def test_the_default_period_is_the_last_7_days_and_dates_typed_are_compared_with_as_many_days_before():
    assert period_parse(first=None, last=None, today=WEDNESDAY) == preset_period(Preset.LAST_7, today=WEDNESDAY)
    typed = period_parse(first="2026-09-01", last="2026-09-10", today=WEDNESDAY)
    assert typed.previous() == Period(date(2026, 8, 22), date(2026, 8, 31))


def test_days_are_the_viewers_days(demo):
    """A run at 23:30 UTC on 2 March is 3 March in Berlin: its day, its period and its links say so."""
    make_runs(1, endings=[("COMPLETED", "")], created_at=datetime(2026, 3, 2, 23, 30, tzinfo=UTC))
    berlin = ZoneInfo("Europe/Berlin")
    in_utc = outcomes(period=period_parse(first="2026-03-02", last="2026-03-03"))
    in_berlin = outcomes(period=period_parse(first="2026-03-02", last="2026-03-03", zone=berlin))
    assert [d.total for d in in_utc.daily] == [1, 0] and [d.total for d in in_berlin.daily] == [0, 1]
    assert outcomes(period=period_parse(first="2026-03-02", last="2026-03-02", zone=berlin)).total_runs == 0
    today = period_parse(first=None, last=None, preset="today", today=date(2026, 3, 3), zone=berlin)
    assert today.since == datetime(2026, 3, 2, 23, 0, tzinfo=UTC)


# --- a fixed data set: six runs in the week of 2 March 2026, two in the week before -----------------------

SUGGESTED = "Ask a workspace owner to make you editor"  # 40 characters
EDITED = "Ask a workspace owner to make you Editor"  # one changed: 1/40 = 0.025
WEEK = "?first=2026-03-02&last=2026-03-08"


def _run(status: str, *, day: int, micros: int, reply: str = "") -> ReviewPacket:
    [run] = make_runs(1, endings=[(status, "")], created_at=datetime(2026, 3, 1, 9, tzinfo=UTC) + timedelta(days=day))
    Run.objects.filter(pk=run.pk).update(cost_used_micros=micros)
    ReviewPacket.objects.filter(run=run).update(reply=reply)
    return ReviewPacket.objects.get(run=run)


def _review(packet: ReviewPacket, user, decision: str, *, after: int, reason: str = "", reply=None) -> None:
    note = "no" if decision == "rejected" else ""
    packet_review(packet_id=packet.pk, reviewer=user, decision=decision, reason=reason, note=note, reply=reply)
    at = packet.created_at + timedelta(seconds=after)
    PacketReview.objects.filter(packet=packet).update(created_at=at)
    ReviewPacket.objects.filter(pk=packet.pk).update(first_reviewed_at=at)  # as the review keeps it on its packet


@pytest.fixture
def two_weeks(demo, supervisor_user) -> dict[str, ReviewPacket]:
    u = supervisor_user
    packets = {
        "r1": _run("COMPLETED", day=1, micros=1_000_000, reply=SUGGESTED),
        "r2": _run("COMPLETED", day=2, micros=500_000, reply=SUGGESTED),
        "r3": _run("COMPLETED", day=3, micros=250_000),
        "r4": _run("NEEDS_HELP", day=4, micros=0),
        "r5": _run("NO_PROGRESS", day=5, micros=125_000),
        "r6": _run("COMPLETED", day=7, micros=5),
        "p1": _run("COMPLETED", day=-6, micros=2_000_000, reply=SUGGESTED),
        "p2": _run("NEEDS_HELP", day=-5, micros=0),
    }
    _review(packets["r1"], u, "accepted", after=60, reply=EDITED)
    _review(packets["r2"], u, "accepted", after=120, reply="")  # the suggestion not used
    _review(packets["r3"], u, "rejected", after=300, reason="wrong_conclusion")
    _review(packets["r4"], u, "rejected", after=30, reason="no_article")
    _review(packets["r6"], u, "accepted", after=90)  # no suggestion: not counted in the reply figures
    _review(packets["p1"], u, "accepted", after=600)  # the suggestion kept as it was
    _review(packets["p2"], u, "rejected", after=200, reason="wrong_conclusion")
    return packets


# code: (page's value, page's previous, page's change), (CSV's value, previous, change)
EXPECTED = {
    "runs": (("6", "2", "+4"), ("6", "2", "4")),
    "completion_rate": (("66.67%", "50%", "+16.67 pts"), ("0.6667", "0.5000", "0.1667")),
    "acceptance_rate": (("60%", "50%", "+10 pts"), ("0.6000", "0.5000", "0.1000")),
    "packets_reviewed": (("5", "2", "+3"), ("5", "2", "3")),
    "packets_rejected": (("2", "1", "+1"), ("2", "1", "1")),
    "median_seconds_to_review": (("90.0 s", "400.0 s", "−310.0 s"), ("90.0", "400.0", "-310.0")),
    "reply_use_rate": (("50%", "100%", "−50 pts"), ("0.5000", "1.0000", "-0.5000")),
    "reply_edit_distance": (("2.5%", "0%", "+2.5 pts"), ("0.0250", "0.0000", "0.0250")),
    "median_model_requests": (("2", "2", "±0"), ("2", "2", "0")),
    "median_tool_attempts": (("1", "1", "±0"), ("1", "1", "0")),
    "median_tokens": (("1,000", "1,000", "±0"), ("1000", "1000", "0")),
    "median_cost_usd": (("$0.1875", "$1.0000", "−$0.8125"), ("0.1875", "1.0000", "-0.8125")),
    "total_cost_usd": (("$1.88", "$2.00", "−$0.12"), ("1.88", "2.00", "-0.12")),
    "cost_per_accepted_packet_usd": (("$0.6250", "$2.0000", "−$1.3750"), ("0.6250", "2.0000", "-1.3750")),
}


def _csv(client, name: str, query: str = WEEK) -> list[list[str]]:
    response = client.get(reverse("outcomes-csv", args=[name]) + query)
    assert response.status_code == 200
    return list(csv.reader(io.StringIO(response.getvalue().decode())))  # the runs CSV is streamed


def _page_figures(client) -> dict[str, tuple[str, str, str]]:
    page = client.get(reverse("outcomes") + WEEK).content.decode()
    rows = re.findall(
        r'<tr id="figure-([a-z_]+)"[^>]*><th>[^<]*</th><td class="value">([^<]*)</td>'
        r'<td class="previous">([^<]*)</td><td class="change">([^<]*)</td>',
        page,
    )
    return {code: (value, previous, change) for code, value, previous, change in rows}


def test_the_page_and_the_csv_show_the_same_figures_for_both_periods(supervisor_client, two_weeks):
    shown = _page_figures(supervisor_client)
    rows = _csv(supervisor_client, "figures")
    assert rows[0] == ["measure", "label", "unit", "value", "previous", "change"]
    written = {row[0]: tuple(row[3:]) for row in rows[1:]}
    assert shown == {code: page for code, (page, _) in EXPECTED.items()}
    assert written == {code: sheet for code, (_, sheet) in EXPECTED.items()}


def test_the_previous_periods_figures_are_that_periods_own(supervisor_client, two_weeks):
    """The previous column is what the dashboard shows for the week before, asked for by its dates."""
    week_before = "?first=2026-02-23&last=2026-03-01"
    rows = {row[0]: row[3] for row in _csv(supervisor_client, "figures", week_before)[1:]}
    assert rows == {code: sheet[1] for code, (_, sheet) in EXPECTED.items()}


def test_the_figures_csv_is_named_for_both_periods(supervisor_client, two_weeks):
    response = supervisor_client.get(reverse("outcomes-csv", args=["figures"]) + WEEK)
    assert 'filename="figures-2026-03-02-2026-03-08-vs-2026-02-23-2026-03-01.csv"' in response["Content-Disposition"]


def test_rejections_are_broken_down_by_reason_beside_the_period_before(supervisor_client, two_weeks):
    rows = _csv(supervisor_client, "rejection-reasons")
    assert rows == [
        ["reason", "label", "packets", "share", "previous_packets", "previous_share"],
        ["wrong_conclusion", "wrong conclusion", "1", "0.5000", "1", "1.0000"],
        ["no_article", "no article answers it", "1", "0.5000", "0", "0.0000"],
    ]
    page = supervisor_client.get(reverse("outcomes") + WEEK).content.decode()
    table = page[page.index('id="reason-rows"') :]
    table = table[: table.index("</table>")]
    assert re.findall(r"<td>([^<]*)</td><td>([^<]*)</td><td>([^<]*)</td></tr>", table) == [
        ("1", "50%", "1"),
        ("1", "50%", "0"),
    ]


def test_a_reason_links_to_exactly_the_packets_it_counts(supervisor_client, two_weeks):
    page = supervisor_client.get(reverse("outcomes") + WEEK).content.decode()
    chart = page[page.index('id="chart-rejection-reasons"') :]
    links = dict(
        (label, href.replace("&amp;", "&"))
        for href, label in re.findall(r'<a href="([^"]+)">([^<]+)</a></td>', chart[: chart.index("</table>")])
    )
    assert set(links) == {"Wrong conclusion", "No article answers it"}

    def listed(url: str) -> set[int]:
        response = supervisor_client.get(url)
        assert response.status_code == 200, url
        return {p.pk for p in response.context["cl"].result_list}

    # the week before's wrong conclusion (p2) is not this week's
    assert listed(links["Wrong conclusion"]) == {two_weeks["r3"].pk}
    assert listed(links["No article answers it"]) == {two_weeks["r4"].pk}
    every = re.search(r'id="rejected-packets" href="([^"]+)"', page).group(1).replace("&amp;", "&")
    assert listed(every) == {two_weeks["r3"].pk, two_weeks["r4"].pk}


def test_a_changed_decision_counts_under_the_reason_it_stands_on(supervisor_client, supervisor_user, two_weeks):
    packet = two_weeks["r3"]
    packet_review(
        packet_id=packet.pk, reviewer=supervisor_user, decision="accepted", note="right after all", change_decision=True
    )
    packet_review(
        packet_id=packet.pk,
        reviewer=supervisor_user,
        decision="rejected",
        reason="unclear",
        note="on second reading",
        change_decision=True,
    )
    out, _ = outcomes_compared(period=period_parse(first="2026-03-02", last="2026-03-08"))
    assert out.by_reason == [("no_article", 1), ("unclear", 1)]
    url = reverse("admin:agentrun_reviewpacket_changelist") + "?state=rejected&reason=wrong_conclusion"
    assert list(supervisor_client.get(url).context["cl"].result_list) == [two_weeks["p2"]]


def test_every_run_carries_its_review_its_reason_and_its_reply_in_the_csv(supervisor_client, two_weeks):
    rows = _csv(supervisor_client, "runs")
    header = rows[0]
    assert header[:7] == ["run", "ticket", "created_at", "status", "status_label", "detail", "detail_label"]
    shown = [
        {k: row[header.index(k)] for k in ("status", "status_label", "review", "reason", "reason_label", "reply_used")}
        | {"change": row[header.index("reply_edit_distance")], "cost": row[header.index("cost_usd")]}
        for row in rows[1:]
    ]
    assert shown == [
        {"status": "COMPLETED", "status_label": "Completed", "review": "accepted", "reason": "", "reason_label": "",
         "reply_used": "yes", "change": "0.0250", "cost": "1.0000"},
        {"status": "COMPLETED", "status_label": "Completed", "review": "accepted", "reason": "", "reason_label": "",
         "reply_used": "no", "change": "", "cost": "0.5000"},
        {"status": "COMPLETED", "status_label": "Completed", "review": "rejected", "reason": "wrong_conclusion",
         "reason_label": "wrong conclusion", "reply_used": "", "change": "", "cost": "0.2500"},
        {"status": "NEEDS_HELP", "status_label": "Handed to a person", "review": "rejected", "reason": "no_article",
         "reason_label": "no article answers it", "reply_used": "", "change": "", "cost": "0.0000"},
        {"status": "NO_PROGRESS", "status_label": "Repeated the last lookup", "review": "pending", "reason": "",
         "reason_label": "", "reply_used": "", "change": "", "cost": "0.1250"},
        {"status": "COMPLETED", "status_label": "Completed", "review": "accepted", "reason": "", "reason_label": "",
         "reply_used": "", "change": "", "cost": "0.0000"},
    ]  # fmt: skip
    assert rows[1][header.index("created_at")] == "2026-03-02T09:00:00+00:00"


def test_csv_times_and_days_are_in_the_viewers_zone(supervisor_client, supervisor_user, two_weeks):
    from engine.models import StaffPreference

    StaffPreference.objects.update_or_create(user=supervisor_user, defaults={"time_zone": "Asia/Tokyo"})
    session = supervisor_client.session
    session.pop("staff_time_zone", None)
    session.save()
    rows = _csv(supervisor_client, "runs")
    assert rows[1][2] == "2026-03-02T18:00:00+09:00"
    daily = _csv(supervisor_client, "daily")
    assert [row[0] for row in daily[1:3]] == ["2026-03-02", "2026-03-03"]


def test_a_long_reply_is_measured_by_characters_over_the_longer_text(supervisor_client, supervisor_user, demo):
    suggestion = "x" * 3000
    packet = _run("COMPLETED", day=1, micros=0, reply=suggestion)
    _review(packet, supervisor_user, "accepted", after=10, reply=suggestion + "y" * 1000)
    out = outcomes(period=period_parse(first="2026-03-02", last="2026-03-08"))
    assert (out.replies_used, out.replies_suggested, str(out.mean_reply_change)) == (1, 1, "0.2500")


def test_packets_reviewed_before_the_packet_kept_its_decision_get_it_from_their_reviews(
    supervisor_client, supervisor_user, two_weeks
):
    """Migration 0022 fills the packet's reason, first review and reply change from the reviews already
    recorded: the dashboard counts the same after it as the reviews themselves would."""
    backfill = importlib.import_module("engine.migrations.0022_packet_decision_figures")._from_reviews
    packet_review(
        packet_id=two_weeks["r3"].pk, reviewer=supervisor_user, decision="accepted", note="right", change_decision=True
    )
    packet_review(  # a changed decision: the packet stands on the latest, its first review stays the first
        packet_id=two_weeks["r3"].pk,
        reviewer=supervisor_user,
        decision="rejected",
        reason="unclear",
        note="on second reading",
        change_decision=True,
    )
    kept = ("review_state", "review_reason", "first_reviewed_at", "reply_change")
    before = {p.pk: tuple(getattr(p, f) for f in kept) for p in ReviewPacket.objects.all()}
    page_before = _page_figures(supervisor_client)
    ReviewPacket.objects.update(review_reason="", first_reviewed_at=None, reply_change=None)

    backfill(django_apps, None)

    assert {p.pk: tuple(getattr(p, f) for f in kept) for p in ReviewPacket.objects.all()} == before
    assert before[two_weeks["r3"].pk][1] == "unclear" and before[two_weeks["r1"].pk][3] == pytest.approx(0.025)
    assert _page_figures(supervisor_client) == page_before


def test_packets_written_before_they_kept_their_runs_start_get_it_from_their_runs(supervisor_client, two_weeks):
    """Migration 0023 copies each packet's run start and purpose onto it: the dashboard counts the same after."""
    backfill = importlib.import_module("engine.migrations.0023_packet_run_created")._from_runs
    page_before = _page_figures(supervisor_client)
    ReviewPacket.objects.update(run_created_at=None, run_purpose=Run.Purpose.EVALUATION)
    assert outcomes(period=period_parse(first="2026-03-02", last="2026-03-08")).packets == 0

    backfill(django_apps, None)

    assert not ReviewPacket.objects.exclude(run_created_at=F("run__created_at")).exists()
    assert set(ReviewPacket.objects.values_list("run_purpose", flat=True)) == {Run.Purpose.INVESTIGATION}
    assert _page_figures(supervisor_client) == page_before


def test_a_charts_csv_reads_only_what_it_shows_and_shows_what_reading_everything_would(
    two_weeks, django_assert_max_num_queries
):
    period = period_parse(first="2026-03-02", last="2026-03-08")
    everything = outcomes_compared(period=period)
    for table in Table:
        if table != Table.RUNS:  # listed from the runs themselves (runs_csv_rows)
            assert csv_rows(*outcomes_compared(period=period, parts=PARTS[table]), table) == csv_rows(
                *everything, table
            ), table
    with django_assert_max_num_queries(1):  # the runs by day and status, and nothing else
        outcomes_compared(period=period, parts=PARTS[Table.DAILY])
