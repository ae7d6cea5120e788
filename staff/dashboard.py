"""Outcomes over a period, for supervisors, beside the period before: a fixed handful of queries, whatever the rows.

Everything is counted in the database, never run by run in Python: `outcomes_of` reads the runs of
both periods by period, day and status (with their cost), the ended runs' medians, the packets by
period, review state and reason (with the replies used and how much they changed, which each review
keeps on its packet: staff.reviews), the median time to a first review, and the per-tool rates. A year
of a busy team's work is some 365,000 runs: reading them row by row took 6-34 s a load at 100,000 runs
(bench/pages_bench.py). Every figure is a property of `Outcomes`, so that the page, its charts and its
CSVs (staff.dashboard_csv) cannot disagree. Periods are staff.periods'.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from functools import cached_property

from django.db import connections
from django.db.models import (
    Aggregate,
    Case,
    CharField,
    Count,
    DurationField,
    F,
    FloatField,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    TextChoices,
    Value,
    When,
)
from django.db.models.functions import Greatest, TruncDate
from django.urls import reverse
from django.utils.http import urlencode

from engine.models import ModelRequest, PacketReview, ReviewPacket, Run
from engine.statuses import ACTIVE, TERMINAL, Status
from staff.periods import Period
from tools.registry import TOOLS

UNKNOWN_TOOL = "unknown tool"
NO_REASON = ""  # a rejection recorded before reasons were asked for
NO_REASON_LABEL = "no reason recorded"
RATE_PLACES = 4  # rates as fractions: 0.6667


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
# The medians of an ended run's counters, by the name the figures use, of the Run field counted.
MEDIANS = {
    "model_requests": "model_requests",
    "tool_attempts": "tool_attempts",
    "tokens": "tokens_used",
    "cost_micros": "cost_used_micros",
}


@dataclass(frozen=True)
class TrendDay:
    day: date
    counts: tuple[int, ...]  # one per TREND series, in its order

    @property
    def total(self) -> int:
        return sum(self.counts)


@dataclass(frozen=True)
class RunRow:
    """One run of the period as the runs CSV lists it: its counters, its packet's review, its reply."""

    run: int
    ticket: str
    status: str
    detail: str
    model_requests: int
    tool_attempts: int
    tokens: int
    cost_micros: int
    created_at: datetime
    review: str = ""  # the packet's review state; "" without a packet
    reason: str = NO_REASON  # why it was rejected (PacketReview.Reason) when review is "rejected"
    reply_used: bool | None = None  # accepted with a suggested reply: was it kept (edited or not)?
    reply_change: float | None = None  # a kept reply's edit distance from the suggestion over the longer length

    @property
    def rejected(self) -> bool:
        return self.review == ReviewPacket.ReviewState.REJECTED


@dataclass(frozen=True)
class ToolRate:
    tool: str
    runs_proposing: int
    no_progress: int
    invalid_or_forbidden: int

    def rate(self, n: int) -> float:
        return n / self.runs_proposing if self.runs_proposing else 0.0


def ratio(n: int, d: int) -> Decimal | None:
    """n/d to RATE_PLACES decimals, rounded half up; None when there is nothing to rate (d is 0)."""
    return (Decimal(n) / Decimal(d)).quantize(Decimal(1).scaleb(-RATE_PLACES), ROUND_HALF_UP) if d else None


