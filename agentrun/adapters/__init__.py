"""Model adapters, chosen by name from configuration or the run record."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .base import ModelAdapter, ModelError, ModelRequestSpec, ModelResponse, TokenUsage
from .replay import ReplayAdapter
from .rules import RulesAdapter

if TYPE_CHECKING:
    from ..models import Run

__all__ = [
    "ModelAdapter", "ModelError", "ModelRequestSpec", "ModelResponse", "TokenUsage",
    "ReplayAdapter", "RulesAdapter", "adapter_for_run", "ModelConfigError",
]


class ModelConfigError(ValueError):
    """The configured model cannot be used (unknown name, missing key, no price)."""


def adapter_for_run(run: Run) -> ModelAdapter:
    if run.model_name == "replay":
        return ReplayAdapter((run.model_script or {}).get("model", []))
    if run.model_name == "rules":
        return RulesAdapter()
    raise ModelConfigError(f"unknown model {run.model_name!r}")
