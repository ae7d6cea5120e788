"""Zendesk Guide's articles, read as its Help Center API lists them, each into a `DocumentIn`. No queries.

The shapes are Zendesk's, as documented:

* List Articles, `GET /api/v2/help_center/articles.json` or `/api/v2/help_center/{locale}/articles.json`
  (https://developer.zendesk.com/api-reference/help_center/help-center-api/articles/): `{"articles": [...]}`,
  each article with `id`, `title`, `body` (HTML), `html_url` (its page in the help center), `draft`,
  `locale`, `section_id`, `label_names`, `updated_at`, `outdated`, `promoted`, `user_segment_id` (null:
  everyone may read it) and more.
* Offset pagination (https://developer.zendesk.com/documentation/api-basics/pagination/
  paginating-through-lists-using-offset-pagination/): `next_page` is the next page's URL, null on the
  last, beside `page`, `per_page`, `page_count` and `count`.
* Cursor pagination (https://developer.zendesk.com/api-reference/introduction/pagination/):
  `meta.has_more` and `links.next`.
* Rate limits (https://developer.zendesk.com/api-reference/help_center/help-center-api/introduction/):
  HTTP 429 with `Retry-After`, the seconds to wait.
* API-token authentication (https://support.zendesk.com/hc/en-us/articles/4408831452954): basic
  authentication as `{email}/token` with the token as the password.

A listing is read whole before anything is written: a page that cannot be
read (refused, not JSON, not Zendesk's shape) is a `GuideError` naming the
page. One article that cannot be a document fails alone (`DocumentFileError`),
a draft is skipped (`DocumentSkipped`), as files are. The credentials go to
`ZENDESK_URL`'s own host only, and never into a message.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpx2
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tickets.docfiles import DocumentFileError, DocumentSkipped, html_title_and_text
from tickets.documents import DocumentIn

LIST_PATH = "/api/v2/help_center/articles.json"
ORIGIN_PREFIX = "zendesk-guide:"  # a Guide document's origin; never an absolute path, so a folder's --prune skips it
MAX_PAGES = 500  # 50,000 articles at Zendesk's largest page (100): past it the listing is refused, not cut short
MAX_PAGE_BYTES = 32 * 1024 * 1024
TIMEOUT_SECONDS = 30.0  # one page, from the request to its last byte
MAX_RETRY_AFTER_SECONDS = 60  # a longer wait asked by a 429 ends the import: run it again later
MAX_WAITS = 5  # 429s in a row for one page
KEPT = ("locale", "source_locale", "section_id", "label_names", "updated_at", "outdated", "promoted", "user_segment_id")

Sleep = Callable[[float], None]


class GuideError(Exception):
    """The listing cannot be read; the message names the page and why (never a credential). Nothing is written."""


# --- where the listing is ---------------------------------------------------------------------


@dataclass(frozen=True)
class GuideSource:
    location: str  # a file's absolute path, or the first page's URL (credentials taken out)
    auth: tuple[str, str] | None = None  # (user, token) for pages on `auth_origin`
    auth_origin: str = ""  # scheme://host[:port] of ZENDESK_URL

    @property
    def is_url(self) -> bool:
        return self.location.startswith(("http://", "https://"))

    @property
    def origin(self) -> str:
        """What the documents of this listing remember (`Document.origin`): `--prune` retires only their own."""
        return ORIGIN_PREFIX + self.location


def guide_source(value: str, *, zendesk_url: str = "", email: str = "", token: str = "") -> GuideSource:
    """The listing `value` names: an existing file; an http(s) URL; a path (`api/v2/…`) on `zendesk_url`, or
    nothing for `zendesk_url`'s whole listing. Credentials are sent only to `zendesk_url`'s host."""
    auth = (f"{email}/token", token) if email and token else None
    home = _origin_of(zendesk_url) if zendesk_url else ""
    if value and os.path.isfile(value):
        return GuideSource(os.path.abspath(value))
    if value.lower().startswith(("http://", "https://")):
        return GuideSource(_without_credentials(value), auth, home)
    if value and not value.lstrip("/").startswith("api/"):
        raise GuideError(f"no such file: {value} (a URL begins with https://, a path on ZENDESK_URL with api/)")
    if not zendesk_url:
        raise GuideError("ZENDESK_URL is not set: name a file or an https:// URL, or set ZENDESK_URL")
    return GuideSource(zendesk_url.rstrip("/") + "/" + (value or LIST_PATH).lstrip("/"), auth, home)


def _origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{(parts.hostname or '').lower()}:{parts.port or _default_port(parts.scheme)}"


def _default_port(scheme: str) -> int:
    return 443 if scheme.lower() == "https" else 80


def _without_credentials(url: str) -> str:
    """`url` without a user or password in it and without a fragment: what messages and origins show."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


