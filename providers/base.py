"""The model interface: one method, `request`."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any

from django.db.models import TextChoices

from providers.context import Context


class BuiltInModel(TextChoices):
    """The model names that need no provider: `rules` (the default investigator) and `replay` (scenarios)."""

    RULES = "rules", "the rule-based investigator"
    REPLAY = "replay", "scripted replies"


@dataclass(frozen=True)
class TokenUsage:
    """Tokens as the provider reported them; the loop checks that each is a count before using it.

    `object`, not `int`: a provider (or a scenario) may report "500", 1.5, true or nothing, and the
    value is kept as reported so that the loop, not the adapter, decides what it means.
    """

    input_tokens: object = 0
    output_tokens: object = 0


@dataclass(frozen=True)
class ModelRequestSpec:
    """One request: the curated context, the output cap, and how long it may take."""

    context: Context
    max_output_tokens: int
    timeout_seconds: float
    index: int  # 0-based position of this request among the run's recorded requests


@dataclass(frozen=True)
class ModelResponse:
    """A reply: `payload` is a structured decision (see decisions.parse_reply) or raw text.

    `cut_short` says why the provider stopped the reply before it was complete (cut at the output
    cap, refused, filtered); such a reply is malformed output whatever it holds, since a call or a
    draft in it may be missing what the model meant to write.
    """

    payload: Any
    usage: TokenUsage
    cut_short: str = ""


class ModelError(Exception):
    """A request that failed; `usage` is what the provider reported spending (0 if nothing)."""

    def __init__(self, message: str, *, usage: TokenUsage | None = None, timeout: bool = False):
        super().__init__(message)
        self.usage = usage or TokenUsage()
        self.timeout = timeout


class ModelAdapter(abc.ABC):
    name: str = "model"
    prices: tuple[str, str] = ("0", "0")  # dollars per million input, output tokens

    @abc.abstractmethod
    def request(self, spec: ModelRequestSpec) -> ModelResponse:
        """Send one request and return the reply, or raise ModelError."""

    def input_overhead_bytes(self) -> int:
        """Bytes the adapter sends besides `spec.context.prompt` (tool definitions, framing).

        The context is cut to `max_input_tokens` minus this, so the whole request stays under the cap.
        """
        return 0
