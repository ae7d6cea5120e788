"""Writes to the ticket domain."""
from __future__ import annotations

import hashlib
from typing import Any

from django.db import transaction
from django.utils import timezone

from supportagent.rows import row_find, row_insert, row_update

from .models import Evidence, Ticket


def evidence_content_hash(*, tool: str, args_key: str, content: str) -> str:
    return hashlib.sha256(f"{tool}\n{args_key}\n{content}".encode()).hexdigest()


def evidence_record(
    *, ticket_id: int, tool: str, args: dict[str, Any], args_key: str, content: str,
    source_ref: str, truncated: bool, run_id: int | None,
) -> Evidence:
    """Record one tool result as evidence of the ticket, or reuse the identical one.

    Numbering is per ticket (E1, E2, …) in order of first appearance; it is
    given under the ticket's row lock, so it must run inside a transaction.
    Evidence is never changed or removed, so an identical item found before
    taking the lock is the one to reuse.
    """
    assert transaction.get_connection().in_atomic_block, "evidence_record needs a transaction"
    digest = evidence_content_hash(tool=tool, args_key=args_key, content=content)
    existing = row_find(Evidence, ticket=ticket_id, content_hash=digest)
    if existing is not None:
        return existing
    ticket = row_find(Ticket, lock=True, pk=ticket_id)
    if ticket is None:
        raise Ticket.DoesNotExist(f"no ticket {ticket_id}")
    existing = row_find(Evidence, ticket=ticket_id, content_hash=digest)  # recorded while we waited for the lock
    if existing is not None:
        return existing
    ticket.evidence_count += 1
    row_update(ticket, ["evidence_count"])
    evidence = Evidence(
        ticket_id=ticket_id, number=ticket.evidence_count, tool=tool, args=args, content=content,
        content_hash=digest, source_ref=source_ref[:200], truncated=truncated,
        captured_at=timezone.now(), run_id=run_id,
    )
    row_insert(evidence)
    return evidence