# --- pages ----------------------------------------------------------------------------------------


class _CursorMeta(BaseModel):
    has_more: bool = False


class _CursorLinks(BaseModel):
    next: str | None = None


class GuidePage(BaseModel):
    """One page of a listing, in either of Zendesk's pagination shapes; every article an object with an id."""

    model_config = ConfigDict(extra="ignore")

    articles: list[dict[str, Any]]
    next_page: str | None = None  # offset pagination
    meta: _CursorMeta | None = None  # cursor pagination
    links: _CursorLinks | None = None

    def next_url(self) -> str | None:
        if self.meta is not None:
            return self.links.next if self.meta.has_more and self.links else None
        return self.next_page or None


def guide_pages(source: GuideSource, *, sleep: Sleep = time.sleep) -> Iterator[GuidePage]:
    """The listing's pages: a file's one page (its `next_page` not followed), or a URL's pages one after the other."""
    if not source.is_url:
        yield page_parse(_file_bytes(source.location), where=source.location)
        return
    url: str | None = source.location
    seen: set[str] = set()
    with httpx2.Client(follow_redirects=False, timeout=TIMEOUT_SECONDS) as client:
        while url is not None:
            if len(seen) == MAX_PAGES:
                raise GuideError(f"the listing goes on past {MAX_PAGES} pages (next: {url})")
            seen.add(url)
            page = page_parse(_page_bytes(client, source, url, sleep), where=url)
            yield page
            url = _next_checked(page.next_url(), url, source, seen)


def _next_checked(next_url: str | None, url: str, source: GuideSource, seen: set[str]) -> str | None:
    """The next page's URL (made absolute), refused when it leaves the first page's host or comes back to a page
    already read."""
    if next_url is None:
        return None
    next_url = urljoin(url, next_url)
    if _origin_of(next_url) != _origin_of(source.location):
        raise GuideError(f"the page {url} links its next page on another host: {_without_credentials(next_url)}")
    if next_url in seen:
        raise GuideError(f"the page {url} links back to a page already read: {next_url}")
    return next_url


def _file_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_PAGE_BYTES + 1)
    except OSError as exc:
        raise GuideError(f"{path}: cannot be read: {exc.strerror}") from None
    if len(data) > MAX_PAGE_BYTES:
        raise GuideError(f"{path}: larger than {MAX_PAGE_BYTES} bytes")
    return data


def _page_bytes(client: httpx2.Client, source: GuideSource, url: str, sleep: Sleep) -> bytes:
    """The page's body; a 429 waits as `Retry-After` asks (within bounds) and asks again, `MAX_WAITS` times."""
    auth = source.auth if source.auth and _origin_of(url) == source.auth_origin else None
    for waits in range(MAX_WAITS + 1):
        status, headers, body = _get(client, url, auth)
        if status != 429:
            _status_check(status, headers, url, auth is not None)
            return body
        if waits < MAX_WAITS:
            sleep(_retry_after(headers.get("retry-after", ""), url))
    raise GuideError(f"{url}: still HTTP 429 (too many requests) after {MAX_WAITS} waits; run the import again later")


def _get(client: httpx2.Client, url: str, auth: tuple[str, str] | None) -> tuple[int, httpx2.Headers, bytes]:
    deadline = time.monotonic() + TIMEOUT_SECONDS
    try:
        with client.stream("GET", url, auth=auth, headers={"Accept": "application/json"}) as response:
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > MAX_PAGE_BYTES:
                    raise GuideError(f"{url}: a page larger than {MAX_PAGE_BYTES} bytes")
                if time.monotonic() > deadline:
                    raise GuideError(f"{url}: did not answer in {TIMEOUT_SECONDS:.0f} s")
            return response.status_code, response.headers, bytes(body)
    except httpx2.TimeoutException:
        raise GuideError(f"{url}: did not answer in {TIMEOUT_SECONDS:.0f} s") from None
    except httpx2.TransportError as exc:
        raise GuideError(f"{url}: could not be reached ({type(exc).__name__})") from None


