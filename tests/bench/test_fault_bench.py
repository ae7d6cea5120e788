"""The fault benchmark, short: 20 investigations through a quiet day, a PostgreSQL restart and a killed worker.

bench/fault_bench.py runs its own PostgreSQL and Redis, so the machine's are never
stopped. What must hold whatever the fault: every run ends with exactly one packet
naming its status, and the loop's invariants (no reservation left, counters equal
to their rows, no evidence twice, nothing over budget). No task dies, and a packet
that lacks evidence the reference run of T-1001 cites says so: it names the lookup
that got no answer (on a quiet day none lacks any, and every run completes).
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.workers import ROOT

CASES = ["quiet", "pg_restart", "worker_sigkill"]


def test_every_run_ends_with_one_packet_and_the_invariants_hold_through_each_fault():
    args = ["--json", "--runs", "20", "--tries", "1", "--warm-up", "0"]
    args += [arg for case in CASES for arg in ("--case", case)]
    # A lease outlives an operation's timeout by 5 s: 4 s (not 10) lets a killed worker's runs be taken up sooner.
    args += ["--operation-timeout-seconds", "4"]
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "fault_bench.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )

    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout.strip().splitlines()[-1])["cases"]
    assert [row["case"] for row in rows] == CASES
    for row in rows:
        assert "error" not in row, row
        assert (row["runs"], row["with_packet"], row["with_two_packets"], row["not_ended"]) == (20, 20, 0, 0), row
        assert row["invariant_violations"] == [], row
        assert row["task_deaths"] == 0, row
        assert row["missing_evidence"] == row["named_incomplete"], row
    quiet = rows[0]
    assert quiet["statuses"] == {"COMPLETED": 20}
    assert (quiet["missing_evidence"], quiet["task_deaths"], quiet["past_deadline"]) == (0, 0, 0)
