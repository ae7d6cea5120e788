"""Parsing a reply and judging a proposed call (CONFORMANCE §1, §3). Pure: no database."""

from __future__ import annotations

import pytest

from engine.budgets import Budget, Usage
from engine.decisions import (
    AwaitApproval,
    Call,
    CallFacts,
    Dispatch,
    DraftProposal,
    Handoff,
    Malformed,
    MultipleCalls,
    ReuseReceipt,
    judge_call,
    normalize_call,
    parse_reply,
)
from engine.statuses import Detail, Status, Stop
from tools.base import call_key

J42 = {"tool": "read_job_status", "args": {"job_id": "J-42"}}
DOCS = {"tool": "search_docs", "args": {"query": "export"}}


# --- parse_reply: every reply shape of §1 ----------------------------------------------


@pytest.mark.parametrize(
    "payload, expected",
    [
        ({"call": J42}, Call("read_job_status", {"job_id": "J-42"})),
        ({"call": {**J42, "id": "c1"}}, Call("read_job_status", {"job_id": "J-42"}, "c1")),
        ({"calls": [J42]}, Call("read_job_status", {"job_id": "J-42"})),
        ({"calls": [{**DOCS, "id": "c9"}]}, Call("search_docs", {"query": "export"}, "c9")),
        # an unknown tool is still one well-formed call: judging it is not parsing's job
        ({"call": {"tool": "delete_workspace", "args": {}}}, Call("delete_workspace", {})),
        ({"handoff": "I need a human"}, Handoff("I need a human")),
        ({"handoff": {"reason": "a person should look"}}, Handoff("a person should look")),
    ],
    ids=[
        "one-call",
        "call-with-id",
        "list-of-one-is-one-call",
        "list-of-one-keeps-id",
        "unknown-tool-parses",
        "handoff-text",
        "handoff-object",
    ],
)
def test_well_formed_replies_parse_to_one_proposal(payload, expected):
    assert parse_reply(payload) == expected


def test_draft_reply_is_a_draft_proposal_carrying_the_raw_draft():
    draft = {"summary": "s", "evidence": ["E1"], "open_questions": []}
    assert parse_reply({"draft": draft}) == DraftProposal(draft)


@pytest.mark.parametrize(
    "calls",
    [
        [J42, DOCS],
        [J42, J42],
        [{"tool": "nope"}, 7],  # whatever they hold
        [None, None, None],
        [{}, {}],
    ],
    ids=["two-distinct", "two-identical", "garbage", "three-nones", "two-empty-objects"],
)
def test_two_or_more_calls_are_multiple_calls_whatever_they_hold(calls):
    assert parse_reply({"calls": calls}) == MultipleCalls(len(calls))


@pytest.mark.parametrize(
    "payload",
    [
        "read_job_status J-42",
        '{"call": {"tool": "read_job_status", "args": {"job_id": "J-42"}}}',  # raw text is never parsed
        "",
        None,
        42,
        [J42],
        {},
        {"something": "else"},
        {"call": J42, "draft": {"summary": "s", "evidence": ["E1"], "open_questions": []}},
        {"calls": []},
        {"calls": "read_job_status"},
        {"calls": {"tool": "search_docs", "args": {}}},
        {"calls": [None]},
        {"call": None},
        {"call": "read_job_status"},
        {"call": {"args": {"job_id": "J-42"}}},
        {"call": {"tool": None, "args": {"job_id": "J-42"}}},
        {"call": {"tool": 7, "args": {"job_id": "J-42"}}},
        {"call": {"tool": "", "args": {"job_id": "J-42"}}},
        {"call": {"tool": ["read_job_status"], "args": {"job_id": "J-42"}}},
        {"call": {"tool": "read_job_status"}},
        {"call": {"tool": "read_job_status", "args": None}},
        {"call": {"tool": "read_job_status", "args": ["J-42"]}},
        {"call": {"tool": "read_job_status", "args": "J-42"}},
        # args are checked before the tool name is looked up: an unknown tool is still malformed here
        {"call": {"tool": "delete_workspace"}},
        {"call": {"tool": "delete_workspace", "args": "everything"}},
        {"calls": [{"tool": "read_job_status", "args": 1}]},
        {"calls": [{"args": {}}]},
        {"handoff": 3},
        {"handoff": None},
    ],
    ids=[
        "plain-text",
        "json-looking-text",
        "empty-text",
        "none",
        "number",
        "bare-list",
        "empty-object",
        "unknown-key",
        "two-kinds-at-once",
        "empty-calls-list",
        "calls-is-text",
        "calls-is-object",
        "calls-list-of-none",
        "call-none",
        "call-is-text",
        "tool-missing",
        "tool-none",
        "tool-number",
        "tool-empty",
        "tool-list",
        "args-missing",
        "args-none",
        "args-list",
        "args-text",
        "unknown-tool-without-args",
        "unknown-tool-args-text",
        "list-of-one-bad-args",
        "list-of-one-no-tool",
        "handoff-number",
        "handoff-none",
    ],
)
def test_malformed_output_is_malformed(payload):
    assert isinstance(parse_reply(payload), Malformed)


