"""One run as the loop would have left it: its steps, attempts, evidence, approvals and packet, as rows.

Stop reasons come in the proportions below (about two runs in three complete); a run's steps follow
from its stop reason and its ticket's topic: the rule-based investigator looks the job up, searches
and reads the service, in that order, and a language model sometimes replies with something unusable
first. Everything a row holds is shaped as the engine writes it (`engine.packets`, `engine.refusals`,
`tickets.services.evidence_record`), so every staff page reads these rows as it reads real ones.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from engine.budgets import Budget
from engine.models import Approval, ModelRequest, Observation, ReviewPacket, Run, RunRequest, ToolAttempt
from engine.refusals import refusal_of_calls
from engine.scaleseed.copying import JsonText, Row
from engine.scaleseed.draws import Weighted
from engine.scaleseed.world import DOC_SENTENCES, Customer, Topic, World
from engine.statuses import Detail, Status
from tickets.models import Evidence
from tickets.services import evidence_content_hash
from tools.base import call_key
from tools.registry import TOOLS

STOP_REASONS = Weighted(
    [
        (Status.COMPLETED, 0.65),
        (Status.NEEDS_HELP, 0.14),
        (Status.INVALID_OR_FORBIDDEN, 0.05),
        (Status.NO_PROGRESS, 0.04),
        (Status.MODEL_ERROR, 0.03),
        (Status.TOOL_LIMIT, 0.025),
        (Status.MODEL_LIMIT, 0.025),
        (Status.DEADLINE, 0.025),
        (Status.CANCELLED, 0.01),
        (Status.TOKEN_LIMIT, 0.005),
        (Status.COST_LIMIT, 0.005),
    ]
)
REFUSALS = Weighted(
    [
        (Detail.FORBIDDEN, 0.5),
        (Detail.BAD_ARGUMENTS, 0.2),
        (Detail.UNKNOWN_TOOL, 0.15),
        (Detail.APPROVAL_DENIED, 0.1),
        (Detail.MULTIPLE_CALLS, 0.05),
    ]
)
MODEL_ERRORS = Weighted(((Detail.ERROR, 0.5), (Detail.TIMEOUT, 0.4), (Detail.USAGE_OVERRUN, 0.1)))
# (model, input and output dollars per million tokens), with the share of the runs a model may make
MODELS = Weighted(
    (
        (("rules", "0", "0"), 0.55),
        (("openai:gpt-4.1-mini", "0.4", "1.6"), 0.3),
        (("anthropic:claude-sonnet-4-5", "3", "15"), 0.15),
    )
)
LANGUAGE_MODELS = MODELS.only(lambda model: model[0] != "rules")
VIAS = Weighted(((RunRequest.Via.INTAKE, 0.65), (RunRequest.Via.ADMIN, 0.25), (RunRequest.Via.API, 0.1)))
# What only a language model does: the rules investigator never replies with these.
MODEL_ONLY = {
    Status.NO_PROGRESS,
    Status.MODEL_ERROR,
    Status.TOOL_LIMIT,
    Status.MODEL_LIMIT,
    Status.TOKEN_LIMIT,
    Status.COST_LIMIT,
}
APPROVAL_DEADLINE = 900.0
RESERVED_TOKENS = 9000


@dataclass(frozen=True)
class RunSetting:
    """What a run of this ticket is about, fixed by its ticket."""

    ticket_id: int
    session: Customer
    account_id: int
    topic: Topic
    subject: str
    body: str
    job: tuple[str, str, bool] | None  # (ref, content, sensitive): the job the ticket names, as the tool reads it


@dataclass
class TicketEvidence:
    """A ticket's evidence so far: its numbers by content hash."""

    numbers: dict[str, int] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)


@dataclass
class RunRows:
    """Everything one run wrote, and what its packet's review needs to know."""

    rows: dict[type, list[Row]]
    status: Status
    cited_evidence: list[int]  # evidence row ids the packet cites, in its order

    @property
    def packet(self) -> Row:
        return self.rows[ReviewPacket][0]


class Clock:
    """A run's time, moved on by each thing it does."""

    def __init__(self, at: datetime):
        self.at = at

    def spend(self, seconds: float) -> tuple[datetime, datetime, int]:
        started = self.at
        self.at = started + timedelta(seconds=seconds)
        return started, self.at, int(seconds * 1000)


