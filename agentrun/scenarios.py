"""Conformance scenarios (CONFORMANCE §7): the file format and running one.

A scenario runs through the same loop, services and tool backends as
production; only the model (a replay) and the faults around dispatch differ.
"""
from __future__ import annotations

import json
import time
import uuid
from typing import Annotated, Any, Literal

from django.core.management import call_command
from django.db import connection, transaction
from django.db.migrations.executor import MigrationExecutor
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from tickets.demo import seed_demo
from tickets.models import CustomerSession, Ticket

from .budgets import COUNT_LIMIT, SECONDS_LIMIT, Budget, WrittenNumber
from .decisions import describe_validation_error
from .loop import run_advance
from .models import Run
from .selectors import run_report
from .services import RunError, approval_answer, enqueue_advance, run_rewind_clock, run_start
from .statuses import Status
from .tools import TOOLS

MAX_APPROVAL_ROUNDS = 50


class ScenarioError(ValueError):
    """A scenario file that cannot be run."""


class StartState(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    model_requests: int = Field(0, ge=0, le=COUNT_LIMIT)
    tool_attempts: int = Field(0, ge=0, le=COUNT_LIMIT)
    elapsed_seconds: float = Field(0, ge=0, le=SECONDS_LIMIT, allow_inf_nan=False)
    tokens_used: int = Field(0, ge=0, le=COUNT_LIMIT)
    cost_micros: int = Field(0, ge=0, le=COUNT_LIMIT)


Delay = Annotated[float, Field(ge=0, le=SECONDS_LIMIT, strict=True, allow_inf_nan=False)]
_DELAY = TypeAdapter(Delay)


class Fault(BaseModel):
    """What happens to one dispatch of a tool: a delay of the real backend, then a failure if named."""

    model_config = ConfigDict(extra="forbid")

    delay_seconds: Delay = 0
    fail: Literal["transient", "error"] | None = None


ToolName = Literal[tuple(TOOLS)]


class Scenario(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str
    session: str
    ticket: str
    budget: dict[str, Any] = Field(default_factory=dict)
    start: StartState = Field(default_factory=StartState)
    model: list[Any] = Field(default_factory=list)
    faults: dict[ToolName, list[Fault | None]] = Field(default_factory=dict)
    approval: Literal["grant", "deny", "none"] = "none"
    require_approval: list[str] = Field(default_factory=list)
    expect: dict[str, Any] = Field(default_factory=dict)
    probe: str | None = Field(None, description="Redis key prefix counting model requests and dispatches (tests).")

    @field_validator("model")
    @classmethod
    def _delays_are_durations(cls, model: list[Any]) -> list[Any]:
        # A reply's content is model output, malformed or not; its delay is the file's own instruction.
        for index, entry in enumerate(model):
            if isinstance(entry, dict) and entry.get("delay_seconds") is not None:
                try:
                    _DELAY.validate_python(entry["delay_seconds"])
                except ValidationError as exc:
                    raise ValueError(f"model[{index}].delay_seconds: {exc.errors()[0]['msg']}") from None
        return model

    @classmethod
    def parse(cls, text: str) -> Scenario:
        """The scenario in `text`; its decimal numbers keep their digits as written (prices are exact)."""
        try:
            data = json.loads(text, parse_float=WrittenNumber, parse_constant=_not_a_json_number)
        except ValueError as exc:
            raise ScenarioError(f"invalid scenario: not a JSON document ({exc})") from None
        where = _nul_at(data, "")
        if where is not None:
            raise ScenarioError(f"invalid scenario: {where or 'the document'} contains a NUL character (\\u0000), "
                                "which the run record cannot keep")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ScenarioError(f"invalid scenario: {describe_validation_error(exc)}") from None

    def faults_script(self) -> dict[str, list[dict[str, Any] | None]]:
        """The faults as the run record carries them to the dispatcher (what the file wrote, checked)."""
        return {tool: [f.model_dump(exclude_defaults=True) if f else None for f in entries]
                for tool, entries in self.faults.items()}


def _nul_at(value: Any, path: str) -> str | None:
    """The path of the first key or string in `value` holding a NUL character, or None."""
    if isinstance(value, str):
        return path if "\x00" in value else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        inner = f"{path}.{key}" if isinstance(key, str) else f"{path}[{key}]"
        if isinstance(key, str) and "\x00" in key:
            return inner
        found = _nul_at(item, inner.lstrip("."))
        if found is not None:
            return found
    return None


def _not_a_json_number(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


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
    """The scenario's run, queued, with its counters and elapsed time already that far.

    All or nothing: a scenario refused here leaves no ticket copy behind.
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
        model_script={"model": scenario.model, "faults": scenario.faults_script(), "probe": scenario.probe},
        require_approval=scenario.require_approval,
        resume_from={
            "model_requests": start.model_requests, "tool_attempts": start.tool_attempts,
            "tokens_used": start.tokens_used, "cost_micros": start.cost_micros,
        },
    )
