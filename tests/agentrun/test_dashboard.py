"""The outcomes dashboard: the numbers, the server-drawn charts, the CSV exports, and who may see them."""

import csv
import io
import re
from datetime import UTC, date, datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from engine.models import ModelRequest, Run
from staff.dashboard import UNKNOWN_TOOL, outcomes
from staff.dashboard_csv import Table
from staff.periods import Period, PeriodError, period_parse
from staff.reviews import packet_review
from tests.support.staff import make_runs
from tickets.models import Ticket


@pytest.fixture
def five_runs(demo, supervisor_user):
    """One run per ending: COMPLETED, NEEDS_HELP, NO_PROGRESS, INVALID_OR_FORBIDDEN, TOOL_LIMIT."""
    runs = make_runs(5)
    packet_review(packet_id=runs[0].packet.pk, reviewer=supervisor_user, decision="accepted")
    packet_review(
        packet_id=runs[1].packet.pk, reviewer=supervisor_user, decision="rejected", reason="wrong_conclusion", note="no"
    )
    return runs


def test_outcomes_numbers(five_runs):
    out = outcomes(period=period_parse(first=None, last=None))
    assert out.total_runs == 5
    assert dict(out.by_stop_reason) == {
        "COMPLETED": 1,
        "NEEDS_HELP": 1,
        "NO_PROGRESS": 1,
        "INVALID_OR_FORBIDDEN": 1,
        "TOOL_LIMIT": 1,
    }
    assert out.completion_rate == 0.2 and out.acceptance_rate == 0.5
    assert out.medians == {"model_requests": 2, "tool_attempts": 2, "tokens": 1002, "cost_micros": 20}
    assert out.total_cost_micros == 100 and out.cost_per_accepted_micros == 100
    [rate] = out.tool_rates
    assert (rate.tool, rate.runs_proposing, rate.no_progress, rate.invalid_or_forbidden) == ("read_job_status", 5, 1, 1)
    assert out.reviews_timed == 2 and out.median_review_seconds >= 0


def test_the_acceptance_rate_counts_each_packets_latest_decision_once(five_runs, supervisor_user, staff_user):
    accepted, rejected = five_runs[0].packet.pk, five_runs[1].packet.pk
    packet_review(packet_id=accepted, reviewer=supervisor_user, decision="accepted")  # sent twice: adds nothing
    packet_review(
        packet_id=rejected, reviewer=staff_user, decision="accepted", note="J-42 after all", change_decision=True
    )
    packet_review(
        packet_id=accepted,
        reviewer=staff_user,
        decision="rejected",
        reason="wrong_conclusion",
        note="Wrong job.",
        change_decision=True,
    )
    packet_review(
        packet_id=accepted, reviewer=supervisor_user, decision="accepted", note="Right job.", change_decision=True
    )
    out = outcomes(period=period_parse(first=None, last=None))
    assert (out.accepted, out.reviewed, out.acceptance_rate) == (2, 2, 1.0)
    assert out.reviews_timed == 2  # the time to a packet's first review, once per packet


def test_period_excludes_runs_outside_it(five_runs):
    last_year = timezone.now().date() - timedelta(days=365)
    out = outcomes(period=period_parse(first=(last_year - timedelta(days=3)).isoformat(), last=last_year.isoformat()))
    assert out.total_runs == 0 and out.by_stop_reason == [] and out.completion_rate == 0


@pytest.mark.parametrize(
    "first,last",
    [
        ("2026-13-01", None),
        ("2026-05-02", "2026-05-01"),
        ("x", "y"),
        ("9999-12-31", "9999-12-31"),
        (None, "0001-01-01"),
        ("0001-01-01", None),
        ("1969-12-31", "1970-01-05"),
        (None, "99999-01-01"),
    ],
)
def test_bad_periods_are_refused(first, last):
    with pytest.raises(PeriodError):
        period_parse(first=first, last=last, today=date(2026, 12, 1))


