"""PUT /api/documents/{code}: a CMS publishes one revision."""

import json

import pytest
from django.contrib.auth.models import Permission, User

from tests.support.staff import PASSWORD, bearer
from tickets.models import Document, DocumentRevision
from tickets.search import documents_search

PAGE = {"title": "Moving a workspace", "body": "Moving keeps every heron in place.", "public": True}


def make_publisher(username: str, *codenames: str) -> User:
    user = User.objects.create_user(username=username, password=PASSWORD)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="tickets", codename__in=codenames))
    return user


@pytest.fixture
def cms(db) -> dict[str, str]:
    return bearer(make_publisher("cms", "add_document", "change_document"))


def put(client, code: str, body, auth: dict[str, str]):
    data = body if isinstance(body, str) else json.dumps(body)
    return client.put(f"/api/documents/{code}", data, content_type="application/json", **auth)


def revisions(code: str) -> list[tuple[str, bool]]:
    return [(r.label, r.is_current) for r in DocumentRevision.objects.filter(document__code=code).order_by("number")]


def test_a_new_document_is_created_with_its_first_revision(client, cms, demo):
    response = put(client, "DOC-MOVE-1", PAGE, cms)
    assert response.status_code == 201
    assert response.json() == {"code": "DOC-MOVE-1", "revision": "r1", "change": "added", "new_revision": True}
    document = Document.objects.get(code="DOC-MOVE-1")
    assert (document.title, document.public, document.origin) == ("Moving a workspace", True, "")
    assert [r.document.code for r in documents_search(query="heron", limit=3)] == ["DOC-MOVE-1"]


def test_the_same_text_again_makes_no_revision(client, cms, demo):
    put(client, "DOC-MOVE-1", PAGE, cms)
    again = put(client, "DOC-MOVE-1", {**PAGE, "body": f"  {PAGE['body']}\n"}, cms)
    assert again.status_code == 200
    assert again.json() == {"code": "DOC-MOVE-1", "revision": "r1", "change": "unchanged", "new_revision": False}
    assert revisions("DOC-MOVE-1") == [("r1", True)]


def test_a_changed_text_title_or_visibility_is_a_new_revision(client, cms, demo):
    put(client, "DOC-MOVE-1", PAGE, cms)
    changed = put(client, "DOC-MOVE-1", {**PAGE, "body": "Moving keeps every pelican in place."}, cms)
    assert changed.status_code == 200 and changed.json()["revision"] == "r2" and changed.json()["new_revision"]
    assert (
        put(
            client, "DOC-MOVE-1", {**PAGE, "body": "Moving keeps every pelican in place.", "public": False}, cms
        ).json()["revision"]
        == "r3"
    )
    assert revisions("DOC-MOVE-1") == [("r1", False), ("r2", False), ("r3", True)]
    assert documents_search(query="pelican", limit=3) == []  # no longer public


def test_new_text_adds_a_revision_and_never_rewrites_a_published_one(client, cms, demo):
    r1 = DocumentRevision.objects.get(document__code="DOC-RENAME-2", number=1)
    page = {"title": "Renaming a workspace", "body": "Old links redirect for 7 days only.", "public": True}
    assert put(client, "DOC-RENAME-2", page, cms).json()["revision"] == "r2"
    kept = DocumentRevision.objects.get(pk=r1.pk)
    assert (kept.number, kept.body, kept.is_current) == (1, r1.body, False)
    assert revisions("DOC-RENAME-2") == [("r1", False), ("r2", True)]
    assert DocumentRevision.objects.get(document__code="DOC-RENAME-2", number=2).body == page["body"]


def test_a_demo_document_gets_its_next_revision(client, cms, demo):
    response = put(client, "DOC-EXPORT-7", {"title": "CSV export permissions", "body": "Owners only now."}, cms)
    assert response.status_code == 200 and response.json()["revision"] == "r4"
    assert [r.label for r in documents_search(query="owners only", limit=1)] == ["r4"]


@pytest.mark.parametrize(
    "code,body,status",
    [
        ("DOC-X", {"body": "text"}, 422),
        ("DOC-X", {"title": "t", "body": ""}, 422),
        ("DOC-X", {"title": "t", "body": " \n\t "}, 422),
        ("DOC-X", {"title": "   ", "body": "text"}, 422),
        *(
            ("DOC-X", {"title": f"two{separator}lines", "body": "text"}, 422)
            for separator in "\n\r\v\f\x85\u2028\u2029"
        ),
        ("DOC-X", {"title": "t", "body": "nul \u0000 byte"}, 422),
        ("DOC-X", '{"title": "t", "body": "lone \\ud800 surrogate"}', 422),
        ("DOC-X", {"title": "t" * 301, "body": "text"}, 422),
        ("DOC-X", {"title": "t", "body": "x" * 60_001}, 422),
        ("DOC-X", {"title": "t", "body": "text", "public": "yes"}, 422),
        ("DOC-X", {"title": "t", "body": 5}, 422),
        ("DOC-X", {"title": "t", "body": "text", "author": "me"}, 422),
        ("DOC-X", '["title", "body"]', 422),
        ("doc-x", {"title": "t", "body": "text"}, 422),
        ("-DOC", {"title": "t", "body": "text"}, 422),
        ("D" * 65, {"title": "t", "body": "text"}, 422),
        ("DOC-X", '{"title": ', 400),
        ("DOC-X", json.dumps({"title": "t", "body": "x" * 70_000}), 413),
    ],
)
def test_invalid_input_writes_nothing(client, cms, demo, code, body, status):
    before = DocumentRevision.objects.count(), Document.objects.count()
    response = put(client, code, body, cms)
    assert response.status_code == status, response.content
    assert response.json()["code"] in {"invalid_input", "malformed_json", "body_too_large"}
    assert (DocumentRevision.objects.count(), Document.objects.count()) == before


def test_publishing_needs_change_document_and_creating_add_document(client, staff_user, demo):
    assert put(client, "DOC-X", PAGE, {}).status_code == 401
    refused = put(client, "DOC-X", PAGE, bearer(staff_user))
    assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
    assert refused.json()["message"] == "Only Knowledge editors and Integrations may publish documents."
    editor = bearer(make_publisher("editor", "change_document"))
    cannot_add = put(client, "DOC-X", PAGE, editor)
    assert cannot_add.status_code == 403
    assert cannot_add.json()["message"] == "Only Knowledge editors and Integrations may add documents."
    assert not Document.objects.filter(code="DOC-X").exists()
    assert put(client, "DOC-RENAME-2", PAGE, editor).status_code == 200  # an existing document it may change
