"""run_advance: the one place that joins decisions, steps and adapters.

    begin -> [execute op -> record result, decide, reserve next op]* -> stop or rest

Every transition is a short transaction in engine.steps; the slow part
(the model request or the tool dispatch) runs between them, outside any
transaction, and waits at most min(operation timeout, time left). The worker
drives the run under a lease; if it loses it (it was too slow, the watchdog
ended the run), its next write is refused and it stops. A step or read whose
database connection was lost is tried again on a new one (on_fresh_connection).
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import TypeVar

import psycopg
from django.db import InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from engine.budgets import Budget
from engine.models import Run
from engine.operations import DispatchOp, ModelOp, Next, Operation, OpResult
from engine.selectors import run_context
from engine.steps import run_begin, run_record
from engine.waiting import TimedOut, call_with_timeout
from kit.logs import log_step, run_logging
from providers import ModelAdapter, ModelRequestSpec, adapter_for_run
from tickets.selectors import SessionScope
from tools.dispatch import Dispatcher
from tools.lookups import Lookup
from tools.registry import catalogs_read

log = logging.getLogger("agentrun")
T = TypeVar("T")
# A step (or a read) whose database connection was lost (a restart, a failover, a dropped
# session) is tried again on a fresh connection, at most this many times in all. Each try waits
# for a connection as long as the pool's timeout (DATABASE_POOL_TIMEOUT), so a server that is
# down for less than twice that long costs a step some waiting, never the run.
CONNECTION_TRIES = 3
# Before a try again, a short pause drawn in this range (seconds): the workers whose connections a
# restart cut do not all knock at the same instant.
RETRY_PAUSE = (0.05, 0.25)


def release_connection() -> None:
    """Give a pooled database connection back while this thread waits for slow I/O."""
    if connection.settings_dict.get("OPTIONS", {}).get("pool"):
        connection.close()


def worker_identity() -> str:
    """Names this driver of a run: host, process, thread, and a nonce for this call."""
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}:{uuid.uuid4().hex[:8]}"


def run_advance(run_id: int, *, adapter: ModelAdapter | None = None, dispatcher: Dispatcher | None = None) -> Run:
    """Drive a run until it stops, comes to rest (waiting for approval), or is held by another worker."""
    if transaction.get_connection().in_atomic_block:
        raise RuntimeError("run_advance commits each step; call it outside any transaction")
    owner = worker_identity()
    with run_logging(run_id, owner):
        return _drive(run_id, owner, adapter, dispatcher)


def _drive(run_id: int, owner: str, adapter: ModelAdapter | None, dispatcher: Dispatcher | None) -> Run:
    step = on_fresh_connection(lambda retry: run_begin(run_id=run_id, owner=owner))
    run = step.run  # with its ticket and session, as the operations see them
    assert run is not None  # run_begin hands the run back whatever it decides
    log_step("begin", ticket=run.ticket.ref if Run.ticket.is_cached(run) else "")
    if step.op is not None:
        if adapter is None or dispatcher is None:
            model, tools = run_io(run)
            adapter, dispatcher = adapter or model, dispatcher or tools
        log.info("run %s taken up (%s)", run_id, run.status)
        step = _operate(run_id, owner, step, run, adapter, dispatcher)
    run = step.run if step.run is not None else Run.objects.get(pk=run_id)  # as the last step wrote it
    log.info("run %s left %s", run_id, run.status)
    return run


def _operate(run_id: int, owner: str, step: Next, run: Run, adapter: ModelAdapter, dispatcher: Dispatcher) -> Next:
    """Execute the operation each step reserves and record its result, until a step reserves none."""
    budget = run.get_budget()
    while (op := step.op) is not None:
        log_step(name := _step_name(op))
        result = _execute(op, run, budget, adapter, dispatcher)
        log.info("run %s: %s answered in %d ms", run_id, name, result.latency_ms)
        step = on_fresh_connection(_recording(run, owner, op, result))
        if step.landed:  # the step committed, its answer was lost: resume from what it wrote
            step = on_fresh_connection(lambda retry: run_begin(run_id=run_id, owner=owner))
        run = step.run or run  # the same object, unless a retry read it anew
    return step


def _recording(run: Run, owner: str, op: Operation, result: OpResult) -> Callable[[bool], Next]:
    """The step recording `result`, as on_fresh_connection calls it. `run` is the run as the step that
    reserved `op` left it; tried again, the step reads the run whole (the failed try changed this object)."""
    return lambda retry: run_record(run=run, owner=owner, op=op, result=result, retry=retry)


# Where a run that is not a production investigation gets its model and tools: filled at start-up by
# the packages that start such runs (evaluation.apps, scenarios.apps), so the engine imports neither.
RUN_IO: dict[str, Callable[[Run], tuple[ModelAdapter, Dispatcher]]] = {}


def run_io(run: Run) -> tuple[ModelAdapter, Dispatcher]:
    """The model adapter and the dispatcher a run uses.

    An evaluation run gets the candidate's adapter and the original run's recorded
    tools (RUN_IO["evaluation"]). A run whose record carries a scenario's script (only the scenario
    runner writes one) gets the scenario's wrappers, faults and probe (RUN_IO["scenario"]).
    """
    if run.purpose == Run.Purpose.EVALUATION:  # a candidate model's run over a reviewed packet's ticket
        return RUN_IO["evaluation"](run)
    if run.model_script is None:
        return adapter_for_run(run), Dispatcher()
    return RUN_IO["scenario"](run)


def _step_name(op: Operation) -> str:
    return f"model_request {op.seq}" if isinstance(op, ModelOp) else f"dispatch {op.seq} {op.tool}"


def on_fresh_connection(call: Callable[[bool], T]) -> T:
    """`call(retry)`, called again on a fresh connection when the one it used was lost.

    Safe for a step: the server rolls back a transaction whose connection
    is gone, and when the commit did land before the answer was lost, the
    retry finds the run one version on, still held by this worker, and says
    so (`Next.landed`); run_advance then resumes the run like a restarted worker.
    """
    for tries_left in range(CONNECTION_TRIES - 1, -1, -1):
        try:
            return call(tries_left < CONNECTION_TRIES - 1)
        except (OperationalError, InterfaceError) as error:
            if tries_left == 0 or not _connection_lost(error):
                raise
            log.warning("the database connection was lost; the step or read is tried again on a new one")
            connection.close()
            connections_discard_broken()
            time.sleep(random.uniform(*RETRY_PAUSE))
    raise AssertionError("unreachable")


def connections_discard_broken() -> None:
    """Have the pool test its idle connections and replace those the server closed.

    A restart closes every connection at once, and the pool hands out idle ones
    without testing them: without this, the next tries would draw dead ones too.
    Costs one round trip per idle connection, only after a connection was lost.
    """
    pool = getattr(connection, "pool", None)  # PostgreSQL with a pool; None on SQLite
    if pool is not None:
        pool.check()


def _connection_lost(error: BaseException) -> bool:
    """Whether `error` says the connection itself was lost (not a statement that failed).

    psycopg says so with a client-side error (no SQLSTATE), a connection exception
    (class 08) or the server's shutdown codes (57P01-57P03: a terminated session, a
    crash, a server starting up). Django wraps it, and its own clean-up may already
    have opened a new connection, so the error is what tells."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, psycopg.InterfaceError):
            return True
        if isinstance(seen, psycopg.OperationalError) and not isinstance(seen, psycopg.errors.PipelineAborted):
            state = seen.sqlstate
            if state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03"):
                return True
        seen = seen.__cause__ or seen.__context__
    return False


