"""Tickets from a help desk: the shape an intake request must have, and the ref a new ticket gets. Pure."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import validate_email
from django.db.models import TextChoices
from pydantic import BaseModel, ConfigDict, Field, field_validator

from kit.lines import single_line_check

NO_NUL = r"^[^\x00]*$"
SOURCE = r"^[a-z0-9][a-z0-9-]{0,31}$"  # Ticket.source: a short slug
EXTERNAL_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"  # Ticket.external_id
SESSION_REF = r"^[\x21-\x7e]{1,64}$"  # CustomerSession.ref: printable ASCII, no spaces
MAX_BODY_CHARS = 32_000
MAX_NESTING = 5  # a ticket is two levels deep; a few more for fields a help desk admin adds


class HelpDesk(TextChoices):
    """The help desks we know, by their `source`. Any other slug is a source too (Ticket.source is open)."""

    ZENDESK = "zendesk", "Zendesk"
    FRESHDESK = "freshdesk", "Freshdesk"
    HELPSCOUT = "helpscout", "Help Scout"
    INTERCOM = "intercom", "Intercom"
    JIRA = "jira", "Jira Service Management"


# Short ticket ref prefixes for the help desks we know; any other source is shortened.
PREFIXES = {
    HelpDesk.ZENDESK: "ZD",
    HelpDesk.FRESHDESK: "FD",
    HelpDesk.HELPSCOUT: "HS",
    HelpDesk.INTERCOM: "IC",
    HelpDesk.JIRA: "JSM",
}
MAX_REF = 32  # Ticket.ref


class _Strict(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)


class SessionIn(_Strict):
    """The requester as the help desk knows them; `verified` is the help desk's identity check."""

    ref: str = Field(..., pattern=SESSION_REF)
    verified: bool
    email: str | None = Field(None, max_length=254, pattern=NO_NUL)

    @field_validator("email")
    @classmethod
    def _email(cls, value: str | None) -> str | None:
        """Blank is no email (a help desk's placeholder for a requester who has none renders empty)."""
        if not value:
            return None
        try:
            validate_email(value)
        except DjangoValidationError:
            raise ValueError("not a valid email address") from None
        return value


class CommentIn(_Strict):
    """A comment added on the ticket in the help desk, kept as one of the ticket's messages.

    `id` is the help desk's comment id: a comment whose id the ticket already has is not added
    again. `author` is "customer" or "staff", or the author's id written as `session.ref` is: the
    requester's is the customer's, anyone else's is staff's.
    """

    id: str = Field(
        ..., pattern=EXTERNAL_ID, description="The comment's id in the help desk; the same id again adds nothing."
    )
    body: str = Field(..., min_length=1, pattern=NO_NUL, description=f"Over {MAX_BODY_CHARS} characters it is cut.")
    author: str = Field(
        ...,
        pattern=SESSION_REF,
        description='"customer", "staff", or the author\'s id written as `session.ref` writes the requester\'s.',
    )
    created_at: datetime | None = Field(
        None, description="When it was written (ISO 8601 with a time zone); else the ticket's `updated_at`."
    )

    @field_validator("body")
    @classmethod
    def _body(cls, value: str) -> str:
        return body_cut(value)

    @field_validator("created_at", mode="before")
    @classmethod
    def _created_at(cls, value: Any) -> datetime | None:
        return aware_time(value)


