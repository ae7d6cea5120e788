"""The dashboard's charts, drawn on the server: no scripts, no CDN, and text a phone can read.

Every word and number of a chart is HTML text (at least 12 px, whatever the screen's width);
only the bars of the daily trend are SVG, stretched to the width there is. A bar chart is rows
of label, bar and value that wrap on a narrow screen; a bar with somewhere to go is a link.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from staff.dashboard import TREND, Outcomes, TrendDay, day_bounds, runs_url
from staff.periods import Period

TREND_HEIGHT = 180  # px, the plot's height; its width is the page's


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    shown: str  # the value as the page writes it
    href: str | None = None


def bar_chart(bars: list[Bar], *, title: str, max_value: float | None = None, empty: str) -> SafeString:
    """Horizontal bars, one row per bar: label, bar (its length against `max_value`, else the largest), value."""
    top = max((b.value for b in bars), default=0) if max_value is None else max_value
    rows = format_html_join("", "{}", ((_bar_row(bar, top),) for bar in bars))
    return format_html(
        '<div class="chart sa-hbars" role="group" aria-label="{}">{}</div>',
        title,
        rows if bars else format_html('<p class="sa-note">{}</p>', empty),
    )


def _bar_row(bar: Bar, top: float) -> SafeString:
    width = f"{100 * bar.value / top:.1f}" if top > 0 else "0"
    inner = format_html(
        '<span class="sa-hbar-label">{}</span><span class="sa-hbar-track" title="{}: {}">'
        '<span class="sa-hbar-fill" style="width:{}%"></span></span><span class="sa-hbar-value">{}</span>',
        bar.label,
        bar.label,
        bar.shown,
        width,
        bar.shown,
    )
    if bar.href:
        return format_html('<a class="sa-hbar bar-link" href="{}">{}</a>', bar.href, inner)
    return format_html('<div class="sa-hbar">{}</div>', inner)


def trend_chart(out: Outcomes, *, title: str) -> SafeString:
    """Runs per day as stacked vertical bars (one colour per outcome), each segment linked to its runs.

    The bars are SVG in a 10-unit-wide slot per day, stretched to the page's width; the scale,
    the first and last day and the legend are HTML beside it.
    """
    days = out.daily
    peak = max((d.total for d in days), default=0)
    width = 10 * max(len(days), 1)
    segments = format_html_join("", "{}", ((_segments(d, 10 * i, peak, out.period),) for i, d in enumerate(days)))
    legend = format_html_join(
        "",
        '<li><span class="sa-swatch" style="background:{}"></span>{}</li>',
        ((o.colour, o.name) for o in TREND),
    )
    return format_html(
        '<div class="chart sa-trend"><div class="sa-trend-scale"><span>{}</span><span>0</span></div>'
        '<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{}" viewBox="0 0 {} 100" '
        'preserveAspectRatio="none" width="100%" height="{}"><title>{}</title>{}'
        '<line x1="0" y1="100" x2="{}" y2="100" stroke="#666" vector-effect="non-scaling-stroke"/></svg>'
        '<div class="sa-trend-days"><span>{}</span><span>{}</span></div><ul class="sa-legend">{}</ul></div>',
        peak,
        title,
        width,
        TREND_HEIGHT,
        title,
        segments,
        width,
        days[0].day.isoformat() if days else "",
        days[-1].day.isoformat() if days else "",
        legend,
    )


def _segments(day: TrendDay, x: int, peak: int, period: Period) -> SafeString:
    since, until = day_bounds(day.day, period)
    y, shapes = 100.0, []
    for outcome, n in zip(TREND, day.counts, strict=True):
        if not n:
            continue
        h = 100 * n / peak
        y -= h
        rect = format_html(
            '<rect x="{}" y="{}" width="8" height="{}" fill="{}"><title>{}: {} {}</title></rect>',
            x + 1,
            f"{y:.2f}",
            f"{h:.2f}",
            outcome.colour,
            day.day.isoformat(),
            n,
            outcome.name.lower(),
        )
        shapes.append(
            format_html(
                '<a href="{}" class="bar-link">{}</a>', runs_url(outcome.statuses, since=since, until=until), rect
            )
        )
    return format_html_join("", "{}", ((shape,) for shape in shapes))
