"""seed_scale: fill a database with made-up work to measure the staff pages at a year of data and more."""

from __future__ import annotations

import random
import time

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.core.management.color import no_style
from django.db import connection, models, transaction
from django.db.models import Max
from django.utils import timezone

from engine.models import (
    Approval,
    EvidenceCheck,
    ModelRequest,
    Observation,
    PacketReview,
    ReviewPacket,
    Run,
    RunRequest,
    ToolAttempt,
)
from engine.scaleseed.copying import TableCopy
from engine.scaleseed.schedule import schedule_make
from engine.scaleseed.story import Ids, Teller
from engine.scaleseed.world import ACCOUNT_PREFIX, world_make
from tickets.models import Evidence, Job, Ticket, TicketMessage

# Every table the stories write, in the order their rows are sent (foreign keys are checked at commit).
TABLES: tuple[type[models.Model], ...] = (
    Ticket,
    TicketMessage,
    Job,
    Run,
    RunRequest,
    ModelRequest,
    Evidence,
    ToolAttempt,
    Observation,
    Approval,
    ReviewPacket,
    PacketReview,
    EvidenceCheck,
)
RUNS_PER_COMMIT = 20_000
MAX_RUNS = 10_000_000


class Command(BaseCommand):
    help = (
        "Fill the database with RUNS made-up investigations (1,000 a day up to now by default), their tickets, "
        "evidence, packets, reviews and approvals, for measuring (bench/pages_bench.py). Refuses a database "
        "holding anything it did not write, unless --force. Never part of the demo."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--runs", type=int, required=True, help="how many runs to write (1 to 10,000,000)")
        parser.add_argument("--per-day", type=int, default=1000, help="runs a day, weekdays busier (default 1000)")
        parser.add_argument("--seed", type=int, default=1, help="the random seed: the same seed writes the same data")
        parser.add_argument(
            "--force", action="store_true", help="write even into a database holding other tickets or runs"
        )

    def handle(self, *args, runs: int, per_day: int, seed: int, force: bool, **options) -> None:
        if not 1 <= runs <= MAX_RUNS:
            raise CommandError(f"--runs must be 1 to {MAX_RUNS:,}, got {runs}")
        if not 1 <= per_day <= 1_000_000:
            raise CommandError(f"--per-day must be 1 to 1,000,000, got {per_day}")
        if connection.vendor != "postgresql":
            raise CommandError("seed_scale writes with PostgreSQL's COPY: point DATABASE_URL at a PostgreSQL database")
        if not force and self._already_seeded(runs):
            return
        began = time.monotonic()
        written = seed_scale(runs=runs, per_day=per_day, seed=seed, say=self.stdout.write)
        seconds = time.monotonic() - began
        total = sum(written.values())
        for model, n in written.items():
            self.stdout.write(f"  {model._meta.label:28} {n:>12,}")
        self.stdout.write(f"{runs:,} runs, {total:,} rows in {seconds:.0f} s ({total / seconds:,.0f} rows/s)")

    def _already_seeded(self, runs: int) -> bool:
        """True when this database already holds exactly these seeded runs (nothing to do); refuses any other
        content: tickets or runs it did not write, or a different number of its own."""
        theirs = Ticket.objects.exclude(account__code__startswith=ACCOUNT_PREFIX)
        if theirs.exists() or Run.objects.exclude(ticket__account__code__startswith=ACCOUNT_PREFIX).exists():
            raise CommandError(
                "This database holds tickets or runs seed_scale did not write; it writes made-up work only into "
                "a database of its own (createdb, migrate, then seed_scale). --force writes anyway."
            )
        seeded = Run.objects.count()
        if seeded == runs:
            self.stdout.write(f"Already seeded with {runs:,} runs; nothing written.")
            return True
        if seeded:
            raise CommandError(
                f"This database already holds {seeded:,} seeded runs, not {runs:,}: seed a fresh database for "
                "another size (--force adds these runs to them)."
            )
        return False


def seed_scale(
    *, runs: int, per_day: int, seed: int, trust_keys: bool = True, say=lambda text: None
) -> dict[type[models.Model], int]:
    """Write `runs` runs and everything around them; returns the rows written per table.

    One transaction per RUNS_PER_COMMIT runs (whole tickets), so that an interrupted seed leaves whole
    tickets behind; then the tables' id sequences are moved past the new rows, and the tables vacuumed
    and analyzed, as autovacuum would have by the time a year of work had come in.

    `trust_keys`: when the database role may (a superuser), PostgreSQL does not check each row's foreign
    keys (`session_replication_role = replica`, as pg_restore's --disable-triggers): the rows are made
    together and refer to each other by construction, and the tests seed with the checks on. Measured on
    the loaded 2-core test machine, 40,000 runs: 31 s instead of 54 s.
    """
    rng, now = random.Random(seed), timezone.now()
    world = world_make(rng=rng)
    first = {model: (model._default_manager.aggregate(top=Max("pk"))["top"] or 0) + 1 for model in TABLES}
    schedule = schedule_make(runs=runs, per_day=per_day, now=now, rng=rng, first_run_id=first[Run])
    tables = {model: TableCopy(model) for model in TABLES}
    teller = Teller(world=world, ids=Ids(first), rng=rng, now=now, tables=tables)
    pending = 0
    for times in schedule:
        teller.ticket(times)
        pending += len(times.starts)
        if pending >= RUNS_PER_COMMIT:
            done = _commit(tables, trust_keys)
            pending = 0
            say(f"  {done:,} runs of {runs:,}")
    _commit(tables, trust_keys)
    _sequences_reset()
    _vacuum_analyze()
    return {model: table.written for model, table in tables.items()}


def _commit(tables: dict[type[models.Model], TableCopy], trust_keys: bool) -> int:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('is_superuser') = 'on'")
        if trust_keys and cursor.fetchone()[0]:
            cursor.execute("SET LOCAL session_replication_role = replica")
        for table in tables.values():
            table.flush()
    return tables[Run].written


def _sequences_reset() -> None:
    with connection.cursor() as cursor:
        for statement in connection.ops.sequence_reset_sql(no_style(), list(TABLES)):
            cursor.execute(statement)


def _vacuum_analyze() -> None:
    with connection.cursor() as cursor:
        for model in TABLES:
            cursor.execute(f'VACUUM (ANALYZE) "{model._meta.db_table}"')
