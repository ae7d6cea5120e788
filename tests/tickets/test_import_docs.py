"""manage.py import_docs: folders of Markdown, HTML and text files into the knowledge base."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command, execute_from_command_line
from django.core.management.base import CommandError

from tickets.docfiles import DocumentFileError, code_from_filename, document_from_file
from tickets.models import Document, DocumentRevision, Evidence
from tickets.search import documents_search
from tickets.services import document_publish

GOOD = {
    "guides/csv-export-permissions.md": "# Exporting CSV as an editor\n\nOnly editors may run a zebrafish export.\n",
    "billing.md": "---\ncode: BILLING-1\ntitle: Billing cycles\npublic: false\n---\nInvoices close on the kumquat day.\n",
    "sso.html": (
        "<html><head><title>Single sign-on</title><style>.x { color: red }</style></head>"
        "<body><h1>Setting up SSO</h1><p>Use the <b>okapi</b> connector.</p>"
        "<script>var hidden = 'wombatscript';</script></body></html>"
    ),
    "notes/rate-limits.txt": "The API allows 600 dingo requests a minute.\n",
}
BROKEN = {
    "bad-utf8.txt": b"caf\xe9 latte",
    "unclosed.md": b"---\ntitle: Never closed\n\nbody text",
    "bad-yaml.md": b"---\ncode: [\n---\nbody text",
    "long-code.md": b"---\ncode: " + b"A" * 65 + b"\n---\nbody text",
    "wrong-type.md": b"---\npublic: 'yes'\n---\nbody text",
    "twin-a.md": b"---\ncode: TWIN\n---\nfirst twin",
    "sub/twin-b.txt": b"---\ncode: TWIN\n---\nsecond twin",
}
REASONS = {
    "bad-utf8.txt": "not UTF-8 text (byte 0xe9 at offset 3)",
    "unclosed.md": "the front matter has no closing '---' line",
    "bad-yaml.md": "the front matter is not valid YAML",
    "long-code.md": "the code is longer than 64 characters",
    "wrong-type.md": "front matter: public: Input should be a valid boolean",
    "twin-a.md": "the code TWIN is also the code of",
    "sub/twin-b.txt": "the code TWIN is also the code of",
}


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())


def import_docs(*args: str) -> tuple[str, str, int]:
    """Run the command; (stdout, stderr, exit status)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("import_docs", *args, stdout=out, stderr=err)
    except CommandError as exc:
        err.write(str(exc))
        return out.getvalue(), err.getvalue(), exc.returncode
    return out.getvalue(), err.getvalue(), 0


def current_text(code: str) -> str | None:
    revision = DocumentRevision.objects.filter(document__code=code, is_current=True).first()
    return revision.body if revision else None


def found(query: str) -> list[str]:
    return [r.document.code for r in documents_search(query=query, limit=5)]


@pytest.fixture
def kb(tmp_path, demo) -> Path:
    write(tmp_path, GOOD)
    write(tmp_path, {"ignored.pdf": b"%PDF", ".hidden.md": "# hidden\n\ntext", ".git/config.md": "# not a doc\n\nx"})
    return tmp_path


# --- a first import ---------------------------------------------------------------------


def test_a_folder_imports_markdown_html_and_text(kb):
    out, err, status = import_docs(str(kb))
    assert status == 0 and err == ""
    assert out.strip() == "added 4, revised 0, unchanged 0, skipped 0, pruned 0, failed 0"
    docs = {d.code: d for d in Document.objects.exclude(origin="")}
    assert set(docs) == {"GUIDES_CSV-EXPORT-PERMISSIONS", "BILLING-1", "SSO", "NOTES_RATE-LIMITS"}
    assert docs["GUIDES_CSV-EXPORT-PERMISSIONS"].title == "Exporting CSV as an editor"
    assert current_text("GUIDES_CSV-EXPORT-PERMISSIONS") == "Only editors may run a zebrafish export."
    assert (docs["BILLING-1"].title, docs["BILLING-1"].public) == ("Billing cycles", False)
    assert docs["SSO"].title == "Setting up SSO" and current_text("SSO") == "Use the okapi connector."
    assert docs["NOTES_RATE-LIMITS"].title == "Rate limits" and docs["NOTES_RATE-LIMITS"].public
    assert docs["SSO"].origin == str(kb / "sso.html")
    assert all(r.label == "r1" for r in DocumentRevision.objects.filter(document__in=docs.values()))


