"""Conformance scenarios (CONFORMANCE §7): the file format and running one.

A scenario runs through the same loop, services and tool backends as
production; only the model (a replay) and the faults around dispatch differ.
"""
from __future__ import annotations

import time
import uuid
from typing import Any, Literal

from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tickets.demo import seed_demo
from tickets.models import CustomerSession, Ticket

from .budgets import Budget
from .decisions import describe_validation_error
from .loop import run_advance
from .models import Run
from .selectors import run_report
from .services import approval_answer, enqueue_advance, run_rewind_clock, run_start
from .statuses import Status

MAX_APPROVAL_ROUNDS = 50


class ScenarioError(ValueError):
    """A scenario file that cannot be run."""


class StartState(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    model_requests: int = Field(0, ge=0)
    tool_attempts: int = Field(0, ge=0)
    elapsed_seconds: float = Field(0, ge=0)
    tokens_used: int = Field(0, ge=0)
    cost_micros: int = Field(0, ge=0)


class Scenario(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str
    session: str
    ticket: str
    budget: dict[str, Any] = Field(default_factory=dict)
    start: StartState = Field(default_factory=StartState)
    model: list[Any] = Field(default_factory=list)
    faults: dict[str, list[dict[str, Any] | None]] = Field(default_factory=dict)
    approval: Literal["grant", "deny", "none"] = "none"
    require_approval: list[str] = Field(default_factory=list)
    expect: dict[str, Any] = Field(default_factory=dict)
    probe: str | None = Field(None, description="Redis key prefix counting model requests and dispatches (tests).")

    @classmethod
    def parse(cls, text: str) -> Scenario:
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            raise ScenarioError(f"invalid scenario: {describe_validation_error(exc)}") from None


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
        ref=f"{ref}~{uuid.uuid4().hex[:10]}", account=original.account, session=original.session,
        subject=original.subject, body=original.body,
    )


def run_scenario(scenario: Scenario) -> dict[str, Any]:
    """Run the scenario here, to its end (answering approvals as it says); its report."""
    run = create_scenario_run(scenario)
    began = time.monotonic()
    run = run_advance(run.pk)
    for _ in range(MAX_APPROVAL_ROUNDS):
        if run.status != Status.WAITING_APPROVAL or scenario.approval == "none":
            break
        approval_answer(run_id=run.pk, grant=scenario.approval == "grant", decided_by="scenario", resume=False)
        run = run_advance(run.pk)
    return run_report(run_id=run.pk, elapsed_seconds=time.monotonic() - began, name=scenario.name)


def enqueue_scenario(scenario: Scenario) -> Run:
    """Start the scenario's run on the workers; its replay model and faults travel with the run record."""
    run = create_scenario_run(scenario)
    enqueue_advance(run.pk)
    return run


def create_scenario_run(scenario: Scenario) -> Run:
    """The scenario's run, queued, with its counters and elapsed time already that far."""
    session = CustomerSession.objects.filter(ref=scenario.session).first()
    if session is None:
        raise ScenarioError(f"no session {scenario.session!r} in the demo data")
    try:
        budget = Budget.from_mapping(scenario.budget)
    except ValueError as exc:
        raise ScenarioError(str(exc)) from None
    run = _start_run(scenario, session, budget)
    run_rewind_clock(run_id=run.pk, elapsed_seconds=scenario.start.elapsed_seconds)
    run.refresh_from_db()
    return run


def _start_run(scenario: Scenario, session: CustomerSession, budget: Budget) -> Run:
    ticket = fresh_ticket_copy(scenario.ticket)
    if session.account_id != ticket.account_id:
        raise ScenarioError(f"session {session.ref} does not belong to ticket {scenario.ticket}'s account")
    start = scenario.start
    return run_start(
        ticket=ticket,
        session=session,
        model_name="replay",
        budget=budget,
        model_script={"model": scenario.model, "faults": scenario.faults, "probe": scenario.probe},
        require_approval=scenario.require_approval,
        resume_from={
            "model_requests": start.model_requests, "tool_attempts": start.tool_attempts,
            "tokens_used": start.tokens_used, "cost_micros": start.cost_micros,
        },
    )
