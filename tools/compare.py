"""PURE: the words for what changed between an evidence item as recorded and its source as it reads now.

A tool's comparer (`Tool.compare`, in the tool's own module; `tools.registry.compare` picks it)
takes two results of the same call (the recorded content and a fresh read, the same shape) and
says `unchanged`, `changed` (with each difference in plain words: `status: failed → succeeded`, a
cited document `DOC-EXPORT-7: r3 → r4`) or `gone` (a search that finds none of the documents it
cited). This module holds what comparers share: the outcome, a difference, field-by-field
comparison (`flat`). A source that could not be read at all is the caller's `gone` or
`could_not_check`; comparers only compare.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import TextChoices


class Outcome(TextChoices):
    UNCHANGED = "unchanged", "unchanged"
    CHANGED = "changed", "changed"
    GONE = "gone", "gone"
    COULD_NOT_CHECK = "could_not_check", "could not check"


def needs_acknowledgement(result: str) -> bool:
    """An accepting reviewer must say they saw this result (a tuple: a choice compares equal to its value)."""
    return result in (Outcome.CHANGED, Outcome.GONE)


@dataclass(frozen=True)
class Difference:
    """One field that reads differently now. `document`: the code of a cited document to link to."""

    field: str
    old: str
    new: str
    document: str | None = None

    def __str__(self) -> str:
        return f"{self.field}: {self.old} → {self.new}"

    def as_dict(self) -> dict[str, Any]:
        return {"field": self.field, "old": self.old, "new": self.new, "document": self.document, "text": str(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Difference:
        return cls(data["field"], data["old"], data["new"], data.get("document"))


@dataclass(frozen=True)
class Comparison:
    """The outcome of one re-check; `reason` says why a source is gone or could not be checked."""

    outcome: Outcome
    differences: tuple[Difference, ...] = ()
    reason: str = ""
    transient: bool = False  # could not check this time (no answer in time): worth trying again soon

    @classmethod
    def of(cls, differences: list[Difference]) -> Comparison:
        return cls(Outcome.CHANGED, tuple(differences)) if differences else cls(Outcome.UNCHANGED)

    @classmethod
    def gone(cls, reason: str) -> Comparison:
        return cls(Outcome.GONE, reason=reason)

    @classmethod
    def unchecked(cls, reason: str, *, transient: bool = False) -> Comparison:
        return cls(Outcome.COULD_NOT_CHECK, reason=reason, transient=transient)

    @property
    def summary(self) -> str:
        """The outcome in plain words, with its differences or its reason."""
        detail = "; ".join(str(d) for d in self.differences) or self.reason
        return f"{self.outcome.label}: {detail}" if detail else self.outcome.label


def word(value: Any) -> str:
    return "none" if value is None or value == "" else str(value)


def field_differences(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[Difference]:
    """Scalar fields that differ, in the order the fresh result gives them (fields it no longer has last).

    The recorded content is canonical JSON (keys sorted); a fresh result keeps its tool's order (status first).
    """
    keys = list(new) + [k for k in old if k not in new]
    return [
        Difference(f"{prefix}{key}", word(old.get(key)), word(new.get(key)))
        for key in keys
        if not isinstance(old.get(key, new.get(key)), (list, dict)) and old.get(key) != new.get(key)
    ]


def flat(old: dict[str, Any], new: dict[str, Any], standing: Mapping[str, str] | None = None) -> Comparison:
    """A job's status and the like: field by field. Nothing besides the two results is needed."""
    return Comparison.of(field_differences(old, new))


def by_id(items: Any) -> dict[str, dict[str, Any]]:
    return {str(item["id"]): item for item in items or [] if isinstance(item, dict) and "id" in item}
