"""The loop on an OpenAI-compatible chat-completions endpoint: the real SDK over real HTTP to a local server.

Budgets and prices are fakeprovider.BUDGET's: a request costs 3 * input + 15 * output micro-dollars.
"""

from __future__ import annotations

import io
import json
import logging

import pytest
from django.core.management import CommandError, call_command

from engine.budgets import Budget
from engine.loop import run_advance
from engine.models import ModelRequest, Run
from engine.selectors import run_report
from engine.services import run_start
from providers import PROVIDERS, ModelRequestSpec
from providers.base import ModelError
from providers.context import OMITTED, SYSTEM_TEXT, Context
from providers.openai_chat import OpenAIChatAdapter, request_fields
from tests.support.fakeprovider import (
    BUDGET,
    OFFERED,
    OPENAI,
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

KEY = "sk-test-openai-0123456789abcdef"
MODEL = "openai:gpt-test"

J42 = ("read_job_status", {"job_id": "J-42"}, "call_job")
DOCS = ("search_docs", {"query": "EXPORT_ROLE_REQUIRED"}, "call_docs")
DRAFT = (
    "submit_draft",
    {
        "summary": "J-42 failed with EXPORT_ROLE_REQUIRED [E1]; DOC-EXPORT-7 says CSV export needs the editor role [E2].",
        "evidence": ["E1", "E2"],
        "open_questions": ["What was dana's role when J-42 ran?"],
    },
    "call_draft",
)
DRAFT_E1 = ("submit_draft", {"summary": "J-42 failed [E1].", "evidence": ["E1"], "open_questions": []}, "call_d1")


@pytest.fixture
def fake(monkeypatch, settle):
    server = FakeProvider()
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
    yield server
    server.close()  # cuts short a reply still being delayed; `settle` then joins the loop's abandoned waits


def investigate(ticket, **budget) -> dict:
    return run_investigation(ticket, MODEL, **budget)


# --- whole runs ------------------------------------------------------------------------------


def test_j42_investigation_completes_through_the_sdk(fake, ticket_t1001):
    usages = [(1200, 40), (1500, 30), (1800, 120)]
    fake.script(*(OPENAI.reply(call, usage=u) for call, u in zip([J42, DOCS, DRAFT], usages, strict=True)))

    report = investigate(ticket_t1001)

    assert (report["status"], report["detail"]) == ("COMPLETED", None)
    assert (report["model_requests"], report["tool_attempts"], report["validation_errors"]) == (3, 2, 0)
    assert dispatched(report) == [
        ("read_job_status", {"job_id": "J-42"}, "ok", "call_job"),
        ("search_docs", {"query": "export_role_required", "max_results": 3}, "ok", "call_docs"),
    ]
    assert report["packet"]["evidence"] == ["E1", "E2"]
    assert report["packet"]["summary"].startswith("J-42 failed with EXPORT_ROLE_REQUIRED [E1]")
    assert report["packet"]["open_questions"] == ["What was dana's role when J-42 ran?"]
    assert report["tokens"] == {"reserved": 0, "used": sum(i + o for i, o in usages)}
    assert report["cost_micros"] == cost(*usages)


def test_each_request_offers_exactly_the_tools_and_carries_the_output_cap(fake, ticket_t1001):
    fake.script(OPENAI.reply(J42), OPENAI.reply(DRAFT_E1))

    investigate(ticket_t1001)

    assert len(fake.received) == 2
    for request in fake.received:
        assert request.path == OPENAI.path
        assert request.headers["authorization"] == f"Bearer {KEY}"
        body = request.body
        assert body["model"] == "gpt-test"
        assert body["max_tokens"] == 400
        assert body["parallel_tool_calls"] is False
        assert body["tool_choice"] == "required"
        assert OPENAI.tool_names(body) == OFFERED
        assert [m["role"] for m in body["messages"]] == ["system", "user"]
        assert body["messages"][0]["content"].startswith(SYSTEM_TEXT)
    job_tool = fake.received[0].body["tools"][1]["function"]
    assert job_tool["parameters"]["properties"]["job_id"]["pattern"] == "^(?:J-[0-9]{1,12})$"
    assert job_tool["parameters"]["additionalProperties"] is False
    # The job's record, a tool result, reaches the model as delimited data.
    second = fake.received[1].body["messages"][1]["content"]
    assert "E1 from read_job_status" in second
    assert second.index('<data id="', second.index("E1 from")) < second.index(
        "EXPORT_ROLE_REQUIRED", second.index("E1 from")
    )


OPENAI_API = "https://api.openai.com/v1"
LOCAL = "http://127.0.0.1:11434/v1"


@pytest.mark.parametrize(
    "model, base_url, cap_field, parallel, expected",
    [
        # OpenAI's own API: newer models refuse max_tokens; the o-series refuses parallel_tool_calls.
        ("gpt-4o-mini", OPENAI_API, "auto", "auto", {"max_completion_tokens": 300, "parallel_tool_calls": False}),
        (
            "gpt-5",
            "https://api.openai.com/v1/",
            "auto",
            "auto",
            {"max_completion_tokens": 300, "parallel_tool_calls": False},
        ),
        ("o3-mini", OPENAI_API, "auto", "auto", {"max_completion_tokens": 300}),
        ("o4-mini", OPENAI_API, "auto", "auto", {"max_completion_tokens": 300}),
        ("o1", OPENAI_API, "auto", "auto", {"max_completion_tokens": 300}),
        # Compatible servers read max_tokens; a local model named like the o-series is not one.
        ("llama3.1:8b", LOCAL, "auto", "auto", {"max_tokens": 300, "parallel_tool_calls": False}),
        ("o3-mini", LOCAL, "auto", "auto", {"max_tokens": 300, "parallel_tool_calls": False}),
        (
            "openai/gpt-oss-20b",
            "http://vllm.internal:8000/v1",
            "auto",
            "auto",
            {"max_tokens": 300, "parallel_tool_calls": False},
        ),
        # Set outright, the settings win.
        ("gpt-4o", OPENAI_API, "max_tokens", "omit", {"max_tokens": 300}),
        ("o3", OPENAI_API, "auto", "false", {"max_completion_tokens": 300, "parallel_tool_calls": False}),
        ("qwen3", LOCAL, "max_completion_tokens", "auto", {"max_completion_tokens": 300, "parallel_tool_calls": False}),
    ],
)
def test_the_output_cap_and_parallel_switch_go_in_fields_the_endpoint_accepts(
    settings, model, base_url, cap_field, parallel, expected
):
    settings.AGENT_OPENAI_OUTPUT_CAP_FIELD, settings.AGENT_OPENAI_PARALLEL_TOOL_CALLS = cap_field, parallel
    assert request_fields(model, base_url, 300) == expected | {"tool_choice": "required"}


@pytest.mark.parametrize("base_url", [OPENAI_API, LOCAL])
def test_the_model_must_call_a_function_unless_tool_choice_is_left_out(settings, base_url):
    assert request_fields("gpt-4o", base_url, 300)["tool_choice"] == "required"
    settings.AGENT_OPENAI_TOOL_CHOICE = "omit"
    assert "tool_choice" not in request_fields("gpt-4o", base_url, 300)


def test_the_fields_set_outright_reach_the_wire(fake, ticket_t1001, settings):
    settings.AGENT_OPENAI_OUTPUT_CAP_FIELD, settings.AGENT_OPENAI_PARALLEL_TOOL_CALLS = "max_completion_tokens", "omit"
    settings.AGENT_OPENAI_TOOL_CHOICE = "omit"
    fake.script(OPENAI.reply(J42), OPENAI.reply(DRAFT_E1))

    report = investigate(ticket_t1001)

    assert report["status"] == "COMPLETED"
    for request in fake.received:
        assert request.body["max_completion_tokens"] == 400
        assert "max_tokens" not in request.body and "parallel_tool_calls" not in request.body
        assert "tool_choice" not in request.body


def test_two_tool_calls_in_one_reply_are_multiple_calls(fake, ticket_t1001):
    fake.script(OPENAI.reply(J42, DOCS, usage=(900, 60)))

    report = investigate(ticket_t1001)

    assert (report["status"], report["detail"]) == ("INVALID_OR_FORBIDDEN", "multiple_calls")
    assert (report["model_requests"], report["tool_attempts"]) == (1, 0)
    assert report["dispatched"] == []
    assert report["tokens"]["used"] == 960
    assert report["cost_micros"] == cost((900, 60))


def test_malformed_replies_are_validation_errors_and_the_loop_goes_on(fake, ticket_t1001):
    fake.script(
        OPENAI.reply(text="The export probably failed because of the rename.", usage=(700, 30)),
        OPENAI.reply(("submit_draft", {"summary": "x", "evidence": [], "open_questions": []}, "d1")),
        OPENAI.reply(("hand_off", {"why": "unsure"}, "h1")),
        OPENAI.reply(("read_job_status", '{"job_id": "J-4', "c-bad")),  # arguments cut off: not JSON
        OPENAI.reply(J42),
        OPENAI.reply(("hand_off", {"reason": "The role history is not in any tool."}, "h2")),
    )

    report = investigate(ticket_t1001)

    assert report["status"] == "NEEDS_HELP"
    assert (report["model_requests"], report["tool_attempts"], report["validation_errors"]) == (6, 1, 4)
    assert report["packet"]["stop_note"] == "The role history is not in any tool."
    assert report["tokens"]["used"] == 730 + 5 * 550
    assert "Your last reply was not used" in fake.received[1].body["messages"][1]["content"]
    outcomes = list(ModelRequest.objects.filter(run_id=report["run"]).order_by("seq").values_list("outcome", flat=True))
    assert outcomes[:4] == ["malformed", "invalid_draft", "malformed", "malformed"]


@pytest.mark.parametrize(
    "finish_reason, reason",
    [
        ("length", "the reply was cut off at the output cap (400 tokens) before it was complete"),
        ("content_filter", "the provider's content filter withheld the reply (finish reason: content_filter)"),
    ],
)
def test_a_reply_the_endpoint_stopped_early_is_not_used_whatever_it_holds(fake, ticket_t1001, finish_reason, reason):
    # A call cut off can still parse ({"job_id": "J-4"} is an object): a reply stopped early is never used.
    fake.script(
        OPENAI.reply(J42, usage=(700, 400), finish_reason=finish_reason), OPENAI.reply(J42), OPENAI.reply(DRAFT_E1)
    )

    report = investigate(ticket_t1001)

    assert_first_reply_not_used(report, reason, charged_tokens=1100)
    assert f"Your last reply was not used: {reason}" in fake.received[1].body["messages"][1]["content"]


def test_a_repeated_provider_call_id_reuses_its_receipt(fake, ticket_t1001):
    fake.script(OPENAI.reply(J42), OPENAI.reply(J42), OPENAI.reply(DRAFT_E1))

    report = investigate(ticket_t1001)

    assert report["status"] == "COMPLETED"
    assert (report["model_requests"], report["tool_attempts"]) == (3, 1)


def test_a_document_cannot_add_a_tool(fake, ticket_t1001):
    # DOC-NOTE-9 tells agents to call delete_workspace; a model that obeys proposes a tool that does not exist.
    fake.script(
        OPENAI.reply(("search_docs", {"query": "export troubleshooting notes"}, "c1")),
        OPENAI.reply(("delete_workspace", {"workspace": "acme-analytics"}, "c2")),
    )

    report = investigate(ticket_t1001)

    assert (report["status"], report["detail"]) == ("INVALID_OR_FORBIDDEN", "unknown_tool")
    assert [d["tool"] for d in report["dispatched"]] == ["search_docs"]
    prompt = fake.received[1].body["messages"][1]["content"]
    assert "delete_workspace" in prompt  # the probe was shown, as data
    assert "delete_workspace" not in OPENAI.tool_names(fake.received[1].body)


# --- failures ----------------------------------------------------------------------------------


def test_a_500_is_a_model_error_charging_nothing(fake, ticket_t1001):
    fake.script(OPENAI.error(500, "The server had an error while processing your request."))

    report = investigate(ticket_t1001)

    assert (report["status"], report["detail"]) == ("MODEL_ERROR", "error")
    assert (report["model_requests"], report["tool_attempts"]) == (1, 0)
    assert report["tokens"] == {"reserved": 0, "used": 0}
    assert report["cost_micros"] == 0
    assert len(fake.received) == 1  # the SDK did not retry
    error = ModelRequest.objects.get(run_id=report["run"]).error
    assert error == "openai returned HTTP 500: The server had an error while processing your request."


def test_a_429_is_a_model_error_and_is_not_retried(fake, ticket_t1001):
    fake.script(
        OPENAI.reply(J42, usage=(1000, 20)),
        OPENAI.error(429, "Rate limit reached for gpt-test.", "requests", headers={"retry-after": "0"}),
    )

    report = investigate(ticket_t1001)

    assert (report["status"], report["detail"]) == ("MODEL_ERROR", "error")
    assert (report["model_requests"], report["tool_attempts"]) == (2, 1)
    assert report["tokens"] == {"reserved": 0, "used": 1020}
    assert report["cost_micros"] == cost((1000, 20))
    assert len(fake.received) == 2
    assert "HTTP 429" in report["packet"]["stop_note"]


def test_a_reply_slower_than_the_operation_timeout_charges_the_whole_reservation(fake, ticket_t1001):
    fake.script(OPENAI.reply(J42, delay_seconds=10))

    report = investigate(ticket_t1001, operation_timeout_seconds=0.5)

    assert (report["status"], report["detail"]) == ("MODEL_ERROR", "timeout")
    assert (report["model_requests"], report["tool_attempts"]) == (1, 0)
    assert report["tokens"] == {"reserved": 0, "used": RESERVED_TOKENS}
    assert report["cost_micros"] == RESERVED_COST


@pytest.mark.parametrize("usage", [(8001, 10), (100, 401)], ids=["input", "output"])
def test_reported_usage_above_the_caps_is_usage_overrun_with_the_real_spend(fake, ticket_t1001, usage):
    fake.script(OPENAI.reply(J42, usage=usage))

    report = investigate(ticket_t1001)

    assert (report["status"], report["detail"]) == ("MODEL_ERROR", "usage_overrun")
    assert (report["model_requests"], report["tool_attempts"]) == (1, 0)
    assert report["tokens"] == {"reserved": 0, "used": sum(usage)}
    assert report["cost_micros"] == cost(usage)


def test_a_reply_after_the_deadline_ends_the_run_deadline(fake, ticket_t1001):
    fake.script(OPENAI.reply(J42, delay_seconds=60))

    report = investigate(ticket_t1001, deadline_seconds=3.0, operation_timeout_seconds=30)

    assert (report["status"], report["detail"]) == ("DEADLINE", None)
    assert (report["model_requests"], report["tool_attempts"]) == (1, 0)
    assert report["tokens"] == {"reserved": 0, "used": RESERVED_TOKENS}
    assert report["cost_micros"] == RESERVED_COST


def test_a_reply_without_usage_is_charged_its_bound(fake, ticket_t1001):
    fake.script(OPENAI.reply(J42, usage=None), OPENAI.error(500, "stop here"))

    report = investigate(ticket_t1001)

    request = ModelRequest.objects.filter(run_id=report["run"]).order_by("seq").first()
    assert request.output_tokens == 400
    assert input_bytes(OPENAI, fake.received[0].body) <= request.input_tokens <= 8000


# --- the input cap ------------------------------------------------------------------------------


def test_requests_stay_within_the_input_cap_with_very_long_evidence(fake, ticket_t1001):
    add_long_evidence(ticket_t1001, rows=12)
    draft = (
        "submit_draft",
        {"summary": "Long logs [E1]; J-42 [E13].", "evidence": ["E1", "E13"], "open_questions": []},
        "d",
    )
    fake.script(OPENAI.reply(J42, usage=(4000, 20)), OPENAI.reply(draft, usage=(4000, 40)))

    report = investigate(ticket_t1001, max_input_tokens=5000, max_output_tokens=300, max_tool_result_chars=100000)

    assert report["status"] == "COMPLETED"
    assert len(fake.received) == 2
    for request in fake.received:
        assert input_bytes(OPENAI, request.body) <= 5000
        assert request.body["max_tokens"] == 300
    assert OMITTED in fake.received[0].body["messages"][1]["content"]


# --- configuration -----------------------------------------------------------------------------


def investigate_command(*args: str) -> str:
    out = io.StringIO()
    call_command("investigate", "T-1001", *args, stdout=out)
    return out.getvalue()


def test_investigate_json_works_unchanged_with_an_openai_model(fake, ticket_t1001, settings):
    settings.AGENT_MODEL_PRICES = {**settings.AGENT_MODEL_PRICES, MODEL: ("3", "15")}
    fake.script(OPENAI.reply(J42), OPENAI.reply(DOCS), OPENAI.reply(DRAFT))

    report = json.loads(investigate_command("--model", MODEL, "--json"))

    assert (report["status"], report["model"], report["model_requests"]) == ("COMPLETED", MODEL, 3)
    assert report["packet"]["stop_reason"] == "COMPLETED"
    assert report["cost_micros"] == 3 * cost((500, 50))
    assert Run.objects.get(pk=report["run"]).get_budget().input_per_mtok_usd == "3"


@pytest.mark.parametrize(
    "model, env, message",
    [
        (MODEL, {"OPENAI_API_KEY": None}, "needs an API key: set OPENAI_API_KEY"),
        ("openai:", {}, "unknown model 'openai:'"),
        ("mistral:large", {}, "unknown model 'mistral:large'"),
        ("openai:gpt-unpriced", {}, "has no price"),
        (MODEL, {"OPENAI_BASE_URL": "https://api.openai.com/v1"}, "not local while running tests"),
    ],
    ids=["missing-key", "no-model", "unknown-family", "unpriced", "remote-under-test"],
)
def test_an_unusable_model_is_a_clear_error_at_start(fake, ticket_t1001, settings, monkeypatch, model, env, message):
    settings.AGENT_MODEL_PRICES = {**settings.AGENT_MODEL_PRICES, MODEL: ("3", "15")}
    for name, value in env.items():
        if value is None:
            monkeypatch.delenv(name)
        else:
            monkeypatch.setenv(name, value)

    with pytest.raises(CommandError, match=message):
        investigate_command("--model", model)

    assert not Run.objects.exists()
    assert fake.received == []


def test_price_overrides_price_an_unlisted_model(fake, ticket_t1001, settings):
    settings.AGENT_PRICE_INPUT_PER_MTOK, settings.AGENT_PRICE_OUTPUT_PER_MTOK = "0.5", "1.5"
    fake.script(OPENAI.reply(J42, usage=(1000, 100)), OPENAI.error(500, "stop"))

    report = json.loads(investigate_command("--model", "openai:llama3.1:8b", "--json"))

    assert report["cost_micros"] == 1000 * 0.5 + 100 * 1.5
    assert fake.received[0].body["model"] == "llama3.1:8b"


def test_the_sdk_timeout_is_the_request_wait_and_reads_as_a_timeout(fake):
    fake.script(OPENAI.reply(J42, delay_seconds=10))
    adapter = OpenAIChatAdapter("gpt-test", PROVIDERS["openai"])
    spec = ModelRequestSpec(Context("T-1", "s", "b", True, prompt="hello"), 100, 0.3, 0)

    with pytest.raises(ModelError) as raised:
        adapter.request(spec)  # called directly: no loop thread cuts the wait, only the SDK's timeout

    assert raised.value.timeout is True
    assert raised.value.usage.input_tokens == raised.value.usage.output_tokens == 0
    assert len(fake.received) == 1


def test_the_adapter_refuses_a_remote_endpoint_under_test(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", "https://api.openai.com/v1")
    adapter = OpenAIChatAdapter("gpt-test", PROVIDERS["openai"])
    spec = ModelRequestSpec(Context("T-1", "s", "b", True, prompt="hello"), 100, 1.0, 0)

    with pytest.raises(ModelError, match="not local"):
        adapter.request(spec)


def test_a_run_whose_key_disappeared_ends_model_error_not_stuck(fake, ticket_t1001, monkeypatch):
    run = run_start(ticket=ticket_t1001, model_name=MODEL, budget=Budget.from_mapping(BUDGET))
    monkeypatch.delenv("OPENAI_API_KEY")

    run_advance(run.pk)

    report = run_report(run_id=run.pk)
    assert (report["status"], report["detail"]) == ("MODEL_ERROR", "error")
    assert "OPENAI_API_KEY" in report["packet"]["stop_note"]
    assert fake.received == []


# --- logs and secrets --------------------------------------------------------------------------


def test_the_key_never_reaches_logs_or_stored_errors(fake, ticket_t1001, settings, caplog):
    settings.AGENT_LOG_PROMPTS = "redacted"
    caplog.set_level(logging.DEBUG)  # the SDK's and HTTP client's debug logs too
    caplog.set_level(logging.INFO, logger="agentrun.providers")  # as settings.LOGGING sets it when redacted
    fake.script(OPENAI.reply(J42), OPENAI.error(401, f"Incorrect API key provided: {KEY}.", "invalid_request_error"))

    report = investigate(ticket_t1001)

    assert (report["status"], report["detail"]) == ("MODEL_ERROR", "error")
    stored = ModelRequest.objects.filter(run_id=report["run"]).order_by("-seq").first().error
    assert stored == "openai returned HTTP 401: Incorrect API key provided: [redacted key]."
    assert KEY not in report["packet"]["stop_note"]
    assert KEY not in caplog.text
    assert "bytes redacted" in caplog.text and "call read_job_status with arguments ['job_id']" in caplog.text
    assert "renamed the workspace" not in caplog.text  # the ticket's text is data: redacted
    assert "EXPORT_ROLE_REQUIRED" not in caplog.text  # so is a tool result


def test_prompts_are_not_logged_by_default(fake, ticket_t1001, caplog):
    caplog.set_level(logging.DEBUG, logger="agentrun")
    fake.script(OPENAI.reply(J42), OPENAI.error(500, "stop"))

    investigate(ticket_t1001)

    assert not [r for r in caplog.records if r.name == "agentrun.providers"]