def test_search_finds_the_imported_text(kb):
    search = found
    import_docs(str(kb))
    assert search("zebrafish") == ["GUIDES_CSV-EXPORT-PERMISSIONS"]
    assert search("okapi") == ["SSO"] and search("dingo") == ["NOTES_RATE-LIMITS"]
    assert search("kumquat") == []  # not public
    assert search("wombatscript") == []  # scripts are not text
    assert search("EXPORT_ROLE_REQUIRED")[0] == "DOC-EXPORT-7"  # the demo documents are still there


def test_bad_files_are_named_with_their_reason_and_the_rest_import(kb):
    write(kb, BROKEN)
    out, err, status = import_docs(str(kb))
    assert status == 1
    assert out.strip() == "added 4, revised 0, unchanged 0, skipped 0, pruned 0, failed 7"
    lines = [line for line in err.splitlines() if line.startswith(str(kb))]
    assert len(lines) == 7
    for name, reason in REASONS.items():
        assert any(line.startswith(f"{kb / name}: {reason}") for line in lines), (name, lines)
    assert err.splitlines()[-1] == "7 file(s) failed"
    assert not Document.objects.filter(code="TWIN").exists()
    assert Document.objects.exclude(origin="").count() == 4


def test_the_exit_status_says_whether_any_file_failed(kb):
    execute_from_command_line(["manage.py", "import_docs", str(kb)])  # returns: status 0
    write(kb, {"bad-utf8.txt": BROKEN["bad-utf8.txt"]})
    with pytest.raises(SystemExit) as exit_:
        execute_from_command_line(["manage.py", "import_docs", str(kb)])
    assert exit_.value.code == 1


def test_a_missing_path_is_refused(kb):
    with pytest.raises(CommandError, match="no such file or folder"):
        call_command("import_docs", str(kb / "nowhere"))


def test_files_named_one_by_one(kb):
    out, err, status = import_docs(str(kb / "sso.html"), str(kb / "ignored.pdf"), str(kb / "sso.html"))
    assert status == 1 and out.strip() == "added 1, revised 0, unchanged 0, skipped 0, pruned 0, failed 1"
    assert err.startswith(f"{kb / 'ignored.pdf'}: not a document file")


# --- importing again --------------------------------------------------------------------


def test_again_with_one_file_changed_makes_exactly_one_revision(kb):
    import_docs(str(kb))
    revisions = DocumentRevision.objects.count()
    write(kb, {"notes/rate-limits.txt": "The API now allows 900 capybara requests a minute.\n"})
    out, _, status = import_docs(str(kb))
    assert status == 0 and out.strip() == "added 0, revised 1, unchanged 3, skipped 0, pruned 0, failed 0"
    assert DocumentRevision.objects.count() == revisions + 1
    current = DocumentRevision.objects.get(document__code="NOTES_RATE-LIMITS", is_current=True)
    assert current.label == "r2" and "capybara" in current.body
    assert found("capybara") == ["NOTES_RATE-LIMITS"] and found("dingo") == []


def test_a_changed_file_adds_a_revision_and_never_rewrites_a_published_one(kb):
    r1 = DocumentRevision.objects.get(document__code="DOC-RENAME-2", number=1)
    write(kb, {"rename.md": "---\ncode: DOC-RENAME-2\n---\n# Renaming a workspace\n\nOld links redirect for 7 days.\n"})
    out, _, status = import_docs(str(kb / "rename.md"))
    assert status == 0 and out.strip() == "added 0, revised 1, unchanged 0, skipped 0, pruned 0, failed 0"
    kept = DocumentRevision.objects.get(pk=r1.pk)
    assert (kept.number, kept.body, kept.is_current) == (1, r1.body, False)
    assert current_text("DOC-RENAME-2") == "Old links redirect for 7 days."
    assert DocumentRevision.objects.get(document__code="DOC-RENAME-2", is_current=True).label == "r2"


