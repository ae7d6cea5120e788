import json
import time

from django.conf import settings
from django.core.management.base import BaseCommand

from engine.tasks import watchdog


class Command(BaseCommand):
    requires_system_checks: list[str] = []
    help = "End runs past their deadline and requeue runs whose worker died (what Celery beat schedules)."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="run one pass and print what it did")

    def handle(self, *args, once: bool, **options):
        while True:
            done = watchdog()
            if once:
                self.stdout.write(json.dumps({"expired": done.expired, "requeued": done.requeued}))
                return
            time.sleep(settings.AGENT_WATCHDOG_INTERVAL)
