"""Start-up checks: settings that run but are unsafe, or leave people too little time."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error as CheckError
from django.core.checks import Warning as CheckWarning
from django.db import DatabaseError

from engine.budgets import Budget
from engine.config import approval_deadline

APPROVAL_TOO_SHORT = "agentrun.W001"
SIGNING_SECRET_TOO_SHORT = "agentrun.E001"
SIGNING_SECRET_MIN_CHARS = 24  # as AGENT_METRICS_TOKEN: an HMAC key that can be guessed signs anything
SIGNING_SECRETS = ("INTAKE_ZENDESK_SECRET", "AGENT_PACKET_WEBHOOK_SECRET")


def signing_secret_check(app_configs=None, **kwargs) -> list[CheckError]:
    """`check --deploy`: each HMAC signing secret that is set has at least SIGNING_SECRET_MIN_CHARS
    characters (its value is never shown)."""
    return [
        CheckError(
            f"{name} is shorter than {SIGNING_SECRET_MIN_CHARS} characters: whoever guesses it can sign requests.",
            hint="Use a random secret, e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))', "
            "and set the same one at the other end.",
            id=SIGNING_SECRET_TOO_SHORT,
        )
        for name in SIGNING_SECRETS
        if 0 < len(getattr(settings, name, "")) < SIGNING_SECRET_MIN_CHARS
    ]


def approval_time_check(app_configs=None, **kwargs) -> list[CheckWarning]:
    """Warn when calls may need approval while a new run that may wait for one gets less time before
    its deadline than AGENT_APPROVAL_MIN_SECONDS: the deadline keeps running while a call waits, so
    such a run mostly ends at its deadline before anyone can answer. The budget defaults page shows it too."""
    needing = _what_needs_approval()
    deadline = approval_deadline(_default_deadline())
    if not needing or deadline >= settings.AGENT_APPROVAL_MIN_SECONDS:
        return []
    return [
        CheckWarning(
            f"Calls need approval ({' and '.join(needing)}), but new runs that may wait for one have {deadline:g} s "
            f"before their deadline, less than AGENT_APPROVAL_MIN_SECONDS ({settings.AGENT_APPROVAL_MIN_SECONDS} s).",
            hint="Raise AGENT_APPROVAL_DEADLINE_SECONDS (or deadline_seconds, in AGENT_BUDGET_DEFAULTS or the "
            "supervisors' budget defaults) so that a supervisor has time to answer, or lower "
            "AGENT_APPROVAL_MIN_SECONDS.",
            id=APPROVAL_TOO_SHORT,
        )
    ]


def _what_needs_approval() -> list[str]:
    needing = (
        [f"the tools in AGENT_REQUIRE_APPROVAL ({', '.join(settings.AGENT_REQUIRE_APPROVAL)})"]
        if settings.AGENT_REQUIRE_APPROVAL
        else []
    )
    return needing + (["jobs marked sensitive"] if _sensitive_jobs_exist() else [])


def _sensitive_jobs_exist() -> bool:
    from tickets.models import Job

    try:
        return Job.objects.filter(sensitive=True).exists()
    except DatabaseError:  # no database yet (a first migrate): settings alone decide
        return False


def _default_deadline() -> float:
    from engine.models import BudgetDefaults

    try:
        edited = BudgetDefaults.current_overrides()
    except DatabaseError:  # as above: the settings' defaults
        edited = {}
    try:
        return Budget.from_mapping({**settings.AGENT_BUDGET_DEFAULTS, **edited}).deadline_seconds
    except ValueError:
        return Budget().deadline_seconds
