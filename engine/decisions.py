"""Parse a model reply and judge a proposal. Pure: no ORM, no I/O.

The loop asks the database what these functions need (receipts, authorization,
the last executed call) through small callables, so the order of the checks
lives here, in one place, and is table-tested.
"""

from __future__ import annotations

from collections.abc import Callable, Container
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from engine.budgets import Budget, Usage, tool_attempts_left
from engine.statuses import Detail, Status, Stop
from providers.answers import DraftSchema, HandoffSchema
from providers.replies import reply_refs, reply_urls, without_markers
from tools.base import CONTROL_CHARACTERS, Catalog, call_key, storable
from tools.registry import TOOLS

# --- what a reply proposes -------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One proposed tool call, as the model wrote it."""

    tool: str
    args: dict[str, Any]
    call_id: str | None = None


@dataclass(frozen=True)
class MultipleCalls:
    count: int
    calls: tuple[Any, ...] = field(default=(), compare=False)  # as written, for the packet


@dataclass(frozen=True)
class DraftProposal:
    raw: Any


@dataclass(frozen=True)
class Handoff:
    reason: str


@dataclass(frozen=True)
class Malformed:
    reason: str


Proposal = Call | MultipleCalls | DraftProposal | Handoff | Malformed

_REPLY_KEYS = ("call", "calls", "draft", "handoff")


def parse_reply(payload: Any) -> Proposal:
    """Turn an adapter's reply payload into exactly one proposal.

    Text is never parsed: it is malformed output. A structured reply is an
    object with exactly one of `call`, `calls`, `draft`, `handoff`.
    """
    if not isinstance(payload, dict):
        return Malformed("the reply is not a structured decision")
    payload = _storable(payload)
    keys = [k for k in _REPLY_KEYS if k in payload]
    if len(keys) != 1:
        return Malformed(f"the reply must hold exactly one of {', '.join(_REPLY_KEYS)}")
    key = keys[0]
    value = payload[key]
    if key == "call":
        return _parse_call(value)
    if key == "calls":
        return _parse_calls(value)
    if key == "draft":
        return DraftProposal(value)
    return _parse_handoff(value)


def _storable(value: Any) -> Any:
    """The payload with every string made storable (NUL cannot be kept by PostgreSQL)."""
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, list):
        return [_storable(v) for v in value]
    if isinstance(value, dict):
        return {_storable(k): _storable(v) for k, v in value.items()}
    return value


def _parse_calls(value: Any) -> Proposal:
    if not isinstance(value, list):
        return Malformed("calls must be a list")
    if not value:
        return Malformed("the list of calls is empty")
    if len(value) > 1:
        return MultipleCalls(len(value), tuple(value))
    return _parse_call(value[0])


def _parse_call(value: Any) -> Proposal:
    if not isinstance(value, dict):
        return Malformed("a call must be an object with tool and args")
    tool = value.get("tool")
    if not isinstance(tool, str) or not tool:
        return Malformed("the call's tool name is missing or not a non-empty string")
    args = value.get("args")
    if not isinstance(args, dict):
        return Malformed("the call's args are missing or not an object")
    call_id = value.get("id")
    if call_id is not None and not _valid_call_id(call_id):
        return Malformed(f"the call's id must be 1-{MAX_CALL_ID} printable characters")
    return Call(tool=tool, args=args, call_id=call_id)


MAX_CALL_ID = 200


def _valid_call_id(call_id: Any) -> bool:
    return isinstance(call_id, str) and 0 < len(call_id) <= MAX_CALL_ID and not CONTROL_CHARACTERS.search(call_id)


def _parse_handoff(value: Any) -> Proposal:
    if isinstance(value, dict):
        try:
            return Handoff(HandoffSchema.model_validate(value).reason)
        except ValidationError:
            return Malformed("a handoff must give a reason")
    if isinstance(value, str):
        return Handoff(value)
    return Malformed("a handoff must give a reason")


# --- drafts ------------------------------------------------------------------


@dataclass(frozen=True)
class Draft:
    summary: str
    evidence: tuple[str, ...]
    open_questions: tuple[str, ...]
    reply: str = ""  # the suggested reply to the customer, as staff read it ("" when none)


