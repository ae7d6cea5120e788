import os
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from tickets.docimport import ImportReport, docs_import, guide_import
from tickets.zendeskguide import GuideError, guide_source


class ProgressBar:
    """One line redrawn in place, for a terminal."""

    WIDTH = 30

    def __init__(self, out):
        self.out = out

    def __call__(self, done: int, total: int, name: str) -> None:
        filled = self.WIDTH * done // total
        line = f"[{'#' * filled}{'.' * (self.WIDTH - filled)}] {done}/{total} {os.path.basename(name)}"
        self.out.write(f"\r{line[:100]:<100}", ending="")
        self.out.flush()
        if done == total:
            self.out.write("\r" + " " * 100 + "\r", ending="")


class Command(BaseCommand):
    help = (
        "Import Markdown (.md, .mdx), HTML (.html, .htm) and text (.txt) files, folders searched recursively, "
        "into the knowledge base: a new revision only where the text, title or visibility changed. "
        "Drafts, hidden pages, redirect stubs and empty pages are skipped and counted. "
        "Exits non-zero when any file failed. With --zendesk-guide, the articles of a Zendesk Guide (Help Center) "
        "instead: a saved page of its API, its URL, or with no value $ZENDESK_URL's whole listing."
    )

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="*", metavar="PATH", help="a folder or a file")
        parser.add_argument(
            "--zendesk-guide",
            nargs="?",
            const="",
            default=None,
            metavar="FILE_OR_URL",
            help="import Zendesk Guide articles: a saved articles.json page, an https:// URL of the listing, "
            "a path on ZENDESK_URL (api/v2/help_center/fr/articles.json), or nothing for ZENDESK_URL's whole listing",
        )
        parser.add_argument(
            "--prune",
            action="store_true",
            help="retire the documents imported from files under PATH that are gone (with --zendesk-guide: the "
            "documents of that listing it lists no longer)",
        )
        parser.add_argument("--dry-run", action="store_true", help="say what would change; write nothing")
        parser.add_argument(
            "--base-url",
            default="",
            metavar="URL",
            help="the help center's address: a document's public URL is URL plus its permalink, else its path",
        )

    def handle(self, *args, paths, prune, dry_run, base_url, zendesk_guide, **options):
        progress = ProgressBar(self.stdout) if self.stdout.isatty() else None
        if zendesk_guide is not None:
            report = self._guide(
                zendesk_guide, paths=paths, base_url=base_url, prune=prune, dry_run=dry_run, progress=progress
            )
        else:
            report = self._files(paths, base_url=base_url, prune=prune, dry_run=dry_run, progress=progress)
        for failure in report.failed:
            self.stderr.write(f"{failure.file.shown}: {failure.reason}")
        if options["verbosity"] >= 2:
            for change, codes in report.done.items():
                self.stdout.write("".join(f"{change.value} {code}\n" for code in codes), ending="")
            self.stdout.write("".join(f"pruned {code}\n" for code in report.pruned), ending="")
            self.stdout.write("".join(f"skipped {s.file.shown}: {s.reason}\n" for s in report.skipped), ending="")
        self.stdout.write("".join(f"note: {note}\n" for note in report.notes), ending="")
        self.stdout.write(report.summary() + (" (dry run: nothing written)" if dry_run else ""))
        if report.failed:
            what = "article(s)" if zendesk_guide is not None else "file(s)"
            raise CommandError(f"{len(report.failed)} {what} failed", returncode=1)

    def _files(self, paths, *, base_url, **options) -> ImportReport:
        if not paths:
            raise CommandError("name a folder or a file to import (or --zendesk-guide)")
        missing = [p for p in paths if not os.path.exists(p)]
        if missing:
            raise CommandError(f"no such file or folder: {', '.join(missing)}")
        if base_url and urlsplit(base_url).scheme not in ("http", "https"):
            raise CommandError(f"--base-url is not an http(s) address: {base_url}")
        return docs_import(paths=paths, base_url=base_url, **options)

    def _guide(self, value, *, paths, base_url, **options) -> ImportReport:
        if paths:
            raise CommandError(
                f"--zendesk-guide imports one listing: import the files ({' '.join(paths)}) on their own"
            )
        if base_url:
            raise CommandError("--base-url is for files: a Guide article's public URL is its html_url")
        try:
            source = guide_source(
                value, zendesk_url=settings.ZENDESK_URL, email=settings.ZENDESK_EMAIL, token=settings.ZENDESK_API_TOKEN
            )
            return guide_import(source=source, **options)
        except GuideError as exc:
            raise CommandError(f"{exc}; nothing was imported") from None
