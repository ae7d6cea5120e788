"""Reads for the staff pages and the API: a run's timeline, its evidence with sources, its budget bars."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeAlias

from django.db.models import TextChoices
from django.urls import reverse
from django.utils import timezone
from pydantic import BaseModel, ConfigDict, Field, computed_field

from engine.budgets import dollars
from engine.models import ReviewPacket, Run
from engine.statuses import STOP_EXPLANATIONS, Detail, Status
from kit.sources import cut_excerpt, followable_url, suspected_injection
from providers.base import BuiltInModel
from tickets.models import DocumentRevision, Evidence
from tools.base import ResultView
from tools.registry import TOOLS

DETAIL_EXPLANATIONS: dict[str, str] = {
    Detail.MULTIPLE_CALLS: "{actor} asked for several calls at once; only one per reply is allowed.",
    Detail.UNKNOWN_TOOL: "{actor} asked for a tool that does not exist.",
    Detail.BAD_ARGUMENTS: "The arguments did not fit the tool's schema.",
    Detail.CALL_ID_CONFLICT: "{actor} reused a call id for a different call.",
    Detail.FORBIDDEN: "{actor} proposed a lookup that was refused for this customer's session; nothing was"
    " dispatched for it.",
    Detail.APPROVAL_DENIED: "A supervisor denied the lookup the run was waiting on. Nothing was dispatched for it.",
    Detail.ERROR: "The model provider returned an error.",
    Detail.TIMEOUT: "The model took longer than the operation timeout.",
    Detail.USAGE_OVERRUN: "The model reported more tokens than a request may use.",
}
# Details that say all the status would: their sentence replaces the status's ("proposed something not allowed"
# does not describe a supervisor's denial, nor a lookup of a job that does not exist).
DETAIL_SAYS_ALL = frozenset({Detail.FORBIDDEN, Detail.APPROVAL_DENIED})
# Names of a stop whose detail changes what happened; the others read "<status> (<detail>)".
DETAIL_LABELS: dict[str, str] = {
    Detail.FORBIDDEN: "Refused a lookup",
    Detail.APPROVAL_DENIED: "Lookup denied by a supervisor",
}


def investigator(model_name: str) -> str:
    """Who proposed a run's steps, in the words staff read."""
    return BuiltInModel.RULES.label if model_name == BuiltInModel.RULES else "the model"


def _say(template: str, actor: str) -> str:
    text = template.format(actor=actor)
    return text[:1].upper() + text[1:]


def stop_explanation(status: str, detail: str = "", note: str = "", *, model_name: str = "") -> str:
    """The stop reason in plain words, naming the investigator that ran."""
    if status == Status.WAITING_APPROVAL:
        return "The run is waiting for a supervisor to approve or deny a lookup; its deadline keeps running."
    if status in (Status.QUEUED, Status.RUNNING):
        return "The run is still going."
    actor = investigator(model_name)
    parts = [] if detail in DETAIL_SAYS_ALL else [_say(STOP_EXPLANATIONS.get(Status(status), status), actor)]
    if detail:
        parts.append(_say(DETAIL_EXPLANATIONS.get(detail, detail), actor))
    if note:
        parts.append(f"Its reason: {note}" if status == Status.NEEDS_HELP else f"Note: {note}")
    return " ".join(parts)


def stop_label(status: str, detail: str = "") -> str:
    """The stop reason's name in plain words, e.g. "Refused a proposal (a tool that does not exist)"."""
    if status == Status.INVALID_OR_FORBIDDEN and detail in DETAIL_LABELS:
        return DETAIL_LABELS[detail]
    label = Status(status).label if status in Status.values else status
    if detail:
        label += f" ({Detail(detail).label if detail in Detail.values else detail})"
    return label


class StepKind(TextChoices):
    MODEL_REQUEST = "model_request", "model request"
    TOOL_ATTEMPT = "tool_attempt", "tool attempt"


@dataclass(frozen=True)
class Step:
    kind: StepKind
    seq: int
    started_at: datetime
    finished_at: datetime | None
    latency_ms: int | None
    outcome: str
    what: str
    reserved_tokens: int | None = None
    reserved_cost_micros: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    charged_tokens: int | None = None
    charged_cost_micros: int | None = None
    evidence: str | None = None
    error: str = ""

    @property
    def is_model_request(self) -> bool:
        return self.kind == StepKind.MODEL_REQUEST

    def as_dict(self) -> dict[str, Any]:
        return {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in self.__dict__.items()}


