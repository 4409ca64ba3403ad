"""Google Gemini adapter through the official ``google-genai`` SDK (optional extra ``medrev[google]``).

Translates the OpenAI-style ``ChatRequest`` to ``client.aio.models.generate_content``: system
messages become ``system_instruction``, assistant turns the ``model`` role, tools function
declarations, and a reasoning effort a thinking configuration (``thinking_config``): a thinking
*level* for Gemini 3 models, which take no budget, a thinking budget for the others;
``include_thoughts`` so the trace is kept. The SDK does not retry unless asked (no
``retry_options``), so the runner's policy applies.
"""

from __future__ import annotations

import base64
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

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
THINKING_BUDGETS = {"none": 0, "minimal": 512, "low": 1024, "medium": 8192, "high": 24576}
# Gemini 3 takes a level; "minimal" exists on Flash models only (Pro's lowest level is "low"), and
# thinking cannot be switched off ("none").
THINKING_LEVELS = ("minimal", "low", "medium", "high")


def thinking_config(
    model: str,
    effort: str,
    *,
    include_thoughts: bool | None = None,
    budgets: dict[str, int] | None = None,
) -> dict[str, Any]:
    """The ``thinking_config`` of a reasoning effort for ``model``.

    Gemini 3 (``gemini-3`` in the id): ``{"thinking_level": ...}``, "minimal" becoming "low" on Pro
    models; "none" is refused. Other models: ``{"thinking_budget": budgets[effort]}`` (default
    ``THINKING_BUDGETS``). ``include_thoughts`` defaults to "whenever the model thinks".
    """
    name = model.lower()
    if "gemini-3" in name:
        if effort not in THINKING_LEVELS:
            raise ValueError(
                f"reasoning effort {effort!r} not one of {', '.join(THINKING_LEVELS)} for Gemini 3 models "
                "(they cannot switch thinking off)"
            )
        level = "low" if effort == "minimal" and "pro" in name else effort
        return {"thinking_level": level, "include_thoughts": True if include_thoughts is None else include_thoughts}
    table = THINKING_BUDGETS if budgets is None else budgets
    if effort not in table:
        raise ValueError(f"reasoning effort {effort!r} not one of {', '.join(table)}")
    budget = table[effort]
    return {"thinking_budget": budget, "include_thoughts": budget > 0 if include_thoughts is None else include_thoughts}


def _connect(sdk: ModuleType, key: str, base_url: str | None) -> Any:
    return sdk.Client(api_key=key, http_options={"base_url": base_url} if base_url else None)


