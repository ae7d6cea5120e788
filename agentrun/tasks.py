"""Celery tasks: thin, idempotent, taking ids. Domain outcomes are statuses, never retries."""
from celery import shared_task

from .loop import run_advance
from .watchdog import watchdog_pass


@shared_task(name="agentrun.advance_run", ignore_result=True)
def advance_run(run_id: int) -> None:
    """Drive a run from its committed state; a second delivery finds it held or done and leaves."""
    run_advance(run_id)


@shared_task(name="agentrun.watchdog", ignore_result=True)
def watchdog() -> None:
    watchdog_pass()