def run_timeline(*, run: Run) -> list[Step]:
    """Every model request and tool attempt of the run, in the order they started."""
    steps = [
        Step(
            StepKind.MODEL_REQUEST,
            r.seq,
            r.started_at,
            r.finished_at,
            r.latency_ms,
            r.outcome,
            r.proposal or r.validation_error[:120] or "",
            r.reserved_tokens,
            r.reserved_cost_micros,
            r.input_tokens,
            r.output_tokens,
            r.charged_tokens,
            r.charged_cost_micros,
            error=r.error or r.validation_error,
        )
        for r in run.model_request_rows.all()
    ]
    steps += [
        Step(
            StepKind.TOOL_ATTEMPT,
            a.seq,
            a.started_at,
            a.finished_at,
            a.latency_ms,
            a.outcome,
            f"{a.tool} {json.dumps(a.args, sort_keys=True)}" + (f" (retry {a.retry_number})" if a.retry_number else ""),
            evidence=a.evidence.ref if a.evidence else None,
            error=a.error,
        )
        for a in run.attempts.select_related("evidence")
    ]
    order = {StepKind.MODEL_REQUEST: 0, StepKind.TOOL_ATTEMPT: 1}
    return sorted(steps, key=lambda s: (s.started_at, order[s.kind], s.seq))


# What an evidence item's source is, by the tool that read it (each tool's view names its kind), or "other".
if TYPE_CHECKING:
    # The members are made from the tools' views as the tools load, which no type checker can follow;
    # statically a kind is the string it is (each member is a str). Pydantic and the API schema see the
    # TextChoices below.
    SourceKind: TypeAlias = str
else:
    SourceKind = TextChoices(
        "SourceKind",
        [(kind.upper(), kind) for kind in dict.fromkeys([*(tool.view.kind for tool in TOOLS.values()), "other"])],
    )
    SourceKind.__doc__ = "What an evidence item's source is, by the tool that read it."
OTHER_TOOL = ResultView()  # a tool no longer in the table: its result shown as recorded


class DocumentView(BaseModel):
    """One document of a search result, as a source: which revision, a link to it, what it says."""

    model_config = ConfigDict(frozen=True)

    code: str
    revision: str
    title: str
    url: str = Field(description="The admin page of this revision; empty when the revision is gone.")
    public_url: str = Field(description="Where readers find the document (its help center page); empty when none.")
    excerpt: str
    injection: str | None = Field(description="The phrase that addresses the agent, as written.")

    @computed_field(description="The excerpt addresses the agent (a suspected prompt injection).")  # type: ignore[prop-decorator]  # mypy types no decorated property (python/mypy#1362)
    @property
    def suspected_injection(self) -> bool:
        return self.injection is not None


class EvidenceView(BaseModel):
    """One evidence item as staff see it, on the staff pages and in the API (the same fields, the same names)."""

    model_config = ConfigDict(frozen=True)

    ref: str
    tool: str
    args: dict[str, Any]
    source_kind: SourceKind
    source: str
    excerpt: str
    truncated: bool
    captured_at: datetime
    documents: tuple[DocumentView, ...] = Field((), description="A search result's documents, each on its own.")
    injection_phrase: str | None = Field(None, description="The phrase that addresses the agent, as written.")

    @computed_field(description="Some text of this source addresses the agent.")  # type: ignore[prop-decorator]  # mypy types no decorated property (python/mypy#1362)
    @property
    def suspected_injection(self) -> bool:
        return self.injection_phrase is not None

    @property
    def injection(self) -> str | None:
        """The phrase, under the name a document's view gives it."""
        return self.injection_phrase


def _view(tool: str) -> ResultView:
    return TOOLS[tool].view if tool in TOOLS else OTHER_TOOL


def evidence_view(e: Evidence, revision_urls: dict[tuple[str, str], str] | None = None) -> EvidenceView:
    """How staff see `e`, as its tool's view shows it. A result that quotes documents is checked for text
    addressing the agent in their excerpts only; any other, in all it holds."""
    view, content = _view(e.tool), _content(e)
    documents = _documents(view, content, revision_urls or {})
    injection = next((d.injection for d in documents if d.injection), None) or (
        None if view.cites_documents else suspected_injection(e.content)
    )
    return EvidenceView(
        ref=e.ref,
        tool=e.tool,
        args=e.args,
        source_kind=SourceKind(view.kind),
        source=view.source(e.source_ref),
        excerpt=_excerpt(view, e, content),
        truncated=e.truncated,
        captured_at=e.captured_at,
        documents=documents,
        injection_phrase=injection,
    )


def _content(e: Evidence) -> dict[str, Any] | None:
    try:
        content = json.loads(e.content)
    except ValueError:
        return None  # cut at the result limit: shown as text
    return content if isinstance(content, dict) else None


