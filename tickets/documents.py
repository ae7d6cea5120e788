"""A document as it arrives (from a file or a CMS), checked, and whether it makes a new revision.

Pure: no queries. `DocumentIn` is the one definition of what a document may be,
for the API and for `import_docs` alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kit.lines import single_line_check
from tickets.models import Document

CODE_MAX = Document._meta.get_field("code").max_length
CODE_PATTERN = r"^[A-Z0-9][A-Z0-9_-]*$"  # like DOC-EXPORT-7: capitals, digits, '-' and '_'
TITLE_MAX = Document._meta.get_field("title").max_length
URL_MAX = Document._meta.get_field("url").max_length
BODY_MAX = 60_000  # characters; a request to the API is at most 64 KiB anyway


def _clean(value: str, what: str) -> str:
    """Outer whitespace stripped; never blank, never a NUL (PostgreSQL cannot store it), always valid UTF-8."""
    if "\x00" in value:
        raise ValueError(f"the {what} contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"the {what} is not valid Unicode (a lone surrogate)") from None
    value = value.strip()
    if not value:
        raise ValueError(f"the {what} is empty")
    return value


class DocumentText(BaseModel):
    """What a revision says, and who may read it: the body of `PUT /api/documents/{code}`."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    title: str = Field(min_length=1, max_length=TITLE_MAX)
    body: str = Field(min_length=1, max_length=BODY_MAX)
    public: bool = True

    @field_validator("title")
    @classmethod
    def _title(cls, value: str) -> str:
        return single_line_check(_clean(value, "title"), "title")

    @field_validator("body")
    @classmethod
    def _body(cls, value: str) -> str:
        return _clean(value, "body")


class DocumentIn(DocumentText):
    """A whole document: its text, its code, and where it lives (its public address, its file's other metadata)."""

    code: str = Field(min_length=1, max_length=CODE_MAX, pattern=CODE_PATTERN)
    url: str = Field(default="", max_length=URL_MAX)
    metadata: dict[str, Any] = Field(default_factory=dict)


class Change(StrEnum):
    ADDED = "added"  # a new document, revision r1
    REVISED = "revised"  # a new revision of a known document
    UNCHANGED = "unchanged"  # the current revision already says this: nothing written


@dataclass(frozen=True)
class Current:
    """A known document as it reads now; `body` is None when it has no current revision (pruned)."""

    title: str
    public: bool
    body: str | None


def publish_change(current: Current | None, incoming: DocumentText) -> Change:
    """What publishing `incoming` does: a new revision only when the body, title or visibility differ."""
    if current is None:
        return Change.ADDED
    same = (current.body, current.title, current.public) == (incoming.body, incoming.title, incoming.public)
    return Change.UNCHANGED if same else Change.REVISED
