"""Outcomes over a period, for supervisors: a fixed handful of aggregate queries, whatever the row count.

Charts are drawn here as inline SVG (no scripts, no CDN); every chart's rows are also a CSV.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta

from django.db.models import Case, CharField, Count, Min, OuterRef, Q, Subquery, TextChoices, Value, When
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import SafeString

from engine.models import ModelRequest, ReviewPacket, Run
from engine.statuses import ACTIVE, TERMINAL, Status, stop_name
from tools.registry import TOOLS

DEFAULT_DAYS = 30
UNKNOWN_TOOL = "unknown tool"


class Table(TextChoices):
    """The dashboard's charts and tables, by the name their CSV is downloaded under, with their titles."""

    DAILY = "daily", "Runs per day by outcome"
    STOP_REASONS = "stop-reasons", "Runs by stop reason"
    RATES = "rates", "Completion and acceptance"
    TOOL_RATES = "tool-rates", "Repeated calls and refused proposals by tool"
    MEDIANS = "medians", "Per run"
    REVIEW_TIMES = "review-times", "From packet to review"
    RUNS = "runs", "Every run"


class PeriodError(ValueError):
    pass


@dataclass(frozen=True)
class Period:
    first: date
    last: date  # inclusive

    @property
    def since(self) -> datetime:
        return datetime.combine(self.first, time.min, tzinfo=UTC)

    @property
    def until(self) -> datetime:
        return datetime.combine(self.last + timedelta(days=1), time.min, tzinfo=UTC)

    @property
    def days(self) -> list[date]:
        return [self.first + timedelta(days=i) for i in range((self.last - self.first).days + 1)]


# The days a period may name: a run's timestamps and the day after the last one must be representable.
EARLIEST_DAY, LATEST_DAY = date(1970, 1, 1), date(9998, 12, 31)


def _day(text: str) -> date:
    try:
        day = date.fromisoformat(text)
    except ValueError:
        raise PeriodError("Dates are written YYYY-MM-DD.") from None
    if not EARLIEST_DAY <= day <= LATEST_DAY:
        raise PeriodError(f"Choose dates from {EARLIEST_DAY} to {LATEST_DAY}.")
    return day


def period_parse(*, first: str | None, last: str | None, today: date | None = None) -> Period:
    """`first`..`last` as YYYY-MM-DD (inclusive); by default the last 30 days up to today."""
    end = _day(last) if last else (today or timezone.now().date())
    start = _day(first) if first else max(end - timedelta(days=DEFAULT_DAYS - 1), EARLIEST_DAY)
    if start > end:
        raise PeriodError("The period's first day is after its last day.")
    if (end - start).days > 3660:
        raise PeriodError("Choose a period of at most ten years.")
    return Period(start, end)


@dataclass(frozen=True)
class Outcome:
    """One series of the daily trend: a name for people, one for the CSV, and the statuses it counts."""

    name: str
    code: str
    statuses: tuple[Status, ...]
    colour: str


TREND = (
    Outcome("Completed", "completed", (Status.COMPLETED,), "#417690"),
    Outcome("Handed to a person", "handed_to_a_person", (Status.NEEDS_HELP,), "#e0a526"),
    Outcome(
        "Other endings",
        "other_endings",
        tuple(s for s in Status if s in TERMINAL and s not in {Status.COMPLETED, Status.NEEDS_HELP}),
        "#ba2121",
    ),
    Outcome("Not ended yet", "not_ended", tuple(s for s in Status if s in ACTIVE), "#999999"),
)


@dataclass(frozen=True)
class TrendDay:
    day: date
    counts: tuple[int, ...]  # one per TREND series, in its order

    @property
    def total(self) -> int:
        return sum(self.counts)


def trend_days(per_run: list[tuple], period: Period) -> list[TrendDay]:
    """Runs per day (UTC, as the period is) and outcome; a day with no runs is a row of zeros."""
    counts = Counter((row[8].astimezone(UTC).date(), row[2]) for row in per_run)
    return [TrendDay(day, tuple(sum(counts[(day, s.value)] for s in o.statuses) for o in TREND)) for day in period.days]


def runs_url(statuses, *, since: datetime, until: datetime) -> str:
    """The Runs changelist filtered to `statuses` created in [since, until)."""
    query = {
        "status__in": ",".join(s.value if isinstance(s, Status) else s for s in statuses),
        "created_at__gte": since.isoformat(),
        "created_at__lt": until.isoformat(),
    }
    return f"{reverse('admin:agentrun_run_changelist')}?{urlencode(query)}"