def _documents(
    view: ResultView, content: dict[str, Any] | None, urls: dict[tuple[str, str], str]
) -> tuple[DocumentView, ...]:
    cited = view.documents(content) if content is not None and view.cites_documents else ()
    return tuple(
        DocumentView(
            code=d.code,
            revision=d.revision,
            title=d.title,
            url=urls.get((d.code, d.revision), ""),
            public_url=followable_url(d.url),
            excerpt=cut_excerpt(d.excerpt),
            injection=suspected_injection(d.excerpt),
        )
        for d in cited
    )


def _excerpt(view: ResultView, e: Evidence, content: dict[str, Any] | None, width: int = 400) -> str:
    if content is None or view is OTHER_TOOL:
        return cut_excerpt(e.content, width)
    return view.excerpt(content, width)


def evidence_for(*, ticket_id: int, refs: list[str]) -> list[EvidenceView]:
    """The ticket's evidence items named by `refs`, in that order, with links to the document revisions they cite."""
    numbers = [int(r[1:]) for r in refs if r[:1] == "E" and r[1:].isdigit()]
    found = {e.number: e for e in Evidence.objects.filter(ticket_id=ticket_id, number__in=numbers)}
    items = [found[n] for n in numbers if n in found]
    urls = revision_urls([e.source_ref for e in items if _view(e.tool).cites_documents])
    return [evidence_view(e, urls) for e in items]


def revision_urls(source_refs: list[str]) -> dict[tuple[str, str], str]:
    """(document code, "rN") -> the admin page of that revision, for search results' "CODE@rN, ..." sources."""
    wanted = {tuple(s.strip().split("@", 1)) for ref in source_refs for s in ref.split(",") if "@" in s}
    if not wanted:
        return {}
    revisions = DocumentRevision.objects.filter(document__code__in={code for code, _ in wanted})
    return {
        (code, f"r{number}"): reverse("admin:tickets_documentrevision_change", args=[pk])
        for pk, code, number in revisions.values_list("pk", "document__code", "number")
        if (code, f"r{number}") in wanted
    }


@dataclass(frozen=True)
class Bar:
    label: str
    used: float
    limit: float
    unit: str = ""

    @property
    def percent(self) -> int:
        if self.limit <= 0:
            return 100 if self.used else 0
        return min(int(round(100 * self.used / self.limit)), 100)

    @property
    def shown(self) -> str:
        """ "used of limit" in the unit a person reads: dollars for money."""
        if self.unit == "micro-dollars":
            return f"{dollars(int(self.used))} of {dollars(int(self.limit))}"
        return f"{self.used:,g}{self.unit} of {self.limit:,g}{self.unit}"

    def as_dict(self) -> dict[str, Any]:
        return {"label": self.label, "used": self.used, "limit": self.limit, "percent": self.percent}


def budget_bars(*, run: Run, now: datetime | None = None) -> list[Bar]:
    budget = run.get_budget()
    end = run.ended_at or now or timezone.now()
    elapsed = round(max((end - run.created_at).total_seconds(), 0.0), 1)
    return [
        Bar("Model requests", run.model_requests, budget.max_model_requests),
        Bar("Tool attempts", run.tool_attempts, budget.max_tool_attempts),
        Bar("Tokens", run.tokens_used + run.tokens_reserved, budget.max_total_tokens),
        Bar("Cost", run.cost_used_micros + run.cost_reserved_micros, budget.max_cost_micros, "micro-dollars"),
        Bar("Time", min(elapsed, budget.deadline_seconds), budget.deadline_seconds, " s"),
    ]


def packet_of(run: Run) -> ReviewPacket | None:
    try:
        return run.packet
    except ReviewPacket.DoesNotExist:
        return None


def spent_rows(budget_spent: dict[str, Any]) -> list[tuple[str, str]]:
    """A packet's budget spent, in the words and units a person reads (money in dollars)."""

    def pair(key: str) -> tuple[Any, Any]:
        value = budget_spent.get(key) or [0, 0]
        return value[0], value[1]

    (requests, max_requests), (attempts, max_attempts) = pair("model_requests"), pair("tool_attempts")
    (tokens, max_tokens), (cost, max_cost), (seconds, deadline) = pair("tokens"), pair("cost_micros"), pair("seconds")
    return [
        ("Model requests", f"{requests} of {max_requests}"),
        ("Tool attempts", f"{attempts} of {max_attempts}"),
        ("Tokens", f"{tokens:,} of {max_tokens:,}"),
        ("Cost", f"{dollars(int(cost))} of {dollars(int(max_cost))}"),
        ("Time", f"{seconds:g} s of {deadline:g} s"),
    ]
