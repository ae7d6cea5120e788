"""What a provider model is offered and how its reply becomes a decision; shared by the provider adapters.

Tool definitions are generated from the dispatch table (`tools.registry.TOOLS`),
so a model is offered exactly its lookups, plus two decision functions whose
arguments are the loop's own pydantic schemas: `submit_draft` (DraftSchema) and
`hand_off` (HandoffSchema). The instructions name the same lookups, from the same table.
A decision is never dispatched and never spends a tool attempt: it becomes the
reply's draft or handoff, which the loop validates like any other.

The request's size: the loop cuts the context's prompt to `max_input_tokens`
minus `input_overhead_bytes()`, which counts everything else sent as input
(these instructions, the tool definitions, per-message framing, and an
allowance for what the provider adds around them), all in UTF-8 bytes, a bound
that never underestimates tokens.
"""

from __future__ import annotations

import abc
import functools
import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from pydantic import BaseModel

from providers import Provider, endpoint_problem
from providers.answers import DraftSchema, HandoffSchema
from providers.base import ModelAdapter, ModelError, ModelRequestSpec, ModelResponse, TokenUsage
from providers.context import SYSTEM_TEXT, utf8_len
from tools.registry import TOOLS, Catalog

log = logging.getLogger("agentrun.providers")

DRAFT_TOOL = "submit_draft"
HANDOFF_TOOL = "hand_off"
DECISION_TOOLS: dict[str, tuple[type[BaseModel], str]] = {
    DRAFT_TOOL: (
        DraftSchema,
        "Hand in the review packet for staff: a summary citing evidence references (E1, E2, ...), "
        "the references it relies on, what could not be established, and optionally a reply for the customer. "
        "Ends the investigation.",
    ),
    HANDOFF_TOOL: (HandoffSchema, "Hand the ticket to a person, saying why. Ends the investigation."),
}

INSTRUCTIONS = (
    f"Reply by calling exactly one function, never more than one: a lookup ({', '.join(TOOLS)}), "
    f"{DRAFT_TOOL} with the review packet once the evidence supports it, or {HANDOFF_TOOL} "
    "when a person must take over. A reply without a function call is not used."
)
EMPTY_USER_TEXT = "(empty)"  # providers refuse an empty message; a prompt cut to nothing still sends one
MESSAGE_FRAMING_BYTES = 16  # role and chat-template markers around each message


# --- tool definitions -------------------------------------------------------------


@dataclass(frozen=True)
class ToolDef:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments


def tool_definitions() -> tuple[ToolDef, ...]:
    """The lookups of the dispatch table, then the two decisions; nothing else.

    A lookup whose source lists what it may name offers the names this process read last (the engine
    reads them before each model request: `tools.registry.catalogs_read`); nothing is read here.
    """
    listed = tuple((name, catalog) for name, tool in TOOLS.items() if (catalog := tool.catalog(None)) is not None)
    return _tool_definitions(settings.AGENT_JOB_ID_PATTERN, listed)


@functools.lru_cache(maxsize=32)
def _tool_definitions(job_id_pattern: str, listed: tuple[tuple[str, Catalog], ...]) -> tuple[ToolDef, ...]:
    """Built once for each configured shape of what the schemas offer (the job id pattern, the names listed)."""
    catalogs = dict(listed)
    lookups = [
        ToolDef(name, tool.description, _parameters(tool.args.offered_schema(catalogs.get(name))))
        for name, tool in TOOLS.items()
    ]
    decisions = [
        ToolDef(name, text, _parameters(schema.model_json_schema())) for name, (schema, text) in DECISION_TOOLS.items()
    ]
    return tuple(lookups + decisions)


def _parameters(parameters: dict[str, Any]) -> dict[str, Any]:
    """A JSON schema without its titles (they repeat the names and cost input bytes)."""
    parameters.pop("title", None)
    parameters.pop("description", None)
    for prop in parameters.get("properties", {}).values():
        prop.pop("title", None)
    return parameters


