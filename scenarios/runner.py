"""Running a scenario: its run set up as the file says, then driven here or by the workers.

A scenario runs through the same loop, services and tool backends as
production; only the model (a replay), the faults around dispatch, the Redis
probe and the rewound clock differ, and those live in this package
(scenarios.harness wraps the production dispatcher and model).
"""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from typing import Any

from django.core.management import call_command
from django.db import connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from engine.budgets import Budget
from engine.loop import run_advance
from engine.models import Approval, Run
from engine.selectors import run_report
from engine.services import RunError, approval_answer, run_start
from engine.statuses import Status
from engine.tasks import enqueue_advance
from providers import BuiltInModel
from scenarios import harness  # noqa: F401  (loaded before any clock is rewound: see create_scenario_run)
from scenarios.format import Scenario, ScenarioError
from tickets.demo import seed_demo
from tickets.models import CustomerSession, Ticket

MAX_APPROVAL_ROUNDS = 50


def prepare_database() -> None:
    """Migrate if needed and load the demo data set (idempotent)."""
    executor = MigrationExecutor(connection)
    if executor.migration_plan(executor.loader.graph.leaf_nodes()):
        call_command("migrate", verbosity=0, interactive=False)
    seed_demo()


def fresh_ticket_copy(ref: str) -> Ticket:
    """A new ticket with the same account and text, so evidence numbering starts at E1."""
    original = Ticket.objects.filter(ref=ref).first()
    if original is None:
        raise ScenarioError(f"no ticket {ref!r} in the demo data")
    return Ticket.objects.create(
        ref=f"{ref}~{uuid.uuid4().hex[:10]}",
        account=original.account,
        session=original.session,
        subject=original.subject,
        body=original.body,
    )


def run_scenario(scenario: Scenario) -> dict[str, Any]:
    """Run the scenario here, to its end (answering approvals as it says); its report."""
    run = create_scenario_run(scenario)
    began = time.monotonic()
    run = run_advance(run.pk)
    for _ in range(MAX_APPROVAL_ROUNDS):
        if run.status != Status.WAITING_APPROVAL or scenario.approval == "none":
            break
        approval_answer(
            run_id=run.pk, grant=scenario.approval == Approval.Answer.GRANT, decided_by="scenario", resume=False
        )
        run = run_advance(run.pk)
    return run_report(run_id=run.pk, elapsed_seconds=time.monotonic() - began, name=scenario.name)


def enqueue_scenario(scenario: Scenario) -> Run:
    """Start the scenario's run on the workers; its replay model and faults travel with the run record."""
    run = create_scenario_run(scenario)
    enqueue_advance(run.pk)
    return run


def create_scenario_run(scenario: Scenario) -> Run:
    """The scenario's run, queued, with its counters and elapsed time already that far.

    All or nothing: a scenario refused here leaves no ticket copy behind. The harness its first step
    uses (and the Redis client of its probe, 0.1 to 0.7 s to load on a busy machine) is imported with
    this module, so that a scenario starting with 0.2 s left does not spend them importing.
    """
    session = CustomerSession.objects.filter(ref=scenario.session).first()
    if session is None:
        raise ScenarioError(f"no session {scenario.session!r} in the demo data")
    try:
        budget = Budget.from_mapping(scenario.budget)
    except ValueError as exc:
        raise ScenarioError(str(exc)) from None
    try:
        with transaction.atomic():
            run = _start_run(scenario, session, budget)
            run_rewind_clock(run_id=run.pk, elapsed_seconds=scenario.start.elapsed_seconds)
    except RunError as exc:
        raise ScenarioError(str(exc)) from None
    run.refresh_from_db()
    return run


def run_rewind_clock(*, run_id: int, elapsed_seconds: float) -> None:
    """Scenario set-up only: make `elapsed_seconds` of the queued run's time already gone."""
    run = Run.objects.get(pk=run_id)
    created = timezone.now() - timedelta(seconds=elapsed_seconds)
    Run.objects.filter(pk=run_id, status=Status.QUEUED).update(
        created_at=created, deadline_at=created + timedelta(seconds=run.get_budget().deadline_seconds)
    )


def _start_run(scenario: Scenario, session: CustomerSession, budget: Budget) -> Run:
    ticket = fresh_ticket_copy(scenario.ticket)
    if session.account_id != ticket.account_id:
        raise ScenarioError(f"session {session.ref} does not belong to ticket {scenario.ticket}'s account")
    start = scenario.start
    return run_start(
        ticket=ticket,
        session=session,
        model_name=BuiltInModel.REPLAY,
        budget=budget,
        model_script={"model": scenario.model, "faults": scenario.faults_script(), "probe": scenario.probe},
        require_approval=scenario.require_approval,
        resume_from={
            "model_requests": start.model_requests,
            "tool_attempts": start.tool_attempts,
            "tokens_used": start.tokens_used,
            "cost_micros": start.cost_micros,
        },
    )
