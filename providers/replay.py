"""The scenario model: replays a list of replies, one per request."""

from __future__ import annotations

import time
from typing import Any

from providers.base import BuiltInModel, ModelAdapter, ModelError, ModelRequestSpec, ModelResponse, TokenUsage

DEFAULT_REPLY_USAGE = {"input_tokens": 500, "output_tokens": 50}
_META_KEYS = ("delay_seconds", "usage")


def _usage(entry: dict[str, Any], default: dict[str, int]) -> TokenUsage:
    """The usage the scenario's provider reports, as written (a side left out is 0).

    Nothing is converted: a value that is not a count ("500", 1.5, true, -3) is what this provider
    reported, and the loop judges it as it judges any provider's; a `usage` that is not an object
    reports no count at all (None on both sides).
    """
    reported = entry.get("usage")
    if reported is None:
        return TokenUsage(**default)
    if not isinstance(reported, dict):
        return TokenUsage(None, None)
    return TokenUsage(reported.get("input_tokens", 0), reported.get("output_tokens", 0))


class ReplayAdapter(ModelAdapter):
    name = BuiltInModel.REPLAY

    def __init__(self, script: list[Any]):
        self.script = script  # as the scenario wrote it: an entry that is not an object is the reply itself

    def request(self, spec: ModelRequestSpec) -> ModelResponse:
        if spec.index >= len(self.script):
            raise ModelError("the replay has no reply left for this request")
        entry = self.script[spec.index]
        if not isinstance(entry, dict):
            return ModelResponse(entry, TokenUsage(**DEFAULT_REPLY_USAGE))
        delay = entry.get("delay_seconds")
        if delay:
            time.sleep(float(delay))
        if "error" in entry:
            raise ModelError(str(entry["error"]), usage=_usage(entry, {}))
        usage = _usage(entry, DEFAULT_REPLY_USAGE)
        if "raw" in entry:
            return ModelResponse(str(entry["raw"]), usage)
        return ModelResponse({k: v for k, v in entry.items() if k not in _META_KEYS}, usage)
