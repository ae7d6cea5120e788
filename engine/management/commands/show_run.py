import json
import time

from django.core.management.base import BaseCommand, CommandError

from engine.models import Run
from engine.selectors import run_report
from engine.statuses import TERMINAL

MAX_WAIT_SECONDS = 3600


class Command(BaseCommand):
    requires_system_checks: list[str] = []
    help = "Print a run in the JSON shape of run_scenario's output."

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int)
        parser.add_argument(
            "--wait", type=float, default=0, metavar="SECONDS", help="wait until the run is terminal, at most this long"
        )

    def handle(self, *args, run_id: int, wait: float, **options):
        if not 0 <= wait <= MAX_WAIT_SECONDS:  # NaN fails this too
            raise CommandError(f"--wait must be 0 to {MAX_WAIT_SECONDS} seconds, got {wait}")
        if not Run.objects.filter(pk=run_id).exists():
            raise CommandError(f"no run {run_id}")
        until = time.monotonic() + wait
        while time.monotonic() < until and Run.objects.filter(pk=run_id).exclude(status__in=TERMINAL).exists():
            time.sleep(0.1)
        self.stdout.write(json.dumps(run_report(run_id=run_id)))
