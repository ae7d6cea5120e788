"""Tickets from a help desk: the shape an intake request must have, and the ref a new ticket gets. Pure."""

from __future__ import annotations

import hashlib
import re
import uuid

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
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


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


class TicketIn(_Strict):
    """`POST /api/tickets` and `POST /api/intake/zendesk`: a ticket as its help desk has it now."""

    source: str = Field(..., pattern=SOURCE)
    external_id: str = Field(..., pattern=EXTERNAL_ID)
    subject: str = Field(..., min_length=1, max_length=300, pattern=NO_NUL)
    body: str = Field(..., min_length=1, max_length=MAX_BODY_CHARS, pattern=NO_NUL)
    account: str = Field(..., min_length=1, max_length=32, pattern=NO_NUL, description="The account's code.")
    session: SessionIn

    @field_validator("subject")
    @classmethod
    def _subject(cls, value: str) -> str:
        return single_line_check(value, "subject")


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
