"""The knowledge base's search (tickets.search): what ranks first, on PostgreSQL and on SQLite alike."""

from __future__ import annotations

import pytest

from tests.support.sqlitesearch import SqliteSearch
from tickets.models import Document, SearchSynonym
from tickets.search import best_passage, documents_search, query_of, title_similarity
from tickets.services import document_publish, document_retire

# A help center's shape: titles that name the subject, bodies that mention other subjects in passing.
ARTICLES = [
    (
        "EXPORT-VAULT-DATA",
        "Export Vault Data",
        "You can export your vault data as a .json or .csv file from the web vault.\n\n"
        "Exports do not include attachments. Organizations export their own vault separately.",
    ),
    (
        "ENCRYPTED-EXPORTS",
        "Encrypted Exports",
        "An encrypted export protects the file with your account encryption key or a password you choose.\n\n"
        "If you rotate your account encryption key, encrypted exports made before the rotation can no longer "
        "be imported. Make a new encrypted export after rotating the key.",
    ),
    (
        "ACCOUNT-ENCRYPTION-KEY",
        "Account Encryption Key",
        "Your account encryption key encrypts all vault data. Rotating it re-encrypts the vault.\n\n"
        "Log out of every client after a rotation.",
    ),
    (
        "LOST-TWO-STEP-DEVICE",
        "Lost Two-step Login Device",
        "If you lose the device with your authenticator app, use your two-step login recovery code to log in.\n\n"
        "The recovery code turns off two-step login; set it up again on your new phone.",
    ),
    (
        "IMPORT-FROM-LASTPASS",
        "Import Data from LastPass",
        "Export your LastPass vault as a .csv file, then import it on the Tools page.\n\n"
        "If the import fails, open the file in a text editor and check the header row.",
    ),
    (
        "RELEASE-NOTES",
        "Release Notes",
        "This release fixes a crash in the browser extension, improves the key derivation settings page, "
        "speeds up vault sync and export of large vaults, and updates translations. Login with SSO now "
        "remembers the organization identifier.",
    ),
    (
        "SSO-LOGIN",
        "Log in with SSO",
        "Single sign-on lets members log in with the identity provider of their organization.\n\n"
        "Enter the organization identifier your administrator gave you.",
    ),
]


@pytest.fixture
def articles(db):
    for code, title, body in ARTICLES:
        document_publish(code=code, title=title, body=body, public=True)


@pytest.fixture
def sqlite(sqlite_search) -> SqliteSearch:
    return sqlite_search


def published() -> list[dict]:
    return [{"publish": {"code": c, "title": t, "body": b, "public": True}} for c, t, b in ARTICLES]


def codes(query: str) -> list[str]:
    return [r.document.code for r in documents_search(query=query, limit=5)]


QUERIES = {
    # the title names the subject; other articles mention it in passing
    "export vault": "EXPORT-VAULT-DATA",
    # the article's exact title comes first
    "Account Encryption Key": "ACCOUNT-ENCRYPTION-KEY",
    "encrypted exports": "ENCRYPTED-EXPORTS",
    # a customer's words: stop words and all
    "my export fails after I rotated my encryption key": "ENCRYPTED-EXPORTS",
    "importing from lastpass fails": "IMPORT-FROM-LASTPASS",
    "I lost my phone with the authenticator": "LOST-TWO-STEP-DEVICE",
    # typos and close forms
    "acount encryptoin key": "ACCOUNT-ENCRYPTION-KEY",
    "lastpas import": "IMPORT-FROM-LASTPASS",
    "log in with sso": "SSO-LOGIN",
}


@pytest.mark.parametrize("query", QUERIES)
def test_on_postgresql_the_answering_article_ranks_first(articles, query):
    assert codes(query)[0] == QUERIES[query], codes(query)


def test_on_sqlite_the_same_articles_rank_first(sqlite):
    found = sqlite.run([*published(), *({"search": q} for q in QUERIES)])
    assert [f[0] if f else None for f in found] == list(QUERIES.values())


def test_the_title_counts_for_more_than_a_passing_mention(articles):
    found = codes("sso")
    assert found.index("SSO-LOGIN") < found.index("RELEASE-NOTES")


def test_the_words_together_rank_above_the_words_apart(articles):
    document_publish(
        code="KEYS-APART",
        title="Settings",
        body="The key derivation page. " + "Other settings. " * 30 + "Encryption of attachments.",
        public=True,
    )
    document_publish(code="KEYS-TOGETHER", title="Settings", body="Rotate the encryption key here.", public=True)
    found = codes("encryption key settings")
    assert found.index("KEYS-TOGETHER") < found.index("KEYS-APART")


