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

    QUEUED = "QUEUED", "Queued"
    RUNNING = "RUNNING", "Running"
    WAITING_APPROVAL = "WAITING_APPROVAL", "Waiting for approval"
    COMPLETED = "COMPLETED", "Completed"
    NEEDS_HELP = "NEEDS_HELP", "Handed to a person"
    DEADLINE = "DEADLINE", "Deadline reached"
    MODEL_LIMIT = "MODEL_LIMIT", "Model request budget spent"
    TOOL_LIMIT = "TOOL_LIMIT", "Lookup budget spent"
    TOKEN_LIMIT = "TOKEN_LIMIT", "Token budget spent"
    COST_LIMIT = "COST_LIMIT", "Cost budget spent"
    NO_PROGRESS = "NO_PROGRESS", "Repeated the last lookup"
    INVALID_OR_FORBIDDEN = "INVALID_OR_FORBIDDEN", "Refused a proposal"
    MODEL_ERROR = "MODEL_ERROR", "Model request failed"
    CANCELLED = "CANCELLED", "Cancelled by staff"

    @property
    def is_terminal(self) -> bool:
        return self not in ACTIVE


ACTIVE = frozenset({Status.QUEUED, Status.RUNNING, Status.WAITING_APPROVAL})
TERMINAL = frozenset(s for s in Status if s not in ACTIVE)


class Detail(models.TextChoices):
    """The reason behind INVALID_OR_FORBIDDEN and MODEL_ERROR."""

    MULTIPLE_CALLS = "multiple_calls", "several calls at once"
    UNKNOWN_TOOL = "unknown_tool", "a tool that does not exist"
    BAD_ARGUMENTS = "bad_arguments", "arguments that do not fit"
    CALL_ID_CONFLICT = "call_id_conflict", "a call id used twice"
    FORBIDDEN = "forbidden", "a lookup this customer may not make"
    APPROVAL_DENIED = "approval_denied", "denied by a supervisor"
    ERROR = "error", "the provider returned an error"
    TIMEOUT = "timeout", "timed out"
    USAGE_OVERRUN = "usage_overrun", "usage over the request's caps"


@dataclass(frozen=True)
class Stop:
    """A decision to end the run."""

    status: Status
    detail: Detail | None = None
    note: str = ""


# Plain words for staff; "{actor}" is whoever proposed the steps (see timeline.investigator).
STOP_EXPLANATIONS: dict[Status, str] = {
    Status.COMPLETED: "{actor} returned a valid draft; it is the review packet.",
    Status.NEEDS_HELP: "{actor} handed the ticket to a person.",
    Status.DEADLINE: "The run's deadline passed before it could finish.",
    Status.MODEL_LIMIT: "Another request to {actor} was needed but the request budget was spent.",
    Status.TOOL_LIMIT: "{actor} proposed a lookup but the tool-attempt budget was spent.",
    Status.TOKEN_LIMIT: "The next request's token reservation did not fit in the token budget.",
    Status.COST_LIMIT: "The next request's cost reservation did not fit in the cost budget.",
    Status.NO_PROGRESS: "{actor} proposed the same call it had just made.",
    Status.INVALID_OR_FORBIDDEN: "{actor} proposed something not allowed; nothing was dispatched for it.",
    Status.MODEL_ERROR: "A request to {actor} failed.",
    Status.CANCELLED: "Staff cancelled the run.",
}


# Each status's name, read once: `Status.values` and `Status(...).label` rebuild the choices on every call,
# and a list page names a status in every row.
_STOP_NAMES: dict[str, str] = {s.value: s.label for s in Status}


def stop_name(status: str) -> str:
    """A status in plain words, the one name staff read everywhere (codes stay in the API and CSVs)."""
    return _STOP_NAMES.get(status, status)
