"""`import_docs`: folders of document files into the knowledge base, one transaction per file.

Every file is read and checked first; a file that cannot be a document, and
every file sharing its code with another, fails with its reason and the rest
go on. A file that asks not to be published (a draft, hidden) or has nothing
to read (a redirect stub, an empty page) is skipped and counted: not a
failure. Only regular files inside the folder given are read: a symbolic link
leading out of it, a FIFO or a device is refused and named, never opened, so
an outside file can never become a public document. Each document's write is
`document_publish` on its own. `prune` then retires the documents this import
manages (see `docs_to_prune`) whose file is gone.

`guide_import` does the same for a Zendesk Guide listing (tickets.zendeskguide):
its pages are read whole first, then each article is a document of its own,
and `prune` retires the documents of that listing it no longer lists.
"""

from __future__ import annotations

import os
import stat
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError

from tickets.docfiles import MAX_FILE_BYTES, DocumentFileError, DocumentSkipped, document_from_file, is_document_file
from tickets.documents import Change, DocumentIn, publish_change
from tickets.models import Document
from tickets.selectors import (
    document_current,
    documents_current_from,
    documents_imported_from,
    documents_imported_under,
)
from tickets.services import document_publish, document_retire
from tickets.zendeskguide import (
    ORIGIN_PREFIX,
    GuideError,
    GuideSource,
    Sleep,
    article_code,
    article_document,
    article_shown,
    guide_pages,
)

ORIGIN_MAX = Document._meta.get_field("origin").max_length

Progress = Callable[[int, int, str], None]  # (done, total, the file just done)


@dataclass(frozen=True)
class DocFile:
    shown: str  # the path as the person named it, for messages
    origin: str  # the absolute path, kept on the document
    relative: str = ""  # the path under the folder given (the file's name when named itself): its code and URL
    root: str = ""  # the folder given (the file's own folder when named itself), resolved: nothing is read outside


@dataclass(frozen=True)
class Failure:
    file: DocFile
    reason: str


@dataclass
class ImportReport:
    done: dict[Change, list[str]] = field(default_factory=lambda: {change: [] for change in Change})
    pruned: list[str] = field(default_factory=list)
    failed: list[Failure] = field(default_factory=list)
    skipped: list[Failure] = field(default_factory=list)  # not failures: drafts, hidden pages, redirect stubs
    notes: list[str] = field(default_factory=list)  # what the reader should know about the import as a whole

    def summary(self) -> str:
        counts = [f"{change.value} {len(codes)}" for change, codes in self.done.items()]
        tail = [f"skipped {len(self.skipped)}", f"pruned {len(self.pruned)}", f"failed {len(self.failed)}"]
        return ", ".join([*counts, *tail])


def docs_find(paths: list[str]) -> tuple[list[DocFile], list[Failure]]:
    """The document files at `paths` (files, or folders walked recursively, hidden entries skipped), sorted,
    and those refused: links leading out of their folder, anything not a regular file."""
    found: list[DocFile] = []
    refused: list[Failure] = []
    for given in paths:
        if not os.path.isdir(given):
            root = os.path.realpath(os.path.dirname(os.path.abspath(given)))
            _file_found(DocFile(given, os.path.abspath(given), os.path.basename(given), root), found, refused)
            continue
        root = os.path.realpath(given)
        for folder, subfolders, names in os.walk(given):  # links to folders are listed, never followed
            subfolders[:] = sorted(d for d in subfolders if not d.startswith("."))
            for name in subfolders:
                _folder_link_check(os.path.join(folder, name), root, refused)
            for name in sorted(n for n in names if is_document_file(n) and not n.startswith(".")):
                path = os.path.join(folder, name)
                _file_found(DocFile(path, os.path.abspath(path), os.path.relpath(path, given), root), found, refused)
    unique = list({f.origin: f for f in found}.values())  # a file named twice is imported once
    return unique, refused


