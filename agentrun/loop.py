"""run_advance: the one place that joins decisions, steps and adapters.

    begin -> [execute op -> record result, decide, reserve next op]* -> stop or rest

Every transition is a short transaction in agentrun.steps; the slow part
(the model request or the tool dispatch) runs between them, outside any
transaction, and waits at most min(operation timeout, time left). The worker
drives the run under a lease; if it loses it (it was too slow, the watchdog
ended the run), its next write is refused and it stops.
"""
from __future__ import annotations

import os
import socket
import threading
import uuid

from django.db import connection, transaction
from django.utils import timezone

from supportagent.rows import row_get
from tickets.selectors import SessionScope

from .adapters import ModelAdapter, ModelRequestSpec, adapter_for_run
from .budgets import Budget
from .dispatch import Dispatcher, dispatcher_for_run
from .models import Run
from .selectors import run_context
from .operations import DispatchOp, ModelOp, Operation, OpResult
from .steps import run_begin, run_record
from .waiting import TimedOut, call_with_timeout


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
    step = run_begin(run_id=run_id, owner=owner)
    run = step.run  # with its ticket and session, as the operations see them
    if step.op is not None:
        adapter = adapter or adapter_for_run(run)
        dispatcher = dispatcher or dispatcher_for_run(run)
        budget = run.get_budget()
    while step.op is not None:
        result = _execute(step.op, run, budget, adapter, dispatcher)
        step = run_record(run_id=run_id, owner=owner, version=step.version, op=step.op, result=result,
                          tally=step.tally, run=step.run)
    if step.run is not None:  # as the last step wrote it
        return step.run
    return row_get(Run, run_id)


def _execute(op: Operation, run: Run, budget: Budget, adapter: ModelAdapter, dispatcher: Dispatcher) -> OpResult:
    if isinstance(op, ModelOp):
        context = run_context(run=run, budget=budget, shown_allowances=op.allowances,
                              reserve_bytes=adapter.input_overhead_bytes())
        release_connection()
        wait, by_deadline = budget.wait_seconds(run.time_left())
        spec = ModelRequestSpec(context, budget.max_output_tokens, wait, op.index)
        return _wait_for(lambda: adapter.request(spec), wait, by_deadline)
    assert isinstance(op, DispatchOp)
    release_connection()
    scope = SessionScope.of(run.session)
    wait, by_deadline = budget.wait_seconds(run.time_left())
    return _wait_for(lambda: dispatcher.dispatch(op.tool, scope, op.args, op.index), wait, by_deadline)


def _wait_for(operation, wait: float, by_deadline: bool) -> OpResult:
    """Run the operation, waiting at most `wait`; with no time left it is not started at all."""
    started = timezone.now()
    if wait <= 0:
        return OpResult(TimedOut(), by_deadline, started)
    return OpResult(call_with_timeout(operation, wait), by_deadline, started)
