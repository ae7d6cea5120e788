"""search_docs: the public documentation's current revisions, ranked for a query.

Anyone may search (the documents are public). A result names each document with the revision it
read (`DOC-EXPORT-7@r3`), so staff open that revision and a re-check says which cited document has
a newer one since. A document with a public address (`Document.url`: an imported page's) carries it
as `url`, for the model to cite and staff to follow; one without has no `url` key, so its result
reads as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field, StringConstraints, field_validator

from kit.sources import cut_excerpt
from tickets.search import best_passage, documents_search, query_of
from tickets.selectors import SessionScope, documents_current_revisions
from tools.base import CitedDocument, ResultView, Tool, ToolArgs, anyone
from tools.compare import Comparison, Difference, by_id, word
from tools.lookups import UNBOUNDED, Lookup, ToolResult

NAME = "search_docs"


class SearchDocsArgs(ToolArgs):
    """Search the public documentation."""

    case_rules = {"query": str.casefold}

    query: Annotated[str, StringConstraints(min_length=1, max_length=200)] = Field(
        description="What to look for (1-200 characters)."
    )
    max_results: int = Field(3, description="How many documents to return (1-5, default 3).")

    @field_validator("max_results")
    @classmethod
    def _clamp(cls, value: int) -> int:
        if value < 1:
            raise ValueError("max_results must be at least 1")
        return min(value, 5)


def search_docs(scope: SessionScope, args: dict[str, Any], lookup: Lookup = UNBOUNDED) -> ToolResult:
    query = query_of(args["query"])  # prepared once: the search ranks with it, the excerpts quote by it
    revisions = documents_search(query=query, limit=args["max_results"])
    results = [
        {
            "id": r.document.code,
            "revision": r.label,
            "title": r.document.title,
            "excerpt": best_passage(r.body, query),
        }
        | ({"url": r.document.url} if r.document.url else {})
        for r in revisions
    ]
    source = ", ".join(f"{r['id']}@{r['revision']}" for r in results) or "no matching documents"
    return ToolResult({"query": args["query"], "results": results}, source)


# --- as staff see it ------------------------------------------------------------------------------


class SearchView(ResultView):
    kind = "document"
    cites_documents = True

    def source(self, source_ref: str) -> str:
        return ", ".join(s.strip().replace("@", " revision ") for s in source_ref.split(",")) or source_ref

    def excerpt(self, content: dict[str, Any], width: int) -> str:
        hits = content.get("results", [])
        text = " | ".join(f"{h['id']} {h['revision']} “{h['title']}”: {cut_excerpt(h['excerpt'])}" for h in hits)
        return cut_excerpt(text or f"No documents matched “{content.get('query', '')}”.", width)

    def documents(self, content: dict[str, Any]) -> tuple[CitedDocument, ...]:
        return tuple(
            CitedDocument(h["id"], h["revision"], h["title"], h["excerpt"], h.get("url", ""))
            for h in content.get("results", [])
        )


# --- re-checked -----------------------------------------------------------------------------------


def cited_now(recorded: dict[str, Any]) -> dict[str, str]:
    """The search's cited documents as they stand now, whether or not the search still ranks them."""
    codes = [str(r["id"]) for r in recorded.get("results") or [] if isinstance(r, dict) and "id" in r]
    return documents_current_revisions(codes=codes)


def compare(old: dict[str, Any], new: dict[str, Any], revisions: Mapping[str, str] | None = None) -> Comparison:
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
    before, after = by_id(old.get("results")), by_id(new.get("results"))
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
    differences += [
        Difference(code, "not found", word(after[code].get("revision")), code) for code in after if code not in before
    ]
    return Comparison.of(differences)


TOOL = Tool(
    NAME,
    SearchDocsArgs,
    anyone,
    search_docs,
    reads="the knowledge base",
    view=SearchView(),
    compare=compare,
    standing=cited_now,
)
