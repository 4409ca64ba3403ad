"""OpenAI-compatible endpoints (OpenAI, vLLM, SGLang, Ollama, llama.cpp server) via the official SDK.

``AsyncOpenAI`` is created with ``max_retries=0``: the runner owns retries, so that one policy
(with Retry-After, jitter and a total-time cap) applies to every provider and a retry is never
hidden inside the SDK. The HTTP connection pool is sized to the runner's concurrency so that
high concurrency does not churn connections (the SDK keeps only 100 alive by default).
"""

from __future__ import annotations

import json
from typing import Any

from bench_core.kernel.providers.base import (
    ChatRequest,
    ChatResponse,
    ProviderError,
    ToolCall,
    parse_retry_after,
    public_endpoint,
    resolve_api_key,
)

NO_KEY = "not-needed"  # local servers (vLLM, Ollama) ignore the key, but the SDK requires one


class OpenAICompatModel:
    """A ``ChatModel`` for any server that speaks ``POST /v1/chat/completions``.

    The call goes through the SDK's documented request method for raw bodies
    (``client.post(..., cast_to=httpx.Response)``): the SDK still owns authentication, headers,
    timeouts and error classes, but the body is sent as given and the answer read as plain JSON,
    which keeps vendor fields (``reasoning_content``) and halves the client CPU per call
    compared with ``chat.completions.create`` (see bench/runner_throughput.py). With the
    ``aiohttp`` package present the SDK's aiohttp transport is used (cheaper again per call).

    ``max_tokens_param`` chooses the body field for the token cap: ``max_tokens`` (vLLM, SGLang,
    Ollama, llama.cpp) or ``max_completion_tokens`` (OpenAI reasoning models).
    """

    provider = "openai"

    def __init__(
        self,
        name: str,
        base_url: str,
        *,
        api_key_env: str | None = "OPENAI_API_KEY",
        api_key: str | None = None,
        connections: int = 64,
        max_tokens_param: str = "max_tokens",
        transport: str = "auto",
        client: Any = None,
    ) -> None:
        if max_tokens_param not in ("max_tokens", "max_completion_tokens"):
            raise ValueError(
                f"--max-tokens-param: expected max_tokens or max_completion_tokens, found {max_tokens_param!r}"
            )
        self.name = name
        self.base_url = base_url
        self.endpoint = public_endpoint(base_url)
        self.max_tokens_param = max_tokens_param
        if client is None:
            import openai

            key = resolve_api_key(api_key, api_key_env) or NO_KEY
            client = openai.AsyncOpenAI(
                api_key=key, base_url=base_url, max_retries=0, http_client=_http_client(connections, transport)
            )
        self._client = client

    @property
    def client(self) -> Any:
        """The SDK client (the batch adapter of the same provider shares it, with its key and base URL)."""
        return self._client

    def request_body(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body of ``POST /chat/completions`` for this request."""
        body: dict[str, Any] = {"model": self.name, "messages": [dict(m) for m in request.messages]}
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_tokens is not None:
            body[request.max_tokens_param or self.max_tokens_param] = request.max_tokens
        if request.reasoning_effort is not None:
            body["reasoning_effort"] = request.reasoning_effort
        if request.tools:
            body["tools"] = [dict(t) for t in request.tools]
        if request.response_format is not None:
            body["response_format"] = request.response_format
        body.update(request.extra)
        return body

    async def complete(self, request: ChatRequest, *, timeout: float | None = None) -> ChatResponse:
        import httpx2
        import openai

        options: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        try:
            raw = await self._client.post(
                "/chat/completions", cast_to=httpx2.Response, body=self.request_body(request), options=options
            )
            payload = raw.content
        except openai.APIStatusError as exc:
            raise _status_error(exc) from exc
        except openai.APITimeoutError as exc:
            raise ProviderError(f"request timed out after {timeout} s", retryable=True, kind="timeout") from exc
        except openai.APIConnectionError as exc:
            raise ProviderError(f"connection error: {exc}", retryable=True, kind="connection") from exc
        try:
            data = json.loads(payload)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ProviderError(f"malformed response: {exc}", retryable=True, kind="malformed") from exc
        return parse_completion(data)

    async def aclose(self) -> None:
        await self._client.close()


def _http_client(connections: int, transport: str) -> Any:
    """The SDK's HTTP client with a pool as large as the runner's concurrency."""
    import httpx2
    import openai

    limits = httpx2.Limits(max_connections=connections, max_keepalive_connections=connections)
    if transport not in ("auto", "aiohttp", "httpx"):
        raise ValueError("transport must be 'auto', 'aiohttp' or 'httpx'")
    if transport in ("auto", "aiohttp"):
        try:
            import aiohttp  # noqa: F401
        except ImportError:
            if transport == "aiohttp":
                raise
        else:
            return openai.DefaultAioHttpClient(limits=limits)
    return openai.DefaultAsyncHttpxClient(limits=limits)


def _status_error(exc: Any) -> ProviderError:
    status = exc.status_code
    headers = exc.response.headers if exc.response is not None else {}
    retry_after = None
    if headers.get("retry-after-ms") is not None:
        ms = parse_retry_after(headers.get("retry-after-ms"))
        retry_after = None if ms is None else ms / 1000
    if retry_after is None:
        retry_after = parse_retry_after(headers.get("retry-after"))
    retryable = status in (408, 409, 429) or status >= 500
    message = getattr(exc, "message", None) or str(exc)
    return ProviderError(
        f"HTTP {status}: {message}", retryable=retryable, status=status, retry_after=retry_after, kind=f"http_{status}"
    )


def parse_completion(data: Any) -> ChatResponse:
    """Read text, reasoning trace, tool calls and usage from a chat-completion JSON object.

    Reasoning traces come back under provider-specific names (``reasoning_content`` from vLLM,
    SGLang and DeepSeek, ``reasoning`` from Ollama and OpenRouter); both are read.
    """
    choices = data.get("choices") if isinstance(data, dict) else None
    if not choices or not isinstance(choices[0], dict) or not isinstance(choices[0].get("message"), dict):
        error = data.get("error") if isinstance(data, dict) else None
        detail = f": {error}" if error else ""
        raise ProviderError(f"malformed response: no choices{detail}", retryable=True, kind="malformed")
    choice = choices[0]
    message = choice["message"]
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    calls = tuple(
        ToolCall(
            id=str(call.get("id", "")),
            name=call["function"].get("name", ""),
            arguments=call["function"].get("arguments") or "",
            # vendor fields the server expects back with the call (e.g. Gemini's extra_content signature)
            extra={k: v for k, v in call.items() if k not in ("id", "type", "function", "index")} or None,
        )
        for call in message.get("tool_calls") or []
        if isinstance(call, dict) and isinstance(call.get("function"), dict)
    )
    usage = data.get("usage")
    if isinstance(usage, dict):
        details = usage.get("completion_tokens_details")
        reasoning_tokens = details.get("reasoning_tokens") if isinstance(details, dict) else None
        usage = {k: usage[k] for k in ("prompt_tokens", "completion_tokens") if isinstance(usage.get(k), int)}
        if isinstance(reasoning_tokens, int) and reasoning_tokens:  # part of completion_tokens, told apart
            usage["reasoning_tokens"] = reasoning_tokens
    content = message.get("content")
    if isinstance(content, list):  # some servers return content parts
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ChatResponse(
        text=content or "",
        reasoning=reasoning if isinstance(reasoning, str) else None,
        tool_calls=calls,
        finish_reason=choice.get("finish_reason"),
        usage=usage or None,
        model=data.get("model"),
        logprobs=_token_logprobs(choice.get("logprobs")),
    )


def _token_logprobs(value: Any) -> tuple[dict[str, Any], ...] | None:
    """``choices[0].logprobs.content`` (asked for with ``logprobs``/``top_logprobs``), kept as plain dicts."""
    content = value.get("content") if isinstance(value, dict) else None
    if not isinstance(content, list):
        return None
    return tuple(entry for entry in content if isinstance(entry, dict)) or None
