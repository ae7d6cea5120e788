"""manage.py in a fresh process, with extra environment: how a setting read at start-up is tested."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.workers import ROOT


def manage_check(**env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
    )
