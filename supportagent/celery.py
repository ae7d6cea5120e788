import os

from celery import Celery
from celery.signals import task_prerun, worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "supportagent.settings")

app = Celery("supportagent")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def _serve_metrics(**kwargs) -> None:
    """The worker's metrics on AGENT_METRICS_PORT, from its main process (the threads pool runs tasks there;
    prefork children write to PROMETHEUS_MULTIPROC_DIR, which the main process serves)."""
    from engine.metrics import serve_worker_metrics

    serve_worker_metrics()


@task_prerun.connect
def _record_consumed(task=None, **kwargs) -> None:
    """The worker took a task from the queue (engine.heartbeat; manage.py worker_health reads it)."""
    if task is not None and not task.request.is_eager:
        from engine.heartbeat import worker_consumed

        worker_consumed(task.request.hostname or "")
