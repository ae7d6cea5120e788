"""The delivery of packet events: the one task whose retries are its job (trying the receiver again later)."""

from __future__ import annotations

from celery import shared_task

from integrations.webhooks import DELIVER_WEBHOOK_TASK, webhook_deliver


@shared_task(bind=True, name=DELIVER_WEBHOOK_TASK, ignore_result=True, max_retries=None)
def deliver_webhook(self, event_id: str) -> None:
    """One attempt at a packet event; retried at the backoff until the delivery says it is done
    (its attempts, counted in the database, bound the retries)."""
    wait = webhook_deliver(event_id=event_id)
    if wait is not None:
        raise self.retry(countdown=wait)
