"""Zendesk Guide for tests: a threaded HTTP server on 127.0.0.1 listing Help Center articles as Zendesk's API does.

`GET /api/v2/help_center/articles.json` and `/api/v2/help_center/{locale}/articles.json`
answer `articles` (the locale's only, when it names one) `per_page` at a time, with
offset pagination (`next_page` an absolute URL, null on the last page, beside `page`,
`per_page`, `page_count`, `count`) or, with `cursor`, cursor pagination (`meta.has_more`,
`links.next`). With `credentials` set, a request without that basic authentication is
a 401, as Zendesk answers one. `answers` are taken first, one per request (a status, a
body, headers such as Retry-After). Every request is kept in `received`, with its time.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.localserver import local_server, local_url

LISTING = re.compile(r"^/api/v2/help_center/(?:(?P<locale>[a-z-]+)/)?articles\.json$")


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: Any = None  # bytes as they are, anything else as JSON
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    at: float  # time.monotonic()


def article(article_id: int, title: str, body: str, **fields: Any) -> dict[str, Any]:
    """An article in the shape of Zendesk's Articles API, the fields not given at their usual values."""
    return {
        "id": article_id,
        "title": title,
        "body": body,
        "html_url": f"https://acme.zendesk.com/hc/en-us/articles/{article_id}",
        "url": f"https://acme.zendesk.com/api/v2/help_center/en-us/articles/{article_id}.json",
        "draft": False,
        "locale": "en-us",
        "source_locale": "en-us",
        "section_id": 360004785313,
        "label_names": [],
        "outdated": False,
        "promoted": False,
        "position": 0,
        "user_segment_id": None,
        "updated_at": "2025-01-20T16:02:10Z",
        "vote_count": 0,
        "vote_sum": 0,
    } | fields


@dataclass
class GuideServer:
    articles: list[dict[str, Any]] = field(default_factory=list)
    per_page: int = 2
    cursor: bool = False
    credentials: tuple[str, str] | None = None
    answers: list[Answer] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server = local_server(self._handler())

    @property
    def base(self) -> str:
        return local_url(self._server)

    @property
    def listing_url(self) -> str:
        return self.base + "/api/v2/help_center/articles.json"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _answer(self, path: str, headers: dict[str, str]) -> Answer:
        with self._lock:
            self.received.append(Received(path, headers, time.monotonic()))
            if self.answers:
                return self.answers.pop(0)
        if self.credentials and headers.get("authorization") != _basic(*self.credentials):
            return Answer(401, {"error": "Couldn't authenticate you"})
        parts = urlsplit(path)
        listing = LISTING.match(parts.path)
        if listing is None:
            return Answer(404, {"error": "InvalidEndpoint"})
        return Answer(200, self._page(listing.group("locale"), parse_qs(parts.query)))

    def _page(self, locale: str | None, query: dict[str, list[str]]) -> dict[str, Any]:
        chosen = [a for a in self.articles if locale is None or a.get("locale") == locale]
        path = f"/api/v2/help_center/{locale + '/' if locale else ''}articles.json"
        if self.cursor:
            start = int(query.get("page[after]", ["0"])[0])
            more = start + self.per_page < len(chosen)
            after = f"{self.base}{path}?page[size]={self.per_page}&page[after]={start + self.per_page}"
            return {
                "articles": chosen[start : start + self.per_page],
                "meta": {"has_more": more, "after_cursor": str(start + self.per_page), "before_cursor": str(start)},
                "links": {"next": after if more else None, "prev": None},
            }
        page = int(query.get("page", ["1"])[0])
        count = len(chosen)
        page_count = max(1, -(-count // self.per_page))
        return {
            "articles": chosen[(page - 1) * self.per_page : page * self.per_page],
            "next_page": f"{self.base}{path}?page={page + 1}&per_page={self.per_page}" if page < page_count else None,
            "previous_page": f"{self.base}{path}?page={page - 1}&per_page={self.per_page}" if page > 1 else None,
            "page": page,
            "per_page": self.per_page,
            "page_count": page_count,
            "count": count,
        }

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                answer = server._answer(self.path, {k.lower(): v for k, v in self.headers.items()})
                data = answer.body if isinstance(answer.body, bytes) else json.dumps(answer.body).encode()
                self.send_response(answer.status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
