"""The provider-neutral chat interface the runner talks to.

Every benchmark design builds a ``ChatRequest`` and reads a ``ChatResponse``; each provider
adapter (OpenAI-compatible, Anthropic, Google) translates them to its SDK and maps its SDK's
errors to ``ProviderError`` with ``retryable`` and ``retry_after`` set, so that one retry policy
(in ``bench_core.kernel.runner``) governs every endpoint and the SDKs' own retries stay off.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit, urlunsplit


@dataclass(frozen=True)
class ChatRequest:
    """One chat call: messages plus the decoding settings recorded with every result.

    ``messages`` are OpenAI-style dicts (role system/user/assistant/tool, content string);
    ``tools`` are OpenAI-style function tool definitions (``{"type": "function", "function":
    {...}}``); adapters translate both. ``extra`` is passed through to the request body (OpenAI:
    body fields such as ``chat_template_kwargs``; Anthropic: ``extra_body``; Google: config fields).
    ``max_tokens_param`` names the OpenAI body field of the token cap for this request
    (``max_completion_tokens`` for OpenAI reasoning models); None keeps the model's own.
    """

    messages: tuple[dict[str, Any], ...]
    temperature: float | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    tools: tuple[dict[str, Any], ...] | None = None
    response_format: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    max_tokens_param: str | None = None

    def settings(self) -> dict[str, Any]:
        """The decoding settings as recorded in results (no message text)."""
        return {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "reasoning_effort": self.reasoning_effort,
        }


@dataclass(frozen=True)
class ToolCall:
    """A function call requested by the model; ``arguments`` is the raw JSON text.

    ``extra`` holds provider data that must go back with the call when the conversation continues
    (a Gemini thought signature, Claude's thinking blocks of that turn, or unknown fields of an
    OpenAI-compatible tool call such as ``extra_content``): a tool loop copies it into the tool call
    of the assistant message it sends back, and the adapter that produced it reads it there.
    """

    id: str
    name: str
    arguments: str
    extra: dict[str, Any] | None = None


@dataclass(frozen=True)
class ChatResponse:
    """The model's answer: final text, any separate reasoning trace, tool calls and usage.

    ``logprobs``: per generated token, OpenAI-style ``{"token", "logprob", "top_logprobs":
    [{"token", "logprob"}, ...]}``, when the endpoint returned them (None otherwise); benchmarks
    that score label probabilities (HealthContradict) read them, the others ignore them.
    """

    text: str
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    model: str | None = None
    logprobs: tuple[dict[str, Any], ...] | None = None


class ProviderError(Exception):
    """A failed call, classified for the runner's retry policy.

    ``retryable``: a later attempt may succeed (429, 5xx, timeouts, connection errors, malformed
    bodies). ``retry_after``: seconds the server asked us to wait, when it said so.
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        status: int | None = None,
        retry_after: float | None = None,
        kind: str = "error",
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after
        self.kind = kind


@runtime_checkable
class ChatModel(Protocol):
    """Anything that can answer a ``ChatRequest``.

    ``name`` is the model id sent to the endpoint; ``endpoint`` identifies the server (the
    runner caps concurrency per endpoint and records it in result keys; it never contains
    credentials); ``provider`` names the adapter.
    """

    name: str
    endpoint: str
    provider: str

    async def complete(self, request: ChatRequest, *, timeout: float | None = None) -> ChatResponse: ...

    async def aclose(self) -> None: ...


def resolve_api_key(explicit: str | None, env_var: str | None) -> str | None:
    """The key given, else the one in ``env_var``; keys are only ever read, never recorded."""
    return explicit or (os.environ.get(env_var) if env_var else None)


def attr(obj: Any, name: str, default: Any = None) -> Any:
    """``obj[name]`` or ``obj.name``: SDK responses arrive as typed objects or as plain dicts."""
    return obj.get(name, default) if isinstance(obj, dict) else getattr(obj, name, default)


def public_endpoint(url: str) -> str:
    """The URL with any user:password, query and fragment removed, safe to record and log."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date); None when absent/invalid."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        import datetime as _dt

        seconds = (when - _dt.datetime.now(when.tzinfo or _dt.UTC)).total_seconds()
    return max(0.0, seconds) if seconds == seconds else None