class RunWriter:
    """Builds one run's rows; `ids` gives each table's next primary key."""

    def __init__(self, *, world: World, ids, rng: random.Random):
        self.world, self.ids, self.rng = world, ids, rng

    def run(
        self, *, setting: RunSetting, evidence: TicketEvidence, run_id: int, created_at: datetime, messages_seen: int
    ) -> RunRows:
        rng = self.rng
        status = STOP_REASONS.draw(rng)
        detail = _detail(status, setting, rng)
        model, price_in, price_out = _model(status, detail, rng)
        sensitive = setting.job is not None and setting.job[2] and setting.session.verified
        budget, budget_json = _budget(price_in, price_out, bool(sensitive))
        rows: dict[type, list[Row]] = {m: [] for m in (ModelRequest, ToolAttempt, Observation, Approval)}
        state = _RunState(self, setting, evidence, run_id, model, budget, rows)
        clock = Clock(created_at + timedelta(seconds=rng.uniform(0.02, 1.5)))
        started_at = clock.at
        refused, draft = state.play(status, detail, clock, sensitive)
        ended_at = clock.at
        run = self._run_row(
            setting, state, run_id, status, detail, model, budget_json, created_at, started_at, ended_at
        )
        run["messages_seen"] = messages_seen
        rows[Run] = [run]
        rows[RunRequest] = [self._request(run_id, created_at)]
        rows[Evidence] = state.new_evidence
        packet_id = self.ids.take(ReviewPacket)  # every ended run has its packet
        rows[ReviewPacket] = [state.packet(packet_id, status, detail, refused, draft, ended_at, created_at)]
        cited = [state.evidence_ids[ref] for ref in (draft or {}).get("evidence", [])]
        return RunRows(rows, status, cited)

    def _run_row(self, setting, state, run_id, status, detail, model, budget_json, created_at, started_at, ended_at):
        return {
            "id": run_id,
            "ticket_id": setting.ticket_id,
            "session_id": setting.session.session_id,
            "subject": setting.subject,
            "body": setting.body,
            "status": status.value,
            "detail": detail.value if detail else "",
            "stop_note": state.stop_note,
            "model_name": model,
            "budget": budget_json,
            "model_requests": state.requests,
            "tool_attempts": state.attempts,
            "validation_errors": state.validation_errors,
            "tokens_used": state.tokens,
            "cost_used_micros": state.cost,
            "last_executed_key": state.last_key,
            "evidence_refs": state.refs,
            "cancel_requested": status == Status.CANCELLED,
            "created_at": created_at,
            "deadline_at": created_at + timedelta(seconds=state.budget.deadline_seconds),
            "started_at": started_at,
            "ended_at": ended_at,
            "version": 2 * state.requests + 2,
        }

    def _request(self, run_id: int, created_at: datetime) -> Row:
        via = VIAS.draw(self.rng)
        by = None if via == RunRequest.Via.INTAKE else self.rng.choice(self.world.reviewers)[0]
        return {
            "id": self.ids.take(RunRequest),
            "run_id": run_id,
            "requested_by_id": by,
            "via": via.value,
            "created_at": created_at,
        }


