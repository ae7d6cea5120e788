"""Outcomes over a period, for supervisors, beside the period before: a fixed handful of queries, whatever the rows.

`outcomes_compared` reads the runs of both periods at once (one query for the runs with their
packets and reviews, one for the replies kept, two for the per-tool rates) and splits them in
Python; every figure is a property of `Outcomes`, computed from those rows, so that the page,
its charts and its CSVs (staff.dashboard_csv) cannot disagree. Periods are staff.periods'.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import ROUND_HALF_UP, Decimal
from functools import cached_property

from django.db.models import Case, CharField, Count, IntegerField, OuterRef, Q, Subquery, Value, When
from django.urls import reverse
from django.utils.http import urlencode
from rapidfuzz.distance import Levenshtein

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


@dataclass(frozen=True)
class TrendDay:
    day: date
    counts: tuple[int, ...]  # one per TREND series, in its order

    @property
    def total(self) -> int:
        return sum(self.counts)


@dataclass(frozen=True)
class RunRow:
    """One run of the period as the dashboard counts it: its counters, its packet's review, its reply."""

    run: int
    ticket: str
    status: str
    detail: str
    model_requests: int
    tool_attempts: int
    tokens: int
    cost_micros: int
    created_at: datetime
    packet: int | None = None
    review: str = ""  # the packet's review state; "" without a packet
    reason: str = NO_REASON  # why it was rejected (PacketReview.Reason) when review is "rejected"
    packet_at: datetime | None = None
    first_review_at: datetime | None = None  # the first review by a person (not the system's supersede)
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
    """The runs created in `period` and every figure the dashboard shows of them."""

    period: Period
    runs: list[RunRow] = field(default_factory=list)
    tool_rates: list[ToolRate] = field(default_factory=list)

    @property
    def total_runs(self) -> int:
        return len(self.runs)

    @cached_property
    def _status_counts(self) -> Counter[str]:
        return Counter(r.status for r in self.runs)

    @property
    def by_stop_reason(self) -> list[tuple[str, int]]:
        return [(s.value, self._status_counts[s.value]) for s in Status if self._status_counts[s.value]]

    @cached_property
    def _ended(self) -> list[RunRow]:
        return [r for r in self.runs if r.status in TERMINAL]

    @property
    def ended(self) -> int:
        return len(self._ended)

    @property
    def completed(self) -> int:
        return self._status_counts[Status.COMPLETED.value]

    @cached_property
    def _reviews(self) -> Counter[str]:
        return Counter(r.review for r in self.runs if r.review)

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
    def total_cost_micros(self) -> int:
        return sum(r.cost_micros for r in self.runs)

    @property
    def cost_per_accepted_micros(self) -> float | None:
        return self.total_cost_micros / self.accepted if self.accepted else None

    @cached_property
    def medians(self) -> dict[str, float]:
        """Per ended run: the median model requests, tool attempts, tokens and cost (micro-dollars); 0 without one."""
        return {
            name: statistics.median(getattr(r, name) for r in self._ended) if self._ended else 0
            for name in ("model_requests", "tool_attempts", "tokens", "cost_micros")
        }

    @cached_property
    def review_seconds(self) -> list[float]:
        """Per packet reviewed by a person: seconds from the packet to its first review."""
        return [
            max((r.first_review_at - r.packet_at).total_seconds(), 0.0)
            for r in self.runs
            if r.first_review_at is not None and r.packet_at is not None
        ]

    @property
    def median_review_seconds(self) -> float | None:
        seconds = self.review_seconds
        return statistics.median(seconds) if seconds else None

    @property
    def by_reason(self) -> list[tuple[str, int]]:
        """Rejected packets by the reason given, in the order reasons are offered (a missing one last)."""
        counts = Counter(r.reason for r in self.runs if r.rejected)
        order = [*PacketReview.Reason.values, NO_REASON]
        return [(reason, counts[reason]) for reason in order if counts[reason]]

    @property
    def replies_suggested(self) -> int:
        """Accepted packets that came with a suggested reply."""
        return sum(1 for r in self.runs if r.reply_used is not None)

    @property
    def replies_used(self) -> int:
        return sum(1 for r in self.runs if r.reply_used)

    @property
    def mean_reply_change(self) -> Decimal | None:
        """The mean, over replies used, of their edit distance from the suggestion over the longer length."""
        changes = [r.reply_change for r in self.runs if r.reply_change is not None]
        return ratio_of(sum(changes), len(changes))

    @cached_property
    def daily(self) -> list[TrendDay]:
        """Runs per day (in the period's zone) and outcome; a day with no runs is a row of zeros."""
        zone = self.period.zone
        counts = Counter((r.created_at.astimezone(zone).date(), r.status) for r in self.runs)
        return [
            TrendDay(day, tuple(sum(counts[(day, s.value)] for s in o.statuses) for o in TREND))
            for day in self.period.days
        ]

    def share(self, n: int) -> float:
        return n / self.total_runs if self.total_runs else 0.0


