"""Benchmark of the investigation loop on PostgreSQL, on the J-42 scenario (3 model requests, 2 dispatches).

    python bench/loop_bench.py            # a table
    python bench/loop_bench.py --json     # the figures as one JSON object

Measures, in one run:
* committed write transactions and SQL statements per run and per cycle (a model
  request and the dispatch it leads to), against a plain psycopg loop that
  commits one reservation before each of the 5 operations (the floor);
* median and p95 milliseconds per run through the real loop and services, and
  the floor's, as a ratio; and the same run's psycopg commands replayed alone on
  a plain connection (what the statements cost, without Django, the loop's
  decisions or its threads), as a ratio to the floor too (the three take turns,
  so all see the machine alike); and the CPU time the loop's process spent on
  a run (its client side: Django, the decisions, psycopg), one run at a time;
* 200 runs at concurrency 50 through real Celery workers (one process per core,
  threads sharing the concurrency) with 50 ms latency on every model request and
  dispatch: wall time against the ideal (1 s); and the same for the floor loop
  as a Celery task on workers configured alike (bench/floor_worker.py), the two
  taking turns, as what the machine allows any loop through Celery; for both,
  the CPU time per run of the workers and of PostgreSQL, the workers' context
  switches per run, how busy the machine's cores were, which says whether the
  wall time is waiting or work, and the best efficiency that CPU time allows on
  this machine's cores (the workers' CPU per run against the client CPU of one
  run at a time is what driving dozens of runs in the threads of one process adds);
* a worker's resident memory after 10,000 runs against after 100;
* milliseconds per run with the Prometheus metrics counted and with them off
  (AGENT_METRICS), taking turns, as a ratio;
* runs in flight at real latencies: 200 J-42 runs on real workers (one
  process per core, threads), each model request taking about 1 s and each
  dispatch about 0.2 s (each drawn within +-50 %), arriving evenly over 2 s;
  for each run, its time from arrival (its enqueue) to its packet over the sum
  of its own latencies; the 95th percentile over the runs is
  `inflight_p95_slowdown` (what the machinery adds; target <= 1.10), and
  `inflight_capacity` is the largest of 100, 200, 400 and 800 runs in flight
  for which it stays <= 1.10 (`--inflight-only` measures just these).

Statements are counted as Django sends them (the floor's as psycopg does); a
step's held writes, sent as one statement on PostgreSQL, count once; BEGIN and
COMMIT are not counted, for either.

Write transactions are counted by PostgreSQL itself: each one takes a
transaction id, so the distance the next id moved is the count (the figure is
the fewest seen over several runs, so that other sessions' work is not counted).
Needs PostgreSQL and Redis (bin/services starts them); DATABASE_URL defaults to a
database of its own; the runs go to CELERY_BROKER_URL's broker when it is set
(its workers listen there too), else to the local Redis.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/supportagent_bench")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "supportagent.settings")
# As in production: with DEBUG on, Django keeps a log of every query per connection.
os.environ.setdefault("DJANGO_DEBUG", "false")
os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-" + uuid.uuid4().hex + uuid.uuid4().hex)
# One broker for the benchmark and its workers: the environment's when set (Celery itself prefers
# CELERY_BROKER_URL to any configured broker_url), else the local Redis.
BROKER = os.environ.get("CELERY_BROKER_URL") or "redis://127.0.0.1:6379/0"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

import django  # noqa: E402

django.setup()

import psycopg  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.backends.signals import connection_created  # noqa: E402
from django.utils import timezone  # noqa: E402

from engine.budgets import Budget  # noqa: E402
from engine.loop import run_advance  # noqa: E402
from engine.models import Run  # noqa: E402
from engine.services import run_start  # noqa: E402
from engine.statuses import TERMINAL, Status  # noqa: E402
from tickets.demo import seed_demo  # noqa: E402
from tickets.models import Ticket  # noqa: E402

from floor import SCHEMA as FLOOR_SCHEMA  # noqa: E402
from floor import floor_run, floor_start  # noqa: E402

CYCLES = 3  # model requests in the J-42 scenario; two of them lead to a dispatch
INFLIGHT_TARGET = 1.10  # the slowdown runs in flight may show, at most


def j42_script(latency: float = 0.0) -> dict:
    delay = {"delay_seconds": latency} if latency else {}
    return {
        "model": [
            {"call": {"tool": "read_job_status", "args": {"job_id": "J-42"}}, **delay},
            {"call": {"tool": "search_docs", "args": {"query": "EXPORT_ROLE_REQUIRED"}}, **delay},
            {"draft": {"summary": "J-42 failed: role.", "evidence": ["E1", "E2"], "open_questions": []}, **delay},
        ],
        "faults": {"read_job_status": [delay or None], "search_docs": [delay or None]},
    }


def drawn_script(rng: random.Random, model_s: float, dispatch_s: float) -> tuple[dict, float]:
    """The J-42 script with each latency drawn within +-50 % of its mean; and the sum of its latencies."""
    models = [round(rng.uniform(0.5, 1.5) * model_s, 4) for _ in range(CYCLES)]
    dispatches = [round(rng.uniform(0.5, 1.5) * dispatch_s, 4) for _ in range(CYCLES - 1)]
    script = j42_script()
    for reply, delay in zip(script["model"], models, strict=True):
        reply["delay_seconds"] = delay
    script["faults"] = {
        tool: [{"delay_seconds": delay}] for tool, delay in zip(script["faults"], dispatches, strict=True)
    }
    return script, sum(models) + sum(dispatches)


def start(ticket: Ticket, latency: float = 0.0) -> Run:
    return run_start(ticket=ticket, model_name="replay", budget=Budget(), model_script=j42_script(latency))


# --- counting ---------------------------------------------------------------------


class StatementCounter:
    """Counts every statement Django sends, on every connection, in every thread."""

    def __init__(self):
        self.count = 0
        connection_created.connect(self._install, weak=False)
        self._install(None, connection)

    def _install(self, sender, connection, **kwargs):
        if self.__call__ not in connection.execute_wrappers:
            connection.execute_wrappers.append(self.__call__)

    def __call__(self, execute, sql, params, many, context):
        self.count += 1
        return execute(sql, params, many, context)


def next_xid(conn: psycopg.Connection) -> int:
    return int(conn.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint").fetchone()[0])


def count_one_run(ticket: Ticket, counter: StatementCounter, probe: psycopg.Connection) -> tuple[int, int]:
    run = start(ticket)
    before_xid, before_stmts = next_xid(probe), counter.count
    run_advance(run.pk)
    return next_xid(probe) - before_xid, counter.count - before_stmts


# --- the floor (bench/floor.py) ---------------------------------------------------


def count_floor_run(floor: psycopg.Connection, probe: psycopg.Connection) -> int:
    before = next_xid(probe)
    floor_run(floor)
    return next_xid(probe) - before


# --- the loop's own statements, alone ------------------------------------------------


class Recording:
    """The psycopg commands of one run of the loop, in order, with its pipelines, replayed alone.

    Replaying them on a plain psycopg connection (nothing of Django, of the
    loop's decisions or of its threads) measures what the statements themselves
    cost: the part of the time per run that no change short of sending other
    statements can remove. Two runs are recorded; a parameter is the run's id
    where it is each run's own id in both, and a replay puts its run's id there.
    """

    def __init__(self, ticket: Ticket):
        (first_id, first), (second_id, second) = _record(ticket), _record(ticket)
        if [(kind, query) for kind, query, _ in first] != [(kind, query) for kind, query, _ in second]:
            raise RuntimeError("two J-42 runs sent different statements; there is no one run to replay")
        self.commands = [
            (
                kind,
                query,
                params,
                [i for i, (a, b) in enumerate(zip(params, other, strict=True)) if (a, b) == (first_id, second_id)]
                if params is not None
                else [],
            )
            for (kind, query, params), (_, _, other) in zip(first, second, strict=True)
        ]

    def replay(self, conn: psycopg.Connection, run_id: int) -> None:
        cursor, pipelines = conn.cursor(), []
        for kind, query, params, run_slots in self.commands:
            if kind == "pipeline":
                pipelines.append(conn.pipeline())
                pipelines[-1].__enter__()
            elif kind == "end":
                pipelines.pop().__exit__(None, None, None)
            else:
                if run_slots:
                    params = list(params)
                    for i in run_slots:
                        params[i] = run_id
                cursor.execute(query, params)
                if not pipelines and cursor.description is not None:
                    cursor.fetchall()


def _record(ticket: Ticket) -> tuple[int, list[tuple[str, object, object]]]:
    """The id of a new run, and the psycopg commands its run_advance sent (pipelines marked)."""
    run = start(ticket)
    with psycopg_commands() as commands:
        run_advance(run.pk)
    return run.pk, commands


@contextmanager
def psycopg_commands():
    """Every command psycopg's cursors execute within the block, in order, with pipelines marked."""
    commands = []
    execute, pipeline = psycopg.Cursor.execute, psycopg.Connection.pipeline

    def recorded_execute(cursor, query, params=None, **kwargs):
        commands.append(("execute", query, params))
        return execute(cursor, query, params, **kwargs)

    @contextmanager
    def recorded_pipeline(conn):
        commands.append(("pipeline", None, None))
        with pipeline(conn) as p:
            yield p
        commands.append(("end", None, None))

    psycopg.Cursor.execute, psycopg.Connection.pipeline = recorded_execute, recorded_pipeline
    try:
        yield commands
    finally:
        psycopg.Cursor.execute, psycopg.Connection.pipeline = execute, pipeline


def floor_statements(floor: psycopg.Connection) -> int:
    """Statements one floor run sends (its BEGIN and COMMIT are not statements here, as for ours)."""
    with psycopg_commands() as commands:
        floor_run(floor)
    return sum(1 for kind, _, _ in commands if kind == "execute")


def timed(fns, n: int) -> tuple[list[list[float]], list[list[float]]]:
    """Milliseconds of each of `fns`, called in turn `n` times, so that all see the machine alike:
    the wall time of each call, and the CPU time this process (all its threads) spent on it."""
    times, cpu = [[] for _ in fns], [[] for _ in fns]
    for _ in range(n):
        for fn, spent, used in zip(fns, times, cpu, strict=True):
            began, began_cpu = time.perf_counter(), time.process_time()
            fn()
            spent.append((time.perf_counter() - began) * 1000)
            used.append((time.process_time() - began_cpu) * 1000)
    return times, cpu


def metrics_figures(ticket: Ticket, n: int) -> dict:
    """Milliseconds per run with the metrics counted and with them off, the two taking turns."""

    def run_with_metrics(on: bool):
        def run() -> None:
            settings.AGENT_METRICS = on
            run_advance(start(ticket).pk)

        return run

    (on, off), _ = timed([run_with_metrics(True), run_with_metrics(False)], n)
    settings.AGENT_METRICS = True
    return {
        "metrics_on_ms_per_run_median": round(statistics.median(on), 2),
        "metrics_off_ms_per_run_median": round(statistics.median(off), 2),
        "metrics_overhead_ratio": round(statistics.median(on) / statistics.median(off), 3),
    }


def p95(values: list[float]) -> float:
    return sorted(values)[max(int(len(values) * 0.95) - 1, 0)]


# --- workers ------------------------------------------------------------------------


def threads_per_process(concurrency: int, processes: int) -> int:
    return max(concurrency // processes, 1)


def pool_max(threads: int) -> int:
    """Connections a worker process's pool may open: one per thread, at most 40."""
    return min(threads, 40)


class Workers:
    """`processes` Celery worker processes on one queue, as docs/production/deployment.md runs them: one per core, threads in each.

    `app` is the Celery app they run: the project's, or the floor's (bench/floor_worker.py).
    """

    def __init__(self, concurrency: int, processes: int, app: str = "supportagent"):
        self.queue = f"bench-{uuid.uuid4().hex[:8]}"
        threads = threads_per_process(concurrency, processes)
        env = {
            **os.environ,
            "CELERY_BROKER_URL": BROKER,
            "AGENT_QUEUE": self.queue,
            "DATABASE_POOL_MAX": str(pool_max(threads)),
            "PYTHONPATH": str(ROOT),
        }
        self.log = open(ROOT / "var" / "bench-worker.log", "ab")
        self.procs = [
            subprocess.Popen(
                [
                    str(Path(sys.executable).with_name("celery")),
                    "-A",
                    app,
                    "worker",
                    "--pool",
                    "threads",
                    "--concurrency",
                    str(threads),
                    "-Q",
                    self.queue,
                    "-n",
                    f"bench-{app}{i}@%h",
                    "--without-gossip",
                    "--without-mingle",
                    "--without-heartbeat",
                    "--loglevel",
                    "WARNING",
                ],
                cwd=ROOT if app == "supportagent" else BENCH,
                env=env,
                stdout=self.log,
                stderr=subprocess.STDOUT,
            )
            for i in range(processes)
        ]
        if app == "supportagent":
            from supportagent.celery import app as celery_app
        else:
            from floor_worker import app as celery_app
        celery_app.conf.update(task_always_eager=False, broker_url=BROKER, task_default_queue=self.queue)

    def rss_kib(self) -> int:
        """Resident memory of the largest worker process."""
        return max(_rss_kib(proc.pid) for proc in self.procs)

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            proc.wait(timeout=30)


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time the process has used so far (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _context_switches(pid: int) -> int:
    """Context switches, voluntary and not, of the process's threads so far (0 when it is gone)."""
    switches = 0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return 0
    for task in tasks:
        try:
            lines = (task / "status").read_text().splitlines()
        except OSError:  # the thread ended meanwhile
            continue
        switches += sum(
            int(line.split()[1])
            for line in lines
            if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:"))
        )
    return switches


def _backend_cpu_seconds(pid: int) -> float:
    """CPU time a PostgreSQL process has used so far, to the nanosecond (0 when it is gone).

    A backend is one thread, so its scheduler statistics hold all of it; /proc/PID/stat counts
    in clock ticks, too coarse for the little a backend does for a few runs."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
    except OSError:
        return 0.0


def _postgres_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "postgres":
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def _machine_busy_ticks() -> tuple[int, int]:
    """Busy and total CPU ticks of the machine so far (idle and I/O wait are not busy)."""
    ticks = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks)


@contextmanager
def cpu_used(workers: Workers, runs: int, into: dict[str, list[float]]):
    """Appends to `into` the CPU milliseconds per run of the workers and of PostgreSQL during the block,
    the workers' context switches per run (each wait of a thread for I/O, for the GIL or for another
    thread is at least one), and the share of the machine's CPU time that was busy. (A PostgreSQL process that ends within the
    block is not counted; the pools keep their connections, so none does.)"""
    workers_before = sum(_cpu_seconds(p.pid) for p in workers.procs)
    switches_before = sum(_context_switches(p.pid) for p in workers.procs)
    db_before = {pid: _backend_cpu_seconds(pid) for pid in _postgres_pids()}
    busy_before, total_before = _machine_busy_ticks()
    yield
    workers_s = sum(_cpu_seconds(p.pid) for p in workers.procs) - workers_before
    switches = sum(_context_switches(p.pid) for p in workers.procs) - switches_before
    db_s = sum(_backend_cpu_seconds(pid) - db_before.get(pid, 0.0) for pid in _postgres_pids())
    busy, total = _machine_busy_ticks()
    into.setdefault("worker_cpu_ms_per_run", []).append(workers_s * 1000 / runs)
    into.setdefault("worker_context_switches_per_run", []).append(switches / runs)
    into.setdefault("db_cpu_ms_per_run", []).append(db_s * 1000 / runs)
    into.setdefault("cpu_busy", []).append((busy - busy_before) / max(total - total_before, 1))


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


PENDING_RUNS = "SELECT count(*) FROM agentrun_run WHERE id = ANY(%s) AND NOT status = ANY(%s)"


def drive(ids: list[int], timeout: float) -> float:
    """Enqueue the runs and wait until all are terminal; the wall time in seconds."""
    from engine.tasks import advance_run

    return _drive(lambda run_id: advance_run.apply_async((run_id,)), ids, PENDING_RUNS, [ids, list(TERMINAL)], timeout)


def drive_floor(ids: list[int], latency: float, timeout: float) -> float:
    """Enqueue the floor runs on the floor's workers and wait until all are done; the wall time in seconds."""
    from floor_worker import floor_task

    pending = "SELECT count(*) FROM bench_floor_run WHERE id = ANY(%s) AND status <> 'DONE'"
    return _drive(lambda run_id: floor_task.apply_async((run_id, latency)), ids, pending, [ids], timeout)


def _drive(enqueue, ids: list[int], pending_sql: str, params: list, timeout: float) -> float:
    began = time.perf_counter()
    for run_id in ids:
        enqueue(run_id)
    wait_until_done(ids, pending_sql, params, timeout)
    return time.perf_counter() - began


def wait_until_done(ids: list[int], pending_sql: str, params: list, timeout: float) -> None:
    """Poll until `pending_sql` counts nothing left, at most `timeout` seconds."""
    until = time.monotonic() + timeout
    with connection.cursor() as cursor:  # a light poll: the workers share these cores
        while True:
            cursor.execute(pending_sql, params)
            if cursor.fetchone()[0] == 0:
                break
            if time.monotonic() > until:
                raise RuntimeError(f"{len(ids)} runs not finished after {timeout} s")
            time.sleep(0.01)


def concurrency_figures(
    ticket: Ticket, floor: psycopg.Connection, runs: int, concurrency: int, latency: float, processes: int, rounds: int
) -> dict:
    """The loop's and the floor's wall time for `runs` runs at `concurrency`, each on its own workers,
    taking turns `rounds` times (the median of each is reported).

    Only one side's workers are up at a time: each holds up to `concurrency` database connections,
    and the two together would need more than a default PostgreSQL allows."""
    walls, floor_walls, cpu, floor_cpu = [], [], {}, {}
    for _ in range(rounds):
        with workers(concurrency, processes) as ours:
            drive([start(ticket).pk for _ in range(4 * concurrency)], 120)  # up, connected, statements prepared
            ids = [start(ticket, latency).pk for _ in range(runs)]
            with cpu_used(ours, runs, cpu):
                walls.append(drive(ids, 300))
        with workers(concurrency, processes, app="floor_worker") as base:
            drive_floor([floor_start(floor) for _ in range(4 * concurrency)], 0.0, 120)
            floor_ids = [floor_start(floor) for _ in range(runs)]
            with cpu_used(base, runs, floor_cpu):
                floor_walls.append(drive_floor(floor_ids, latency, 300))
    ideal = runs * 5 * latency / concurrency
    wall, floor_wall = statistics.median(walls), statistics.median(floor_walls)
    figures = {
        "concurrency_workers": processes,
        "concurrency_wall_s": round(wall, 3),
        "concurrency_ideal_s": round(ideal, 3),
        "concurrency_efficiency": round(ideal / wall, 3),
    }
    figures |= {f"concurrency_{key}": round(statistics.median(values), 2) for key, values in cpu.items()}
    figures["concurrency_cpu_bound_efficiency"] = cpu_bound_efficiency(cpu, runs, ideal)
    figures |= {
        "floor_concurrency_wall_s": round(floor_wall, 3),
        "floor_concurrency_efficiency": round(ideal / floor_wall, 3),
    }
    figures |= {f"floor_concurrency_{key}": round(statistics.median(values), 2) for key, values in floor_cpu.items()}
    figures["floor_concurrency_cpu_bound_efficiency"] = cpu_bound_efficiency(floor_cpu, runs, ideal)
    return figures


@contextmanager
def workers(concurrency: int, processes: int, app: str = "supportagent"):
    """Workers (see `Workers`) that are stopped, and their connections closed, when the block ends."""
    started = Workers(concurrency, processes, app)
    try:
        yield started
    finally:
        started.stop()


def need_connections(concurrency: int, processes: int) -> None:
    """Stop with a clear message when PostgreSQL cannot take one side's workers and the benchmark itself."""
    wanted = processes * pool_max(threads_per_process(concurrency, processes)) + 8
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int,"
            " (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')"
        )
        allowed, in_use = cursor.fetchone()
    if wanted + in_use > allowed:
        raise SystemExit(
            f"concurrency {concurrency} on {processes} workers needs about {wanted} database connections"
            f" and {in_use} are in use; PostgreSQL allows {allowed} (max_connections): lower --concurrency"
            " or raise max_connections"
        )


