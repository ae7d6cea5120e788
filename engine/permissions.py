"""Who may do what, checked: `require` refuses (403) in words that name the permission's role."""

from __future__ import annotations

from django.contrib.auth.models import User

from engine.roles import INTEGRATIONS, KNOWLEDGE_EDITORS, SUPERVISORS
from kit.refused import Refused

# what each permission lets one do, for refusal messages
_WHAT = {
    "tickets.view_ticket": ("see tickets", "Support staff"),
    "agentrun.view_run": ("see runs", "Support staff"),
    "agentrun.view_reviewpacket": ("see review packets", "Support staff"),
    "agentrun.view_approval": ("see approvals", "Support staff"),
    "agentrun.start_investigation": ("start investigations", "Support staff"),
    "agentrun.review_packet": ("review packets", "Support staff"),
    "agentrun.cancel_run": ("cancel runs", SUPERVISORS),
    "agentrun.answer_approval": ("approve or deny calls", SUPERVISORS),
    "agentrun.view_dashboard": ("see the outcomes dashboard and the knowledge gaps", SUPERVISORS),
    "tickets.add_ticket": ("create tickets", f"{INTEGRATIONS} and Support staff"),
    "tickets.change_ticket": ("update tickets", INTEGRATIONS),
    "tickets.add_document": ("add documents", f"{KNOWLEDGE_EDITORS} and {INTEGRATIONS}"),
    "tickets.change_document": ("publish documents", f"{KNOWLEDGE_EDITORS} and {INTEGRATIONS}"),
    "agentrun.change_budget_defaults": ("change budget defaults", SUPERVISORS),
    "agentrun.view_evaluation": ("see evaluations of candidate models", SUPERVISORS),
    "agentrun.add_evaluation": ("start evaluations of candidate models", SUPERVISORS),
}


def require(user: User, perm: str) -> None:
    """Raise Refused (403) unless `user` holds `perm`."""
    if user.is_authenticated and user.is_active and user.has_perm(perm):
        return
    what, role = _WHAT.get(perm, (perm, SUPERVISORS))
    raise Refused("forbidden", f"Only {role} may {what}.", 403)


def can(user: User, perm: str) -> bool:
    return bool(user.is_authenticated and user.is_active and user.has_perm(perm))
