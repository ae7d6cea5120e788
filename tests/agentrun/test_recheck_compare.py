"""The pure comparison of an evidence item as recorded with its source as it reads now (each tool's comparer)."""

import pytest

from tools.compare import Comparison, Difference, Outcome, needs_acknowledgement
from tools.registry import compare

JOB = {
    "job_id": "J-42",
    "kind": "csv_export",
    "status": "failed",
    "error_code": "EXPORT_ROLE_REQUIRED",
    "requested_by": "dana@acme.example",
    "failed_at": "2026-09-14T10:02:00Z",
    "finished_at": "2026-09-14T10:02:00Z",
}
SEARCH = {
    "query": "export role",
    "results": [
        {"id": "DOC-EXPORT-7", "revision": "r3", "title": "CSV export permissions", "excerpt": "CSV export requires…"},
        {"id": "DOC-NOTE-9", "revision": "r1", "title": "Export troubleshooting notes", "excerpt": "Export…"},
    ],
}
SERVICE = {
    "service": "export",
    "status": "operational",
    "incidents": [
        {"id": "INC-311", "title": "Delayed CSV exports", "status": "resolved", "started_at": "a", "resolved_at": "b"},
    ],
}


def _with(base, **changes):
    return {**base, **changes}


def _results(*docs):
    results = [{"id": code, "revision": revision, "title": title, "excerpt": "…"} for code, revision, title in docs]
    return {"query": "export role", "results": results}


EXPORT, NOTE = ("DOC-EXPORT-7", "r3", "CSV export permissions"), ("DOC-NOTE-9", "r1", "Export troubleshooting notes")

CASES = [
    ("job as it was", "read_job_status", JOB, dict(JOB), Outcome.UNCHANGED, []),
    (
        "job succeeded since",
        "read_job_status",
        JOB,
        _with(JOB, status="succeeded", error_code=None, failed_at=None),
        Outcome.CHANGED,
        [
            "status: failed → succeeded",
            "error_code: EXPORT_ROLE_REQUIRED → none",
            "failed_at: 2026-09-14T10:02:00Z → none",
        ],
    ),
    (
        "a field only the new read has",
        "read_job_status",
        JOB,
        _with(JOB, requester_current_role="editor"),
        Outcome.CHANGED,
        ["requester_current_role: none → editor"],
    ),
    ("search finds the same revisions", "search_docs", SEARCH, _results(EXPORT, NOTE), Outcome.UNCHANGED, []),
    (
        "a cited document has a newer revision",
        "search_docs",
        SEARCH,
        _results(("DOC-EXPORT-7", "r4", "CSV export permissions"), NOTE),
        Outcome.CHANGED,
        ["DOC-EXPORT-7: r3 → r4"],
    ),
    (
        "a cited document is no longer found",
        "search_docs",
        SEARCH,
        _results(EXPORT),
        Outcome.CHANGED,
        ["DOC-NOTE-9: r1 → no longer found"],
    ),
    (
        "a document now found too",
        "search_docs",
        SEARCH,
        _results(EXPORT, NOTE, ("DOC-NEW-1", "r1", "New")),
        Outcome.CHANGED,
        ["DOC-NEW-1: not found → r1"],
    ),
    (
        "a cited document retitled",
        "search_docs",
        SEARCH,
        _results(("DOC-EXPORT-7", "r3", "Exports"), NOTE),
        Outcome.CHANGED,
        ["DOC-EXPORT-7 title: CSV export permissions → Exports"],
    ),
    ("none of the cited documents found", "search_docs", SEARCH, _results(), Outcome.GONE, []),
    ("a search that found nothing still finds nothing", "search_docs", _results(), _results(), Outcome.UNCHANGED, []),
    ("service as it was", "read_service_status", SERVICE, dict(SERVICE), Outcome.UNCHANGED, []),
    (
        "service degraded with a new incident",
        "read_service_status",
        SERVICE,
        _with(
            SERVICE,
            status="degraded",
            incidents=[
                {"id": "INC-400", "title": "Slow", "status": "open", "started_at": "c", "resolved_at": None},
                *SERVICE["incidents"],
            ],
        ),
        Outcome.CHANGED,
        ["status: operational → degraded", "incident INC-400: not listed → open"],
    ),
    (
        "an incident reopened, another dropped off",
        "read_service_status",
        _with(SERVICE, incidents=[*SERVICE["incidents"], {"id": "INC-200", "status": "resolved"}]),
        _with(SERVICE, incidents=[_with(SERVICE["incidents"][0], status="open", resolved_at=None)]),
        Outcome.CHANGED,
        [
            "incident INC-311 status: resolved → open",
            "incident INC-311 resolved_at: b → none",
            "incident INC-200: resolved → no longer listed",
        ],
    ),
]


@pytest.mark.parametrize("tool,old,new,outcome,words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_compare(tool, old, new, outcome, words):
    result = compare(tool, old, new)
    assert result.outcome == outcome
    assert [str(d) for d in result.differences] == words


def test_a_newer_revision_names_the_document_to_link_to():
    (difference,) = compare("search_docs", SEARCH, _results(("DOC-EXPORT-7", "r4", EXPORT[2]), NOTE)).differences
    assert difference == Difference("DOC-EXPORT-7", "r3", "r4", document="DOC-EXPORT-7")
    assert Difference.from_dict(difference.as_dict()) == difference


@pytest.mark.parametrize(
    "outcome,acknowledge",
    [
        (Outcome.CHANGED, True),
        (Outcome.GONE, True),
        (Outcome.UNCHANGED, False),
        (Outcome.COULD_NOT_CHECK, False),
        ("changed", True),
        ("gone", True),
        ("unchanged", False),
    ],
)
def test_changed_and_gone_need_an_acknowledgement(outcome, acknowledge):
    assert needs_acknowledgement(outcome) is acknowledge


def test_summary_in_plain_words():
    assert compare("read_job_status", JOB, _with(JOB, status="running")).summary == "changed: status: failed → running"
    assert Comparison.unchecked("no answer in time").summary == "could not check: no answer in time"
    assert Comparison(Outcome.UNCHANGED).summary == "unchanged"


@pytest.mark.parametrize(
    "revisions,outcome,words",
    [
        ({"DOC-EXPORT-7": "r3", "DOC-NOTE-9": "r2"}, Outcome.CHANGED, ["DOC-NOTE-9: r1 → r2"]),
        ({"DOC-EXPORT-7": "r3", "DOC-NOTE-9": "r1"}, Outcome.UNCHANGED, []),
        ({"DOC-EXPORT-7": "r3"}, Outcome.CHANGED, ["DOC-NOTE-9: r1 → no longer found"]),
    ],
    ids=["ranked out with a newer revision", "ranked out as cited", "found by no search"],
)
def test_a_cited_document_the_search_leaves_out_reads_as_it_stands_now(revisions, outcome, words):
    result = compare("search_docs", SEARCH, _results(EXPORT), revisions)
    assert result.outcome == outcome and [str(d) for d in result.differences] == words


def test_a_search_is_gone_only_when_none_of_its_documents_can_be_found():
    assert compare("search_docs", SEARCH, _results(), {}).outcome == Outcome.GONE
    found_elsewhere = compare("search_docs", SEARCH, _results(), {"DOC-EXPORT-7": "r4", "DOC-NOTE-9": "r1"})
    assert found_elsewhere.outcome == Outcome.CHANGED
    assert [str(d) for d in found_elsewhere.differences] == ["DOC-EXPORT-7: r3 → r4"]
