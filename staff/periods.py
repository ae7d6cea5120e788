"""The periods the outcomes dashboard shows, in the viewer's time zone, and the period each is compared with.

A period is whole days, first to last, in one time zone: a day starts at midnight where the
viewer is (the zone their preference activates), so "today" and a bar of the daily trend are
their day, not UTC's. Presets name the periods people ask for; dates typed by hand are checked
here and refused with a sentence that says what to type.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from functools import cached_property

from django import forms
from django.db.models import TextChoices

# The days a period may name: a run's timestamps and the day after the last one must be representable.
EARLIEST_DAY, LATEST_DAY = date(1970, 1, 1), date(9998, 12, 31)
MAX_DAYS = 3660  # about ten years


class PeriodError(ValueError):
    """A period the dashboard cannot show; `field` is the form field it is about (None: the period as a whole)."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


class Preset(TextChoices):
    """The periods offered with one click; each is compared with the period its `previous` names."""

    TODAY = "today", "Today"
    WEEK = "week", "This week"
    LAST_7 = "7d", "Last 7 days"
    LAST_30 = "30d", "Last 30 days"
    QUARTER = "quarter", "This quarter"


DEFAULT_PRESET = Preset.LAST_7


@dataclass(frozen=True)
class Period:
    first: date
    last: date  # inclusive
    zone: tzinfo = UTC
    preset: str = ""  # the Preset it was chosen by; "" for dates typed

    @cached_property  # the dashboard asks once per run of the period (staff.dashboard.outcomes_of)
    def since(self) -> datetime:
        return datetime.combine(self.first, time.min, tzinfo=self.zone)

    @cached_property
    def until(self) -> datetime:
        return datetime.combine(self.last + timedelta(days=1), time.min, tzinfo=self.zone)

    @property
    def days(self) -> list[date]:
        return [self.first + timedelta(days=i) for i in range(self.length)]

    @property
    def length(self) -> int:
        return (self.last - self.first).days + 1

    def holds(self, moment: datetime) -> bool:
        return self.since <= moment < self.until

    def previous(self) -> Period:
        """The period this one is compared with.

        This week so far: the same days of the week before. This quarter so far: as many days from
        the start of the quarter before (at most that whole quarter). Any other period: as many days
        just before it (today: yesterday; the last 7 days: the 7 before them).
        """
        if self.preset == Preset.WEEK:
            return Period(self.first - timedelta(days=7), self.last - timedelta(days=7), self.zone)
        if self.preset == Preset.QUARTER:
            start = _quarter_start(self.first - timedelta(days=1))
            return Period(start, min(start + (self.last - self.first), self.first - timedelta(days=1)), self.zone)
        return Period(self.first - timedelta(days=self.length), self.first - timedelta(days=1), self.zone)


def _quarter_start(day: date) -> date:
    return date(day.year, 3 * ((day.month - 1) // 3) + 1, 1)


def preset_period(preset: Preset, *, today: date, zone: tzinfo = UTC) -> Period:
    """The days `preset` names when the viewer's day is `today`: each ends today."""
    first = {
        Preset.TODAY: today,
        Preset.WEEK: today - timedelta(days=today.weekday()),  # weeks start on Monday (ISO 8601)
        Preset.LAST_7: today - timedelta(days=6),
        Preset.LAST_30: today - timedelta(days=29),
        Preset.QUARTER: _quarter_start(today),
    }[preset]
    return Period(max(first, EARLIEST_DAY), today, zone, preset.value)


DAY_PATTERN = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
DAY_NAMES = {"first": "The first day", "last": "The last day"}


def _day(text: str, *, field: str) -> date:
    try:
        day = date.fromisoformat(text) if DAY_PATTERN.fullmatch(text) else None  # not ISO's other forms (2026-W37-1)
    except ValueError:
        day = None
    if day is None:
        shown = text if len(text) <= 20 else text[:19] + "…"
        raise PeriodError(f"{DAY_NAMES[field]}, “{shown}”, is not a date: write it YYYY-MM-DD.", field)
    if not EARLIEST_DAY <= day <= LATEST_DAY:
        raise PeriodError(f"{DAY_NAMES[field]}, {day}, is outside {EARLIEST_DAY} to {LATEST_DAY}.", field)
    return day


def period_parse(
    *,
    first: str | None,
    last: str | None,
    preset: str | None = None,
    today: date | None = None,
    zone: tzinfo = UTC,
    default: Preset = DEFAULT_PRESET,
) -> Period:
    """A period from the dashboard's query: dates `first`..`last` (YYYY-MM-DD, inclusive), else a preset's
    days, else the `default` preset's. A missing first day is 30 days before the last; a missing last day is
    today. A preset given with dates (the page's CSV links carry both) says how the period is compared
    (Period.previous). Raises PeriodError, with the sentence to show, for anything else."""
    today = today or datetime.now(zone).date()
    if preset and preset not in Preset.values:
        raise PeriodError(f"Choose a period: {', '.join(p.label.lower() for p in Preset)}, or dates.", "preset")
    if not first and not last:
        return preset_period(Preset(preset or default), today=today, zone=zone)
    given = _day(first, field="first") if first else None
    end = _day(last, field="last") if last else min(max(today, EARLIEST_DAY), LATEST_DAY)
    start = given or max(end - timedelta(days=29), EARLIEST_DAY)
    if start > end:
        raise PeriodError(f"The first day, {start}, is after the last day, {end}: swap them.")
    if (end - start).days > MAX_DAYS:
        raise PeriodError("Choose a period of at most ten years.")
    return Period(start, end, zone, preset or "")


class PeriodForm(forms.Form):
    """The dashboard's period as the page asks for it; its errors are shown beside the fields."""

    preset = forms.CharField(required=False)
    first = forms.CharField(required=False, label="From")
    last = forms.CharField(required=False, label="to")

    def __init__(self, data, *, today: date, zone: tzinfo, default: Preset = DEFAULT_PRESET):
        super().__init__(data)
        self.today, self.zone, self.default = today, zone, default

    def clean(self):
        cleaned = super().clean()
        try:
            cleaned["period"] = period_parse(
                first=cleaned.get("first"),
                last=cleaned.get("last"),
                preset=cleaned.get("preset"),
                today=self.today,
                zone=self.zone,
                default=self.default,
            )
        except PeriodError as exc:
            self.add_error(exc.field, str(exc))
        return cleaned