def test_a_new_title_or_visibility_is_a_new_revision(kb):
    import_docs(str(kb))
    write(kb, {"billing.md": GOOD["billing.md"].replace("public: false", "public: true")})
    write(kb, {"sso.html": GOOD["sso.html"].replace("Setting up SSO", "Configuring SSO")})
    out, _, _ = import_docs(str(kb))
    assert out.strip() == "added 0, revised 2, unchanged 2, skipped 0, pruned 0, failed 0"
    assert Document.objects.get(code="SSO").title == "Configuring SSO"
    assert found("configuring") == ["SSO"] and found("kumquat") == ["BILLING-1"]


def test_a_dry_run_writes_nothing(kb):
    import_docs(str(kb))
    write(kb, {"notes/rate-limits.txt": "changed text", "new-page.md": "# New\n\nnew text"})
    (kb / "billing.md").unlink()
    before = list(DocumentRevision.objects.values_list("pk", "is_current"))
    out, _, _ = import_docs(str(kb), "--prune", "--dry-run")
    assert out.strip() == "added 1, revised 1, unchanged 2, skipped 0, pruned 1, failed 0 (dry run: nothing written)"
    assert list(DocumentRevision.objects.values_list("pk", "is_current")) == before
    assert not Document.objects.filter(code="NEW-PAGE").exists()


# --- pruning ----------------------------------------------------------------------------


def test_prune_retires_the_documents_whose_file_is_gone(kb):
    import_docs(str(kb))
    (kb / "notes/rate-limits.txt").unlink()
    out, _, _ = import_docs(str(kb))
    assert "pruned 0" in out and current_text("NOTES_RATE-LIMITS")  # not without --prune
    out, _, status = import_docs(str(kb), "--prune", "-v", "2")
    assert status == 0 and "pruned NOTES_RATE-LIMITS" in out
    assert out.splitlines()[-1] == "added 0, revised 0, unchanged 3, skipped 0, pruned 1, failed 0"
    assert current_text("NOTES_RATE-LIMITS") is None and found("dingo") == []
    assert DocumentRevision.objects.filter(document__code="NOTES_RATE-LIMITS").count() == 1  # kept, not current
    assert current_text("DOC-EXPORT-7")  # the demo documents have no file: never pruned


def test_prune_on_a_subfolder_touches_only_that_subfolder(kb):
    import_docs(str(kb))
    (kb / "guides/csv-export-permissions.md").unlink()
    out, _, _ = import_docs(str(kb / "guides"), "--prune")
    assert out.strip() == "added 0, revised 0, unchanged 0, skipped 0, pruned 1, failed 0"
    assert current_text("GUIDES_CSV-EXPORT-PERMISSIONS") is None
    others = ["BILLING-1", "SSO", "NOTES_RATE-LIMITS", "DOC-EXPORT-7", "DOC-RENAME-2"]
    assert all(current_text(code) for code in others)


def test_prune_keeps_a_document_whose_file_now_fails(kb):
    import_docs(str(kb))
    write(kb, {"notes/rate-limits.txt": b"\xff broken"})
    out, _, status = import_docs(str(kb), "--prune")
    assert status == 1 and "pruned 0, failed 1" in out
    assert "dingo" in current_text("NOTES_RATE-LIMITS")


def test_prune_leaves_a_document_the_api_took_over(kb):
    import_docs(str(kb))
    document_publish(code="SSO", title="SSO", body="Now kept by the CMS.", public=True)
    (kb / "sso.html").unlink()
    out, _, _ = import_docs(str(kb), "--prune")
    assert "pruned 0" in out and current_text("SSO") == "Now kept by the CMS."


def test_a_pruned_document_comes_back_as_a_new_revision(kb):
    import_docs(str(kb))
    text = (kb / "sso.html").read_bytes()
    (kb / "sso.html").unlink()
    import_docs(str(kb), "--prune")
    write(kb, {"sso.html": text})
    out, _, _ = import_docs(str(kb))
    assert "revised 1" in out
    assert DocumentRevision.objects.get(document__code="SSO", is_current=True).label == "r2"


