"""Calls waiting for a supervisor: why each needs approval, who hears of it, and how long is left.

The approval itself (asked for by a run's step, answered by engine.services.approval_answer)
lives with the run; this module adds what people need to answer in time.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from celery import current_app as celery_app
from django.conf import settings
from django.contrib.auth.models import User
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import QuerySet
from django.urls import reverse
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerUnavailable

from engine.models import Approval, Run
from engine.roles import SUPERVISORS
from engine.signals import approval_asked
from engine.sql import StepWrites
from engine.statuses import Status

log = logging.getLogger("agentrun")


# --- pure ----------------------------------------------------------------------------


def approval_reason(*, tool: str, args: dict, run_requires: list[str], configured: list[str]) -> str:
    """Why a call needs approval, in words for the supervisor who answers it.

    A tool listed in AGENT_REQUIRE_APPROVAL (or in the run's own list) needs approval for any
    arguments; otherwise the tool asked for it, which for a job lookup means the job is sensitive.
    """
    if tool in configured:
        return f"{tool} is listed in AGENT_REQUIRE_APPROVAL: every call of it needs approval."
    if tool in run_requires:
        return f"This run was started requiring approval for every {tool} call."
    if "job_id" in args:
        return f"Job {args['job_id']} is marked sensitive: looking it up needs approval."
    return f"{tool} needs approval for these arguments."


@dataclass(frozen=True)
class Waiting:
    """An approval as staff see it: answerable while its run waits and has time left."""

    approval: Approval
    seconds_left: float

    @property
    def expired(self) -> bool:
        return self.approval.state == Approval.State.EXPIRED or (
            self.approval.state == Approval.State.PENDING and self.seconds_left <= 0
        )

    @property
    def state_shown(self) -> str:
        return Approval.State.EXPIRED if self.expired else self.approval.state

    @property
    def time_left(self) -> str:
        return time_left_text(self.seconds_left) if self.approval.state == Approval.State.PENDING else "—"


def approval_shown(approval: Approval, run: Run, now: datetime) -> Waiting:
    """`approval` of `run` as staff see it `now`: a pending approval of a run that has ended, or
    whose deadline has passed, is expired (the watchdog records that soon after)."""
    waiting = run.status == Status.WAITING_APPROVAL
    return Waiting(approval, run.time_left(now) if waiting else 0.0)


def time_left_text(seconds: float) -> str:
    if seconds <= 0:
        return "expired"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes} min {secs:02d} s left" if minutes else f"{secs} s left"


# --- reads ---------------------------------------------------------------------------


def approvals_waiting() -> QuerySet[Approval]:
    """Pending approvals of investigations still waiting with time left, the nearest deadline first
    (an evaluation answers its own calls from the original run's answers)."""
    return (
        Approval.objects.filter(
            state=Approval.State.PENDING,
            run__status=Status.WAITING_APPROVAL,
            run__deadline_at__gt=timezone.now(),
            run__purpose=Run.Purpose.INVESTIGATION,
        )
        .select_related("run__ticket")
        .order_by("run__deadline_at", "id")
    )


def supervisors_to_tell() -> list[str]:
    """The e-mail addresses of active Supervisors that have one."""
    users = User.objects.filter(groups__name=SUPERVISORS, is_active=True).exclude(email="")
    return sorted(set(users.values_list("email", flat=True)))


# --- notifying ------------------------------------------------------------------------


def approval_notify(*, approval_id: int) -> int:
    """E-mail the Supervisors that a call waits for them (through Django's e-mail settings).

    Returns how many messages were sent: none when the approval was answered meanwhile
    or nobody has an address. A mail server that fails is logged, not raised: the
    approval waits on the admin index and in the header anyway.
    """
    approval = Approval.objects.select_related("run__ticket").filter(pk=approval_id).first()
    recipients = supervisors_to_tell()
    if approval is None or approval.state != Approval.State.PENDING or not recipients:
        return 0
    run = approval.run
    subject = f"Approval needed: run {run.pk} on {run.ticket.ref} ({time_left_text(run.time_left())})"
    body = "\n".join(
        [
            f"Run {run.pk} on ticket {run.ticket.ref} wants to call {approval.tool} {approval.args}.",
            f"Why it needs approval: {approval.reason}",
            f"Answer before {timezone.localtime(run.deadline_at):%Y-%m-%d %H:%M:%S %Z}; the run's deadline keeps running.",
            settings.AGENT_SITE_URL + reverse("admin:agentrun_run_change", args=[run.pk]),
        ]
    )
    try:
        return send_mail(subject, body, None, recipients)
    except OSError as exc:  # SMTP errors are OSErrors
        log.error("approval %s: the e-mail to supervisors could not be sent (%s)", approval_id, type(exc).__name__)
        return 0


def approval_notify_later(*, run: Run, approval: Approval, now: datetime, writes: StepWrites) -> None:
    """Within the step that asks for `approval`: the `approval.waiting` event is recorded with the
    step's writes (packet webhook on), and the e-mail goes from a worker once the step commits.
    Neither for an evaluation's run: nobody is asked, the evaluation answers as the original run was answered."""
    if run.purpose != Run.Purpose.INVESTIGATION:
        return
    approval_asked.send(sender=Approval, run=run, approval=approval, now=now, writes=writes)
    transaction.on_commit(partial(_enqueue_notify, approval.pk))


NOTIFY_APPROVAL_TASK = "agentrun.notify_approval"  # the task (engine.tasks) that sends the e-mail


def _enqueue_notify(approval_id: int) -> None:
    if celery_app.conf.task_always_eager:  # no broker: sent here, after the step's commit
        approval_notify(approval_id=approval_id)
        return
    try:
        celery_app.send_task(NOTIFY_APPROVAL_TASK, (approval_id,))  # by name: engine.tasks imports this module
    except BrokerUnavailable as exc:
        log.error(
            "approval %s: the e-mail to supervisors could not be enqueued, the broker did not answer (%s)",
            approval_id,
            exc,
        )
