"""The small tables, made once through the ORM, and what the tools answer about them.

Accounts (a few large, many small), their customers and sessions, staff who review, a knowledge base
of documents published through `tickets.services.document_publish` (so PostgreSQL's triggers index
them), and the four services. Searches and service reads are answered by the tools themselves, once
per query, so that evidence reads as the tools write it and a re-check finds it unchanged.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth.models import Group, User
from django.utils import timezone

from engine.roles import SUPERVISORS, SUPPORT_STAFF, roles_setup
from engine.scaleseed.draws import Weighted
from tickets.models import Account, CustomerSession, CustomerUser, Incident, Service
from tickets.selectors import SessionScope
from tickets.services import document_publish
from tools.base import canonical_json
from tools.dispatch import Dispatcher
from tools.registry import TOOLS

# The marker of everything seed_scale made: its accounts' codes start with it.
ACCOUNT_PREFIX = "SCALE-"
ACCOUNTS = 40
STAFF = [(f"agent{i:02d}", SUPPORT_STAFF) for i in range(1, 11)] + [(f"lead{i:02d}", SUPERVISORS) for i in range(1, 5)]
SERVICES = {"export": "operational", "api": "operational", "auth": "operational", "billing": "degraded"}


@dataclass(frozen=True)
class Topic:
    """What a ticket is about: its words, what a run looks up, and the job it names (kind, error) if any."""

    code: str
    subjects: tuple[str, ...]
    body: str
    queries: tuple[str, ...]
    job: tuple[str, str] | None = None
    service: str | None = None
    weight: float = 1.0


TOPICS = (
    Topic(
        "export-role",
        ("CSV export fails since we renamed the workspace", "Export failed with EXPORT_ROLE_REQUIRED"),
        "Hi, our CSV export keeps failing. The last one was job {job} and it failed. It worked last month.",
        ("export role required", "csv export permissions"),
        ("csv_export", "EXPORT_ROLE_REQUIRED"),
        weight=3,
    ),
    Topic(
        "export-timeout",
        ("Export stuck for hours", "Large export timed out"),
        "Our export {job} has been running for hours and then failed. Is something wrong on your side?",
        ("export timeout large workspace",),
        ("csv_export", "EXPORT_TIMEOUT"),
        service="export",
        weight=2,
    ),
    Topic(
        "import-header",
        ("Contact import rejected", "Import of our CSV failed"),
        "I tried to import contacts from a spreadsheet (job {job}) and it was rejected straight away.",
        ("import csv header columns",),
        ("csv_import", "IMPORT_BAD_HEADER"),
        weight=2,
    ),
    Topic(
        "api-rate",
        ("API returns 429 Too Many Requests", "Our integration is being throttled"),
        "Since this morning our integration gets 429 responses from the API on almost every call.",
        ("api rate limit", "429 too many requests"),
        service="api",
        weight=2,
    ),
    Topic(
        "api-key",
        ("API key stopped working after rotation", "401 from the API with a new key"),
        "We rotated our API key as the security guide says and now every request is refused with 401.",
        ("rotate api key",),
        weight=1.5,
    ),
    Topic(
        "sso",
        ("Cannot sign in with SSO", "SAML login loops back to the login page"),
        "None of our team can sign in through our identity provider since yesterday.",
        ("single sign-on saml",),
        service="auth",
        weight=1.5,
    ),
    Topic(
        "two-factor",
        ("Lost my two-factor device", "Locked out: new phone, no authenticator"),
        "I changed phones and lost my authenticator app. How do I get back into my account?",
        ("two-factor recovery codes",),
        weight=1.5,
    ),
    Topic(
        "invoice",
        ("Invoice shows the wrong amount", "Charged twice this month"),
        "Our latest invoice is higher than our plan. Can you explain the charges?",
        ("invoice amount seats", "charged twice"),
        service="billing",
        weight=2,
    ),
    Topic(
        "card",
        ("Card declined on renewal", "Payment failed but the card is fine"),
        "The renewal payment failed although the card works everywhere else.",
        ("card declined payment",),
        service="billing",
    ),
    Topic(
        "rename-links",
        ("Links broken after workspace rename", "Old dashboard links give 404"),
        "We renamed the workspace and some shared links stopped working.",
        ("rename workspace links",),
    ),
    Topic(
        "invite",
        ("How do I invite a member as editor?", "Give a colleague edit rights"),
        "A colleague needs to edit our reports. How do I give them the right role?",
        ("invite member role",),
        weight=2,
    ),
    Topic(
        "report-email",
        ("Scheduled report did not arrive", "Weekly report e-mail missing"),
        "Our weekly report (job {job}) was not delivered on Monday.",
        ("scheduled report email",),
        ("report_email", "SMTP_REJECTED"),
    ),
    Topic(
        "webhooks",
        ("Webhooks not delivered", "Webhook retries keep failing"),
        "Our endpoint has not received webhook events since the sync {job} failed.",
        ("webhook delivery retries",),
        ("webhook_sync", "WEBHOOK_TIMEOUT"),
        service="api",
    ),
    Topic(
        "delete-data",
        ("Delete our workspace data", "How to remove a former employee's data"),
        "We need all data of a former employee removed from our workspace.",
        ("delete workspace data",),
        weight=0.5,
    ),
)


@dataclass(frozen=True)
class Customer:
    user_id: int | None
    email: str | None
    role: str | None
    session_id: int
    verified: bool


@dataclass(frozen=True)
class AccountCast:
    id: int
    code: str
    customers: tuple[Customer, ...]
    anonymous: Customer


@dataclass
class World:
    """What the tickets are written against: accounts with their customers, staff, and the tools' answers."""

    accounts: Weighted[AccountCast]  # a few large, many small
    reviewers: list[tuple[int, str]]  # (user id, username); supervisors are the last ones
    supervisors: list[tuple[int, str]]
    searches: dict[str, tuple[str, str]]  # query -> (content, source_ref)
    services: dict[str, tuple[str, str]]


