"""The watchdog: the outside stop for runs whose worker is blocked or dead.

One pass (a) ends every active run past its deadline with DEADLINE, whatever
its worker is doing, and (b) hands runs whose lease expired (their worker
died), and runs that no worker took up (their task was lost, or never sent
because the broker was down when they were queued or granted), back to the
queue. Every worker runs passes in a thread of its own, one pass per
AGENT_WATCHDOG_INTERVAL for the whole fleet, and without a broker the web
process does (engine.watchdog_thread); Celery beat may send passes too;
`manage.py watchdog --once` runs one. Staff surfaces also end the overdue
runs they read or act on (`runs_expire_overdue`, `run_expire`) before
showing them, so a run past its deadline never looks alive.

A pass only writes: it returns the runs it handed back (`requeued`), and its
caller, the `engine.watchdog` task, enqueues them (so this module needs
nothing from the tasks or the services that sit above it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from engine import metrics
from engine.models import Approval, ModelRequest, Run, ToolAttempt
from engine.settling import requests_settle_unanswered, run_stop
from engine.sql import StepWrites
from engine.statuses import ACTIVE, Status, Stop
from engine.steps import run_save


@dataclass(frozen=True)
class WatchdogPass:
    expired: list[int]
    requeued: list[int]  # requeued in the database; for the caller to enqueue


def watchdog_pass(*, messages_lost: bool = False) -> WatchdogPass:
    """End the overdue runs; hand back the orphaned ones. `messages_lost`: the broker was away or restarted,
    so a queued run's message may be gone however young the run is: it is handed back now, not after
    AGENT_QUEUED_GRACE_SECONDS (a run whose message did survive is delivered twice; the second delivery finds
    it held or done and leaves)."""
    expired = runs_expire_overdue()
    now = timezone.now()
    stale = now if messages_lost else now - timedelta(seconds=settings.AGENT_QUEUED_GRACE_SECONDS)
    # Not held by a worker, nor handed back within the grace (a hand-back leaves the lease's time, no owner);
    # when messages were lost, a hand-back's may have been too.
    unclaimed = Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now)
    if messages_lost:
        unclaimed |= Q(lease_owner="")
    granted_untaken = Approval.objects.filter(run=OuterRef("pk"), state=Approval.State.GRANTED, decided_at__lt=stale)
    orphaned = Run.objects.filter(
        Q(status=Status.RUNNING, lease_expires_at__lt=now)
        | (Q(status=Status.QUEUED, created_at__lt=stale) & unclaimed)
        | (Q(status=Status.WAITING_APPROVAL) & Exists(granted_untaken) & unclaimed),
        status__in=[Status.RUNNING, Status.QUEUED, Status.WAITING_APPROVAL],  # the (status, deadline_at) index
        deadline_at__gt=now,
    ).values_list("pk", flat=True)
    requeued = []
    for run_id in orphaned:
        if run_requeue(run_id=run_id, grace_seconds=settings.AGENT_QUEUED_GRACE_SECONDS, messages_lost=messages_lost):
            requeued.append(run_id)
    metrics.watchdog_acted(metrics.WatchdogAction.REQUEUE, len(requeued))
    return WatchdogPass(expired, requeued)


def runs_expire_overdue(*, ticket_id: int | None = None) -> list[int]:
    """End every active run past its deadline (only the ticket's, given `ticket_id`) with DEADLINE.

    Returns the runs it ended; one the watchdog or a worker holds right now is left to them.
    """
    overdue = Run.objects.filter(status__in=ACTIVE, deadline_at__lte=timezone.now())
    if ticket_id is not None:
        overdue = overdue.filter(ticket_id=ticket_id)
    expired = [run_id for run_id in overdue.values_list("pk", flat=True) if run_expire(run_id=run_id)]
    metrics.watchdog_acted(metrics.WatchdogAction.DEADLINE_END, len(expired))
    return expired


def run_expire(*, run_id: int) -> bool:
    """End an active run whose deadline has passed, whatever its worker is doing. True if it ended it.

    In-flight operations are settled as cut by the deadline: a pending model
    request is charged its whole reservation, a pending attempt is a timeout.
    Skips a run whose row another transaction holds; the next pass gets it.
    """
    with transaction.atomic():
        run = Run.objects.select_for_update(skip_locked=True).filter(pk=run_id).first()
        now = timezone.now()
        if run is None or not run.is_active or run.time_left(now) > 0:
            return False
        requests_settle_unanswered(run=run, outcome=ModelRequest.Outcome.DEADLINE, now=now)
        run.attempts.filter(outcome=ToolAttempt.Outcome.PENDING).update(
            outcome=ToolAttempt.Outcome.TIMEOUT, finished_at=now
        )
        with StepWrites() as writes:
            stop = Stop(Status.DEADLINE, note="the watchdog ended the run at its deadline")
            run_stop(run=run, stop=stop, now=now, writes=writes)
            run_save(run=run, writes=writes, now=now)
        return True


def run_requeue(*, run_id: int, grace_seconds: float, messages_lost: bool = False) -> bool:
    """Release the lease of a run whose worker stopped renewing it, or that no worker took up
    (queued, or granted and still waiting). True if it should be enqueued again.

    The run stays claimable by anyone; it is not requeued again for `grace_seconds`, unless the
    broker lost messages meanwhile (`messages_lost`: one handed back, not yet taken up, goes again).
    """
    with transaction.atomic():
        run = Run.objects.select_for_update(skip_locked=True).filter(pk=run_id).first()
        now = timezone.now()
        if run is None or not run.is_active:
            return False
        if run.status == Status.WAITING_APPROVAL and not run.approvals.filter(state=Approval.State.GRANTED).exists():
            return False  # still waiting for its answer: nothing for a worker to do
        handed_back = messages_lost and not run.lease_owner
        if run.lease_expires_at and run.lease_expires_at > now and not handed_back:
            return False
        run.lease_owner, run.lease_expires_at = "", now + timedelta(seconds=grace_seconds)
        run.version += 1
        run.save(update_fields=["lease_owner", "lease_expires_at", "version"])
        return True