class GoogleModel(SDKChatModel):
    """A ``ChatModel`` for Gemini models through the official ``google-genai`` SDK (key: GEMINI_API_KEY)."""

    provider = "google"
    sdk_client = SDKClient("Google", "google.genai", DEFAULT_BASE_URL, "GEMINI_API_KEY", _connect)

    def request_body(self, request: ChatRequest, *, timeout: float | None = None) -> dict[str, Any]:
        """Keyword arguments of ``generate_content`` (plain dicts, which the SDK accepts for its types)."""
        system = "\n\n".join(str(m["content"]) for m in request.messages if m["role"] in ("system", "developer"))
        contents: list[dict[str, Any]] = []
        names: dict[str, str] = {}  # tool_call_id -> function name (Gemini matches responses by name)
        for message in request.messages:
            role = message["role"]
            if role in ("system", "developer"):
                continue
            if role == "tool":
                name = message.get("name") or names.get(message.get("tool_call_id", ""), "")
                part = {"function_response": {"name": name, "response": {"result": message["content"]}}}
                previous = contents[-1] if contents else None
                if previous and previous["role"] == "user" and all("function_response" in p for p in previous["parts"]):
                    previous["parts"].append(part)  # one turn's parallel calls are answered in one content
                else:
                    contents.append({"role": "user", "parts": [part]})
            elif role == "assistant":
                parts: list[dict[str, Any]] = [{"text": message["content"]}] if message.get("content") else []
                for call in message.get("tool_calls") or []:
                    arguments = call["function"].get("arguments") or "{}"
                    names[call.get("id", "")] = call["function"]["name"]
                    part = {
                        "function_call": {
                            "name": call["function"]["name"],
                            "args": json.loads(arguments) if isinstance(arguments, str) else arguments,
                        }
                    }
                    if call.get("thought_signature"):  # Gemini 3 rejects a function call without it
                        part["thought_signature"] = base64.b64decode(call["thought_signature"])
                    parts.append(part)
                contents.append({"role": "model", "parts": parts})
            else:
                contents.append({"role": "user", "parts": [{"text": message["content"]}]})
        config: dict[str, Any] = {}
        if system:
            config["system_instruction"] = system
        if request.temperature is not None:
            config["temperature"] = request.temperature
        if request.max_tokens is not None:
            config["max_output_tokens"] = request.max_tokens
        if request.reasoning_effort is not None:
            config["thinking_config"] = thinking_config(self.name, request.reasoning_effort)
        if request.tools:
            config["tools"] = [
                {
                    "function_declarations": [
                        {
                            "name": tool["function"]["name"],
                            "description": tool["function"].get("description", ""),
                            "parameters": tool["function"].get("parameters"),
                        }
                        for tool in request.tools
                    ]
                }
            ]
        if timeout is not None:
            config["http_options"] = {"timeout": int(timeout * 1000)}
        config.update(request.extra)
        return {"model": self.name, "contents": contents, "config": config}

    async def complete(self, request: ChatRequest, *, timeout: float | None = None) -> ChatResponse:
        from google.genai import errors

        body = self.request_body(request, timeout=timeout)
        try:
            response = await self._client.aio.models.generate_content(**body)
        except errors.APIError as exc:
            status = int(exc.code) if exc.code else None
            headers = getattr(getattr(exc, "response", None), "headers", None) or {}
            retryable = status is None or status in (408, 409, 429) or status >= 500
            raise ProviderError(
                f"HTTP {status}: {exc.message or exc}",
                retryable=retryable,
                status=status,
                retry_after=parse_retry_after(headers.get("retry-after")),
                kind=f"http_{status}",
            ) from exc
        except TimeoutError as exc:
            raise ProviderError(f"request timed out after {timeout} s", retryable=True, kind="timeout") from exc
        except (OSError, ConnectionError) as exc:
            raise ProviderError(f"connection error: {exc}", retryable=True, kind="connection") from exc
        except Exception as exc:
            if type(exc).__name__ in ("ReadTimeout", "ConnectTimeout", "TimeoutException", "ServerTimeoutError"):
                raise ProviderError(f"request timed out after {timeout} s", retryable=True, kind="timeout") from exc
            if type(exc).__name__ in ("ConnectError", "ClientConnectorError", "RemoteProtocolError"):
                raise ProviderError(f"connection error: {exc}", retryable=True, kind="connection") from exc
            raise
        return parse_response(response)

    async def aclose(self) -> None:
        closer = getattr(getattr(self._client, "aio", None), "aclose", None)
        if closer is not None:
            await closer()


def parse_response(response: Any) -> ChatResponse:
    """Text, thought summary, function calls and usage from a ``GenerateContentResponse``."""
    candidates = attr(response, "candidates") or []
    if not candidates:
        feedback = attr(response, "prompt_feedback")
        raise ProviderError(
            f"no candidates in the response (prompt feedback: {feedback})", retryable=False, kind="blocked"
        )
    candidate = candidates[0]
    texts, thoughts, calls = [], [], []
    for index, part in enumerate(attr(attr(candidate, "content"), "parts") or []):
        call = attr(part, "function_call")
        if call is not None:
            signature = attr(part, "thought_signature")
            if isinstance(signature, bytes):
                signature = base64.b64encode(signature).decode("ascii")
            calls.append(
                ToolCall(
                    attr(call, "id") or f"call_{index}",
                    attr(call, "name", ""),
                    json.dumps(attr(call, "args") or {}),
                    {"thought_signature": signature} if signature else None,
                )
            )
        elif attr(part, "text") is not None:
            (thoughts if attr(part, "thought") else texts).append(attr(part, "text"))
    usage = attr(response, "usage_metadata")
    finish = attr(candidate, "finish_reason")
    return ChatResponse(
        text="".join(texts),
        reasoning="\n".join(thoughts) or None,
        tool_calls=tuple(calls),
        finish_reason=str(attr(finish, "name", finish)) if finish is not None else None,
        usage=_usage(usage),
        model=attr(response, "model_version"),
    )


def _usage(usage: Any) -> dict[str, int] | None:
    """Prompt and answer tokens; thinking tokens (billed as output, not counted in the answer's) apart."""
    if usage is None:
        return None
    out = {
        "prompt_tokens": attr(usage, "prompt_token_count"),
        "completion_tokens": attr(usage, "candidates_token_count"),
    }
    thoughts = attr(usage, "thoughts_token_count")
    if isinstance(thoughts, int) and thoughts:
        out["reasoning_tokens"] = thoughts
    return out
