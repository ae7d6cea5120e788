"""PURE: what changed between an evidence item as recorded and its source as it reads now.

`compare(tool, old, new)` takes two tool results (the recorded content and a
fresh read, the same shape, tools.lookups) and says `unchanged`, `changed`
(with each difference in plain words: `status: failed → succeeded`, a cited
document `DOC-EXPORT-7: r3 → r4`) or `gone` (a search that finds none of the
documents it cited). A source that could not be read at all is the caller's
`gone` or `could_not_check`; this module only compares.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import TextChoices

from tools.schemas import ToolName


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


def compare(tool: str, old: dict[str, Any], new: dict[str, Any],
            revisions: Mapping[str, str] | None = None) -> Comparison:
    """The recorded result `old` against the fresh result `new` of the same call of `tool`.

    `revisions` ({code: "rN"}, a search's cited documents as they stand now, whether or not the search
    still ranks them) lets a cited document read the same on every packet: see `_documents`.
    """
    if tool == ToolName.SEARCH_DOCS:
        return _documents(old, new, revisions)
    return _COMPARERS.get(tool, _flat)(old, new)


def word(value: Any) -> str:
    return "none" if value is None or value == "" else str(value)


def _field_differences(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[Difference]:
    """Scalar fields that differ, in the order the fresh result gives them (fields it no longer has last).

    The recorded content is canonical JSON (keys sorted); a fresh result keeps its tool's order (status first).
    """
    keys = list(new) + [k for k in old if k not in new]
    return [
        Difference(f"{prefix}{key}", word(old.get(key)), word(new.get(key)))
        for key in keys
        if not isinstance(old.get(key, new.get(key)), (list, dict)) and old.get(key) != new.get(key)
    ]


def _flat(old: dict[str, Any], new: dict[str, Any]) -> Comparison:
    """A job's status and the like: field by field."""
    return Comparison.of(_field_differences(old, new))


def _by_id(items: Any) -> dict[str, dict[str, Any]]:
    return {str(item["id"]): item for item in items or [] if isinstance(item, dict) and "id" in item}


def _service(old: dict[str, Any], new: dict[str, Any]) -> Comparison:
    """The service's fields, then its incidents by id: each one's fields, gone from the list, or new."""
    differences = _field_differences(old, new)
    before, after = _by_id(old.get("incidents")), _by_id(new.get("incidents"))
    for id_, incident in before.items():
        if id_ not in after:
            differences.append(Difference(f"incident {id_}", word(incident.get("status")), "no longer listed"))
        else:
            differences += _field_differences(incident, after[id_], prefix=f"incident {id_} ")
    differences += [Difference(f"incident {i}", "not listed", word(after[i].get("status"))) for i in after
                    if i not in before]
    return Comparison.of(differences)


def _documents(old: dict[str, Any], new: dict[str, Any], revisions: Mapping[str, str] | None = None) -> Comparison:
    """Each cited document by code: its revision (`r3 → r4`), its title, found no longer, or newly found.

    A cited document the fresh search does not list is looked up in `revisions`
    (its current revision, absent when no search can find it any more): with a
    newer revision it reads `r3 → r4`, with the same one it reads as cited (the
    search just ranks it out), and only a document no search can find reads `no
    longer found`. So the same document reads the same on every packet, whatever
    query cited it. Without `revisions`, a document the search does not list is
    `no longer found`. Excerpts follow the revision and are not compared. A
    search none of whose cited documents can be found any more is `gone`.
    """
    before, after = _by_id(old.get("results")), _by_id(new.get("results"))
    current = {code: after[code].get("revision") for code in after}
    current.update({code: rev for code, rev in (revisions or {}).items() if code not in current})
    if before and not before.keys() & current.keys():
        return Comparison.gone("the search no longer finds any of the documents it cited")
    differences: list[Difference] = []
    for code, cited in before.items():
        if code not in current:
            differences.append(Difference(code, word(cited.get("revision")), "no longer found", code))
            continue
        if cited.get("revision") != current[code]:
            differences.append(Difference(code, word(cited.get("revision")), word(current[code]), code))
        if code in after and cited.get("title") != after[code].get("title"):
            differences.append(Difference(f"{code} title", word(cited.get("title")), word(after[code].get("title"))))
    differences += [Difference(code, "not found", word(after[code].get("revision")), code) for code in after
                    if code not in before]
    return Comparison.of(differences)


_COMPARERS: dict[str, Callable[[dict[str, Any], dict[str, Any]], Comparison]] = {
    ToolName.READ_JOB_STATUS: _flat,
    ToolName.READ_SERVICE_STATUS: _service,
    ToolName.SEARCH_DOCS: _documents,
}
