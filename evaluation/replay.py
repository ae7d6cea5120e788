"""The tools of an evaluation run: the original run's recorded results, or the live backends.

The loop's one hook (engine.loop.run_io) imports this module for a run marked
`Run.Purpose.EVALUATION`; it imports only what it wraps, never the loop.
"""

from __future__ import annotations

import json
from typing import Any

from engine.models import EvaluationCase, Run, ToolAttempt
from providers import ModelAdapter, adapter_for_run
from tickets.models import Evidence
from tickets.selectors import SessionScope
from tools.base import call_key
from tools.dispatch import Dispatcher
from tools.lookups import UNBOUNDED, Lookup
from tools.registry import ToolError, ToolResult

NOT_RECORDED = "not recorded in the original run"


class RecordedDispatcher(Dispatcher):
    """Answers a call from the original run's recorded result for the same tool and arguments;
    any other call fails, and the model is shown that it was not recorded."""

    def __init__(self, recorded: dict[str, ToolResult]):
        super().__init__()
        self.recorded = recorded

    def dispatch(
        self, tool: str, scope: SessionScope, args: dict[str, Any], index: int, lookup: Lookup = UNBOUNDED
    ) -> ToolResult:
        found = self.recorded.get(call_key(tool, args))
        if found is None:
            raise ToolError(NOT_RECORDED, transient=False)
        return found


def recorded_results(run_id: int) -> dict[str, ToolResult]:
    """The results the run's successful dispatches produced, by call key."""
    attempts = ToolAttempt.objects.filter(run_id=run_id, outcome=ToolAttempt.Outcome.OK, evidence__isnull=False)
    return {a.call_key: _as_result(a.evidence) for a in attempts.select_related("evidence")}


def _as_result(evidence: Evidence) -> ToolResult:
    try:
        content = json.loads(evidence.content)
    except ValueError:  # a truncated result: its recorded text, as the original run was shown it
        content = {"recorded_excerpt": evidence.content}
    return ToolResult(content if isinstance(content, dict) else {"value": content}, evidence.source_ref)


def evaluation_io(run: Run) -> tuple[ModelAdapter, Dispatcher]:
    """The candidate's adapter, and the recorded or the live tools, for an evaluation run."""
    case = EvaluationCase.objects.select_related("evaluation").get(candidate_run=run)
    if case.evaluation.live_tools:
        return adapter_for_run(run), Dispatcher()
    return adapter_for_run(run), RecordedDispatcher(recorded_results(case.original_run_id))
