"""manage.py import_docs --zendesk-guide: Help Center articles from a saved page, or from Zendesk's API as a local
server speaks it (two pages, a draft, basic authentication with an API token, a 429 with Retry-After)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from tests.support.guideserver import Answer, GuideServer, article
from tests.tickets.test_import_docs import current_text, import_docs
from tickets import zendeskguide
from tickets.models import Document, DocumentRevision
from tickets.services import document_publish
from tickets.zendeskguide import GuideError, guide_source

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "zendesk" / "articles.json"
EMAIL = "agent@acme.example"
TOKEN = "zd-Qm7xv2-api-token-never-shown-41"
ARTICLES = [
    article(101, "Exporting to CSV", "<p>Exports need the <b>editor</b> role.</p>", label_names=["export"]),
    article(102, "Renaming a workspace", "<p>Renaming keeps members and roles.</p>", section_id=7),
    article(103, "Audit logs", "<p>Not ready yet.</p>", draft=True),
    article(104, "Billing cycles", "<p>Invoices close on the first.</p><script>track()</script>", promoted=True),
]
CODES = ["ZD-101-EN-US", "ZD-102-EN-US", "ZD-104-EN-US"]


@pytest.fixture
def guide(settings):
    """Zendesk with four articles, two a page, that answers only our API token; ZENDESK_* point at it."""
    server = GuideServer(articles=[dict(a) for a in ARTICLES], credentials=(f"{EMAIL}/token", TOKEN))
    settings.ZENDESK_URL, settings.ZENDESK_EMAIL, settings.ZENDESK_API_TOKEN = server.base, EMAIL, TOKEN
    yield server
    server.close()


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def snapshot() -> tuple[list[dict], list[tuple]]:
    """Every document's row and every revision's: what a write would change."""
    documents = list(Document.objects.order_by("code").values())
    revisions = list(
        DocumentRevision.objects.order_by("pk").values_list("pk", "document__code", "number", "is_current")
    )
    return documents, revisions


# --- a saved page ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_saved_page_imports_each_article_with_its_url_and_metadata():
    out, err, status = import_docs("--zendesk-guide", str(FIXTURE), "-v", "2")

    assert status == 0, err
    assert "added 3, revised 0, unchanged 0, skipped 1, pruned 0, failed 0" in out
    assert "skipped article 360001234570 “Audit log exports”: a draft (draft: true)" in out
    export = Document.objects.get(code="ZD-360001234567-EN-US")
    assert export.title == "Exporting a workspace to CSV" and export.public
    assert export.url == "https://acme.zendesk.com/hc/en-us/articles/360001234567-Exporting-a-workspace-to-CSV"
    assert export.origin == "zendesk-guide:" + str(FIXTURE)
    assert export.metadata == {
        "zendesk_id": 360001234567,
        "locale": "en-us",
        "source_locale": "en-us",
        "section_id": 360004785313,
        "label_names": ["export", "csv"],
        "updated_at": "2025-01-20T16:02:10Z",
        "outdated": False,
        "promoted": True,
        "user_segment_id": None,
    }
    text = current_text(export.code)
    assert text.splitlines() == [
        "Exports of more than 10,000 rows run as a background job.",
        "Who may export",
        "Editors and admins start exports.",
        "Viewers see the button greyed out.",
    ]  # a line per block, the script gone
    assert not Document.objects.get(code="ZD-360001234569-EN-US").public  # a user segment restricts it
    assert not Document.objects.filter(code="ZD-360001234570-EN-US").exists()


@pytest.mark.django_db
def test_a_saved_page_is_read_alone_even_with_a_next_page(tmp_path, guide):
    page = {"articles": ARTICLES[:2], "next_page": guide.listing_url + "?page=2", "page": 1, "per_page": 2}
    saved = tmp_path / "articles.json"
    saved.write_text(json.dumps(page))

    out, err, status = import_docs("--zendesk-guide", str(saved))

    assert status == 0, err
    assert "note: a saved page: its next_page is not followed" in out and "added 2" in out
    assert guide.received == []


# --- Zendesk's API ------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_listing_is_read_page_by_page_with_the_api_token(guide):
    out, err, status = import_docs("--zendesk-guide", "-v", "2")

    assert status == 0, err
    assert "added 3, revised 0, unchanged 0, skipped 1, pruned 0, failed 0" in out
    assert [r.path for r in guide.received] == [
        "/api/v2/help_center/articles.json",
        "/api/v2/help_center/articles.json?page=2&per_page=2",
    ]
    assert {r.headers.get("authorization") for r in guide.received} == {basic(f"{EMAIL}/token", TOKEN)}
    assert sorted(Document.objects.values_list("code", flat=True)) == CODES
    billing = Document.objects.get(code="ZD-104-EN-US")
    assert billing.url == "https://acme.zendesk.com/hc/en-us/articles/104"
    assert billing.origin == f"zendesk-guide:{guide.base}/api/v2/help_center/articles.json"
    assert current_text("ZD-104-EN-US") == "Invoices close on the first."
    assert TOKEN not in out + err


@pytest.mark.django_db
def test_cursor_pagination_is_followed_by_links_next(guide):
    guide.cursor = True

    out, err, status = import_docs("--zendesk-guide")

    assert status == 0, err
    assert "added 3" in out
    assert [r.path for r in guide.received] == [
        "/api/v2/help_center/articles.json",
        "/api/v2/help_center/articles.json?page[size]=2&page[after]=2",
    ]


@pytest.mark.django_db
def test_a_locale_is_read_from_its_path_on_zendesk_url(guide):
    guide.articles.append(article(101, "Exporter en CSV", "<p>Il faut le rôle éditeur.</p>", locale="fr"))

    out, err, status = import_docs("--zendesk-guide", "api/v2/help_center/fr/articles.json")

    assert status == 0, err
    assert list(Document.objects.values_list("code", "title")) == [("ZD-101-FR", "Exporter en CSV")]
    assert guide.received[0].path == "/api/v2/help_center/fr/articles.json"


@pytest.mark.django_db
def test_a_429_waits_as_retry_after_asks_then_reads_on(guide):
    guide.answers.append(Answer(429, {"error": "TooManyRequests"}, {"Retry-After": "1"}))

    out, err, status = import_docs("--zendesk-guide")

    assert status == 0, err
    assert "added 3" in out
    first, again = guide.received[:2]
    assert first.path == again.path and again.at - first.at >= 1.0


@pytest.mark.django_db
def test_a_retry_after_past_the_bound_ends_the_import_writing_nothing(guide):
    guide.answers.append(Answer(429, {"error": "TooManyRequests"}, {"Retry-After": "3600"}))

    out, err, status = import_docs("--zendesk-guide")

    assert status == 1
    assert "HTTP 429, Zendesk asks to wait 3600 s (more than 60); run the import again later" in err
    assert "nothing was imported" in err and not Document.objects.exists()


@pytest.mark.django_db
def test_a_429_that_never_ends_ends_the_import_after_its_waits(guide, monkeypatch):
    monkeypatch.setattr(zendeskguide, "MAX_WAITS", 2)
    guide.answers.extend([Answer(429, {"error": "TooManyRequests"}, {"Retry-After": "0"})] * 3)

    out, err, status = import_docs("--zendesk-guide")

    assert status == 1
    assert "still HTTP 429 (too many requests) after 2 waits; run the import again later" in err
    assert len(guide.received) == 3 and not Document.objects.exists()


@pytest.mark.django_db
def test_an_unchanged_reimport_writes_nothing(guide):
    assert import_docs("--zendesk-guide")[2] == 0
    before = snapshot()

    out, err, status = import_docs("--zendesk-guide")

    assert status == 0, err
    assert "added 0, revised 0, unchanged 3, skipped 1, pruned 0, failed 0" in out
    assert snapshot() == before


@pytest.mark.django_db
def test_a_changed_article_is_a_new_revision(guide):
    import_docs("--zendesk-guide")
    guide.articles[0]["body"] = "<p>Exports need the <b>admin</b> role since March.</p>"

    out, err, status = import_docs("--zendesk-guide")

    assert status == 0, err
    assert "added 0, revised 1, unchanged 2" in out
    assert current_text("ZD-101-EN-US") == "Exports need the admin role since March."
    assert DocumentRevision.objects.filter(document__code="ZD-101-EN-US").count() == 2


@pytest.mark.django_db
def test_prune_retires_only_what_this_listing_no_longer_lists(guide):
    import_docs("--zendesk-guide", str(FIXTURE))  # another listing: its documents are its own
    document_publish(code="DOC-HANDWRITTEN", title="Written in the admin", body="Kept.", public=True)
    import_docs("--zendesk-guide")
    del guide.articles[1]  # 102 is gone from the help center

    out, err, status = import_docs("--zendesk-guide", "--prune", "-v", "2")

    assert status == 0, err
    assert "pruned ZD-102-EN-US" in out and "pruned 1," in out
    assert current_text("ZD-102-EN-US") is None
    assert current_text("ZD-101-EN-US") and current_text("DOC-HANDWRITTEN") == "Kept."
    assert current_text("ZD-360001234567-EN-US") is not None


@pytest.mark.django_db
def test_prune_with_dry_run_names_and_writes_nothing(guide):
    import_docs("--zendesk-guide")
    del guide.articles[1]
    before = snapshot()

    out, err, status = import_docs("--zendesk-guide", "--prune", "--dry-run", "-v", "2")

    assert status == 0, err
    assert "pruned ZD-102-EN-US" in out and "(dry run: nothing written)" in out
    assert snapshot() == before


@pytest.mark.django_db
def test_an_article_that_fails_is_named_the_rest_go_on_and_prune_keeps_its_document(guide):
    import_docs("--zendesk-guide")
    guide.articles[0]["title"] = "   "
    guide.articles[3]["html_url"] = "javascript:alert(1)"
    guide.articles.append(article(105, "Single sign-on", "<p>Use the okapi connector.</p>"))

    out, err, status = import_docs("--zendesk-guide", "--prune")

    assert status == 1
    assert "article 101: ZD-101-EN-US: the title is empty" in err
    assert "article 104 “Billing cycles”: ZD-104-EN-US: html_url is not an http(s) address" in err
    assert "2 article(s) failed" in err
    assert "added 1, revised 0, unchanged 1, skipped 1, pruned 0, failed 2" in out
    assert current_text("ZD-101-EN-US") == "Exports need the editor role."  # kept as it was
    assert current_text("ZD-105-EN-US") == "Use the okapi connector."


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"<html><body>Down for maintenance</body></html>", "not JSON (a Help Center articles listing is JSON)"),
        (b'{"results": []}', "not a Help Center articles listing (articles: Field required)"),
        (b'{"articles": "none"}', "not a Help Center articles listing (articles: Input should be a valid array)"),
        (b'{"articles": [{"title": "no id"}]}', "article 1 has no numeric id"),
    ],
)
def test_a_bad_page_is_refused_by_name_and_nothing_is_written(guide, body, reason):
    guide.answers.append(Answer(200, {"articles": ARTICLES[:2], "next_page": guide.listing_url + "?page=2"}))
    guide.answers.append(Answer(200, body))

    out, err, status = import_docs("--zendesk-guide")

    assert status == 1
    assert f"{guide.listing_url}?page=2: {reason}; nothing was imported" in err
    assert not Document.objects.exists()  # the first page's articles too: the listing is read whole first


@pytest.mark.django_db
def test_wrong_credentials_are_refused_without_showing_the_token(guide, settings):
    settings.ZENDESK_API_TOKEN = "zd-wrong-token-also-never-shown"

    out, err, status = import_docs("--zendesk-guide")

    assert status == 1
    assert "Zendesk refused the request (HTTP 401); check ZENDESK_EMAIL and ZENDESK_API_TOKEN" in err
    assert "zd-wrong-token" not in out + err and TOKEN not in out + err


@pytest.mark.django_db
def test_the_token_goes_to_zendesk_url_only(guide):
    elsewhere = GuideServer(articles=[dict(a) for a in ARTICLES])
    try:
        out, err, status = import_docs("--zendesk-guide", elsewhere.listing_url)
        assert status == 0, err
        assert len(elsewhere.received) == 2 and all("authorization" not in r.headers for r in elsewhere.received)

        guide.answers.append(Answer(200, {"articles": ARTICLES[:1], "next_page": elsewhere.listing_url}))
        out, err, status = import_docs("--zendesk-guide")
        assert status == 1
        assert f"links its next page on another host: {elsewhere.listing_url}" in err
        assert len(elsewhere.received) == 2  # the first run's only: the link was refused before any request
    finally:
        elsewhere.close()


@pytest.mark.django_db
def test_the_number_of_pages_is_bounded(guide, monkeypatch):
    monkeypatch.setattr(zendeskguide, "MAX_PAGES", 1)

    out, err, status = import_docs("--zendesk-guide")

    assert status == 1
    assert "the listing goes on past 1 pages" in err and not Document.objects.exists()


# --- what is given ----------------------------------------------------------------------------------


def test_where_the_listing_is():
    assert guide_source(str(FIXTURE)).location == str(FIXTURE)
    home = guide_source("", zendesk_url="https://acme.zendesk.com", email=EMAIL, token=TOKEN)
    assert home.location == "https://acme.zendesk.com/api/v2/help_center/articles.json"
    assert home.auth == (f"{EMAIL}/token", TOKEN) and home.auth_origin == "https://acme.zendesk.com:443"
    relative = guide_source("/api/v2/help_center/de/articles.json", zendesk_url="https://acme.zendesk.com/")
    assert relative.location == "https://acme.zendesk.com/api/v2/help_center/de/articles.json"
    given = guide_source("https://someone:secret@help.example.com/api/v2/help_center/articles.json#top")
    assert given.origin == "zendesk-guide:https://help.example.com/api/v2/help_center/articles.json"
    with pytest.raises(GuideError, match="ZENDESK_URL is not set"):
        guide_source("")
    with pytest.raises(GuideError, match="no such file: exported/articles.json"):
        guide_source("exported/articles.json", zendesk_url="https://acme.zendesk.com")


@pytest.mark.django_db
def test_files_and_a_guide_are_imported_apart(tmp_path):
    assert "import the files" in import_docs("--zendesk-guide", str(FIXTURE), str(tmp_path))[1]
    assert (
        "a Guide article's public URL is its html_url"
        in import_docs("--zendesk-guide", str(FIXTURE), "--base-url", "https://help.example.com")[1]
    )
    assert "name a folder or a file to import" in import_docs()[1]
