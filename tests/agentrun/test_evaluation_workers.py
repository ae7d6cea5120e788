"""evaluate with a broker: the cases run on real Celery workers (on the test database and a private Redis
queue), each once, whatever is delivered twice or resumed; the command follows them, times out and is
interrupted without losing a case."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
import time
from functools import partial

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.urls import reverse

from engine.loop import run_advance
from engine.models import Evaluation, EvaluationCase, ReviewPacket, Run
from engine.services import run_start
from engine.statuses import Status
from evaluation.services import evaluation_create, evaluation_run
from evaluation.tasks import evaluation_enqueue
from staff.reviews import packet_review
from supportagent.celery import app as celery_app
from tests.support.workers import ROOT, Cluster, publishing_to, wait_for
from tickets.models import Ticket

TICKETS = ("T-1001", "T-1002", "T-1004", "T-1007")
CASES = 8


@pytest.fixture
def reviewed(demo_committed):
    """8 packets of rules runs on Dana's tickets, reviewed: drafts accepted, the others rejected."""
    lead = User.objects.create_user("lead")
    for n in range(CASES):
        run = run_advance(run_start(ticket=Ticket.objects.get(ref=TICKETS[n % len(TICKETS)]), model_name="rules").pk)
        packet = ReviewPacket.objects.get(run=run)
        accept = packet.summary is not None
        packet_review(
            packet_id=packet.pk,
            reviewer=lead,
            decision="accepted" if accept else "rejected",
            reason="" if accept else "wrong_conclusion",
            note="" if accept else "no draft",
        )


@pytest.fixture
def cluster(reviewed, tmp_path):
    """A private queue; this process enqueues to it through Redis instead of running inline."""
    c = Cluster(tmp_path)
    with publishing_to(celery_app, c.queue):
        yield c
        c.stop()


