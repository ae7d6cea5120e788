"""What a scenario run does differently from production, wrapped around production objects.

A scenario's faults (a delay, then a failure, for a tool's n-th dispatch) and
its probe (Redis counters of the model requests and dispatches that really
happened) travel on the run record (`Run.model_script`, which only the
scenario runner writes). The loop has one hook: for a run whose record
carries a script it imports `scenario_io` from here, inside the function, so
a real run never loads scenario code, and a worker given a scenario run (an
enqueued scenario, the worker tests) applies its faults all the same. This
module imports only what it wraps, never the loop, so the hook closes no
import cycle.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from engine.models import Run
from providers import ModelAdapter, ModelRequestSpec, ModelResponse, adapter_for_run
from scenarios.probe import probe_count
from tickets.selectors import SessionScope
from tools.dispatch import Dispatcher
from tools.lookups import UNBOUNDED, Lookup
from tools.registry import TOOLS, Tool, ToolError, ToolResult


class FaultyDispatcher(Dispatcher):
    """The production dispatcher, with a scenario's faults before each dispatch and its probe counting them."""

    def __init__(
        self, faults: dict[str, list[Any]] | None = None, probe: str | None = None, tools: dict[str, Tool] = TOOLS
    ):
        super().__init__(tools)
        self.faults = faults or {}
        self.probe = probe

    def dispatch(
        self, tool: str, scope: SessionScope, args: dict[str, Any], index: int, lookup: Lookup = UNBOUNDED
    ) -> ToolResult:
        probe_count(self.probe, "dispatch")
        started = time.monotonic()
        entries = self.faults.get(tool) or []
        fault = entries[index] if index < len(entries) else None
        if isinstance(fault, dict):
            if fault.get("delay_seconds"):
                time.sleep(float(fault["delay_seconds"]))
            if fault.get("fail") == "transient":
                raise ToolError("transient read failure (injected)", transient=True)
            if fault.get("fail"):
                raise ToolError("read failure (injected)", transient=False)
        if lookup.timeout is not None:  # an injected delay used part of the wait
            lookup = replace(lookup, timeout=lookup.timeout - (time.monotonic() - started))
        return super().dispatch(tool, scope, args, index, lookup)


class ProbedAdapter(ModelAdapter):
    """A model adapter whose requests are counted in the probe first."""

    def __init__(self, inner: ModelAdapter, probe: str):
        self.inner, self.probe = inner, probe
        self.name, self.prices = inner.name, inner.prices

    def request(self, spec: ModelRequestSpec) -> ModelResponse:
        probe_count(self.probe, "model")
        return self.inner.request(spec)

    def input_overhead_bytes(self) -> int:
        return self.inner.input_overhead_bytes()


def scenario_io(run: Run) -> tuple[ModelAdapter, Dispatcher]:
    """The model and the dispatcher of a run whose record carries a scenario's script."""
    script = run.model_script or {}
    probe = script.get("probe")
    adapter = adapter_for_run(run)
    return (ProbedAdapter(adapter, probe) if probe else adapter), FaultyDispatcher(script.get("faults"), probe)
