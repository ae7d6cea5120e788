"""Filters for the staff pages: one time format in the viewer's zone, money in dollars, stop reasons in words."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from typing import Any

from django import template
from django.utils import dateformat, timezone
from django.utils.html import conditional_escape
from django.utils.safestring import mark_safe

from engine.budgets import dollars as _dollars
from engine.timeline import stop_label as _stop_label
from kit.formats.en.formats import DATETIME_FORMAT

register = template.Library()

STAFF_TIME_FORMAT = DATETIME_FORMAT  # the admin's own lists use it too (settings.FORMAT_MODULE_PATH)


@register.filter
def when(value: datetime | None) -> str:
    """`value` in the active (the viewer's) time zone, labelled with it: "2026-09-14 12:02:00 CEST"."""
    if value is None:
        return "—"
    if timezone.is_aware(value):
        value = timezone.localtime(value)
    return dateformat.format(value, STAFF_TIME_FORMAT)


@register.filter
def of(mapping: dict | None, key: Any) -> Any:
    """`mapping[key]`, or None (a template looks an item up by a key it holds in a variable)."""
    return mapping.get(key) if mapping else None


@register.filter
def clock(value: datetime | None) -> str:
    """The time of day in the viewer's zone, labelled with it: "10:42 (CEST)"; `when` gives the date too."""
    if value is None:
        return "—"
    if timezone.is_aware(value):
        value = timezone.localtime(value)
    return dateformat.format(value, "H:i (T)")


@register.filter
def duration(value: timedelta) -> str:
    """A span in words, to the minute: "15 minutes", "1 hour", "2 hours 30 minutes"."""
    hours, minutes = divmod(round(value.total_seconds() / 60), 60)
    parts = [f"{n} {unit}{'s' if n != 1 else ''}" for n, unit in ((hours, "hour"), (minutes, "minute")) if n]
    return " ".join(parts) or "less than a minute"


@register.filter
def dollars(micros: int | None) -> str:
    return "—" if micros is None else _dollars(int(micros))


@register.filter
def stop_label(status: str, detail: str = "") -> str:
    return _stop_label(status, detail or "")


@register.filter
def as_json(value: Any) -> str:
    """Arguments as they were proposed: compact JSON, not Python's repr."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


_CITATION = re.compile(r"\[(E[1-9][0-9]*)\]")


@register.filter(needs_autoescape=True)
def cited(text: str | None, autoescape: bool = True) -> str:
    """`text` with each "[E1]" a link to that evidence item on the page."""
    escaped = conditional_escape(text or "") if autoescape else (text or "")
    return mark_safe(_CITATION.sub(r'<a class="sa-cite" href="#evidence-\1">[\1]</a>', str(escaped)))
