"""The scenario file format (CONFORMANCE §7): what a scenario says, checked as it is read."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from engine.budgets import COUNT_LIMIT, SECONDS_LIMIT, WrittenNumber
from engine.decisions import describe_validation_error
from tools.registry import TOOLS


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


ToolName = Literal[tuple(str(name) for name in TOOLS)]  # plain strings, so that errors name them as written


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
            raise ScenarioError(
                f"invalid scenario: {where or 'the document'} contains a NUL character (\\u0000), "
                "which the run record cannot keep"
            )
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ScenarioError(f"invalid scenario: {describe_validation_error(exc)}") from None

    def faults_script(self) -> dict[str, list[dict[str, Any] | None]]:
        """The faults as the run record carries them to the dispatcher (what the file wrote, checked)."""
        return {
            tool: [f.model_dump(exclude_defaults=True) if f else None for f in entries]
            for tool, entries in self.faults.items()
        }


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
