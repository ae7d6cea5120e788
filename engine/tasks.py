"""Celery tasks: thin, idempotent, taking ids. Domain outcomes are statuses, never retries.

Sending a run to a worker (enqueue_advance) lives here, beside its task. The modules the
tasks call (the loop, the watchdog, the approvals) never import this one: the watchdog's
pass returns what to enqueue and its task enqueues it, and an approval's e-mail is sent by
its task's name. So the imports run one way: services -> tasks -> loop, watchdog, approvals.
(A packet event's delivery is integrations.tasks.)
"""

from __future__ import annotations

import logging
import math

from celery import shared_task
from django.conf import settings
from django.db import transaction
from kombu.exceptions import OperationalError as BrokerUnavailable

from engine.approvals import approval_notify
from engine.loop import run_advance
from engine.models import Run
from engine.watchdog import WatchdogPass, watchdog_pass

log = logging.getLogger("agentrun")


@shared_task(name="agentrun.advance_run", ignore_result=True)
def advance_run(run_id: int) -> None:
    """Drive a run from its committed state; a second delivery finds it held or done and leaves."""
    run_advance(run_id)


@shared_task(name="agentrun.watchdog", ignore_result=True)
def watchdog(messages_lost: bool = False) -> WatchdogPass:
    """One watchdog pass; the runs it hands back are enqueued here. Returns the pass (for callers in-process).

    `messages_lost`: the broker was away or restarted, so queued runs are sent again now (watchdog_pass)."""
    done = watchdog_pass(messages_lost=messages_lost)
    for run_id in done.requeued:
        enqueue_advance(run_id)
    return done


def enqueue_advance(run_id: int) -> None:
    """Have a worker drive the run once the current transaction commits.

    The task's hard time limit is derived from the run's deadline: the outside
    stop for code that ignores cooperative cancellation, on pools that enforce
    it (prefork, gevent). On any pool the watchdog ends the run at its deadline.

    When the broker cannot be reached the run stays as committed (queued, or
    granted and waiting) and the error is logged: the caller is not failed for
    a run that exists, and the watchdog enqueues it again as soon as the
    broker answers (engine.watchdog_thread), or after AGENT_QUEUED_GRACE_SECONDS.
    """

    def send() -> None:
        run = Run.objects.only("deadline_at").get(pk=run_id)
        # Whole seconds, as Celery takes a time limit: rounded up, never before the deadline and margin.
        limit = math.ceil(max(run.time_left(), 0) + settings.AGENT_LEASE_MARGIN_SECONDS)
        try:
            advance_run.apply_async((run_id,), time_limit=limit)
        except BrokerUnavailable as exc:
            log.error(
                "run %s is saved but could not be enqueued, the broker did not answer (%s); the watchdog"
                " enqueues it again once it does",
                run_id,
                exc,
            )

    transaction.on_commit(send)


@shared_task(name="agentrun.notify_approval", ignore_result=True)
def notify_approval(approval_id: int) -> None:
    """E-mail the Supervisors that a call waits for their answer (nothing if it was answered meanwhile)."""
    approval_notify(approval_id=approval_id)
