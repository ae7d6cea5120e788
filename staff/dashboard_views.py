"""The supervisors' pages in the admin: the outcomes dashboard and the knowledge gaps, each with its CSV."""

from __future__ import annotations

from decimal import Decimal

from django.contrib import admin, messages
from django.db.models import Count, Min
from django.http import HttpResponse, HttpResponseNotFound
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.http import urlencode

from engine.statuses import Status, stop_name
from kit.csvexport import csv_response, csv_stream_response
from kit.money import usd_text
from staff.access import access_knowledge_gaps
from staff.dashboard import Outcomes, outcomes_compared, reason_label, rejected_packets_url, runs_url
from staff.dashboard_charts import Bar, bar_chart, trend_chart
from staff.dashboard_csv import PARTS, Table, csv_rows, runs_csv_rows
from staff.dashboard_figures import Figure, Unit, figures
from staff.gaps import csv_rows as gaps_csv_rows
from staff.pages import staff_page
from staff.periods import DEFAULT_PRESET, Period, PeriodForm, Preset, preset_period
from staff.queue import packets_pending

NONE_YET = "—"  # a figure of nothing (no ended run, no reviewed packet) is not 0
MINUS = "\u2212"


def _form(request, *, default: Preset = DEFAULT_PRESET) -> PeriodForm:
    return PeriodForm(request.GET, today=timezone.localdate(), zone=timezone.get_current_timezone(), default=default)


@staff_page(requires="agentrun.view_dashboard")
def dashboard_view(request):
    form = _form(request)
    context = {
        **admin.site.each_context(request),
        "title": "Outcomes",
        "form": form,
        "Table": Table,
        "zone": timezone.get_current_timezone_name(),
    }
    if not form.is_valid():  # the errors are shown beside the dates; no figures until they are fixed
        context["presets"] = [(p.value, p.label, False) for p in Preset]
        return TemplateResponse(request, "admin/agentrun/outcomes.html", context)
    period: Period = form.cleaned_data["period"]
    out, before = outcomes_compared(period=period)
    context |= {
        "out": out,
        "before": before,
        "previous": before.period,
        "presets": [(p.value, p.label, p.value == period.preset) for p in Preset],
        "query": _query(period),
        "dates": urlencode({"first": period.first.isoformat(), "last": period.last.isoformat()}),
        "figure_rows": [_figure_row(f) for f in figures(out, before)],
        "completion": percent_text(out.completion_rate) if out.ended else NONE_YET,
        "acceptance": percent_text(out.acceptance_rate) if out.reviewed else NONE_YET,
        "backlog": packets_pending().aggregate(count=Count("id"), oldest=Min("created_at")),
        "no_progress": stop_name(Status.NO_PROGRESS),
        "invalid": stop_name(Status.INVALID_OR_FORBIDDEN),
        "tool_rows": [
            (t, percent_text(t.rate(t.no_progress)), percent_text(t.rate(t.invalid_or_forbidden)))
            for t in out.tool_rates
        ],
        "stop_rows": _stop_rows(out, before),
        "reason_rows": _reason_rows(out, before),
        "rejected_url": rejected_packets_url(None, period=period),
        "charts": _charts(out),
    }
    return TemplateResponse(request, "admin/agentrun/outcomes.html", context)


def _query(period: Period) -> str:
    """The period as the CSV links name it: its dates, and the preset that says what it is compared with."""
    query = {"first": period.first.isoformat(), "last": period.last.isoformat()}
    return urlencode({"preset": period.preset, **query} if period.preset else query)


def _stop_rows(out: Outcomes, before: Outcomes):
    then = dict(before.by_stop_reason)
    since, until = out.period.since, out.period.until
    return [
        (runs_url([s], since=since, until=until), stop_name(s), n, percent_text(out.share(n)), then.get(s, 0))
        for s, n in out.by_stop_reason
    ]


def _reason_rows(out: Outcomes, before: Outcomes):
    then = dict(before.by_reason)
    return [
        (
            rejected_packets_url(reason, period=out.period),
            reason_label(reason),
            n,
            percent_text(n / out.rejected),
            then.get(reason, 0),
        )
        for reason, n in out.by_reason
    ]


