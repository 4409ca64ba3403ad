"""Anthropic Messages API adapter (optional extra ``medrev[anthropic]``; the SDK is imported lazily).

Translates the OpenAI-style ``ChatRequest`` to ``messages.create``: system messages go to the
top-level ``system`` field, tools to ``input_schema`` form, and a reasoning effort to adaptive
thinking with ``output_config.effort`` (temperature is then left out: thinking requires the default).
Temperature is sent in the body (``extra_body``) because current SDKs no longer type it. SDK retries
are off (``max_retries=0``).
"""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

from bench_core.kernel.providers.base import (
    ChatRequest,
    ChatResponse,
    ProviderError,
    ToolCall,
    attr,
    parse_retry_after,
)
from bench_core.kernel.providers.sdk_model import SDKChatModel, SDKClient

DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_MAX_TOKENS = 4096
EFFORTS = ("low", "medium", "high", "xhigh", "max")


def _connect(sdk: ModuleType, key: str, base_url: str | None) -> Any:
    return sdk.AsyncAnthropic(api_key=key, base_url=base_url, max_retries=0)


class AnthropicModel(SDKChatModel):
    """A ``ChatModel`` for Claude models through the official ``anthropic`` SDK (key: ANTHROPIC_API_KEY)."""

    provider = "anthropic"
    sdk_client = SDKClient("Anthropic", "anthropic", DEFAULT_BASE_URL, "ANTHROPIC_API_KEY", _connect)

    def request_body(self, request: ChatRequest) -> dict[str, Any]:
        """Keyword arguments of ``messages.create`` for this request."""
        system = "\n\n".join(str(m["content"]) for m in request.messages if m["role"] in ("system", "developer"))
        messages: list[dict[str, Any]] = []
        for message in request.messages:
            role = message["role"]
            if role in ("system", "developer"):
                continue
            if role == "tool":
                block = {"type": "tool_result", "tool_use_id": message["tool_call_id"], "content": message["content"]}
                previous = messages[-1] if messages else None
                if previous and previous["role"] == "user" and _all_tool_results(previous["content"]):
                    previous["content"].append(block)  # results of one turn's parallel calls go in one message
                else:
                    messages.append({"role": "user", "content": [block]})
            elif role == "assistant" and message.get("tool_calls"):
                # Thinking blocks of a tool-use turn must go back unmodified, before the text and tool_use.
                blocks: list[dict[str, Any]] = [
                    dict(b) for call in message["tool_calls"] for b in call.get("anthropic_thinking") or []
                ]
                if message.get("content"):
                    blocks.append({"type": "text", "text": message["content"]})
                for call in message["tool_calls"]:
                    function = call["function"]
                    arguments = function.get("arguments") or "{}"
                    blocks.append(
                        {
                            "type": "tool_use",
                            "id": call["id"],
                            "name": function["name"],
                            "input": json.loads(arguments) if isinstance(arguments, str) else arguments,
                        }
                    )
                messages.append({"role": "assistant", "content": blocks})
            else:
                messages.append({"role": role, "content": message["content"]})
        body: dict[str, Any] = {
            "model": self.name,
            "messages": messages,
            "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
        }
        if system:
            body["system"] = system
        extra: dict[str, Any] = {}
        effort = request.reasoning_effort
        if effort and effort != "none":
            if effort not in EFFORTS:
                raise ValueError(f"reasoning effort {effort!r} not one of none, {', '.join(EFFORTS)}")
            body["thinking"] = {"type": "adaptive", "display": "summarized"}
            body["output_config"] = {"effort": effort}
        elif request.temperature is not None:
            # Current SDKs no longer type ``temperature``; models that accept it read it from the body.
            extra["temperature"] = request.temperature
        if request.tools:
            body["tools"] = [
                {
                    "name": tool["function"]["name"],
                    "description": tool["function"].get("description", ""),
                    "input_schema": tool["function"].get("parameters", {"type": "object", "properties": {}}),
                }
                for tool in request.tools
            ]
        extra.update(request.extra)
        if extra:
            body["extra_body"] = extra
        return body

    async def complete(self, request: ChatRequest, *, timeout: float | None = None) -> ChatResponse:
        import anthropic

        body = self.request_body(request)
        if timeout is not None:
            body["timeout"] = timeout
        try:
            message = await self._client.messages.create(**body)
        except anthropic.APIStatusError as exc:
            status = exc.status_code
            retry_after = parse_retry_after(exc.response.headers.get("retry-after")) if exc.response else None
            retryable = status in (408, 409, 429, 529) or status >= 500
            raise ProviderError(
                f"HTTP {status}: {exc.message}",
                retryable=retryable,
                status=status,
                retry_after=retry_after,
                kind=f"http_{status}",
            ) from exc
        except anthropic.APITimeoutError as exc:
            raise ProviderError(f"request timed out after {timeout} s", retryable=True, kind="timeout") from exc
        except anthropic.APIConnectionError as exc:
            raise ProviderError(f"connection error: {exc}", retryable=True, kind="connection") from exc
        except anthropic.APIResponseValidationError as exc:
            raise ProviderError(f"malformed response: {exc}", retryable=True, kind="malformed") from exc
        return parse_message(message)

    async def aclose(self) -> None:
        await self._client.close()


def _all_tool_results(content: Any) -> bool:
    return isinstance(content, list) and bool(content) and all(b.get("type") == "tool_result" for b in content)


def parse_message(message: Any) -> ChatResponse:
    """Text, thinking trace, tool calls and usage from an Anthropic ``Message`` (object or dict).

    When the turn calls tools, its thinking blocks (with their signatures) ride on the first tool
    call's ``extra["anthropic_thinking"]``, so a tool loop can send them back as the API requires.
    """
    texts, thoughts, calls, signed = [], [], [], []
    for block in attr(message, "content") or []:
        kind = attr(block, "type")
        if kind == "text":
            texts.append(attr(block, "text", ""))
        elif kind == "thinking":
            thoughts.append(attr(block, "thinking", ""))
            signed.append(
                {"type": "thinking", "thinking": attr(block, "thinking", ""), "signature": attr(block, "signature")}
            )
        elif kind == "redacted_thinking":
            signed.append({"type": "redacted_thinking", "data": attr(block, "data")})
        elif kind == "tool_use":
            calls.append(ToolCall(attr(block, "id", ""), attr(block, "name", ""), json.dumps(attr(block, "input", {}))))
    if calls and signed:
        calls[0] = ToolCall(calls[0].id, calls[0].name, calls[0].arguments, {"anthropic_thinking": signed})
    usage = attr(message, "usage")
    return ChatResponse(
        text="".join(texts),
        reasoning="\n".join(thoughts) or None,
        tool_calls=tuple(calls),
        finish_reason=attr(message, "stop_reason"),
        usage={"prompt_tokens": attr(usage, "input_tokens"), "completion_tokens": attr(usage, "output_tokens")}
        if usage is not None
        else None,
        model=attr(message, "model"),
    )
