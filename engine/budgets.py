"""Budgets and usage: what a run may spend and what it has spent. Pure, no ORM.

A `Budget` is fixed when a run starts and stored with it; nothing a model or a
document says can change it. `Usage` is a snapshot of the run's counters, and
`Tally` of its request and attempt rows (a step numbers what it reserves from it). The
checks here run *before* a spend (compare pydantic-ai's
`UsageLimits.check_before_request`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator

from engine.statuses import Status, Stop


class BudgetError(ValueError):
    """A budget configuration that cannot be used."""


# Bounds that keep every figure storable and every sum within 64 bits.
COUNT_LIMIT = 2**40  # tokens, micro-dollars, requests, attempts
SECONDS_LIMIT = 366 * 24 * 3600
PRICE_LIMIT = 10**6  # dollars per million tokens


class WrittenNumber(float):
    """A JSON number with a fraction or an exponent: a float that keeps the text it was written as.

    `json.loads(text, parse_float=WrittenNumber)` reads a document whose prices
    stay exact (a float would round 1.00000000000000001 to 1.0); anywhere else
    it is the float it always was.
    """

    written: str

    def __new__(cls, text: str) -> WrittenNumber:
        number = super().__new__(cls, text)
        number.written = text
        return number


@dataclass(frozen=True)
class Bound:
    """How one limit of a budget is bounded and described: the one declaration of that field.

    `wide` limits are stored in 64 bits where supervisors override them (BudgetDefaults).
    """

    help: str
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    wide: bool = False


def limit(default: int | float, help: str, **bounds: Any) -> Any:
    """A limit of a budget: its default, what it means, and its bounds (ge, gt, le; `wide` for 64 bits)."""
    return field(default=default, metadata={"bound": Bound(help, **bounds)})


def price(help: str) -> Any:
    """A price of a budget: decimal text, "0" unless configured."""
    return field(default="0", metadata={"help": help})


@dataclass(frozen=True)
class Budget:
    """Everything one run may spend. Defaults are CONFORMANCE §2.

    The one declaration of a budget's fields: the schema that checks one (`BudgetSchema`),
    supervisors' overrides (engine.models.BudgetDefaults) and their admin form follow it.
    Limits carry a `Bound`; prices are set by configuration, never overridden by supervisors.
    """

    max_model_requests: int = limit(8, "Model requests a run may make.", ge=0, le=COUNT_LIMIT)
    max_tool_attempts: int = limit(6, "Tool attempts a run may make, retries included.", ge=0, le=COUNT_LIMIT)
    deadline_seconds: float = limit(45.0, "Seconds from the run's start to its deadline.", gt=0, le=SECONDS_LIMIT)
    operation_timeout_seconds: float = limit(
        10.0, "Seconds one model request or tool dispatch may take.", gt=0, le=SECONDS_LIMIT
    )
    max_input_tokens: int = limit(8000, "Input tokens one model request may use.", ge=1, le=COUNT_LIMIT)
    max_output_tokens: int = limit(1000, "Output tokens one model request may use.", ge=1, le=COUNT_LIMIT)
    max_total_tokens: int = limit(60000, "Tokens a run may use in all.", ge=0, le=COUNT_LIMIT, wide=True)
    max_cost_micros: int = limit(500000, "Micro-dollars a run may spend in all.", ge=0, le=COUNT_LIMIT, wide=True)
    max_tool_result_chars: int = limit(
        4000, "Characters of a tool result kept as evidence; the rest is cut.", ge=1, le=10**7
    )
    max_read_retries: int = limit(1, "Retries of a lookup after a transient failure.", ge=0, le=COUNT_LIMIT)
    input_per_mtok_usd: str = price("Dollars per million input tokens.")
    output_per_mtok_usd: str = price("Dollars per million output tokens.")

    @classmethod
    def from_mapping(cls, data: dict[str, Any] | None) -> Budget:
        """Build a budget from configuration, raising BudgetError with every problem named."""
        data = dict(data or {})
        prices = data.pop("prices", None)
        if prices is not None:
            if not isinstance(prices, dict):
                raise BudgetError("prices must be an object with input_per_mtok_usd and output_per_mtok_usd")
            data.update(prices)
        try:
            schema = BudgetSchema.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'budget'}: {e['msg']}" for e in exc.errors())
            raise BudgetError(f"invalid budget: {problems}") from None
        return cls(**schema.model_dump())

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def reserved_tokens_per_request(self) -> int:
        return self.max_input_tokens + self.max_output_tokens

    @property
    def reserved_cost_per_request(self) -> int:
        return cost_micros(self, self.max_input_tokens, self.max_output_tokens)

    def wait_seconds(self, time_left: float) -> tuple[float, bool]:
        """How long one operation may wait, and whether the deadline (not the timeout) bounds it."""
        if time_left <= self.operation_timeout_seconds:
            return max(time_left, 0.0), True
        return self.operation_timeout_seconds, False


def budget_limits(declaration: type[Budget] | None = None) -> dict[str, tuple[type, Bound]]:
    """The budget's limits, in declaration order, with their types: what supervisors may override."""
    declaration = declaration or Budget
    types = get_type_hints(declaration)
    return {f.name: (types[f.name], f.metadata["bound"]) for f in fields(declaration) if "bound" in f.metadata}


