"""Provider adapters: request building and response parsing, with fake clients and real SDKs on loopback."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest

from bench_core.kernel.providers import make_chat_model
from bench_core.kernel.providers.anthropic import AnthropicModel, parse_message
from bench_core.kernel.providers.base import ChatRequest, ProviderError, parse_retry_after, public_endpoint
from bench_core.kernel.providers.google import GoogleModel, parse_response
from bench_core.kernel.providers.openai_compat import OpenAICompatModel, parse_completion
from tests.fakes.openai_server import Reply

TOOL = {"type": "function", "function": {"name": "lookup", "description": "Look up", "parameters": {"type": "object"}}}
CONVERSATION = (
    {"role": "system", "content": "Be careful."},
    {"role": "user", "content": "Q?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}],
    },
    {"role": "tool", "tool_call_id": "c1", "name": "lookup", "content": "found"},
)


class _Recorder:
    """A fake SDK client: records the call's keyword arguments and returns a canned response."""

    def __init__(self, response):
        self.calls = []
        self.response = response

    async def create(self, **kwargs):
        self.calls.append(kwargs)
        return self.response

    generate_content = create

    async def close(self):
        pass


def test_endpoints_are_recorded_without_credentials():
    assert public_endpoint("https://user:pw@host:8000/v1/?key=abc#x") == "https://host:8000/v1"
    assert parse_retry_after("2.5") == 2.5 and parse_retry_after("soon") is None


def test_openai_body_and_parsing():
    model = OpenAICompatModel("m", "http://h/v1", client=object(), max_tokens_param="max_completion_tokens")
    body = model.request_body(
        ChatRequest(
            messages=CONVERSATION[:2],
            temperature=0.0,
            max_tokens=99,
            reasoning_effort="high",
            tools=(TOOL,),
            extra={"seed": 7},
        )
    )
    assert body == {
        "model": "m",
        "messages": list(CONVERSATION[:2]),
        "temperature": 0.0,
        "max_completion_tokens": 99,
        "reasoning_effort": "high",
        "tools": [TOOL],
        "seed": 7,
    }
    parsed = parse_completion(
        {
            "model": "m",
            "choices": [
                {
                    "finish_reason": "stop",
                    "message": {
                        "content": "hi",
                        "reasoning_content": "think",
                        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
                    },
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1},
        }
    )
    assert (parsed.text, parsed.reasoning, parsed.tool_calls[0].name, parsed.usage) == (
        "hi",
        "think",
        "f",
        {"prompt_tokens": 3, "completion_tokens": 1},
    )
    with pytest.raises(ProviderError, match="no choices"):
        parse_completion({"error": "overloaded"})


def test_anthropic_request_building_and_parsing_with_a_fake_client():
    message = {
        "model": "claude",
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 5, "output_tokens": 2},
        "content": [
            {"type": "thinking", "thinking": "hmm"},
            {"type": "text", "text": "ok"},
            {"type": "tool_use", "id": "t1", "name": "lookup", "input": {"q": "y"}},
        ],
    }
    recorder = _Recorder(SimpleNamespace(**message))
    model = AnthropicModel("claude", client=SimpleNamespace(messages=recorder, close=recorder.close))
    request = ChatRequest(messages=CONVERSATION, temperature=0.0, max_tokens=500, reasoning_effort="low", tools=(TOOL,))
    response = asyncio.run(model.complete(request, timeout=9))
    (sent,) = recorder.calls
    assert sent["system"] == "Be careful." and sent["timeout"] == 9
    assert sent["thinking"] == {"type": "adaptive", "display": "summarized"} and "extra_body" not in sent
    assert sent["output_config"] == {"effort": "low"} and sent["max_tokens"] == 500
    assert sent["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "c1", "name": "lookup", "input": {"q": "x"}}],
    }
    assert sent["messages"][2]["content"][0] == {"type": "tool_result", "tool_use_id": "c1", "content": "found"}
    assert sent["tools"] == [{"name": "lookup", "description": "Look up", "input_schema": {"type": "object"}}]
    assert (response.text, response.reasoning, response.finish_reason) == ("ok", "hmm", "tool_use")
    assert json.loads(response.tool_calls[0].arguments) == {"q": "y"}
    plain = model.request_body(ChatRequest(messages=CONVERSATION[1:2], temperature=0.3))
    assert plain["extra_body"] == {"temperature": 0.3} and "thinking" not in plain and "system" not in plain
    assert parse_message({"content": [], "usage": None}).usage is None