def world_make(*, rng: random.Random) -> World:
    """Make (or find again) the small tables and ask the tools what evidence will quote."""
    roles_setup()
    accounts = [_account(i, rng) for i in range(1, ACCOUNTS + 1)]
    staff = [_staff(name, group) for name, group in STAFF]
    _knowledge_base(rng)
    for name, status in SERVICES.items():
        Service.objects.update_or_create(name=name, defaults={"status": status})
    _incidents()
    scope = SessionScope(f"S-{accounts[0].code}-ANON", accounts[0].id, False)  # searches and services: anyone
    searches = {q: _ask("search_docs", {"query": q, "max_results": 3}, scope) for t in TOPICS for q in t.queries}
    services = {s: _ask("read_service_status", {"service": s}, scope) for s in SERVICES}
    return World(
        accounts=Weighted((account, 1 / rank**0.9) for rank, account in enumerate(accounts, start=1)),
        reviewers=[(u.pk, u.username) for u in staff],
        supervisors=[(u.pk, u.username) for u, (_, group) in zip(staff, STAFF, strict=True) if group == SUPERVISORS],
        searches=searches,
        services=services,
    )


def _ask(tool: str, args: dict, scope: SessionScope) -> tuple[str, str]:
    """The tool's answer to `args` (normalized as the loop would), as evidence records it."""
    result = Dispatcher(TOOLS).dispatch(tool, scope, args, 0)
    return canonical_json(result.content), result.source_ref


def _account(i: int, rng: random.Random) -> AccountCast:
    code = f"{ACCOUNT_PREFIX}{i:03d}"
    domain = f"customer{i:03d}.example"
    account, _ = Account.objects.get_or_create(
        code=code, defaults={"name": f"Customer {i:03d}", "workspace": f"workspace-{i:03d}", "email_domains": [domain]}
    )
    size = max(3, int(120 / i**0.9))
    customers = []
    for n in range(1, size + 1):
        role = rng.choices(["owner", "editor", "viewer"], weights=[1, 4, 5])[0]
        user, _ = CustomerUser.objects.get_or_create(
            email=f"user{n:03d}@{domain}", defaults={"account": account, "role": role}
        )
        session, _ = CustomerSession.objects.get_or_create(
            ref=f"S-{code}-{n:03d}", defaults={"account": account, "user": user, "verified": True, "source": "zendesk"}
        )
        customers.append(Customer(user.pk, user.email, user.role, session.pk, True))
    anonymous, _ = CustomerSession.objects.get_or_create(
        ref=f"S-{code}-ANON", defaults={"account": account, "verified": False, "source": "zendesk"}
    )
    return AccountCast(account.pk, code, tuple(customers), Customer(None, None, None, anonymous.pk, False))


