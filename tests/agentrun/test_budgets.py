"""What a run may still spend (CONFORMANCE §2, §3). Pure: no database."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from engine.budgets import (
    Budget,
    BudgetError,
    Usage,
    WrittenNumber,
    allowances,
    check_before_request,
    cost_micros,
)
from engine.statuses import Status, Stop


def test_defaults_are_the_contracts():
    b = Budget.from_mapping(None)
    assert (b.max_model_requests, b.max_tool_attempts, b.deadline_seconds, b.operation_timeout_seconds) == (
        8,
        6,
        45,
        10,
    )
    assert (b.max_input_tokens, b.max_output_tokens, b.max_total_tokens) == (8000, 1000, 60000)
    assert (b.max_cost_micros, b.max_tool_result_chars, b.max_read_retries) == (500000, 4000, 1)
    assert b == Budget()


def test_mapping_overrides_only_what_it_names():
    b = Budget.from_mapping({"max_tool_attempts": 2, "deadline_seconds": 3})
    assert (b.max_tool_attempts, b.deadline_seconds, b.max_model_requests) == (2, 3.0, 8)


def test_prices_come_from_a_prices_object():
    b = Budget.from_mapping({"prices": {"input_per_mtok_usd": 3.0, "output_per_mtok_usd": "15"}})
    assert (Decimal(b.input_per_mtok_usd), Decimal(b.output_per_mtok_usd)) == (Decimal("3"), Decimal("15"))


def test_budget_round_trips_through_its_stored_form():
    b = Budget.from_mapping({"max_tool_attempts": 2, "prices": {"input_per_mtok_usd": 0.1, "output_per_mtok_usd": 0.3}})
    assert Budget.from_mapping(b.as_dict()) == b


@pytest.mark.parametrize(
    "mapping, names",
    [
        ({"max_tool_attempts": "3"}, "max_tool_attempts"),
        ({"max_tool_attempts": 2.5}, "max_tool_attempts"),
        ({"max_model_requests": True}, "max_model_requests"),
        ({"max_model_requests": -1}, "max_model_requests"),
        ({"deadline_seconds": 0}, "deadline_seconds"),
        ({"operation_timeout_seconds": -1}, "operation_timeout_seconds"),
        ({"max_input_tokens": 0}, "max_input_tokens"),
        ({"max_tokens": 10}, "max_tokens"),
        ({"prices": {"input_per_mtok_usd": "cheap"}}, "input_per_mtok_usd"),
        ({"prices": {"output_per_mtok_usd": -1}}, "output_per_mtok_usd"),
        ({"prices": {"output_per_mtok_usd": "NaN"}}, "output_per_mtok_usd"),
        ({"prices": {"input_per_mtok_usd": True}}, "input_per_mtok_usd"),
        ({"prices": 3}, "prices"),
        ({"max_tool_attempts": "x", "max_tokens": 1}, "max_tokens"),
    ],
)
def test_a_bad_budget_raises_a_clear_error_naming_the_setting(mapping, names):
    with pytest.raises(BudgetError) as err:
        Budget.from_mapping(mapping)
    assert names in str(err.value)


def test_a_bad_budget_names_every_problem():
    with pytest.raises(BudgetError) as err:
        Budget.from_mapping({"max_tool_attempts": "x", "deadline_seconds": 0})
    assert "max_tool_attempts" in str(err.value) and "deadline_seconds" in str(err.value)


# --- check_before_request: DEADLINE, MODEL_LIMIT, TOKEN_LIMIT, COST_LIMIT -------------------------

PRICED = Budget.from_mapping({"prices": {"input_per_mtok_usd": 3, "output_per_mtok_usd": 15}})  # 39000 / request


def stop_of(budget, usage, time_left=10.0):
    result = check_before_request(budget, usage, time_left)
    return None if result is None else result.status


@pytest.mark.parametrize(
    "budget, usage, time_left, expected",
    [
        (Budget(), Usage(), 10.0, None),
        (Budget(), Usage(), 0.0, Status.DEADLINE),
        (Budget(), Usage(), -5.0, Status.DEADLINE),
        (Budget(), Usage(model_requests=8, tokens_used=60000, cost_used=500000), 0.0, Status.DEADLINE),
        (Budget(), Usage(model_requests=8), 10.0, Status.MODEL_LIMIT),
        (Budget(), Usage(model_requests=7), 10.0, None),
        (Budget(max_model_requests=0), Usage(), 10.0, Status.MODEL_LIMIT),
        (Budget(), Usage(model_requests=8, tokens_used=60000), 10.0, Status.MODEL_LIMIT),
        # a reservation fits when it is <= what is left
        (Budget(), Usage(tokens_used=51000), 10.0, None),
        (Budget(), Usage(tokens_used=51001), 10.0, Status.TOKEN_LIMIT),
        (Budget(), Usage(tokens_used=50000, tokens_reserved=1001), 10.0, Status.TOKEN_LIMIT),
        (Budget(max_total_tokens=9000), Usage(), 10.0, None),
        (Budget(max_total_tokens=8999), Usage(), 10.0, Status.TOKEN_LIMIT),
        (Budget(max_total_tokens=8999, max_cost_micros=0, input_per_mtok_usd="1"), Usage(), 10.0, Status.TOKEN_LIMIT),
        (PRICED, Usage(cost_used=500000 - 39000), 10.0, None),
        (PRICED, Usage(cost_used=500000 - 38999), 10.0, Status.COST_LIMIT),
        (PRICED, Usage(cost_used=400000, cost_reserved=100000), 10.0, Status.COST_LIMIT),
        (Budget(max_cost_micros=0), Usage(), 10.0, None),  # free model: a zero reservation fits in zero
    ],
)
def test_checks_before_a_request_in_the_contracts_order(budget, usage, time_left, expected):
    assert stop_of(budget, usage, time_left) == expected


def test_check_before_request_returns_a_stop_value():
    assert check_before_request(Budget(), Usage(model_requests=8), 1.0) == Stop(Status.MODEL_LIMIT)


# --- cost: exact decimal arithmetic, rounded up per request ---------------------------------------


def priced(inp, out):
    return Budget.from_mapping({"prices": {"input_per_mtok_usd": inp, "output_per_mtok_usd": out}})


@pytest.mark.parametrize(
    "prices, tokens, expected",
    [
        ((3.0, 15.0), (500, 50), 2250),
        (("3", "15"), (8000, 1000), 39000),
        ((0, 0), (10**6, 10**6), 0),
        ((0.1, 0.2), (1, 0), 1),  # 0.1 rounds up to 1
        ((0.1, 0.2), (10, 0), 1),  # exactly 1.0: no float error pushing it to 2
        ((0.1, 0.2), (30, 30), 9),  # 3 + 6 exactly, not 9.000000000000002 -> 10
        (("0.000001", "0"), (1, 0), 1),
        (("1.25", "0.75"), (3, 1), 5),  # 3.75 + 0.75 = 4.5 -> 5
        ((2.5, 10), (0, 0), 0),
    ],
)
def test_cost_is_exact_and_rounded_up(prices, tokens, expected):
    assert cost_micros(priced(*prices), *tokens) == expected


def test_reserved_cost_prices_the_whole_caps():
    assert priced(3.0, 15.0).reserved_cost_per_request == 8000 * 3 + 1000 * 15
    assert Budget(max_input_tokens=100, max_output_tokens=10).reserved_tokens_per_request == 110


# --- waiting and allowances -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "timeout, time_left, expected",
    [
        (10, 30.0, (10, False)),
        (10, 10.0, (10, True)),
        (10, 3.5, (3.5, True)),
        (10, 0.0, (0.0, True)),
        (10, -2.0, (0.0, True)),
    ],
)
def test_an_operation_waits_at_most_the_timeout_or_the_time_left(timeout, time_left, expected):
    assert Budget(operation_timeout_seconds=timeout).wait_seconds(time_left) == expected


def test_allowances_never_go_negative():
    left = allowances(
        Budget(max_model_requests=2, max_tool_attempts=1, max_total_tokens=10),
        Usage(model_requests=5, tool_attempts=3, tokens_used=50),
        -3.0,
    )
    assert left == {"model_requests_left": 0, "tool_attempts_left": 0, "tokens_left": 0, "seconds_left": 0.0}


def test_budget_is_frozen():
    with pytest.raises(AttributeError):
        Budget().max_tool_attempts = 99  # type: ignore[misc]


# --- every limit at its edge: the value at a bound is accepted, one step past it refused ---------

COUNTS = 2**40  # tokens, micro-dollars, requests, attempts: every sum stays within 64 bits
SECONDS = 366 * 24 * 3600
EDGES = [
    # setting, lowest accepted, highest accepted, one below, one above
    ("max_model_requests", 0, COUNTS, -1, COUNTS + 1),
    ("max_tool_attempts", 0, COUNTS, -1, COUNTS + 1),
    ("max_input_tokens", 1, COUNTS, 0, COUNTS + 1),
    ("max_output_tokens", 1, COUNTS, 0, COUNTS + 1),
    ("max_total_tokens", 0, COUNTS, -1, COUNTS + 1),
    ("max_cost_micros", 0, COUNTS, -1, COUNTS + 1),
    ("max_tool_result_chars", 1, 10**7, 0, 10**7 + 1),
    ("max_read_retries", 0, COUNTS, -1, COUNTS + 1),
    ("deadline_seconds", 0.001, float(SECONDS), 0.0, SECONDS + 0.001),
    ("operation_timeout_seconds", 0.001, float(SECONDS), 0.0, SECONDS + 0.001),
]


@pytest.mark.parametrize("name, lowest, highest, below, above", EDGES, ids=[e[0] for e in EDGES])
def test_each_limit_accepts_its_bounds_and_refuses_one_past_them(name, lowest, highest, below, above):
    for value in (lowest, highest):
        assert getattr(Budget.from_mapping({name: value}), name) == value
    for value in (below, above):
        with pytest.raises(BudgetError, match=name):
            Budget.from_mapping({name: value})


@pytest.mark.parametrize("name", ["deadline_seconds", "operation_timeout_seconds"])
@pytest.mark.parametrize("value", [True, False, "5", None])
def test_a_duration_is_a_number_not_a_boolean_or_text(name, value):
    with pytest.raises(BudgetError, match=name):
        Budget.from_mapping({name: value})


@pytest.mark.parametrize("name", ["deadline_seconds", "operation_timeout_seconds"])
def test_a_whole_number_of_seconds_is_kept_as_seconds(name):
    value = getattr(Budget.from_mapping({name: 7}), name)
    assert value == 7.0 and type(value) is float


PRICE = "input_per_mtok_usd"


@pytest.mark.parametrize(
    "price, kept",
    [
        ("1000000", "1000000"),  # exactly the highest price
        (10**6, "1000000"),
        ("0", "0"),
        (0, "0"),
        ("0.000001", "0.000001"),
        (2.5, "2.5"),
        (Decimal("3.10"), "3.10"),
        (json.loads("1.00000000000000001", parse_float=WrittenNumber), "1.00000000000000001"),  # kept as written
    ],
)
def test_a_price_from_zero_to_the_highest_is_kept_exactly(price, kept):
    assert Budget.from_mapping({"prices": {PRICE: price}}).input_per_mtok_usd == kept


@pytest.mark.parametrize(
    "price",
    [
        "1000000.000001",
        1000001,
        1e6 + 0.5,
        "1E+7",  # above the highest
        "-0.000001",
        -1,  # below zero
        "Infinity",
        "-Infinity",
        "inf",
        float("inf"),
        float("-inf"),
        "NaN",
        "sNaN",
        float("nan"),  # not finite
    ],
)
def test_a_price_above_the_highest_below_zero_or_not_finite_is_refused(price):
    with pytest.raises(BudgetError, match=f"{PRICE}: .*a price must be a number from 0 to 1000000"):
        Budget.from_mapping({"prices": {PRICE: price}})


@pytest.mark.parametrize("price", [True, False, None, [], {}, [1], {"usd": 1}])
def test_a_price_that_is_not_a_number_says_so(price):
    with pytest.raises(BudgetError, match=f"{PRICE}: .*a price is a number of dollars per million tokens"):
        Budget.from_mapping({"prices": {PRICE: price}})


@pytest.mark.parametrize("price", ["", "cheap", "1,5", "3 USD"])
def test_a_price_text_that_is_not_a_decimal_says_so(price):
    with pytest.raises(BudgetError, match=f"{PRICE}: .*not a decimal number"):
        Budget.from_mapping({"prices": {PRICE: price}})


def test_the_tokens_shown_left_subtract_what_is_spent_and_what_is_reserved():
    left = allowances(
        Budget(max_model_requests=8, max_tool_attempts=6, max_total_tokens=1000),
        Usage(model_requests=3, tool_attempts=2, tokens_used=300, tokens_reserved=200),
        12.0,
    )
    assert left == {"model_requests_left": 5, "tool_attempts_left": 4, "tokens_left": 500, "seconds_left": 12.0}


@pytest.mark.parametrize("time_left, shown", [(3.47, 3.4), (3.99, 3.9), (0.09, 0.0), (0.1, 0.1), (0.0, 0.0)])
def test_the_seconds_shown_left_are_rounded_down_to_a_tenth(time_left, shown):
    assert allowances(Budget(), Usage(), time_left)["seconds_left"] == shown
