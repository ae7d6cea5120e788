"""What every tool is made of, and the shared pieces its module builds it from. Pure, no ORM.

A tool is one module in this package (`tools/search_docs.py`, ...) that ends by building one
`Tool`: its argument schema, its policy and backends, how staff are shown its result (`ResultView`)
and how a re-read is compared with what was recorded. `tools.registry.TOOLS` collects them; the
engine, the providers and the staff pages ask a `Tool`, never a tool's name, for what differs by tool.

Tool arguments are first normalized (`ToolArgs.normalize`), then validated by the tool's schema,
which rejects unknown names and wrong types, fills defaults and clamps numbers. The result of both
steps is "the normalized arguments".
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from django.conf import settings
from pydantic import BaseModel, ConfigDict, field_validator

from kit.sources import cut_excerpt
from tickets.models import CustomerSession
from tickets.selectors import SessionScope
from tools.compare import Comparison, flat
from tools.lookups import Lookup, ToolResult

CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")


def storable(text: str) -> str:
    """Model-written text as the database can keep it: PostgreSQL text cannot hold NUL."""
    return text.replace("\x00", "\ufffd")


def canonical_json(value: Any) -> str:
    """The one text form used for hashing, comparing and measuring results and arguments."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def call_key(tool: str, args: dict[str, Any]) -> str:
    """Identity of a call: same tool and same normalized arguments."""
    return canonical_json({"tool": tool, "args": args})


# --- arguments ----------------------------------------------------------------------------


class ToolArgs(BaseModel):
    """A tool's arguments. The class docstring is the description a model is offered."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    # How a string argument is normalized after trimming and collapsing whitespace (`{"job_id": str.upper}`).
    case_rules: ClassVar[Mapping[str, Callable[[str], str]]] = {}

    @field_validator("*")
    @classmethod
    def _printable(cls, value: Any) -> Any:
        if isinstance(value, str) and CONTROL_CHARACTERS.search(value):
            raise ValueError("control characters are not allowed")
        return value

    @classmethod
    def normalize(cls, args: dict[str, Any]) -> dict[str, Any]:
        """Trim and collapse every string; apply the case rules. Non-strings are left for validation."""
        out: dict[str, Any] = {}
        for name, value in args.items():
            if isinstance(value, str):
                value = " ".join(value.split())
                if name in cls.case_rules:
                    value = cls.case_rules[name](value)
            out[name] = value
        return out


# --- how staff see a result ------------------------------------------------------------------


@dataclass(frozen=True)
class CitedDocument:
    """A document a result quotes, with the revision it read: staff open it and check its text on its own."""

    code: str
    revision: str
    title: str
    excerpt: str
    url: str = ""  # where readers find it (an imported page's address), as the result recorded it


class ResultView:
    """How staff are shown one evidence item of a tool (engine.timeline); a tool overrides what differs.

    `kind` names the source (a value of engine.timeline.SourceKind); `cites_documents`: the result
    quotes documents, whose excerpts alone are checked for text addressing the agent.
    """

    kind: ClassVar[str] = "other"
    cites_documents: ClassVar[bool] = False

    def source(self, source_ref: str) -> str:
        """The source in words, from the result's `source_ref`."""
        return source_ref

    def excerpt(self, content: dict[str, Any], width: int) -> str:
        return cut_excerpt(canonical_json(content), width)

    def documents(self, content: dict[str, Any]) -> tuple[CitedDocument, ...]:
        return ()


# --- the tool ----------------------------------------------------------------------------------

Policy = Callable[[SessionScope, dict[str, Any]], bool]
Backend = Callable[[SessionScope, dict[str, Any], Lookup], ToolResult]
Comparer = Callable[[dict[str, Any], dict[str, Any], Mapping[str, str] | None], Comparison]


def anyone(scope: SessionScope, args: dict[str, Any]) -> bool:
    return True


def never(scope: SessionScope, args: dict[str, Any]) -> bool:
    return False


def no_reason(scope: SessionScope, args: dict[str, Any]) -> str:
    return ""


def nothing_standing(recorded: dict[str, Any]) -> None:
    return None


def no_session_waits(session: CustomerSession) -> bool:
    return False


@dataclass(frozen=True)
class Tool:
    """One read-only tool, as the loop, the providers and the staff pages use it.

    `policy` authorizes a call against the run's customer session before dispatch; the backend scopes
    its own reads by that session again, so that even a wrong policy cannot leak another account's data.
    `needs_approval`: this call waits for a supervisor. `reads`: what the tool reads, in staff words
    ("the job status service"). `verified_only`: only a verified session is ever allowed a call.
    `refusal_reason`: why a call was refused, for staff only. `may_need_approval`: a run for this session
    may have a call of this tool wait for a supervisor. `compare` says what changed between a recorded
    result and a fresh one; `standing` reads what it needs besides the fresh result (for a search, its
    cited documents as they stand now), or None.
    """

    name: str
    args: type[ToolArgs]
    policy: Policy
    backend: Backend
    reads: str
    view: ResultView = ResultView()
    compare: Comparer = flat
    standing: Callable[[dict[str, Any]], Mapping[str, str] | None] = nothing_standing
    needs_approval: Policy = never
    may_need_approval: Callable[[CustomerSession], bool] = no_session_waits
    refusal_reason: Callable[[SessionScope, dict[str, Any]], str] = no_reason
    verified_only: bool = False

    @property
    def description(self) -> str:
        return (self.args.__doc__ or self.name).strip()


def by_setting(setting: str, **choices: Callable) -> Callable:
    """Calls the function that `settings.<setting>` names, looked up at each call (a backend chosen by setting)."""

    def chosen(*args: Any) -> Any:
        return choices[getattr(settings, setting)](*args)

    chosen.__name__ = f"{setting.lower()}_chosen"
    return chosen
