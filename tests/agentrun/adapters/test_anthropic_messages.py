"""The loop on Anthropic's Messages API: the real SDK over real HTTP to a local server.

Budgets and prices are fakeprovider.BUDGET's: a request costs 3 * input + 15 * output micro-dollars.
"""

from __future__ import annotations

import io
import json
import logging

import pytest
from django.core.management import CommandError, call_command

from engine.models import ModelRequest, Run
from providers import PROVIDERS, ModelRequestSpec
from providers.anthropic_messages import AnthropicMessagesAdapter
from providers.base import ModelError
from providers.context import OMITTED, SYSTEM_TEXT, Context
from tests.support.fakeprovider import (
    ANTHROPIC,
    OFFERED,
    RESERVED_COST,
    RESERVED_TOKENS,
    FakeProvider,
    add_long_evidence,
    assert_first_reply_not_used,
    cost,
    dispatched,
    input_bytes,
    run_investigation,
)

KEY = "sk-ant-test-0123456789abcdef"
MODEL = "anthropic:claude-test"

J42 = ("read_job_status", {"job_id": "J-42"}, "toolu_job")
DOCS = ("search_docs", {"query": "EXPORT_ROLE_REQUIRED"}, "toolu_docs")
DRAFT = (
    "submit_draft",
    {
        "summary": "J-42 failed with EXPORT_ROLE_REQUIRED [E1]; DOC-EXPORT-7 says CSV export needs the editor role [E2].",
        "evidence": ["E1", "E2"],
        "open_questions": ["What was dana's role when J-42 ran?"],
    },
    "toolu_draft",
)
DRAFT_E1 = ("submit_draft", {"summary": "J-42 failed [E1].", "evidence": ["E1"], "open_questions": []}, "toolu_d1")


@pytest.fixture
def fake(monkeypatch, settle):
    server = FakeProvider()
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    yield server
    server.close()  # cuts short a reply still being delayed; `settle` then joins the loop's abandoned waits


def investigate(ticket, **budget) -> dict:
    return run_investigation(ticket, MODEL, **budget)


# --- whole runs ------------------------------------------------------------------------------


def test_j42_investigation_completes_through_the_sdk(fake, ticket_t1001):
    usages = [(1300, 45), (1600, 35), (1900, 150)]
    fake.script(
        ANTHROPIC.reply(J42, text="I'll look up the job first.", usage=usages[0]),
        ANTHROPIC.reply(DOCS, usage=usages[1]),
        ANTHROPIC.reply(DRAFT, usage=usages[2]),
    )

    report = investigate(ticket_t1001)

    assert (report["status"], report["detail"]) == ("COMPLETED", None)
    assert (report["model_requests"], report["tool_attempts"], report["validation_errors"]) == (3, 2, 0)
    assert dispatched(report) == [
        ("read_job_status", {"job_id": "J-42"}, "ok", "toolu_job"),
        ("search_docs", {"query": "export_role_required", "max_results": 3}, "ok", "toolu_docs"),
    ]
    assert report["packet"]["evidence"] == ["E1", "E2"]
    assert report["packet"]["summary"].startswith("J-42 failed with EXPORT_ROLE_REQUIRED [E1]")
    assert report["tokens"] == {"reserved": 0, "used": sum(i + o for i, o in usages)}
    assert report["cost_micros"] == cost(*usages)


