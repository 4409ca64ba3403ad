"""The tool loop on the loopback server: every scripted behaviour ends in a recorded answer or a recorded failure.

Each test runs real jobs through the runner into a result store (as ``bench run medmisbench --tools``
does) with a model scripted on the fake OpenAI-compatible server (or its Anthropic / Gemini wire
formats), and checks both what was recorded and what the model was sent.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from typing import Any

import pytest

from bench_core.kernel.providers import make_chat_model
from bench_core.kernel.providers.openai_compat import OpenAICompatModel
from bench_core.kernel.runner import RetryPolicy, Runner
from bench_core.kernel.store import ResultStore
from bench_core.medmisbench.conditions import Condition
from bench_core.medmisbench.data import load_medmisbench
from bench_core.medmisbench.prompts import LEGACY_TEMPLATE_ID, get_template
from bench_core.medmisbench.run import EvalSettings, append_run_manifest, prepare_items, read_run_data, write_items
from bench_core.medmisbench.targets import DEFAULT_SEED
from bench_core.mitigation.harness import HarnessSettings, ToolHarness, build_harness_jobs, citations
from bench_core.mitigation.search.base import Page, SearchHit
from bench_core.mitigation.search.local import LocalSearch
from bench_core.mitigation.search.web import JinaReader, SerperSearch, WebSearch
from tests.bench_core.mitigation.harness_agent import CORPUS_DIR, ITEMS_DIR, answer
from tests.fakes.openai_server import Received, Reply
from tests.fakes.search_server import FakeSearchServer, Fault

PREPARED = {p.item.id: p for p in prepare_items(load_medmisbench(ITEMS_DIR, strict=True).items)}
FAST = RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05, max_total=10)
pytestmark = pytest.mark.timeout(60)


def search(query: str) -> dict[str, Any]:
    return {"name": "search_web", "arguments": {"query": query}}


def visit(url: str) -> dict[str, Any]:
    return {"name": "visit_web", "arguments": {"url": url}}


def calls_then_answer(**first: Any) -> Callable[[Received], Reply]:
    """A model that replies ``Reply(**first)`` (its tool calls) on its first turn and answers C after."""

    def policy(received: Received) -> Reply:
        return Reply(**first) if turn(received) == 0 else Reply(content=answer("C"))

    return policy


def native_model(server: Any, monkeypatch: pytest.MonkeyPatch, provider: str, name: str) -> Any:
    """A ``provider`` SDK model pointed at the fake server, which speaks that provider's wire format too."""
    monkeypatch.setenv("MEDREV_TEST_KEY", "k")
    return make_chat_model(provider, name, base_url=server.url.removesuffix("/v1"), api_key_env="MEDREV_TEST_KEY")


def turn(received: Received) -> int:
    """How many assistant turns the conversation already has (any wire format)."""
    if "contents" in received.body:
        return sum(c.get("role") == "model" for c in received.body["contents"])
    return sum(m.get("role") == "assistant" for m in received.body["messages"])


def tool_texts(received: Received) -> list[str]:
    return [m["content"] for m in received.body.get("messages", []) if m.get("role") == "tool"]


def run(
    tmp_path,
    model,
    backend,
    settings: HarnessSettings | None = None,
    *,
    items=("hm-02",),
    conditions=("clean",),
    step_retry: RetryPolicy = FAST,
) -> tuple[list[dict[str, Any]], Any]:
    """Run harness jobs through the runner into ``tmp_path``; returns the stored records and the run data."""
    settings = settings or HarnessSettings()
    prepared = [PREPARED[i] for i in items]
    write_items(tmp_path, prepared, DEFAULT_SEED)
    append_run_manifest(tmp_path, {"model": model.name})
    harness = ToolHarness(model, backend, settings, step_retry=step_retry)
    jobs = build_harness_jobs(
        prepared,
        [Condition.parse(c) for c in conditions],
        harness,
        get_template(LEGACY_TEMPLATE_ID),
        EvalSettings(),
        label="agent",
    )
    store = ResultStore(tmp_path)
    runner = Runner(store, concurrency=2, retry=RetryPolicy(max_attempts=1), timeout=settings.time_budget + 30)
    runner.progress = False

    async def main():
        try:
            return await runner.run(jobs)
        finally:
            await harness.aclose()

    summary = asyncio.run(main())
    store.close()
    assert summary.total == len(jobs) == summary.succeeded + summary.failed  # everything recorded
    return list(store.iter_records()), read_run_data(tmp_path)