def _file_found(doc_file: DocFile, found: list[DocFile], refused: list[Failure]) -> None:
    reason = _refusal(doc_file)
    if reason:
        refused.append(Failure(doc_file, reason))
    else:
        found.append(doc_file)


def _refusal(doc_file: DocFile) -> str | None:
    """Why the file is not read (None when it is a regular file inside its folder); nothing here opens it."""
    real = os.path.realpath(doc_file.origin)
    if os.path.islink(doc_file.origin) and os.path.commonpath([real, doc_file.root]) != doc_file.root:
        return f"refused: a symbolic link to {real}, outside {doc_file.root}"
    try:
        mode = os.stat(real).st_mode
    except OSError as exc:
        return f"cannot be read: {exc.strerror}"
    return None if stat.S_ISREG(mode) else "refused: not a regular file (a FIFO, a socket or a device)"


def _folder_link_check(path: str, root: str, refused: list[Failure]) -> None:
    """A link to a folder is not followed; one leading out of the folder given is named, as a refusal."""
    real = os.path.realpath(path)
    if os.path.islink(path) and os.path.commonpath([real, root]) != root:
        refused.append(
            Failure(DocFile(path, os.path.abspath(path)), f"refused: a symbolic link to {real}, outside {root}")
        )


def docs_read(
    files: list[DocFile], base_url: str = ""
) -> tuple[list[tuple[DocFile, DocumentIn]], list[Failure], list[Failure]]:
    """Each file's document, its failure or why it is skipped; files sharing a code all fail (no file wins by its name)."""
    read, failed, skipped = [], [], []
    for doc_file in files:
        try:
            read.append((doc_file, _read(doc_file, base_url)))
        except DocumentSkipped as exc:
            skipped.append(Failure(doc_file, str(exc)))
        except DocumentFileError as exc:
            failed.append(Failure(doc_file, str(exc)))
    by_code = Counter(doc.code for _, doc in read)
    for doc_file, doc in read:
        if by_code[doc.code] > 1:
            others = [f.shown for f, d in read if d.code == doc.code and f is not doc_file]
            failed.append(Failure(doc_file, f"the code {doc.code} is also the code of {', '.join(others)}"))
    return [(f, d) for f, d in read if by_code[d.code] == 1], failed, skipped


def _read(doc_file: DocFile, base_url: str) -> DocumentIn:
    if len(doc_file.origin) > ORIGIN_MAX:
        raise DocumentFileError(f"the path is longer than {ORIGIN_MAX} characters")
    data = _file_bytes(os.path.realpath(doc_file.origin))
    return document_from_file(doc_file.origin, data, relative=doc_file.relative or None, base_url=base_url)


