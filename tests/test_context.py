"""The model's context is cut to fit the input cap by its UTF-8 byte length. Pure: no database."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrun.context import OMITTED, AttemptItem, Context, EvidenceItem, cut_utf8, fit_context, render_prompt, utf8_len


def evidence(n: int, text: str) -> EvidenceItem:
    return EvidenceItem(f"E{n}", "search_docs", {"query": "q", "max_results": 3}, text, f"DOC-{n}@r1")


def ctx(body="CSV export fails", items=(), attempts=(), notes=()) -> Context:
    return Context(
        ticket_ref="T-1", subject="Export", body=body, session_verified=True,
        evidence=tuple(items), attempts=tuple(attempts), notes=tuple(notes),
        allowances={"model_requests_left": 3, "tool_attempts_left": 2},
    )


def test_a_small_context_is_shown_whole():
    small = ctx(items=[evidence(1, "hello")])
    fitted = fit_context(small, 100_000)
    assert fitted.prompt == render_prompt(small)
    assert "E1" in fitted.prompt and "hello" in fitted.prompt


def test_the_prompt_shows_evidence_attempts_notes_and_allowances():
    full = ctx(items=[evidence(1, "doc text")], attempts=[AttemptItem("read_job_status", {"job_id": "J-42"}, "timeout")],
               notes=["Your last reply was not used"])
    prompt = fit_context(full, 100_000).prompt
    for part in ("E1", "doc text", "read_job_status", "timeout", "Your last reply was not used", "tool_attempts_left"):
        assert part in prompt


def test_old_evidence_is_omitted_first_and_newest_kept_when_that_fits():
    items = [evidence(i, f"content-{i} " + "x" * 3000) for i in range(1, 4)]
    full = ctx(items=items)
    cap = utf8_len(render_prompt(full)) - 2500  # dropping E1's content is enough
    fitted = fit_context(full, cap)
    assert utf8_len(fitted.prompt) <= cap
    assert fitted.evidence[0].content == OMITTED
    assert fitted.evidence[2].content == items[2].content
    assert "E1" in fitted.prompt  # the reference is still listed


@pytest.mark.parametrize("cap", [0, 1, 2, 3, 5, 17, 100, 500, 1000, 2000])
def test_the_prompt_never_exceeds_the_byte_cap_even_when_tiny(cap):
    big = ctx(body="é" * 5000, items=[evidence(i, "漢字" * 800) for i in range(1, 6)], notes=["n"] * 9)
    assert utf8_len(fit_context(big, cap).prompt) <= cap


def test_multibyte_text_is_measured_in_bytes_not_characters():
    body = "😀" * 3000  # 3000 characters, 12000 bytes
    fitted = fit_context(ctx(body=body), 6000)
    assert utf8_len(fitted.prompt) <= 6000
    fitted.prompt.encode("utf-8")  # no split surrogate or half character


@pytest.mark.parametrize(
    "text, max_bytes, expected",
    [
        ("abc", 2, "ab"),
        ("é", 1, ""),  # never half a character
        ("aé", 2, "a"),
        ("a😀b", 5, "a😀"),
        ("abc", 0, ""),
        ("abc", -1, ""),
    ],
)
def test_cut_utf8_keeps_whole_characters_within_the_cap(text, max_bytes, expected):
    assert cut_utf8(text, max_bytes) == expected


@settings(max_examples=60, deadline=None)
@given(
    body=st.text(max_size=3000),
    contents=st.lists(st.text(max_size=2000), max_size=5),
    notes=st.lists(st.text(max_size=300), max_size=8),
    cap=st.integers(min_value=0, max_value=12000),
)
def test_fit_context_never_exceeds_the_cap_for_any_text(body, contents, notes, cap):
    fitted = fit_context(ctx(body=body, items=[evidence(i, c) for i, c in enumerate(contents, 1)], notes=notes), cap)
    assert utf8_len(fitted.prompt) <= cap
    fitted.prompt.encode("utf-8")