@dataclass(frozen=True)
class ToolRate:
    tool: str
    runs_proposing: int
    no_progress: int
    invalid_or_forbidden: int

    def rate(self, n: int) -> float:
        return n / self.runs_proposing if self.runs_proposing else 0.0


@dataclass
class Outcomes:
    period: Period
    total_runs: int = 0
    by_stop_reason: list[tuple[str, int]] = field(default_factory=list)
    ended: int = 0
    completed: int = 0
    packets: int = 0
    reviewed: int = 0
    accepted: int = 0
    medians: dict[str, float] = field(default_factory=dict)
    total_cost_micros: int = 0
    tool_rates: list[ToolRate] = field(default_factory=list)
    review_seconds: list[float] = field(default_factory=list)
    per_run: list[tuple] = field(default_factory=list)
    daily: list[TrendDay] = field(default_factory=list)

    @property
    def completion_rate(self) -> float:
        return self.completed / self.ended if self.ended else 0.0

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.reviewed if self.reviewed else 0.0

    @property
    def cost_per_accepted_micros(self) -> float | None:
        return self.total_cost_micros / self.accepted if self.accepted else None

    @property
    def median_review_seconds(self) -> float | None:
        return statistics.median(self.review_seconds) if self.review_seconds else None

    def share(self, n: int) -> float:
        return n / self.total_runs if self.total_runs else 0.0


PER_RUN_COLUMNS = (
    "run",
    "ticket",
    "status",
    "detail",
    "model_requests",
    "tool_attempts",
    "tokens",
    "cost_micros",
    "created_at",
)


def outcomes(*, period: Period) -> Outcomes:
    """Everything the dashboard shows for runs created in `period`."""
    out = Outcomes(period)
    runs = Run.objects.filter(
        created_at__gte=period.since, created_at__lt=period.until, purpose=Run.Purpose.INVESTIGATION
    )
    out.per_run = list(
        runs.order_by("created_at", "id").values_list(
            "pk",
            "ticket__ref",
            "status",
            "detail",
            "model_requests",
            "tool_attempts",
            "tokens_used",
            "cost_used_micros",
            "created_at",
        )
    )
    counts = Counter(row[2] for row in out.per_run)
    out.total_runs = len(out.per_run)
    out.by_stop_reason = [(s.value, counts[s.value]) for s in Status if counts[s.value]]
    ended = [row for row in out.per_run if row[2] in TERMINAL]
    out.ended, out.completed = len(ended), counts[Status.COMPLETED.value]
    out.total_cost_micros = sum(row[7] for row in out.per_run)
    out.daily = trend_days(out.per_run, period)
    for i, name in ((4, "model_requests"), (5, "tool_attempts"), (6, "tokens"), (7, "cost_micros")):
        out.medians[name] = statistics.median(row[i] for row in ended) if ended else 0
    _reviews(out, runs)
    out.tool_rates = _tool_rates(runs)
    return out


def _reviews(out: Outcomes, runs) -> None:
    packets = ReviewPacket.objects.filter(run__in=runs.values("pk"))
    states = dict(packets.values_list("review_state").annotate(n=Count("id")).order_by())
    out.packets = sum(states.values())
    out.accepted = states.get(ReviewPacket.ReviewState.ACCEPTED, 0)
    out.reviewed = out.accepted + states.get(ReviewPacket.ReviewState.REJECTED, 0)
    by_staff = Q(reviews__reviewer__isnull=False)  # a packet superseded by the system was not reviewed
    firsts = packets.annotate(first=Min("reviews__created_at", filter=by_staff)).filter(first__isnull=False)
    out.review_seconds = [max((f - c).total_seconds(), 0.0) for c, f in firsts.values_list("created_at", "first")]


def tool_label(proposal: str) -> str:
    """The tool a "call X" proposal names, or UNKNOWN_TOOL when X is not in the dispatch table.

    A model may propose any name; only the tools that exist get a row of their own.
    """
    name = proposal.removeprefix("call ")
    return name if name in TOOLS else UNKNOWN_TOOL