def _file_bytes(path: str) -> bytes:
    """The file's bytes, opened without blocking and checked again once open (it may have changed since found)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError as exc:
        raise DocumentFileError(f"cannot be read: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise DocumentFileError("refused: not a regular file (a FIFO, a socket or a device)")
        return file.read(MAX_FILE_BYTES + 1)


def docs_import(
    *,
    paths: list[str],
    prune: bool = False,
    dry_run: bool = False,
    base_url: str = "",
    progress: Progress | None = None,
) -> ImportReport:
    """Import the document files at `paths`; with `dry_run`, say what would change and write nothing.

    `base_url` plus a file's path under its folder (or its `permalink`) is its public address.
    """
    files, refused = docs_find(paths)
    documents, failed, skipped = docs_read(files, base_url)
    report = ImportReport(failed=refused + failed, skipped=skipped)
    for done, (doc_file, doc) in enumerate(documents, start=1):
        _import_one(report, doc_file, doc, dry_run)
        if progress:
            progress(done, len(documents), doc_file.shown)
    if prune:
        kept = {doc.code for _, doc in documents} | _codes_of_failed_files(report.failed)
        for code in docs_to_prune(paths=paths, kept=kept):
            if dry_run or document_retire(code=code):
                report.pruned.append(code)
    return report


def _import_one(report: ImportReport, doc_file: DocFile, doc: DocumentIn, dry_run: bool) -> None:
    if dry_run:
        report.done[publish_change(document_current(code=doc.code), doc)].append(doc.code)
        return
    try:
        outcome = document_publish(
            code=doc.code,
            title=doc.title,
            body=doc.body,
            public=doc.public,
            origin=doc_file.origin,
            url=doc.url,
            metadata=doc.metadata,
        )
    except DatabaseError as exc:  # this file's transaction rolled back; the next file has its own
        report.failed.append(Failure(doc_file, f"the database refused it: {str(exc).splitlines()[0]}"))
        return
    report.done[outcome.change].append(outcome.code)


def _codes_of_failed_files(failed: list[Failure]) -> set[str]:
    """The documents last imported from a file that failed this time: kept until the file is fixed or removed."""
    return documents_imported_from(origins=[f.file.origin for f in failed])


def docs_to_prune(*, paths: list[str], kept: set[str]) -> list[str]:
    """The documents to retire: last imported from a file at or under one of `paths`, and not in `kept`.

    Documents the admin, the demo or the API wrote last are never pruned, nor
    those imported from anywhere outside `paths`: importing a subfolder with
    `--prune` touches that subfolder's documents only.
    """
    roots = [os.path.abspath(p) for p in paths]
    return [code for code in documents_imported_under(roots=roots) if code not in kept]


# --- a Zendesk Guide listing ----------------------------------------------------------------------


def guide_import(
    *,
    source: GuideSource,
    prune: bool = False,
    dry_run: bool = False,
    progress: Progress | None = None,
    sleep: Sleep = time.sleep,
) -> ImportReport:
    """Import the articles `source` lists; raises GuideError, having written nothing, when a page cannot be read.

    The listing is read whole before the first write, so `prune` (the documents
    last imported from this same listing that it lists no longer) never acts
    on a listing cut short. An article that fails keeps its document.
    """
    if len(source.origin) > ORIGIN_MAX:
        raise GuideError(f"the listing's address is longer than {ORIGIN_MAX - len(ORIGIN_PREFIX)} characters")
    report = ImportReport()
    documents, kept = _guide_documents(source, _guide_listing(source, report, sleep), report)
    for done, (doc_file, doc) in enumerate(documents, start=1):
        _import_one(report, doc_file, doc, dry_run)
        if progress:
            progress(done, len(documents), doc.code)  # the code: a title may hold a '/'
    if prune:
        for code in documents_current_from(origin=source.origin):
            if code not in kept and (dry_run or document_retire(code=code)):
                report.pruned.append(code)
    return report


def _guide_listing(source: GuideSource, report: ImportReport, sleep: Sleep) -> dict[str, dict[str, Any]]:
    """Every article of every page, by code: one listed twice (pages shifting under offset pagination) once."""
    articles: dict[str, dict[str, Any]] = {}
    for page in guide_pages(source, sleep=sleep):
        articles.update((article_code(article), article) for article in page.articles)
        if not source.is_url and page.next_url():
            report.notes.append("a saved page: its next_page is not followed (give its URL to read every page)")
    return articles


def _guide_documents(
    source: GuideSource, articles: dict[str, dict[str, Any]], report: ImportReport
) -> tuple[list[tuple[DocFile, DocumentIn]], set[str]]:
    """The articles' documents, and the codes to keep: those and the articles that failed (drafts are not kept)."""
    documents, kept = [], set()
    for code, article in articles.items():
        doc_file = DocFile(article_shown(article), source.origin)
        try:
            documents.append((doc_file, article_document(article)))
        except DocumentSkipped as exc:
            report.skipped.append(Failure(doc_file, str(exc)))
            continue
        except DocumentFileError as exc:
            report.failed.append(Failure(doc_file, f"{code}: {exc}"))
        kept.add(code)
    return documents, kept
