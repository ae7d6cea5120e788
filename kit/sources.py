"""How a source's text is shown to staff: excerpts cut where a reader expects, and text that
addresses the agent flagged as a suspected injection. Pure: no ORM, no I/O.

A source is data. A document, a job record or a status page that speaks to "AI agents",
says "ignore previous instructions" or carries a chat role marker is trying to steer
whoever reads it; the reviewer should know before trusting the evidence it backs.
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import urlsplit

ELLIPSIS = "…"

# Each pattern names one way a text addresses an agent rather than a person.
_INJECTION_PATTERNS = [
    # "AI agents reading this", "Note to the assistant", "attention LLM"
    r"\b(?:ai|llm|gpt|chatbot|language model|assistant|agent)s?\b[\w\s,]{0,20}?\breading this\b",
    r"\b(?:note|message|attention|instructions?)\s+(?:to|for)\s+(?:the\s+|any\s+|all\s+)?"
    r"(?:ai|llms?|gpt|chatbots?|language models?|assistants?|agents?|bots?)\b",
    # "ignore previous instructions", "ignore your rules", "disregard all prior guidance"
    r"\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+|the\s+|your\s+|of\s+your\s+)*"
    r"(?:previous\s+|prior\s+|above\s+|earlier\s+|existing\s+|system\s+|original\s+)?"
    r"(?:instructions?|rules|prompts?|guidelines|guidance|directions|constraints)\b",
    # "disregard everything above", "ignore all of the above", "forget anything said before"
    r"\b(?:ignore|disregard|forget)\s+(?:all|everything|anything)\s+(?:of\s+the\s+|that\s+(?:is|was)\s+|"
    r"(?:said|written|stated)\s+)?(?:above|before|previously|earlier|so\s+far)\b(?!\s*\d)",  # not "above 10 GB"
    r"\byou are now\b",
    r"\bnew instructions\s*:",
    # chat role markers and prompt delimiters
    r"(?:^|[\n.!?]\s*|\]\s*)(?:system|assistant|developer)\s*:",
    r"<\|(?:im_start|im_end|system|assistant|user|endoftext)\|>",
    r"\[/?INST\]",
    r"<</?SYS>>",
]
_INJECTION = re.compile("|".join(f"(?:{p})" for p in _INJECTION_PATTERNS), re.IGNORECASE)


def suspected_injection(text: str) -> str | None:
    """The first phrase of `text` that addresses an agent, as written; None when there is none.

    The patterns run on the text as a model reads it (`normalized`): a phrase disguised with
    zero-width characters, bidi controls or fullwidth letters is flagged too.
    """
    folded, origin = normalized(text or "")
    match = _INJECTION.search(folded)
    if match is None:
        return None
    written = (text or "")[origin[match.start()] : origin[match.end() - 1] + 1]
    return " ".join(written.split()).lstrip(".!?] ")  # a role marker's match starts at the sentence before


def normalized(text: str) -> tuple[str, list[int]]:
    """`text` with each character in NFKC form (fullwidth `Ｓ` and `：` become `S` and `:`) and the
    invisible format characters (Unicode category Cf: zero-width spaces and joiners, bidi controls,
    soft hyphens) removed; and for each character of the result, the index it came from in `text`."""
    chars: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        if unicodedata.category(char) == "Cf":
            continue
        folded = unicodedata.normalize("NFKC", char)
        chars.append(folded)
        origin.extend([index] * len(folded))
    return "".join(chars), origin


_SENTENCE_END = re.compile(r"[.!?][)\"'”’]?\s")


def cut_excerpt(text: str, width: int = 320) -> str:
    """`text` in at most about `width` characters, cut at a sentence end or else between words.

    An excerpt that already begins or ends inside a longer text (marked with an ellipsis)
    loses its partial first and last words (and ends at a sentence end when one is in its
    second half). Whatever was left out is marked with an ellipsis.
    """
    text = " ".join((text or "").split())
    lead, tail = text.startswith(ELLIPSIS), text.endswith(ELLIPSIS)
    text = text.strip(ELLIPSIS).strip()
    if lead and " " in text:
        text = text.split(" ", 1)[1]
    if tail and " " in text:
        text = _cut(text, len(text) - 1)  # without its partial last word, at a sentence end if one is near
    if len(text) > width:
        text, tail = _cut(text, width), True
    text = text.rstrip(",;:- ")
    return (f"{ELLIPSIS} " if lead else "") + text + (f" {ELLIPSIS}" if tail else "")


def _cut(text: str, width: int) -> str:
    window = text[: width + 1]
    ends = [m.end() for m in _SENTENCE_END.finditer(window)]
    if ends and ends[-1] >= width // 2:
        return window[: ends[-1]].rstrip()
    space = window.rfind(" ")
    return window[:space] if space > 0 else text[:width]


def followable_url(url: str) -> str:
    """`url` when a link may point at it (an absolute http or https address), else "": a source's address is
    data too, and a `javascript:` permalink must never become a link staff click."""
    parts = urlsplit(url.strip())
    return url.strip() if parts.scheme.lower() in ("http", "https") and parts.netloc else ""
