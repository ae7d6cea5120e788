"""Production settings: HTTPS switches read from the environment, a weak secret key refused, and
`check --deploy` clean under the production environment the docs give (docs/production/deployment.md)."""

import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEPLOYMENT = ROOT / "docs" / "production" / "deployment.md"
SETTINGS_TABLE = ROOT / "docs" / "production" / "settings.md"
STRONG_KEY = secrets.token_urlsafe(50)
SHOWN = [
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_SSL_REDIRECT",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "SECURE_PROXY_SSL_HEADER",
]


def _environment(**extra: str) -> dict[str, str]:
    """This process's environment without any Django or database settings of its own, plus `extra`."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_", "CELERY_", "AGENT_"))}
    return {**kept, "DJANGO_SETTINGS_MODULE": "supportagent.settings", **extra}


def _manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def _settings(**extra: str) -> dict:
    code = (
        f"import django, json; django.setup(); from django.conf import settings; "
        f"print(json.dumps({{k: getattr(settings, k, None) for k in {SHOWN!r}}}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=_environment(**extra), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def documented_production_environment() -> dict[str, str]:
    """The variables the deployment page exports before its first section, with a real key where it says `...`."""
    section = DEPLOYMENT.read_text().split("\n## ", 1)[0]
    values = {}
    for line in section.splitlines():
        match = re.match(r"\s+export (.*?)(\s+#.*)?$", line)
        if match:
            values |= dict(pair.split("=", 1) for pair in match.group(1).split())
    assert {"DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_DEBUG", "DJANGO_SECRET_KEY"} <= values.keys()
    return {k: (STRONG_KEY if v == "..." else v) for k, v in values.items()}


def test_check_deploy_is_clean_under_the_documented_production_environment():
    done = _manage(
        "check", "--deploy", "--fail-level", "WARNING", env=_environment(**documented_production_environment())
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout


def test_check_deploy_is_clean_with_the_demo_data_seeded(tmp_path):
    """The demo data has a sensitive job (calls may need approval): the defaults still pass agentrun.W001."""
    env = _environment(**documented_production_environment(), SUPPORTAGENT_VAR_DIR=str(tmp_path))
    del env["DATABASE_URL"]  # the documented host is an example: a database file of this test's own
    for command in (("migrate", "--no-input", "-v0"), ("seed_demo",)):
        done = _manage(*command, env=env)
        assert done.returncode == 0 and "WARNING" not in done.stderr, done.stdout + done.stderr
    done = _manage("check", "--deploy", "--fail-level", "WARNING", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout


def test_production_turns_on_secure_cookies_hsts_and_the_ssl_redirect():
    shown = _settings(DJANGO_DEBUG="false", DJANGO_SECRET_KEY=STRONG_KEY)
    assert shown == {
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
        "SECURE_SSL_REDIRECT": True,
        "SECURE_HSTS_SECONDS": 31_536_000,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": True,
        "SECURE_HSTS_PRELOAD": True,
        "SECURE_PROXY_SSL_HEADER": None,
    }


def test_each_switch_is_read_from_the_environment():
    shown = _settings(
        DJANGO_DEBUG="false",
        DJANGO_SECRET_KEY=STRONG_KEY,
        DJANGO_SESSION_COOKIE_SECURE="false",
        DJANGO_CSRF_COOKIE_SECURE="false",
        DJANGO_SECURE_SSL_REDIRECT="false",
        DJANGO_SECURE_HSTS_SECONDS="0",
        DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS="false",
        DJANGO_SECURE_HSTS_PRELOAD="false",
        DJANGO_SECURE_PROXY_SSL_HEADER="true",
    )
    assert shown == {
        "SESSION_COOKIE_SECURE": False,
        "CSRF_COOKIE_SECURE": False,
        "SECURE_SSL_REDIRECT": False,
        "SECURE_HSTS_SECONDS": 0,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": False,
        "SECURE_HSTS_PRELOAD": False,
        "SECURE_PROXY_SSL_HEADER": ["HTTP_X_FORWARDED_PROTO", "https"],
    }


def test_development_keeps_plain_http():
    shown = _settings()
    assert not shown["SESSION_COOKIE_SECURE"] and not shown["SECURE_SSL_REDIRECT"] and shown["SECURE_HSTS_SECONDS"] == 0


@pytest.mark.parametrize(
    "key",
    [
        "",
        "x",
        "k" * 60,
        STRONG_KEY[:49],
        "django-insecure-" + STRONG_KEY,
        "abcde" * 10,
        "0123456789" * 6,
        "ab" * 20 + STRONG_KEY[:12],
    ],
)
def test_production_refuses_to_start_with_a_weak_secret_key(key):
    done = _manage("check", env=_environment(DJANGO_DEBUG="false", DJANGO_SECRET_KEY=key))
    assert done.returncode != 0
    assert "DJANGO_SECRET_KEY" in done.stderr and "ImproperlyConfigured" in done.stderr
    if len(key) > 20:
        assert key not in done.stderr  # the key itself is never printed


@pytest.mark.parametrize(
    "name, value",
    [
        ("DJANGO_SECURE_HSTS_SECONDS", "-1"),
        ("DJANGO_SECURE_HSTS_SECONDS", "year"),
        ("DJANGO_SECURE_SSL_REDIRECT", "maybe"),
    ],
)
def test_a_bad_switch_stops_the_process_with_its_name(name, value):
    done = _manage("check", env=_environment(DJANGO_DEBUG="false", DJANGO_SECRET_KEY=STRONG_KEY, **{name: value}))
    assert done.returncode != 0 and name in done.stderr


def test_a_key_that_repeats_itself_is_told_from_random_ones():
    from django.core.management.utils import get_random_secret_key

    from supportagent.settings import repetitive

    assert repetitive("abcde" * 10) and repetitive("0123456789" * 6) and repetitive("ab" * 20 + STRONG_KEY[:12])
    for _ in range(500):
        assert not any(
            repetitive(key) for key in (get_random_secret_key(), secrets.token_hex(32), secrets.token_urlsafe(50))
        )


SIGNING = {
    "INTAKE_ZENDESK_SECRET": {},
    "AGENT_PACKET_WEBHOOK_SECRET": {
        "AGENT_PACKET_WEBHOOK_URL": "https://desk.example.com/hook",
        "AGENT_SITE_URL": "https://agent.example.com",
    },
}


@pytest.mark.parametrize("name", SIGNING)
def test_check_deploy_refuses_a_signing_secret_shorter_than_24_characters(name):
    short = "s3cr3t-" + "x" * 16  # 23 characters
    env = _environment(**documented_production_environment(), **SIGNING[name], **{name: short})
    done = _manage("check", "--deploy", env=env)
    assert done.returncode != 0
    assert "agentrun.E001" in done.stderr and name in done.stderr and short not in done.stdout + done.stderr


@pytest.mark.parametrize("name", SIGNING)
def test_check_deploy_takes_a_signing_secret_of_24_characters(name):
    env = _environment(**documented_production_environment(), **SIGNING[name], **{name: secrets.token_urlsafe(18)})
    done = _manage("check", "--deploy", "--fail-level", "WARNING", env=env)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("separator", ["\n", "\u2028", "\x85", "\x0b"])
def test_a_header_setting_of_more_than_one_line_is_refused(monkeypatch, separator):
    from django.core.exceptions import ImproperlyConfigured

    from supportagent.settings import env_header

    monkeypatch.setenv("SA_TEST_HEADER", f"Authorization: Bearer abc{separator}X-Other: 1")
    with pytest.raises(ImproperlyConfigured, match="must be one line"):
        env_header("SA_TEST_HEADER")


def environment_variables_read() -> set[str]:
    """The names supportagent/settings.py reads from the environment (through its env_* helpers or os.environ)."""
    source = (ROOT / "supportagent" / "settings.py").read_text()
    return set(re.findall(r"(?:env_[a-z_]+|os\.environ\.get|os\.environ\[)\(?\s*\"([A-Z][A-Z0-9_]+)\"", source))


def test_every_variable_the_settings_read_is_in_the_settings_table():
    read = environment_variables_read()
    assert {
        "DATABASE_URL",
        "SUPPORTAGENT_VAR_DIR",
        "AGENT_LOG_PROMPTS",
        "INTAKE_ZENDESK_SECRET",
    } <= read  # the scan sees
    documented = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", SETTINGS_TABLE.read_text()))
    assert sorted(read - documented) == []


@pytest.mark.parametrize(
    "given", [{"ZENDESK_EMAIL": "agent@acme.example"}, {"ZENDESK_API_TOKEN": "zd-lonely-token-41"}]
)
def test_the_zendesk_email_and_api_token_go_together(given):
    done = _manage("check", env=_environment(ZENDESK_URL="https://acme.zendesk.com", **given))
    assert done.returncode != 0
    assert "ZENDESK_EMAIL and ZENDESK_API_TOKEN must be set together" in done.stderr
    assert "zd-lonely-token-41" not in done.stdout + done.stderr


def test_zendesk_notes_need_the_site_url_the_notes_link_to():
    zendesk = {"ZENDESK_URL": "https://acme.zendesk.com", "ZENDESK_EMAIL": "agent@acme.example"}
    done = _manage("check", env=_environment(**zendesk, ZENDESK_API_TOKEN="zd-notes-token-41"))
    assert done.returncode != 0
    assert (
        "AGENT_SITE_URL must be set when AGENT_ZENDESK_NOTE_ON_WRITTEN and AGENT_ZENDESK_NOTE_ON_REVIEW" in done.stderr
    )
    assert "zd-notes-token-41" not in done.stdout + done.stderr

    off = {"AGENT_ZENDESK_NOTE_ON_WRITTEN": "false", "AGENT_ZENDESK_NOTE_ON_REVIEW": "false"}
    done = _manage("check", env=_environment(**zendesk, ZENDESK_API_TOKEN="zd-notes-token-41", **off))
    assert done.returncode == 0, done.stderr  # the Guide import alone needs no site URL
