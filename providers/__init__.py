"""Model adapters, chosen by name from configuration or the run record.

`rules` and `replay` are built in. `openai:<model>` and `anthropic:<model>` are
provider models reached through the official SDKs; their keys and endpoints
come from the SDKs' standard environment variables. `context` is what a model is shown
(a run's context, rendered and fitted), `tooldefs` the tools as each provider declares them,
`answers` the draft and handoff a model may answer with.
Providers import tools, tickets and the kit, never the engine: a run is handed to
`adapter_for_run` as anything with a model name and script (`ModelChoice`).
"""

from __future__ import annotations

import importlib
import ipaddress
import os
import sys
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from providers.base import BuiltInModel, ModelAdapter, ModelError, ModelRequestSpec, ModelResponse, TokenUsage
from providers.replay import ReplayAdapter
from providers.rules import RulesAdapter


class ModelChoice(Protocol):
    """What picks a run's adapter: its model's name, and a replayed run's script (engine.models.Run has both)."""

    model_name: str
    model_script: dict[str, Any] | None


__all__ = [
    "BuiltInModel",
    "ModelAdapter",
    "ModelError",
    "ModelRequestSpec",
    "ModelResponse",
    "TokenUsage",
    "ReplayAdapter",
    "RulesAdapter",
    "UnavailableAdapter",
    "PROVIDERS",
    "Provider",
    "adapter_for_run",
    "model_problem",
    "endpoint_problem",
]

BUILT_IN = tuple(BuiltInModel.values)


@dataclass(frozen=True)
class Provider:
    """A family of provider models: where its adapter lives and which environment variables it reads."""

    family: str
    module: str  # defines `Adapter`; imported on first use, since each SDK takes seconds to import
    key_env: str
    base_url_env: str
    default_base_url: str

    def api_key(self) -> str:
        return os.environ.get(self.key_env, "").strip()

    def base_url(self) -> str:
        return os.environ.get(self.base_url_env, "").strip() or self.default_base_url


PROVIDERS: dict[str, Provider] = {
    "openai": Provider("openai", ".openai_chat", "OPENAI_API_KEY", "OPENAI_BASE_URL", "https://api.openai.com/v1"),
    "anthropic": Provider(
        "anthropic", ".anthropic_messages", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "https://api.anthropic.com"
    ),
}


class UnavailableAdapter(ModelAdapter):
    """Stands in for a model that cannot be used: every request fails, so the run ends MODEL_ERROR, never silently."""

    name = "unavailable"

    def __init__(self, reason: str):
        self.reason = reason

    def request(self, spec: ModelRequestSpec) -> ModelResponse:
        raise ModelError(self.reason)


def split_model_name(model_name: str) -> tuple[Provider | None, str]:
    """`openai:gpt-4o-mini` -> (the openai provider, "gpt-4o-mini"); the model may hold colons (`llama3.1:8b`)."""
    family, _, model = model_name.partition(":")
    return PROVIDERS.get(family), model.strip()


def under_test() -> bool:
    return "pytest" in sys.modules or "PYTEST_CURRENT_TEST" in os.environ


def is_local_url(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def endpoint_problem(provider: Provider) -> str | None:
    """Under test, a provider adapter talks only to a local server: nothing reaches the network."""
    if under_test() and not is_local_url(provider.base_url()):
        return (
            f"refusing to call a {provider.family} endpoint that is not local while running tests: "
            f"point {provider.base_url_env} at 127.0.0.1 or localhost"
        )
    return None


def model_problem(model_name: str) -> str | None:
    """Why `model_name` cannot be used here (unknown family, no model, missing key), or None."""
    if model_name in BUILT_IN:
        return None
    provider, model = split_model_name(model_name)
    if provider is None or not model:
        return (
            f"unknown model {model_name!r}: AGENT_MODEL (or --model) is 'rules', "
            f"or one of {', '.join(f'{family}:<model>' for family in PROVIDERS)}"
        )
    if not provider.api_key():
        return f"model {model_name!r} needs an API key: set {provider.key_env}"
    return endpoint_problem(provider)


def adapter_for_run(run: ModelChoice) -> ModelAdapter:
    if run.model_name == BuiltInModel.REPLAY:
        return ReplayAdapter((run.model_script or {}).get("model", []))
    if run.model_name == BuiltInModel.RULES:
        return RulesAdapter()
    problem = model_problem(run.model_name)
    if problem is not None:  # checked at start too; the environment may have changed since
        return UnavailableAdapter(problem)
    provider, model = split_model_name(run.model_name)
    assert provider is not None
    module = importlib.import_module(provider.module, __package__)
    return module.Adapter(model, provider)
