"""python manage.py evaluate --model MODEL: test a candidate model against reviewed packets."""

import json
import sys
import time as clock
from datetime import datetime, time
from pathlib import Path

from celery import current_app as celery_app
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from kombu.exceptions import OperationalError as BrokerUnavailable

from engine.budgets import dollars
from engine.models import Evaluation, PacketReview
from evaluation.services import (
    evaluation_create,
    evaluation_finish,
    evaluation_progress,
    evaluation_run,
    result_of,
    unfinished_like,
)
from evaluation.tasks import evaluation_enqueue
from providers import BuiltInModel, model_problem

POLL_SECONDS = 0.5


def parse_since(text: str | None) -> datetime | None:
    if not text:
        return None
    moment = parse_datetime(text)
    if moment is None:
        day = parse_date(text)
        if day is None:
            raise CommandError(f"--since {text!r} is not a date (YYYY-MM-DD) or a date and time")
        moment = datetime.combine(day, time.min)
    return timezone.make_aware(moment) if timezone.is_naive(moment) else moment


class Command(BaseCommand):
    help = (
        "Run a candidate model over the tickets of reviewed packets, with the tools answering from what the "
        "original runs recorded (or the live backends), and compare it with the reviewed packets."
    )

    def add_arguments(self, parser):
        parser.add_argument("--model", help="the candidate model: rules, replay (with --script) or a provider model")
        parser.add_argument("--reviewed", choices=Evaluation.Reviewed.values, default=Evaluation.Reviewed.ACCEPTED)
        parser.add_argument("--since", help="only packets written since this date")
        parser.add_argument("--limit", type=int, help="at most this many packets (oldest first)")
        parser.add_argument("--live-tools", action="store_true", help="read the live backends, not the recordings")
        parser.add_argument("--script", type=Path, help="a JSON list of replies, for the replay model")
        parser.add_argument("--resume", type=int, metavar="EVALUATION_ID", help="go on with this evaluation")
        parser.add_argument("--json", action="store_true", help="print the figures and cases as JSON")
        parser.add_argument(
            "--timeout",
            type=float,
            default=3600,
            metavar="SECONDS",
            help="with a broker: how long to wait for the workers (default 3600)",
        )

    def handle(self, *args, **options):
        evaluation = self._evaluation(options)
        on_workers = not celery_app.conf.task_always_eager  # a broker is configured, as for investigations
        try:
            if on_workers:
                evaluation = self._on_workers(evaluation, options["timeout"])
            else:
                evaluation = evaluation_run(evaluation, progress=self._progress_bar())
        except KeyboardInterrupt:
            if on_workers:
                self.stderr.write(
                    f"\ninterrupted: the workers go on with the queued cases; watch them (and send"
                    f" any left again) with --resume {evaluation.pk}"
                )
            else:
                self.stderr.write(f"\ninterrupted: resume with --resume {evaluation.pk}")
            raise SystemExit(130) from None
        if options["json"]:
            self.stdout.write(json.dumps(self._report(evaluation), indent=2))
        else:
            self._summary(evaluation)

    def _evaluation(self, options) -> Evaluation:
        if options["resume"] is not None:
            evaluation = Evaluation.objects.filter(pk=options["resume"]).first()
            if evaluation is None:
                raise CommandError(f"there is no evaluation {options['resume']}")
            return evaluation
        model = options["model"]
        if not model:
            raise CommandError("say which candidate model: --model MODEL (or --resume EVALUATION_ID)")
        problem = model_problem(model)
        if problem:
            raise CommandError(problem)
        script = self._script(options["script"], model)
        if options["limit"] is not None and options["limit"] < 1:
            raise CommandError("--limit must be at least 1")
        arguments = {
            "candidate_model": model,
            "reviewed": options["reviewed"],
            "since": parse_since(options["since"]),
            "limit": options["limit"],
            "live_tools": options["live_tools"],
            "model_script": script,
        }
        return unfinished_like(**arguments) or evaluation_create(**arguments, created_by="command")

    def _on_workers(self, evaluation: Evaluation, timeout: float) -> Evaluation:
        """Send the unfinished cases to the workers, then follow them in the database until all are done."""
        try:
            evaluation_enqueue(evaluation)
        except BrokerUnavailable as exc:
            raise CommandError(f"the broker did not answer ({exc}); try again with --resume {evaluation.pk}") from None
        progress, shown = self._progress_bar(), None
        until = clock.monotonic() + timeout
        while True:
            done, total = evaluation_progress(evaluation)
            if progress and (done, total) != shown:
                progress(done, total)
                shown = (done, total)
            if done == total:
                return evaluation_finish(evaluation)
            if clock.monotonic() >= until:
                raise CommandError(
                    f"{done} of {total} cases done after {timeout:g} s; the workers go on with the rest: "
                    f"watch them, or send any left again, with --resume {evaluation.pk}"
                )
            clock.sleep(POLL_SECONDS)

    def _script(self, path: Path | None, model: str):
        if model != BuiltInModel.REPLAY:
            if path is not None:
                raise CommandError("--script is for the replay model only")
            return None
        if path is None:
            raise CommandError("the replay model needs --script FILE (a JSON list of replies)")
        try:
            script = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise CommandError(f"cannot read the script {path}: {exc}") from None
        if not isinstance(script, list):
            raise CommandError(f"{path}: the script is a JSON list of replies")
        return script

    def _progress_bar(self):
        if not sys.stderr.isatty():
            return None

        def show(done: int, total: int) -> None:
            filled = int(30 * done / total) if total else 30
            sys.stderr.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {done}/{total} cases")
            if done == total:
                sys.stderr.write("\n")
            sys.stderr.flush()

        return show

    def _report(self, evaluation: Evaluation) -> dict:
        fields = (
            "original_run_id",
            "candidate_run_id",
            "original_review",
            "original_reason",
            "status",
            "detail",
            "drafted",
            "overlap",
            "model_requests",
            "tokens",
            "cost_micros",
            "original_cost_micros",
            "wall_seconds",
            "agreed",
            "regression",
            "cited_sources",
            "accepted_sources",
        )
        rows = list(evaluation.cases.all())
        return {
            "evaluation": evaluation.pk,
            "model": evaluation.candidate_model,
            "live_tools": evaluation.live_tools,
            "finished": evaluation.finished_at is not None,
            "figures": evaluation.figures,
            "cases": [
                {
                    **{name: getattr(case, name) for name in fields},
                    "original_reason_label": case.get_original_reason_display() if case.original_reason else None,
                    "result": result_of(case).value,
                }
                for case in rows
            ],
        }

    def _summary(self, evaluation: Evaluation) -> None:
        f = evaluation.figures
        self.stdout.write(
            f"evaluation {evaluation.pk} of {evaluation.candidate_model}: {f['cases']} cases, "
            f"agreement {_percent(f['agreement'])} ({f.get('agreed', 0)} of {f['accepted_cases']} accepted packets), "
            f"{f.get('agreed_with_rejected', 0)} agreeing with a rejected packet, "
            f"draft rate {_percent(f['draft_rate'])}, handoff rate {_percent(f['handoff_rate'])}, "
            f"cost per case {_dollars(f['cost_micros_per_case'])}"
            f" (originals {_dollars(f['original_cost_micros_per_case'])}), "
            f"{len(f['regressions'])} regressions"
            + (f" (original runs {', '.join(map(str, f['regressions']))})" if f["regressions"] else "")
        )
        by_reason = f.get("rejected_by_reason") or {}
        if by_reason:
            self.stdout.write(
                "rejected packets by the reviewer's reason: "
                + ", ".join(
                    f"{_reason_label(code)} {n}" for code, n in sorted(by_reason.items(), key=lambda i: (-i[1], i[0]))
                )
            )


def _reason_label(code: str) -> str:
    """A rejection reason's label ("no article answers it"); a rejection recorded without one says so."""
    return PacketReview.Reason(code).label if code in PacketReview.Reason.values else "no reason recorded"


def _dollars(micros: float | None) -> str:
    return "—" if micros is None else dollars(round(micros))


def _percent(share: float | None) -> str:
    return "—" if share is None else f"{share:.0%}"
