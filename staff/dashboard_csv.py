"""The rows behind each of the dashboard's charts and tables, as their CSVs carry them.

Codes with their labels beside them; money in dollars (totals to the cent, a run's cost and
per-run figures to a hundredth of a cent); rates as fractions to four places, seconds to one:
decimals rounded once (staff.dashboard), so the CSV and the page show the same figures.
Times are ISO 8601 in the viewer's zone, with its offset; days are the viewer's days.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import tzinfo
from decimal import Decimal

from django.db.models import TextChoices

from engine.statuses import Detail, stop_name
from kit.money import HUNDREDTHS_OF_A_CENT, usd
from staff.dashboard import RATE_PLACES, TREND, Outcomes, Part, RunRow, period_runs, ratio, reason_label
from staff.dashboard_figures import Figure, figures
from staff.periods import Period


class Table(TextChoices):
    """The dashboard's charts and tables, by the name their CSV is downloaded under, with their titles."""

    FIGURES = "figures", "Beside the previous period"
    DAILY = "daily", "Runs per day by outcome"
    STOP_REASONS = "stop-reasons", "Runs by stop reason"
    REJECTION_REASONS = "rejection-reasons", "Rejected packets by reason"
    RATES = "rates", "Completion and acceptance"
    TOOL_RATES = "tool-rates", "Repeated calls and refused proposals by tool"
    MEDIANS = "medians", "Per run"
    REVIEW_TIMES = "review-times", "From packet to review"
    RUNS = "runs", "Every run"


# What each chart's CSV reads (staff.dashboard.Part): only what its rows show.
PARTS: dict[str, tuple[Part, ...]] = {
    Table.FIGURES: tuple(Part),
    Table.DAILY: (Part.RUNS,),
    Table.STOP_REASONS: (Part.RUNS,),
    Table.REJECTION_REASONS: (Part.PACKETS,),
    Table.RATES: (Part.RUNS, Part.PACKETS),
    Table.TOOL_RATES: (Part.TOOLS,),
    Table.MEDIANS: (Part.RUNS, Part.MEDIANS, Part.PACKETS),
    Table.REVIEW_TIMES: (Part.PACKETS, Part.REVIEW_TIMES),
    Table.RUNS: (),  # listed, not counted: runs_csv_rows
}
DETAIL_LABELS: dict[str, str] = dict(Detail.choices)  # read once: a year's runs CSV names one a row
MEDIAN_FIGURES = (
    "median_model_requests",
    "median_tool_attempts",
    "median_tokens",
    "median_cost_usd",
    "total_cost_usd",
    "cost_per_accepted_packet_usd",
)
RUN_COLUMNS = (
    "run",
    "ticket",
    "created_at",
    "status",
    "status_label",
    "detail",
    "detail_label",
    "model_requests",
    "tool_attempts",
    "tokens",
    "cost_usd",
    "review",
    "reason",
    "reason_label",
    "reply_used",
    "reply_edit_distance",
)


def _cell(value: Decimal | int | None) -> Decimal | int | str:
    return "" if value is None else value


def _figure_rows(shown: list[Figure]) -> list[tuple]:
    return [
        ("measure", "label", "unit", "value", "previous", "change"),
        *((f.code, f.label, f.unit, _cell(f.value), _cell(f.previous), _cell(f.change)) for f in shown),
    ]


def _stop_reason_rows(out: Outcomes, before: Outcomes) -> list[tuple]:
    now, then = dict(out.by_stop_reason), dict(before.by_stop_reason)
    codes = [code for code, _ in out.by_stop_reason] + [c for c, _ in before.by_stop_reason if c not in now]
    return [
        ("stop_reason", "label", "runs", "share", "previous_runs", "previous_share"),
        *(
            (
                code,
                stop_name(code),
                now.get(code, 0),
                _cell(ratio(now.get(code, 0), out.total_runs)),
                then.get(code, 0),
                _cell(ratio(then.get(code, 0), before.total_runs)),
            )
            for code in codes
        ),
    ]


def _rejection_reason_rows(out: Outcomes, before: Outcomes) -> list[tuple]:
    now, then = dict(out.by_reason), dict(before.by_reason)
    reasons = [r for r, _ in out.by_reason] + [r for r, _ in before.by_reason if r not in now]
    return [
        ("reason", "label", "packets", "share", "previous_packets", "previous_share"),
        *(
            (
                reason,
                reason_label(reason),
                now.get(reason, 0),
                _cell(ratio(now.get(reason, 0), out.rejected)),
                then.get(reason, 0),
                _cell(ratio(then.get(reason, 0), before.rejected)),
            )
            for reason in reasons
        ),
    ]


def _tool_rate_rows(out: Outcomes) -> list[tuple]:
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
                _cell(ratio(t.no_progress, t.runs_proposing)),
                t.invalid_or_forbidden,
                _cell(ratio(t.invalid_or_forbidden, t.runs_proposing)),
            )
            for t in out.tool_rates
        ),
    ]


def runs_csv_rows(period: Period) -> Iterator[tuple]:
    """The runs CSV: every investigation created in `period`, header first, read from the database as it is
    written out (a year of them is some 365,000 rows)."""
    yield RUN_COLUMNS
    for r in period_runs(period):
        yield _run_row(r, period.zone)


def _run_row(r: RunRow, zone: tzinfo) -> tuple:
    change = r.reply_change
    return (
        r.run,
        r.ticket,
        r.created_at.astimezone(zone).isoformat(),
        r.status,
        stop_name(r.status),
        r.detail,
        DETAIL_LABELS.get(r.detail, ""),
        r.model_requests,
        r.tool_attempts,
        r.tokens,
        usd(r.cost_micros, places=HUNDREDTHS_OF_A_CENT),
        r.review,
        r.reason,
        reason_label(r.reason) if r.rejected else "",
        "" if r.reply_used is None else ("yes" if r.reply_used else "no"),
        "" if change is None else Decimal(str(change)).quantize(Decimal(1).scaleb(-RATE_PLACES)),
    )


def csv_rows(out: Outcomes, before: Outcomes, table: str) -> list[tuple] | None:
    """The rows behind one chart or table of `out` (and, where it is compared, `before`), header first; None
    for an unknown name and for the runs (runs_csv_rows: they are not counted, but listed)."""
    shown = {f.code: f for f in figures(out, before)}
    if table == Table.FIGURES:
        return _figure_rows(list(shown.values()))
    if table == Table.DAILY:
        return [
            ("day", *(o.code for o in TREND), "runs"),
            *((d.day.isoformat(), *d.counts, d.total) for d in out.daily),
        ]
    if table == Table.STOP_REASONS:
        return _stop_reason_rows(out, before)
    if table == Table.REJECTION_REASONS:
        return _rejection_reason_rows(out, before)
    if table == Table.RATES:
        return [
            ("measure", "label", "numerator", "denominator", "rate"),
            ("completion", "Completion rate", out.completed, out.ended, _cell(ratio(out.completed, out.ended))),
            ("acceptance", "Acceptance rate", out.accepted, out.reviewed, _cell(ratio(out.accepted, out.reviewed))),
            (
                "reply_use",
                "Suggested replies used",
                out.replies_used,
                out.replies_suggested,
                _cell(ratio(out.replies_used, out.replies_suggested)),
            ),
        ]
    if table == Table.TOOL_RATES:
        return _tool_rate_rows(out)
    if table == Table.MEDIANS:
        return _figure_rows([shown[code] for code in MEDIAN_FIGURES])
    if table == Table.REVIEW_TIMES:
        return _figure_rows([shown["packets_reviewed"], shown["median_seconds_to_review"]])
    return None