def test_google_request_building_and_parsing_with_a_fake_client():
    reply = {
        "model_version": "gemini-x",
        "usage_metadata": {"prompt_token_count": 4, "candidates_token_count": 1},
        "candidates": [
            {
                "finish_reason": "STOP",
                "content": {
                    "parts": [
                        {"text": "plan", "thought": True},
                        {"text": "B"},
                        {"function_call": {"name": "lookup", "args": {"q": 1}}},
                    ]
                },
            }
        ],
    }
    recorder = _Recorder(reply)
    client = SimpleNamespace(aio=SimpleNamespace(models=recorder))
    model = GoogleModel("gemini-x", client=client)
    request = ChatRequest(
        messages=CONVERSATION, temperature=0.0, max_tokens=64, reasoning_effort="medium", tools=(TOOL,)
    )
    response = asyncio.run(model.complete(request, timeout=2))
    (sent,) = recorder.calls
    config = sent["config"]
    assert config["system_instruction"] == "Be careful." and config["max_output_tokens"] == 64
    assert config["thinking_config"] == {"thinking_budget": 8192, "include_thoughts": True}
    assert config["http_options"] == {"timeout": 2000}
    assert sent["contents"][1] == {
        "role": "model",
        "parts": [{"function_call": {"name": "lookup", "args": {"q": "x"}}}],
    }
    assert config["tools"][0]["function_declarations"][0]["name"] == "lookup"
    assert (response.text, response.reasoning, response.usage["completion_tokens"]) == ("B", "plan", 1)
    assert response.tool_calls[0].name == "lookup"
    with pytest.raises(ProviderError, match="no candidates"):
        parse_response({"candidates": [], "prompt_feedback": "SAFETY"})


def test_unknown_provider_and_missing_keys(monkeypatch):
    with pytest.raises(ValueError, match="unknown provider"):
        make_chat_model("azure", "m")
    pytest.importorskip("anthropic")
    monkeypatch.delenv("MEDREV_NO_SUCH_KEY", raising=False)
    with pytest.raises(ValueError, match="MEDREV_NO_SUCH_KEY"):
        make_chat_model("anthropic", "claude", api_key_env="MEDREV_NO_SUCH_KEY")


def _policy(received):
    if received.attempt == 1:
        return Reply(status=429, headers={"Retry-After": "1.5"}, error="slow down")
    return Reply(content=f"echo: {received.last_user_text}", reasoning="trace")


@pytest.mark.parametrize("provider", ["anthropic", "google"])
def test_real_sdk_on_the_loopback_server(fake_openai, provider, monkeypatch):
    pytest.importorskip("anthropic" if provider == "anthropic" else "google.genai")
    server = fake_openai(_policy)
    monkeypatch.setenv("MEDREV_TEST_KEY", "k")
    base = server.url.removesuffix("/v1")
    model = make_chat_model(provider, "model-x", base_url=base, api_key_env="MEDREV_TEST_KEY")
    request = ChatRequest(
        messages=({"role": "system", "content": "sys"}, {"role": "user", "content": "hello"}),
        temperature=0.0,
        max_tokens=32,
    )

    async def twice():
        try:
            with pytest.raises(ProviderError) as error:
                await model.complete(request, timeout=5)
            return error.value, await model.complete(request, timeout=5)
        finally:
            await model.aclose()

    error, response = asyncio.run(twice())
    assert (error.status, error.retryable) == (429, True)
    if provider == "anthropic":
        assert error.retry_after == 1.5
    assert (response.text, response.reasoning) == ("echo: hello", "trace")
    assert server.requests[-1].wire == provider and server.requests[-1].system_text == "sys"
    assert server.request_count == 2  # the SDK made no retry of its own


def test_gemini_3_gets_a_thinking_level_not_a_budget(fake_openai):
    """Gemini 3 models take ``thinking_level`` (a budget is for earlier models); on the wire through the SDK."""
    from bench_core.kernel.providers.google import thinking_config

    assert thinking_config("gemini-3.1-pro-preview", "high") == {"thinking_level": "high", "include_thoughts": True}
    assert thinking_config("gemini-3.1-pro-preview", "minimal")["thinking_level"] == "low"  # Pro has no minimal
    assert thinking_config("gemini-3.1-flash-lite-preview", "minimal")["thinking_level"] == "minimal"
    assert thinking_config("gemini-2.5-flash", "medium") == {"thinking_budget": 8192, "include_thoughts": True}
    with pytest.raises(ValueError, match="cannot switch thinking off"):
        thinking_config("gemini-3-flash", "none")
    server = fake_openai(lambda received: Reply(content="B"))
    model = GoogleModel("gemini-3.1-pro-preview", base_url=server.url.removesuffix("/v1"), api_key="k")
    request = ChatRequest(messages=({"role": "user", "content": "Q?"},), reasoning_effort="low")
    assert asyncio.run(model.complete(request, timeout=5)).text == "B"
    (received,) = server.requests
    assert received.body["generationConfig"]["thinkingConfig"] == {"thinking_level": "LOW", "include_thoughts": True}
