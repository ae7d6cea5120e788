"""Anthropic's Messages API through the official SDK.

ANTHROPIC_BASE_URL points it elsewhere (a gateway, or the tests' local
server). The SDK's own retries are off and its timeout is the request's wait,
`min(operation timeout, time left)`. The model must call a function, and only
one (`tool_choice` any, parallel tool use off); a reply that still holds
several is `multiple_calls` all the same. A reply the API stopped early (its
`stop_reason` says it hit the output cap or the context window, or refused) is
not used, whatever it holds.
"""

from __future__ import annotations

from typing import Any

import anthropic
from anthropic.types import ToolChoiceAnyParam, ToolParam

from providers.base import ModelError, ModelRequestSpec
from providers.tooldefs import ToolCall, ToolCallingAdapter, WireReply, cut_at_cap, tool_definitions, usage_from

TOOL_CHOICE: ToolChoiceAnyParam = {"type": "any", "disable_parallel_tool_use": True}


class AnthropicMessagesAdapter(ToolCallingAdapter):
    # With tools, the API adds its own tool-use system prompt: documented at 264 to 530
    # tokens depending on the model and tool_choice. 600 bounds it.
    framing_allowance_bytes = 600

    def wire_tools(self) -> list[ToolParam]:
        return [
            {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tool_definitions()
        ]

    def send(self, system: str, user: str, spec: ModelRequestSpec) -> WireReply:
        try:
            with anthropic.Anthropic(
                api_key=self.api_key, base_url=self.base_url, max_retries=0, timeout=spec.timeout_seconds
            ) as client:
                message = client.messages.create(
                    model=self.model,
                    system=system,
                    messages=[{"role": "user", "content": user}],
                    tools=self.wire_tools(),
                    tool_choice=TOOL_CHOICE,
                    max_tokens=spec.max_output_tokens,
                    timeout=spec.timeout_seconds,
                )
        except anthropic.APITimeoutError:
            raise ModelError(f"anthropic: no reply within {spec.timeout_seconds:.1f}s", timeout=True) from None
        except anthropic.APIStatusError as exc:
            raise self.failure(exc.status_code, exc.body, type(exc).__name__) from None
        except anthropic.AnthropicError as exc:
            raise self.failure(None, None, f"{type(exc).__name__}: {exc}") from None
        return _wire_reply(message, spec.max_output_tokens)


def _wire_reply(message: Any, max_output_tokens: int) -> WireReply:
    calls, texts = [], []
    for block in message.content or ():
        if block.type == "tool_use":
            calls.append(ToolCall(block.name, block.input, block.id or None))
        elif block.type == "text":
            texts.append(block.text)
    usage = usage_from(message.usage) if message.usage is not None else None
    return WireReply(tuple(calls), "\n".join(texts), usage, _cut_short(message.stop_reason, max_output_tokens))


def _cut_short(stop_reason: str | None, max_output_tokens: int) -> str:
    """Why the API stopped the reply before it was complete, or "" (a tool call, the end of the turn)."""
    if stop_reason == "max_tokens":
        return cut_at_cap(max_output_tokens)
    if stop_reason == "model_context_window_exceeded":
        return "the reply was cut off at the model's context window before it was complete"
    if stop_reason == "refusal":
        return "the model declined to answer (stop reason: refusal)"
    return ""


Adapter = AnthropicMessagesAdapter