def openai_model(server) -> OpenAICompatModel:
    return OpenAICompatModel("agent", server.url)


def local() -> LocalSearch:
    return LocalSearch.build(CORPUS_DIR)


def test_a_model_that_searches_visits_and_answers(fake_openai, tmp_path):
    def policy(received: Received) -> Reply:
        step = turn(received)
        if step == 0:
            return Reply(content="I will check the guideline.", tool_calls=[search("magnesium sulfate eclampsia")])
        if step == 1:
            url = re.search(r"^URL: (.+)$", tool_texts(received)[0], re.M).group(1)
            return Reply(content=None, tool_calls=[visit(url)])
        return Reply(content=answer("C", ["obstetrics/pre-eclampsia-magnesium.html"]))

    server = fake_openai(policy)
    (record,), data = run(tmp_path, openai_model(server), local())
    assert record["status"] == "ok" and record["parsed"]["label"] == "C" and record["parsed"]["correct"] is True
    trace = record["parsed"]["harness"]
    assert trace["stop_reason"] == "answered" and len(trace["steps"]) == 3
    assert (trace["n_tool_calls"], trace["n_searches"], trace["n_pages"], trace["n_model_calls"]) == (2, 1, 1, 3)
    assert trace["queries"] == ["magnesium sulfate eclampsia"]
    first, second = trace["steps"][0]["results"][0], trace["steps"][1]["results"][0]
    assert first["hits"][0]["url"] == "obstetrics/pre-eclampsia-magnesium.html" and first["hits"][0]["snippet"]
    assert second["page"] == {
        "url": "obstetrics/pre-eclampsia-magnesium.html",
        "title": "Pre-eclampsia and eclampsia",
        "tokens": second["page"]["tokens"],
        "truncated": False,
    }
    assert "Magnesium sulfate is the drug of choice" in second["content"]
    assert trace["visited"] == trace["cited_visited"] == ["obstetrics/pre-eclampsia-magnesium.html"]
    assert (
        trace["cites_visited_source"] is True
        and trace["steps"][0]["assistant"]["text"] == "I will check the guideline."
    )

    requests = server.requests
    assert len(requests) == 3
    body = requests[0].body
    assert [t["function"]["name"] for t in body["tools"]] == ["search_web", "visit_web"]
    assert body["messages"][0]["role"] == "system" and "at most 8 tool calls" in body["messages"][0]["content"]
    entry = PREPARED["hm-02"]
    item_prompt = get_template(LEGACY_TEMPLATE_ID).render(entry.item, Condition("clean"), entry.target)
    assert body["messages"][1:] == list(item_prompt)  # exactly the no-tool run's prompt
    assert "tool_choice" not in body
    assert requests[1].body["messages"][-1]["content"].startswith("Results for 'magnesium sulfate eclampsia':")
    (response,) = data.responses  # scored by the same parser and metrics as a no-tool run
    assert (response.chosen, response.correct, response.parse_method) == ("C", True, "json")


def test_a_model_that_keeps_calling_tools_is_stopped_at_the_cap(fake_openai, tmp_path):
    server = fake_openai(lambda received: Reply(content=None, tool_calls=[search(f"query {turn(received)}")]))
    settings = HarnessSettings(max_tool_calls=3)
    (record,), data = run(tmp_path, openai_model(server), local(), settings)
    assert record["status"] == "ok"
    trace = record["parsed"]["harness"]
    assert trace["stop_reason"] == "max_tool_calls" and trace["n_tool_calls"] == 3 and len(trace["steps"]) == 4
    assert server.request_count == 4  # three tool turns and one final turn, then the loop ends
    final = server.requests[-1].body
    assert final["tool_choice"] == "none"
    assert final["messages"][-1] == {
        "role": "user",
        "content": settings_prompt_final(3),
    }
    assert data.responses[0].chosen is None  # no answer: counted as unparseable (incorrect), like a no-tool run
    assert record["response"]["text"] == ""


def settings_prompt_final(n: int) -> str:
    from bench_core.mitigation.prompts import SEARCH_V1

    return SEARCH_V1.final_instruction(max_tool_calls=n)