def test_periods_at_the_edges_of_the_accepted_days():
    assert period_parse(first=None, last="1970-01-01") == Period(date(1970, 1, 1), date(1970, 1, 1))
    assert period_parse(first="9998-12-31", last="9998-12-31").until == datetime(9999, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    "query,problem",
    [
        ("first=9999-12-31&last=9999-12-31", "The first day, 9999-12-31, is outside 1970-01-01 to 9998-12-31."),
        ("last=0001-01-01", "The last day, 0001-01-01, is outside 1970-01-01 to 9998-12-31."),
        ("first=0001-01-01", "The first day, 0001-01-01, is outside 1970-01-01 to 9998-12-31."),
        (
            "first=2026-05-02&last=2026-05-01",
            "The first day, 2026-05-02, is after the last day, 2026-05-01: swap them.",
        ),
        ("first=2026-99-99", "The first day, “2026-99-99”, is not a date: write it YYYY-MM-DD."),
        ("first=yesterday", "The first day, “yesterday”, is not a date: write it YYYY-MM-DD."),
        ("preset=fortnight", "Choose a period: today, this week, last 7 days, last 30 days, this quarter, or dates."),
    ],
)
def test_a_bad_period_is_a_form_error_on_the_page_and_a_400_for_csv(supervisor_client, five_runs, query, problem):
    """Not the default period shown instead: the error, beside the dates, and no figures until it is fixed."""
    page = supervisor_client.get(reverse("outcomes") + f"?{query}")
    assert page.status_code == 200
    text = page.content.decode()
    errors = text[text.index('id="period-errors"') :]
    assert problem in errors[: errors.index("</div>")]
    assert 'id="total-runs"' not in text and 'id="figures"' not in text and 'class="chart' not in text
    response = supervisor_client.get(reverse("outcomes-csv", args=["runs"]) + f"?{query}")
    assert (response.status_code, response["Content-Type"]) == (400, "text/plain")
    assert response.content.decode() == problem


def test_dashboard_page_draws_its_charts_on_the_server_with_no_external_assets(supervisor_client, five_runs):
    page = supervisor_client.get(reverse("outcomes")).content.decode()
    assert page.count('class="chart ') == 5
    assert 'aria-label="Runs by stop reason"' in page and 'aria-label="Runs per day by outcome"' in page
    assert 'aria-label="Rejected packets by reason"' in page
    assert "<text" not in page  # every word of a chart is HTML, which keeps its size on a narrow screen
    assert 'id="completion-rate">20%' in page and 'id="acceptance-rate">50%' in page
    assert "read_job_status · Refused a proposal" in page and "Repeated the last lookup" in page
    words = re.sub(r'href="[^"]*"', "", page)  # the codes stay in the links' queries and the CSVs
    assert "NO_PROGRESS" not in words and "INVALID_OR_FORBIDDEN" not in words
    external = re.findall(r'(?:src|href)="((?:https?:)?//[^"]*)"', page, flags=re.IGNORECASE)
    assert external == [], external


def test_every_chart_has_a_csv_export(supervisor_client, five_runs):
    today = timezone.now().date().isoformat()
    for name in Table.values:
        response = supervisor_client.get(reverse("outcomes-csv", args=[name]) + f"?first={today}&last={today}")
        assert response.status_code == 200 and response["Content-Type"] == "text/csv"
        rows = list(csv.reader(io.StringIO(response.getvalue().decode())))  # the runs CSV is streamed
        assert len(rows) >= 2
    stop = supervisor_client.get(reverse("outcomes-csv", args=["stop-reasons"])).content.decode()
    assert "COMPLETED,Completed,1,0.2000,0,\r\n" in stop  # none in the 7 days before
    runs = list(
        csv.reader(io.StringIO(supervisor_client.get(reverse("outcomes-csv", args=["runs"])).getvalue().decode()))
    )
    assert len(runs) == 6


def test_unknown_chart_and_bad_period_in_csv_are_4xx(supervisor_client, five_runs):
    assert supervisor_client.get(reverse("outcomes-csv", args=["nope"])).status_code == 404
    assert supervisor_client.get(reverse("outcomes-csv", args=["runs"]) + "?first=nope").status_code == 400


