"""The fixed dispatch table: the read-only tools, one module each.

A tool's module (tools/search_docs.py, ...) builds its `Tool` (tools.base): argument schema,
policy, backends, staff view, re-check comparer. This table is the only list of them: what a
model is offered, what the rules may call, the per-tool counters and the staff pages all follow
it. Adding a tool is its module and one line here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tickets.models import CustomerSession
from tools import read_job_status, read_service_status, search_docs
from tools.base import Catalog, Tool
from tools.compare import Comparison, flat
from tools.lookups import ApprovalRequired, Lookup, ToolError, ToolResult

__all__ = ["TOOLS", "ApprovalRequired", "Catalog", "Lookup", "Tool", "ToolError", "ToolResult"]

TOOLS: dict[str, Tool] = {
    tool.name: tool for tool in (search_docs.TOOL, read_job_status.TOOL, read_service_status.TOOL)
}


def compare(
    tool: str, old: dict[str, Any], new: dict[str, Any], standing: Mapping[str, str] | None = None
) -> Comparison:
    """The recorded result `old` against the fresh result `new` of the same call of `tool`, by the tool's
    comparer; `standing` is what the tool's `standing` read now (a search's cited documents), if anything."""
    comparer = TOOLS[tool].compare if tool in TOOLS else flat
    return comparer(old, new, standing)


def session_may_need_approval(*, session: CustomerSession, listed: list[str]) -> bool:
    """Whether a run acting for `session` may have a call wait for a supervisor: a tool is listed as
    needing approval, or some tool says a call of this session's may need one."""
    return bool(listed) or any(tool.may_need_approval(session) for tool in TOOLS.values())


def catalogs_read(*, wait: float) -> dict[str, Catalog]:
    """What each tool's source lists for its arguments to name (`Tool.catalog`), read before a model is
    asked (outside any transaction, waiting at most `wait`): the rules and the tool definitions name
    it, and the call the model proposes is checked against it."""
    return {name: catalog for name, tool in TOOLS.items() if (catalog := tool.catalog(wait)) is not None}