def test_stop_words_alone_find_nothing(articles, sqlite):
    assert codes("how do I") == [] and codes("x") == []
    assert sqlite.run([*published(), {"search": "how do I"}, {"search": "x"}]) == [[], []]


def test_a_word_inside_another_is_not_that_word(articles):
    assert "EXPORT-VAULT-DATA" not in codes("port")


def test_synonyms_from_the_admin_apply_to_queries(articles, sqlite):
    assert codes("2fa") == []
    SearchSynonym.objects.create(words="2FA, two-step login")
    assert codes("2fa")[0] == "LOST-TWO-STEP-DEVICE"
    assert codes("lost 2fa device")[0] == "LOST-TWO-STEP-DEVICE"
    assert sqlite.run([*published(), {"synonyms": "2FA, two-step login"}, {"search": "2fa"}])[0][0] == (
        "LOST-TWO-STEP-DEVICE"
    )


def test_a_synonym_group_needs_two_phrases(db):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        SearchSynonym(words="2FA, 2fa").full_clean()


def test_sqlite_keeps_its_index_current_whatever_writes_the_documents(sqlite):
    found = sqlite.run(
        [
            {"publish": {"code": "DOC-A", "title": "Pelican", "body": "The heron flies.", "public": True}},
            {"search": "heron"},
            {"publish": {"code": "DOC-A", "title": "Pelican", "body": "The egret flies.", "public": True}},
            {"search": "heron"},
            {"search": "egret"},
            {"rename": {"code": "DOC-A", "title": "Cormorant"}},
            {"search": "cormorant"},
            {"search": "pelican"},
            {"publish": {"code": "DOC-A", "title": "Cormorant", "body": "The egret flies.", "public": False}},
            {"search": "egret"},
            {"publish": {"code": "DOC-B", "title": "Swift", "body": "The swift flies.", "public": True}},
            {"retire": "DOC-B"},
            {"search": "swift"},
        ]
    )
    assert found == [["DOC-A"], [], ["DOC-A"], ["DOC-A"], [], [], []]


def test_postgresql_follows_new_revisions_renames_and_retirements(db):
    document_publish(code="DOC-A", title="Pelican", body="The heron flies.", public=True)
    document_publish(code="DOC-A", title="Pelican", body="The egret flies.", public=True)
    assert (codes("heron"), codes("egret")) == ([], ["DOC-A"])
    Document.objects.filter(code="DOC-A").update(title="Cormorant")
    assert (codes("cormorant"), codes("pelican")) == (["DOC-A"], [])
    document_retire(code="DOC-A")
    assert codes("egret") == []


# --- the measures, alike on both databases -----------------------------------------------------


@pytest.mark.parametrize(
    ("query", "title"),
    [
        ("port", "CSV export permissions"),
        ("renamng workspce", "Renaming a workspace"),
        ("lost my phone", "Lost Two-step Login Device"),
        ("two step login", "Lost Two-step Login Device"),
        ("Account Encryption Key", "Account Encryption Key"),
    ],
)
def test_title_similarity_is_pg_trgm_strict_word_similarity(db, query, title):
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT strict_word_similarity(%s, %s)", [query, title])
        (expected,) = cursor.fetchone()
    assert title_similarity(query, title) == pytest.approx(expected, abs=1e-6)


def test_the_passage_quoted_is_the_paragraph_that_matches_cut_at_sentences():
    body = (
        "Bitwarden offers several exports. Choose the format you need.\n\n"
        "An encrypted export protects the file. If you rotate your account encryption key, encrypted exports "
        "made before the rotation can no longer be imported. Make a new encrypted export after rotating the key. "
        "Keep the file somewhere safe."
    )
    passage = best_passage(body, query_of("rotated encryption key", synonyms=[]), width=160)
    assert "If you rotate your account encryption key, encrypted exports" in passage
    assert passage.startswith("… An encrypted export") or passage.startswith("… If you rotate")  # a sentence's start
    assert passage.endswith("imported. …") and "several exports" not in passage
    assert len(passage) <= 170


def test_a_short_body_is_quoted_whole():
    assert best_passage("Only editors may export.", query_of("export", synonyms=[])) == "Only editors may export."