def evaluate(*args: str) -> dict:
    out = io.StringIO()
    call_command("evaluate", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def inline(*args: str) -> dict:
    celery_app.conf.task_always_eager = True
    try:
        return evaluate(*args)
    finally:
        celery_app.conf.task_always_eager = False


def candidate_runs() -> int:
    return Run.objects.filter(purpose=Run.Purpose.EVALUATION).count()


def finished(evaluation_id: int) -> Evaluation | None:
    return Evaluation.objects.filter(pk=evaluation_id, finished_at__isnull=False).first()


def test_the_cases_run_on_the_workers_and_the_figures_equal_an_inline_evaluation_s(cluster):
    by_command = inline("--model", "rules", "--reviewed", "all")
    assert by_command["finished"] and by_command["figures"]["cases"] == CASES
    evaluation = evaluation_create(candidate_model="rules", reviewed=Evaluation.Reviewed.ALL)

    assert evaluation_enqueue(evaluation) == CASES
    time.sleep(1)
    assert not evaluation.cases.filter(state=EvaluationCase.State.DONE).exists()  # nothing ran here
    cluster.worker()
    done = wait_for(lambda: finished(evaluation.pk), 90, "the workers to finish every case")  # the last case did

    assert done.figures == by_command["figures"]
    assert by_command["figures"]["agreement"] == 1.0 and by_command["figures"]["draft_rate"] > 0
    assert candidate_runs() == 2 * CASES
    assert not Run.objects.filter(purpose=Run.Purpose.EVALUATION, ticket__evaluation_copy=False).exists()
    # The command follows the workers, and its report says what the inline one said.
    on_workers = evaluate("--model", "rules", "--reviewed", "all", "--timeout", "90")
    assert on_workers["evaluation"] not in (by_command["evaluation"], evaluation.pk)
    assert on_workers["finished"] and on_workers["figures"] == by_command["figures"]
    assert candidate_runs() == 3 * CASES


def test_a_resumed_evaluation_runs_no_finished_case_again_and_a_case_sent_twice_runs_once(cluster):
    evaluation = evaluation_create(candidate_model="rules", reviewed=Evaluation.Reviewed.ALL)

    def interrupt_after_three(done: int, total: int) -> None:
        if done == 3:
            raise KeyboardInterrupt

    celery_app.conf.task_always_eager = True
    try:
        with pytest.raises(KeyboardInterrupt):
            evaluation_run(evaluation, progress=interrupt_after_three)
    finally:
        celery_app.conf.task_always_eager = False
    before = dict(evaluation.cases.filter(state=EvaluationCase.State.DONE).values_list("pk", "candidate_run_id"))
    assert len(before) == 3 and candidate_runs() == 3
    cluster.worker()
    cluster.worker()
    evaluation_enqueue(evaluation)  # a delivery the command's resume below repeats, on two workers

    report = evaluate("--resume", str(evaluation.pk), "--timeout", "90")

    assert report["finished"] and report["figures"]["cases"] == CASES
    time.sleep(3)  # a duplicate that found its case's run held looks again after HELD_RETRY_SECONDS
    assert candidate_runs() == CASES  # one run a case: none for a finished case, one for a case sent twice
    after = dict(evaluation.cases.values_list("pk", "candidate_run_id"))
    assert {pk: after[pk] for pk in before} == before
    assert EvaluationCase.objects.filter(evaluation=evaluation, state=EvaluationCase.State.DONE).count() == CASES
    assert Run.objects.filter(purpose=Run.Purpose.EVALUATION, status=Status.COMPLETED).count() >= 1


def test_the_command_times_out_and_is_interrupted_leaving_the_cases_to_the_workers(cluster):
    with pytest.raises(CommandError, match=r"0 of 8 cases done after 0.5 s; the workers go on .* --resume \d+"):
        evaluate("--model", "rules", "--reviewed", "all", "--timeout", "0.5")
    timed_out = Evaluation.objects.get()
    # A second command (as a user would run it, with the broker in its environment) is interrupted by Ctrl-C.
    command = subprocess.Popen(
        [sys.executable, "manage.py", "evaluate", "--model", "rules", "--reviewed", "accepted"],
        cwd=ROOT,
        env=cluster.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(lambda: Evaluation.objects.filter(reviewed="accepted").exists(), 60, "the command to start")
    interrupted = Evaluation.objects.get(reviewed="accepted")
    wait_for(lambda: interrupted.cases.exists(), 10, "its cases")
    time.sleep(2)  # past sending them
    command.send_signal(signal.SIGINT)
    _, err = command.communicate(timeout=30)
    assert command.returncode == 130, err
    assert (
        f"the workers go on with the queued cases; watch them (and send any left again) with --resume "
        f"{interrupted.pk}" in err
    )
    assert candidate_runs() == 0

    cluster.worker()
    for evaluation in (timed_out, interrupted):
        wait_for(partial(finished, evaluation.pk), 90, f"the workers to finish {evaluation}")
    runs = candidate_runs()
    assert runs == timed_out.cases.count() + interrupted.cases.count()
    report = evaluate("--resume", str(interrupted.pk), "--timeout", "5")
    assert report["finished"] and report["figures"]["cases"] == interrupted.cases.count()
    assert candidate_runs() == runs


def test_an_evaluation_started_from_the_admin_runs_on_the_workers(cluster, supervisor_client):
    response = supervisor_client.post(
        reverse("admin:agentrun_evaluation_start"), {"candidate_model": "rules", "reviewed": "all"}
    )
    evaluation = Evaluation.objects.get()
    assert response.status_code == 302 and evaluation.finished_at is None  # sent to the workers, not waited for
    time.sleep(1)
    assert candidate_runs() == 0  # nothing ran in the request
    cluster.worker()
    done = wait_for(lambda: finished(evaluation.pk), 90, "the workers to finish the admin's evaluation")
    assert done.figures["cases"] == CASES and done.created_by == "supervisor"
    assert candidate_runs() == CASES