def test_support_staff_cannot_open_the_dashboard_or_its_exports(staff_client, five_runs):
    response = staff_client.get(reverse("outcomes"))
    assert response.status_code == 403
    assert "Only Supervisors may see the outcomes dashboard and the knowledge gaps." in response.content.decode()
    assert staff_client.get(reverse("outcomes-csv", args=["runs"])).status_code == 403


def test_admin_index_links_the_dashboard_for_supervisors_only(staff_client, supervisor_client, demo):
    assert reverse("outcomes") in supervisor_client.get(reverse("admin:index")).content.decode()
    assert reverse("outcomes") not in staff_client.get(reverse("admin:index")).content.decode()


def _csv(client, name: str) -> list[list[str]]:
    response = client.get(reverse("outcomes-csv", args=[name]))
    assert response.status_code == 200
    return list(csv.reader(io.StringIO(response.getvalue().decode())))


def _propose(run, *names: str) -> None:
    """Later model requests of `run` proposing calls to `names`, the last one last."""
    request = ModelRequest.objects.get(run=run, seq=1)
    for seq, name in enumerate(names, start=2):
        request.pk, request.seq, request.proposal = None, seq, f"call {name}"
        request.save(force_insert=True)


@pytest.fixture
def unknown_tools(five_runs):
    """The NO_PROGRESS run ends on a call to `=1+1`; the INVALID_OR_FORBIDDEN one proposes two unknown names."""
    _propose(five_runs[2], "=1+1")
    _propose(five_runs[3], '=HYPERLINK("http://example.test")', "@SUM(A1)")
    return five_runs


def test_tool_names_not_in_the_dispatch_table_are_one_unknown_tool_row(unknown_tools):
    rates = [
        (t.tool, t.runs_proposing, t.no_progress, t.invalid_or_forbidden)
        for t in outcomes(period=period_parse(first=None, last=None)).tool_rates
    ]
    assert rates == [("read_job_status", 5, 0, 0), (UNKNOWN_TOOL, 2, 1, 1)]


def test_unknown_tool_names_reach_neither_the_page_nor_the_csv(supervisor_client, unknown_tools):
    page = supervisor_client.get(reverse("outcomes")).content.decode()
    assert "unknown tool · Repeated the last lookup" in page
    assert "1+1" not in page and "HYPERLINK" not in page and "SUM(A1)" not in page
    assert _csv(supervisor_client, "tool-rates")[1:] == [
        ["read_job_status", "5", "0", "0.0000", "0", "0.0000"],
        ["unknown tool", "2", "1", "0.5000", "1", "0.5000"],
    ]


def test_csv_cells_that_would_start_a_formula_are_quoted(supervisor_client, five_runs):
    Ticket.objects.filter(ref="T-1001").update(ref="=1+1")
    rows = _csv(supervisor_client, "runs")
    assert {row[1] for row in rows[1:]} == {"'=1+1"}
    assert [row[7] for row in rows[1:]] == ["2"] * 5  # numbers stay numbers


def _day(offset: int) -> str:
    return (timezone.now().date() - timedelta(days=offset)).isoformat()


def test_the_daily_trend_counts_runs_per_day_by_outcome_and_days_without_runs_are_zero(supervisor_client, five_runs):
    rows = list(
        csv.reader(
            io.StringIO(
                supervisor_client.get(
                    reverse("outcomes-csv", args=["daily"]) + f"?first={_day(2)}&last={_day(0)}"
                ).content.decode()
            )
        )
    )
    assert rows == [
        ["day", "completed", "handed_to_a_person", "other_endings", "not_ended", "runs"],
        [_day(2), "0", "0", "0", "0", "0"],
        [_day(1), "0", "0", "0", "0", "0"],
        [_day(0), "1", "1", "3", "0", "5"],
    ]