def cpu_bound_efficiency(cpu: dict[str, list[float]], runs: int, ideal: float) -> float:
    """The best efficiency the CPU measured allows: the wall time can be no shorter than the workers'
    and PostgreSQL's CPU time spread over every core of the machine (nor than the ideal)."""
    per_run_ms = statistics.median(cpu["worker_cpu_ms_per_run"]) + statistics.median(cpu["db_cpu_ms_per_run"])
    fewest_seconds = per_run_ms * runs / 1000 / (os.cpu_count() or 1)
    return round(ideal / max(ideal, fewest_seconds), 3)


def inflight_slowdown(
    ticket: Ticket, runs: int, processes: int, model_s: float, dispatch_s: float, arrival_s: float, rng: random.Random
) -> float:
    """The 95th percentile, over `runs` runs arriving evenly over `arrival_s` on workers with a thread
    for each, of each run's time from arrival to packet over the sum of its own latencies."""
    from engine.tasks import advance_run

    with workers(runs, processes):
        drive([start(ticket).pk for _ in range(min(runs, 4 * processes))], 120)  # up and connected
        planned = []
        for _ in range(runs):
            script, latencies = drawn_script(rng, model_s, dispatch_s)
            run = run_start(ticket=ticket, model_name="replay", budget=Budget(), model_script=script)
            planned.append((run.pk, latencies))
        arrived = {}
        began = time.monotonic()
        for number, (run_id, _) in enumerate(planned):  # evenly over arrival_s
            time.sleep(max(began + arrival_s * number / runs - time.monotonic(), 0))
            arrived[run_id] = timezone.now()
            advance_run.apply_async((run_id,))
        ids = [run_id for run_id, _ in planned]
        wait_until_done(ids, PENDING_RUNS, [ids, list(TERMINAL)], 120 + 3 * model_s + 2 * dispatch_s + arrival_s)
    ended = dict(Run.objects.filter(pk__in=ids, status=Status.COMPLETED).values_list("pk", "ended_at"))
    if len(ended) < runs:
        raise RuntimeError(f"{runs - len(ended)} of {runs} runs in flight did not complete")
    slowdowns = [(ended[run_id] - arrived[run_id]).total_seconds() / latencies for run_id, latencies in planned]
    return p95(slowdowns)


