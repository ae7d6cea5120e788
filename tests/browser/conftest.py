"""Browser tests drive Debian's Chromium (/usr/bin/chromium) through pytest-playwright; nothing is downloaded.

Screenshots of every page visited go to test-artifacts/.
"""

from __future__ import annotations

from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="session", autouse=True)
def orm_beside_playwright():
    """Playwright's sync API runs an event loop in this thread; the ORM calls in test bodies are still synchronous."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        yield


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "headless": True, "args": CHROMIUM_ARGS}


@pytest.fixture
def shot(page):
    """shot(name): save a full-page screenshot as test-artifacts/NAME.png."""
    ARTIFACTS.mkdir(exist_ok=True)

    def _shot(name: str) -> Path:
        path = ARTIFACTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return _shot


@pytest.fixture
def login(page, live_server):
    def _login(username: str, password: str) -> None:
        page.goto(f"{live_server.url}/admin/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", password)
        page.click("input[type=submit]")
        page.wait_for_selector("#user-tools")

    return _login
