"""The supervisors' pages in the admin: the outcomes dashboard and the knowledge gaps, each with its CSV."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import Count, Min
from django.http import HttpResponse, HttpResponseNotFound
from django.template.response import TemplateResponse

from engine.budgets import dollars
from engine.statuses import Status, stop_name
from kit.csvexport import csv_response
from staff.access import access_knowledge_gaps
from staff.dashboard import (
    PeriodError,
    Table,
    charts,
    csv_rows,
    outcomes,
    percent,
    period_parse,
    runs_url,
)
from staff.gaps import csv_rows as gaps_csv_rows
from staff.pages import staff_page
from staff.queue import packets_pending

NONE_YET = "—"  # a rate of nothing (no ended run, no reviewed packet) is not 0 %


def _period(request):
    try:
        return period_parse(first=request.GET.get("first"), last=request.GET.get("last")), None
    except PeriodError as exc:
        return period_parse(first=None, last=None), str(exc)


@staff_page(requires="agentrun.view_dashboard")
def dashboard_view(request):
    period, problem = _period(request)
    if problem:
        messages.error(request, f"{problem} Showing the last 30 days instead.")
    out = outcomes(period=period)
    query = f"first={period.first.isoformat()}&last={period.last.isoformat()}"
    context = {
        **admin.site.each_context(request),
        "title": "Outcomes",
        "out": out,
        "charts": [(name, name.label, svg) for name, svg in charts(out).items()],
        "Table": Table,
        "medians": [
            ("Median model requests per run", out.medians.get("model_requests", 0)),
            ("Median tool attempts per run", out.medians.get("tool_attempts", 0)),
            ("Median tokens per run", out.medians.get("tokens", 0)),
            ("Median cost per run", dollars(round(out.medians.get("cost_micros", 0)))),
            ("Total cost", dollars(out.total_cost_micros)),
            (
                "Cost per accepted packet",
                dollars(round(out.cost_per_accepted_micros)) if out.cost_per_accepted_micros is not None else NONE_YET,
            ),
        ],
        "review_median": out.median_review_seconds,
        "query": query,
        "completion": percent(out.completion_rate) if out.ended else NONE_YET,
        "acceptance": percent(out.acceptance_rate) if out.reviewed else NONE_YET,
        "backlog": packets_pending().aggregate(count=Count("id"), oldest=Min("created_at")),
        "no_progress": stop_name(Status.NO_PROGRESS),
        "invalid": stop_name(Status.INVALID_OR_FORBIDDEN),
        "tool_rows": [
            (t, percent(t.rate(t.no_progress)), percent(t.rate(t.invalid_or_forbidden))) for t in out.tool_rates
        ],
        "stop_rows": [
            (runs_url([s], since=period.since, until=period.until), stop_name(s), n, percent(out.share(n)))
            for s, n in out.by_stop_reason
        ],
    }
    return TemplateResponse(request, "admin/agentrun/outcomes.html", context)


@staff_page(requires="agentrun.view_dashboard")
def dashboard_csv(request, chart: str):
    if chart not in Table.values:
        return HttpResponseNotFound(f"No chart named {chart}.", content_type="text/plain")
    period, problem = _period(request)
    if problem:
        return HttpResponse(problem, status=400, content_type="text/plain")
    rows = csv_rows(outcomes(period=period), chart)
    return csv_response(rows, filename=f"{chart}-{period.first}-{period.last}.csv")


@staff_page(requires="agentrun.view_dashboard")
def gaps_view(request):
    """What no article answered, grouped by topic, most asked first (staff.gaps)."""
    period, problem = _period(request)
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
    period, problem = _period(request)
    if problem:
        return HttpResponse(problem, status=400, content_type="text/plain")
    topics = access_knowledge_gaps(user=request.user, period=period)
    return csv_response(gaps_csv_rows(topics), filename=f"knowledge-gaps-{period.first}-{period.last}.csv")
