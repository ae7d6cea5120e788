"""The figures the dashboard sets beside the previous period's, each rounded once, as the page and the CSV show it.

Counts; rates as fractions to four places (the page writes them as percentages, their change
in percentage points); medians as written (2, not 2.0); seconds to one place; money in
dollars, totals to the cent and per-run figures to a hundredth of a cent (kit.money).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from django.db.models import TextChoices

from kit.money import CENTS, HUNDREDTHS_OF_A_CENT, usd
from staff.dashboard import Outcomes, ratio

SECONDS_PLACES = 1


class Unit(TextChoices):
    """What a figure counts, and so how the page writes it (the CSV writes the number as it is)."""

    COUNT = "count"
    NUMBER = "number"
    RATE = "rate"  # a fraction; shown as a percentage, its change in percentage points
    USD = "usd"
    SECONDS = "seconds"


@dataclass(frozen=True)
class FigureKind:
    code: str
    label: str
    unit: str
    of: Callable[[Outcomes], Decimal | int | None]


def _median_of(name: str) -> Callable[[Outcomes], Decimal | None]:
    return lambda o: _number(o.medians[name]) if o.ended else None


def _number(value: float) -> Decimal:
    """A median as written: 2 (not 2.0), 1001.5."""
    number = Decimal(str(value))
    return number.quantize(Decimal(1)) if number == number.to_integral_value() else number


def _usd(micros: float | None, places: int) -> Decimal | None:
    return None if micros is None else usd(micros, places=places)


FIGURES = (
    FigureKind("runs", "Runs", Unit.COUNT, lambda o: o.total_runs),
    FigureKind("completion_rate", "Completion rate (of ended runs)", Unit.RATE, lambda o: ratio(o.completed, o.ended)),
    FigureKind(
        "acceptance_rate", "Acceptance rate (of reviewed packets)", Unit.RATE, lambda o: ratio(o.accepted, o.reviewed)
    ),
    FigureKind("packets_reviewed", "Packets reviewed", Unit.COUNT, lambda o: o.reviewed),
    FigureKind("packets_rejected", "Packets rejected", Unit.COUNT, lambda o: o.rejected),
    FigureKind(
        "median_seconds_to_review",
        "Median time from packet to first review",
        Unit.SECONDS,
        lambda o: _seconds(o.median_review_seconds),
    ),
    FigureKind(
        "reply_use_rate",
        "Suggested replies used (of accepted packets with one)",
        Unit.RATE,
        lambda o: ratio(o.replies_used, o.replies_suggested),
    ),
    FigureKind(
        "reply_edit_distance",
        "Change to a used reply (edit distance over length, mean)",
        Unit.RATE,
        lambda o: o.mean_reply_change,
    ),
    FigureKind("median_model_requests", "Median model requests per run", Unit.NUMBER, _median_of("model_requests")),
    FigureKind("median_tool_attempts", "Median tool attempts per run", Unit.NUMBER, _median_of("tool_attempts")),
    FigureKind("median_tokens", "Median tokens per run", Unit.NUMBER, _median_of("tokens")),
    FigureKind(
        "median_cost_usd",
        "Median cost per run",
        Unit.USD,
        lambda o: _usd(o.medians["cost_micros"], HUNDREDTHS_OF_A_CENT) if o.ended else None,
    ),
    FigureKind("total_cost_usd", "Total cost", Unit.USD, lambda o: usd(o.total_cost_micros, places=CENTS)),
    FigureKind(
        "cost_per_accepted_packet_usd",
        "Cost per accepted packet",
        Unit.USD,
        lambda o: _usd(o.cost_per_accepted_micros, HUNDREDTHS_OF_A_CENT),
    ),
)


def _seconds(value: float | None) -> Decimal | None:
    if value is None:
        return None
    return Decimal(str(value)).quantize(Decimal(1).scaleb(-SECONDS_PLACES), ROUND_HALF_UP)


@dataclass(frozen=True)
class Figure:
    """One figure of the period beside the previous period's, as the page and the CSV both show it."""

    code: str
    label: str
    unit: str
    value: Decimal | int | None
    previous: Decimal | int | None

    @property
    def change(self) -> Decimal | int | None:
        return None if self.value is None or self.previous is None else self.value - self.previous


def figures(current: Outcomes, previous: Outcomes) -> list[Figure]:
    return [Figure(k.code, k.label, k.unit, k.of(current), k.of(previous)) for k in FIGURES]