# --- judge_call: the order of §3 ----------------------------------------------------------

BUDGET = Budget(max_tool_attempts=3)
FRESH = Usage()
SPENT = Usage(tool_attempts=3)


def judge(call, *, usage=FRESH, time_left=30.0, budget=BUDGET, **facts):
    return judge_call(call, budget=budget, usage=usage, time_left=time_left, facts=CallFacts(**facts))


def key(tool, args):
    return call_key(tool, args)


J42_KEY = key("read_job_status", {"job_id": "J-42"})
DOCS_KEY = key("search_docs", {"query": "export", "max_results": 3})


def test_a_good_call_is_dispatched_with_normalized_arguments():
    verdict = judge(Call("search_docs", {"query": "  Export   CSV "}, "c1"))
    assert isinstance(verdict, Dispatch)
    assert verdict.call.args == {"query": "export csv", "max_results": 3}
    assert verdict.call.call_id == "c1"


def _stop(verdict) -> tuple:
    assert isinstance(verdict, Stop), verdict
    return verdict.status, verdict.detail


def _never(*_):
    raise AssertionError("asked after the verdict was already decided")


@pytest.mark.parametrize("time_left", [0.0, -0.001, -100.0])
def test_deadline_comes_before_everything(time_left):
    bad = Call("no_such_tool", {"x": 1}, "c1")
    verdict = judge(
        bad, time_left=time_left, usage=SPENT, receipt_key=_never, authorized=_never, last_executed_key="whatever"
    )
    assert _stop(verdict) == (Status.DEADLINE, None)


@pytest.mark.parametrize("time_left", [0.001, 0.5, 1.0])
def test_any_time_left_is_time_to_judge_the_call(time_left):
    assert isinstance(judge(Call("read_job_status", {"job_id": "J-42"}), time_left=time_left), Dispatch)


def test_unknown_tool_comes_before_bad_arguments_and_receipts():
    verdict = judge(Call("delete_workspace", {"bogus": True}, "c1"), receipt_key=_never, authorized=_never)
    assert _stop(verdict) == (Status.INVALID_OR_FORBIDDEN, Detail.UNKNOWN_TOOL)


def test_bad_arguments_come_before_receipts_and_authorization():
    call = Call("read_job_status", {"job_id": "not-a-job"}, "c1")
    verdict = judge(call, receipt_key=_never, authorized=_never, last_executed_key=J42_KEY, usage=SPENT)
    assert _stop(verdict) == (Status.INVALID_OR_FORBIDDEN, Detail.BAD_ARGUMENTS)


def test_same_id_and_identical_call_reuses_the_receipt_before_authorization_repeat_and_budget():
    call = Call("read_job_status", {"job_id": " j-42 "}, "c1")
    verdict = judge(
        call,
        receipt_key=lambda cid: J42_KEY if cid == "c1" else None,
        authorized=_never,
        last_executed_key=J42_KEY,
        usage=SPENT,
        needs_approval=_never,
    )
    assert isinstance(verdict, ReuseReceipt)
    assert verdict.call.args == {"job_id": "J-42"}


def test_same_id_with_another_call_is_a_call_id_conflict_before_forbidden():
    call = Call("search_docs", {"query": "export"}, "c1")
    verdict = judge(call, receipt_key=lambda cid: J42_KEY, authorized=lambda c: False)
    assert _stop(verdict) == (Status.INVALID_OR_FORBIDDEN, Detail.CALL_ID_CONFLICT)


def test_max_results_filled_by_default_makes_the_call_identical_to_the_receipt():
    explicit = Call("search_docs", {"query": "EXPORT", "max_results": 3}, "c1")
    verdict = judge(explicit, receipt_key=lambda cid: DOCS_KEY)
    assert isinstance(verdict, ReuseReceipt)


def test_a_new_id_is_not_a_receipt_and_is_judged_for_repetition():
    call = Call("read_job_status", {"job_id": "J-42"}, "c2")
    verdict = judge(call, receipt_key=lambda cid: None, last_executed_key=J42_KEY)
    assert _stop(verdict) == (Status.NO_PROGRESS, None)


def test_forbidden_comes_before_repetition_and_tool_budget():
    call = Call("read_job_status", {"job_id": "J-77"})
    verdict = judge(
        call, authorized=lambda c: False, last_executed_key=key("read_job_status", {"job_id": "J-77"}), usage=SPENT
    )
    assert _stop(verdict) == (Status.INVALID_OR_FORBIDDEN, Detail.FORBIDDEN)


def test_authorization_is_asked_about_the_normalized_call():
    seen = []
    judge(Call("read_job_status", {"job_id": "  j-42"}), authorized=lambda c: seen.append(c.args) or True)
    assert seen == [{"job_id": "J-42"}]


def test_repeat_of_the_last_executed_call_is_no_progress():
    verdict = judge(Call("search_docs", {"query": " EXPORT "}), last_executed_key=DOCS_KEY)
    assert _stop(verdict) == (Status.NO_PROGRESS, None)


