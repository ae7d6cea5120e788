import json

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from redis import RedisError

from engine.heartbeat import workers_consumed_within


class Command(BaseCommand):
    requires_system_checks: list[str] = []
    help = (
        "Exit 0 when a worker (or the one named) consumed from the run queue within --within seconds, "
        "else exit 1: for a container health check or a cron alert."
    )

    def add_arguments(self, parser):
        parser.add_argument("--within", type=float, default=60.0, help="seconds (default 60)")
        parser.add_argument("--worker", default="", help="only this worker's name (e.g. w1@host)")

    def handle(self, *args, within: float, worker: str, **options):
        if not settings.CELERY_BROKER_URL:
            raise CommandError("CELERY_BROKER_URL is not set: there are no workers to check")
        try:
            seen = workers_consumed_within(within)
        except RedisError as exc:
            raise CommandError(f"the broker did not answer ({type(exc).__name__})") from None
        if worker:
            seen = {name: ago for name, ago in seen.items() if name == worker}
        if not seen:
            who = f"worker {worker}" if worker else "any worker"
            raise CommandError(
                f"nothing consumed from queue {settings.CELERY_TASK_DEFAULT_QUEUE!r} by {who} in the last {within:g} s"
            )
        self.stdout.write(json.dumps({"queue": settings.CELERY_TASK_DEFAULT_QUEUE, "seconds_ago": seen}))
