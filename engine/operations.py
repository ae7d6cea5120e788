"""What the loop executes between two steps, and what a step hands back. Plain values."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from engine.decisions import NormalizedCall
from engine.waiting import Result
from tickets.selectors import SessionScope

if TYPE_CHECKING:
    from engine.models import Run


@dataclass(frozen=True)
class ModelOp:
    """A model request reserved by a step: its row's key (run, seq), the run version that step
    committed (its result is recorded only at that version), and what the model is shown."""

    run_id: int
    seq: int  # the request row's, 1-based in the run
    version: int
    allowances: dict[str, Any]  # what is left, as of the reservation, shown to the model

    @property
    def index(self) -> int:
        """0-based position among the run's requests."""
        return self.seq - 1


@dataclass(frozen=True)
class DispatchOp:
    """A dispatch reserved by a step: its attempt row's key (run, seq), the run version that step
    committed, the call, and what deciding on its result needs."""

    run_id: int
    seq: int  # the attempt row's, 1-based in the run
    version: int
    call: NormalizedCall
    index: int  # how many dispatches of this tool the run made before this one
    retry_number: int = 0
    approved: bool = False  # a supervisor approved this exact call (its retries carry the approval along)
    # Who the call acts for, as the step that judged it saw them (with the rows its policy read, which the
    # dispatch reads again otherwise); None: the session as the run holds it, read anew.
    scope: SessionScope | None = field(default=None, compare=False, repr=False)

    @property
    def tool(self) -> str:
        return self.call.tool

    @property
    def args(self) -> dict[str, Any]:
        return self.call.args


Operation = ModelOp | DispatchOp


@dataclass(frozen=True)
class OpResult:
    result: Result
    by_deadline: bool  # the wait was bounded by the deadline, not the operation timeout
    started_at: datetime
    finished_at: datetime = field(default_factory=timezone.now)

    @property
    def latency_ms(self) -> int:
        return max(int((self.finished_at - self.started_at).total_seconds() * 1000), 0)


@dataclass(frozen=True)
class Next:
    """What a step leaves the loop: the operation to execute (None: stop driving) and the run as the
    step wrote it, with its tally (for the next step to take up; None when the step wrote nothing).

    `landed`: a step tried again found that its first try had committed (the answer was lost with the
    connection), so the operation it reserved is not known here; the driver resumes the run."""

    op: Operation | None
    run: Run | None = None
    landed: bool = False