def _tool_rates(runs) -> list[ToolRate]:
    """Per tool: runs whose model proposed it, and how many of those ended on it NO_PROGRESS or INVALID_OR_FORBIDDEN.

    The tool a run ended on is the one its last model request proposed. Names not in the
    dispatch table are counted together as UNKNOWN_TOOL (a run once, however many it proposed).
    """
    label = Case(
        *(When(proposal=f"call {t}", then=Value(t)) for t in TOOLS),
        default=Value(UNKNOWN_TOOL),
        output_field=CharField(),
    )
    proposing = dict(
        ModelRequest.objects.filter(run__in=runs.values("pk"), proposal__startswith="call ")
        .annotate(tool=label)
        .values_list("tool")
        .annotate(n=Count("run", distinct=True))
        .order_by()
    )
    last = ModelRequest.objects.filter(run=OuterRef("pk")).order_by("-seq").values("proposal")[:1]
    ended_on = (
        runs.filter(status__in=[Status.NO_PROGRESS, Status.INVALID_OR_FORBIDDEN])
        .annotate(last=Subquery(last))
        .values_list("status", "last")
    )
    ends = Counter((status, tool_label(p)) for status, p in ended_on if (p or "").startswith("call "))
    tools = sorted(set(proposing) | {t for _, t in ends}, key=lambda t: (t == UNKNOWN_TOOL, t))
    return [
        ToolRate(
            t, proposing.get(t, 0), ends[(Status.NO_PROGRESS.value, t)], ends[(Status.INVALID_OR_FORBIDDEN.value, t)]
        )
        for t in tools
    ]


# --- charts -------------------------------------------------------------------------


def bar_chart(rows: list[tuple], *, title: str, max_value: float | None = None) -> SafeString:
    """A horizontal bar chart as inline SVG: one (label, value, value text[, link]) per bar."""
    width, label_w, bar_h, gap = 720, 310, 22, 8
    top = max((row[1] for row in rows), default=0) if max_value is None else max_value
    height = max(len(rows), 1) * (bar_h + gap) + gap
    bars = format_html_join(
        "",
        '<g><text x="{}" y="{}" text-anchor="end" font-size="12">{}</text>{}'
        '<text x="{}" y="{}" font-size="12">{}</text></g>',
        (
            (
                label_w - 6,
                gap + i * (bar_h + gap) + 15,
                row[0],
                _linked(
                    format_html(
                        '<rect x="{}" y="{}" width="{}" height="{}" fill="#417690"><title>{}: {}</title></rect>',
                        label_w,
                        gap + i * (bar_h + gap),
                        _bar_len(row[1], top, width - label_w - 90),
                        bar_h,
                        row[0],
                        row[2],
                    ),
                    row[3] if len(row) > 3 else None,
                ),
                label_w + _bar_len(row[1], top, width - label_w - 90) + 6,
                gap + i * (bar_h + gap) + 15,
                row[2],
            )
            for i, row in enumerate(rows)
        ),
    )
    empty = format_html('<text x="10" y="22" font-size="12">{}</text>', "No runs in this period.") if not rows else ""
    return format_html(
        '<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{}" width="{}" height="{}" '
        'viewBox="0 0 {} {}" class="chart"><title>{}</title>{}{}</svg>',
        title,
        width,
        height,
        width,
        height,
        title,
        bars,
        empty,
    )


def _linked(shape: SafeString, href: str | None) -> SafeString:
    return format_html('<a href="{}" class="bar-link">{}</a>', href, shape) if href else shape


def trend_chart(days: list[TrendDay], *, title: str) -> SafeString:
    """Runs per day as stacked vertical bars (one colour per outcome), each segment linked to its runs."""
    width, left, top_pad, plot_h, legend_h = 720, 40, 10, 180, 40
    room = width - left - 10
    step = room / max(len(days), 1)
    peak = max((d.total for d in days), default=0)
    segments = format_html_join(
        "", "{}", ((_trend_segments(d, left + i * step, step, peak, top_pad, plot_h),) for i, d in enumerate(days))
    )
    base = top_pad + plot_h
    axis = format_html(
        '<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#666"/>'
        '<text x="{}" y="{}" font-size="12" text-anchor="end">{}</text>'
        '<text x="{}" y="{}" font-size="12" text-anchor="end">0</text>'
        '<text x="{}" y="{}" font-size="12">{}</text><text x="{}" y="{}" font-size="12" text-anchor="end">{}</text>',
        left,
        base,
        width - 10,
        base,
        left - 4,
        top_pad + 12,
        peak,
        left - 4,
        base,
        left,
        base + 16,
        days[0].day.isoformat() if days else "",
        width - 10,
        base + 16,
        days[-1].day.isoformat() if days else "",
    )
    legend = format_html_join(
        "",
        '<rect x="{}" y="{}" width="12" height="12" fill="{}"/><text x="{}" y="{}" font-size="12">{}</text>',
        ((left + i * 170, base + 26, o.colour, left + i * 170 + 16, base + 37, o.name) for i, o in enumerate(TREND)),
    )
    height = base + legend_h
    return format_html(
        '<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{}" width="{}" height="{}" '
        'viewBox="0 0 {} {}" class="chart"><title>{}</title>{}{}{}</svg>',
        title,
        width,
        height,
        width,
        height,
        title,
        segments,
        axis,
        legend,
    )


