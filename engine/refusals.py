"""The proposal a run ended on, and why, in plain words for staff. Pure: no ORM, no I/O.

The packet of a run that ended on a proposal names it (tool, arguments) and gives
the reason. That reason is for staff only and may say what the model must never
learn ("J-99 does not exist", "J-77 belongs to another account"): it is written
on the packet when the run ends, never into the model's context.
"""

from __future__ import annotations

from typing import Any

from engine.decisions import Call, normalize_call
from engine.statuses import Detail, Status, Stop
from tools.registry import TOOLS

MAX_LISTED_CALLS = 10

# The stops a proposed call can end a run with (CONFORMANCE §3); a deadline is not about the call.
ENDS_ON_A_CALL = frozenset({Status.INVALID_OR_FORBIDDEN, Status.NO_PROGRESS, Status.TOOL_LIMIT})


def refusal_of_call(call: Call, stop: Stop, *, staff_reason: str = "") -> dict[str, Any] | None:
    """The refused call with its reason; None when `stop` did not end the run on the call itself.

    `staff_reason` is what only staff may read about a forbidden call (the caller looks it up).
    """
    if stop.status not in ENDS_ON_A_CALL:
        return None
    normalized = normalize_call(call)
    args = call.args if isinstance(normalized, Stop) else normalized.args
    return {"tool": call.tool, "args": args, "id": call.call_id, "reason": _call_reason(call, stop, staff_reason)}


def _call_reason(call: Call, stop: Stop, staff_reason: str) -> str:
    if stop.status == Status.NO_PROGRESS:
        return "It is the same call as the one just made: making it again would learn nothing new."
    if stop.status == Status.TOOL_LIMIT:
        return "Every tool attempt in the budget was already spent."
    if stop.detail == Detail.UNKNOWN_TOOL:
        *others, last = TOOLS
        return f"There is no tool named “{call.tool}”; the tools are {', '.join(others)} and {last}."
    if stop.detail == Detail.BAD_ARGUMENTS:
        return f"The arguments do not fit {call.tool}: {stop.note}."
    if stop.detail == Detail.CALL_ID_CONFLICT:
        return f"Call id “{call.call_id}” was already used for a different call."
    if stop.detail == Detail.FORBIDDEN:
        return staff_reason or "This customer's session may not make this call."
    return stop.note or "The call was refused."


def refusal_of_dispatch(*, tool: str, args: dict[str, Any], call_id: str, staff_reason: str) -> dict[str, Any]:
    """A call refused by its backend, which alone could tell (a job service's answer)."""
    reason = staff_reason or "This customer's session may not make this call."
    return {"tool": tool, "args": args, "id": call_id or None, "reason": reason}


def refusal_of_calls(calls: list[Any]) -> dict[str, Any]:
    """Several calls proposed in one reply: none of them was made."""
    return {
        "tool": None,
        "args": None,
        "id": None,
        "calls": list(calls[:MAX_LISTED_CALLS]),
        "reason": f"{len(calls)} calls were proposed in one reply; only one per reply is allowed, so none was made.",
    }


def refusal_of_denial(
    *, tool: str, args: dict[str, Any], call_id: str, decided_by: str, reason: str = ""
) -> dict[str, Any]:
    """A call a supervisor denied while the run waited for approval, with the supervisor's reason."""
    who = decided_by or "A supervisor"
    said = f"{who} denied this call: {reason}" if reason else f"{who} denied this call."
    return {"tool": tool, "args": args, "id": call_id or None, "reason": said}
