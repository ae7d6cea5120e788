"""OpenAI chat completions through the official SDK.

The same wire format is spoken by vLLM, Ollama and llama.cpp's server: point
OPENAI_BASE_URL at one of them. The SDK's own retries are off (a retry would
spend budget the loop did not decide to spend) and its timeout is the
request's wait, `min(operation timeout, time left)`.

Every request has `tool_choice: "required"`: the model must call a function,
as with Anthropic's `any`. A draft and a handoff are functions too, so no
decision is ruled out, and no request goes to a text reply, which could only
be malformed output. Ollama accepts the field and ignores it.

Two request fields differ by endpoint and model (`request_fields`). The output
cap is `max_completion_tokens` on OpenAI's own API, where newer models refuse
`max_tokens`, and `max_tokens` elsewhere, which every compatible server reads.
`parallel_tool_calls: false` is sent except to OpenAI's o-series reasoning
models, which refuse the field. Both can be set outright
(AGENT_OPENAI_OUTPUT_CAP_FIELD, AGENT_OPENAI_PARALLEL_TOOL_CALLS), and
`tool_choice` left out for a server that refuses it (AGENT_OPENAI_TOOL_CHOICE).

A reply the endpoint stopped early (`finish_reason` `length`: cut at the
output cap; `content_filter`) is not used, whatever it holds: a call cut off
can still parse.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import openai
from django.conf import settings
from openai.types.chat import ChatCompletionFunctionToolParam

from providers import PROVIDERS
from providers.base import ModelError, ModelRequestSpec
from providers.tooldefs import (
    ToolCall,
    ToolCallingAdapter,
    WireReply,
    cut_at_cap,
    parse_arguments,
    tool_definitions,
    usage_from,
)


class OpenAIChatAdapter(ToolCallingAdapter):
    # Chat templates render the function definitions into the prompt (a header, a few
    # markers per function) and prime the reply: a few dozen tokens, bounded generously.
    framing_allowance_bytes = 512

    def wire_tools(self) -> list[ChatCompletionFunctionToolParam]:
        return [
            {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in tool_definitions()
        ]

    def send(self, system: str, user: str, spec: ModelRequestSpec) -> WireReply:
        try:
            with openai.OpenAI(
                api_key=self.api_key, base_url=self.base_url, max_retries=0, timeout=spec.timeout_seconds
            ) as client:
                completion = client.chat.completions.create(
                    model=self.model,
                    messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                    tools=self.wire_tools(),
                    timeout=spec.timeout_seconds,
                    **request_fields(self.model, self.base_url, spec.max_output_tokens),
                )
        except openai.APITimeoutError:
            raise ModelError(f"openai: no reply within {spec.timeout_seconds:.1f}s", timeout=True) from None
        except openai.APIStatusError as exc:
            raise self.failure(exc.status_code, exc.body, type(exc).__name__) from None
        except openai.OpenAIError as exc:
            raise self.failure(None, None, f"{type(exc).__name__}: {exc}") from None
        return _wire_reply(completion, spec.max_output_tokens)


OPENAI_HOST = urlsplit(PROVIDERS["openai"].default_base_url).hostname  # OpenAI's own API
REASONING_MODEL = re.compile(r"o[0-9]")  # o1, o3-mini, o4-mini, ...: they refuse parallel_tool_calls


def request_fields(model: str, base_url: str, max_output_tokens: int) -> dict[str, Any]:
    """The output cap, the parallel-call switch and the tool choice, in the fields this endpoint and model accept."""
    on_openai = urlsplit(base_url).hostname == OPENAI_HOST
    cap_field = settings.AGENT_OPENAI_OUTPUT_CAP_FIELD
    if cap_field == "auto":
        cap_field = "max_completion_tokens" if on_openai else "max_tokens"
    fields: dict[str, Any] = {cap_field: max_output_tokens}
    parallel = settings.AGENT_OPENAI_PARALLEL_TOOL_CALLS
    if parallel == "auto":
        parallel = "omit" if on_openai and REASONING_MODEL.match(model) else "false"
    if parallel == "false":
        fields["parallel_tool_calls"] = False
    if settings.AGENT_OPENAI_TOOL_CHOICE == "required":
        fields["tool_choice"] = "required"
    return fields


def _wire_reply(completion: Any, max_output_tokens: int) -> WireReply:
    usage = usage_from(completion.usage) if completion.usage is not None else None
    if not completion.choices:
        return WireReply((), "", usage)
    choice = completion.choices[0]
    message = choice.message
    calls = tuple(_tool_call(call) for call in message.tool_calls or ())
    return WireReply(calls, message.content or "", usage, _cut_short(choice.finish_reason, max_output_tokens))


def _cut_short(finish_reason: str | None, max_output_tokens: int) -> str:
    """Why the endpoint stopped the reply before it was complete, or "" (tool calls, a natural stop)."""
    if finish_reason == "length":
        return cut_at_cap(max_output_tokens)
    if finish_reason == "content_filter":
        return "the provider's content filter withheld the reply (finish reason: content_filter)"
    return ""


def _tool_call(call: Any) -> ToolCall:
    function = getattr(call, "function", None)  # a custom (non-function) call has no name we offered
    if function is None:
        return ToolCall("", None, call.id or None)
    return ToolCall(function.name, parse_arguments(function.arguments), call.id or None)


Adapter = OpenAIChatAdapter
