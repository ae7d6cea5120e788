"""Celery tasks: thin, idempotent, taking ids. Domain outcomes are statuses, never retries
(a webhook delivery is the exception: trying the receiver again later is its job)."""
from celery import shared_task

from .approvals import approval_notify
from .loop import run_advance
from .watchdog import watchdog_pass
from .webhooks import webhook_deliver


@shared_task(name="agentrun.advance_run", ignore_result=True)
def advance_run(run_id: int) -> None:
    """Drive a run from its committed state; a second delivery finds it held or done and leaves."""
    run_advance(run_id)


@shared_task(name="agentrun.watchdog", ignore_result=True)
def watchdog() -> None:
    watchdog_pass()


@shared_task(bind=True, name="agentrun.deliver_webhook", ignore_result=True, max_retries=None)
def deliver_webhook(self, event_id: str) -> None:
    """One attempt at a packet event; retried at the backoff until the delivery says it is done
    (its attempts, counted in the database, bound the retries)."""
    wait = webhook_deliver(event_id=event_id)
    if wait is not None:
        raise self.retry(countdown=wait)


@shared_task(name="agentrun.notify_approval", ignore_result=True)
def notify_approval(approval_id: int) -> None:
    """E-mail the Supervisors that a call waits for their answer (nothing if it was answered meanwhile)."""
    approval_notify(approval_id=approval_id)