def validate_draft(
    raw: Any, known_refs: Container[str], cited_texts: Callable[[tuple[str, ...]], list[str]] | None = None
) -> Draft | str:
    """A valid draft, or the validation error to record.

    A reply cites only evidence the draft cites, and links only to an address that cited evidence holds (an
    article's public url): `cited_texts(refs)` gives the cited items' contents, asked only for a reply with a
    link. Its evidence markers are taken out of the text kept (the customer reads it)."""
    try:
        schema = DraftSchema.model_validate(raw)
    except ValidationError as exc:
        return "invalid draft: " + describe_validation_error(exc)
    cited = tuple(dict.fromkeys(schema.evidence))
    missing = [ref for ref in cited if ref not in known_refs]
    if missing:
        return f"invalid draft: evidence {', '.join(missing)} does not exist on this ticket"
    reply = schema.reply or ""
    uncited = [ref for ref in reply_refs(reply) if ref not in cited]
    if uncited:
        return f"invalid draft: reply: {', '.join(uncited)} is not in the draft's evidence; cite only what it cites"
    urls = reply_urls(reply)
    if urls:
        texts = cited_texts(cited) if cited_texts else []
        unknown = [url for url in urls if not any(url in text for text in texts)]
        if unknown:
            return (
                f"invalid draft: reply: {unknown[0]} is not the address of an article the draft cites;"
                " link only to a cited article's url"
            )
    return Draft(schema.summary, cited, tuple(schema.open_questions), without_markers(reply).strip())


def describe_validation_error(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors())


# --- judging a proposed call --------------------------------------------------


@dataclass(frozen=True)
class NormalizedCall:
    tool: str
    args: dict[str, Any]
    call_id: str | None

    @property
    def key(self) -> str:
        return call_key(self.tool, self.args)


def nothing_listed(tool: str) -> Catalog | None:
    return None


def normalize_call(call: Call, catalog: Callable[[str], Catalog | None] = nothing_listed) -> NormalizedCall | Stop:
    """Unknown tool, then bad arguments; otherwise the call with its normalized arguments.

    `catalog(tool)`: what the tool's source lists for an argument to name (the operator's services),
    asked once the tool is known; a value it does not list is a bad argument. None: not checked.
    """
    tool = TOOLS.get(call.tool)
    if tool is None:
        return Stop(Status.INVALID_OR_FORBIDDEN, Detail.UNKNOWN_TOOL, f"no tool named {call.tool!r}")
    try:
        args = tool.args.validated(call.args, catalog(call.tool))
    except ValidationError as exc:
        return Stop(Status.INVALID_OR_FORBIDDEN, Detail.BAD_ARGUMENTS, describe_validation_error(exc))
    return NormalizedCall(call.tool, args, call.call_id)


@dataclass(frozen=True)
class Dispatch:
    call: NormalizedCall


@dataclass(frozen=True)
class ReuseReceipt:
    call: NormalizedCall


@dataclass(frozen=True)
class AwaitApproval:
    call: NormalizedCall


Verdict = Stop | Dispatch | ReuseReceipt | AwaitApproval


@dataclass(frozen=True)
class CallFacts:
    """What the database knows that judging a call needs; asked lazily, in order.

    `catalog(tool)`: what the tool's source lists for its arguments to name, as `normalize_call` takes it
    (asked first, with the arguments).
    """

    receipt_key: Callable[[str], str | None] = lambda call_id: None
    authorized: Callable[[NormalizedCall], bool] = lambda call: True
    needs_approval: Callable[[NormalizedCall], bool] = lambda call: False
    last_executed_key: str | None = None
    catalog: Callable[[str], Catalog | None] = nothing_listed


def judge_call(call: Call, *, budget: Budget, usage: Usage, time_left: float, facts: CallFacts) -> Verdict:
    """Decide what happens to one proposed call. Order: CONFORMANCE §3."""
    if time_left <= 0:
        return Stop(Status.DEADLINE)
    normalized = normalize_call(call, facts.catalog)
    if isinstance(normalized, Stop):
        return normalized
    if normalized.call_id is not None:
        seen = facts.receipt_key(normalized.call_id)
        if seen is not None:
            if seen == normalized.key:
                return ReuseReceipt(normalized)
            return Stop(Status.INVALID_OR_FORBIDDEN, Detail.CALL_ID_CONFLICT, "call id reused for another call")
    if not facts.authorized(normalized):
        return Stop(Status.INVALID_OR_FORBIDDEN, Detail.FORBIDDEN, "this session may not make this call")
    if normalized.key == facts.last_executed_key:
        return Stop(Status.NO_PROGRESS)
    if tool_attempts_left(budget, usage) == 0:
        return Stop(Status.TOOL_LIMIT)
    if facts.needs_approval(normalized):
        return AwaitApproval(normalized)
    return Dispatch(normalized)
