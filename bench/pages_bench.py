"""Benchmark of the staff pages on a large database: each page's server time and SQL statements.

    createdb -h 127.0.0.1 -U postgres sa_scale_100k
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/sa_scale_100k python bench/pages_bench.py --runs 100000

Migrates the database and fills it with `manage.py seed_scale --runs N` when it is empty (a database
already seeded with N runs is used as it is), then loads each page 20 times (after one load to warm
the caches) through Django's test client, logged in as a supervisor, with DEBUG off: the time from the
request to the whole response (streamed ones read to the end), the median and 95th percentile, and the
statements one load sends (and their own time). Pages that show one object (a ticket, a packet, a run)
load a different one each time, spread over the whole database. The pages are measured by their URLs
only, so a page's content may change without the benchmark changing.

Prints a table (`--json`: also the figures as JSON). Target: every page's p95 at most 300 ms, and the
same statement count at 100,000 and 1,000,000 runs. Beside the outcomes dashboard, its floor: the runs and
packets of both periods it compares counted in two bare statements (a count and a sum each), the least any
page counting those rows can spend.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "supportagent.settings")
os.environ.setdefault("DJANGO_DEBUG", "false")
os.environ.setdefault("DJANGO_SECURE_SSL_REDIRECT", "false")  # the test client speaks plain HTTP
os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-" + uuid.uuid4().hex + uuid.uuid4().hex)
# As the web process runs (supportagent.wsgi): each statement planned for its values, none compiled.
os.environ.setdefault("DATABASE_PLAN_CACHE_MODE", "force_custom_plan")
os.environ.setdefault("DATABASE_JIT", "false")
# As deployed: the admin's static files collected (with DEBUG off, pages name them by their hashed names).
os.environ.setdefault("DJANGO_STATIC_ROOT", str(Path(tempfile.gettempdir()) / "pages-bench-static"))

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import Group, User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.models import Count, Sum  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.utils import timezone  # noqa: E402

from engine.models import ReviewPacket, Run  # noqa: E402
from engine.roles import SUPERVISORS, roles_setup  # noqa: E402
from staff.auth import token_create  # noqa: E402
from staff.dashboard_csv import Table  # noqa: E402
from staff.periods import Period  # noqa: E402
from tickets.models import Ticket  # noqa: E402

LOADS = 20
SLOW_LOADS = 5  # a page whose warming load takes longer than SLOW_MS is loaded this often (the figures say so)
SLOW_MS = 5000
TARGET_P95_MS = 300
BENCH_USER = "bench-supervisor"


@dataclass(frozen=True)
class Page:
    name: str
    urls: tuple[str, ...]  # one per load (cycled); one URL for a list, LOADS of them for single objects
    api: bool = False


@dataclass
class Figure:
    page: str
    median_ms: float
    p95_ms: float
    queries: int
    sql_ms: float
    status: int
    loads: int


def pages(rng: random.Random) -> list[Page]:
    """Every staff page the benchmark loads, with the URLs of its loads."""
    today = timezone.now().date()
    ticket = Ticket.objects.order_by("-pk").values_list("ref", flat=True).first() or "T-1"
    runs = _spread(Run, rng)
    week = quote((timezone.now() - timedelta(days=7)).replace(microsecond=0).isoformat())
    seven_days = quote(f"{today - timedelta(days=6)} 00:00:00+00:00")

    def period(days: int) -> str:
        return f"first={today - timedelta(days=days - 1)}&last={today}"

    admin = "/admin/agentrun"
    listed = [
        ("review queue", f"{admin}/reviewpacket/"),
        ("review queue, every state", f"{admin}/reviewpacket/?state=all"),
        ("review queue, rejected", f"{admin}/reviewpacket/?state=rejected"),
        ("review queue, search a ref", f"{admin}/reviewpacket/?state=all&q={ticket}"),
        ("ticket list", "/admin/tickets/ticket/"),
        ("ticket list, search a word", "/admin/tickets/ticket/?q=export"),
        ("ticket list, search a ref", f"/admin/tickets/ticket/?q={ticket}"),
        ("ticket list, packet pending", "/admin/tickets/ticket/?pending=yes"),
        ("ticket list, latest run refused", "/admin/tickets/ticket/?latest_run=INVALID_OR_FORBIDDEN"),
        ("runs list", f"{admin}/run/"),
        ("runs list, a status", f"{admin}/run/?status__exact=NO_PROGRESS"),
        ("runs list, a model", f"{admin}/run/?model_name=openai%3Agpt-4.1-mini"),
        ("runs list, past 7 days", f"{admin}/run/?created_at__gte={seven_days}"),
        ("runs list, search a ref", f"{admin}/run/?q={ticket}"),
        ("runs list, a dashboard link", f"{admin}/run/?status__in=MODEL_ERROR&created_at__gte={week}"),
        ("approvals", f"{admin}/approval/"),
        ("review history", f"{admin}/packetreview/"),
        ("outcomes, 7 days", f"/admin/outcomes/?{period(7)}"),
        ("outcomes, 30 days", f"/admin/outcomes/?{period(30)}"),
        ("outcomes, 365 days", f"/admin/outcomes/?{period(365)}"),
        *((f"CSV {t.value}, 30 days", f"/admin/outcomes/{t.value}.csv?{period(30)}") for t in Table),
        (f"CSV {Table.RUNS.value}, 365 days", f"/admin/outcomes/{Table.RUNS.value}.csv?{period(365)}"),
    ]
    single = [
        ("a ticket", [f"/admin/tickets/ticket/{pk}/change/" for pk in _spread(Ticket, rng)]),
        ("a packet", [f"{admin}/reviewpacket/{pk}/change/" for pk in _spread(ReviewPacket, rng)]),
        ("a run", [f"{admin}/run/{pk}/change/" for pk in runs]),
    ]
    api = [
        ("API runs", "/api/runs"),
        ("API runs, a status", "/api/runs?status=NO_PROGRESS"),
        ("API runs, a model", "/api/runs?model=openai:gpt-4.1-mini"),
        ("API runs, a ticket", f"/api/runs?ticket={ticket}"),
        ("API runs, since a week", f"/api/runs?since={week}"),
        ("API runs, a status since a week", f"/api/runs?status=MODEL_ERROR&since={week}"),
        ("API runs, 100 at offset 10,000", "/api/runs?limit=100&offset=10000"),
    ]
    return [
        *(Page(name, (url,)) for name, url in listed),
        *(Page(name, tuple(urls)) for name, urls in single),
        *(Page(name, (url,), api=True) for name, url in api),
        Page("API a run", tuple(f"/api/runs/{pk}" for pk in runs), api=True),
    ]


def floors() -> list[tuple[str, Callable[[], object]]]:
    """The dashboard's floor for each period it is measured at: its runs and packets, and the period's before,
    counted (and their cost summed) with nothing grouped, no medians and nothing sent to a browser."""
    today = timezone.now().date()
    found = []
    for days in (7, 30, 365):
        period = Period(today - timedelta(days=days - 1), today)
        since, until = period.previous().since, period.until

        def count(since=since, until=until) -> object:
            investigations = Run.objects.filter(purpose=Run.Purpose.INVESTIGATION)
            runs = investigations.filter(created_at__gte=since, created_at__lt=until)
            packets = ReviewPacket.objects.filter(
                run_purpose=Run.Purpose.INVESTIGATION, run_created_at__gte=since, run_created_at__lt=until
            )
            return runs.aggregate(n=Count("pk"), cost=Sum("cost_used_micros")), packets.aggregate(n=Count("pk"))

        found.append((f"floor of outcomes, {days} days: count both periods", count))
    return found


def _spread(model, rng: random.Random) -> list[int]:
    """LOADS primary keys of `model` drawn over its whole range (old and new rows alike)."""
    ids = model.objects.order_by("pk").values_list("pk", flat=True)
    top = ids.last() or 0
    found: list[int] = []
    while len(found) < LOADS and top:
        pk = ids.filter(pk__gte=rng.randint(1, top)).first()
        if pk is not None:
            found.append(pk)
    return found


def measure(page: Page, client: Client, headers: dict[str, str]) -> Figure:
    """A page's figures: its loads cycle through its URLs."""
    return timed(page.name, lambda i: _load(client, page.urls[i % len(page.urls)], headers))