def test_a_model_that_answers_once_the_budget_is_spent(fake_openai, tmp_path):
    def policy(received: Received) -> Reply:
        if received.body.get("tool_choice") == "none":
            return Reply(content=answer("C", []))
        return Reply(content=None, tool_calls=[search("eclampsia")])

    server = fake_openai(policy)
    (record,), _ = run(tmp_path, openai_model(server), local(), HarnessSettings(max_tool_calls=2))
    trace = record["parsed"]["harness"]
    assert trace["stop_reason"] == "answered_after_budget" and record["parsed"]["label"] == "C"
    assert trace["cites_visited_source"] is False and server.request_count == 3


def test_a_model_that_calls_an_unknown_tool(fake_openai, tmp_path):
    server = fake_openai(
        calls_then_answer(content=None, tool_calls=[{"name": "browse_internet", "arguments": {"q": "eclampsia"}}])
    )
    (record,), _ = run(tmp_path, openai_model(server), local())
    trace = record["parsed"]["harness"]
    assert record["status"] == "ok" and trace["stop_reason"] == "answered"
    assert trace["tool_errors"] == {"unknown_tool": 1} and trace["n_tool_calls"] == 1
    sent = tool_texts(server.requests[1])[0]
    assert (
        sent == "Error: there is no tool named 'browse_internet'. The tools are search_web(query) and visit_web(url)."
    )


def test_malformed_tool_arguments(fake_openai, tmp_path):
    script = [
        [{"name": "search_web", "arguments": '{"query": "warfarin'}],  # cut-off JSON
        [{"name": "search_web", "arguments": {"q": "warfarin"}}],  # wrong key
        [{"name": "visit_web", "arguments": {"url": "   "}}],  # empty
        [{"name": "search_web", "arguments": '["warfarin"]'}],  # not an object
    ]

    def policy(received: Received) -> Reply:
        step = turn(received)
        return Reply(content=None, tool_calls=script[step]) if step < len(script) else Reply(content=answer("C"))

    server = fake_openai(policy)
    (record,), _ = run(tmp_path, openai_model(server), local())
    trace = record["parsed"]["harness"]
    assert record["status"] == "ok" and trace["tool_errors"] == {"bad_arguments": 4}
    assert trace["steps"][0]["results"][0]["arguments"] == '{"query": "warfarin'  # the raw text is kept
    messages = server.requests[1].body["messages"]
    assert messages[-2]["tool_calls"][0]["function"]["arguments"] == "{}"  # history stays valid JSON
    assert "are not valid JSON" in messages[-1]["content"]
    assert "needs a non-empty string argument 'query'" in tool_texts(server.requests[2])[-1]
    assert "needs a non-empty string argument 'url'" in tool_texts(server.requests[3])[-1]


class SlowBackend:
    """A backend whose searches never come back (and which counts them)."""

    name = "slow"

    def __init__(self) -> None:
        self.searches = 0

    def describe(self) -> dict[str, Any]:
        return {"backend": "slow"}

    async def search(self, query: str, k: int) -> list[SearchHit]:
        self.searches += 1
        await asyncio.sleep(3600)
        return []

    async def visit(self, url: str) -> Page:
        raise AssertionError("not used")

    async def aclose(self) -> None:
        pass


def _search_then_answer(received: Received) -> Reply:
    return Reply(content=None, tool_calls=[search("eclampsia")]) if turn(received) == 0 else Reply(content=answer("C"))


def test_a_backend_that_times_out(fake_openai, tmp_path):
    server = fake_openai(_search_then_answer)
    backend = SlowBackend()
    started = time.monotonic()
    (record,), _ = run(tmp_path, openai_model(server), backend, HarnessSettings(tool_timeout=0.3))
    assert time.monotonic() - started < 20  # bounded, no hang
    trace = record["parsed"]["harness"]
    assert record["status"] == "ok" and record["parsed"]["label"] == "C" and backend.searches == 1
    assert trace["tool_errors"] == {"timeout": 1}
    assert tool_texts(server.requests[1]) == ["Error: search_web got no answer within 0.3 s."]


