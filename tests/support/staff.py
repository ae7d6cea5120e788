"""Factories for the staff-surface tests (admin, API, dashboard, roles, browser).

The users and clients they make for each role are fixtures in tests/conftest.py.
"""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone

from engine.budgets import Budget
from engine.models import ModelRequest, ReviewPacket, Run, ToolAttempt
from engine.statuses import TERMINAL
from staff.auth import token_create
from tickets.models import Ticket

PASSWORD = "a-long-test-password"


def make_user(username: str, group: str | None) -> User:
    user = User.objects.create_user(username=username, password=PASSWORD, is_staff=True)
    if group:
        user.groups.add(Group.objects.get(name=group))
    return user


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def bearer(user: User, *, source: str = "") -> dict[str, str]:
    """An Authorization header with a new token of `user` (an integration's bound to the help desk `source`)."""
    _, raw = token_create(user=user, name="test", source=source)
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}


ENDINGS = [
    ("COMPLETED", ""),
    ("NEEDS_HELP", ""),
    ("NO_PROGRESS", ""),
    ("INVALID_OR_FORBIDDEN", "forbidden"),
    ("TOOL_LIMIT", ""),
]


def make_runs(n: int, *, ticket: Ticket | None = None, endings=ENDINGS, created_at=None) -> list[Run]:
    """`n` runs (ended ones with packets), a model request and a tool attempt each, written in bulk.

    Statuses cycle through `endings`; they are rows for the read-only pages, not loop outcomes.
    """
    ticket = ticket or Ticket.objects.get(ref="T-1001")
    now = created_at or timezone.now()
    budget = Budget().as_dict()
    runs = Run.objects.bulk_create(
        [
            Run(
                ticket=ticket,
                session_id=ticket.session_id,
                subject=ticket.subject,
                body=ticket.body,
                model_name="rules",
                budget=budget,
                status=endings[i % len(endings)][0],
                detail=endings[i % len(endings)][1],
                model_requests=2,
                tool_attempts=1 + i % 3,
                tokens_used=1000 + i,
                cost_used_micros=10 * i,
                created_at=now - timedelta(seconds=i),
                deadline_at=now + timedelta(seconds=45),
                ended_at=now,
            )
            for i in range(n)
        ]
    )
    ModelRequest.objects.bulk_create(
        [
            ModelRequest(
                run=r,
                seq=1,
                reserved_tokens=9000,
                reserved_cost_micros=0,
                input_tokens=500,
                output_tokens=50,
                charged_tokens=550,
                charged_cost_micros=0,
                outcome="ok",
                proposal="call read_job_status",
                started_at=now,
                finished_at=now,
                latency_ms=3,
            )
            for r in runs
        ]
    )
    ToolAttempt.objects.bulk_create(
        [
            ToolAttempt(
                run=r,
                seq=1,
                tool="read_job_status",
                args={"job_id": "J-42"},
                call_key="k",
                outcome="ok",
                started_at=now,
                finished_at=now,
                latency_ms=2,
            )
            for r in runs
        ]
    )
    ReviewPacket.objects.bulk_create(
        [
            ReviewPacket(
                run=r,
                summary="s" if r.status == "COMPLETED" else None,
                evidence_refs=[],
                attempts=[],
                open_questions=[],
                stop_reason=r.status,
                detail=r.detail,
                budget_spent={},
                created_at=now - timedelta(seconds=i),
                run_created_at=r.created_at,
                run_purpose=r.purpose,
            )
            for i, r in enumerate(runs)
            if r.status in TERMINAL  # a packet is written when a run ends
        ]
    )
    return runs
