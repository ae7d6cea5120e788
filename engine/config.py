"""Budgets and prices for new runs, from settings and supervisors' overrides. Never from model or document text."""

from __future__ import annotations

from django.conf import settings

from engine.budgets import Budget
from providers import BUILT_IN, model_problem


class ConfigError(ValueError):
    """The configured model or budget cannot be used; says which setting to fix."""


def model_prices(model_name: str) -> tuple[str, str] | None:
    """Dollars per million (input, output) tokens: the env override, else settings, else None."""
    override = (settings.AGENT_PRICE_INPUT_PER_MTOK, settings.AGENT_PRICE_OUTPUT_PER_MTOK)
    if all(override):
        return override
    if any(override):
        raise ConfigError("set both AGENT_PRICE_INPUT_PER_MTOK and AGENT_PRICE_OUTPUT_PER_MTOK, or neither")
    prices = settings.AGENT_MODEL_PRICES
    family = model_name.split(":", 1)[0]
    return prices.get(model_name) or (prices.get(family) if family in BUILT_IN else None)


def model_check(model_name: str) -> None:
    """Fail at start, naming the setting to fix, if `model_name` cannot be used here.

    An unknown model family, a provider model without its API key, and (under
    test) a provider endpoint that is not local are all refused before a run exists.
    """
    problem = model_problem(model_name)
    if problem is not None:
        raise ConfigError(problem)


def budget_defaults(overrides: dict | None = None) -> dict:
    """Settings' defaults with the supervisors' overrides (or `overrides`, to check an edit) on top."""
    from engine.models import BudgetDefaults

    edited = BudgetDefaults.current_overrides() if overrides is None else overrides
    return {**settings.AGENT_BUDGET_DEFAULTS, **edited}


def approval_deadline(deadline_seconds: float) -> float:
    """The deadline of a new run that may need a supervisor's approval, given other runs' deadline:
    never shorter, and at least AGENT_APPROVAL_DEADLINE_SECONDS, so that someone has time to answer."""
    return max(deadline_seconds, float(settings.AGENT_APPROVAL_DEADLINE_SECONDS))


def default_budget(model_name: str, *, approval_possible: bool = False) -> Budget:
    """The budget a new run of `model_name` starts with; a run whose calls may wait for approval gets
    the approval deadline. An unusable or unpriced model fails closed."""
    model_check(model_name)
    prices = model_prices(model_name)
    try:
        defaults = budget_defaults()
        budget = Budget.from_mapping(defaults)
        if approval_possible:
            budget = Budget.from_mapping({**defaults, "deadline_seconds": approval_deadline(budget.deadline_seconds)})
    except ValueError as exc:
        raise ConfigError(f"budget defaults (AGENT_BUDGET_DEFAULTS and the supervisors' overrides): {exc}") from None
    if prices is None:
        if budget.max_cost_micros > 0:
            raise ConfigError(
                f"model {model_name!r} has no price: add it to AGENT_MODEL_PRICES or set "
                "AGENT_PRICE_INPUT_PER_MTOK and AGENT_PRICE_OUTPUT_PER_MTOK"
            )
        prices = ("0", "0")
    try:
        return Budget.from_mapping(
            {**budget.as_dict(), "input_per_mtok_usd": prices[0], "output_per_mtok_usd": prices[1]}
        )
    except ValueError as exc:
        raise ConfigError(f"price of {model_name!r}: {exc}") from None
