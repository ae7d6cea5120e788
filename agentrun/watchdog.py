"""The watchdog: the outside stop for runs whose worker is blocked or dead.

One pass (a) ends every active run past its deadline with DEADLINE, whatever
its worker is doing, and (b) hands runs whose lease expired (their worker
died), and runs that no worker took up (their task was lost, or never sent
because the broker was down when they were queued or granted), back to the
queue. Celery beat runs a pass every AGENT_WATCHDOG_INTERVAL seconds;
`manage.py watchdog --once` runs one.

A pass only writes: it returns the runs it handed back (`requeued`), and its
caller, the `agentrun.watchdog` task, enqueues them (so this module needs
nothing from the tasks or the services that sit above it).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from . import metrics
from .models import Approval, Run
from .statuses import ACTIVE, Status
from .steps import run_expire, run_requeue


@dataclass(frozen=True)
class WatchdogPass:
    expired: list[int]
    requeued: list[int]  # requeued in the database; for the caller to enqueue


def watchdog_pass() -> WatchdogPass:
    now = timezone.now()
    overdue = Run.objects.filter(status__in=ACTIVE, deadline_at__lte=now).values_list("pk", flat=True)
    expired = [run_id for run_id in overdue if run_expire(run_id=run_id)]
    metrics.watchdog_acted(metrics.WatchdogAction.DEADLINE_END, len(expired))
    stale = now - timedelta(seconds=settings.AGENT_QUEUED_GRACE_SECONDS)
    unclaimed = Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now)
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
        if run_requeue(run_id=run_id, grace_seconds=settings.AGENT_QUEUED_GRACE_SECONDS):
            requeued.append(run_id)
    metrics.watchdog_acted(metrics.WatchdogAction.REQUEUE, len(requeued))
    return WatchdogPass(expired, requeued)
