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
    """`text` with each "[E1]" a link to that evidence item on the page, and its times in the viewer's zone."""
    escaped = _local_times(str(conditional_escape(text or "") if autoescape else (text or "")))
    return mark_safe(_CITATION.sub(r'<a class="sa-cite" href="#evidence-\1">[\1]</a>', escaped))


# A moment written in ISO 8601 with its offset (or Z), as summaries, open questions and evidence store it:
# "2026-09-14T10:02:00Z", "2026-09-14 10:02:00+00:00", "2026-09-14T12:02+02:00". A time without an offset
# names no moment (whose 10:02?) and is left as written.
_ISO_MOMENT = re.compile(
    r"(?<![0-9A-Za-z])([0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,6})?)?)"
    r"(Z|[+-][0-9]{2}:?[0-9]{2})(?![0-9A-Za-z])"
)


def _moment(match: re.Match) -> datetime | None:
    offset = match.group(2)
    offset = "+00:00" if offset == "Z" else (offset if ":" in offset else f"{offset[:3]}:{offset[3:]}")
    try:
        return datetime.fromisoformat(match.group(1).replace(" ", "T") + offset)
    except ValueError:  # "2026-13-45T99:00Z": not a time, whatever its shape
        return None


def _local_time(match: re.Match) -> str:
    stored, moment = match.group(0), _moment(match)
    if moment is None:
        return stored
    return f'<time datetime="{moment.isoformat()}" title="stored as {stored}">{when(moment)}</time>'


def local_times_text(text: str) -> str:
    """Plain `text` with each ISO moment in it written as `when` writes times, for a place that shows text only
    (an admin list's cell, before it is cut to length)."""
    return _ISO_MOMENT.sub(lambda m: when(moment) if (moment := _moment(m)) else m.group(0), text)


def _local_times(escaped: str) -> str:
    """Escaped text with each ISO moment in it shown as `when` shows times (ISO text holds nothing to escape)."""
    return _ISO_MOMENT.sub(_local_time, escaped)


@register.filter(needs_autoescape=True)
def local_times(text: str | None, autoescape: bool = True) -> str:
    """`text` (escaped) with each UTC ISO time in it shown in the viewer's zone, labelled with it:
    "failed at 2026-09-14T10:02:00Z" reads "failed at 2026-09-14 12:02:00 CEST" in Berlin. Only the
    display changes: the text stored (a summary, evidence) is never rewritten, and the stored form is
    the element's `datetime` and its tooltip."""
    return mark_safe(_local_times(str(conditional_escape(text or "") if autoescape else (text or ""))))


# Where a call or a code may break on a narrow screen: after these (a dot only before a letter, as in a host
# name, not in "3.5"), and never inside a word.
_BREAK_AFTER = re.compile(r"(?<=[_/,:=&?])(?=\S)|(?<=\.)(?=[A-Za-z])")


def breakable_html(text: str) -> str:
    """`text` escaped, with a <wbr> after each _ / , : = & ? (and a dot before a letter) followed by more text:
    "read_<wbr>job_<wbr>status"."""
    return "<wbr>".join(_unbroken(piece) for piece in _BREAK_AFTER.split(text))


def _unbroken(piece: str) -> str:
    """A piece between break points, escaped, each word of it with a hyphen kept on one line ("J-42" would
    break after the hyphen) without changing the text a reader copies."""
    return "".join(
        f'<span class="sa-nobr">{conditional_escape(word)}</span>' if "-" in word else str(conditional_escape(word))
        for word in _SPACES.split(piece)
    )


_SPACES = re.compile(r"(\s+)")


@register.filter
def breakable(text: object) -> str:
    """A code or identifier that may break only after _ / , . : = & ? (see the `code` style in _styles.html)."""
    return mark_safe(breakable_html("" if text is None else str(text)))


def call_html(tool: str, args: Any) -> str:
    """A tool call as staff pages show it: `<code class="sa-call">tool {"arg": "value"}</code>`, breakable."""
    shown = f"{tool} {as_json(args)}" if tool else as_json(args)
    return mark_safe(f'<code class="sa-call">{breakable_html(shown)}</code>')


@register.simple_tag
def call(tool: str, args: Any) -> str:
    return call_html(tool, args)
