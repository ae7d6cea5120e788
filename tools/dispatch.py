"""Dispatching a call to its tool backend.

Scenario faults are not here: the scenario runner wraps this dispatcher
(scenarios.harness.FaultyDispatcher).
"""

from __future__ import annotations

from typing import Any

from django.db import InterfaceError, OperationalError

from tickets.selectors import SessionScope
from tools.lookups import UNBOUNDED, Lookup
from tools.registry import TOOLS, Tool, ToolError, ToolResult


class Dispatcher:
    """Calls tool backends; `index` (the call's number among its tool's dispatches) is for wrappers."""

    def __init__(self, tools: dict[str, Tool] = TOOLS):
        self.tools = tools

    def dispatch(
        self, tool: str, scope: SessionScope, args: dict[str, Any], index: int, lookup: Lookup = UNBOUNDED
    ) -> ToolResult:
        """`lookup` carries the wait the loop allows (the backend never waits longer) and the call's approval."""
        try:
            return self.tools[tool].backend(scope, args, lookup)
        except (OperationalError, InterfaceError) as exc:  # our own database, not the lookup, failed
            raise ToolError(f"the database did not answer the lookup ({type(exc).__name__})", transient=True) from exc
