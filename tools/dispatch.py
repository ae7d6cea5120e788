"""Dispatching a call to its tool backend.

Scenario faults are not here: the scenario runner wraps this dispatcher
(scenarios.harness.FaultyDispatcher).
"""

from __future__ import annotations

from typing import Any

import psycopg
from django.db import InterfaceError, OperationalError, connection

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
            database_within(pool_wait(lookup.timeout))
            return self.tools[tool].backend(scope, args, lookup)
        except (OperationalError, InterfaceError, psycopg.OperationalError) as exc:  # our own database failed
            raise ToolError(f"the database did not answer the lookup ({type(exc).__name__})", transient=True) from exc


# Of a lookup's wait, what is kept for the lookup itself once a connection is there (at most this share).
QUERY_SHARE = 0.25
QUERY_SECONDS = 1.0


def pool_wait(timeout: float | None) -> float | None:
    """How long a lookup may wait for a database connection: below its own wait, so that a database
    that is down ends the lookup as a transient failure (retried within the run's budgets) rather than
    as the loop's timeout (not retried). None: as long as the pool's own timeout."""
    if timeout is None:
        return None
    return timeout - min(QUERY_SECONDS, timeout * QUERY_SHARE)


def database_within(seconds: float | None) -> None:
    """Wait at most `seconds` for the pool to have a connection for this thread; raises psycopg_pool's
    PoolTimeout (a psycopg.OperationalError) if none comes.

    The pool's wait cannot be set per call through Django, so the connection is asked for here with the
    bound and handed straight back; Django's own request then finds one ready. Nothing is waited for
    when this thread holds a connection, with no pool (SQLite), or with no bound.
    """
    pool = getattr(connection, "pool", None)
    if seconds is None or pool is None or connection.connection is not None:
        return
    pool.open()
    pool.putconn(pool.getconn(timeout=max(seconds, 0.0)))
