"""Run statuses and the value that ends a run. No status string is typed anywhere else."""
from __future__ import annotations

from dataclasses import dataclass

from django.db import models


class Status(models.TextChoices):
    """Where a run is.

    Transitions: QUEUED -> RUNNING -> (WAITING_APPROVAL -> RUNNING)* -> a terminal
    status. QUEUED and WAITING_APPROVAL may also go straight to CANCELLED or
    DEADLINE. Terminal statuses never change.
    """

    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    WAITING_APPROVAL = "WAITING_APPROVAL"
    COMPLETED = "COMPLETED"
    NEEDS_HELP = "NEEDS_HELP"
    DEADLINE = "DEADLINE"
    MODEL_LIMIT = "MODEL_LIMIT"
    TOOL_LIMIT = "TOOL_LIMIT"
    TOKEN_LIMIT = "TOKEN_LIMIT"
    COST_LIMIT = "COST_LIMIT"
    NO_PROGRESS = "NO_PROGRESS"
    INVALID_OR_FORBIDDEN = "INVALID_OR_FORBIDDEN"
    MODEL_ERROR = "MODEL_ERROR"
    CANCELLED = "CANCELLED"

    @property
    def is_terminal(self) -> bool:
        return self not in ACTIVE


ACTIVE = frozenset({Status.QUEUED, Status.RUNNING, Status.WAITING_APPROVAL})
TERMINAL = frozenset(s for s in Status if s not in ACTIVE)


class Detail(models.TextChoices):
    """The reason behind INVALID_OR_FORBIDDEN and MODEL_ERROR."""

    MULTIPLE_CALLS = "multiple_calls"
    UNKNOWN_TOOL = "unknown_tool"
    BAD_ARGUMENTS = "bad_arguments"
    CALL_ID_CONFLICT = "call_id_conflict"
    FORBIDDEN = "forbidden"
    APPROVAL_DENIED = "approval_denied"
    ERROR = "error"
    TIMEOUT = "timeout"
    USAGE_OVERRUN = "usage_overrun"


@dataclass(frozen=True)
class Stop:
    """A decision to end the run."""

    status: Status
    detail: Detail | None = None
    note: str = ""


STOP_EXPLANATIONS: dict[Status, str] = {
    Status.COMPLETED: "The model returned a valid draft; it is the review packet.",
    Status.NEEDS_HELP: "The model handed the ticket to a human.",
    Status.DEADLINE: "The run's deadline passed before it could finish.",
    Status.MODEL_LIMIT: "Another model request was needed but the request budget was spent.",
    Status.TOOL_LIMIT: "The model proposed a lookup but the tool-attempt budget was spent.",
    Status.TOKEN_LIMIT: "The next request's token reservation did not fit in the token budget.",
    Status.COST_LIMIT: "The next request's cost reservation did not fit in the cost budget.",
    Status.NO_PROGRESS: "The model proposed the same call it had just executed.",
    Status.INVALID_OR_FORBIDDEN: "The model proposed something not allowed; nothing was dispatched for it.",
    Status.MODEL_ERROR: "A model request failed.",
    Status.CANCELLED: "Staff cancelled the run.",
}


# Short names for people (a column, a chart's bar); the codes stay in the API and CSVs.
STOP_NAMES: dict[Status, str] = {
    Status.QUEUED: "Queued",
    Status.RUNNING: "Running",
    Status.WAITING_APPROVAL: "Waiting for approval",
    Status.COMPLETED: "Completed",
    Status.NEEDS_HELP: "Handed to a person",
    Status.DEADLINE: "Ran out of time",
    Status.MODEL_LIMIT: "Model requests spent",
    Status.TOOL_LIMIT: "Tool attempts spent",
    Status.TOKEN_LIMIT: "Tokens spent",
    Status.COST_LIMIT: "Cost budget spent",
    Status.NO_PROGRESS: "Repeated a call",
    Status.INVALID_OR_FORBIDDEN: "Not allowed",
    Status.MODEL_ERROR: "Model error",
    Status.CANCELLED: "Cancelled",
}


def stop_name(status: str) -> str:
    return STOP_NAMES.get(status, status)  # type: ignore[call-overload]