def _trend_segments(day: TrendDay, x: float, step: float, peak: int, top_pad: int, plot_h: int) -> SafeString:
    since = datetime.combine(day.day, time.min, tzinfo=UTC)
    y, shapes = top_pad + plot_h, []
    for outcome, n in zip(TREND, day.counts, strict=True):
        if not n:
            continue
        h = plot_h * n / peak
        y -= h
        rect = format_html(
            '<rect x="{}" y="{}" width="{}" height="{}" fill="{}"><title>{}: {} {}</title></rect>',
            f"{x + step * 0.1:.2f}",
            f"{y:.2f}",
            f"{max(step * 0.8, 0.5):.2f}",
            f"{h:.2f}",
            outcome.colour,
            day.day.isoformat(),
            n,
            outcome.name.lower(),
        )
        shapes.append(_linked(rect, runs_url(outcome.statuses, since=since, until=since + timedelta(days=1))))
    return format_html_join("", "{}", ((shape,) for shape in shapes))


def _bar_len(value: float, top: float, room: int) -> int:
    return int(round(room * value / top)) if top > 0 else 0


def percent(x: float) -> str:
    return f"{100 * x:.0f}%"


def charts(out: Outcomes) -> dict[str, SafeString]:
    since, until = out.period.since, out.period.until
    return {
        Table.DAILY: trend_chart(out.daily, title=Table.DAILY.label),
        Table.STOP_REASONS: bar_chart(
            [
                (stop_name(s), n, f"{n} ({percent(out.share(n))})", runs_url([s], since=since, until=until))
                for s, n in out.by_stop_reason
            ],
            title=Table.STOP_REASONS.label,
        ),
        Table.RATES: bar_chart(
            [
                ("Completion rate", out.completion_rate, percent(out.completion_rate)),
                ("Acceptance rate", out.acceptance_rate, percent(out.acceptance_rate)),
            ],
            title=Table.RATES.label,
            max_value=1,
        ),
        Table.TOOL_RATES: bar_chart(
            [
                row
                for t in out.tool_rates
                for row in (
                    (
                        f"{t.tool} · {stop_name(Status.NO_PROGRESS)}",
                        t.rate(t.no_progress),
                        percent(t.rate(t.no_progress)),
                    ),
                    (
                        f"{t.tool} · {stop_name(Status.INVALID_OR_FORBIDDEN)}",
                        t.rate(t.invalid_or_forbidden),
                        percent(t.rate(t.invalid_or_forbidden)),
                    ),
                )
            ],
            title=Table.TOOL_RATES.label,
            max_value=1,
        ),
    }


def csv_rows(out: Outcomes, chart: str) -> list[tuple] | None:
    """The rows behind one chart or table, header first; None for an unknown name."""
    if chart == Table.DAILY:
        return [
            ("day", *(o.code for o in TREND), "runs"),
            *((d.day.isoformat(), *d.counts, d.total) for d in out.daily),
        ]
    if chart == Table.STOP_REASONS:
        return [("stop_reason", "runs", "share"), *((s, n, round(out.share(n), 4)) for s, n in out.by_stop_reason)]
    if chart == Table.RATES:
        return [
            ("measure", "numerator", "denominator", "rate"),
            ("completion", out.completed, out.ended, round(out.completion_rate, 4)),
            ("acceptance", out.accepted, out.reviewed, round(out.acceptance_rate, 4)),
        ]
    if chart == Table.TOOL_RATES:
        return [
            (
                "tool",
                "runs_proposing",
                "no_progress",
                "no_progress_rate",
                "invalid_or_forbidden",
                "invalid_or_forbidden_rate",
            ),
            *(
                (
                    t.tool,
                    t.runs_proposing,
                    t.no_progress,
                    round(t.rate(t.no_progress), 4),
                    t.invalid_or_forbidden,
                    round(t.rate(t.invalid_or_forbidden), 4),
                )
                for t in out.tool_rates
            ),
        ]
    if chart == Table.MEDIANS:
        cpa = out.cost_per_accepted_micros
        return [
            ("measure", "value"),
            *out.medians.items(),
            ("total_cost_micros", out.total_cost_micros),
            ("cost_per_accepted_packet_micros", round(cpa, 1) if cpa is not None else ""),
        ]
    if chart == Table.REVIEW_TIMES:
        return [
            ("packets_reviewed", "median_seconds_to_first_review"),
            (len(out.review_seconds), out.median_review_seconds if out.review_seconds else ""),
        ]
    if chart == Table.RUNS:
        return [PER_RUN_COLUMNS, *((*row[:8], row[8].isoformat()) for row in out.per_run)]
    return None