def test_a_web_search_service_that_hangs(fake_openai, tmp_path):
    server = fake_openai(_search_then_answer)
    with FakeSearchServer(faults={"/search": [Fault(hang=5.0)] * 3}) as web:
        fast = RetryPolicy(max_attempts=2, base_delay=0.01, max_delay=0.02)
        backend = WebSearch(
            SerperSearch(url=web.search_url, api_key="k", timeout=0.2, retry=fast),
            JinaReader(url=web.reader_url, timeout=0.2, retry=fast),
        )
        (record,), _ = run(tmp_path, openai_model(server), backend, HarnessSettings(tool_timeout=5))
    trace = record["parsed"]["harness"]
    assert record["status"] == "ok" and trace["tool_errors"] == {"timeout": 1}
    assert "Serper did not answer in time" in tool_texts(server.requests[1])[0]
    assert trace["evidence"]["backend"] == "web"


def test_a_failing_model_turn_is_retried_without_repeating_searches(fake_openai, tmp_path):
    class Counting(LocalSearch):
        searches = 0

        async def search(self, query: str, k: int) -> list[SearchHit]:
            Counting.searches += 1
            return await super().search(query, k)

    def policy(received: Received) -> Reply:
        if turn(received) == 1 and received.attempt == 1:
            return Reply(status=500, error="overloaded")
        return _search_then_answer(received)

    server = fake_openai(policy)
    backend = Counting.build(CORPUS_DIR)
    (record,), _ = run(tmp_path, openai_model(server), backend)
    trace = record["parsed"]["harness"]
    assert record["status"] == "ok" and Counting.searches == 1 and server.request_count == 3
    assert [e["kind"] for e in trace["model_errors"]] == ["http_500"] and trace["n_model_calls"] == 3


def test_a_model_that_keeps_failing_ends_as_a_recorded_failure_with_its_trace(fake_openai, tmp_path):
    def policy(received: Received) -> Reply:
        return Reply(status=400, error="context too long") if turn(received) == 1 else _search_then_answer(received)

    server = fake_openai(policy)
    (record,), data = run(tmp_path, openai_model(server), local())
    assert record["status"] == "failed" and record["attempts"] == 1
    error = record["error"]
    assert error["kind"] == "http_400" and "model call failed at step 2" in error["message"]
    assert error["detail"]["stop_reason"] == "model_error" and error["detail"]["queries"] == ["eclampsia"]
    assert len(data.failures) == 1 and data.responses == []
    assert server.request_count == 2  # a 400 is not retried


def test_an_item_that_runs_out_of_time_is_a_recorded_failure(fake_openai, tmp_path):
    def policy(received: Received) -> Reply:
        return Reply(hang=True) if turn(received) == 1 else _search_then_answer(received)

    server = fake_openai(policy, hang_seconds=30)
    started = time.monotonic()
    settings = HarnessSettings(time_budget=1.0, call_timeout=30)
    (record,), _ = run(tmp_path, openai_model(server), local(), settings)
    assert time.monotonic() - started < 15
    assert record["status"] == "failed" and record["error"]["kind"] == "time_budget"
    assert "time budget of 1 s used up" in record["error"]["message"]
    assert record["error"]["detail"]["stop_reason"] == "time_budget"
    assert record["error"]["detail"]["n_searches"] == 1


def test_a_backend_bug_fails_the_item_and_keeps_the_trace(fake_openai, tmp_path):
    class Broken(SlowBackend):
        async def search(self, query: str, k: int) -> list[SearchHit]:
            raise KeyError("index corrupted")

    server = fake_openai(_search_then_answer)
    (record,), _ = run(tmp_path, openai_model(server), Broken())
    assert record["status"] == "failed" and record["error"]["kind"] == "exception"
    assert "KeyError" in record["error"]["message"] and record["error"]["detail"]["stop_reason"] == "exception"


def test_parallel_calls_beyond_the_budget_are_not_run(fake_openai, tmp_path):
    server = fake_openai(calls_then_answer(content=None, tool_calls=[search("a"), search("b"), search("c")]))
    (record,), _ = run(tmp_path, openai_model(server), local(), HarnessSettings(max_tool_calls=2))
    trace = record["parsed"]["harness"]
    assert [r["status"] for r in trace["steps"][0]["results"]] == ["ok", "ok", "error"]
    assert trace["steps"][0]["results"][2]["kind"] == "budget" and trace["n_tool_calls"] == 2
    second = server.requests[1].body
    assert [m["tool_call_id"] for m in second["messages"] if m["role"] == "tool"] == ["call_0", "call_1", "call_2"]
    assert second["tool_choice"] == "none" and trace["stop_reason"] == "answered_after_budget"


