"""Fault benchmark: investigations in the production shape while PostgreSQL, a worker, beat or Redis fails.

    python bench/fault_bench.py                      # every case, a table
    python bench/fault_bench.py --case pg_restart    # one case (--case may be repeated)
    python bench/fault_bench.py --json               # the figures as one JSON object

Services of its own (bench/fault_services.py), so that no fault touches the
machine's shared ones: a PostgreSQL cluster (initdb into a temporary
directory, on a free port) and a redis-server (with `--appendonly yes` unless
`--redis-persistence off`). A template database is migrated once with
`manage.py migrate`; each case starts on a fresh copy of it, seeded with the
demo data, and a fresh Redis, with 2 Celery worker processes of 25 threads
(`--pool threads`) and `celery beat`, as docs/production/deployment.md runs them.

Each case starts 100 investigations (`engine.services.investigation_start`, as
`manage.py investigate --enqueue` does), each of its own copy of T-1001, evenly
over 2 s (from a few threads, as a web server's requests come), with the default
model (`rules`) and realistic waits added in the workers (bench/fault_worker.py:
about 1 s per model request and 0.2 s per lookup, each within +-50 %). Runs get
a deadline of `--deadline-seconds` (45, the contract's default; T-1001's account
has a sensitive job, which would give its runs the approval deadline, 900 s,
instead). At +2 s (or once the last run is started, when a busy machine took
longer: the JSON gives both times), with about 50 runs running and 50 queued,
the fault:

* quiet: none;
* pg_restart: `pg_ctl restart -m fast` (`--tries` times, each on a fresh state);
* pg_down_20s: `pg_ctl stop -m fast`, started again 20 s later;
* worker_sigkill: one worker process SIGKILLed and a replacement started;
* beat_stopped: beat stopped for 60 s, while a worker is SIGKILLed and replaced;
* redis_down_30s: Redis stopped (SIGTERM) and started again 30 s later; one more
  investigation is started while it is down, and the time that call takes is reported.

Figures per case: runs ended with a packet (and runs with two); packets
missing evidence that a quiet run of T-1001 cites (compared by the evidence's
source refs: J-42 and the documents), and of those the ones named incomplete (a
lookup of the run whose attempts all failed, interrupted, timed out or erred, its
argument named in an open question the quiet packet does not ask); task deaths
(worker log lines where Celery reports a task "raised unexpected"); watchdog
tasks discarded as expired ("Discarding revoked task: agentrun.watchdog"); runs
past their deadline (ended more than 1 s after it, or DEADLINE); the time from
the fault's end (the service back, the replacement started) to the last run's
end and to the first packet; p95 run time (creation to end); and the
invariants: every ended run has one packet naming its status, no reservation
left pending, counters equal to their rows, no evidence twice, nothing over
budget. No invariant checker existed to reuse (tests/agentrun/test_loop_properties.py
asserts the same inline), so bench/fault_figures.py has its own.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))

import psycopg  # noqa: E402

if TYPE_CHECKING:
    from fault_figures import Reference
from fault_services import CeleryProcesses, Postgres, Redis, free_port  # noqa: E402

CASES = ("quiet", "pg_restart", "pg_down_20s", "worker_sigkill", "beat_stopped", "redis_down_30s")
DATABASE, TEMPLATE = "fault", "fault_template"
COPY_PREFIX = "T-1001-F"
# Starting an investigation takes tens of milliseconds on a busy machine: a few threads keep the arrivals on time,
# as a web server's several requests would.
STARTING_THREADS = 8
BEGAN = time.monotonic()


def say(what: str) -> None:
    """Progress on stderr (stdout holds only the figures)."""
    print(f"[{time.monotonic() - BEGAN:6.1f} s] {what}", file=sys.stderr, flush=True)


@dataclass
class Plan:
    runs: int
    spread_s: float
    fault_at_s: float
    deadline_s: float
    operation_timeout_s: float | None
    workers: int
    threads: int
    persistence: bool
    warm_up: int


@dataclass
class Window:
    """One case's timeline, in seconds since the epoch."""

    began: float = 0.0
    fault_start: float = 0.0
    fault_end: float = 0.0
    last_start: float = 0.0
    start_while_down_s: float | None = None
    start_error: str = ""
    extra_ids: list[int] = field(default_factory=list)