def test_an_investigation_searches_the_imported_current_revision(play, tmp_path, settle):
    write(tmp_path, {"export-quota.md": "# Export quota\n\nExports stop at the walnut quota."})
    import_docs(str(tmp_path))
    write(tmp_path, {"export-quota.md": "# Export quota\n\nExports stop at the narwhal quota of 50 a day."})
    import_docs(str(tmp_path))
    search = [{"call": {"tool": "search_docs", "args": {"query": q}}} for q in ("narwhal quota", "walnut")]
    report = play([*search, {"draft": {"summary": "s", "evidence": ["E1"], "open_questions": []}}])
    assert report["status"] == "COMPLETED"
    first, second = Evidence.objects.filter(run_id=report["run"]).order_by("number")
    assert first.source_ref == "EXPORT-QUOTA@r2"
    [result] = json.loads(first.content)["results"]
    assert (result["id"], result["revision"], result["title"]) == ("EXPORT-QUOTA", "r2", "Export quota")
    assert "narwhal" in result["excerpt"]
    assert json.loads(second.content)["results"] == []  # r1 is no longer current


# --- output -----------------------------------------------------------------------------


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_progress_bar_and_a_pipe_a_plain_line(kb):
    piped = io.StringIO()
    call_command("import_docs", str(kb), stdout=piped)
    assert piped.getvalue() == "added 4, revised 0, unchanged 0, skipped 0, pruned 0, failed 0\n"
    terminal = Terminal()
    call_command("import_docs", str(kb), stdout=terminal)
    shown = terminal.getvalue()
    assert "\r[" + "#" * 30 + "] 4/4 rate-limits.txt" in shown and "] 1/4 " in shown
    assert shown.endswith("\radded 0, revised 0, unchanged 4, skipped 0, pruned 0, failed 0\n")


# --- reading one file (no database) -----------------------------------------------------


@pytest.mark.parametrize(
    "name,code",
    [
        ("csv-export-permissions.md", "CSV-EXPORT-PERMISSIONS"),
        ("docs/Café notes (v2).txt", "CAFE-NOTES-V2"),
        ("__init__.html", "INIT"),
        ("DOC_EXPORT_7.md", "DOC-EXPORT-7"),
    ],
)
def test_the_code_comes_from_the_file_name(name, code):
    assert code_from_filename(name) == code


@pytest.mark.parametrize(
    "name,data,title,body",
    [
        (
            "a.md",
            "intro\n\n```sh\n# not a title\n```\n# The title\ntext",
            "The title",
            "intro\n# not a title\ntext",
        ),
        ("a.md", "## only a subheading\ntext", "A", "only a subheading\ntext"),
        (
            "a.md",
            "---\ntitle: From front matter\n---\n# Heading stays\ntext",
            "From front matter",
            "Heading stays\ntext",
        ),
        (
            "b.html",
            "<title>Page title</title><p>one</p><ul><li>two</li><li>three <i>four</i></li></ul>",
            "Page title",
            "one\ntwo\nthree four",
        ),
        ("b.htm", "<p>no title<br>at all</p><noscript>x</noscript>", "B", "no title\nat all"),
        ("c.txt", "\ufeff# not a heading in text\r\nline two\r\n", "C", "# not a heading in text\nline two"),
    ],
)
def test_titles_and_bodies(name, data, title, body):
    document = document_from_file(name, data.encode())
    assert (document.title, document.body) == (title, body)


@pytest.mark.parametrize(
    "name,data,reason",
    [
        ("%%.md", "text", "the file name has no letters or digits for a code"),
        ("a.pdf", "text", "not a document file (the suffixes are .md, .markdown, .mdx, .html, .htm, .txt)"),
        ("a.txt", "x" * (1024 * 1024 + 1), "the file is larger than 1048576 bytes"),
        ("a.md", "---\ncode: doc-x\n---\ntext", "the code 'doc-x' is not capitals"),
        ("a.md", "---\n- a list\n---\ntext", "the front matter is not a set of 'key: value' lines"),
        ("a.md", "---\ncode: 7\n---\ntext", "front matter: code: Input should be a valid string"),
        ("a.txt", "nul \x00 inside", "the body contains a NUL character"),
        ("a.md", "---\ntitle: '" + "t" * 301 + "'\n---\ntext", "the title is longer than 300 characters"),
        ("a.txt", "x" * 60_001, "the body is longer than 60000 characters"),
    ],
)
def test_files_that_cannot_be_documents(name, data, reason):
    with pytest.raises(DocumentFileError) as refused:
        document_from_file(name, data.encode())
    assert str(refused.value).startswith(reason)
