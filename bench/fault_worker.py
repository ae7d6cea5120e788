"""The project's Celery app with realistic waits, for the fault benchmark's workers (bench/fault_bench.py).

    celery -A fault_worker worker --pool threads ...   # with bench/ and the project on PYTHONPATH

The rule-based investigator answers at once and the lookups read the local
database, so each run's model requests and lookups are made to take as long as
a real model's and a real service's would: before each one, a wait drawn within
+-50 % of FAULT_BENCH_MODEL_S (default 1 s) or FAULT_BENCH_LOOKUP_S (0.2 s).
The draw is seeded by the run's id, the operation's kind and its index, so a
run taken up again after a fault waits as long for the same operation. Only
the worker processes of the benchmark load this module; the engine is unchanged
(its registry function `engine.loop.run_io` is wrapped here, at start-up).
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "supportagent.settings")

from supportagent.celery import app

django.setup()

import engine.loop  # noqa: E402
from engine.models import Run  # noqa: E402
from providers import ModelAdapter, ModelRequestSpec, ModelResponse  # noqa: E402
from tickets.selectors import SessionScope  # noqa: E402
from tools.dispatch import Dispatcher  # noqa: E402
from tools.lookups import UNBOUNDED, Lookup  # noqa: E402
from tools.registry import ToolResult  # noqa: E402

__all__ = ["app", "drawn_wait"]

MODEL_S = float(os.environ.get("FAULT_BENCH_MODEL_S", "1.0"))
LOOKUP_S = float(os.environ.get("FAULT_BENCH_LOOKUP_S", "0.2"))


def drawn_wait(run_id: int, kind: str, index: int, mean: float) -> float:
    """Seconds within +-50 % of `mean`, the same for the same run, kind and index."""
    return random.Random(f"{run_id}:{kind}:{index}").uniform(0.5, 1.5) * mean


class WaitingAdapter(ModelAdapter):
    """The run's adapter, each request answered after a model's wait."""

    def __init__(self, inner: ModelAdapter, run_id: int):
        self.inner, self.run_id = inner, run_id
        self.name, self.prices = inner.name, inner.prices

    def request(self, spec: ModelRequestSpec) -> ModelResponse:
        time.sleep(drawn_wait(self.run_id, "model", spec.index, MODEL_S))
        return self.inner.request(spec)

    def input_overhead_bytes(self) -> int:
        return self.inner.input_overhead_bytes()


class WaitingDispatcher(Dispatcher):
    """The run's dispatcher, each lookup made after a service's wait."""

    def __init__(self, inner: Dispatcher, run_id: int):
        super().__init__(inner.tools)
        self.inner, self.run_id = inner, run_id

    def dispatch(
        self, tool: str, scope: SessionScope, args: dict[str, Any], index: int, lookup: Lookup = UNBOUNDED
    ) -> ToolResult:
        time.sleep(drawn_wait(self.run_id, f"lookup {tool}", index, LOOKUP_S))
        return self.inner.dispatch(tool, scope, args, index, lookup)


_run_io = engine.loop.run_io


def waiting_run_io(run: Run) -> tuple[ModelAdapter, Dispatcher]:
    model, tools = _run_io(run)
    return WaitingAdapter(model, run.pk), WaitingDispatcher(tools, run.pk)


engine.loop.run_io = waiting_run_io