def _charts(out: Outcomes) -> list[tuple[str, str, object]]:
    since, until = out.period.since, out.period.until
    charts = {
        Table.DAILY: trend_chart(out, title=Table.DAILY.label),
        Table.STOP_REASONS: bar_chart(
            [
                Bar(stop_name(s), n, f"{n} ({percent_text(out.share(n))})", runs_url([s], since=since, until=until))
                for s, n in out.by_stop_reason
            ],
            title=Table.STOP_REASONS.label,
            empty="No runs in this period.",
        ),
        Table.REJECTION_REASONS: bar_chart(
            [
                Bar(label, n, f"{n} ({share})", url)
                for url, label, n, share, _ in _reason_rows(out, out)  # the previous counts are in the table
            ],
            title=Table.REJECTION_REASONS.label,
            empty="No packet of this period was rejected.",
        ),
        Table.RATES: bar_chart(
            [
                Bar("Completion rate", out.completion_rate, percent_text(out.completion_rate)),
                Bar("Acceptance rate", out.acceptance_rate, percent_text(out.acceptance_rate)),
            ],
            title=Table.RATES.label,
            max_value=1,
            empty="",
        ),
        Table.TOOL_RATES: bar_chart(
            [
                Bar(f"{t.tool} · {stop_name(status)}", t.rate(n), percent_text(t.rate(n)))
                for t in out.tool_rates
                for status, n in (
                    (Status.NO_PROGRESS, t.no_progress),
                    (Status.INVALID_OR_FORBIDDEN, t.invalid_or_forbidden),
                )
            ],
            title=Table.TOOL_RATES.label,
            max_value=1,
            empty="No tool was proposed in this period.",
        ),
    }
    return [(name, name.label, svg) for name, svg in charts.items()]


# --- how the page writes a figure ----------------------------------------------------------


def percent_text(fraction: float | Decimal) -> str:
    """A fraction as a percentage, to at most two decimals, no trailing zeros: "20%", "33.33%"."""
    return f"{_plain(Decimal(str(fraction)) * 100, places=2)}%"


def _plain(value: Decimal, *, places: int) -> str:
    """`value` rounded to `places`, with thousands separators and no trailing zeros: "1,001.5"."""
    text = f"{value.quantize(Decimal(1).scaleb(-places)):,f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def figure_text(value: Decimal | int | None, unit: str) -> str:
    if value is None:
        return NONE_YET
    if unit == Unit.RATE:
        return percent_text(value)
    if unit == Unit.USD:
        return usd_text(Decimal(value))
    if unit == Unit.SECONDS:
        return f"{Decimal(value):,} s"
    return _plain(Decimal(value), places=4)


def change_text(figure: Figure) -> str:
    """The change from the previous period: "+3", "−2.5 pts", "+$0.01", "±0"; "—" when either is missing."""
    change = figure.change
    if change is None:
        return NONE_YET
    if change == 0:
        return "±0"
    sign = "+" if change > 0 else MINUS
    size = abs(Decimal(change))
    if figure.unit == Unit.RATE:
        return f"{sign}{_plain(size * 100, places=2)} pts"
    if figure.unit == Unit.USD:
        return f"{sign}{usd_text(size)}"
    return f"{sign}{figure_text(size, figure.unit)}"


def _figure_row(figure: Figure) -> tuple[Figure, str, str, str]:
    return (
        figure,
        figure_text(figure.value, figure.unit),
        figure_text(figure.previous, figure.unit),
        change_text(figure),
    )


@staff_page(requires="agentrun.view_dashboard")
def dashboard_csv(request, chart: str):
    if chart not in Table.values:
        return HttpResponseNotFound(f"No chart named {chart}.", content_type="text/plain")
    form = _form(request)
    if not form.is_valid():
        return HttpResponse(_problems(form), status=400, content_type="text/plain")
    period: Period = form.cleaned_data["period"]
    name = f"{chart}-{period.first}-{period.last}"
    if chart == Table.RUNS:
        return csv_stream_response(runs_csv_rows(period), filename=f"{name}.csv")
    out, before = outcomes_compared(period=period, parts=PARTS[chart])
    rows = csv_rows(out, before, chart)
    if chart == Table.FIGURES:
        name += f"-vs-{before.period.first}-{before.period.last}"
    return csv_response(rows, filename=f"{name}.csv")


def _problems(form: PeriodForm) -> str:
    return " ".join(str(e) for errors in form.errors.values() for e in errors)


def _gaps_period(request) -> tuple[Period, str]:
    """The knowledge gaps' period (by default the last 30 days), and what was wrong with the one asked for."""
    form = _form(request, default=Preset.LAST_30)
    if form.is_valid():
        return form.cleaned_data["period"], ""
    return preset_period(Preset.LAST_30, today=form.today, zone=form.zone), _problems(form)


@staff_page(requires="agentrun.view_dashboard")
def gaps_view(request):
    """What no article answered, grouped by topic, most asked first (staff.gaps)."""
    period, problem = _gaps_period(request)
    if problem:
        messages.error(request, f"{problem} Showing the last 30 days instead.")
    topics = access_knowledge_gaps(user=request.user, period=period)
    context = {
        **admin.site.each_context(request),
        "title": "Knowledge gaps",
        "period": period,
        "topics": topics,
        "tickets": sum(len(t.tickets) for t in topics),
        "query": f"first={period.first.isoformat()}&last={period.last.isoformat()}",
    }
    return TemplateResponse(request, "admin/agentrun/knowledge_gaps.html", context)


@staff_page(requires="agentrun.view_dashboard")
def gaps_csv(request):
    period, problem = _gaps_period(request)
    if problem:
        return HttpResponse(problem, status=400, content_type="text/plain")
    topics = access_knowledge_gaps(user=request.user, period=period)
    return csv_response(gaps_csv_rows(topics), filename=f"knowledge-gaps-{period.first}-{period.last}.csv")