def test_vendor_fields_of_tool_calls_go_back_to_the_server(fake_openai, tmp_path):
    extra = {"google": {"thought_signature": "c2ln"}}

    server = fake_openai(calls_then_answer(content=None, tool_calls=[{**search("eclampsia"), "extra_content": extra}]))
    run(tmp_path, openai_model(server), local())
    assistant = server.requests[1].body["messages"][-2]
    assert assistant["tool_calls"][0]["extra_content"] == extra


def test_the_anthropic_wire_format(fake_openai, tmp_path, monkeypatch):
    pytest.importorskip("anthropic")

    server = fake_openai(
        calls_then_answer(content="Checking.", reasoning="I should verify the claim.", tool_calls=[search("eclampsia")])
    )
    model = native_model(server, monkeypatch, "anthropic", "claude-x")
    (record,), _ = run(tmp_path, model, local(), HarnessSettings(max_tool_calls=1))
    assert record["status"] == "ok" and record["parsed"]["label"] == "C" and record["provider"] == "anthropic"
    first, second = (r.body for r in server.requests)
    assert [t["name"] for t in first["tools"]] == ["search_web", "visit_web"] and "input_schema" in first["tools"][0]
    assert "at most 1 tool calls" in first["system"]
    assistant, results = second["messages"][1], second["messages"][2]
    assert assistant["content"][0] == {
        "type": "thinking",
        "thinking": "I should verify the claim.",
        "signature": "fake",
    }
    assert [b["type"] for b in assistant["content"]] == ["thinking", "text", "tool_use"]
    assert results["content"][0]["type"] == "tool_result"
    assert results["content"][0]["tool_use_id"] == assistant["content"][2]["id"]
    assert results["content"][0]["content"].startswith("Results for 'eclampsia'")
    assert second["tool_choice"] == {"type": "none"}  # the budget of one call is spent


def test_the_gemini_wire_format(fake_openai, tmp_path, monkeypatch):
    pytest.importorskip("google.genai")

    server = fake_openai(
        calls_then_answer(content=None, tool_calls=[{**search("eclampsia"), "signature": "c2lnbmF0dXJl"}])
    )
    model = native_model(server, monkeypatch, "google", "gemini-x")
    (record,), _ = run(tmp_path, model, local(), HarnessSettings(max_tool_calls=1))
    assert record["status"] == "ok" and record["parsed"]["label"] == "C" and record["provider"] == "google"
    second = server.requests[1].body
    call_part = second["contents"][1]["parts"][0]
    assert call_part["functionCall"]["name"] == "search_web" and call_part["thoughtSignature"] == "c2lnbmF0dXJl"
    response = second["contents"][2]["parts"][0]["functionResponse"]
    assert response["name"] == "search_web" and response["response"]["result"].startswith("Results for 'eclampsia'")
    assert second["toolConfig"] == {"functionCallingConfig": {"mode": "NONE"}}


def test_citations_are_read_from_the_last_json_object():
    text = 'Draft {"citations": ["a"]} then {"answer_letter": "B", "citations": ["https://x.org/p", "b", 3, ""]}'
    assert citations(text) == ["https://x.org/p", "b", "3"]
    assert citations("no json here") == [] and citations('{"citations": "not a list"}') == []


def test_settings_are_validated_and_the_config_hash_covers_the_experiment():
    from bench_core.mitigation.harness import harness_config_hash

    with pytest.raises(ValueError, match="max_tool_calls must be at least 1"):
        HarnessSettings(max_tool_calls=0)
    with pytest.raises(ValueError, match="unknown harness prompt"):
        HarnessSettings(prompt_id="nope@1")
    evidence = {"backend": "local", "fingerprint": "abc"}
    base = harness_config_hash(EvalSettings(), HarnessSettings(), evidence)
    assert base == harness_config_hash(EvalSettings(), HarnessSettings(time_budget=5, tool_timeout=1), evidence)
    assert base != harness_config_hash(EvalSettings(), HarnessSettings(max_tool_calls=4), evidence)
    assert base != harness_config_hash(EvalSettings(), HarnessSettings(), {**evidence, "fingerprint": "abd"})
    assert base != EvalSettings().config_hash
    assert json.dumps(HarnessSettings().as_dict())  # recorded with every result