class _BudgetChecks(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    @field_validator("deadline_seconds", "operation_timeout_seconds", mode="before", check_fields=False)
    @classmethod
    def _int_is_a_number(cls, value: Any) -> Any:
        return float(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("input_per_mtok_usd", "output_per_mtok_usd", mode="before", check_fields=False)
    @classmethod
    def _price(cls, value: Any) -> str:
        # Prices are kept as the decimal text written, so cost is exact.
        if isinstance(value, bool) or not isinstance(value, (int, float, str, Decimal)):
            raise ValueError("a price is a number of dollars per million tokens")
        text = getattr(value, "written", None) or (repr(value) if isinstance(value, float) else str(value))
        try:
            price = Decimal(text.strip())
        except InvalidOperation as exc:
            raise ValueError(f"not a decimal number: {value!r}") from exc
        if not price.is_finite() or price < 0 or price > PRICE_LIMIT:
            raise ValueError(f"a price must be a number from 0 to {PRICE_LIMIT}")
        return str(price)


def budget_schema(declaration: type[Budget]) -> type[BaseModel]:
    """The pydantic schema of a budget, built from Budget's fields: their types, defaults, bounds and help."""
    types = get_type_hints(declaration)
    declared: dict[str, Any] = {}
    for f in fields(declaration):
        bound = f.metadata.get("bound")
        limits = {k: v for k in ("ge", "gt", "le") if (v := getattr(bound, k, None)) is not None}
        help = bound.help if bound else f.metadata["help"]
        declared[f.name] = (types[f.name], Field(f.default, description=help, **limits))
    return create_model("BudgetSchema", __base__=_BudgetChecks, **declared)


BudgetSchema = budget_schema(Budget)


def cost_micros(budget: Budget, input_tokens: int, output_tokens: int) -> int:
    """Exact cost in micro-dollars, rounded up: $/Mtok is micro-dollars per token."""
    exact = Decimal(input_tokens) * Decimal(budget.input_per_mtok_usd) + Decimal(output_tokens) * Decimal(
        budget.output_per_mtok_usd
    )
    return int(exact.to_integral_value(rounding=ROUND_CEILING))


def dollars(micros: int) -> str:
    """Micro-dollars as a person reads them: "$0.50", "$0.000123", "$1,234.00"."""
    whole, rest = divmod(abs(micros), 1_000_000)
    cents = f"{rest:06d}".rstrip("0").ljust(2, "0")
    return f"{'-' if micros < 0 else ''}${whole:,}.{cents}"


@dataclass(frozen=True)
class Usage:
    """A snapshot of a run's cumulative counters."""

    model_requests: int = 0
    tool_attempts: int = 0
    tokens_used: int = 0
    tokens_reserved: int = 0
    cost_used: int = 0
    cost_reserved: int = 0


@dataclass(frozen=True)
class Tally:
    """How many model request and tool attempt rows a run has (per tool too), as of a step."""

    requests: int
    attempts: int
    per_tool: tuple[tuple[str, int], ...]

    def of(self, tool: str) -> int:
        return dict(self.per_tool).get(tool, 0)

    def after_attempt(self, tool: str) -> Tally:
        counts = dict(self.per_tool)
        counts[tool] = counts.get(tool, 0) + 1
        return Tally(self.requests, self.attempts + 1, tuple(counts.items()))


def check_before_request(budget: Budget, usage: Usage, time_left: float) -> Stop | None:
    """The exits checked before a model request, in the contract's order."""
    if time_left <= 0:
        return Stop(Status.DEADLINE)
    if usage.model_requests >= budget.max_model_requests:
        return Stop(Status.MODEL_LIMIT)
    tokens_left = budget.max_total_tokens - usage.tokens_used - usage.tokens_reserved
    if budget.reserved_tokens_per_request > tokens_left:
        return Stop(Status.TOKEN_LIMIT)
    cost_left = budget.max_cost_micros - usage.cost_used - usage.cost_reserved
    if budget.reserved_cost_per_request > cost_left:
        return Stop(Status.COST_LIMIT)
    return None


def tool_attempts_left(budget: Budget, usage: Usage) -> int:
    return max(budget.max_tool_attempts - usage.tool_attempts, 0)


def allowances(budget: Budget, usage: Usage, time_left: float) -> dict[str, int | float]:
    """What is left, as shown to the model."""
    return {
        "model_requests_left": max(budget.max_model_requests - usage.model_requests, 0),
        "tool_attempts_left": tool_attempts_left(budget, usage),
        "tokens_left": max(budget.max_total_tokens - usage.tokens_used - usage.tokens_reserved, 0),
        "seconds_left": max(math.floor(time_left * 10) / 10, 0.0),
    }
