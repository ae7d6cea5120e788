"""When the runs happen: tickets arriving day by day up to now, some investigated again later.

Pure (no database): a random generator in, a schedule out. Weekdays are busier than weekends and
working hours (UTC) busier than nights; about 1.4 runs a ticket (72 % of tickets one, the rest two to
four, again hours to days later). Runs get their ids in the order they start, as a live system's do.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import datetime, timedelta

from engine.scaleseed.draws import Weighted

# Monday first; a weekend day gets about half a weekday's tickets.
WEEKDAY_WEIGHTS = (1.15, 1.2, 1.15, 1.1, 1.0, 0.5, 0.45)
HOUR_WEIGHTS = (1, 1, 1, 1, 1, 2, 3, 5, 8, 10, 10, 10, 9, 10, 10, 9, 8, 6, 4, 3, 2, 2, 1, 1)
RUNS_PER_TICKET = ((1, 0.72), (2, 0.20), (3, 0.06), (4, 0.02))
MEAN_RUNS_PER_TICKET = sum(k * p for k, p in RUNS_PER_TICKET)
HOURS = Weighted(enumerate(HOUR_WEIGHTS))
RUNS_DRAW = Weighted(RUNS_PER_TICKET)
FOLLOW_UP_MEDIAN_HOURS = 20.0
FOLLOW_UP_SPREAD = 1.1  # sigma of the log-normal gap between a ticket's runs
FOLLOW_UP_LIMITS = (timedelta(minutes=10), timedelta(days=14))


@dataclass
class TicketTimes:
    """One ticket: when it arrived and when each of its runs started (oldest first), with the runs' ids."""

    created_at: datetime
    starts: list[datetime]
    run_ids: list[int]


def schedule_make(
    *, runs: int, per_day: int, now: datetime, rng: random.Random, first_run_id: int = 1
) -> list[TicketTimes]:
    """Tickets in the order they arrived, holding exactly `runs` runs, the newest ending by `now`.

    Days are filled backwards from today until there are enough runs; the oldest day's surplus is then
    taken off (whole tickets first, then follow-up runs), so the total is exact.
    """
    days: list[list[TicketTimes]] = []
    total, day = 0, 0
    while total < runs:
        tickets = _day_tickets(now, day, per_day, rng)
        days.append(tickets)
        total += sum(len(t.starts) for t in tickets)
        day += 1
    oldest = days[-1]
    while oldest and total - len(oldest[0].starts) >= runs:
        total -= len(oldest.pop(0).starts)
    for ticket in oldest:
        while total > runs and len(ticket.starts) > 1:
            ticket.starts.pop()
            total -= 1
    schedule = [t for tickets in reversed(days) for t in tickets]
    _number_runs(schedule, first_run_id)
    return schedule


def _day_tickets(now: datetime, days_ago: int, per_day: int, rng: random.Random) -> list[TicketTimes]:
    """The tickets that arrived `days_ago` days before today (today: up to now), each with its run times."""
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=days_ago)
    weight = WEEKDAY_WEIGHTS[midnight.weekday()] / (sum(WEEKDAY_WEIGHTS) / 7)
    expected = per_day * weight / MEAN_RUNS_PER_TICKET
    count = max(int(rng.gauss(expected, math.sqrt(expected))), 0)
    arrivals = sorted(midnight + _time_of_day(rng) for _ in range(count))
    tickets = []
    for arrived in arrivals:
        if arrived >= now:
            continue
        start = arrived + timedelta(seconds=rng.uniform(5, 600))
        starts = [start]
        for _ in range(RUNS_DRAW.draw(rng) - 1):
            start = start + _follow_up_gap(rng)
            starts.append(start)
        starts = [s for s in starts if s < now - timedelta(seconds=60)]  # a run ends before now
        if starts:
            tickets.append(TicketTimes(arrived, starts, []))
    return tickets


def _time_of_day(rng: random.Random) -> timedelta:
    hour = HOURS.draw(rng)
    return timedelta(hours=hour, seconds=rng.uniform(0, 3600))


def _follow_up_gap(rng: random.Random) -> timedelta:
    gap = timedelta(hours=rng.lognormvariate(math.log(FOLLOW_UP_MEDIAN_HOURS), FOLLOW_UP_SPREAD))
    return min(max(gap, FOLLOW_UP_LIMITS[0]), FOLLOW_UP_LIMITS[1])


def _number_runs(schedule: list[TicketTimes], first_run_id: int) -> None:
    """Run ids in the order the runs started, whichever ticket they are on."""
    order = sorted((start, t, i) for t, ticket in enumerate(schedule) for i, start in enumerate(ticket.starts))
    for ticket in schedule:
        ticket.run_ids = [0] * len(ticket.starts)
    for offset, (_, t, i) in enumerate(order):
        schedule[t].run_ids[i] = first_run_id + offset