def test_a_run_not_ended_yet_is_its_own_series_in_the_trend(five_runs):
    five_runs[4].__class__.objects.filter(pk=five_runs[4].pk).update(status="RUNNING")
    [today] = outcomes(period=period_parse(first=_day(0), last=_day(0))).daily
    assert today.counts == (1, 1, 2, 1) and today.total == 5


def test_the_trend_chart_links_each_bar_to_its_runs_for_that_day(supervisor_client, five_runs):
    page = supervisor_client.get(reverse("outcomes") + f"?first={_day(6)}&last={_day(0)}").content.decode()
    chart = page[page.index('aria-label="Runs per day by outcome"') :]
    chart = chart[: chart.index("</svg>")]
    links = re.findall(r'<a href="([^"]+)" class="bar-link">', chart)
    assert len(links) == 3  # today's completed, handed-over and other endings; the empty days draw nothing
    changelist = reverse("admin:agentrun_run_changelist")
    handed = [link for link in links if "status__in=NEEDS_HELP&" in link.replace("&amp;", "&")]
    assert handed and handed[0].startswith(changelist)
    shown = supervisor_client.get(handed[0].replace("&amp;", "&"))
    assert [r.status for r in shown.context["cl"].result_list] == ["NEEDS_HELP"]
    other = [link for link in links if "NO_PROGRESS" in link][0].replace("&amp;", "&")
    assert sorted(r.status for r in supervisor_client.get(other).context["cl"].result_list) == [
        "INVALID_OR_FORBIDDEN",
        "NO_PROGRESS",
        "TOOL_LIMIT",
    ]


def test_stop_reason_bars_and_rows_link_to_the_runs_of_the_period(supervisor_client, five_runs):
    last_week = f"?first={_day(7)}&last={_day(7)}"
    page = supervisor_client.get(reverse("outcomes") + f"?first={_day(3)}&last={_day(0)}").content.decode()
    chart = page[page.index('aria-label="Runs by stop reason"') :]
    links = re.findall(r'<a class="sa-hbar bar-link" href="([^"]+)">', chart[: chart.index('id="stop-rows"')])
    assert len(links) == 5
    completed = [link for link in links if "status__in=COMPLETED&" in link.replace("&amp;", "&")][0]
    assert completed.replace("&amp;", "&") in page[page.index('id="stop-rows"') :].replace("&amp;", "&")
    assert len(supervisor_client.get(completed.replace("&amp;", "&")).context["cl"].result_list) == 1
    empty = supervisor_client.get(reverse("outcomes") + last_week).content.decode()
    assert "bar-link" not in empty


def test_money_on_the_dashboard_and_in_its_csvs_is_in_dollars(supervisor_client, five_runs):
    """Totals to the cent, per-run figures to a hundredth of a cent, on the page and in the CSVs alike."""
    for run, micros in zip(five_runs, [1_234_567, 12_345, 100, 20_000, 5], strict=True):
        Run.objects.filter(pk=run.pk).update(cost_used_micros=micros)
    page = supervisor_client.get(reverse("outcomes")).content.decode()
    figures = page[page.index('id="figures"') :]
    assert "micro" not in figures

    def shown(code: str) -> str:
        row = figures[figures.index(f'id="figure-{code}"') :]
        return re.search(r'<td class="value">([^<]*)</td>', row[: row.index("</tr>")]).group(1)

    assert shown("total_cost_usd") == "$1.27"  # 1,267,017 micro-dollars
    assert shown("median_cost_usd") == "$0.0123"  # 12,345
    assert shown("cost_per_accepted_packet_usd") == "$1.2670"  # one accepted packet
    rows = {row[0]: row for row in _csv(supervisor_client, "figures")}
    assert rows["total_cost_usd"][2:] == ["usd", "1.27", "0.00", "1.27"]
    assert rows["median_cost_usd"][3:5] == ["0.0123", ""]  # no run the week before: no median
    runs = _csv(supervisor_client, "runs")
    assert runs[0][10] == "cost_usd"
    assert sorted(row[10] for row in runs[1:]) == ["0.0000", "0.0001", "0.0123", "0.0200", "1.2346"]