def test_each_request_offers_exactly_the_tools_and_carries_the_output_cap(fake, ticket_t1001):
    fake.script(ANTHROPIC.reply(J42), ANTHROPIC.reply(DRAFT), ANTHROPIC.reply(DRAFT_E1))

    investigate(ticket_t1001, max_output_tokens=256)

    assert len(fake.received) == 3
    for request in fake.received:
        assert request.path == ANTHROPIC.path
        assert request.headers["authorization"] == f"Bearer {KEY}"  # this SDK sends the API key as a bearer token
        assert "anthropic-version" in request.headers
        body = request.body
        assert body["model"] == "claude-test"
        assert body["max_tokens"] == 256
        assert body["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
        assert ANTHROPIC.tool_names(body) == OFFERED
        assert body["system"].startswith(SYSTEM_TEXT)
        assert [m["role"] for m in body["messages"]] == ["user"]
    draft_tool = fake.received[0].body["tools"][3]
    assert draft_tool["input_schema"]["required"] == ["summary", "evidence", "open_questions"]
    assert draft_tool["input_schema"]["additionalProperties"] is False
    # The first draft cites E2, which this ticket does not have yet: a validation error the model is shown.
    assert "evidence E2 does not exist" in fake.received[2].body["messages"][0]["content"]


def test_two_tool_uses_in_one_reply_are_multiple_calls(fake, ticket_t1001):
    fake.script(ANTHROPIC.reply(J42, DRAFT, usage=(900, 60)))

    report = investigate(ticket_t1001)

    assert (report["status"], report["detail"]) == ("INVALID_OR_FORBIDDEN", "multiple_calls")
    assert (report["model_requests"], report["tool_attempts"]) == (1, 0)
    assert report["dispatched"] == []
    assert report["tokens"]["used"] == 960
    assert report["cost_micros"] == cost((900, 60))


def test_malformed_replies_are_validation_errors_and_the_loop_goes_on(fake, ticket_t1001):
    fake.script(
        ANTHROPIC.reply(text="The export probably failed because of the rename.", usage=(700, 30)),
        ANTHROPIC.reply(("submit_draft", {"summary": "   ", "evidence": ["E1"], "open_questions": []}, "toolu_d")),
        ANTHROPIC.reply(("hand_off", {}, "toolu_h")),
        ANTHROPIC.reply(J42),
        ANTHROPIC.reply(DRAFT_E1),
    )

    report = investigate(ticket_t1001)

    assert report["status"] == "COMPLETED"
    assert (report["model_requests"], report["tool_attempts"], report["validation_errors"]) == (5, 1, 3)
    assert report["tokens"]["used"] == 730 + 4 * 550
    assert "Your last reply was not used" in fake.received[1].body["messages"][0]["content"]


@pytest.mark.parametrize(
    "stop_reason, reason",
    [
        ("max_tokens", "the reply was cut off at the output cap (400 tokens) before it was complete"),
        ("model_context_window_exceeded", "the reply was cut off at the model's context window before it was complete"),
        ("refusal", "the model declined to answer (stop reason: refusal)"),
    ],
)
def test_a_reply_the_api_stopped_early_is_not_used_whatever_it_holds(fake, ticket_t1001, stop_reason, reason):
    # A complete-looking call in a reply stopped early: its arguments may not be what the model meant.
    fake.script(
        ANTHROPIC.reply(J42, usage=(700, 400), stop_reason=stop_reason), ANTHROPIC.reply(J42), ANTHROPIC.reply(DRAFT_E1)
    )

    report = investigate(ticket_t1001)

    assert_first_reply_not_used(report, reason, charged_tokens=1100)
    assert f"Your last reply was not used: {reason}" in fake.received[1].body["messages"][0]["content"]


# --- failures ----------------------------------------------------------------------------------


def test_a_500_is_a_model_error_charging_nothing(fake, ticket_t1001):
    fake.script(ANTHROPIC.error(500, "Internal server error"))

    report = investigate(ticket_t1001)

    assert (report["status"], report["detail"]) == ("MODEL_ERROR", "error")
    assert (report["model_requests"], report["tool_attempts"]) == (1, 0)
    assert report["tokens"] == {"reserved": 0, "used": 0}
    assert report["cost_micros"] == 0
    assert len(fake.received) == 1  # the SDK did not retry
    assert ModelRequest.objects.get(run_id=report["run"]).error == "anthropic returned HTTP 500: Internal server error"


def test_a_429_is_a_model_error_and_is_not_retried(fake, ticket_t1001):
    fake.script(
        ANTHROPIC.reply(J42, usage=(1000, 20)),
        ANTHROPIC.error(
            429,
            "Number of request tokens has exceeded your per-minute rate limit.",
            "rate_limit_error",
            headers={"retry-after": "0"},
        ),
    )

    report = investigate(ticket_t1001)

    assert (report["status"], report["detail"]) == ("MODEL_ERROR", "error")
    assert (report["model_requests"], report["tool_attempts"]) == (2, 1)
    assert report["tokens"] == {"reserved": 0, "used": 1020}
    assert report["cost_micros"] == cost((1000, 20))
    assert len(fake.received) == 2
    assert "HTTP 429" in report["packet"]["stop_note"]


def test_a_reply_slower_than_the_operation_timeout_charges_the_whole_reservation(fake, ticket_t1001):
    fake.script(ANTHROPIC.reply(J42, delay_seconds=10))

    report = investigate(ticket_t1001, operation_timeout_seconds=0.5)

    assert (report["status"], report["detail"]) == ("MODEL_ERROR", "timeout")
    assert (report["model_requests"], report["tool_attempts"]) == (1, 0)
    assert report["tokens"] == {"reserved": 0, "used": RESERVED_TOKENS}
    assert report["cost_micros"] == RESERVED_COST


@pytest.mark.parametrize("usage", [(8001, 10), (100, 401)], ids=["input", "output"])
def test_reported_usage_above_the_caps_is_usage_overrun_with_the_real_spend(fake, ticket_t1001, usage):
    fake.script(ANTHROPIC.reply(J42, usage=usage))

    report = investigate(ticket_t1001)

    assert (report["status"], report["detail"]) == ("MODEL_ERROR", "usage_overrun")
    assert (report["model_requests"], report["tool_attempts"]) == (1, 0)
    assert report["tokens"] == {"reserved": 0, "used": sum(usage)}
    assert report["cost_micros"] == cost(usage)


def test_a_reply_after_the_deadline_ends_the_run_deadline(fake, ticket_t1001):
    fake.script(ANTHROPIC.reply(J42, usage=(1000, 20)), ANTHROPIC.reply(DOCS, delay_seconds=60))

    report = investigate(ticket_t1001, deadline_seconds=4.0, operation_timeout_seconds=30)

    assert (report["status"], report["detail"]) == ("DEADLINE", None)
    assert (report["model_requests"], report["tool_attempts"]) == (2, 1)
    assert report["tokens"] == {"reserved": 0, "used": 1020 + RESERVED_TOKENS}
    assert report["cost_micros"] == cost((1000, 20)) + RESERVED_COST


# --- the input cap ------------------------------------------------------------------------------


def test_requests_stay_within_the_input_cap_with_very_long_evidence(fake, ticket_t1001):
    add_long_evidence(ticket_t1001, rows=12)
    draft = (
        "submit_draft",
        {"summary": "Long logs [E1]; J-42 [E13].", "evidence": ["E1", "E13"], "open_questions": []},
        "toolu_d",
    )
    fake.script(ANTHROPIC.reply(J42, usage=(4000, 20)), ANTHROPIC.reply(draft, usage=(4000, 40)))

    report = investigate(ticket_t1001, max_input_tokens=5000, max_output_tokens=300, max_tool_result_chars=100000)

    assert report["status"] == "COMPLETED"
    assert len(fake.received) == 2
    for request in fake.received:
        assert input_bytes(ANTHROPIC, request.body) <= 5000
        assert request.body["max_tokens"] == 300
    assert OMITTED in fake.received[0].body["messages"][0]["content"]


# --- configuration, logs and secrets -------------------------------------------------------------


def investigate_command(*args: str) -> str:
    out = io.StringIO()
    call_command("investigate", "T-1001", *args, stdout=out)
    return out.getvalue()


def test_investigate_json_works_unchanged_with_an_anthropic_model(fake, ticket_t1001, settings):
    settings.AGENT_MODEL_PRICES = {**settings.AGENT_MODEL_PRICES, MODEL: ("3", "15")}
    fake.script(ANTHROPIC.reply(J42), ANTHROPIC.reply(DOCS), ANTHROPIC.reply(DRAFT))

    report = json.loads(investigate_command("--model", MODEL, "--json"))

    assert (report["status"], report["model"], report["model_requests"]) == ("COMPLETED", MODEL, 3)
    assert report["packet"]["stop_reason"] == "COMPLETED"
    assert report["cost_micros"] == 3 * cost((500, 50))


@pytest.mark.parametrize(
    "env, message",
    [
        ({"ANTHROPIC_API_KEY": None}, "needs an API key: set ANTHROPIC_API_KEY"),
        ({"ANTHROPIC_BASE_URL": "https://api.anthropic.com"}, "not local while running tests"),
    ],
    ids=["missing-key", "remote-under-test"],
)
def test_an_unusable_model_is_a_clear_error_at_start(fake, ticket_t1001, settings, monkeypatch, env, message):
    settings.AGENT_MODEL_PRICES = {**settings.AGENT_MODEL_PRICES, MODEL: ("3", "15")}
    for name, value in env.items():
        if value is None:
            monkeypatch.delenv(name)
        else:
            monkeypatch.setenv(name, value)

    with pytest.raises(CommandError, match=message):
        investigate_command("--model", MODEL)

    assert not Run.objects.exists()
    assert fake.received == []


def test_the_sdk_timeout_is_the_request_wait_and_reads_as_a_timeout(fake):
    fake.script(ANTHROPIC.reply(J42, delay_seconds=10))
    adapter = AnthropicMessagesAdapter("claude-test", PROVIDERS["anthropic"])
    spec = ModelRequestSpec(Context("T-1", "s", "b", True, prompt="hello"), 100, 0.3, 0)

    with pytest.raises(ModelError) as raised:
        adapter.request(spec)  # called directly: no loop thread cuts the wait, only the SDK's timeout

    assert raised.value.timeout is True
    assert raised.value.usage.input_tokens == raised.value.usage.output_tokens == 0
    assert len(fake.received) == 1


def test_the_adapter_refuses_a_remote_endpoint_under_test(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)  # the SDK's default: api.anthropic.com
    adapter = AnthropicMessagesAdapter("claude-test", PROVIDERS["anthropic"])
    spec = ModelRequestSpec(Context("T-1", "s", "b", True, prompt="hello"), 100, 1.0, 0)

    with pytest.raises(ModelError, match="not local"):
        adapter.request(spec)


def test_the_key_never_reaches_logs_or_stored_errors(fake, ticket_t1001, settings, caplog):
    settings.AGENT_LOG_PROMPTS = "redacted"
    caplog.set_level(logging.DEBUG)  # the SDK's and HTTP client's debug logs too
    caplog.set_level(logging.INFO, logger="agentrun.providers")  # as settings.LOGGING sets it when redacted
    fake.script(ANTHROPIC.reply(J42), ANTHROPIC.error(401, f"invalid x-api-key {KEY}", "authentication_error"))

    report = investigate(ticket_t1001)

    assert (report["status"], report["detail"]) == ("MODEL_ERROR", "error")
    stored = ModelRequest.objects.filter(run_id=report["run"]).order_by("-seq").first().error
    assert stored == "anthropic returned HTTP 401: invalid x-api-key [redacted key]"
    assert KEY not in caplog.text
    assert "bytes redacted" in caplog.text and "call read_job_status with arguments ['job_id']" in caplog.text
    assert "renamed the workspace" not in caplog.text
