"""The line that headlines a run's stop on the staff pages: what actually happened.

The status (a contract code, unchanged) says which exit the run took; the headline says
why in the words of the case: who denied a lookup and when, which job does not exist,
which service could not be reached. `stop_headline` decides (pure); `run_headline` reads
what it needs from a run and its packet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from engine.models import Approval, ReviewPacket, Run, ToolAttempt
from engine.statuses import Detail
from engine.timeline import stop_label
from tools.registry import TOOLS

# A dispatch that ended so has not been answered: its service could not be reached in time.
UNANSWERED = frozenset({ToolAttempt.Outcome.TRANSIENT_ERROR, ToolAttempt.Outcome.TIMEOUT})


@dataclass(frozen=True)
class Headline:
    text: str
    at: datetime | None = None  # when it happened (a denial), shown in the viewer's time zone


def stop_headline(
    status: str,
    detail: str = "",
    *,
    refused_reason: str = "",
    denied_by: str = "",
    denied_at: datetime | None = None,
    unreached: Sequence[str] = (),
) -> Headline:
    """The headline of a stop. `refused_reason` is the staff-only reason on the packet (engine.refusals);
    `denied_by`/`denied_at`, the supervisor's answer to an approval; `unreached`, the services that never
    answered one of the run's lookups."""
    at = None
    if detail == Detail.APPROVAL_DENIED:
        text, at = "Lookup denied by a supervisor" + (f" ({denied_by})" if denied_by else ""), denied_at
    elif detail == Detail.FORBIDDEN and refused_reason:
        text = f"Refused a lookup: {refused_reason.rstrip('.')}"
    else:
        text = stop_label(status, detail)
    if unreached:
        text += f"; {' and '.join(unreached)} could not be reached"
    return Headline(text, at)


def unreached_services(attempts: Sequence[tuple[str, str, str]]) -> list[str]:
    """The services of the calls (tool, call key, outcome) that were dispatched and never answered."""
    outcomes: dict[tuple[str, str], set[str]] = {}
    for tool, key, outcome in attempts:
        outcomes.setdefault((tool, key), set()).add(outcome)
    unanswered = {tool for (tool, _), seen in outcomes.items() if seen <= UNANSWERED}
    return [tool.reads for name, tool in TOOLS.items() if name in unanswered]


def run_headline(*, run: Run, packet: ReviewPacket | None) -> Headline:
    """The headline of the run's stop, or of where it is while it goes on."""
    refused = (packet.refused or {}) if packet is not None else {}
    denial = None
    if run.detail == Detail.APPROVAL_DENIED:
        denial = run.approvals.filter(state=Approval.State.DENIED).order_by("-decided_at").first()
    attempts = run.attempts.values_list("tool", "call_key", "outcome")
    return stop_headline(
        run.status,
        run.detail,
        refused_reason=str(refused.get("reason") or ""),
        denied_by=denial.decided_by if denial else "",
        denied_at=denial.decided_at if denial else None,
        unreached=unreached_services(list(attempts)),
    )
