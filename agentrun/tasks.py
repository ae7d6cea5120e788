from celery import shared_task

from .loop import run_advance


@shared_task(name="agentrun.advance_run", ignore_result=True)
def advance_run(run_id: int) -> None:
    """Drive a run from its committed state; safe to deliver twice."""
    run_advance(run_id)