def _status_check(status: int, headers: httpx2.Headers, url: str, authenticated: bool) -> None:
    if status == 200:
        return
    if status in (401, 403):
        fix = (
            "check ZENDESK_EMAIL and ZENDESK_API_TOKEN" if authenticated else "set ZENDESK_EMAIL and ZENDESK_API_TOKEN"
        )
        raise GuideError(f"{url}: Zendesk refused the request (HTTP {status}); {fix}")
    if 300 <= status < 400:
        raise GuideError(f"{url}: answered HTTP {status}, a redirect to {headers.get('location', '?')}; give that URL")
    raise GuideError(f"{url}: answered HTTP {status}")


def _retry_after(value: str, url: str) -> float:
    """The seconds a 429 asks to wait: 1 when it does not say; more than the bound ends the import."""
    seconds = int(value) if value.strip().isdigit() else 1
    if seconds > MAX_RETRY_AFTER_SECONDS:
        raise GuideError(
            f"{url}: HTTP 429, Zendesk asks to wait {seconds} s (more than {MAX_RETRY_AFTER_SECONDS}); "
            "run the import again later"
        )
    return float(seconds)


def page_parse(data: bytes, *, where: str) -> GuidePage:
    """A page as Zendesk lists articles, or a GuideError saying what is wrong with it (never its values)."""
    try:
        page = GuidePage.model_validate_json(data)
    except ValidationError as exc:
        if any(error["type"] == "json_invalid" for error in exc.errors()):
            raise GuideError(f"{where}: not JSON (a Help Center articles listing is JSON)") from None
        raise GuideError(f"{where}: not a Help Center articles listing ({_reasons(exc)})") from None
    for number, article in enumerate(page.articles, start=1):
        if not isinstance(article.get("id"), int | str) or not str(article["id"]).isdigit():
            raise GuideError(f"{where}: article {number} has no numeric id")
    return page


def _reasons(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(part) for part in error['loc']) or 'the page'}: {error['msg']}" for error in exc.errors()[:5]
    )


# --- one article ----------------------------------------------------------------------------------


class GuideArticle(BaseModel):
    """The fields of an article we read; the others are left out (votes change every day, and would make writes)."""

    model_config = ConfigDict(extra="ignore")

    id: int = Field(ge=0)
    title: str
    body: str | None = None
    html_url: str
    draft: bool | None = False
    locale: str | None = None
    source_locale: str | None = None
    section_id: int | None = None
    label_names: list[str] | None = None
    updated_at: str | None = None
    outdated: bool | None = None
    promoted: bool | None = None
    user_segment_id: int | None = None
    user_segment_ids: list[int] | None = None


def article_code(article: dict[str, Any]) -> str:
    """`ZD-<id>-<LOCALE>` (`ZD-360001234567-EN-US`): the same at every import, and one per translation."""
    locale = re.sub(r"[^A-Z0-9]+", "-", str(article.get("locale") or "").upper()).strip("-")
    return f"ZD-{int(article['id'])}" + (f"-{locale}" if locale else "")


def article_shown(article: dict[str, Any]) -> str:
    """How messages name the article: its id and, when it has one, its title."""
    title = article.get("title")
    return f"article {article['id']}" + (f" “{title}”" if isinstance(title, str) and title.strip() else "")


def article_document(article: dict[str, Any]) -> DocumentIn:
    """The document an article is: its title, its body's text, its `html_url`; a draft raises DocumentSkipped.

    Public unless a user segment restricts who may read it (search_docs finds public documents only).
    """
    try:
        read = GuideArticle.model_validate(article)
    except ValidationError as exc:
        raise DocumentFileError(_reasons(exc)) from None
    if read.draft:
        raise DocumentSkipped("a draft (draft: true)")
    if urlsplit(read.html_url).scheme not in ("http", "https"):
        raise DocumentFileError("html_url is not an http(s) address")
    _, body = html_title_and_text(read.body or "", wanted=False)
    if not body.strip():
        raise DocumentSkipped("nothing to read (an empty article)")
    fields = {
        "code": article_code(article),
        "title": read.title,
        "body": body,
        "public": read.user_segment_id is None and not read.user_segment_ids,
        "url": read.html_url,
        "metadata": {"zendesk_id": read.id} | read.model_dump(include=set(KEPT) & read.model_fields_set),
    }
    try:
        return DocumentIn(**fields)
    except ValidationError as exc:
        raise DocumentFileError(_document_reasons(exc)) from None


def _document_reasons(exc: ValidationError) -> str:
    return "; ".join(
        error["msg"].removeprefix("Value error, ")
        if error["type"] == "value_error"
        else f"{error['loc'][0]}: {error['msg']}"
        for error in exc.errors()
    )
