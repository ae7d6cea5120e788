import os
from urllib.parse import urlsplit

from django.core.management.base import BaseCommand, CommandError

from tickets.docimport import docs_import


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
        "Exits non-zero when any file failed."
    )

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", metavar="PATH", help="a folder or a file")
        parser.add_argument(
            "--prune", action="store_true", help="retire the documents imported from files under PATH that are gone"
        )
        parser.add_argument("--dry-run", action="store_true", help="say what would change; write nothing")
        parser.add_argument(
            "--base-url",
            default="",
            metavar="URL",
            help="the help center's address: a document's public URL is URL plus its permalink, else its path",
        )

    def handle(self, *args, paths, prune, dry_run, base_url, **options):
        missing = [p for p in paths if not os.path.exists(p)]
        if missing:
            raise CommandError(f"no such file or folder: {', '.join(missing)}")
        progress = ProgressBar(self.stdout) if self.stdout.isatty() else None
        if base_url and urlsplit(base_url).scheme not in ("http", "https"):
            raise CommandError(f"--base-url is not an http(s) address: {base_url}")
        report = docs_import(paths=paths, prune=prune, dry_run=dry_run, base_url=base_url, progress=progress)
        for failure in report.failed:
            self.stderr.write(f"{failure.file.shown}: {failure.reason}")
        if options["verbosity"] >= 2:
            for change, codes in report.done.items():
                self.stdout.write("".join(f"{change.value} {code}\n" for code in codes), ending="")
            self.stdout.write("".join(f"pruned {code}\n" for code in report.pruned), ending="")
            self.stdout.write("".join(f"skipped {s.file.shown}: {s.reason}\n" for s in report.skipped), ending="")
        self.stdout.write(report.summary() + (" (dry run: nothing written)" if dry_run else ""))
        if report.failed:
            raise CommandError(f"{len(report.failed)} file(s) failed", returncode=1)
