import json
import time

from django.core.management.base import BaseCommand, CommandError

from agentrun.models import Run
from agentrun.selectors import run_report
from agentrun.statuses import TERMINAL


class Command(BaseCommand):
    requires_system_checks: list[str] = []
    help = "Print a run in the JSON shape of run_scenario's output."

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int)
        parser.add_argument("--wait", type=float, default=0, metavar="SECONDS",
                            help="wait until the run is terminal, at most this long")

    def handle(self, *args, run_id: int, wait: float, **options):
        if wait < 0:
            raise CommandError("--wait must be zero or more seconds")
        if not Run.objects.filter(pk=run_id).exists():
            raise CommandError(f"no run {run_id}")
        until = time.monotonic() + wait
        while time.monotonic() < until and Run.objects.filter(pk=run_id).exclude(status__in=TERMINAL).exists():
            time.sleep(0.1)
        self.stdout.write(json.dumps(run_report(run_id=run_id)))
