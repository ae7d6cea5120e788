"""The three read-only tools return what CONFORMANCE §4 and the demo data (§6) say."""

from __future__ import annotations

import pytest
from django.utils import timezone

from tickets.models import Document, DocumentRevision
from tickets.selectors import SessionScope
from tickets.services import document_publish
from tools.registry import TOOLS


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


def test_search_gives_a_document_s_public_url_when_it_has_one(dana):
    Document.objects.filter(code="DOC-EXPORT-7").update(url="https://help.example.com/csv-export")
    results = {r["id"]: r for r in search(dana, "export role", max_results=5).content["results"]}
    assert results["DOC-EXPORT-7"]["url"] == "https://help.example.com/csv-export"
    assert "DOC-NOTE-9" in results and "url" not in results["DOC-NOTE-9"]  # none: the result reads as before


def test_search_ranks_the_matching_document_first(dana):
    assert search(dana, "renaming a workspace roles").content["results"][0]["id"] == "DOC-RENAME-2"


@pytest.mark.parametrize("limit", [1, 2, 5])
def test_search_returns_at_most_max_results(dana, limit):
    assert 1 <= len(search(dana, "export workspace role", limit).content["results"]) <= limit


def test_search_with_no_match_is_an_empty_result(dana):
    result = search(dana, "zebra quantum pineapple")
    assert result.content == {"query": "zebra quantum pineapple", "results": []}


def ids(result) -> list[str]:
    return [r["id"] for r in result.content["results"]]


def test_search_finds_a_new_revision_and_forgets_the_old_one(dana):
    document = Document.objects.get(code="DOC-EXPORT-7")
    document.revisions.filter(is_current=True).update(is_current=False)
    DocumentRevision.objects.create(
        document=document, number=4, body="Exports need the zircon badge.", is_current=True, published_at=timezone.now()
    )
    assert ids(search(dana, "zircon badge")) == ["DOC-EXPORT-7"]
    found = search(dana, "export_role_required").content["results"]
    assert [(r["revision"], "EXPORT_ROLE_REQUIRED" in r["excerpt"]) for r in found if r["id"] == "DOC-EXPORT-7"] == [
        ("r4", False)
    ]


def test_search_follows_a_published_text_and_a_renamed_title(dana):
    document_publish(
        code="DOC-EXPORT-7",
        title="CSV export permissions",
        public=True,
        body="Nothing about roles here; ask about the obsidian ledger.",
    )
    assert ids(search(dana, "obsidian ledger")) == ["DOC-EXPORT-7"]
    Document.objects.filter(code="DOC-EXPORT-7").update(title="Basalt archive settings")
    assert ids(search(dana, "basalt archive")) == ["DOC-EXPORT-7"]
    assert "DOC-EXPORT-7" not in ids(search(dana, "CSV export permissions"))


def test_search_ranks_a_title_match_above_a_body_match(dana):
    now = timezone.now()
    in_title = Document.objects.create(code="DOC-T", title="Quartz retention")
    in_body = Document.objects.create(code="DOC-B", title="Other matters")
    DocumentRevision.objects.create(document=in_title, number=1, body="Unrelated.", is_current=True, published_at=now)
    DocumentRevision.objects.create(
        document=in_body, number=1, body="Quartz retention applies.", is_current=True, published_at=now
    )
    assert ids(search(dana, "quartz retention")) == ["DOC-T", "DOC-B"]


def test_an_injected_instruction_in_a_document_is_returned_as_data(dana):
    results = search(dana, "troubleshooting notes").content["results"]
    assert any(r["id"] == "DOC-NOTE-9" for r in results)


def test_service_status_shows_status_and_recent_incidents(dana):
    export = TOOLS["read_service_status"].backend(dana, {"service": "export"}).content
    assert export["status"] == "operational"
    assert [(i["id"], i["status"], i["resolved_at"]) for i in export["incidents"]] == [
        ("INC-311", "resolved", "2026-09-13T09:30:00Z")
    ]
    billing = TOOLS["read_service_status"].backend(dana, {"service": "billing"}).content
    assert billing["status"] == "degraded"
    assert [(i["id"], i["status"], i["resolved_at"]) for i in billing["incidents"]] == [("INC-330", "open", None)]


def test_job_status_of_a_succeeded_job_has_no_failure_time(dana):
    content = TOOLS["read_job_status"].backend(dana, {"job_id": "J-41"}).content
    assert (content["status"], content["error_code"], content["failed_at"]) == ("succeeded", None, None)
    assert content["kind"] == "csv_export"


def test_there_are_exactly_three_read_only_tools():
    assert sorted(TOOLS) == ["read_job_status", "read_service_status", "search_docs"]


@pytest.mark.parametrize("word", ["rename", "renamed", "renaming", "Renames"])
def test_search_matches_a_word_in_any_of_its_forms(dana, word):
    assert ids(search(dana, word))[0] == "DOC-RENAME-2"


def test_sqlite_matches_a_word_in_any_of_its_forms_too(sqlite_search):
    words = ["rename", "renamed", "renaming", "Renames"]
    found = sqlite_search.run([{"demo": True}, *({"search": w} for w in words)])
    assert [f[0] for f in found] == ["DOC-RENAME-2"] * len(words)


def test_search_matches_words_not_letters_inside_them(dana, sqlite_search):
    assert ids(search(dana, "x")) == [] and ids(search(dana, "port")) == []  # "export" holds x and port
    assert sqlite_search.run([{"demo": True}, {"search": "x"}, {"search": "port"}]) == [[], []]


def test_sqlite_search_ranks_like_the_postgres_one_on_the_demo_documents(dana, sqlite_search):
    queries = ("export_role_required", "renaming a workspace roles", "export troubleshooting")
    found = sqlite_search.run([{"demo": True}, *({"search": q} for q in queries)])
    assert [f[0] for f in found] == [ids(search(dana, q))[0] for q in queries]


@pytest.mark.parametrize("word", ["access", "accessing", "Albatross", "status", "process"])
def test_search_finds_words_ending_in_s_as_written(dana, word):
    document = Document.objects.create(code="DOC-WORDS-1", title="Words", public=True)
    DocumentRevision.objects.create(
        document=document,
        number=1,
        is_current=True,
        published_at=timezone.now(),
        body="Members lose access while an albatross status check is in process.",
    )
    assert "DOC-WORDS-1" in ids(search(dana, word))


def test_sqlite_finds_words_ending_in_s_as_written(sqlite_search):
    words = ["access", "accessing", "Albatross", "status", "process"]
    body = "Members lose access while an albatross status check is in process."
    found = sqlite_search.run(
        [{"document": {"code": "DOC-WORDS-1", "title": "Words", "body": body}}, *({"search": w} for w in words)]
    )
    assert found == [["DOC-WORDS-1"]] * len(words)
