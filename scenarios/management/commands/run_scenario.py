import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from scenarios.format import Scenario, ScenarioError
from scenarios.runner import enqueue_scenario, prepare_database, run_scenario


class Command(BaseCommand):
    requires_system_checks: list[str] = []
    help = "Run one conformance scenario through the production loop and print its outcome as JSON."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument("--enqueue", action="store_true", help='start the run on the workers; print {"run": ID}')

    def handle(self, *args, file: Path, enqueue: bool, **options):
        try:
            scenario = Scenario.parse(file.read_text())
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise CommandError(f"{file}: invalid scenario: not UTF-8 text") from None
        except ScenarioError as exc:
            raise CommandError(f"{file}: {exc}") from None
        prepare_database()
        try:
            report = {"run": enqueue_scenario(scenario).pk} if enqueue else run_scenario(scenario)
        except ScenarioError as exc:
            raise CommandError(f"{file}: {exc}") from None
        self.stdout.write(json.dumps(report))
