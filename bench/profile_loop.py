"""Where a run of the investigation loop spends its client CPU: cProfile over J-42 runs, driven in-process.

    python bench/profile_loop.py                    # 1,000 runs, the top 20 by tottime and by cumtime
    python bench/profile_loop.py --runs 200 --top 30 --out var/loop.prof

Each run is bench/loop_bench.py's: `start(ticket)`, then `engine.loop.run_advance(run.pk)`,
one at a time on PostgreSQL (DATABASE_URL; the benchmark's database by default). Only
`run_advance` is profiled, not the start: in the loop's thread, and in the threads the
model requests and dispatches run in (engine.waiting), the two profiles added together.
The profiler's clock is each thread's own CPU time, so waiting for PostgreSQL, for
another thread or for a core another process holds does not count: the figures are what
`client_cpu_ms_per_run_median` measures, function by function (with the profiler's own
cost on every call, so functions called often look dearer than they are).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time
import uuid
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/supportagent_bench")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "supportagent.settings")
os.environ.setdefault("DJANGO_DEBUG", "false")
os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-" + uuid.uuid4().hex + uuid.uuid4().hex)

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from loop_bench import start, statistics_current  # noqa: E402

import engine.loop  # noqa: E402
from engine.loop import run_advance  # noqa: E402
from tickets.demo import seed_demo  # noqa: E402
from tickets.models import Ticket  # noqa: E402


def profiled_operations(profile: cProfile.Profile) -> None:
    """Profile each operation in the thread it runs in (one at a time: runs are driven one by one)."""
    call_with_timeout = engine.loop.call_with_timeout

    def profiled(fn, timeout):
        return call_with_timeout(lambda: profile.runcall(fn), timeout)

    engine.loop.call_with_timeout = profiled


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1000, help="runs profiled (default 1,000)")
    parser.add_argument("--warmup", type=int, default=20, help="runs before profiling (default 20)")
    parser.add_argument("--top", type=int, default=20, help="functions listed per order (default 20)")
    parser.add_argument("--out", help="also save the raw profile here (for pstats or snakeviz)")
    args = parser.parse_args()

    call_command("migrate", verbosity=0, interactive=False)
    seed_demo()
    ticket = Ticket.objects.get(ref="T-1001")
    for _ in range(args.warmup):  # connected, caches warm, statements built
        run_advance(start(ticket).pk)
    statistics_current()

    profile, operations = cProfile.Profile(time.thread_time), cProfile.Profile(time.thread_time)
    profiled_operations(operations)
    spent = 0.0
    for _ in range(args.runs):
        run = start(ticket)
        began = time.process_time()
        profile.runcall(run_advance, run.pk)
        spent += time.process_time() - began
    print(f"{args.runs} J-42 runs profiled: {spent * 1000 / args.runs:.2f} ms of client CPU a run (profiler included)")
    stats = pstats.Stats(profile, stream=sys.stdout).add(operations)
    if args.out:
        stats.dump_stats(args.out)
    for order in ("tottime", "cumulative"):
        print(f"\n--- top {args.top} by {order} ---")
        stats.sort_stats(order).print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
