"""Markdown as static-site generators and note apps keep it, reduced to the HTML it means. Pure: no I/O.

A help center's files are written for Jekyll, Hugo, Docusaurus, MkDocs or
Obsidian, each with its own syntax around the Markdown: Liquid tags, Hugo
shortcodes, MDX imports and JSX, `[[wiki links]]`, tab and admonition blocks.
None of it is text a reader sees, so it is taken away here (its words kept
where a reader would see them: a link's label, a tab's title and content);
what is left is rendered by markdown-it (CommonMark with tables), never by
expressions of our own.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

_RENDERER = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])

_LIQUID_COMMENT = re.compile(r"\{%-?\s*comment\s*-?%\}.*?\{%-?\s*endcomment\s*-?%\}", re.DOTALL)
_LIQUID_TAG = re.compile(r"\{%.*?%\}", re.DOTALL)  # {% image … %}, {% callout %}, {% raw %}: the tag, not what it wraps
_OUTPUT = re.compile(r"\{\{.*?\}\}", re.DOTALL)  # Liquid {{ site.baseurl }}, Hugo {{< tab >}} and {{% note %}}
_EMBED = re.compile(r"!\[\[[^\]\n]*\]\]")  # Obsidian ![[image.png]] or ![[Other note]]: nothing to read here
_WIKI_LINK = re.compile(r"\[\[([^\]|\n]*)(?:\|([^\]\n]*))?\]\]")  # [[Page#Heading|label]]
_CALLOUT = re.compile(r"^(\s*>\s*)\[![\w-]+\][+-]?\s*", re.MULTILINE)  # Obsidian "> [!note] Title"
_MDX_LINE = re.compile(
    r"^(import\s.+\sfrom\s+['\"].+['\"]|import\s+['\"].+['\"]|export\s+(default|const|function)\s.*);?\s*$"
)
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_BLOCK_OPENER = re.compile(r"^(\s*)(===|!!!|\?\?\?\+?)\s*(.*)$")  # MkDocs tabs (=== "Linux") and admonitions
_COLONS = re.compile(r"^\s*:::")  # Docusaurus admonitions (:::note … :::)


def markdown_html(text: str) -> str:
    """The HTML `text` means once its generator's syntax is taken away."""
    return _RENDERER.render(templates_reduced(text))


def templates_reduced(text: str) -> str:
    """`text` without template syntax: Liquid, Hugo shortcodes, MDX, Obsidian links and embeds, tab blocks."""
    text = _LIQUID_COMMENT.sub("", text)
    text = _OUTPUT.sub("", text)  # first: Hugo's {{% note %}} holds what reads like a Liquid tag
    text = _LIQUID_TAG.sub("", text)
    text = _EMBED.sub("", text)
    text = _WIKI_LINK.sub(_wiki_label, text)
    text = _CALLOUT.sub(r"\1", text)
    return "\n".join(_lines_reduced(text.split("\n")))


def _wiki_label(link: re.Match[str]) -> str:
    """What Obsidian shows for a link: its label, else the page ("Page > Heading" for a heading in it)."""
    if link.group(2):
        return link.group(2).strip()
    page, _, heading = link.group(1).partition("#")
    heading = "" if heading.startswith("^") else heading  # a block reference reads as its page
    return " > ".join(part.strip() for part in (page, heading) if part.strip())


def _lines_reduced(lines: list[str]) -> list[str]:
    """Line by line, outside code fences: MDX imports gone, tab/admonition titles kept, their bodies outdented.

    An MkDocs tab's content is indented four spaces under its `=== "Title"`;
    left so, Markdown would read it as a code block.
    """
    out: list[str] = []
    fenced = False
    outdent: int | None = None  # the indentation of the block opener whose body is being outdented
    for line in lines:
        if outdent is not None and line.strip() and _indent(line) <= outdent:
            outdent = None
        if outdent is not None:
            line = line[4:] if line.startswith(" " * (outdent + 4)) else line.lstrip()
        if _FENCE.match(line):
            fenced = not fenced
        if fenced:
            out.append(line)
            continue
        opener = _BLOCK_OPENER.match(line)
        if opener:
            outdent = len(opener.group(1))
            title = opener.group(3).split('"')[1] if opener.group(3).count('"') >= 2 else opener.group(3)
            out.extend([title.strip(), ""] if title.strip() else [""])
        elif not (_MDX_LINE.match(line) or _COLONS.match(line)):
            out.append(line)
    return out


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))