class TicketIn(_Strict):
    """`POST /api/tickets` and `POST /api/intake/zendesk`: a ticket as its help desk has it now.

    Fields it does not know are kept (`model_extra`, then the ticket's `extra`), never a refusal:
    a help desk admin adds fields to a trigger's body. A blank `account` or `organization` is none
    (Zendesk's placeholders render empty).
    """

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    source: str = Field(..., pattern=SOURCE)
    external_id: str = Field(..., pattern=EXTERNAL_ID)
    subject: str = Field(..., min_length=1, max_length=300, pattern=NO_NUL)
    body: str = Field(..., min_length=1, pattern=NO_NUL, description=f"Over {MAX_BODY_CHARS} characters it is cut.")
    account: str | None = Field(None, max_length=32, pattern=NO_NUL, description="The account's code.")
    organization: str | None = Field(
        None, max_length=64, pattern=NO_NUL, description="The requester's organization's external id."
    )
    session: SessionIn
    comment: CommentIn | None = Field(None, description="A comment added now, kept as the ticket's next message.")
    updated_at: datetime | None = Field(
        None,
        description="When the help desk last updated the ticket (ISO 8601 with a time zone). A request older than "
        "the latest one taken changes no field; its comment is still added.",
    )

    @field_validator("updated_at", mode="before")
    @classmethod
    def _updated_at(cls, value: Any) -> datetime | None:
        return aware_time(value)

    @field_validator("subject")
    @classmethod
    def _subject(cls, value: str) -> str:
        return single_line_check(value, "subject")

    @field_validator("body")
    @classmethod
    def _body(cls, value: str) -> str:
        return body_cut(value)

    @field_validator("account", "organization")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        return value.strip() or None if value is not None else None


def aware_time(value: Any) -> datetime | None:
    """An ISO 8601 time with a time zone, as a datetime (Zendesk's `2013-12-12T05:35Z` included); None or blank is none.

    Refused (ValueError) without a time zone: whose clock it was would be a guess, and the
    times are compared with the ones the ticket holds.
    """
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip().upper())
        except ValueError:
            raise ValueError("not an ISO 8601 time") from None
    else:
        raise ValueError("not an ISO 8601 time")
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise ValueError("an ISO 8601 time needs a time zone (Z or an offset)")
    return parsed


def body_cut(body: str) -> str:
    """The body kept to MAX_BODY_CHARS, with a marker saying how much was cut (so nobody reads it as whole)."""
    if len(body) <= MAX_BODY_CHARS:
        return body
    return f"{body[:MAX_BODY_CHARS]}\n\n[… {len(body) - MAX_BODY_CHARS:,} more characters cut at intake]"


class BodyRefused(ValueError):
    """A request body intake will not read: not JSON, a key twice, or nested too deep."""


def body_json(body: bytes) -> Any:
    """The body's JSON; BodyRefused when it is malformed, repeats a key in an object, or nests past MAX_NESTING."""
    try:
        value = json.loads(body, object_pairs_hook=_unique_keys)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise BodyRefused("The request body is not valid JSON.") from None
    except RecursionError:
        raise BodyRefused(f"The request body nests deeper than {MAX_NESTING} levels.") from None
    if _depth(value) > MAX_NESTING:
        raise BodyRefused(f"The request body nests deeper than {MAX_NESTING} levels.")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's keys, refused when one repeats: which of the two values counts is not ours to guess."""
    value = dict(pairs)
    if len(value) != len(pairs):
        twice = sorted({key for key, _ in pairs if sum(1 for k, _ in pairs if k == key) > 1})
        raise BodyRefused(f"The request body repeats the key {twice[0]!r} in one object.")
    return value


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        value = list(value.values())
    elif not isinstance(value, list):
        return 0
    return 1 + max(map(_depth, value), default=0)


def ref_candidates(*, source: str, external_id: str) -> list[str]:
    """Refs for a new ticket, best first: readable (`ZD-48213`), then derived from a digest, then random.

    The first is taken when free; the digest one when the readable one is taken
    (a ticket made by hand, another source with the same prefix) or too long.
    """
    prefix = PREFIXES.get(source) or re.sub(r"[^A-Z0-9]", "", source.upper())[:8] or "EXT"
    readable = f"{prefix}-{re.sub(r'[^A-Za-z0-9_-]', '-', external_id)}"
    digest = hashlib.sha256(f"{source}\n{external_id}".encode()).hexdigest()[:10].upper()
    candidates = [readable] if len(readable) <= MAX_REF else []
    return [*candidates, f"{prefix}-{digest}", f"{prefix}-{uuid.uuid4().hex[:16].upper()}"]
