"""A scenario's report judged against its `expect` (CONFORMANCE §7).

The same comparison as the published conformance checker, so the project
judges its own corpus (tests/scenarios) from the repository alone; CI runs the
published checker as well. Pure: a report (as `run_scenario` prints it, JSON
values) in, the problems found out (none: the run ended as expected).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from engine.statuses import Status

Report = dict[str, Any]

# Keys compared for equality with the report's key of the same name.
EXACT = ("status", "detail", "model_requests", "tool_attempts", "validation_errors", "evidence")
DISPATCH_KEYS = ("tool", "args", "outcome")


def _tokens(report: Report) -> Any:
    return (report.get("tokens") or {}).get("used")


def _cost(report: Report) -> Any:
    return report.get("cost_micros")


def _elapsed(report: Report) -> Any:
    return report.get("elapsed_seconds")


# The numbers an expect bounds or fixes, in the checker's order:
# key: (the report's value, its name in a problem, the types a bounded value must have, "<=", ">=" or "==").
NUMBERS: dict[str, tuple[Callable[[Report], Any], str, tuple[type, ...], str]] = {
    "elapsed_max": (_elapsed, "elapsed_seconds", (int, float), "<="),
    "elapsed_min": (_elapsed, "elapsed_seconds", (int, float), ">="),
    "tokens_used_max": (_tokens, "tokens.used", (int,), "<="),
    "tokens_used": (_tokens, "tokens.used", (), "=="),
    "cost_micros_max": (_cost, "cost_micros", (int,), "<="),
    "cost_micros": (_cost, "cost_micros", (), "=="),
}
KNOWN = {*EXACT, *NUMBERS, "dispatched", "packet_evidence", "packet_summary_null"}


def dispatch_view(entries: Any) -> Any:
    """The dispatched calls as a scenario states them: tool, arguments and outcome of each."""
    if not isinstance(entries, list):
        return entries
    return [{key: entry.get(key) for key in DISPATCH_KEYS} if isinstance(entry, dict) else entry for entry in entries]


def scenario_judge(expect: dict[str, Any], report: Report) -> list[str]:
    """What in `report` differs from `expect`; an empty list when the run ended as expected."""
    problems = [f"unknown expect key {key!r}" for key in expect if key not in KNOWN]
    problems += [
        f"{key}: expected {json.dumps(expect[key])}, got {json.dumps(report.get(key))}"
        for key in EXACT
        if key in expect and report.get(key) != expect[key]
    ]
    problems += _dispatched(expect, report) + _packet(expect, report)
    problems += [problem for key in NUMBERS if key in expect for problem in _number(key, expect[key], report)]
    return problems


def _dispatched(expect: dict[str, Any], report: Report) -> list[str]:
    seen = dispatch_view(report.get("dispatched"))
    if "dispatched" not in expect or seen == expect["dispatched"]:
        return []
    return [f"dispatched: expected {json.dumps(expect['dispatched'])}, got {json.dumps(seen)}"]


def _packet(expect: dict[str, Any], report: Report) -> list[str]:
    packet = report.get("packet") or {}
    problems = []
    if "packet_evidence" in expect and packet.get("evidence") != expect["packet_evidence"]:
        problems.append(f"packet.evidence: expected {expect['packet_evidence']}, got {packet.get('evidence')}")
    if expect.get("packet_summary_null") and packet.get("summary") is not None:
        problems.append(f"packet.summary: expected null, got {packet.get('summary')!r}")
    resting = report.get("status") == Status.WAITING_APPROVAL
    if not resting and ("packet" not in report or packet.get("stop_reason") != report.get("status")):
        problems.append("packet.stop_reason must equal status on every terminal run")
    return problems


def _number(key: str, wanted: Any, report: Report) -> list[str]:
    value, name, types, relation = NUMBERS[key]
    got = value(report)
    if relation == "==":
        return [] if got == wanted else [f"{name}: expected {wanted}, got {got}"]
    if isinstance(got, types) and (got <= wanted if relation == "<=" else got >= wanted):
        return []
    return [f"{name}: expected {relation} {wanted}, got {got}"]
