"""Adapters carry what a tool loop must send back: ids -> names, signatures, thinking blocks, vendor fields."""

from __future__ import annotations

import base64
from types import SimpleNamespace

from bench_core.kernel.providers.anthropic import AnthropicModel, parse_message
from bench_core.kernel.providers.base import ChatRequest
from bench_core.kernel.providers.google import GoogleModel, parse_response
from bench_core.kernel.providers.openai_compat import parse_completion

TWO_CALLS = (
    {"role": "user", "content": "Q?"},
    {
        "role": "assistant",
        "content": "Checking both.",
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "search_web", "arguments": '{"query": "x"}'},
             "thought_signature": base64.b64encode(b"sig-a").decode(),
             "anthropic_thinking": [{"type": "thinking", "thinking": "plan", "signature": "s1"}]},
            {"id": "b", "type": "function", "function": {"name": "visit_web", "arguments": '{"url": "u"}'}},
        ],
    },
    {"role": "tool", "tool_call_id": "a", "content": "results"},
    {"role": "tool", "tool_call_id": "b", "content": "page"},
)  # fmt: skip


def test_gemini_gets_function_names_signatures_and_one_response_turn():
    model = GoogleModel("gemini-x", client=object())
    contents = model.request_body(ChatRequest(messages=TWO_CALLS))["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    calls = contents[1]["parts"]
    assert calls[0] == {"text": "Checking both."}
    assert calls[1]["function_call"]["name"] == "search_web" and calls[1]["thought_signature"] == b"sig-a"
    assert "thought_signature" not in calls[2]
    assert [p["function_response"]["name"] for p in contents[2]["parts"]] == ["search_web", "visit_web"]
    assert contents[2]["parts"][1]["function_response"]["response"] == {"result": "page"}


def test_gemini_signatures_are_read_as_base64():
    response = {
        "candidates": [
            {"content": {"parts": [{"function_call": {"name": "search_web", "args": {"query": "x"}},
                                    "thought_signature": b"\x00sig"}]}}
        ]
    }  # fmt: skip
    (call,) = parse_response(response).tool_calls
    assert call.extra == {"thought_signature": base64.b64encode(b"\x00sig").decode()}


def test_claude_gets_its_thinking_back_first_and_one_results_turn():
    model = AnthropicModel("claude-x", client=SimpleNamespace())
    messages = model.request_body(ChatRequest(messages=TWO_CALLS))["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert [b["type"] for b in messages[1]["content"]] == ["thinking", "text", "tool_use", "tool_use"]
    assert messages[1]["content"][0] == {"type": "thinking", "thinking": "plan", "signature": "s1"}
    assert [b["tool_use_id"] for b in messages[2]["content"]] == ["a", "b"]


def test_claude_thinking_rides_on_the_first_tool_call():
    message = {
        "content": [
            {"type": "thinking", "thinking": "plan", "signature": "s1"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "tool_use", "id": "t1", "name": "search_web", "input": {"query": "x"}},
            {"type": "tool_use", "id": "t2", "name": "search_web", "input": {"query": "y"}},
        ]
    }
    first, second = parse_message(message).tool_calls
    assert first.extra == {
        "anthropic_thinking": [
            {"type": "thinking", "thinking": "plan", "signature": "s1"},
            {"type": "redacted_thinking", "data": "opaque"},
        ]
    }
    assert second.extra is None
    assert parse_message({"content": [{"type": "thinking", "thinking": "p", "signature": "s"}]}).tool_calls == ()


def test_openai_compatible_vendor_fields_are_kept():
    data = {
        "choices": [
            {"message": {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c", "type": "function", "index": 0, "function": {"name": "search_web", "arguments": "{}"},
                 "extra_content": {"google": {"thought_signature": "x"}}},
                {"id": "d", "type": "function", "function": {"name": "visit_web", "arguments": "{}"}},
            ]}}
        ]
    }  # fmt: skip
    first, second = parse_completion(data).tool_calls
    assert first.extra == {"extra_content": {"google": {"thought_signature": "x"}}} and second.extra is None
