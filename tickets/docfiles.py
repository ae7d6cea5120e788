"""A knowledge-base file (Markdown, HTML or text) read into a `DocumentIn`. No queries, no file system.

Files come as help centers keep them (Jekyll, Hugo, Docusaurus, MkDocs,
Obsidian). Front matter is a YAML block between `---` lines (TOML between
`+++` lines, as Hugo writes it) at the very top. `code`, `title` and `public`
are ours; `draft: true`, `published: false` and `hidden: true` mean "not to
be published" (the file is skipped, and counted); `permalink` is the page's
public address; every other key (`layout`, `tags`, `aliases`,
`redirect_from`, …) is kept, as written, as the document's metadata, never
a failure. Without them the code comes from the file's path under the folder
imported (`Release notes/Mobile/v1.1.1.md` -> `RELEASE-NOTES_MOBILE_V1-1-1`:
folders joined by `_`, so two `v1.1.1.md` differ), the title from the first
level-1 heading (Markdown `# …`, HTML `<h1>`, else HTML `<title>`; the
heading then leaves the body), else from the file name, and the document is
public. A page with nothing to read (a redirect stub, an empty page) is
skipped, not a failure.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
import unicodedata
from pathlib import PurePath, PurePosixPath
from typing import Any
from urllib.parse import quote, urlsplit

import yaml
from bs4 import BeautifulSoup
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from tickets.docmarkup import markdown_html
from tickets.documents import CODE_MAX, DocumentIn

SUFFIXES = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".mdx": "markdown",
    ".html": "html",
    ".htm": "html",
    ".txt": "text",
}
MAX_FILE_BYTES = 1024 * 1024
OURS = ("code", "title", "public")  # the keys that never go to the metadata

_DROPPED_TAGS = ["head", "title", "script", "style", "template", "noscript", "svg"]
_BLOCK_TAGS = [
    "address",
    "article",
    "aside",
    "blockquote",
    "br",
    "dd",
    "div",
    "dl",
    "dt",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "li",
    "main",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "table",
    "td",
    "th",
    "tr",
    "ul",
]


class DocumentFileError(Exception):
    """The file cannot become a document; the message says why, for the person who wrote it."""


class DocumentSkipped(Exception):
    """The file is not to be published (a draft, hidden) or has nothing to read (a redirect stub, an empty page)."""


class FrontMatter(BaseModel):
    """Our keys, checked; any other key rides along in `model_extra`, for the metadata."""

    model_config = ConfigDict(extra="allow", strict=True)

    code: str | None = None
    title: str | None = None
    public: bool | None = None

    @field_validator("title", mode="before")
    @classmethod
    def _title_as_written(cls, value: Any) -> Any:
        """`title: 2024` or `title: 1.5` is a title as YAML reads it, not a type error."""
        return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


def is_document_file(name: str) -> bool:
    return PurePath(name).suffix.lower() in SUFFIXES


def document_from_file(name: str, data: bytes, *, relative: str | None = None, base_url: str = "") -> DocumentIn:
    """The document file `name` (its path, for its suffix) holds.

    `relative` is its path under the folder imported (its file name when
    None), which makes its code and, with `base_url`, its public address.
    Raises DocumentSkipped for a file that is not to be published.
    """
    if not is_document_file(name):
        raise DocumentFileError(f"not a document file (the suffixes are {', '.join(SUFFIXES)})")
    if len(data) > MAX_FILE_BYTES:
        raise DocumentFileError(f"the file is larger than {MAX_FILE_BYTES} bytes")
    relative = PurePath(name).name if relative is None else relative
    meta, text = front_matter_split(_decode(data))
    extra = dict(meta.model_extra or {})
    _unpublished_check(extra)
    found_title, body = _title_and_body(SUFFIXES[PurePath(name).suffix.lower()], text, wanted=meta.title is None)
    if not body.strip():
        raise DocumentSkipped("nothing to read (an empty page or a redirect stub)")
    fields = {
        "code": meta.code if meta.code is not None else code_from_path(relative),
        "title": meta.title if meta.title is not None else (found_title or title_from_filename(name)),
        "body": body,
        "public": True if meta.public is None else meta.public,
        "url": public_url(extra.get("permalink"), relative, base_url),
        "metadata": _json_safe(extra),
    }
    try:
        return DocumentIn(**fields)
    except ValidationError as exc:
        raise DocumentFileError(_reasons(exc)) from None


def _unpublished_check(extra: dict[str, Any]) -> None:
    """The documented rule: `draft: true`, `published: false`, `hidden: true` and a `redirect_to` are skipped."""
    if extra.get("draft") is True:
        raise DocumentSkipped("a draft (draft: true)")
    if extra.get("published") is False:
        raise DocumentSkipped("not published (published: false)")
    if extra.get("hidden") is True:
        raise DocumentSkipped("hidden (hidden: true)")
    if extra.get("redirect_to"):
        raise DocumentSkipped(f"a redirect stub (redirect_to: {extra['redirect_to']})")


def _json_safe(extra: dict[str, Any]) -> dict[str, Any]:
    """The front matter as JSON keeps it: dates (YAML reads `date: 2024-01-02` as one) become their ISO text."""
    return json.loads(
        json.dumps(extra, default=lambda value: value.isoformat() if hasattr(value, "isoformat") else str(value))
    )


def public_url(permalink: Any, relative: str, base_url: str) -> str:
    """Where readers find the page: an absolute `permalink`; else `base_url` plus the permalink or the file's path.

    Without a base URL a site-relative permalink is kept as written (better than nothing).
    """
    link = permalink.strip() if isinstance(permalink, str) else ""
    if urlsplit(link).scheme in ("http", "https"):
        return link
    if not base_url:
        return link
    path = link.lstrip("/") if link else quote(str(PurePosixPath(relative.replace("\\", "/")).with_suffix("")))
    return base_url.rstrip("/") + "/" + path


def _decode(data: bytes) -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DocumentFileError(f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def front_matter_split(text: str) -> tuple[FrontMatter, str]:
    """The front matter (empty when the text does not begin with a `---` or `+++` line) and the text after it."""
    lines = text.split("\n")
    opener = lines[0].rstrip()
    if opener not in ("---", "+++"):
        return FrontMatter(), text
    closers = ("---", "...") if opener == "---" else ("+++",)
    for end in range(1, len(lines)):
        if lines[end].rstrip() in closers:
            raw = "\n".join(lines[1:end])
            meta = _yaml(raw) if opener == "---" else _toml(raw)
            return _front_matter(meta), "\n".join(lines[end + 1 :])
    raise DocumentFileError(f"the front matter has no closing '{opener}' line")


def _yaml(raw: str) -> Any:
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 2})" if where is not None else ""
        raise DocumentFileError(f"the front matter is not valid YAML{line}: {getattr(exc, 'problem', exc)}") from None


def _toml(raw: str) -> Any:
    try:
        return tomllib.loads(raw)
    except tomllib.TOMLDecodeError as exc:
        raise DocumentFileError(f"the front matter is not valid TOML: {exc}") from None


def _front_matter(meta: Any) -> FrontMatter:
    if meta is None:
        return FrontMatter()
    if not isinstance(meta, dict):
        raise DocumentFileError("the front matter is not a set of 'key: value' lines")
    try:
        return FrontMatter.model_validate({str(key): value for key, value in meta.items()})
    except ValidationError as exc:
        raise DocumentFileError("front matter: " + _reasons(exc)) from None


def _reasons(exc: ValidationError) -> str:
    return "; ".join(_reason(error) for error in exc.errors())


def _reason(error: Any) -> str:
    where = ".".join(str(part) for part in error["loc"])
    if error["type"] == "string_pattern_mismatch" and where == "code":
        return f"the code {error['input']!r} is not capitals, digits, '-' and '_' (like DOC-EXPORT-7)"
    if error["type"] == "string_too_short":
        return f"the {where} is empty"
    if error["type"] == "string_too_long":
        return f"the {where} is longer than {error['ctx']['max_length']} characters"
    if error["type"] == "value_error":
        return error["msg"].removeprefix("Value error, ")
    return f"{where}: {error['msg']}"


def _title_and_body(kind: str, text: str, *, wanted: bool) -> tuple[str | None, str]:
    """The title found in the text (when `wanted`) and the body as a reader reads it."""
    if kind == "html":
        if _is_redirect_page(text):
            raise DocumentSkipped("a redirect stub (a meta refresh)")
        return html_title_and_text(text, wanted=wanted)
    if kind == "markdown":
        return html_title_and_text(markdown_html(text), wanted=wanted)
    return None, text


def _is_redirect_page(markup: str) -> bool:
    soup = BeautifulSoup(markup, "html.parser")
    return soup.find("meta", attrs={"http-equiv": re.compile("^refresh$", re.IGNORECASE)}) is not None


def html_title_and_text(markup: str, *, wanted: bool = True) -> tuple[str | None, str]:
    """The page's `<h1>` (else its `<title>`) and its readable text, one line per block, scripts and styles dropped."""
    soup = BeautifulSoup(markup, "html.parser")
    title = None
    if wanted:
        heading = soup.find("h1") or soup.find("title")
        title = " ".join(heading.get_text(" ").split()) if heading else None
        if heading is not None and heading.name == "h1" and title:
            heading.decompose()
    for tag in soup.find_all(_DROPPED_TAGS):
        tag.decompose()
    for tag in soup.find_all(_BLOCK_TAGS):
        tag.insert_before("\n")
        tag.insert_after("\n")
    lines = (" ".join(line.split()) for line in soup.get_text().split("\n"))
    return title or None, "\n".join(line for line in lines if line)


