"""Typed shapes at the loop's boundaries: tool arguments and drafts. Pure, no ORM.

Tool arguments are first normalized (`normalize_args`), then validated by the
tool's schema, which rejects unknown names and wrong types, fills defaults and
clamps `max_results`. The result of both steps is "the normalized arguments".
"""
from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from django.db.models import TextChoices
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator


class ToolName(TextChoices):
    """The tools of the dispatch table (tools.registry.TOOLS), by the names the model calls them."""

    SEARCH_DOCS = "search_docs"
    READ_JOB_STATUS = "read_job_status"
    READ_SERVICE_STATUS = "read_service_status"


class ServiceName(TextChoices):
    """The services `read_service_status` may be asked about (CONFORMANCE §4)."""

    EXPORT = "export"
    API = "api"
    AUTH = "auth"
    BILLING = "billing"


SERVICES = tuple(ServiceName.values)


CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")


def storable(text: str) -> str:
    """Model-written text as the database can keep it: PostgreSQL text cannot hold NUL."""
    return text.replace("\x00", "\ufffd")


class ToolArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    @field_validator("*")
    @classmethod
    def _printable(cls, value: Any) -> Any:
        if isinstance(value, str) and CONTROL_CHARACTERS.search(value):
            raise ValueError("control characters are not allowed")
        return value


class SearchDocsArgs(ToolArgs):
    """Search the public documentation."""

    query: Annotated[str, StringConstraints(min_length=1, max_length=200)] = Field(
        description="What to look for (1-200 characters)."
    )
    max_results: int = Field(3, description="How many documents to return (1-5, default 3).")

    @field_validator("max_results")
    @classmethod
    def _clamp(cls, value: int) -> int:
        if value < 1:
            raise ValueError("max_results must be at least 1")
        return min(value, 5)


class ReadJobStatusArgs(ToolArgs):
    """Read the status of one of the customer's jobs."""

    job_id: Annotated[str, StringConstraints(pattern=r"^J-[0-9]{1,12}$")] = Field(
        description="The job id, J- followed by 1-12 digits."
    )


class ReadServiceStatusArgs(ToolArgs):
    """Read a service's status and recent incidents."""

    service: Literal[SERVICES] = Field(description="The service name.")  # strict: a plain string, not the enum


# Per tool, how each string argument is normalized after trimming and collapsing whitespace.
_CASE_RULES: dict[str, dict[str, Any]] = {
    ToolName.SEARCH_DOCS: {"query": str.casefold},
    ToolName.READ_JOB_STATUS: {"job_id": str.upper},
    ToolName.READ_SERVICE_STATUS: {"service": str.lower},
}

ARG_SCHEMAS: dict[str, type[ToolArgs]] = {
    ToolName.SEARCH_DOCS: SearchDocsArgs,
    ToolName.READ_JOB_STATUS: ReadJobStatusArgs,
    ToolName.READ_SERVICE_STATUS: ReadServiceStatusArgs,
}


def normalize_args(tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """Trim and collapse every string; apply the tool's case rule. Non-strings are left for validation."""
    rules = _CASE_RULES.get(tool, {})
    out: dict[str, Any] = {}
    for name, value in args.items():
        if isinstance(value, str):
            value = " ".join(value.split())
            if name in rules:
                value = rules[name](value)
        out[name] = value
    return out


def canonical_json(value: Any) -> str:
    """The one text form used for hashing, comparing and measuring results and arguments."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def call_key(tool: str, args: dict[str, Any]) -> str:
    """Identity of a call: same tool and same normalized arguments."""
    return canonical_json({"tool": tool, "args": args})


class DraftSchema(BaseModel):
    """A proposed review packet."""

    model_config = ConfigDict(extra="forbid", strict=True)

    summary: str = Field(description="What was found, citing evidence as E1, E2, … (at most 2000 characters).")
    evidence: list[str] = Field(min_length=1, description="Evidence references the summary relies on.")
    open_questions: list[str] = Field(description="What could not be established (may be empty).")

    @field_validator("summary")
    @classmethod
    def _summary(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("summary is blank")
        if len(value) > 2000:
            raise ValueError("summary is longer than 2000 characters")
        return value


class HandoffSchema(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    reason: str = Field(description="Why a human is needed.")
