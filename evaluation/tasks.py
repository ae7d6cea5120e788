"""An evaluation's cases on the workers: one task a case, sent when a broker is configured.

Apart from engine.tasks because the cases run through evaluation.services, which starts runs
through the services, which import engine.tasks: the imports run one way. Celery loads this
module through CELERY_IMPORTS.
"""

from __future__ import annotations

from celery import current_app as celery_app
from celery import shared_task
from django.conf import settings

from engine.models import Evaluation, EvaluationCase
from evaluation.services import case_run, evaluation_run

HELD_RETRY_SECONDS = 2.0  # before a case whose run another worker holds is looked at again


@shared_task(name="agentrun.evaluate_case", ignore_result=True)
def evaluate_case(case_id: int) -> None:
    """Run one case and finish it; a finished case is left alone. When another worker holds the case's
    run, look again shortly: whoever sees the run end finishes the case."""
    if not case_run(case_id=case_id):
        evaluate_case.apply_async((case_id,), countdown=HELD_RETRY_SECONDS)


def evaluation_enqueue(evaluation: Evaluation) -> int:
    """Send each unfinished case to the workers; how many were sent. A case sent twice runs once.

    Each task's hard time limit is its run's deadline (the original run's budget) and the
    lease margin: the outside stop, on pools that enforce it, as for an investigation.
    Raises kombu's OperationalError when the broker does not answer.
    """
    cases = evaluation.cases.exclude(state=EvaluationCase.State.DONE).select_related("original_run")
    sent = 0
    for case in cases.order_by("pk"):
        limit = case.original_run.get_budget().deadline_seconds + settings.AGENT_LEASE_MARGIN_SECONDS
        evaluate_case.apply_async((case.pk,), time_limit=limit)
        sent += 1
    return sent


def evaluation_launch(evaluation: Evaluation) -> Evaluation:
    """Run the evaluation's unfinished cases, with the `evaluate` command's own services: inline, now, when no
    broker is configured; else sent to the workers and not waited for (the last case to finish finishes the
    evaluation). Raises kombu's OperationalError when the broker does not answer."""
    if celery_app.conf.task_always_eager:
        return evaluation_run(evaluation)
    evaluation_enqueue(evaluation)
    return evaluation
