"""Caps on automatic investigation (AGENT_AUTO_INVESTIGATE): the runs intake may start for one account in
an hour, and the dollars those runs may spend in a day.

The decision is pure (`auto_cap_reached`, checked before the spend, as a budget is); its figures are read
by `auto_investigation_admit`, under the account's row lock, which the caller holds until the run it
starts commits.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import TextChoices
from django.utils import timezone

from engine.budgets import dollars
from engine.config import default_budget
from engine.models import Run, RunRequest
from engine.statuses import ACTIVE
from tickets.models import Account


class Cap(TextChoices):
    RUNS_PER_HOUR = "runs_per_hour", "runs per hour"
    DOLLARS_PER_DAY = "dollars_per_day", "dollars per day"


@dataclass(frozen=True)
class AutoCaps:
    """One account's caps: its own where set, else the settings'."""

    runs_per_hour: int
    micros_per_day: int


@dataclass(frozen=True)
class AutoUsage:
    """What the account's automatic runs used: those started in the last hour, and today's dollars (what
    the ended ones spent, plus the whole budget of each still going: it may yet spend it)."""

    runs_last_hour: int
    micros_today: int


@dataclass(frozen=True)
class Held:
    """A cap reached: which, and how it reads ("3 runs per hour", "$2.00 per day")."""

    cap: Cap
    reached: str


def auto_cap_reached(*, caps: AutoCaps, usage: AutoUsage, next_run_micros: int) -> Held | None:
    """The cap one more run (whose budget is `next_run_micros`) would pass, or None. A cap of 0 starts none."""
    if usage.runs_last_hour + 1 > caps.runs_per_hour:
        return Held(Cap.RUNS_PER_HOUR, f"{caps.runs_per_hour} runs per hour")
    if caps.micros_per_day == 0 or usage.micros_today + next_run_micros > caps.micros_per_day:
        return Held(Cap.DOLLARS_PER_DAY, f"{dollars(caps.micros_per_day)} per day")
    return None


def auto_caps(account: Account) -> AutoCaps:
    runs = account.auto_runs_per_hour
    per_day = account.auto_dollars_per_day
    return AutoCaps(
        runs_per_hour=settings.AGENT_AUTO_RUNS_PER_HOUR if runs is None else runs,
        micros_per_day=int(Decimal(settings.AGENT_AUTO_DOLLARS_PER_DAY if per_day is None else per_day) * 10**6),
    )


def auto_usage(*, account_id: int, now: datetime) -> AutoUsage:
    """The account's automatic runs (started by intake) in the last hour, and their dollars since midnight
    (the day of settings.TIME_ZONE)."""
    automatic = Run.objects.filter(ticket__account_id=account_id, request__via=RunRequest.Via.INTAKE)
    midnight = timezone.localtime(now).replace(hour=0, minute=0, second=0, microsecond=0)
    today = automatic.filter(created_at__gte=midnight).values_list(
        "status", "cost_used_micros", "cost_reserved_micros", "budget"
    )
    return AutoUsage(
        runs_last_hour=automatic.filter(created_at__gt=now - timedelta(hours=1)).count(),
        micros_today=sum(_may_spend(*row) for row in today),
    )


def _may_spend(status: str, used: int, reserved: int, budget: dict) -> int:
    if status in ACTIVE:
        return max(used + reserved, int(budget.get("max_cost_micros", 0)))
    return used


def auto_investigation_admit(*, account: Account, now: datetime) -> Held | None:
    """The cap that keeps a new automatic run of `account` from starting now, or None.

    The caller holds the account's row lock (`select_for_update`) until the run it then starts commits:
    intake requests of one account arriving together count and start one after the other.
    """
    assert transaction.get_connection().in_atomic_block, "auto_investigation_admit needs the account's row lock"
    next_run = default_budget(settings.AGENT_MODEL).max_cost_micros
    usage = auto_usage(account_id=account.pk, now=now)
    return auto_cap_reached(caps=auto_caps(account), usage=usage, next_run_micros=next_run)


def held_note(*, held: Held, account: Account, at: datetime) -> str:
    """What the ticket says: "not investigated automatically: ACME reached 20 runs per hour at 14:02 UTC"."""
    local = timezone.localtime(at)
    return f"not investigated automatically: {account.code} reached {held.reached} at {local:%H:%M} {local.tzname()}"