def measure_floor(name: str, count: Callable[[], object]) -> Figure:
    """A floor's figures, measured as a page's are."""

    def load(i: int) -> int:
        count()
        return 200

    return timed(name, load)


def timed(name: str, load: Callable[[int], int]) -> Figure:
    """One warming load (the last), then LOADS loads (SLOW_LOADS when slower than SLOW_MS): times, and the
    statements of the last one. `load(i)` does the i-th load and returns its HTTP status."""
    began = time.perf_counter()
    load(-1)
    loads = LOADS if (time.perf_counter() - began) * 1000 <= SLOW_MS else SLOW_LOADS
    times, sql_times, queries, status = [], [], 0, 0
    for i in range(loads):
        with CaptureQueriesContext(connection) as captured:
            began = time.perf_counter()
            status = load(i)
            times.append((time.perf_counter() - began) * 1000)
        queries = len(captured.captured_queries)
        sql_times.append(sum(float(q["time"]) for q in captured.captured_queries) * 1000)
    ordered = sorted(times)
    return Figure(
        name,
        round(statistics.median(times), 1),
        round(ordered[math.ceil(0.95 * len(ordered)) - 1], 1),
        queries,
        round(statistics.median(sql_times), 1),
        status,
        loads,
    )


def _load(client: Client, url: str, headers: dict[str, str]) -> int:
    response = client.get(url, **headers)
    if getattr(response, "streaming", False):
        b"".join(response.streaming_content)
    else:
        _ = response.content
    return response.status_code


