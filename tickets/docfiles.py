"""A knowledge-base file (Markdown, HTML or text) read into a `DocumentIn`. No queries, no file system.

Front matter is a YAML block between `---` lines at the very top; its keys are
`code`, `title` and `public`, each optional, any other key is refused. Without
them the code comes from the file name (`csv-export-permissions.md` ->
`CSV-EXPORT-PERMISSIONS`), the title from the first level-1 heading (Markdown
`# …`, HTML `<h1>`, else HTML `<title>`; the heading then leaves the body),
else from the file name, and the document is public.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import PurePath
from typing import Any

import yaml
from bs4 import BeautifulSoup
from pydantic import BaseModel, ConfigDict, ValidationError

from tickets.documents import CODE_MAX, DocumentIn

SUFFIXES = {".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html", ".txt": "text"}
MAX_FILE_BYTES = 1024 * 1024

_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_ATX_H1 = re.compile(r"^\s{0,3}#[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
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


class FrontMatter(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    code: str | None = None
    title: str | None = None
    public: bool | None = None


def is_document_file(name: str) -> bool:
    return PurePath(name).suffix.lower() in SUFFIXES


def document_from_file(name: str, data: bytes) -> DocumentIn:
    """The document file `name` (its path, for its suffix and its stem) holds."""
    if not is_document_file(name):
        raise DocumentFileError(f"not a document file (the suffixes are {', '.join(SUFFIXES)})")
    if len(data) > MAX_FILE_BYTES:
        raise DocumentFileError(f"the file is larger than {MAX_FILE_BYTES} bytes")
    meta, text = front_matter_split(_decode(data))
    found_title, body = _title_and_body(SUFFIXES[PurePath(name).suffix.lower()], text, wanted=meta.title is None)
    fields = {
        "code": meta.code if meta.code is not None else code_from_filename(name),
        "title": meta.title if meta.title is not None else (found_title or title_from_filename(name)),
        "body": body,
        "public": True if meta.public is None else meta.public,
    }
    try:
        return DocumentIn(**fields)
    except ValidationError as exc:
        raise DocumentFileError(_reasons(exc)) from None


def _decode(data: bytes) -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DocumentFileError(f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def front_matter_split(text: str) -> tuple[FrontMatter, str]:
    """The front matter (empty when the text does not begin with a `---` line) and the text after it."""
    lines = text.split("\n")
    if lines[0].rstrip() != "---":
        return FrontMatter(), text
    for end in range(1, len(lines)):
        if lines[end].rstrip() in ("---", "..."):
            return _front_matter("\n".join(lines[1:end])), "\n".join(lines[end + 1 :])
    raise DocumentFileError("the front matter has no closing '---' line")


def _front_matter(raw: str) -> FrontMatter:
    try:
        meta = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 2})" if where is not None else ""
        raise DocumentFileError(f"the front matter is not valid YAML{line}: {getattr(exc, 'problem', exc)}") from None
    if meta is None:
        return FrontMatter()
    if not isinstance(meta, dict):
        raise DocumentFileError("the front matter is not a set of 'key: value' lines")
    try:
        return FrontMatter.model_validate(meta)
    except ValidationError as exc:
        raise DocumentFileError("front matter: " + _reasons(exc)) from None


def _reasons(exc: ValidationError) -> str:
    return "; ".join(_reason(error) for error in exc.errors())


def _reason(error: Any) -> str:
    where = ".".join(str(part) for part in error["loc"])
    if error["type"] == "extra_forbidden":
        return f"unknown key {where!r} (the keys are {', '.join(FrontMatter.model_fields)})"
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
    """The title found in the text (when `wanted`) and the body without it."""
    if kind == "html":
        return html_title_and_text(text, wanted=wanted)
    if kind == "markdown" and wanted:
        return markdown_title(text)
    return None, text


def markdown_title(text: str) -> tuple[str | None, str]:
    """The first level-1 ATX heading outside code fences, and the text without that line."""
    lines = text.split("\n")
    fenced = False
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            fenced = not fenced
        heading = None if fenced else _ATX_H1.match(line)
        if heading:
            return heading.group(1).strip(), "\n".join(lines[:i] + lines[i + 1 :])
    return None, text


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


def code_from_filename(name: str) -> str:
    """The file name's stem in capitals, accents dropped, every run of other characters one '-'.

    `csv-export-permissions.md` -> `CSV-EXPORT-PERMISSIONS`, `Café notes (v2).txt` -> `CAFE-NOTES-V2`.
    """
    ascii_stem = unicodedata.normalize("NFKD", PurePath(name).stem).encode("ascii", "ignore").decode()
    code = re.sub(r"[^A-Z0-9]+", "-", ascii_stem.upper()).strip("-")
    if not code:
        raise DocumentFileError("the file name has no letters or digits for a code; set 'code' in the front matter")
    if len(code) > CODE_MAX:
        raise DocumentFileError(f"the code {code[:20]}… from the file name is longer than {CODE_MAX} characters")
    return code


def title_from_filename(name: str) -> str:
    words = " ".join(re.split(r"[-_\s]+", PurePath(name).stem)).strip()
    return words[:1].upper() + words[1:]