def ratio_of(total: float, n: int) -> Decimal | None:
    """A mean of fractions to RATE_PLACES decimals; None for no values."""
    return Decimal(str(total / n)).quantize(Decimal(1).scaleb(-RATE_PLACES), ROUND_HALF_UP) if n else None


# --- reading the runs -------------------------------------------------------------------


def _in(periods: Sequence[Period], prefix: str = "") -> Q:
    """Runs (or rows whose run, through `prefix`) created in any of `periods`."""
    q = Q(pk__in=[])
    for p in periods:
        q |= Q(**{f"{prefix}created_at__gte": p.since, f"{prefix}created_at__lt": p.until})
    return q


def _decision(packet_ref: str):
    """The packet's latest review by a person: the one its review state stands on (staff.reviews.packet_decision)."""
    return PacketReview.objects.filter(packet=OuterRef(packet_ref), reviewer__isnull=False).order_by(
        "-created_at", "-id"
    )


def _run_rows(periods: Sequence[Period]) -> list[RunRow]:
    """The investigations created in `periods`, oldest first, with their packet's review (one query) and the
    replies their accepted packets kept (one more)."""
    first_review = PacketReview.objects.filter(packet=OuterRef("packet__pk"), reviewer__isnull=False)
    rows = (
        Run.objects.filter(_in(periods), purpose=Run.Purpose.INVESTIGATION)
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
            "packet__pk",
            "packet__review_state",
            Subquery(_decision("packet__pk").values("reason")[:1]),
            "packet__created_at",
            Subquery(first_review.order_by("created_at", "id").values("created_at")[:1]),
        )
    )
    replies = _replies(periods)
    return [_run_row(row, replies.get(row[0])) for row in rows]


def _run_row(row: tuple, reply: tuple[bool, float | None] | None) -> RunRow:
    """A row of _run_rows' query (RunRow's fields in order, to first_review_at) and the run's reply, if any."""
    *counters, packet, review, reason, packet_at, first_review_at = row
    rejected = review == ReviewPacket.ReviewState.REJECTED
    return RunRow(
        *counters,
        packet=packet,
        review=review or "",
        reason=(reason or NO_REASON) if rejected else NO_REASON,
        packet_at=packet_at,
        first_review_at=first_review_at,
        reply_used=reply[0] if reply else None,
        reply_change=reply[1] if reply else None,
    )


def _replies(periods: Sequence[Period]) -> dict[int, tuple[bool, float | None]]:
    """Per run whose packet was accepted with a suggested reply: whether the reviewer kept a reply, and how far
    the kept one is from the suggestion (Levenshtein distance over characters, over the longer length)."""
    accepted = (
        ReviewPacket.objects.filter(
            _in(periods, "run__"),
            run__purpose=Run.Purpose.INVESTIGATION,
            review_state=ReviewPacket.ReviewState.ACCEPTED,
        )
        .exclude(reply="")
        .annotate(kept=Subquery(_decision("pk").values("reply")[:1]))
        .values_list("run_id", "reply", "kept")
    )
    return {
        run: (True, Levenshtein.normalized_distance(suggested.strip(), kept.strip())) if kept else (False, None)
        for run, suggested, kept in accepted
    }


def tool_label(proposal: str) -> str:
    """The tool a "call X" proposal names, or UNKNOWN_TOOL when X is not in the dispatch table.

    A model may propose any name; only the tools that exist get a row of their own.
    """
    name = proposal.removeprefix("call ")
    return name if name in TOOLS else UNKNOWN_TOOL


def _which(periods: Sequence[Period], prefix: str = "") -> Case:
    """The index in `periods` of the period a row's run was created in."""
    return Case(
        *(When(_in([p], prefix), then=Value(i)) for i, p in enumerate(periods)),
        default=Value(-1),
        output_field=IntegerField(),
    )


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


def outcomes_of(periods: Sequence[Period]) -> list[Outcomes]:
    """The outcomes of each of `periods` (which may not overlap), read together: four queries in all."""
    rows, rates = _run_rows(periods), _tool_rates(periods)
    return [
        Outcomes(p, runs=[r for r in rows if p.since <= r.created_at < p.until], tool_rates=rates[i])
        for i, p in enumerate(periods)
    ]


def outcomes(*, period: Period) -> Outcomes:
    """Everything the dashboard shows for runs created in `period`."""
    return outcomes_of([period])[0]


def outcomes_compared(*, period: Period) -> tuple[Outcomes, Outcomes]:
    """`period`'s outcomes and those of the period it is compared with (Period.previous)."""
    current, previous = outcomes_of([period, period.previous()])
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


def reason_label(reason: str) -> str:
    return PacketReview.Reason(reason).label if reason in PacketReview.Reason.values else NO_REASON_LABEL


def day_bounds(day: date, period: Period) -> tuple[datetime, datetime]:
    """A day of `period`, from midnight to midnight in its zone."""
    one = Period(day, day, period.zone)
    return one.since, one.until
