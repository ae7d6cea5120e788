"""How often a packet names the article that answers the ticket, over a labelled set and a real help center.

    git clone --depth 1 https://github.com/bitwarden/help /tmp/bitwarden-help
    python bench/answer_bench.py /tmp/bitwarden-help/_articles             # the rule-based investigator
    python bench/answer_bench.py /tmp/bitwarden-help/_articles --json
    python bench/answer_bench.py /tmp/bitwarden-help/_articles --model anthropic:claude-…   # with its key set

Imports the help center as it is exported (`import_docs`) into a database of its own (SQLite, or
DATABASE_URL), then opens each ticket of `bench/answer_set.json` (written as customers write them, each
with the articles that answer it, a few that nothing in the help center answers) and investigates it
inline. Prints:

* `search_recall_at_3`: the share of answerable tickets for which `search_docs`, given the first thing
  the rules search for (the ticket's own words), lists an answering article among its first three;
* `answered_named`: the share of answerable tickets whose packet names an answering article (target
  at least 0.85);
* `unanswerable_named`: the share of unanswerable tickets whose packet names an article anyway
  (target at most 0.20);
* `replies_linking_named`: of the packets that name an article, the share whose suggested reply links it
  (its public address: `--base-url` plus the file's path, as `import_docs --base-url` makes it);
and, per ticket, what its packet named.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
if "DATABASE_URL" not in os.environ:
    os.environ["SQLITE_PATH"] = str(Path(tempfile.mkdtemp(prefix="answer-bench-")) / "bench.sqlite3")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "supportagent.settings")
os.environ.setdefault("DJANGO_DEBUG", "false")
os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-" + uuid.uuid4().hex + uuid.uuid4().hex)

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from engine.loop import run_advance  # noqa: E402
from engine.services import run_start  # noqa: E402
from providers.context import Context  # noqa: E402
from providers.rules import Investigation  # noqa: E402
from tickets.demo import DOCUMENTS, seed_demo  # noqa: E402
from tickets.docimport import docs_import  # noqa: E402
from tickets.models import Document, Ticket  # noqa: E402
from tickets.search import documents_search  # noqa: E402
from tickets.services import document_retire  # noqa: E402

SET = Path(__file__).resolve().parent / "answer_set.json"


CITED = re.compile(r"\(([A-Z0-9][A-Za-z0-9_.-]*) r[0-9]+\)")  # "(IMPORTING_ENCRYPTED-EXPORT r1)"


def named(summary: str, codes: list[str]) -> list[str]:
    """The articles among `codes` a packet's summary names, as the rules name one: "(CODE rN)"."""
    known = set(codes)
    return list(dict.fromkeys(code for code in CITED.findall(summary) if code in known))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("helpcenter", help="the exported help center's folder (bitwarden/help's _articles)")
    parser.add_argument("--model", default="rules", help="the model to investigate with (default: rules)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--base-url",
        default="https://help.example.com/",
        help="the help center's public address, before each file's path (import_docs --base-url)",
    )
    options = parser.parse_args()

    call_command("migrate", verbosity=0, interactive=False)
    seed_demo()
    for code, *_ in DOCUMENTS:  # the demo's own articles are not this help center's
        document_retire(code=code)
    report = docs_import(paths=[options.helpcenter], prune=False, dry_run=False, base_url=options.base_url)
    if report.failed:
        print(f"{len(report.failed)} files failed to import", file=sys.stderr)
    articles = list(Document.objects.filter(revisions__is_current=True).values_list("code", flat=True))
    urls = dict(Document.objects.exclude(url="").values_list("code", "url"))
    cases = json.loads(SET.read_text())["cases"]
    template = Ticket.objects.select_related("account", "session").get(ref="T-1001")

    rows, found_at_3, answered, unanswerable_named = [], 0, 0, 0
    for number, case in enumerate(cases, 1):
        ticket = Ticket.objects.create(
            ref=f"T-BENCH-{number}",
            account=template.account,
            session=template.session,
            subject=case["subject"],
            body=case["body"],
        )
        problems = Investigation(Context(ticket.ref, ticket.subject, ticket.body, True)).problems()
        top = [r.document.code for r in documents_search(query=problems[0], limit=3)] if problems else []
        run = run_advance(run_start(ticket=ticket, session=ticket.session, model_name=options.model).pk)
        packet = getattr(run, "packet", None)
        summary, reply = (packet.summary or "", packet.reply) if packet else ("", "")
        cited = named(summary, articles)
        if case["answers"]:
            found_at_3 += bool(set(top) & set(case["answers"]))
            answered += bool(set(cited) & set(case["answers"]))
        else:
            unanswerable_named += bool(cited)
        rows.append(
            {
                "subject": case["subject"],
                "status": run.status,
                "named": cited,
                "answers": case["answers"],
                "summary": summary,
                "reply": reply,
                "reply_links": [c for c in cited if urls.get(c) and urls[c] in reply],
            }
        )

    answerable = sum(1 for c in cases if c["answers"])
    unanswerable = len(cases) - answerable
    figures = {
        "model": options.model,
        "articles": len(articles),
        "tickets": len(cases),
        "answerable": answerable,
        "search_recall_at_3": round(found_at_3 / answerable, 3),
        "answered_named": round(answered / answerable, 3),
        "unanswerable_named": round(unanswerable_named / unanswerable, 3) if unanswerable else None,
        "replies_linking_named": round(sum(bool(r["reply_links"]) for r in rows if r["named"]) / named_count, 3)
        if (named_count := sum(bool(r["named"]) for r in rows))
        else None,
    }
    if options.json:
        print(json.dumps({**figures, "tickets_seen": rows}))
        return 0
    for row in rows:
        mark = "answers" if row["answers"] else "no answer"
        print(f"{row['subject'][:34]:36}{row['status']:14}{mark:10} named {', '.join(row['named']) or '-'}")
    print()
    for name, value in figures.items():
        print(f"{name:22} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
