"""Customer accounts as an operator creates them (`manage.py create_account`): checked, then written.

Every ticket names an account (by its code), so accounts exist before the first ticket arrives.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from tickets.models import Account

# The code tickets name (`account` in POST /api/tickets): no spaces, so it reads the same in a URL, a CSV or a log.
ACCOUNT_CODE = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,31}$"


# What intake matches (tickets.services.account_for_intake): a help desk's organization external id, and a
# requester's e-mail domain; both kept lower-case (Account.save).
ORG_ID = r"^[\x21-\x7e]{1,64}$"  # printable ASCII, no spaces
EMAIL_DOMAIN = (
    r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$"
)


class AccountIn(BaseModel):
    """An account as given: a code and a name, the workspace name when the operator knows it, and the
    organization ids and e-mail domains intake knows it by (None: leave them as they are)."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    code: str = Field(..., pattern=ACCOUNT_CODE)
    name: str = Field(..., min_length=1, max_length=200)
    workspace: str | None = Field(None, min_length=1, max_length=100)
    org_ids: list[str] | None = None
    email_domains: list[str] | None = None

    @field_validator("name", "workspace")
    @classmethod
    def _one_line(cls, value: str | None) -> str | None:
        if value is not None and any(ch < " " for ch in value):
            raise ValueError("must be one line of text, without control characters")
        return value

    @field_validator("org_ids")
    @classmethod
    def _org_ids(cls, value: list[str] | None) -> list[str] | None:
        return _listed(value, ORG_ID, "an organization id (printable characters, no spaces, up to 64)")

    @field_validator("email_domains")
    @classmethod
    def _email_domains(cls, value: list[str] | None) -> list[str] | None:
        """`@acme.example` is read as `acme.example`, as the admin's form reads it."""
        value = [v.strip().lstrip("@") for v in value] if value is not None else None
        return _listed(value, EMAIL_DOMAIN, "an e-mail domain such as acme.example")


def _listed(values: list[str] | None, pattern: str, what: str) -> list[str] | None:
    """`values` lower-case, each once, in order; ValueError naming the first that is not `what`."""
    if values is None:
        return None
    for value in values:
        if not re.fullmatch(pattern, value):
            raise ValueError(f"{value!r} is not {what}")
    return list(dict.fromkeys(v.lower() for v in values))


class AccountRefused(ValueError):
    """What was given does not make an account; the message names each field at fault."""


@dataclass(frozen=True)
class AccountSaved:
    account: Account
    created: bool


def account_input(**given: str | list[str] | None) -> AccountIn:
    """`given` checked, or AccountRefused saying what is wrong with which field."""
    try:
        return AccountIn(**given)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in exc.errors())
        raise AccountRefused(problems) from None


def account_save(*, data: AccountIn) -> AccountSaved:
    """Create the account with `data.code`, or update its name (and workspace, organization ids and e-mail
    domains, when given: they replace the lists) if it exists.

    A new account's workspace is its name unless one is given: the demo's tools show it as the current workspace.
    """
    changes = {"name": data.name} | ({"workspace": data.workspace} if data.workspace else {})
    changes |= {name: value for name in ("org_ids", "email_domains") if (value := getattr(data, name)) is not None}
    account, created = Account.objects.update_or_create(
        code=data.code, defaults=changes, create_defaults={"workspace": data.name} | changes
    )
    return AccountSaved(account=account, created=created)