class _RunState:
    """A run while it is being played: counters, references, and the rows of its steps."""

    def __init__(self, writer: RunWriter, setting: RunSetting, evidence: TicketEvidence, run_id, model, budget, rows):
        self.w, self.rng, self.setting, self.evidence = writer, writer.rng, setting, evidence
        self.run_id, self.model, self.budget, self.rows = run_id, model, budget, rows
        self.requests = self.attempts = self.validation_errors = self.tokens = self.cost = 0
        self.last_key, self.stop_note = "", ""
        self.refs: list[str] = []
        self.evidence_ids: dict[str, int] = {}
        self.new_evidence: list[Row] = []
        self.executed: list[tuple[str, dict]] = []
        self.packet_attempts: list[dict[str, Any]] = []

    # --- the calls this ticket invites ------------------------------------------------------

    def calls(self) -> list[tuple[str, dict]]:
        s = self.setting
        calls: list[tuple[str, dict[str, Any]]] = []
        if s.job is not None and s.session.verified:
            calls.append(("read_job_status", {"job_id": s.job[0]}))
        calls.append(("search_docs", {"query": self.rng.choice(s.topic.queries), "max_results": 3}))
        if s.topic.service:
            calls.append(("read_service_status", {"service": s.topic.service}))
        return calls

    # --- playing a stop reason --------------------------------------------------------------

    def play(self, status: Status, detail: Detail | None, clock: Clock, sensitive: bool):
        """The run's steps up to `status`; returns (the refused proposal, the draft) its packet shows."""
        calls, rng = self.calls(), self.rng
        if status == Status.COMPLETED:
            for call in calls:
                self.call(call, clock, approval="used" if sensitive and call[0] == "read_job_status" else None)
            if self.model != "rules" and rng.random() < 0.06:
                self.unusable(clock)
            self.request(clock, "draft")
            return None, self.draft()
        if status == Status.NEEDS_HELP:
            for call in calls[: rng.randint(0, len(calls))]:
                self.call(call, clock)
            self.request(clock, "handoff")
            return None, None
        if status == Status.NO_PROGRESS:
            self.call(calls[0], clock)
            self.request(clock, f"call {calls[0][0]}")
            return self.refusal(
                calls[0], "It is the same call as the one just made: making it again would learn nothing new."
            ), None
        if status == Status.INVALID_OR_FORBIDDEN:
            return self.refused(detail, calls, clock, sensitive), None
        if status == Status.TOOL_LIMIT:
            i = 0
            while self.attempts < self.budget.max_tool_attempts:
                self.call(calls[i % len(calls)], clock, fail=i % 2 == 1)
                i += 1
            last = calls[0]
            self.request(clock, f"call {last[0]}")
            return self.refusal(last, "Every tool attempt in the budget was already spent."), None
        if status == Status.MODEL_LIMIT:
            while self.requests < self.budget.max_model_requests:
                if self.attempts < self.budget.max_tool_attempts and rng.random() < 0.6:
                    self.call(calls[self.requests % len(calls)], clock, fail=rng.random() < 0.3)
                else:
                    self.unusable(clock)
            return None, None
        if status == Status.DEADLINE:
            for call in calls[: rng.randint(0, len(calls) - 1)]:
                self.call(call, clock)
            self.request(clock, "", outcome=ModelRequest.Outcome.DEADLINE, seconds=self.budget.deadline_seconds / 2)
            if sensitive:
                self.approval(calls[0], clock, Approval.State.EXPIRED)
            return None, None
        if status == Status.MODEL_ERROR:
            for call in calls[: rng.randint(0, 2)]:
                self.call(call, clock)
            assert detail is not None
            outcome = detail.value  # the request's outcome is named as the detail is
            self.request(clock, "", outcome=outcome)
            self.stop_note = {
                "error": "provider said 500",
                "timeout": "no reply in 10 s",
                "usage_overrun": "output 1312 > 1000",
            }[outcome]
            return None, None
        if status in (Status.TOKEN_LIMIT, Status.COST_LIMIT):
            for call in calls:
                self.call(call, clock)
            self.unusable(clock)
            return None, None
        if status == Status.CANCELLED:
            for call in calls[: rng.randint(0, 1)]:
                self.call(call, clock)
            self.stop_note = "cancelled by staff"
            return None, None
        raise ValueError(f"no way to play {status}")

    def refused(self, detail: Detail | None, calls, clock: Clock, sensitive: bool) -> dict[str, Any]:
        for call in calls[: self.rng.randint(0, len(calls) - 1)]:
            if call[0] != "read_job_status" or detail != Detail.APPROVAL_DENIED:
                self.call(call, clock)
        if detail == Detail.MULTIPLE_CALLS:
            self.request(clock, "2 calls")
            return refusal_of_calls(
                [{"tool": t, "args": a} for t, a in calls[:2]] or [{"tool": "search_docs", "args": {}}] * 2
            )
        if detail == Detail.UNKNOWN_TOOL:
            self.request(clock, "call delete_workspace")
            *others, last = TOOLS
            return self.refusal(
                ("delete_workspace", {}),
                f"There is no tool named “delete_workspace”; the tools are {', '.join(others)} and {last}.",
            )
        if detail == Detail.BAD_ARGUMENTS:
            self.request(clock, "call search_docs")
            self.stop_note = "query: String should have at least 1 character"
            return self.refusal(
                ("search_docs", {"query": ""}), f"The arguments do not fit search_docs: {self.stop_note}."
            )
        if detail == Detail.APPROVAL_DENIED and self.setting.job is not None:
            call = ("read_job_status", {"job_id": self.setting.job[0]})
            self.request(clock, "call read_job_status")
            self.approval(call, clock, Approval.State.DENIED)
            self.stop_note = "denied by a supervisor"
            return self.refusal(call, "A supervisor denied the call: the job holds another customer's data.")
        job = f"J-{self.rng.randint(100, 99999)}"
        self.request(clock, "call read_job_status")
        reason = f"{job} does not exist." if self.rng.random() < 0.5 else f"{job} belongs to another account."
        return self.refusal(("read_job_status", {"job_id": job}), reason)

    # --- steps -----------------------------------------------------------------------------------

    def request(self, clock: Clock, proposal: str, *, outcome: str = "ok", seconds: float | None = None) -> None:
        """One model request: reserved, answered (or not), charged."""
        rng, llm = self.rng, self.model != "rules"
        if seconds is None:
            seconds = rng.lognormvariate(math.log(1.8), 0.5) if llm else rng.uniform(0.001, 0.04)
        started, finished, ms = clock.spend(seconds)
        self.requests += 1
        tokens_in: int | None = int(1200 + 900 * self.requests + rng.uniform(-300, 300)) if llm else 0
        tokens_out: int | None = int(rng.uniform(60, 500)) if llm else 0
        charged = (tokens_in or 0) + (tokens_out or 0)
        price_in, price_out = float(self.budget.input_per_mtok_usd), float(self.budget.output_per_mtok_usd)
        cost = math.ceil((tokens_in or 0) * price_in + (tokens_out or 0) * price_out)
        if outcome in ("deadline", "timeout"):
            charged, cost, tokens_in, tokens_out = RESERVED_TOKENS, self.budget.reserved_cost_per_request, None, None
        self.tokens, self.cost = self.tokens + charged, self.cost + cost
        self.rows[ModelRequest].append(
            {
                "id": self.w.ids.take(ModelRequest),
                "run_id": self.run_id,
                "seq": self.requests,
                "reserved_tokens": RESERVED_TOKENS,
                "reserved_cost_micros": self.budget.reserved_cost_per_request,
                "input_tokens": tokens_in,
                "output_tokens": tokens_out,
                "charged_tokens": charged,
                "charged_cost_micros": cost,
                "outcome": outcome,
                "proposal": proposal,
                "validation_error": "the reply was neither one call nor a draft" if outcome == "malformed" else "",
                "error": {"error": "provider said 500", "timeout": "no reply in 10 s"}.get(outcome, ""),
                "started_at": started,
                "finished_at": finished,
                "latency_ms": ms,
            }
        )

    def unusable(self, clock: Clock) -> None:
        """A reply the loop could not use: a validation error, shown to the model, and the loop goes on."""
        self.request(clock, "malformed", outcome=ModelRequest.Outcome.MALFORMED)
        self.validation_errors += 1
        self.observe(Observation.Kind.VALIDATION_ERROR, "Your reply was neither one tool call nor a draft.", clock)

    def call(self, call: tuple[str, dict], clock: Clock, *, fail: bool = False, approval: str | None = None) -> None:
        """A model request proposing `call`, then its dispatch (a transient failure now and then retried)."""
        tool, args = call
        self.request(clock, f"call {tool}")
        if approval:
            self.approval(call, clock, Approval.State.USED)
        if not fail and self.rng.random() < 0.03 and self.attempts + 2 <= self.budget.max_tool_attempts:
            self.attempt(call, clock, "transient_error")
            self.attempt(call, clock, "ok", retry=1)
        else:
            self.attempt(call, clock, "error" if fail else "ok")
        self.last_key = call_key(tool, args)

    def attempt(self, call: tuple[str, dict], clock: Clock, outcome: str, *, retry: int = 0) -> None:
        tool, args = call
        started, finished, ms = clock.spend(self.rng.uniform(0.01, 0.4))
        self.attempts += 1
        key = call_key(tool, args)
        evidence_id, excerpt, error = None, "", ""
        if outcome == "ok":
            content, source = self.result(call)
            evidence_id, ref = self.evidence_of(tool, args, key, content, source, finished)
            excerpt = content[:500]
        else:
            error = (
                "the job service did not answer" if outcome == "transient_error" else f"{tool} failed: upstream error"
            )
            self.observe(Observation.Kind.TOOL_FAILURE, f"{tool} failed: {error}", clock)
        self.rows[ToolAttempt].append(
            {
                "id": self.w.ids.take(ToolAttempt),
                "run_id": self.run_id,
                "seq": self.attempts,
                "call_id": "" if self.model == "rules" else f"call_{self.run_id}_{self.attempts}",
                "tool": tool,
                "args": args,
                "call_key": key,
                "retry_number": retry,
                "outcome": outcome,
                "result_excerpt": excerpt,
                "error": error,
                "evidence_id": evidence_id,
                "started_at": started,
                "finished_at": finished,
                "latency_ms": ms,
            }
        )
        self.packet_attempts.append(
            {
                "seq": self.attempts,
                "tool": tool,
                "args": args,
                "outcome": outcome,
                "call_id": None if self.model == "rules" else f"call_{self.run_id}_{self.attempts}",
                "evidence": f"E{self.evidence_number(evidence_id)}" if evidence_id else None,
                "error": error or None,
            }
        )

    def result(self, call: tuple[str, dict]) -> tuple[str, str]:
        tool, args = call
        if tool == "read_job_status":
            assert self.setting.job is not None  # a job is looked up only on a ticket that names one
            return self.setting.job[1], args["job_id"]
        if tool == "search_docs":
            return self.w.world.searches[args["query"]]
        return self.w.world.services[args["service"]]

    def evidence_of(self, tool, args, key, content, source, at) -> tuple[int, str]:
        """The ticket's evidence item for this result: the identical one again, else a new number."""
        digest = evidence_content_hash(tool=tool, args_key=key, content=content)
        found = self.evidence.numbers.get(digest)
        if found is None:
            number = len(self.evidence.numbers) + 1
            row = {
                "id": self.w.ids.take(Evidence),
                "ticket_id": self.setting.ticket_id,
                "number": number,
                "tool": tool,
                "args": args,
                "content": content,
                "content_hash": digest,
                "source_ref": source[:200],
                "captured_at": at,
                "run_id": self.run_id,
            }
            self.evidence.numbers[digest] = number
            self.evidence.rows.append(row)
            self.new_evidence.append(row)
            found = number
        row_id = self.evidence.rows[found - 1]["id"]
        ref = f"E{found}"
        if ref not in self.refs:
            self.refs.append(ref)
        self.evidence_ids[ref] = row_id
        return row_id, ref

    def evidence_number(self, evidence_id: int) -> int:
        return next(row["number"] for row in self.evidence.rows if row["id"] == evidence_id)

    def observe(self, kind: str, text: str, clock: Clock) -> None:
        self.rows[Observation].append(
            {
                "id": self.w.ids.take(Observation),
                "run_id": self.run_id,
                "kind": kind,
                "text": text,
                "created_at": clock.at,
            }
        )

    def approval(self, call: tuple[str, dict], clock: Clock, state: str) -> None:
        """A supervisor's answer to a sensitive lookup (or none, for an expired one)."""
        tool, args = call
        requested = clock.at
        wait = self.rng.uniform(30, 600)
        decided = state in (Approval.State.USED, Approval.State.DENIED)
        if decided:
            clock.spend(wait)
        by = self.rng.choice(self.w.world.supervisors)[1] if decided else ""
        self.rows[Approval].append(
            {
                "id": self.w.ids.take(Approval),
                "run_id": self.run_id,
                "tool": tool,
                "args": args,
                "call_key": call_key(tool, args),
                "state": state,
                "requested_at": requested,
                "decided_at": clock.at if decided else None,
                "decided_by": by,
                "reason": f"{args.get('job_id', tool)} is marked sensitive: a supervisor approves each lookup",
                "note": "the job holds another customer's data" if state == Approval.State.DENIED else "",
            }
        )

    def refusal(self, call: tuple[str, dict], reason: str) -> dict[str, Any]:
        tool, args = call
        call_id = None if self.model == "rules" else f"call_{self.run_id}_x"
        return {"tool": tool, "args": args, "id": call_id, "reason": reason}

    # --- the packet -----------------------------------------------------------------------------

    def draft(self) -> dict[str, Any]:
        topic, refs = self.setting.topic, list(self.refs)
        parts = []
        for ref in refs:
            parts.append(f"{_finding(topic, self.setting.job)} [{ref}]")
        investigator = (
            "the rule-based investigator (rules, not a language model)" if self.model == "rules" else self.model
        )
        summary = " ".join(dict.fromkeys(parts)) + f" Prepared by {investigator}."
        questions = self.rng.sample(OPEN_QUESTIONS, self.rng.randint(0, 2))
        return {"summary": summary, "evidence": refs, "open_questions": questions}

    def packet(self, packet_id, status, detail, refused, draft, ended_at, created_at) -> Row:
        found = bool(self.refs)
        reply = ""
        if draft is not None and found and self.rng.random() < 0.85:
            reply = REPLY.format(finding=_finding(self.setting.topic, self.setting.job))
        elif status == Status.NEEDS_HELP and found:
            reply = HOLDING_REPLY
        budget = self.budget
        return {
            "id": packet_id,
            "run_id": self.run_id,
            "summary": draft["summary"] if draft else None,
            "evidence_refs": draft["evidence"] if draft else list(self.refs),
            "attempts": self.packet_attempts,
            "open_questions": draft["open_questions"] if draft else [],
            "stop_reason": status.value,
            "detail": detail.value if detail else "",
            "stop_note": self.stop_note,
            "refused": refused,
            "budget_spent": {
                "model_requests": [self.requests, budget.max_model_requests],
                "tool_attempts": [self.attempts, budget.max_tool_attempts],
                "tokens": [self.tokens, budget.max_total_tokens],
                "cost_micros": [self.cost, budget.max_cost_micros],
                "seconds": [round((ended_at - created_at).total_seconds(), 3), budget.deadline_seconds],
            },
            "reply": reply,
            "created_at": ended_at,
            "run_created_at": created_at,
            "review_state": ReviewPacket.ReviewState.PENDING.value,  # the ticket's story settles it
        }


