"""The staff roles, the role of help desk integrations, and what each may do.

`roles_setup` makes the groups match this table.
"""

from __future__ import annotations

import secrets

from django.contrib.auth.models import Group, Permission, User
from django.contrib.auth.password_validation import validate_password
from django.db import transaction

SUPPORT_STAFF = "Support staff"
SUPERVISORS = "Supervisors"
INTEGRATIONS = "Integrations"  # machine clients: a help desk sending tickets and documents, nothing else
# People who fix the knowledge base in the admin, on top of their staff role (a user may hold both).
KNOWLEDGE_EDITORS = "Knowledge editors"

_READ = [
    "tickets.view_ticket",
    "tickets.view_evidence",
    "tickets.view_account",
    "tickets.view_customersession",
    "tickets.view_document",
    "tickets.view_documentrevision",
    "tickets.view_searchsynonym",
    "tickets.view_job",
    "tickets.view_service",
    "tickets.view_incident",
    "agentrun.view_run",
    "agentrun.view_reviewpacket",
    "agentrun.view_packetreview",
    "agentrun.view_approval",
    "agentrun.view_evidencecheck",
]
_OWN_TOKENS = ["agentrun.view_apitoken", "agentrun.add_apitoken", "agentrun.delete_apitoken"]
_OWN_PREFERENCES = ["agentrun.view_staffpreference", "agentrun.change_staffpreference"]

ROLES: dict[str, list[str]] = {
    SUPPORT_STAFF: [
        *_READ,
        *_OWN_TOKENS,
        *_OWN_PREFERENCES,
        "tickets.add_ticket",
        "agentrun.start_investigation",
        "agentrun.review_packet",
    ],
    SUPERVISORS: [
        *_READ,
        *_OWN_TOKENS,
        *_OWN_PREFERENCES,
        "tickets.add_ticket",
        "agentrun.start_investigation",
        "agentrun.review_packet",
        "agentrun.view_dashboard",
        "agentrun.answer_approval",
        "agentrun.cancel_run",
        "agentrun.change_budget_defaults",
        "tickets.change_job",
        "tickets.view_intakeproblem",
        "tickets.change_intakeproblem",  # assign an account and bring the request in
        "agentrun.view_webhookdelivery",
        "agentrun.view_webhookattempt",
        "agentrun.view_evaluation",
        "agentrun.view_evaluationcase",
        "agentrun.add_evaluation",
        "axes.view_accessattempt",
        "axes.delete_accessattempt",  # unlock a login: delete its access attempts
    ],
    KNOWLEDGE_EDITORS: [
        "tickets.view_document",
        "tickets.add_document",
        "tickets.change_document",
        "tickets.view_documentrevision",
        "tickets.view_searchsynonym",
        "tickets.add_searchsynonym",
        "tickets.change_searchsynonym",
        "tickets.delete_searchsynonym",
    ],
    INTEGRATIONS: ["tickets.add_ticket", "tickets.change_ticket", "tickets.add_document", "tickets.change_document"],
}

DEMO_USERS = {"staff": SUPPORT_STAFF, "supervisor": SUPERVISORS}


def _permission(dotted: str) -> Permission:
    app_label, codename = dotted.split(".", 1)
    return Permission.objects.get(content_type__app_label=app_label, codename=codename)


@transaction.atomic
def roles_setup() -> dict[str, Group]:
    """Create the groups (or reset their permissions to the table). Idempotent."""
    groups = {}
    for name, perms in ROLES.items():
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.set([_permission(p) for p in perms])
        groups[name] = group
    return groups


@transaction.atomic
def demo_users_setup(*, password: str | None = None) -> tuple[str, list[User]]:
    """Users `staff` and `supervisor` (admin access, one role each) with `password`, or a random one.

    A given password must pass the password validators (ValidationError otherwise, nothing kept)."""
    password = password or secrets.token_urlsafe(16)
    groups = roles_setup()
    users = []
    for username, role in DEMO_USERS.items():
        user, _ = User.objects.get_or_create(username=username)
        validate_password(password, user)
        user.is_staff, user.is_active = True, True
        user.set_password(password)
        user.save()
        user.groups.set([groups[role]])
        users.append(user)
    return password, users


@transaction.atomic
def integration_user_setup(*, username: str) -> User:
    """The user `username` in the Integrations group (made when missing: no password, no admin access).

    An existing user is taken only when it is already nothing but an integration:
    staff, superusers and members of other groups are refused (ValueError).
    """
    groups = roles_setup()
    user, created = User.objects.get_or_create(username=username)
    if created:
        user.set_unusable_password()
        user.save()
    elif user.is_staff or user.is_superuser or user.groups.exclude(name=INTEGRATIONS).exists():
        raise ValueError(f"user {username!r} is staff or holds another role; an integration needs a user of its own")
    user.groups.set([groups[INTEGRATIONS]])
    return user