@dataclass
class Outcomes:
    """The runs created in `period` as the database counted them, and every figure the dashboard shows of them."""

    period: Period
    by_day: Counter[tuple[date, str]] = field(default_factory=Counter)  # runs by (day in the period's zone, status)
    total_cost_micros: int = 0
    medians: dict[str, float] = field(default_factory=lambda: dict.fromkeys(MEDIANS, 0))  # of ended runs; 0: none
    by_review: Counter[tuple[str, str]] = field(default_factory=Counter)  # packets by (review state, reason)
    replies_suggested: int = 0  # accepted packets that came with a suggested reply
    replies_used: int = 0  # of those, the ones whose reviewer kept a reply (edited or not)
    reply_change_total: float = 0.0  # the replies used' edit distances, added up
    reviews_timed: int = 0  # packets a person reviewed: the times from packet to first review
    median_review_seconds: float | None = None
    tool_rates: list[ToolRate] = field(default_factory=list)

    @cached_property
    def _status_counts(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for (_, status), n in self.by_day.items():
            counts[status] += n
        return counts

    @property
    def total_runs(self) -> int:
        return sum(self._status_counts.values())

    @property
    def by_stop_reason(self) -> list[tuple[str, int]]:
        return [(s.value, self._status_counts[s.value]) for s in Status if self._status_counts[s.value]]

    @property
    def ended(self) -> int:
        return sum(n for status, n in self._status_counts.items() if status in TERMINAL)

    @property
    def completed(self) -> int:
        return self._status_counts[Status.COMPLETED.value]

    @cached_property
    def _reviews(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for (state, _), n in self.by_review.items():
            counts[state] += n
        return counts

    @property
    def packets(self) -> int:
        return sum(self._reviews.values())

    @property
    def accepted(self) -> int:
        return self._reviews[ReviewPacket.ReviewState.ACCEPTED]

    @property
    def rejected(self) -> int:
        return self._reviews[ReviewPacket.ReviewState.REJECTED]

    @property
    def reviewed(self) -> int:
        return self.accepted + self.rejected

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
    def by_reason(self) -> list[tuple[str, int]]:
        """Rejected packets by the reason given, in the order reasons are offered (a missing one last)."""
        counts = Counter(
            {
                reason or NO_REASON: n
                for (state, reason), n in self.by_review.items()
                if state == ReviewPacket.ReviewState.REJECTED
            }
        )
        order = [*PacketReview.Reason.values, NO_REASON]
        return [(reason, counts[reason]) for reason in order if counts[reason]]

    @property
    def mean_reply_change(self) -> Decimal | None:
        """The mean, over replies used, of their edit distance from the suggestion over the longer length."""
        return ratio_of(self.reply_change_total, self.replies_used)

    @cached_property
    def daily(self) -> list[TrendDay]:
        """Runs per day (in the period's zone) and outcome; a day with no runs is a row of zeros."""
        return [
            TrendDay(day, tuple(sum(self.by_day[(day, s.value)] for s in o.statuses) for o in TREND))
            for day in self.period.days
        ]

    def share(self, n: int) -> float:
        return n / self.total_runs if self.total_runs else 0.0


def ratio_of(total: float, n: int) -> Decimal | None:
    """A mean of fractions to RATE_PLACES decimals; None for no values."""
    return Decimal(str(total / n)).quantize(Decimal(1).scaleb(-RATE_PLACES), ROUND_HALF_UP) if n else None


# --- counting the runs ------------------------------------------------------------------


def _in(periods: Sequence[Period], prefix: str = "") -> Q:
    """Runs created in any of `periods`; with `prefix`, rows whose run (`run__`) or the start they keep of it
    (`run_`) is."""
    q = Q(pk__in=[])
    for p in periods:
        q |= Q(**{f"{prefix}created_at__gte": p.since, f"{prefix}created_at__lt": p.until})
    return q


def _which(periods: Sequence[Period], prefix: str = "") -> Case:
    """The index in `periods` of the period a row's run was created in."""
    return Case(
        *(When(_in([p], prefix), then=Value(i)) for i, p in enumerate(periods)),
        default=Value(-1),
        output_field=IntegerField(),
    )


def _investigations(periods: Sequence[Period]) -> QuerySet[Run]:
    return Run.objects.filter(_in(periods), purpose=Run.Purpose.INVESTIGATION)


def _packets(periods: Sequence[Period]) -> QuerySet[ReviewPacket]:
    """The packets of investigations created in `periods`, by the run's start and purpose each keeps: reading
    the runs beside them cost an index probe a packet (100 ms for 13,000 on the test machine)."""
    return ReviewPacket.objects.filter(_in(periods, "run_"), run_purpose=Run.Purpose.INVESTIGATION)


class Median(Aggregate):
    """The median of an expression, as statistics.median gives it (the mean of the middle two of an even
    count): PostgreSQL's ordered-set aggregate percentile_cont."""

    function = "percentile_cont"
    template = "%(function)s(0.5) WITHIN GROUP (ORDER BY %(expressions)s)"


def _medians(rows: QuerySet, periods: Sequence[Period], prefix: str = "", *, output_field, **values) -> list[dict]:
    """Per period, the median of each expression of `values` (all of `output_field`) over `rows` of it (None for
    no rows).

    PostgreSQL computes them (one statement, one aggregate per period and value); another database (SQLite,
    the embedded default, whose data is a demo's) sends the values and Python takes their medians.
    """
    if connections[rows.db].vendor == "postgresql":
        found = rows.aggregate(
            **{
                f"{name}_{i}": Median(value, filter=_in([p], prefix), output_field=output_field)
                for i, p in enumerate(periods)
                for name, value in values.items()
            }
        )
        return [{name: found[f"{name}_{i}"] for name in values} for i in range(len(periods))]
    read: list[dict[str, list]] = [{name: [] for name in values} for _ in periods]
    names = [f"median_{name}" for name in values]
    for i, *each in rows.annotate(
        period=_which(periods, prefix), **dict(zip(names, values.values(), strict=True))
    ).values_list("period", *names):
        for name, value in zip(values, each, strict=True):
            read[i][name].append(value)
    return [{name: statistics.median(v) if v else None for name, v in period.items()} for period in read]


def _run_counts(periods: Sequence[Period], outcomes: list[Outcomes]) -> None:
    """The runs of each period by day (in its zone) and status, with their cost."""
    zone = periods[0].zone
    counted = (
        _investigations(periods)
        .annotate(period=_which(periods), day=TruncDate("created_at", tzinfo=zone))
        .values_list("period", "day", "status")
        .annotate(n=Count("id"), cost=Sum("cost_used_micros"))
        .order_by()
    )
    for i, day, status, n, cost in counted:
        outcomes[i].by_day[(day, status)] += n
        outcomes[i].total_cost_micros += cost or 0


def _run_medians(periods: Sequence[Period], outcomes: list[Outcomes]) -> None:
    """The medians of each period's ended runs' counters (0 without an ended run)."""
    ended = _investigations(periods).filter(status__in=[s.value for s in TERMINAL])
    medians = _medians(ended, periods, output_field=FloatField(), **{name: F(c) for name, c in MEDIANS.items()})
    for out, found in zip(outcomes, medians, strict=True):
        out.medians = {name: value if value is not None else 0 for name, value in found.items()}


def _packet_counts(periods: Sequence[Period], outcomes: list[Outcomes]) -> None:
    """The packets of each period by review state and the deciding reason, with the replies suggested, used and
    how much they changed (as each review keeps them on its packet)."""
    counted = (
        _packets(periods)
        .annotate(period=_which(periods, "run_"))
        .values_list("period", "review_state", "review_reason")
        .annotate(
            n=Count("id"),
            suggested=Count("id", filter=~Q(reply="")),
            used=Count("reply_change"),
            change=Sum("reply_change"),
            timed=Count("first_reviewed_at"),
        )
        .order_by()
    )
    for i, state, reason, n, suggested, used, change, timed in counted:
        out = outcomes[i]
        out.by_review[(state, reason if state == ReviewPacket.ReviewState.REJECTED else "")] += n
        out.reviews_timed += timed
        if state == ReviewPacket.ReviewState.ACCEPTED:
            out.replies_suggested += suggested
            out.replies_used += used
            out.reply_change_total += change or 0.0


def _review_times(periods: Sequence[Period], outcomes: list[Outcomes]) -> None:
    """The median time from a packet of each period to its first review by a person."""
    waited = Greatest(F("first_reviewed_at") - F("created_at"), Value(timedelta(0)), output_field=DurationField())
    timed = _packets(periods).filter(first_reviewed_at__isnull=False)
    for out, found in zip(
        outcomes, _medians(timed, periods, "run_", output_field=DurationField(), waited=waited), strict=True
    ):
        out.median_review_seconds = found["waited"].total_seconds() if found["waited"] is not None else None


def period_runs(period: Period) -> Iterator[RunRow]:
    """The investigations created in `period`, oldest first, with their packet's review and reply, read a
    chunk at a time (a year of them is some 365,000 rows)."""
    rows = (
        _investigations([period])
        .order_by("created_at", "id")
        .values_list(
            "pk",
            "ticket__ref",
            "status",
            "detail",
            "model_requests",
            "tool_attempts",
            "tokens_used",
            "cost_used_micros",
            "created_at",
            "packet__review_state",
            "packet__review_reason",
            "packet__reply_change",
            Case(When(packet__reply="", then=Value(False)), default=Value(True)),
        )
    )
    for *counters, review, reason, change, suggested in rows.iterator(chunk_size=2000):
        accepted = review == ReviewPacket.ReviewState.ACCEPTED
        yield RunRow(
            *counters,
            review=review or "",
            reason=(reason or NO_REASON) if review == ReviewPacket.ReviewState.REJECTED else NO_REASON,
            reply_used=(change is not None) if accepted and suggested else None,
            reply_change=change if accepted else None,
        )


def tool_label(proposal: str) -> str:
    """The tool a "call X" proposal names, or UNKNOWN_TOOL when X is not in the dispatch table.

    A model may propose any name; only the tools that exist get a row of their own.
    """
    name = proposal.removeprefix("call ")
    return name if name in TOOLS else UNKNOWN_TOOL


def _tool_rates(periods: Sequence[Period]) -> list[list[ToolRate]]:
    """Per period, per tool: runs whose model proposed it, and how many of those ended on it NO_PROGRESS or
    INVALID_OR_FORBIDDEN.

    The tool a run ended on is the one its last model request proposed. Names not in the
    dispatch table are counted together as UNKNOWN_TOOL (a run once, however many it proposed).
    """
    label = Case(
        *(When(proposal=f"call {t}", then=Value(t)) for t in TOOLS),
        default=Value(UNKNOWN_TOOL),
        output_field=CharField(),
    )
    investigations = Q(run__purpose=Run.Purpose.INVESTIGATION) & _in(periods, "run__")
    # A run's model requests start after it was created: only those started since the first period began can be
    # its runs' (found by migration 0025's index on PostgreSQL instead of reading every model request).
    investigations &= Q(started_at__gte=min(p.since for p in periods))
    proposing = Counter(
        {
            (i, tool): n
            for i, tool, n in ModelRequest.objects.filter(investigations, proposal__startswith="call ")
            .annotate(tool=label, period=_which(periods, "run__"))
            .values_list("period", "tool")
            .annotate(n=Count("run", distinct=True))
            .order_by()
        }
    )
    last = ModelRequest.objects.filter(run=OuterRef("pk")).order_by("-seq").values("proposal")[:1]
    ended_on = (
        Run.objects.filter(_in(periods), purpose=Run.Purpose.INVESTIGATION)
        .filter(status__in=[Status.NO_PROGRESS, Status.INVALID_OR_FORBIDDEN])
        .annotate(last=Subquery(last), period=_which(periods))
        .values_list("period", "status", "last")
    )
    ends = Counter((i, status, tool_label(p)) for i, status, p in ended_on if (p or "").startswith("call "))
    return [_rates_of(i, proposing, ends) for i in range(len(periods))]


def _rates_of(i: int, proposing: Counter, ends: Counter) -> list[ToolRate]:
    tools = {t for (j, t) in proposing if j == i} | {t for (j, _, t) in ends if j == i}
    return [
        ToolRate(
            t,
            proposing[(i, t)],
            ends[(i, Status.NO_PROGRESS.value, t)],
            ends[(i, Status.INVALID_OR_FORBIDDEN.value, t)],
        )
        for t in sorted(tools, key=lambda t: (t == UNKNOWN_TOOL, t))
    ]


def _tool_rates_of(periods: Sequence[Period], outcomes: list[Outcomes]) -> None:
    for out, rates in zip(outcomes, _tool_rates(periods), strict=True):
        out.tool_rates = rates


class Part(TextChoices):
    """What the dashboard counts, a statement or two each; a chart's CSV reads only the parts it shows."""

    RUNS = "runs"  # runs by day and status, their cost
    MEDIANS = "medians"  # the ended runs' medians
    PACKETS = "packets"  # packets by review state and reason, the replies
    REVIEW_TIMES = "review_times"  # the median time to a first review
    TOOLS = "tools"  # the per-tool rates


READ = {
    Part.RUNS: _run_counts,
    Part.MEDIANS: _run_medians,
    Part.PACKETS: _packet_counts,
    Part.REVIEW_TIMES: _review_times,
    Part.TOOLS: _tool_rates_of,
}


def outcomes_of(periods: Sequence[Period], parts: Iterable[Part] = tuple(Part)) -> list[Outcomes]:
    """The outcomes of each of `periods` (which may not overlap and share a zone), counted together: six
    queries in all for every part, whatever the number of runs. A part not asked for stays empty (zeros)."""
    found = [Outcomes(p) for p in periods]
    for part in parts:
        READ[part](periods, found)
    return found


def outcomes(*, period: Period) -> Outcomes:
    """Everything the dashboard shows for runs created in `period`."""
    return outcomes_of([period])[0]


def outcomes_compared(*, period: Period, parts: Iterable[Part] = tuple(Part)) -> tuple[Outcomes, Outcomes]:
    """`period`'s outcomes and those of the period it is compared with (Period.previous): of every part, or of
    `parts` only."""
    current, previous = outcomes_of([period, period.previous()], parts)
    return current, previous


# --- links to the runs and packets behind a figure ----------------------------------------


def runs_url(statuses, *, since: datetime, until: datetime) -> str:
    """The Runs changelist filtered to `statuses` created in [since, until)."""
    query = {
        "status__in": ",".join(s.value if isinstance(s, Status) else s for s in statuses),
        "created_at__gte": since.isoformat(),
        "created_at__lt": until.isoformat(),
    }
    return f"{reverse('admin:agentrun_run_changelist')}?{urlencode(query)}"


NO_REASON_PARAMETER = "none"  # the packet list's `reason` for a rejection without one


def rejected_packets_url(reason: str | None, *, period: Period) -> str:
    """The packet list filtered to packets rejected for `reason` (None: for any) whose runs were created in
    `period`: the packets a row of the breakdown counts."""
    query = {"state": ReviewPacket.ReviewState.REJECTED.value}
    if reason is not None:
        query["reason"] = reason or NO_REASON_PARAMETER
    query |= {"run__created_at__gte": period.since.isoformat(), "run__created_at__lt": period.until.isoformat()}
    return f"{reverse('admin:agentrun_reviewpacket_changelist')}?{urlencode(query)}"


REASON_LABELS: dict[str, str] = dict(PacketReview.Reason.choices)  # read once: the runs CSV names one a row


def reason_label(reason: str) -> str:
    return REASON_LABELS.get(reason, NO_REASON_LABEL)


def day_bounds(day: date, period: Period) -> tuple[datetime, datetime]:
    """A day of `period`, from midnight to midnight in its zone."""
    one = Period(day, day, period.zone)
    return one.since, one.until