def _execute(op: Operation, run: Run, budget: Budget, adapter: ModelAdapter, dispatcher: Dispatcher) -> OpResult:
    if isinstance(op, ModelOp):
        # Before the tool definitions are measured: they, the rules and the argument check name what was read.
        catalogs = on_fresh_connection(lambda retry: catalogs_read(wait=budget.wait_seconds(run.time_left())[0]))
        context = on_fresh_connection(
            lambda retry: run_context(
                run=run,
                budget=budget,
                shown_allowances=op.allowances,
                reserve_bytes=adapter.input_overhead_bytes(),
                catalogs=catalogs,
            )
        )
        release_connection()
        wait, by_deadline = budget.wait_seconds(run.time_left())
        spec = ModelRequestSpec(context, budget.max_output_tokens, wait, op.index)
        return _wait_for(lambda: adapter.request(spec), wait, by_deadline)
    assert isinstance(op, DispatchOp)
    release_connection()
    scope = op.scope or SessionScope.of(run.session)
    wait, by_deadline = budget.wait_seconds(run.time_left())
    lookup = Lookup(timeout=wait, approved=op.approved)
    return _wait_for(lambda: dispatcher.dispatch(op.tool, scope, op.args, op.index, lookup), wait, by_deadline)


def _wait_for(operation, wait: float, by_deadline: bool) -> OpResult:
    """Run the operation, waiting at most `wait`; with no time left it is not started at all."""
    started = timezone.now()
    if wait <= 0:
        return OpResult(TimedOut(), by_deadline, started)
    return OpResult(call_with_timeout(operation, wait), by_deadline, started)