def code_from_filename(name: str, limit: int | None = CODE_MAX) -> str:
    """The file name's stem in capitals, accents dropped, every run of other characters one '-'.

    `csv-export-permissions.md` -> `CSV-EXPORT-PERMISSIONS`, `Café notes (v2).txt` -> `CAFE-NOTES-V2`.
    """
    code = _code_piece(PurePath(name).stem)
    if not code:
        raise DocumentFileError("the file name has no letters or digits for a code; set 'code' in the front matter")
    if limit is not None and len(code) > limit:
        raise DocumentFileError(f"the code {code[:20]}… from the file name is longer than {limit} characters")
    return code


def code_from_path(relative: str) -> str:
    """The code of the file at `relative` under the folder imported: its folders and its stem, joined by `_`.

    `Release notes/Mobile/v1.1.1.md` -> `RELEASE-NOTES_MOBILE_V1-1-1`. Letters
    with no ASCII form (`更新 Obsidian.md`, `مساعدة.md`) would leave too little
    to tell pages apart, so such a path's code ends with a digest of the whole
    path; so does a code longer than a code may be (its start kept). Either
    way it stays the same from one import to the next.
    """
    path = PurePosixPath(relative.replace("\\", "/"))
    names = [folder for folder in path.parent.parts if folder not in ("", ".", "/")] + [path.stem]
    code = "_".join(piece for piece in map(_code_piece, names) if piece)
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:10].upper()
    if any(_loses_letters(name) for name in names):
        code = f"{code}-{digest}" if code else digest
    elif not _code_piece(path.stem):
        raise DocumentFileError("the file name has no letters or digits for a code; set 'code' in the front matter")
    if len(code) <= CODE_MAX:
        return code
    return code[: CODE_MAX - len(digest) - 1].rstrip("-_") + "-" + digest


def _loses_letters(name: str) -> bool:
    """Whether `name` has letters or digits that have no ASCII form (Chinese, Arabic, Cyrillic…)."""
    return any(char.isalnum() and not _code_piece(char) for char in name)


def _code_piece(name: str) -> str:
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    return re.sub(r"[^A-Z0-9]+", "-", ascii_name.upper()).strip("-")


def title_from_filename(name: str) -> str:
    words = " ".join(re.split(r"[-_\s]+", PurePath(name).stem)).strip()
    return words[:1].upper() + words[1:]
