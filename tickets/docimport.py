"""`import_docs`: folders of document files into the knowledge base, one transaction per file.

Every file is read and checked first; a file that cannot be a document, and
every file sharing its code with another, fails with its reason and the rest
go on. Each document's write is `document_publish` on its own. `prune` then
retires the documents this import manages (see `docs_to_prune`) whose file is
gone.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.db import DatabaseError

from tickets.docfiles import DocumentFileError, document_from_file, is_document_file
from tickets.documents import Change, DocumentIn, publish_change
from tickets.models import Document
from tickets.selectors import document_current, documents_imported_from, documents_imported_under
from tickets.services import document_publish, document_retire

ORIGIN_MAX = Document._meta.get_field("origin").max_length

Progress = Callable[[int, int, str], None]  # (done, total, the file just done)


@dataclass(frozen=True)
class DocFile:
    shown: str  # the path as the person named it, for messages
    origin: str  # the absolute path, kept on the document


@dataclass(frozen=True)
class Failure:
    file: DocFile
    reason: str


@dataclass
class ImportReport:
    done: dict[Change, list[str]] = field(default_factory=lambda: {change: [] for change in Change})
    pruned: list[str] = field(default_factory=list)
    failed: list[Failure] = field(default_factory=list)

    def summary(self) -> str:
        counts = [f"{change.value} {len(codes)}" for change, codes in self.done.items()]
        return ", ".join([*counts, f"pruned {len(self.pruned)}", f"failed {len(self.failed)}"])


def docs_find(paths: list[str]) -> list[DocFile]:
    """The document files at `paths` (files, or folders walked recursively, hidden entries skipped), sorted."""
    found = []
    for given in paths:
        if os.path.isfile(given):
            found.append(DocFile(given, os.path.abspath(given)))
            continue
        for folder, subfolders, names in os.walk(given):
            subfolders[:] = sorted(d for d in subfolders if not d.startswith("."))
            found.extend(
                DocFile(os.path.join(folder, name), os.path.abspath(os.path.join(folder, name)))
                for name in sorted(names)
                if is_document_file(name) and not name.startswith(".")
            )
    return list({f.origin: f for f in found}.values())  # a file named twice is imported once


def docs_read(files: list[DocFile]) -> tuple[list[tuple[DocFile, DocumentIn]], list[Failure]]:
    """Each file's document, or its failure; files sharing a code all fail (no file wins by its name)."""
    read, failed = [], []
    for doc_file in files:
        try:
            read.append((doc_file, _read(doc_file)))
        except DocumentFileError as exc:
            failed.append(Failure(doc_file, str(exc)))
    by_code = Counter(doc.code for _, doc in read)
    for doc_file, doc in read:
        if by_code[doc.code] > 1:
            others = [f.shown for f, d in read if d.code == doc.code and f is not doc_file]
            failed.append(Failure(doc_file, f"the code {doc.code} is also the code of {', '.join(others)}"))
    return [(f, d) for f, d in read if by_code[d.code] == 1], failed


def _read(doc_file: DocFile) -> DocumentIn:
    if len(doc_file.origin) > ORIGIN_MAX:
        raise DocumentFileError(f"the path is longer than {ORIGIN_MAX} characters")
    try:
        data = Path(doc_file.origin).read_bytes()
    except OSError as exc:
        raise DocumentFileError(f"cannot be read: {exc.strerror}") from None
    return document_from_file(doc_file.origin, data)


def docs_import(
    *, paths: list[str], prune: bool = False, dry_run: bool = False, progress: Progress | None = None
) -> ImportReport:
    """Import the document files at `paths`; with `dry_run`, say what would change and write nothing."""
    documents, failed = docs_read(docs_find(paths))
    report = ImportReport(failed=failed)
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
            code=doc.code, title=doc.title, body=doc.body, public=doc.public, origin=doc_file.origin
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
