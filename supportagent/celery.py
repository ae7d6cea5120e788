import os
import warnings

from celery import Celery
from celery.signals import task_prerun, worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "supportagent.settings")

app = Celery("supportagent")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def _start_watchdog(**kwargs) -> None:
    """Every worker runs the watchdog's passes in a thread (engine.watchdog_thread), one per interval for the fleet."""
    from django.conf import settings

    from engine.watchdog_thread import worker_watchdog_start
    from supportagent.broker import RedisWatch

    if settings.CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
        worker_watchdog_start(RedisWatch(settings.CELERY_BROKER_URL))


@worker_ready.connect
def _serve_metrics(**kwargs) -> None:
    """The worker's metrics on AGENT_METRICS_PORT, from its main process (the threads pool runs tasks there;
    prefork children write to PROMETHEUS_MULTIPROC_DIR, which the main process serves)."""
    from engine.metrics import serve_worker_metrics

    serve_worker_metrics()
    # Celery warns on every lost broker connection that a future version will cancel running tasks then; the
    # settings choose to keep them running (CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS). Set
    # here: the worker's logging set-up turns Celery's warnings on just before this.
    warnings.filterwarnings("ignore", message=r"(?s).*cancels all currently executed tasks with late acknowledgement")


@task_prerun.connect
def _record_consumed(task=None, **kwargs) -> None:
    """The worker took a task from the queue (engine.heartbeat; manage.py worker_health reads it)."""
    if task is not None and not task.request.is_eager:
        from engine.heartbeat import worker_consumed

        worker_consumed(task.request.hostname or "")
