"""Evidence re-checked at review time: each cited item's source read again, compared, stored, reused a while.

A re-read goes through the tool backend the run used (tools.registry.TOOLS),
under the run's customer session as it is now and with the same policy and
approvals: a session not verified now reads nothing (`could not check`, saying whether the
session was verified when the run read its jobs, or is simply not verified). It
charges the run nothing (no attempt row, no counter). All re-reads of one
packet share AGENT_RECHECK_TIMEOUT; a result is reused from the cache for
AGENT_RECHECK_REUSE_SECONDS, keyed by evidence item, for the pages; an
acceptance never goes by it (packet_recheck_now reads every item again). Every
check that ran is stored (EvidenceCheck, append-only); a reused one is not
stored again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from engine.models import Approval, EvidenceCheck, ReviewPacket, Run, ToolAttempt
from engine.timeline import revision_urls
from tickets.models import CustomerSession, Document, Evidence
from tickets.selectors import Forbidden, SessionScope
from tools import registry
from tools.compare import Comparison, Difference, Outcome, needs_acknowledgement
from tools.dispatch import Dispatcher
from tools.lookups import ApprovalRequired, Lookup, ToolError

APPROVAL_NEEDED = "this lookup needs a supervisor's approval, which the run did not have for it"


@dataclass(frozen=True)
class ItemCheck:
    """One evidence item's re-check as shown on the packet: fresh (`reused` False) or from the cache."""

    ref: str
    evidence_id: int
    comparison: Comparison
    checked_at: datetime
    reused: bool = False

    def as_dict(self, links: dict[str, str]) -> dict[str, Any]:
        c = self.comparison
        return {
            "ref": self.ref,
            "result": c.outcome.value,
            "label": c.outcome.label,
            "reason": c.reason,
            "differences": [{**d.as_dict(), "link": links.get(d.document or "")} for d in c.differences],
            "checked_at": self.checked_at,
            "reused": self.reused,
        }


# --- reading one item again --------------------------------------------------------------


def evidence_reread(
    *, evidence: Evidence, run: Run, session: CustomerSession, approved: set[str], timeout: float
) -> Comparison:
    """`evidence` as its source reads now, compared with what was recorded. Reads nothing it may not."""
    if evidence.truncated:
        return Comparison.unchecked("the recorded result was cut short, so there is nothing whole to compare")
    tool = registry.TOOLS.get(evidence.tool)
    if tool is None:
        return Comparison.unchecked(f"there is no tool {evidence.tool} any more")
    if not session.verified:
        return Comparison.unchecked(unverified_reason(run))
    if timeout <= 0:
        return Comparison.unchecked("the packet's re-checks ran out of time (AGENT_RECHECK_TIMEOUT)", transient=True)
    scope, args = SessionScope.of(session), evidence.args
    allowed = _call_key(evidence.tool, args) in approved
    try:
        if not tool.policy(scope, args):
            return Comparison.gone("the customer's session may no longer read it")
        if (evidence.tool in run.require_approval or tool.needs_approval(scope, args)) and not allowed:
            return Comparison.unchecked(APPROVAL_NEEDED)
        lookup = Lookup(timeout=timeout, approved=allowed)
        result = Dispatcher(registry.TOOLS).dispatch(evidence.tool, scope, args, 0, lookup)
    except Forbidden:
        return Comparison.gone("the customer's session may no longer read it")
    except ApprovalRequired:
        return Comparison.unchecked(APPROVAL_NEEDED)
    except ToolError as exc:
        if exc.gone:
            return Comparison.gone(str(exc))
        return Comparison.unchecked(str(exc), transient=exc.transient)
    recorded = json.loads(evidence.content)
    return tool.compare(recorded, result.content, tool.standing(recorded))


def unverified_reason(run: Run) -> str:
    """Why an unverified session reads nothing, as the data can tell it: only a verified session reads with a
    `verified_only` tool (a job), so a run that did had a verified session then; otherwise it may never have been."""
    verified_only = [name for name, tool in registry.TOOLS.items() if tool.verified_only]
    if run.attempts.filter(tool__in=verified_only, outcome=ToolAttempt.Outcome.OK).exists():
        return "the customer's session is no longer verified; nothing was read"
    return "the customer's session is not verified; nothing was read"


def _call_key(tool: str, args: dict[str, Any]) -> str:
    return f"{tool} {json.dumps(args, sort_keys=True)}"


def _approved_calls(run: Run) -> set[str]:
    """The calls a supervisor approved in this run: their re-reads are approved too."""
    granted = run.approvals.filter(state__in=[Approval.State.GRANTED, Approval.State.USED])
    return {_call_key(a.tool, a.args) for a in granted}


# --- a packet's items: checked, stored, cached -------------------------------------------------


def packet_evidence(*, packet: ReviewPacket) -> list[Evidence]:
    """The evidence items the packet cites, in its order."""
    numbers = [int(r[1:]) for r in packet.evidence_refs if r[:1] == "E" and r[1:].isdigit()]
    found = {e.number: e for e in Evidence.objects.filter(ticket_id=packet.run.ticket_id, number__in=numbers)}
    return [found[n] for n in numbers if n in found]


def _key(evidence_id: int) -> str:
    return f"recheck:evidence:{evidence_id}"