def json_text(value: Any) -> str:
    """The compact JSON text whose UTF-8 length is counted against the input cap."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# --- the prompt -----------------------------------------------------------------------


def split_prompt(prompt: str) -> tuple[str, str]:
    """(system text, user text). The context's standing instructions go in the system role, with ours."""
    if prompt.startswith(SYSTEM_TEXT):
        rest = prompt[len(SYSTEM_TEXT) :].lstrip("\n")
        return f"{SYSTEM_TEXT}\n\n{INSTRUCTIONS}", rest or EMPTY_USER_TEXT
    return INSTRUCTIONS, prompt or EMPTY_USER_TEXT


def framing_bytes(wire_tools: Sequence[Mapping[str, Any]], messages: int, allowance: int) -> int:
    """Input bytes besides the prompt: our instructions, the tools, message framing, the provider's allowance."""
    return (
        utf8_len(INSTRUCTIONS)
        + 2
        + utf8_len(EMPTY_USER_TEXT)
        + utf8_len(json_text(list(wire_tools)))
        + messages * MESSAGE_FRAMING_BYTES
        + allowance
    )


# --- the reply ----------------------------------------------------------------------


@dataclass(frozen=True)
class ToolCall:
    """One function call in a reply, as the provider returned it."""

    name: str
    arguments: Any  # the JSON object the model wrote, or its text when that is not JSON
    call_id: str | None = None

    def entry(self) -> dict[str, Any]:
        entry = {"tool": self.name, "args": self.arguments}
        return entry | {"id": self.call_id} if self.call_id else entry


@dataclass(frozen=True)
class WireReply:
    calls: tuple[ToolCall, ...]
    text: str
    usage: TokenUsage | None  # None when the provider reported none
    cut_short: str = ""  # why the provider stopped the reply early (ModelResponse.cut_short), else ""


def cut_at_cap(max_output_tokens: int) -> str:
    return f"the reply was cut off at the output cap ({max_output_tokens} tokens) before it was complete"


def parse_arguments(raw: Any) -> Any:
    """A call's arguments as sent (OpenAI sends JSON text): the object, else the text itself."""
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def reply_payload(calls: Sequence[ToolCall], text: str) -> Any:
    """The reply in `decisions.parse_reply`'s shape; everything that is not one good call is judged there."""
    if not calls:
        return text  # text is never parsed: malformed output
    if len(calls) > 1:
        return {"calls": [call.entry() for call in calls]}
    call = calls[0]
    if isinstance(call.arguments, dict):
        if call.name == DRAFT_TOOL:
            return {"draft": call.arguments}
        if call.name == HANDOFF_TOOL:
            return {"handoff": call.arguments}
    # a lookup, a name that is no tool (unknown_tool), or arguments that are not an object (malformed)
    return {"call": call.entry()}


def usage_from(reported: Any) -> TokenUsage | None:
    """Usage in either wire format's names (prompt/completion or input/output tokens), or None."""
    if hasattr(reported, "model_dump"):  # the SDKs' usage objects
        reported = reported.model_dump()
    if not isinstance(reported, Mapping):
        return None

    def count(*names: str) -> Any:
        # As reported: the loop refuses a value that is not a count, so none is rounded or made one here.
        values = [reported[n] for n in names if reported.get(n) is not None]
        odd = [v for v in values if type(v) is not int]  # bool is not int here either
        return odd[0] if odd else sum(values)

    return TokenUsage(
        count("prompt_tokens", "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"),
        count("completion_tokens", "output_tokens"),
    )


def error_message(body: Any) -> str:
    """The provider's own error message from an error body (`{"error": {"message": ...}}` or flatter)."""
    if isinstance(body, Mapping):
        inner = body.get("error")
        if isinstance(inner, Mapping) and inner.get("message"):
            return str(inner["message"])
        if body.get("message"):
            return str(body["message"])
        if isinstance(inner, str):
            return inner
    return ""


# --- the adapter ---------------------------------------------------------------------