def _staff(username: str, group: str) -> User:
    user, created = User.objects.get_or_create(username=username, defaults={"is_staff": True})
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
        user.groups.add(Group.objects.get(name=group))
    return user


DOC_SENTENCES = {
    "export-role": "CSV export requires the editor role; jobs started by a viewer fail with EXPORT_ROLE_REQUIRED. "
    "A workspace owner can change a member's role under Settings > Members.",
    "export-timeout": "Exports of very large workspaces can time out with EXPORT_TIMEOUT; split the export by date "
    "range or schedule it at night.",
    "import-header": "An import is rejected with IMPORT_BAD_HEADER when the first row of the CSV does not name the "
    "columns; download the template and keep its header.",
    "api-rate": "The API allows 600 requests a minute per token; above it answers 429 Too Many Requests with a "
    "Retry-After header. Back off and retry.",
    "api-key": "Rotating an API key revokes the old key at once; update every integration with the new key.",
    "sso": "Single sign-on with SAML needs the identity provider's certificate to be current; an expired certificate "
    "sends users back to the login page.",
    "two-factor": "Recovery codes let you sign in without your two-factor device; an owner can reset two-factor "
    "for a member.",
    "invoice": "Invoices count the seats in use on the billing date; seats added during the month are charged "
    "pro rata.",
    "card": "A card declined on renewal is retried three times over a week; update the card under Billing.",
    "rename-links": "Renaming a workspace changes its address; old links redirect for 30 days.",
    "invite": "Invite a member under Settings > Members and choose their role: viewer, editor or owner.",
    "report-email": "Scheduled reports are sent by e-mail; a receiving server that rejects the message makes the job "
    "fail with SMTP_REJECTED.",
    "webhooks": "Webhook deliveries are retried for 24 hours; a sync whose endpoint does not answer in 10 seconds "
    "fails with WEBHOOK_TIMEOUT.",
    "delete-data": "An owner can delete a member's data under Settings > Privacy; deletion is final after 14 days.",
}
FILLER = (
    "This article is part of the help center.",
    "Contact support if the steps above do not help.",
    "Owners and editors see this setting; viewers do not.",
    "The change applies to every workspace of the account.",
)


def _knowledge_base(rng: random.Random) -> None:
    """Some 120 documents, a handful per topic plus general ones, a few with an older revision."""
    for topic in TOPICS:
        for k in range(1, 8):
            code, title = f"DOC-{topic.code.upper()}-{k}", f"{topic.subjects[0]} ({k})" if k > 1 else topic.subjects[0]
            body = " ".join([DOC_SENTENCES[topic.code], *rng.sample(FILLER, 2)])
            if k > 1:
                body = f"{' '.join(topic.queries)}: {body}"
            if k == 2:
                document_publish(code=code, title=title, body=f"Earlier text. {body}", public=True)
            document_publish(code=code, title=title, body=body, public=True)
    for k in range(1, 21):
        document_publish(
            code=f"DOC-GENERAL-{k}", title=f"Getting started, part {k}", body=" ".join(FILLER), public=True
        )


def _incidents() -> None:
    services = {s.name: s for s in Service.objects.filter(name__in=SERVICES)}
    for ref, name, title, status in (
        ("INC-9001", "export", "Delayed CSV exports", "resolved"),
        ("INC-9002", "billing", "Card payments failing for some banks", "open"),
        ("INC-9003", "api", "Elevated API error rate", "resolved"),
    ):
        Incident.objects.get_or_create(
            ref=ref,
            defaults={"service": services[name], "title": title, "status": status, "started_at": _incident_time(ref)},
        )


def _incident_time(ref: str) -> datetime:
    return timezone.now() - timedelta(days=int(ref[-1]) * 7)