class Case:
    """The services of one case and the fault done to them."""

    def __init__(self, pg: Postgres, redis: Redis, celery: CeleryProcesses, plan: Plan):
        self.pg, self.redis, self.celery, self.plan = pg, redis, celery, plan
        self.window = Window()

    def until(self, offset_s: float) -> None:
        time.sleep(max(self.window.began + offset_s - time.time(), 0))

    def start(self, number: int, ticket) -> int:
        """Start the `number`-th investigation at its time (the runs arrive evenly over the spread)."""
        from django.db import connection

        self.until(self.plan.spread_s * number / self.plan.runs)
        try:
            return start_investigation(ticket)
        finally:
            connection.close()  # this thread's: back to the pool
            self.window.last_start = max(self.window.last_start, time.time())

    def fault(self, name: str) -> None:
        self.until(self.plan.fault_at_s)
        self.window.fault_start = time.time()
        FAULTS[name](self)
        self.window.fault_end = time.time()


def _quiet(case: Case) -> None:
    return None


def _pg_restart(case: Case) -> None:
    case.pg.restart()


def _pg_down(case: Case) -> None:
    case.pg.stop()
    time.sleep(max(case.window.fault_start + 20 - time.time(), 0))
    case.pg.start()


def _worker_sigkill(case: Case) -> None:
    case.celery.kill_worker(case.celery.workers[0])
    case.celery.worker(case.plan.threads)


def _beat_stopped(case: Case) -> None:
    case.celery.stop_beat()
    _worker_sigkill(case)
    time.sleep(max(case.window.fault_start + 60 - time.time(), 0))
    case.celery.start_beat()


def _redis_down(case: Case) -> None:
    from tickets.models import Ticket

    case.redis.stop()
    time.sleep(max(case.window.fault_start + 1 - time.time(), 0))
    ticket = Ticket.objects.get(ref=f"{COPY_PREFIX}X")
    began = time.perf_counter()
    try:
        case.window.extra_ids.append(start_investigation(ticket))
    except Exception as exc:  # a figure too: the call failed while the broker was down
        case.window.start_error = f"{type(exc).__name__}: {exc}"
    case.window.start_while_down_s = round(time.perf_counter() - began, 3)
    time.sleep(max(case.window.fault_start + 30 - time.time(), 0))
    case.redis.start()


FAULTS: dict[str, Callable[[Case], None]] = {
    "quiet": _quiet,
    "pg_restart": _pg_restart,
    "pg_down_20s": _pg_down,
    "worker_sigkill": _worker_sigkill,
    "beat_stopped": _beat_stopped,
    "redis_down_30s": _redis_down,
}


# --- the database --------------------------------------------------------------------------------