class ToolCallingAdapter(ModelAdapter):
    """The common path of a provider adapter; a subclass speaks one wire format through its SDK.

    `request` sends one system and one user message (the context carries the
    whole state of the run, so no history is replayed), maps the reply's calls
    to a decision, and keeps the provider's call ids. A subclass's `send`
    raises ModelError for every failure, with `timeout=True` for its SDK's timeout.
    """

    framing_allowance_bytes = 0  # what the provider adds around messages and tools, as an upper bound

    def __init__(self, model: str, provider: Provider):
        self.model, self.provider = model, provider
        self.name = f"{provider.family}:{model}"
        self.api_key, self.base_url = provider.api_key(), provider.base_url()

    @abc.abstractmethod
    def wire_tools(self) -> Sequence[Mapping[str, Any]]:
        """The tool definitions in this wire format."""

    @abc.abstractmethod
    def send(self, system: str, user: str, spec: ModelRequestSpec) -> WireReply:
        """One request without retries, waiting at most `spec.timeout_seconds`."""

    def input_overhead_bytes(self) -> int:
        return framing_bytes(self.wire_tools(), 2, self.framing_allowance_bytes)

    def request(self, spec: ModelRequestSpec) -> ModelResponse:
        problem = endpoint_problem(self.provider)
        if problem is not None:
            raise ModelError(problem)
        if not self.api_key:
            raise ModelError(f"no API key: set {self.provider.key_env}")
        system, user = split_prompt(spec.context.prompt)
        log_prompt(self.name, spec.index, system, user)
        try:
            reply = self.send(system, user, spec)
        except ModelError as exc:
            raise ModelError(self.scrub(str(exc)), usage=exc.usage, timeout=exc.timeout) from None
        payload = reply_payload(reply.calls, reply.text)
        # A reply without usage is charged its bound: the input we sent, the whole output cap.
        usage = reply.usage or TokenUsage(
            utf8_len(spec.context.prompt) + self.input_overhead_bytes(), spec.max_output_tokens
        )
        log_reply(self.name, spec.index, payload, usage, reply.cut_short)
        return ModelResponse(payload, usage, reply.cut_short)

    def scrub(self, text: str) -> str:
        """An error text safe to store and show: never the API key, never long."""
        if self.api_key:
            text = text.replace(self.api_key, "[redacted key]")
        return text[:500]

    def failure(self, status: int | None, body: Any, fallback: str) -> ModelError:
        """A provider's error response as a ModelError charging what it reported (0 if nothing)."""
        detail = error_message(body) or fallback
        prefix = (
            f"{self.provider.family} returned HTTP {status}" if status else f"{self.provider.family} request failed"
        )
        reported = body.get("usage") if isinstance(body, Mapping) else None
        return ModelError(f"{prefix}: {detail}", usage=usage_from(reported))


# --- logging, off unless AGENT_LOG_PROMPTS=redacted --------------------------------------

# A block ends only at the closing tag with its own id (agentrun/context.py), or where a cut prompt ends.
_DATA_BLOCK = re.compile(r'<data id="([0-9a-f]+)">.*?(?:</data id="\1">|\Z)', re.DOTALL)


def logging_prompts() -> bool:
    return getattr(settings, "AGENT_LOG_PROMPTS", "off") == "redacted"


def redact(text: str) -> str:
    """The prompt with every data block's content (ticket text, tool results, notes) replaced by its size."""
    return _DATA_BLOCK.sub(lambda m: f"<data>[{utf8_len(m.group(0))} bytes redacted]</data>", text)


def describe(payload: Any) -> str:
    """A reply without its content: which decision, which tools, which argument names."""
    if not isinstance(payload, dict):
        return f"text [{utf8_len(str(payload))} bytes redacted]"
    if "calls" in payload:
        return "calls " + ", ".join(str(c.get("tool")) for c in payload["calls"])
    if "call" in payload:
        args = payload["call"].get("args")
        names = sorted(args) if isinstance(args, dict) else "not an object"
        return f"call {payload['call'].get('tool')} with arguments {names}"
    if "draft" in payload:
        return f"draft citing {payload['draft'].get('evidence')}"
    return "handoff [reason redacted]"


def log_prompt(model: str, index: int, system: str, user: str) -> None:
    # The system text is ours and fixed (and names the delimiters itself): its size is enough.
    if logging_prompts():
        log.info(
            "%s request %d prompt (redacted; system text %d bytes):\n%s",
            model,
            index + 1,
            utf8_len(system),
            redact(user),
        )


def log_reply(model: str, index: int, payload: Any, usage: TokenUsage, cut_short: str = "") -> None:
    if logging_prompts():
        log.info(
            "%s request %d reply (redacted): %s%s; usage %d in, %d out",
            model,
            index + 1,
            describe(payload),
            f" ({cut_short})" if cut_short else "",
            usage.input_tokens,
            usage.output_tokens,
        )