OPEN_QUESTIONS = (
    "Did the customer's role change recently? The record shows only the current role.",
    "Is the problem related to the recent change the customer mentions, or only coincident with it?",
    "Which of the customer's integrations sends these requests?",
    "Has the customer tried again since?",
)
REPLY = (
    "Hello,\n\nWe looked into this for you. {finding}\n\n"
    "If you have any questions, reply to this message and we will look further.\n\nBest regards,"
)
HOLDING_REPLY = (
    "Hello,\n\nThank you for your message. A colleague is looking into this and will reply soon.\n\nBest regards,"
)


def _finding(topic: Topic, job) -> str:
    text = DOC_SENTENCES[topic.code]
    return f"Job {job[0]} failed; {text}" if job else text


@cache
def _budget(price_in: str, price_out: str, approval: bool) -> tuple[Budget, JsonText]:
    """The budget a run of this model starts with (the approval deadline when a lookup may wait), and its JSON."""
    budget = Budget.from_mapping(
        {
            "input_per_mtok_usd": price_in,
            "output_per_mtok_usd": price_out,
            **({"deadline_seconds": APPROVAL_DEADLINE} if approval else {}),
        }
    )
    return budget, JsonText(json.dumps(budget.as_dict()))


def _detail(status: Status, setting: RunSetting, rng: random.Random) -> Detail | None:
    if status == Status.INVALID_OR_FORBIDDEN:
        detail = REFUSALS.draw(rng)
        if detail == Detail.APPROVAL_DENIED and not (setting.job and setting.session.verified):
            return Detail.FORBIDDEN
        return detail
    if status == Status.MODEL_ERROR:
        return MODEL_ERRORS.draw(rng)
    return None


def _model(status: Status, detail: Detail | None, rng: random.Random) -> tuple[str, str, str]:
    """A model that can end this way: the rules investigator never errs, loops, or proposes a wrong call."""
    llm_only = status in MODEL_ONLY or detail not in (None, Detail.FORBIDDEN, Detail.APPROVAL_DENIED)
    return (LANGUAGE_MODELS if llm_only else MODELS).draw(rng)
