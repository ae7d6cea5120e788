"""OpenAI chat completions through the official SDK.

The same wire format is spoken by vLLM, Ollama and llama.cpp's server: point
OPENAI_BASE_URL at one of them. The SDK's own retries are off (a retry would
spend budget the loop did not decide to spend) and its timeout is the
request's wait, `min(operation timeout, time left)`.
"""
from __future__ import annotations

from typing import Any

import openai

from .base import ModelError, ModelRequestSpec
from .tooldefs import ToolCall, ToolCallingAdapter, WireReply, parse_arguments, tool_definitions, usage_from


class OpenAIChatAdapter(ToolCallingAdapter):
    # Chat templates render the function definitions into the prompt (a header, a few
    # markers per function) and prime the reply: a few dozen tokens, bounded generously.
    framing_allowance_bytes = 512

    def wire_tools(self) -> list[dict[str, Any]]:
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
                    parallel_tool_calls=False,
                    max_tokens=spec.max_output_tokens,
                    timeout=spec.timeout_seconds,
                )
        except openai.APITimeoutError:
            raise ModelError(f"openai: no reply within {spec.timeout_seconds:.1f}s", timeout=True) from None
        except openai.APIStatusError as exc:
            raise self.failure(exc.status_code, exc.body, type(exc).__name__) from None
        except openai.OpenAIError as exc:
            raise self.failure(None, None, f"{type(exc).__name__}: {exc}") from None
        return _wire_reply(completion)


def _wire_reply(completion: Any) -> WireReply:
    usage = usage_from(completion.usage) if completion.usage is not None else None
    if not completion.choices:
        return WireReply((), "", usage)
    message = completion.choices[0].message
    calls = tuple(_tool_call(call) for call in message.tool_calls or ())
    return WireReply(calls, message.content or "", usage)


def _tool_call(call: Any) -> ToolCall:
    function = getattr(call, "function", None)  # a custom (non-function) call has no name we offered
    if function is None:
        return ToolCall("", None, call.id or None)
    return ToolCall(function.name, parse_arguments(function.arguments), call.id or None)


Adapter = OpenAIChatAdapter
