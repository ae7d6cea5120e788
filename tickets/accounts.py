"""Customer accounts as an operator creates them (`manage.py create_account`): checked, then written.

Every ticket names an account (by its code), so accounts exist before the first ticket arrives.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from tickets.models import Account

# The code tickets name (`account` in POST /api/tickets): no spaces, so it reads the same in a URL, a CSV or a log.
ACCOUNT_CODE = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,31}$"


class AccountIn(BaseModel):
    """An account as given: a code and a name, and the workspace name when the operator knows it."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    code: str = Field(..., pattern=ACCOUNT_CODE)
    name: str = Field(..., min_length=1, max_length=200)
    workspace: str | None = Field(None, min_length=1, max_length=100)

    @field_validator("name", "workspace")
    @classmethod
    def _one_line(cls, value: str | None) -> str | None:
        if value is not None and any(ch < " " for ch in value):
            raise ValueError("must be one line of text, without control characters")
        return value


class AccountRefused(ValueError):
    """What was given does not make an account; the message names each field at fault."""


@dataclass(frozen=True)
class AccountSaved:
    account: Account
    created: bool


def account_input(**given: str | None) -> AccountIn:
    """`given` checked, or AccountRefused saying what is wrong with which field."""
    try:
        return AccountIn(**given)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in exc.errors())
        raise AccountRefused(problems) from None


def account_save(*, data: AccountIn) -> AccountSaved:
    """Create the account with `data.code`, or update its name (and workspace, when given) if it exists.

    A new account's workspace is its name unless one is given: the demo's tools show it as the current workspace.
    """
    changes = {"name": data.name} | ({"workspace": data.workspace} if data.workspace else {})
    account, created = Account.objects.update_or_create(
        code=data.code, defaults=changes, create_defaults={"workspace": data.name} | changes
    )
    return AccountSaved(account=account, created=created)