def _checks_run(*, packet: ReviewPacket, items: Sequence[Evidence], user: User | None) -> list[ItemCheck]:
    """Re-read `items` now, all within one AGENT_RECHECK_TIMEOUT; store each check, and cache it unless it was a
    transient failure (the next open asks again)."""
    if not items:
        return []
    run = packet.run
    deadline = time.monotonic() + settings.AGENT_RECHECK_TIMEOUT
    session = CustomerSession.objects.get(pk=run.session_id)
    approved = _approved_calls(run) if session.verified else set()
    checks = []
    for e in items:
        comparison = evidence_reread(
            evidence=e, run=run, session=session, approved=approved, timeout=deadline - time.monotonic()
        )
        checks.append(ItemCheck(e.ref, e.pk, comparison, timezone.now()))
    _store(packet=packet, checks=checks, user=user)
    return checks


def _store(*, packet: ReviewPacket, checks: list[ItemCheck], user: User | None) -> None:
    EvidenceCheck.objects.bulk_create(
        [
            EvidenceCheck(
                evidence_id=c.evidence_id,
                packet=packet,
                checked_at=c.checked_at,
                checked_by=user if user and user.is_authenticated else None,
                result=c.comparison.outcome,
                differences=[d.as_dict() for d in c.comparison.differences],
                reason=c.comparison.reason,
            )
            for c in checks
        ]
    )
    cache.set_many(
        {_key(c.evidence_id): _cached(c) for c in checks if not c.comparison.transient},
        timeout=settings.AGENT_RECHECK_REUSE_SECONDS,
    )


def _cached(check: ItemCheck) -> dict[str, Any]:
    c = check.comparison
    return {
        "outcome": c.outcome.value,
        "differences": [d.as_dict() for d in c.differences],
        "reason": c.reason,
        "checked_at": check.checked_at.isoformat(),
    }


def _from_cache(evidence: Evidence, value: dict[str, Any]) -> ItemCheck:
    comparison = Comparison(
        Outcome(value["outcome"]), tuple(Difference.from_dict(d) for d in value["differences"]), value["reason"]
    )
    return ItemCheck(evidence.ref, evidence.pk, comparison, datetime.fromisoformat(value["checked_at"]), reused=True)


def packet_recheck(*, packet: ReviewPacket, user: User | None) -> list[ItemCheck]:
    """Each cited item re-checked, in the packet's order: reused when checked within the reuse window."""
    items = packet_evidence(packet=packet)
    cached = cache.get_many([_key(e.pk) for e in items])
    checks = {e.pk: _from_cache(e, cached[_key(e.pk)]) for e in items if _key(e.pk) in cached}
    fresh = _checks_run(packet=packet, items=[e for e in items if e.pk not in checks], user=user)
    checks.update({c.evidence_id: c for c in fresh})
    return [checks[e.pk] for e in items]


def packet_recheck_now(*, packet: ReviewPacket, user: User | None) -> list[ItemCheck]:
    """Every cited item read again now, whatever the cache holds; each check stored and cached, so the packet's
    page then shows it. What an acceptance goes by (staff.reviews.packet_review)."""
    return _checks_run(packet=packet, items=packet_evidence(packet=packet), user=user)


def needing_acknowledgement(checks: Sequence[ItemCheck]) -> list[str]:
    """The refs an accepting reviewer must acknowledge: re-checked as changed or gone."""
    return [c.ref for c in checks if needs_acknowledgement(c.comparison.outcome)]


def document_links(checks: Sequence[ItemCheck]) -> dict[str, str]:
    """{code: the document's admin page} for the documents the checks' differences cite."""
    codes = {d.document for c in checks for d in c.comparison.differences if d.document}
    if not codes:
        return {}
    found = Document.objects.filter(code__in=codes).values_list("code", "pk")
    return {code: reverse("admin:tickets_document_change", args=[pk]) for code, pk in found}


# --- what changed, as an evidence card shows it ----------------------------------------------


@dataclass(frozen=True)
class ChangeShown:
    """One difference in an evidence card: the old and the new value, each linked to its document revision when
    it is one (`r3`, `r4`; not `no longer found`)."""

    field: str
    old: str
    new: str
    old_link: str = ""
    new_link: str = ""


@dataclass(frozen=True)
class ItemChanges:
    """An item re-checked as changed or gone: its differences, or why it is gone, and when that was read."""

    ref: str
    result: str
    label: str
    reason: str
    differences: tuple[ChangeShown, ...]
    checked_at: datetime


def evidence_changes(checks: Sequence[ItemCheck]) -> dict[str, ItemChanges]:
    """{ref: what changed} for the checked items an accepting reviewer must acknowledge."""
    shown = [c for c in checks if needs_acknowledgement(c.comparison.outcome)]
    wanted = [
        f"{d.document}@{rev}" for c in shown for d in c.comparison.differences if d.document for rev in (d.old, d.new)
    ]
    urls = revision_urls(wanted)

    def link(d: Difference, rev: str) -> str:
        return urls.get((d.document, rev), "") if d.document else ""

    return {
        c.ref: ItemChanges(
            c.ref,
            c.comparison.outcome.value,
            c.comparison.outcome.label,
            c.comparison.reason,
            tuple(ChangeShown(d.field, d.old, d.new, link(d, d.old), link(d, d.new)) for d in c.comparison.differences),
            c.checked_at,
        )
        for c in shown
    }
