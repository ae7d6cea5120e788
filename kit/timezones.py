"""The time zones people choose from: the tz database's zones for places, the common ones first.

`zoneinfo.available_timezones()` names about 600 keys, many of them no place anyone lives:
"Factory", "localtime", "posixrules", the "Etc/GMT+5" offsets (whose signs are inverted),
and old aliases ("US/Eastern", "Japan", "EST5EDT"). What is offered is UTC and the zones the
database's zone.tab lists for the world's countries (about 420); without that file, every
available Area/Location name in a region of the world.
"""

from __future__ import annotations

import zoneinfo
from datetime import datetime
from functools import cache
from pathlib import Path

# West to east: the zones most teams work in, offered before the full list.
COMMON_ZONES = (
    "UTC",
    "America/Los_Angeles",
    "America/Denver",
    "America/Chicago",
    "America/New_York",
    "America/Sao_Paulo",
    "Europe/London",
    "Europe/Paris",
    "Europe/Berlin",
    "Europe/Athens",
    "Africa/Johannesburg",
    "Asia/Dubai",
    "Asia/Kolkata",
    "Asia/Singapore",
    "Asia/Shanghai",
    "Asia/Tokyo",
    "Australia/Sydney",
    "Pacific/Auckland",
)
REGIONS = ("Africa", "America", "Antarctica", "Arctic", "Asia", "Atlantic", "Australia", "Europe", "Indian", "Pacific")


@cache
def zones_offered() -> tuple[str, ...]:
    """UTC, then every zone for a place, sorted; each one zoneinfo can load."""
    available = zoneinfo.available_timezones()
    listed = _zone_tab()
    places = listed & available if listed else {z for z in available if z.split("/")[0] in REGIONS and "/" in z}
    return ("UTC", *sorted(places))


def _zone_tab() -> set[str]:
    """The zone names of the first zone.tab found on zoneinfo's search path (empty when there is none)."""
    for root in zoneinfo.TZPATH:
        path = Path(root) / "zone.tab"
        if path.is_file():
            lines = path.read_text(encoding="utf-8").splitlines()
            return {line.split("\t")[2] for line in lines if line and not line.startswith("#")}
    return set()


def zone_label(name: str, *, now: datetime) -> str:
    """A zone as the picker shows it, with its offset and abbreviation at `now`: "Europe/Berlin (UTC+02:00, CEST)"."""
    local = now.astimezone(zoneinfo.ZoneInfo(name))
    offset = local.strftime("%z")
    abbreviation = local.tzname() or ""
    shown = f"UTC{offset[:3]}:{offset[3:]}" if offset != "+0000" else "UTC"
    if name == "UTC":
        return name
    place = name.replace("_", " ")
    if abbreviation and abbreviation not in shown and not abbreviation.startswith(("+", "-")):
        return f"{place} ({shown}, {abbreviation})"
    return f"{place} ({shown})"
