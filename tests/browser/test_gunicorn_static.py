"""The production web process as deployed (docs/production/deployment.md): `collectstatic`, then gunicorn with
deploy/gunicorn.conf.py and DJANGO_DEBUG=false on the test database. The admin's login page comes with its
stylesheet applied, served by WhiteNoise from the web process itself."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import workers

GUNICORN = str(Path(sys.executable).with_name("gunicorn"))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _production_environment(static_root: Path) -> dict[str, str]:
    """DEBUG off with a strong key, on the test database; plain HTTP on localhost, so no redirect to HTTPS."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_", "CELERY_", "AGENT_"))}
    return {
        **kept,
        "DJANGO_SETTINGS_MODULE": "supportagent.settings",
        "DJANGO_DEBUG": "false",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_SECURE_SSL_REDIRECT": "false",
        "DJANGO_STATIC_ROOT": str(static_root),
        "DATABASE_URL": workers.test_database_url(),
        "WEB_CONCURRENCY": "2",
    }


def _wait_until_up(url: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"gunicorn did not answer {url} in 30 s:\n{log.read_text()}")


@pytest.fixture
def gunicorn_url(transactional_db, tmp_path) -> Iterator[str]:
    """The deploy steps (collectstatic, then gunicorn with the documented config) on a free port."""
    env = _production_environment(tmp_path / "static")
    collected = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--no-input"],
        cwd=workers.ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert collected.returncode == 0, collected.stdout + collected.stderr
    url = f"http://127.0.0.1:{_free_port()}"
    log = tmp_path / "gunicorn.log"
    with open(log, "wb") as out:
        args = [GUNICORN, "-c", "deploy/gunicorn.conf.py", "--bind", url.removeprefix("http://"), "supportagent.wsgi"]
        proc = subprocess.Popen(args, cwd=workers.ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_until_up(f"{url}/healthz", proc, log)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=40)


def test_the_admin_login_from_gunicorn_has_its_stylesheet_applied(page, gunicorn_url, shot):
    static_answers = []
    page.on("response", lambda r: static_answers.append((r.url, r.status)) if "/static/" in r.url else None)
    response = page.goto(f"{gunicorn_url}/admin/login/")
    assert response.status == 200
    shot("70-admin-login-gunicorn")
    # Set only by admin/css/base.css: the header is a flex row and the page's colours are its custom properties.
    assert page.evaluate("getComputedStyle(document.querySelector('#header')).display") == "flex"
    primary = page.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--primary').trim()")
    assert primary == "#79aec8"
    stylesheets = page.evaluate("[...document.styleSheets].map(s => s.href).filter(Boolean)")
    base = next(href for href in stylesheets if "/static/admin/css/base." in href)
    assert base.endswith(".css") and base != f"{gunicorn_url}/static/admin/css/base.css", "a content-hashed name"
    assert static_answers and all(status == 200 for _, status in static_answers), static_answers


def test_static_files_answer_200_with_long_caching(gunicorn_url):
    with urllib.request.urlopen(f"{gunicorn_url}/admin/login/", timeout=5) as login:
        html = login.read().decode()
    href = html.split('href="/static/admin/css/base.', 1)[1].split('"', 1)[0]
    with urllib.request.urlopen(f"{gunicorn_url}/static/admin/css/base.{href}", timeout=5) as css:
        assert css.status == 200
        assert "--primary: #79aec8" in css.read().decode()
        assert "max-age=315360000" in css.headers["Cache-Control"]
