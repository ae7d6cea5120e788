"""Dispatching a call to its tool backend, optionally through a scenario's faults."""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from django.db import InterfaceError, OperationalError

from tickets.selectors import SessionScope

from .probe import probe_count
from .lookups import UNBOUNDED, Lookup
from .tools import TOOLS, Tool, ToolError, ToolResult


class Dispatcher:
    """Calls tool backends. `faults` (scenarios only) says what happens to a tool's n-th dispatch."""

    def __init__(self, tools: dict[str, Tool] = TOOLS, faults: dict[str, list[Any]] | None = None,
                 probe: str | None = None):
        self.tools = tools
        self.faults = faults or {}
        self.probe = probe

    def dispatch(self, tool: str, scope: SessionScope, args: dict[str, Any], index: int,
                 lookup: Lookup = UNBOUNDED) -> ToolResult:
        """`lookup` carries the wait the loop allows (the backend never waits longer) and the call's approval."""
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
        try:
            return self.tools[tool].backend(scope, args, lookup)
        except (OperationalError, InterfaceError) as exc:  # our own database, not the lookup, failed
            raise ToolError(f"the database did not answer the lookup ({type(exc).__name__})",
                            transient=True) from exc


def dispatcher_for_run(run) -> Dispatcher:
    script = run.model_script or {}
    return Dispatcher(faults=script.get("faults"), probe=script.get("probe"))
