"""The three read-only tools return what CONFORMANCE §4 and the demo data (§6) say."""
from __future__ import annotations

import pytest

from agentrun.tools import TOOLS
from tickets.selectors import SessionScope


@pytest.fixture
def dana(dana_session) -> SessionScope:
    return SessionScope.of(dana_session)


def search(scope, query, max_results=3):
    return TOOLS["search_docs"].backend(scope, {"query": query, "max_results": max_results})


def test_search_returns_the_current_revision_only(dana):
    result = search(dana, "export_role_required")
    export_doc = [r for r in result.content["results"] if r["id"] == "DOC-EXPORT-7"]
    assert export_doc and export_doc[0]["revision"] == "r3"
    assert export_doc[0]["title"] == "CSV export permissions"
    assert "EXPORT_ROLE_REQUIRED" in export_doc[0]["excerpt"]
    assert "open to all members" not in str(result.content)  # r1's text is not current
    assert "DOC-EXPORT-7@r3" in result.source_ref


def test_search_ranks_the_matching_document_first(dana):
    assert search(dana, "renaming a workspace roles").content["results"][0]["id"] == "DOC-RENAME-2"


@pytest.mark.parametrize("limit", [1, 2, 5])
def test_search_returns_at_most_max_results(dana, limit):
    assert 1 <= len(search(dana, "export workspace role", limit).content["results"]) <= limit


def test_search_with_no_match_is_an_empty_result(dana):
    result = search(dana, "zebra quantum pineapple")
    assert result.content == {"query": "zebra quantum pineapple", "results": []}


def test_an_injected_instruction_in_a_document_is_returned_as_data(dana):
    results = search(dana, "troubleshooting notes").content["results"]
    assert any(r["id"] == "DOC-NOTE-9" for r in results)


def test_service_status_shows_status_and_recent_incidents(dana):
    export = TOOLS["read_service_status"].backend(dana, {"service": "export"}).content
    assert export["status"] == "operational"
    assert [(i["id"], i["status"], i["resolved_at"]) for i in export["incidents"]] == [
        ("INC-311", "resolved", "2026-09-13T09:30:00Z")]
    billing = TOOLS["read_service_status"].backend(dana, {"service": "billing"}).content
    assert billing["status"] == "degraded"
    assert [(i["id"], i["status"], i["resolved_at"]) for i in billing["incidents"]] == [("INC-330", "open", None)]


def test_job_status_of_a_succeeded_job_has_no_failure_time(dana):
    content = TOOLS["read_job_status"].backend(dana, {"job_id": "J-41"}).content
    assert (content["status"], content["error_code"], content["failed_at"]) == ("succeeded", None, None)
    assert content["kind"] == "csv_export"


def test_there_are_exactly_three_read_only_tools():
    assert sorted(TOOLS) == ["read_job_status", "read_service_status", "search_docs"]
