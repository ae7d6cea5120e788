"""What every tool is made of, and the shared pieces its module builds it from. Pure, no ORM.

A tool is one module in this package (`tools/search_docs.py`, ...) that ends by building one
`Tool`: its argument schema, its policy and backends, how staff are shown its result (`ResultView`)
and how a re-read is compared with what was recorded. `tools.registry.TOOLS` collects them; the
engine, the providers and the staff pages ask a `Tool`, never a tool's name, for what differs by tool.

Tool arguments are first normalized (`ToolArgs.normalize`), then validated by the tool's schema,
which rejects unknown names and wrong types, fills defaults and clamps numbers (`ToolArgs.validated`).
The result of both steps is "the normalized arguments". Where the tool's source lists what an
argument may name (the operator's services: `Tool.catalog`), validation also refuses a value the
`Catalog` does not list, naming the values it does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from django.conf import settings
from django.utils.text import slugify
from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

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

CATALOG = "catalog"  # the validation context's key for the Catalog an argument is checked against
NAMES_SHOWN = 50  # a catalog shows a model at most this many names (a status page may list hundreds)


def _key(name: str) -> str:
    return " ".join(name.split()).casefold()


@dataclass(frozen=True)
class Catalog:
    """What an argument may name, as the tool's source lists it now (the operator's services).

    `names` keep the source's spelling and order, each once. A value names an entry by its name or
    by its slug (`management-portal` for "Management Portal", `api-us` for "API (US)"), in any case.
    """

    names: tuple[str, ...]

    @classmethod
    def of(cls, names: Iterable[str]) -> Catalog:
        return cls(tuple(dict.fromkeys(names)))

    def find(self, value: str) -> str | None:
        """The name `value` stands for, by name first, then by slug; None when it names nothing listed."""
        wanted = _key(value)
        by_name = next((n for n in self.names if _key(n) == wanted), None)
        return by_name or next((n for n in self.names if slugify(n, allow_unicode=True) == wanted), None)

    def named_in(self, text: str) -> list[str]:
        """The names a text mentions (by name or slug, in any case, as whole words), in the catalog's order."""
        folded = " ".join(text.split()).casefold()
        return [n for n in self.names if any(_mentions(folded, word) for word in _words_for(n))]

    def shown(self) -> str:
        """The names for a model or a person to read: at most NAMES_SHOWN, then how many more there are."""
        more = len(self.names) - NAMES_SHOWN
        return ", ".join(self.names[:NAMES_SHOWN]) + (f" (and {more} more)" if more > 0 else "")

    def refusal(self, value: str, what: str) -> str:
        """Why `value` is refused: it names no `what` listed; these are (the model reads this and may ask again)."""
        if not self.names:
            return f"no {what} named {value!r} is listed; none is listed at all"
        return f"no {what} named {value!r} is listed; the {what}s are: {self.shown()}"


def _words_for(name: str) -> set[str]:
    return {w for w in (_key(name), slugify(name, allow_unicode=True)) if w}


def _mentions(folded_text: str, word: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(word)}(?!\w)", folded_text) is not None


def catalog_of(info: ValidationInfo) -> Catalog | None:
    """The catalog a validation was given (`ToolArgs.validated`), or None: then any value of the right shape passes."""
    return (info.context or {}).get(CATALOG)


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

    @classmethod
    def validated(cls, args: dict[str, Any], catalog: Catalog | None = None) -> dict[str, Any]:
        """The normalized arguments; raises pydantic's ValidationError. `catalog`: what the tool's source
        lists now, which a listed argument must name (unchecked when None: the source is not known)."""
        return cls.model_validate(cls.normalize(args), context={CATALOG: catalog}).model_dump()

    @classmethod
    def offered_schema(cls, catalog: Catalog | None) -> dict[str, Any]:
        """The JSON schema a model is offered; a tool whose source lists what it may name adds the names."""
        return cls.model_json_schema()


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


def nothing_listed(wait: float | None) -> None:
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
    cited documents as they stand now), or None. `catalog(wait)` is what the tool's source lists for an
    argument to name (read_service_status: the operator's services), or None when it lists nothing or
    could not be read. `wait` > 0: before a model request, how long the source may be waited for (what
    was read a short while ago may stand); 0: for the check of a call, as the source is now where that
    needs no waiting (our own database), else as read last; None: no read at all, as read last.
    """

    name: str
    args: type[ToolArgs]
    policy: Policy
    backend: Backend
    reads: str
    view: ResultView = ResultView()
    compare: Comparer = flat
    standing: Callable[[dict[str, Any]], Mapping[str, str] | None] = nothing_standing
    catalog: Callable[[float | None], Catalog | None] = nothing_listed
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