class Template:
    """The database every case copies, migrated with `manage.py migrate` in the background (it takes a while;
    the first case's workers start meanwhile)."""

    def __init__(self, pg: Postgres, env: dict[str, str]):
        pg.execute(f"CREATE DATABASE {TEMPLATE}")
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"],
            cwd=ROOT,
            env={**env, "DATABASE_URL": pg.url(TEMPLATE)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.ready = False

    def wait(self) -> None:
        if not self.ready:
            output, _ = self.proc.communicate()
            if self.proc.returncode != 0:
                raise RuntimeError(f"manage.py migrate failed:\n{output}")
            self.ready = True
            say("database migrated")


def forget_database_connections() -> None:
    """Close this process's connection and its pool: after a restart, or before its database is dropped."""
    from django.db import connection

    connection.close()
    connection.close_pool()  # type: ignore[attr-defined]  # PostgreSQL's wrapper has it


def fresh_database(pg: Postgres) -> None:
    forget_database_connections()
    pg.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
    pg.execute(f"CREATE DATABASE {DATABASE} TEMPLATE {TEMPLATE}")


def seed_case(plan: Plan) -> tuple[list, Reference]:
    """The tickets the case investigates (copies of T-1001), the deadline, and what a quiet run's packet holds."""
    from engine.loop import run_advance
    from engine.models import BudgetDefaults
    from engine.services import run_start
    from tickets.demo import seed_demo
    from tickets.models import Ticket

    from fault_figures import reference_of

    seed_demo()
    limits = {"deadline_seconds": plan.deadline_s}
    if plan.operation_timeout_s is not None:
        limits["operation_timeout_seconds"] = plan.operation_timeout_s
    BudgetDefaults.objects.update_or_create(pk=1, defaults={**limits, "updated_by": "fault_bench"})
    original = Ticket.objects.get(ref="T-1001")
    refs = [f"{COPY_PREFIX}{n:03d}" for n in range(plan.runs)] + [f"{COPY_PREFIX}W{n}" for n in range(plan.warm_up)]
    Ticket.objects.bulk_create(
        Ticket(ref=ref, account=original.account, session=original.session, subject=original.subject,
               body=original.body)
        for ref in [*refs, f"{COPY_PREFIX}X"]
    )  # fmt: skip
    reference = run_advance(run_start(ticket=original).pk)  # inline, without waits: a quiet run
    return list(Ticket.objects.filter(ref__in=refs).order_by("ref")), reference_of(reference.pk)


def start_investigation(ticket) -> int:
    from engine.services import investigation_start

    return investigation_start(ticket=ticket).pk


def forget_broker_connections() -> None:
    """Celery keeps its broker connections and queues; a case's new Redis needs new ones."""
    from supportagent.celery import app

    app._pool = None  # type: ignore[attr-defined]
    app.__dict__.pop("amqp", None)


PENDING_RUNS = "SELECT count(*) FROM agentrun_run WHERE id = ANY(%s) AND NOT status = ANY(%s)"


def unfinished(url: str, ids: list[int]) -> int | None:
    """Runs of `ids` not yet ended; None when the database does not answer (a fault may be on)."""
    from engine.statuses import TERMINAL

    try:
        with psycopg.connect(url, connect_timeout=2, autocommit=True) as conn:
            row = conn.execute(PENDING_RUNS, [ids, [str(s) for s in TERMINAL]]).fetchone()
            return row[0] if row else None
    except psycopg.OperationalError:
        return None


def wait_ended(url: str, ids: list[int], until: float) -> None:
    """Poll (lightly: the workers share these cores) until every run has ended, or `until` passes."""
    while unfinished(url, ids) != 0 and time.time() < until:
        time.sleep(0.25)


# --- one case ------------------------------------------------------------------------------------


def run_case(name: str, label: str, pg: Postgres, template: Template, redis_port: int, root: Path, plan: Plan,
             env: dict) -> dict:  # fmt: skip
    from fault_figures import case_figures

    casedir = root / label
    casedir.mkdir()
    redis = Redis(casedir / "redis", redis_port, plan.persistence)
    celery = CeleryProcesses(casedir, env)
    case = Case(pg, redis, celery, plan)
    try:
        redis.start()
        forget_broker_connections()
        for _ in range(plan.workers):  # they take a while to start: the database is prepared meanwhile
            celery.worker(plan.threads)
        template.wait()
        fresh_database(pg)
        tickets, reference = seed_case(plan)
        celery.start_beat()
        celery.wait_ready()
        say(f"{label}: workers and beat ready")
        warm = [start_investigation(t) for t in tickets[plan.runs :]]  # each worker connected, its code warm
        wait_ended(pg.url(DATABASE), warm, time.time() + 60)
        case.window.began = time.time()
        with ThreadPoolExecutor(max_workers=STARTING_THREADS) as starting:
            ids = list(starting.map(lambda n: case.start(n, tickets[n]), range(plan.runs)))
        case.fault(name)  # at +2 s, once every run is started (the last one at about +2 s less one spacing)
        say(f"{label}: fault over ({case.window.fault_end - case.window.began:.1f} s after the first start)")
        wait_ended(pg.url(DATABASE), ids + case.window.extra_ids, case.window.fault_end + plan.deadline_s + 30)
    finally:
        celery.stop()
        redis.stop()
        if not pg.running:
            pg.start()
    forget_database_connections()  # its connections may be from before a restart
    say(f"{label}: done")
    return {"case": label, **case_figures(ids, case.window, reference, celery.worker_logs())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--case", action="append", choices=CASES, help="a case to run (repeatable; default all)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument("--runs", type=int, default=100, help="investigations per case (default 100)")
    parser.add_argument("--tries", type=int, default=3, help="tries of pg_restart (default 3)")
    parser.add_argument("--deadline-seconds", type=float, default=45.0, help="runs' deadline (default 45)")
    parser.add_argument(
        "--operation-timeout-seconds",
        type=float,
        help="runs' operation timeout, which a worker's lease outlives by 5 s (default: the project's, 10)",
    )
    parser.add_argument("--redis-persistence", choices=("on", "off"), default="on")
    parser.add_argument("--model-seconds", type=float, default=1.0, help="mean wait of a model request (default 1)")
    parser.add_argument("--lookup-seconds", type=float, default=0.2, help="mean wait of a lookup (default 0.2)")
    parser.add_argument("--warm-up", type=int, default=4, help="runs before each case's, not counted (default 4)")
    parser.add_argument("--keep", action="store_true", help="keep the services' directory and logs")
    args = parser.parse_args()
    plan = Plan(
        runs=args.runs,
        spread_s=2.0,
        fault_at_s=2.0,
        deadline_s=args.deadline_seconds,
        operation_timeout_s=args.operation_timeout_seconds,
        workers=2,
        threads=25,
        persistence=args.redis_persistence == "on",
        warm_up=args.warm_up,
    )
    signal.signal(signal.SIGTERM, _interrupted)
    root = Path(tempfile.mkdtemp(prefix="faultbench-"))
    root.chmod(0o755)
    pg, template, rows, kept = None, None, [], args.keep
    try:
        pg = Postgres(root / "pg", free_port(), max_connections=150)
        pg.start()
        redis_port = free_port()
        env = configure(pg, redis_port, args)
        template = Template(pg, env)
        import django

        django.setup()
        for name in args.case or CASES:
            for attempt in range(args.tries if name == "pg_restart" else 1):
                label = f"{name}#{attempt + 1}" if name == "pg_restart" and args.tries > 1 else name
                try:
                    rows.append(run_case(name, label, pg, template, redis_port, root, plan, env))
                except Exception as exc:  # the other cases still run; the table says this one failed
                    traceback.print_exc()
                    rows.append({"case": label, "error": f"{type(exc).__name__}: {exc}"})
                    kept = True
    except BaseException:
        kept = True
        raise
    finally:
        if template is not None and template.proc.poll() is None:
            template.proc.kill()
            template.proc.wait()
        if pg is not None and pg.running:
            pg.stop()
        if kept:
            print(f"services' directory and logs kept in {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    from fault_figures import report

    return report(rows, plan, args.json)


def configure(pg: Postgres, redis_port: int, args: argparse.Namespace) -> dict[str, str]:
    """The environment of this process, of manage.py and of the workers and beat."""
    os.environ.update(
        {
            "DATABASE_URL": pg.url(DATABASE),
            "CELERY_BROKER_URL": f"redis://127.0.0.1:{redis_port}/0",
            "DJANGO_SETTINGS_MODULE": "supportagent.settings",
            "DJANGO_DEBUG": "false",
            "DJANGO_SECRET_KEY": "fault-bench-" + uuid.uuid4().hex + uuid.uuid4().hex,
            # T-1001's runs could wait for approval; without this they would get 900 s, not --deadline-seconds.
            "AGENT_APPROVAL_DEADLINE_SECONDS": "0",
            "FAULT_BENCH_MODEL_S": str(args.model_seconds),
            "FAULT_BENCH_LOOKUP_S": str(args.lookup_seconds),
        }
    )
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{BENCH}"}


def _interrupted(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


if __name__ == "__main__":
    sys.exit(main())