def inflight_figures(ticket: Ticket, runs: int, levels: list[int], processes: int, seed: int = 42) -> dict:
    """`inflight_p95_slowdown` for `runs` runs in flight, and `inflight_capacity`: the largest of `levels`
    (tried in increasing order, up to the first that fails) whose slowdown stays within INFLIGHT_TARGET."""
    rng = random.Random(seed)
    measured = {}
    for level in sorted(set(levels)):
        need_connections(level, processes)
        statistics_current()
        measured[level] = inflight_slowdown(ticket, level, processes, 1.0, 0.2, 2.0, rng)
        if measured[level] > INFLIGHT_TARGET:
            break
    if runs not in measured:
        measured[runs] = inflight_slowdown(ticket, runs, processes, 1.0, 0.2, 2.0, rng)
    within = [level for level in sorted(set(levels)) if measured.get(level, INFLIGHT_TARGET + 1) <= INFLIGHT_TARGET]
    return {
        "inflight_runs": runs,
        "inflight_p95_slowdown": round(measured[runs], 3),
        "inflight_capacity": max(within, default=0),
        "inflight_p95_slowdown_by_runs": {str(level): round(value, 3) for level, value in sorted(measured.items())},
    }


def memory_figures(ticket: Ticket, first: int, total: int) -> dict:
    with workers(8, 1) as worker:
        drive([start(ticket).pk for _ in range(first)], 300)
        rss_first = worker.rss_kib()
        done = first
        while done < total:
            batch = min(1000, total - done)
            drive([start(ticket).pk for _ in range(batch)], 900)
            done += batch
        rss_total = worker.rss_kib()
    return {
        "rss_kib_after_first": rss_first,
        "rss_kib_after_all": rss_total,
        "rss_growth_ratio": round(rss_total / rss_first, 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument("--runs", type=int, default=200, help="runs timed in-process (default 200)")
    parser.add_argument("--concurrency-runs", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="worker processes sharing the concurrency (default: one per core)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="concurrency measurements of the loop and of the floor, taking turns (default 3)",
    )
    parser.add_argument("--memory-runs", type=int, default=10_000)
    parser.add_argument(
        "--inflight-runs", type=int, default=200, help="runs in flight for inflight_p95_slowdown (default 200)"
    )
    parser.add_argument(
        "--inflight-levels",
        default="100,200,400,800",
        help="runs in flight tried for inflight_capacity, comma-separated (default 100,200,400,800)",
    )
    parser.add_argument("--inflight-only", action="store_true", help="measure only the runs in flight")
    args = parser.parse_args()
    levels = [int(level) for level in args.inflight_levels.split(",")]

    subprocess.run([str(ROOT / "bin" / "services")], check=True, env=os.environ)
    call_command("migrate", verbosity=0, interactive=False)
    need_connections(args.concurrency, args.workers)
    seed_demo()
    ticket = Ticket.objects.get(ref="T-1001")
    (ROOT / "var").mkdir(exist_ok=True)
    if args.inflight_only:
        statistics_current()
        return report(inflight_figures(ticket, args.inflight_runs, levels, args.workers), args.json)

    counter = StatementCounter()
    conninfo = os.environ["DATABASE_URL"]
    with (
        psycopg.connect(conninfo, autocommit=True) as probe,
        psycopg.connect(conninfo, autocommit=True) as floor,
        psycopg.connect(conninfo, autocommit=True) as alone,
    ):
        floor.execute(FLOOR_SCHEMA)
        for _ in range(5):  # warm caches on both sides
            count_one_run(ticket, counter, probe)
            floor_run(floor)
        samples = [count_one_run(ticket, counter, probe) for _ in range(10)]
        commits, statements = min(s[0] for s in samples), min(s[1] for s in samples)
        floor_commits = min(count_floor_run(floor, probe) for _ in range(10))
        floor_statements_per_run = floor_statements(floor)
        recording = Recording(ticket)
        statistics_current()
        for _ in range(5):
            recording.replay(alone, start(ticket).pk)
        (ours, base, sql_alone), (ours_cpu, base_cpu, _) = timed(
            [
                lambda: run_advance(start(ticket).pk),
                lambda: floor_run(floor),
                lambda: recording.replay(alone, start(ticket).pk),
            ],
            args.runs,
        )

    figures = {
        "commits_per_run": commits,
        "commits_per_cycle": round(commits / CYCLES, 3),
        "floor_commits_per_run": floor_commits,
        "statements_per_run": statements,
        "statements_per_cycle": round(statements / CYCLES, 1),
        "floor_statements_per_run": floor_statements_per_run,
        "ms_per_run_median": round(statistics.median(ours), 2),
        "ms_per_run_p95": round(p95(ours), 2),
        "floor_ms_per_run_median": round(statistics.median(base), 2),
        "floor_ms_per_run_p95": round(p95(base), 2),
        "ratio_to_floor": round(statistics.median(ours) / statistics.median(base), 2),
        "client_cpu_ms_per_run_median": round(statistics.median(ours_cpu), 2),
        "floor_client_cpu_ms_per_run_median": round(statistics.median(base_cpu), 2),
        "sql_alone_ms_per_run_median": round(statistics.median(sql_alone), 2),
        "sql_alone_ratio_to_floor": round(statistics.median(sql_alone) / statistics.median(base), 2),
    }
    statistics_current()
    figures |= metrics_figures(ticket, args.runs)
    statistics_current()
    with psycopg.connect(conninfo, autocommit=True) as floor:
        figures |= concurrency_figures(
            ticket, floor, args.concurrency_runs, args.concurrency, args.latency_ms / 1000, args.workers, args.rounds
        )
    statistics_current()
    figures |= memory_figures(ticket, 100, args.memory_runs)
    figures |= inflight_figures(ticket, args.inflight_runs, levels, args.workers)
    return report(figures, args.json)


def statistics_current() -> None:
    """VACUUM ANALYZE the benchmark's database, as PostgreSQL's autovacuum keeps a production one.

    Each phase adds thousands of runs; with autovacuum off (as on these test
    machines' servers) the planner would keep the statistics of the tables as
    they were when the benchmark began, and plan a step's statements for tables
    of a few rows (a hash join over all of a ticket's runs, say, where a few
    pending packets are to be read). Done before each measured phase, for the
    floor's table too.
    """
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def report(figures: dict, as_json: bool) -> int:
    if as_json:
        print(json.dumps(figures))
    else:
        width = max(map(len, figures))
        for key, value in figures.items():
            print(f"{key:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
