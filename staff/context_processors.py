"""What every admin page shows a supervisor: the calls waiting for an answer."""

from __future__ import annotations

from django.utils import timezone
from django.utils.functional import SimpleLazyObject

from engine.approvals import approval_shown, approvals_waiting
from staff.access import can


def waiting_approvals(request) -> dict:
    """`approvals_waiting` (nearest deadline first) for users who may answer them; read only when a page shows it."""
    user = getattr(request, "user", None)
    if user is None or not can(user, "agentrun.answer_approval"):
        return {}

    def shown():
        now = timezone.now()
        return [approval_shown(a, a.run, now) for a in approvals_waiting()[:50]]

    return {"approvals_waiting": SimpleLazyObject(shown)}
