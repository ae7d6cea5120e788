"""Benchmark of the knowledge base's search (`search_docs`), on SQLite or PostgreSQL.

    python bench/search_bench.py                      # SQLite (a file of its own), 2,000 documents
    python bench/search_bench.py --documents 5000
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/supportagent_bench python bench/search_bench.py

Publishes N generated articles (a title of 3-6 words and 4-8 paragraphs drawn from a 3,000-word vocabulary,
seeded, so every run has the same ones) into an empty database of its own, then searches 50 queries (a
title word, a title, three words, a customer's sentence with a typo) 10 times each. Prints the median and
p95 milliseconds per search and the SQL statements one search sends.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
if "DATABASE_URL" not in os.environ:
    os.environ["SQLITE_PATH"] = str(Path(tempfile.mkdtemp(prefix="search-bench-")) / "bench.sqlite3")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "supportagent.settings")
os.environ.setdefault("DJANGO_DEBUG", "false")
os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-" + uuid.uuid4().hex + uuid.uuid4().hex)

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from tickets.models import Document, DocumentRevision  # noqa: E402
from tickets.search import documents_search  # noqa: E402
from tickets.services import document_publish  # noqa: E402


def vocabulary(rng: random.Random, size: int = 3000) -> list[str]:
    letters = "abcdefghijklmnoprstuvwy"
    return sorted({"".join(rng.choice(letters) for _ in range(rng.randint(4, 10))) for _ in range(size)})


def articles(count: int, rng: random.Random, words: list[str]) -> list[tuple[str, str, str]]:
    made = []
    for number in range(count):
        title = " ".join(rng.choice(words) for _ in range(rng.randint(3, 6))).capitalize()
        paragraphs = [
            ". ".join(" ".join(rng.choice(words) for _ in range(rng.randint(6, 14))) for _ in range(rng.randint(2, 5)))
            for _ in range(rng.randint(4, 8))
        ]
        made.append((f"BENCH-{number}", title, "\n\n".join(paragraphs)))
    return made


def queries(made: list[tuple[str, str, str]], rng: random.Random, words: list[str]) -> list[str]:
    picked = rng.sample(made, 40)
    asked = [title.split()[0] for _, title, _ in picked[:10]]
    asked += [title for _, title, _ in picked[10:20]]
    asked += [" ".join(rng.choice(words) for _ in range(3)) for _ in range(10)]
    for _, title, _ in picked[20:40]:
        word = title.split()[-1]
        typo = word[:2] + word[3] + word[2] + word[4:] if len(word) > 4 else word
        asked.append(f"Hello, my {typo} stopped working after the update, can you help?")
    return asked


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()

    call_command("migrate", verbosity=0, interactive=False)
    DocumentRevision.objects.filter(document__code__startswith="BENCH-").delete()
    Document.objects.filter(code__startswith="BENCH-").delete()
    rng = random.Random(7)
    words = vocabulary(rng)
    made = articles(options.documents, rng, words)
    started = time.perf_counter()
    for code, title, body in made:
        document_publish(code=code, title=title, body=body, public=True)
    publish_seconds = time.perf_counter() - started
    asked = queries(made, rng, words)

    times = []
    for _ in range(options.repeat):
        for query in asked:
            clock = time.perf_counter()
            documents_search(query=query, limit=3)
            times.append((time.perf_counter() - clock) * 1000)
    with CaptureQueriesContext(connection) as captured:
        documents_search(query=asked[0], limit=3)
    times.sort()
    figures = {
        "database": connection.vendor,
        "documents": options.documents,
        "searches": len(times),
        "search_ms_median": round(statistics.median(times), 2),
        "search_ms_p95": round(times[int(len(times) * 0.95) - 1], 2),
        "statements_per_search": len(captured.captured_queries),
        "publish_documents_per_second": round(options.documents / publish_seconds),
    }
    if options.json:
        print(json.dumps(figures))
    else:
        for name, value in figures.items():
            print(f"{name:30} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
