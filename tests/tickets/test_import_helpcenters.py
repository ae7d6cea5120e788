"""import_docs on help centers as their sites keep them: real Jekyll and Obsidian files, and each generator's syntax."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.tickets.test_import_docs import current_text, import_docs, write
from tickets.docfiles import DocumentSkipped, code_from_path, document_from_file
from tickets.models import Document, DocumentRevision

HELPCENTERS = Path(__file__).resolve().parent.parent / "fixtures" / "helpcenters"


@pytest.fixture
def bitwarden(tmp_path, db) -> Path:
    return Path(shutil.copytree(HELPCENTERS / "bitwarden", tmp_path / "_articles"))


@pytest.fixture
def obsidian(tmp_path, db) -> Path:
    return Path(shutil.copytree(HELPCENTERS / "obsidian", tmp_path / "en"))


def test_a_jekyll_help_center_imports_unchanged(bitwarden):
    out, err, status = import_docs(str(bitwarden), "-v", "2")
    assert status == 0 and err == ""
    assert out.splitlines()[-1] == "added 2, revised 0, unchanged 0, skipped 1, pruned 0, failed 0"
    assert f"skipped {bitwarden / 'send/send-ios.md'}: hidden (hidden: true)" in out
    doc = Document.objects.get(code="DIRECTORY-CONNECTOR_CLEAR-SYNC-CACHE")
    assert doc.title == "Clear Sync Cache"
    assert doc.metadata["layout"] == "article" and doc.metadata["order"] == "06"
    assert doc.metadata["categories"] == ["directory-connector"]
    body = current_text(doc.code)
    assert "Open the Directory Connector Desktop Application." in body  # {{site.baseurl}} was in the link's URL
    excluded = current_text("MISCELLANEOUS_EXCLUDE-DOMAINS")
    assert "open the Settings tab" in excluded  # {% icon fa-cogs %} gone, its sentence whole
    for text in (body, excluded):
        assert "{%" not in text and "{{" not in text and "**" not in text


def test_an_unchanged_reimport_writes_nothing(bitwarden):
    import_docs(str(bitwarden))
    before = list(Document.objects.values_list("id", "title", "url", "metadata", "origin", "public"))
    revisions = list(DocumentRevision.objects.values_list("id", "is_current"))
    out, _, status = import_docs(str(bitwarden))
    assert status == 0 and out.strip() == "added 0, revised 0, unchanged 2, skipped 1, pruned 0, failed 0"
    assert list(Document.objects.values_list("id", "title", "url", "metadata", "origin", "public")) == before
    assert list(DocumentRevision.objects.values_list("id", "is_current")) == revisions


def test_an_obsidian_vault_imports_unchanged_with_its_folders_in_the_codes(obsidian):
    out, err, status = import_docs(str(obsidian), "--base-url", "https://obsidian.md/help/")
    assert status == 0 and err == ""
    assert out.strip() == "added 3, revised 0, unchanged 0, skipped 0, pruned 0, failed 0"
    desktop, mobile = (Document.objects.get(code=c) for c in ("RELEASE-NOTES_V1-1-1", "RELEASE-NOTES_MOBILE_V1-1-1"))
    assert "Canvas" in current_text(desktop.code) and "Fixed large PDFs not rendering." in current_text(mobile.code)
    assert desktop.url == "https://obsidian.md/help/Release%20notes/v1.1.1"  # no permalink: the path
    backlinks = Document.objects.get(code="PLUGINS_BACKLINKS")
    assert backlinks.title == "Backlinks"  # no title, no heading: the file name
    assert backlinks.url == "https://obsidian.md/help/plugins/backlinks"  # its permalink
    assert backlinks.metadata["aliases"] == ["How to/Working with backlinks"]
    text = current_text(backlinks.code)
    assert text.startswith("With the Backlinks plugin, you can see all the backlinks for the active note.")
    assert "[[" not in text


def test_the_codes_are_the_same_from_one_import_to_the_next_and_long_paths_fit():
    long = "A very long folder name for a help center section/" * 3 + "and a long page name too.md"
    code = code_from_path(long)
    assert len(code) == 64 and code == code_from_path(long) and code.startswith("A-VERY-LONG-FOLDER-NAME")
    assert code != code_from_path(long.replace("page", "pages"))


@pytest.mark.parametrize(
    "one,other",
    [
        ("zh-TW/開始使用/更新 Obsidian.md", "zh-TW/團隊/Obsidian 團隊版.md"),
        ("ar/مساعدة.md", "ar/دعم.md"),
        ("ru/Синхронизация/Sync.md", "ru/Публикация/Sync.md"),
    ],
)
def test_paths_in_other_scripts_get_codes_of_their_own(one, other):
    assert code_from_path(one) != code_from_path(other)
    assert code_from_path(one) == code_from_path(one)
    assert code_from_path("ar/مساعدة.md").startswith("AR-")  # the digest follows what ASCII there is
    assert code_from_path("Café/Über.md") == "CAFE_UBER"  # accents have an ASCII form: no digest


@pytest.mark.parametrize(
    "name,text,reason",
    [
        ("a.md", "---\ndraft: true\n---\ntext", "a draft (draft: true)"),
        ("a.md", "---\npublished: false\n---\ntext", "not published (published: false)"),
        ("a.md", "---\nhidden: true\n---\ntext", "hidden (hidden: true)"),
        ("a.md", "---\nredirect_to: /new/\n---\n", "a redirect stub (redirect_to: /new/)"),
        ("a.md", "---\nlayout: redirect\n---\n{% comment %}moved{% endcomment %}\n", "nothing to read"),
        ("a.md", "# Only a heading\n", "nothing to read"),
        ("a.html", '<meta http-equiv="refresh" content="0; url=/new/">', "a redirect stub (a meta refresh)"),
    ],
)
def test_unpublished_pages_and_stubs_are_skipped(name, text, reason):
    with pytest.raises(DocumentSkipped) as skipped:
        document_from_file(name, text.encode())
    assert str(skipped.value).startswith(reason)


@pytest.mark.parametrize(
    "name,text,title,body",
    [
        (
            "hugo.md",
            '+++\ntitle = "Install"\nweight = 3\n+++\n{{< tabs >}}\n{{< tab "Linux" >}}Run **apt**.{{< /tab >}}\n'
            "{{< /tabs >}}\n{{% note %}}Needs root.{{% /note %}}",
            "Install",
            "Run apt.\nNeeds root.",
        ),
        (
            "docusaurus.mdx",
            "import Tabs from '@theme/Tabs';\nimport TabItem from '@theme/TabItem';\n\n# Setup\n\n"
            '<Tabs>\n<TabItem value="mac" label="macOS">\n\nUse *brew*.\n\n</TabItem>\n</Tabs>\n\n'
            ":::tip\nRestart after.\n:::",
            "Setup",
            "Use brew.\nRestart after.",
        ),
        (
            "mkdocs.md",
            '# Shells\n\n=== "Bash"\n\n    Edit `~/.bashrc`.\n\n!!! warning "Careful"\n    Back it up first.\n',
            "Shells",
            "Bash\nEdit ~/.bashrc.\nCareful\nBack it up first.",
        ),
        (
            "obsidian.md",
            "See [[Sync#Plans|the plans]] and [[Publish#Sites]].\n![[diagram.png]]\n> [!note] Tip\n> Read it.",
            "Obsidian",
            "See the plans and Publish > Sites.\nTip\nRead it.",
        ),
        (
            "jekyll.md",
            "---\ntitle: Vault\nlayout: article\n---\n{% callout info %}Use the [app]({{site.baseurl}}/app/).{% endcallout %}"
            "\n{% image vault.png The vault %}",
            "Vault",
            "Use the app.",
        ),
    ],
)
def test_template_syntax_is_reduced_to_its_text(name, text, title, body):
    document = document_from_file(name, text.encode())
    assert (document.title, document.body) == (title, body)


def test_unknown_front_matter_is_kept_as_metadata_and_dates_as_text():
    text = "---\nlayout: post\ndate: 2024-05-01\ntags: [a, b]\nredirect_from: [/old/]\n---\nbody"
    document = document_from_file("a.md", text.encode())
    assert document.metadata == {"layout": "post", "date": "2024-05-01", "tags": ["a", "b"], "redirect_from": ["/old/"]}


@pytest.mark.parametrize(
    "permalink,base,url",
    [
        ("https://help.example.com/x/", "", "https://help.example.com/x/"),
        ("/article/x/", "https://help.example.com", "https://help.example.com/article/x/"),
        ("/article/x/", "", "/article/x/"),
        (None, "https://help.example.com/kb/", "https://help.example.com/kb/guides/Set%20up"),
        (None, "", ""),
    ],
)
def test_the_public_url(permalink, base, url):
    front = f"---\npermalink: {permalink}\n---\n" if permalink else ""
    document = document_from_file("Set up.md", (front + "text").encode(), relative="guides/Set up.md", base_url=base)
    assert document.url == url


# --- what is not a file of the folder ----------------------------------------------------


def test_a_link_out_of_the_folder_and_a_fifo_are_refused_and_named(tmp_path, db):
    outside = tmp_path / "outside"
    write(outside, {"secret.md": "# Secret\n\nthe tapir password"})
    kb = tmp_path / "kb"
    write(kb, {"page.md": "# Page\n\nthe marmot text"})
    os.symlink(outside / "secret.md", kb / "leak.md")
    os.symlink(outside, kb / "more")
    os.symlink(kb / "page.md", kb / "same.md")  # a link inside the folder is read like its file
    os.mkfifo(kb / "pipe.md")
    out, err, status = import_docs(str(kb))
    assert status == 1
    assert f"{kb / 'leak.md'}: refused: a symbolic link to {outside / 'secret.md'}, outside {kb}" in err
    assert f"{kb / 'more'}: refused: a symbolic link to {outside}, outside {kb}" in err
    assert f"{kb / 'pipe.md'}: refused: not a regular file (a FIFO, a socket or a device)" in err
    assert not DocumentRevision.objects.filter(body__contains="tapir").exists()
    assert current_text("PAGE") == "the marmot text" and current_text("SAME") == "the marmot text"
    out, err, status = import_docs(str(kb / "pipe.md"))  # named itself: refused all the same, never opened
    assert status == 1 and "refused: not a regular file" in err