def test_repeat_beats_tool_budget():
    verdict = judge(Call("read_job_status", {"job_id": "J-42"}), last_executed_key=J42_KEY, usage=SPENT)
    assert _stop(verdict) == (Status.NO_PROGRESS, None)


def test_a_call_other_than_the_last_one_is_progress():
    verdict = judge(Call("read_job_status", {"job_id": "J-42"}), last_executed_key=DOCS_KEY)
    assert isinstance(verdict, Dispatch)


def test_spent_tool_budget_is_tool_limit():
    verdict = judge(Call("read_job_status", {"job_id": "J-42"}), usage=SPENT, needs_approval=_never)
    assert _stop(verdict) == (Status.TOOL_LIMIT, None)


def test_overspent_tool_budget_is_tool_limit_too():
    verdict = judge(Call("read_job_status", {"job_id": "J-42"}), usage=Usage(tool_attempts=9))
    assert _stop(verdict) == (Status.TOOL_LIMIT, None)


def test_one_attempt_left_is_enough():
    verdict = judge(Call("read_job_status", {"job_id": "J-42"}), usage=Usage(tool_attempts=2))
    assert isinstance(verdict, Dispatch)


def test_tool_limit_comes_before_approval():
    verdict = judge(Call("read_job_status", {"job_id": "J-42"}), usage=SPENT, needs_approval=lambda c: True)
    assert _stop(verdict) == (Status.TOOL_LIMIT, None)


def test_a_call_needing_approval_waits_for_it():
    verdict = judge(Call("read_job_status", {"job_id": "j-42"}, "c3"), needs_approval=lambda c: True)
    assert isinstance(verdict, AwaitApproval)
    assert (verdict.call.tool, verdict.call.args, verdict.call.call_id) == ("read_job_status", {"job_id": "J-42"}, "c3")


@pytest.mark.parametrize(
    "facts, usage, expected",
    [
        (
            {"authorized": lambda c: False, "last_executed_key": J42_KEY},
            SPENT,
            (Status.INVALID_OR_FORBIDDEN, Detail.FORBIDDEN),
        ),
        ({"last_executed_key": J42_KEY}, SPENT, (Status.NO_PROGRESS, None)),
        ({"last_executed_key": DOCS_KEY, "needs_approval": lambda c: True}, SPENT, (Status.TOOL_LIMIT, None)),
        (
            {"receipt_key": lambda cid: DOCS_KEY, "authorized": lambda c: False},
            SPENT,
            (Status.INVALID_OR_FORBIDDEN, Detail.CALL_ID_CONFLICT),
        ),
    ],
    ids=["forbidden>repeat>budget", "repeat>budget", "budget>approval", "conflict>forbidden"],
)
def test_precedence_when_several_exits_are_true(facts, usage, expected):
    verdict = judge(Call("read_job_status", {"job_id": "J-42"}, "c1"), usage=usage, **facts)
    assert _stop(verdict) == expected


def test_a_call_without_id_never_asks_for_a_receipt():
    verdict = judge(Call("read_job_status", {"job_id": "J-42"}), receipt_key=_never)
    assert isinstance(verdict, Dispatch)


def test_normalize_call_reports_unknown_tool_before_looking_at_arguments():
    assert _stop(normalize_call(Call("read_jobs", {"job_id": "J-42"}))) == (
        Status.INVALID_OR_FORBIDDEN,
        Detail.UNKNOWN_TOOL,
    )


# --- a call's tool name and id ------------------------------------------------------------

MAX_ID = "c" * 200


@pytest.mark.parametrize(
    "call_id",
    ["c", MAX_ID, "call_01 ~", "é-ü", "😀" * 200],
    ids=["one-character", "at-the-longest", "space-and-tilde", "non-ascii", "200-wide-characters"],
)
def test_a_call_id_of_1_to_200_printable_characters_is_kept(call_id):
    assert parse_reply({"call": {**J42, "id": call_id}}) == Call("read_job_status", {"job_id": "J-42"}, call_id)


@pytest.mark.parametrize(
    "call_id",
    ["", MAX_ID + "c", "c\x01", "c\x1f", "\x7f", "c\td", "c\n", "\rc", 7, 1.5, True, ["c1"], {"id": "c1"}],
    ids=[
        "empty",
        "one-past-the-longest",
        "control-x01",
        "control-x1f",
        "delete-x7f",
        "tab",
        "newline",
        "carriage-return",
        "number",
        "float",
        "boolean",
        "list",
        "object",
    ],
)
def test_a_call_id_empty_too_long_with_a_control_character_or_not_text_is_malformed(call_id):
    assert parse_reply({"call": {**J42, "id": call_id}}) == Malformed(
        "the call's id must be 1-200 printable characters"
    )


@pytest.mark.parametrize("tool", ["", None, 7, ["read_job_status"]], ids=["empty", "none", "number", "list"])
def test_a_call_without_a_tool_name_is_malformed_in_a_call_and_in_a_list_of_one(tool):
    expected = Malformed("the call's tool name is missing or not a non-empty string")
    assert parse_reply({"call": {"tool": tool, "args": {}}}) == expected
    assert parse_reply({"calls": [{"tool": tool, "args": {}}]}) == expected
