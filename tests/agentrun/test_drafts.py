"""What makes a draft a valid review packet (CONFORMANCE §5). Pure: no database."""

from __future__ import annotations

import pytest

from engine.decisions import Draft, validate_draft

KNOWN = {"E1", "E2", "E3"}


def draft(**overrides):
    base = {"summary": "J-42 failed: the requester is a viewer [E1].", "evidence": ["E1"], "open_questions": []}
    return {**base, **overrides}


def test_a_valid_draft_is_accepted():
    assert validate_draft(draft(open_questions=["Role at failure time?"]), KNOWN) == Draft(
        "J-42 failed: the requester is a viewer [E1].", ("E1",), ("Role at failure time?",)
    )


def test_the_summary_is_kept_trimmed():
    assert validate_draft(draft(summary="\n  Role problem. \t"), KNOWN).summary == "Role problem."


def test_a_summary_of_2000_characters_after_trimming_is_accepted():
    result = validate_draft(draft(summary="   " + "a" * 2000 + "   "), KNOWN)
    assert isinstance(result, Draft) and len(result.summary) == 2000


def test_duplicate_references_count_once_in_first_cited_order():
    assert validate_draft(draft(evidence=["E2", "E1", "E2", "E1"]), KNOWN).evidence == ("E2", "E1")


def test_open_questions_may_be_empty():
    assert validate_draft(draft(open_questions=[]), KNOWN).open_questions == ()


@pytest.mark.parametrize(
    "raw",
    [
        draft(summary=""),
        draft(summary="   "),
        draft(summary="\n\t \u3000"),
        draft(summary="a" * 2001),
        draft(summary="  " + "a" * 2001 + "  "),
        draft(summary=None),
        draft(summary=42),
        draft(summary=["text"]),
        draft(evidence=[]),
        draft(evidence="E1"),
        draft(evidence=None),
        draft(evidence=[1]),
        draft(evidence=["E1", 2]),
        draft(evidence=[None]),
        draft(evidence=["E9"]),
        draft(evidence=["E1", "E9"]),
        draft(evidence=["e1"]),
        draft(open_questions=None),
        draft(open_questions="why?"),
        draft(open_questions=[1]),
        draft(open_questions=["ok", None]),
        draft(extra="field"),
        draft(confidence=0.9),
        {"evidence": ["E1"], "open_questions": []},
        {"summary": "s", "open_questions": []},
        {"summary": "s", "evidence": ["E1"]},
        {},
        None,
        "a summary in plain text",
        ["E1"],
    ],
    ids=[
        "empty-summary",
        "blank-summary",
        "unicode-blank-summary",
        "2001-chars",
        "2001-after-trim",
        "summary-none",
        "summary-number",
        "summary-list",
        "no-evidence",
        "evidence-text",
        "evidence-none",
        "evidence-number",
        "evidence-mixed",
        "evidence-null-item",
        "unknown-ref",
        "one-unknown-ref",
        "wrong-case-ref",
        "questions-none",
        "questions-text",
        "questions-number",
        "questions-null-item",
        "extra-key",
        "another-extra-key",
        "summary-missing",
        "evidence-missing",
        "questions-missing",
        "empty-object",
        "none",
        "text",
        "list",
    ],
)
def test_invalid_drafts_give_a_validation_error(raw):
    result = validate_draft(raw, KNOWN)
    assert isinstance(result, str) and result


def test_an_unknown_reference_is_named_in_the_error():
    assert "E9" in validate_draft(draft(evidence=["E1", "E9"]), KNOWN)


def test_no_known_references_means_no_valid_draft():
    assert isinstance(validate_draft(draft(), set()), str)


@pytest.mark.parametrize(
    "raw, start",
    [
        ("a text", "invalid draft: value: "),
        (draft(summary=None), "invalid draft: summary: "),
        (draft(evidence=["E1", None]), "invalid draft: evidence.1: "),
    ],
    ids=["not-an-object", "a-field", "an-item"],
)
def test_the_validation_error_says_where_the_draft_is_wrong(raw, start):
    assert validate_draft(raw, KNOWN).startswith(start)


# --- the suggested reply (optional) -----------------------------------------------------

ARTICLE = '{"results": [{"id": "DOC-EXPORT-7", "title": "Export roles", "url": "https://help.example/export-roles"}]}'


def cited_texts(refs):
    return [ARTICLE] if "E1" in refs else []


def test_a_draft_without_a_reply_keeps_none():
    assert validate_draft(draft(), KNOWN).reply == "" and validate_draft(draft(reply="  "), KNOWN).reply == ""


def test_a_reply_is_kept_without_its_evidence_markers():
    reply = "Hello,\n\nYour export needs the export role [E1]. See https://help.example/export-roles [E1]."
    result = validate_draft(draft(reply=reply), KNOWN, cited_texts)
    assert result.reply == "Hello,\n\nYour export needs the export role. See https://help.example/export-roles."


@pytest.mark.parametrize(
    "reply,error",
    [
        ("It failed [E2].", "E2 is not in the draft's evidence"),
        ("It failed [E1, E3].", "E3 is not in the draft's evidence"),
        ("Read https://evil.example/phish [E1].", "https://evil.example/phish is not the address of an article"),
        ('Here is the record: {"status": "failed"}', "reply holds JSON"),
        ("Your requester_current_role is viewer.", "internal field 'requester_current_role'"),
        ("a" * 3001, "longer than 3000 characters"),
        (42, "reply"),
    ],
)
def test_a_reply_says_only_what_the_cited_evidence_holds(reply, error):
    result = validate_draft(draft(reply=reply), KNOWN, cited_texts)
    assert isinstance(result, str) and result.startswith("invalid draft") and error in result, result


def test_an_error_code_the_customer_saw_may_be_named():
    assert validate_draft(draft(reply="It failed with EXPORT_ROLE_REQUIRED [E1]."), KNOWN).reply == (
        "It failed with EXPORT_ROLE_REQUIRED."
    )
