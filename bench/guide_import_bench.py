"""Time `import_docs --zendesk-guide` on generated Guide articles served by a local Help Center API.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/anything python bench/guide_import_bench.py [--articles 3000]

Makes a database of its own beside the one DATABASE_URL names (`<name>_guidebench`, dropped at
the end), migrates it, and serves N generated articles (a few paragraphs of HTML each, a list,
a table; every 20th a draft) 100 to a page, as Zendesk's largest page, from tests/support/guideserver.py
with API-token authentication. Then runs `manage.py import_docs --zendesk-guide` twice, each in a
fresh process (Django's start included in the time): the first import, and the same listing again.
For the second, it reports the revisions counted before and after, and the rows of tickets_document
and tickets_documentrevision PostgreSQL counts as inserted, updated or deleted meanwhile
(pg_stat_user_tables): "nothing written" means all of them are unchanged.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.guideserver import GuideServer, article  # noqa: E402

EMAIL, TOKEN = "bench@acme.example", "bench-api-token-not-a-secret"
TABLES = ("tickets_document", "tickets_documentrevision")


def articles(count: int) -> list[dict]:
    topics = ["exports", "billing", "single sign-on", "workspaces", "API keys", "webhooks", "roles", "audit logs"]
    made = []
    for n in range(1, count + 1):
        topic = topics[n % len(topics)]
        body = (
            f"<h2>About {topic}</h2><p>Article {n} explains how {topic} work for workspace owners and members, "
            f"what each role may do, and what to check first when something fails.</p>"
            f"<ul><li>Step one: open Settings, then {topic}.</li><li>Step two: choose the workspace.</li>"
            f"<li>Step three: save, and wait for the confirmation e-mail.</li></ul>"
            f"<table><tr><th>Role</th><th>May</th></tr><tr><td>editor</td><td>change {topic}</td></tr>"
            f"<tr><td>viewer</td><td>read {topic}</td></tr></table>"
            f"<p>Error code E{n:05d} means the request was refused; the message names the missing permission.</p>"
        )
        made.append(article(900000 + n, f"{topic.capitalize()}, part {n}", body, draft=n % 20 == 0))
    return made


def counters(url: str) -> dict[str, tuple[int, int, int]]:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        rows = conn.execute(
            "SELECT relname, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables WHERE relname = ANY(%s)",
            [list(TABLES)],
        ).fetchall()
        return {name: (ins, upd, dele) for name, ins, upd, dele in rows}


def revisions(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM tickets_documentrevision").fetchone()[0]


def run_import(env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "manage.py", "import_docs", "--zendesk-guide"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(done.stdout + done.stderr)
    return elapsed, done.stdout.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--articles", type=int, default=3000)
    count = parser.parse_args().articles
    given = urlsplit(os.environ["DATABASE_URL"])
    name = given.path.lstrip("/") + "_guidebench"
    url = urlunsplit(given._replace(path="/" + name))
    admin = urlunsplit(given._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    server = GuideServer(articles=articles(count), per_page=100, credentials=(f"{EMAIL}/token", TOKEN))
    env = {**os.environ, "DATABASE_URL": url, "ZENDESK_URL": server.base}
    env |= {"ZENDESK_EMAIL": EMAIL, "ZENDESK_API_TOKEN": TOKEN}
    try:
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
        first, first_summary = run_import(env)
        before, revisions_before = counters(url), revisions(url)
        second, second_summary = run_import(env)
        time.sleep(1)  # a backend's counters reach the shared statistics when it ends; give them a moment
        after, revisions_after = counters(url), revisions(url)
    finally:
        server.close()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
    print(f"{count} articles, {len(server.received)} page requests in all")
    print(f"first import:      {first:.1f} s, {count / first:.0f} articles/s  ({first_summary})")
    print(f"unchanged import:  {second:.1f} s, {count / second:.0f} articles/s  ({second_summary})")
    print(f"revisions before/after the unchanged import: {revisions_before}/{revisions_after}")
    for table in TABLES:
        moved = [b - a for a, b in zip(before[table], after[table], strict=True)]
        print(f"{table}: inserted {moved[0]}, updated {moved[1]}, deleted {moved[2]} by the unchanged import")


if __name__ == "__main__":
    main()
