"""The knowledge base's search on SQLite (the embedded default), from a test running on PostgreSQL.

`SqliteSearch` migrates a database file once in a fresh process without DATABASE_URL; `run(steps)` then copies
it and plays the steps in another fresh process: load the demo data, publish or write a document, add a synonym
group, rename or retire a document, search. Each search's result is the list of codes found, in order. `play` runs
any other script the same way.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.workers import ROOT

SCRIPT = """
import json, sys
import django
django.setup()
from tickets.models import Document, SearchSynonym
from tickets.search import documents_search
from tickets.services import document_publish, document_retire

found = []
for step in json.load(sys.stdin):
    kind, value = next(iter(step.items()))
    if kind == "publish":
        document_publish(**value)
    elif kind == "synonyms":
        SearchSynonym.objects.create(words=value)
    elif kind == "demo":
        from tickets.demo import seed_demo

        seed_demo()
    elif kind == "document":  # written as a test may write one: the ORM, no service
        from django.utils import timezone
        from tickets.models import DocumentRevision

        document = Document.objects.create(code=value["code"], title=value["title"], public=True)
        DocumentRevision.objects.create(
            document=document, number=1, is_current=True, published_at=timezone.now(), body=value["body"]
        )
    elif kind == "rename":
        Document.objects.filter(code=value["code"]).update(title=value["title"])
    elif kind == "retire":
        document_retire(code=value)
    elif kind == "search":
        found.append([r.document.code for r in documents_search(query=value, limit=5)])
print(json.dumps(found))
"""


class SqliteSearch:
    def __init__(self, folder: Path):
        self.folder = folder
        self.template = folder / "migrated.sqlite3"
        self.runs = 0
        self._manage("migrate", "--no-input", "-v0", path=self.template)

    def _env(self, path: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
        return {**env, "SQLITE_PATH": str(path), "DJANGO_SETTINGS_MODULE": "supportagent.settings"}

    def _manage(self, *args: str, path: Path) -> None:
        subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self._env(path), check=True, timeout=300)

    def run(self, steps: list[dict[str, Any]]) -> list[list[str]]:
        return self.play(SCRIPT, steps)

    def play(self, script: str, given: Any = None) -> Any:
        """Run `script` on a fresh copy of the migrated database, `given` as JSON on its stdin; what it printed
        last, read as JSON."""
        self.runs += 1
        path = self.folder / f"run-{self.runs}.sqlite3"
        shutil.copyfile(self.template, path)
        done = subprocess.run(
            [sys.executable, "-c", script],
            cwd=ROOT,
            env=self._env(path),
            input=json.dumps(given),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])