def supervisor() -> tuple[Client, dict[str, str]]:
    roles_setup()
    user, _ = User.objects.get_or_create(username=BENCH_USER, defaults={"is_staff": True})
    user.groups.add(Group.objects.get(name=SUPERVISORS))
    client = Client()
    client.force_login(user)
    _, raw = token_create(user=user, name="pages bench")
    return client, {"HTTP_AUTHORIZATION": f"Bearer {raw}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, required=True, help="the runs the database holds (seeded when empty)")
    parser.add_argument("--only", action="append", default=[], help="measure only pages whose name contains this")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = parser.parse_args()
    if connection.vendor != "postgresql":
        sys.exit("pages_bench measures PostgreSQL: set DATABASE_URL")
    call_command("migrate", verbosity=0)
    call_command("collectstatic", interactive=False, verbosity=0)
    call_command("seed_scale", runs=args.runs)
    client, bearer = supervisor()
    figures = []
    print("| page | median ms | p95 ms | queries | SQL ms (median) | |\n|---|---:|---:|---:|---:|---|")
    for page in pages(random.Random(7)):
        if args.only and not any(part in page.name for part in args.only):
            continue
        figures.append(measure(page, client, bearer if page.api else {}))
        print(_row(figures[-1]), flush=True)
    floored = []
    for name, count in floors():
        if args.only and not any(part in name for part in args.only):
            continue
        floored.append(measure_floor(name, count))
        print(_row(floored[-1]), flush=True)
    slow = [f.page for f in figures if f.p95_ms > TARGET_P95_MS or f.status != 200]
    print(
        f"{Run.objects.count():,} runs; {len(slow)} of {len(figures)} pages over {TARGET_P95_MS} ms at p95 or failing"
    )
    if args.json:
        print(
            json.dumps(
                {
                    "runs": Run.objects.count(),
                    "pages": [asdict(f) for f in figures],
                    "floors": [asdict(f) for f in floored],
                }
            )
        )


def _row(f: Figure) -> str:
    """One line of the Markdown table; a page over the target, failing or loaded fewer times says so."""
    notes = [
        *(["over"] if f.p95_ms > TARGET_P95_MS else []),
        *([f"status {f.status}"] if f.status != 200 else []),
        *([f"{f.loads} loads"] if f.loads != LOADS else []),
    ]
    return f"| {f.page} | {f.median_ms:.0f} | {f.p95_ms:.0f} | {f.queries} | {f.sql_ms:.0f} | {', '.join(notes)} |"


if __name__ == "__main__":
    main()
