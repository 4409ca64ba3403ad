"""The tool-using harness: a model that may search and read sources before it answers a MedMisBench item.

Why it looks like this:

* One job per (item, condition), as in the no-tool run. ``ToolHarness`` is itself a ``ChatModel``:
  the runner hands it the very request the no-tool run sends (the delivery template's messages),
  and it runs the whole bounded loop (plan, ``search_web``, ``visit_web``, answer) inside one
  ``complete`` call. So the existing runner and store give resume without duplicate calls: a
  finished item is one record keyed like an evaluation result, whose config hash also covers the
  harness limits, prompt version and the evidence (corpus fingerprint or web endpoints). A kill
  mid-loop loses only the loops in flight, which run again from the start on resume. The runner's
  per-endpoint cap therefore counts loops: ``--concurrency N`` runs N items' loops at once, each
  making its model calls one after another.
* Bounded: at most ``max_tool_calls`` tool calls (unknown tools and malformed arguments count, so a
  confused model cannot loop for ever), each page cut to ``max_page_tokens`` (approximate count,
  ``bench_core.mitigation.search.tokens``), each tool call limited to ``tool_timeout`` seconds and the whole
  item to ``time_budget`` seconds. When the tool budget is spent the model gets one last turn with
  tools switched off (``tool_choice`` none) and an instruction to answer.
* Every outcome is recorded. A tool that fails (unknown name, bad arguments, backend error or
  timeout) becomes an error message the model reads, and the loop goes on. A model call that keeps
  failing after the step retries, or an item that runs out of time, ends as a *failed* record that
  carries the partial trace (``errors[-1].detail``); an item whose model never stops calling tools
  ends as a recorded, unparseable answer (stop reason ``max_tool_calls``), scored incorrect like
  any unparseable answer.
* Scored exactly like the no-tool run: the final text is stored as ``response.text`` and the
  report re-derives the answer from it with the same parser and metrics (``read_run_data``).
  The trace (every assistant turn, tool call, query, returned snippets, page text as shown, stop
  reason, citations) is stored under ``parsed.harness``.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from bench_core.kernel.providers.base import ChatModel, ChatRequest, ChatResponse, ProviderError, ToolCall
from bench_core.kernel.rundir import config_hash
from bench_core.kernel.runner import Job, RetryPolicy
from bench_core.medmisbench.conditions import Condition
from bench_core.medmisbench.prompts import DeliveryTemplate
from bench_core.medmisbench.run import EvalSettings, PreparedItem, build_jobs
from bench_core.mitigation.prompts import DEFAULT_PROMPT_ID, SEARCH_TOOL, VISIT_TOOL, HarnessPrompt, get_prompt
from bench_core.mitigation.search.base import SearchBackend, SearchError, SearchHit
from bench_core.mitigation.search.tokens import truncate_tokens

_SYSTEM_ROLES = ("system", "developer")
TOKENIZER = "approx-4cpt@1"  # bench_core.mitigation.search.tokens; recorded so page budgets are comparable

# How each provider is told "no more tool calls" for the final turn (the adapters pass ``extra`` on).
NO_TOOLS_EXTRA: dict[str, dict[str, Any]] = {
    "openai": {"tool_choice": "none"},
    "anthropic": {"tool_choice": {"type": "none"}},
    "google": {"tool_config": {"function_calling_config": {"mode": "NONE"}}},
}


@dataclass(frozen=True)
class HarnessSettings:
    """Limits of the tool loop.

    ``max_tool_calls``, ``max_page_tokens``, ``max_results`` and the prompt define the experiment and
    are hashed into result keys; ``time_budget`` (seconds per item), ``tool_timeout`` and
    ``call_timeout`` (seconds per tool or model call) are operational and only recorded.
    """

    max_tool_calls: int = 8
    max_page_tokens: int = 2000
    max_results: int = 5
    prompt_id: str = DEFAULT_PROMPT_ID
    time_budget: float = 600.0
    tool_timeout: float = 60.0
    call_timeout: float = 300.0

    def __post_init__(self) -> None:
        for name in ("max_tool_calls", "max_page_tokens", "max_results"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        for name in ("time_budget", "tool_timeout", "call_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        get_prompt(self.prompt_id)

    def experiment(self) -> dict[str, Any]:
        return {
            "max_tool_calls": self.max_tool_calls,
            "max_page_tokens": self.max_page_tokens,
            "max_results": self.max_results,
            "prompt": self.prompt_id,
            "tokenizer": TOKENIZER,
        }

    def as_dict(self) -> dict[str, Any]:
        return {**self.experiment(), **{k: v for k, v in asdict(self).items() if k.endswith(("budget", "timeout"))}}


def harness_config_hash(settings: EvalSettings, harness: HarnessSettings, evidence: dict[str, Any]) -> str:
    """The config part of result keys: decoding settings, harness limits and prompt, and the evidence."""
    return config_hash({**settings.as_dict(), "harness": harness.experiment(), "evidence": evidence})


class HarnessFailure(ProviderError):
    """An item that could not finish (model errors after retries, time budget); ``detail`` is its partial trace."""

    def __init__(self, message: str, *, kind: str, detail: dict[str, Any], status: int | None = None) -> None:
        super().__init__(message, retryable=False, status=status, kind=kind)
        self.detail = detail


@dataclass(frozen=True)
class HarnessResponse(ChatResponse):
    """The final answer of a tool loop, with the loop's trace."""

    trace: dict[str, Any] = field(default_factory=dict)


@dataclass
class _ToolOutcome:
    content: str
    record: dict[str, Any]


class ToolHarness:
    """A ``ChatModel`` that answers by running the bounded search-and-read loop with ``model`` and ``backend``.

    ``step_retry`` governs retries of each model call inside the loop (the runner should make one
    attempt per item, since a retried item would repeat its searches).
    """

    def __init__(
        self,
        model: ChatModel,
        backend: SearchBackend,
        settings: HarnessSettings | None = None,
        *,
        step_retry: RetryPolicy | None = None,
        seed: int | None = None,
    ) -> None:
        self.model = model
        self.backend = backend
        self.settings = settings or HarnessSettings()
        self.prompt: HarnessPrompt = get_prompt(self.settings.prompt_id)
        self.step_retry = step_retry or RetryPolicy()
        self.name = model.name
        self.endpoint = model.endpoint
        self.provider = model.provider
        self.evidence = backend.describe()
        self._rng = random.Random(seed)

    async def aclose(self) -> None:
        await self.model.aclose()
        await self.backend.aclose()

    async def complete(self, request: ChatRequest, *, timeout: float | None = None) -> HarnessResponse:
        """Run the loop for ``request`` (its messages are the item prompt); ``timeout`` is ignored in
        favour of the settings' ``time_budget``."""
        started = time.monotonic()
        trace = self._new_trace()
        try:
            return await self._loop(request, trace, started)
        except HarnessFailure:
            raise
        except Exception as exc:  # a bug in a backend or adapter: fail the item, keep what happened so far
            self._finish(trace, started, "exception")
            raise HarnessFailure(f"{type(exc).__name__}: {exc}", kind="exception", detail=trace) from exc

    def _new_trace(self) -> dict[str, Any]:
        s = self.settings
        return {
            "prompt": self.prompt.id,
            "limits": s.as_dict(),
            "evidence": self.evidence,
            "system": self.prompt.system_text(max_tool_calls=s.max_tool_calls),
            "steps": [],
            "model_errors": [],
        }

    async def _loop(self, request: ChatRequest, trace: dict[str, Any], started: float) -> HarnessResponse:
        s = self.settings
        deadline = started + s.time_budget
        tools = self.prompt.tools(max_results=s.max_results, max_page_tokens=s.max_page_tokens)
        # The template's own system text (if any) follows the harness's, so the item prompt is unchanged.
        system = [trace["system"], *(str(m["content"]) for m in request.messages if m.get("role") in _SYSTEM_ROLES)]
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "\n\n".join(system)},
            *(m for m in request.messages if m.get("role") not in _SYSTEM_ROLES),
        ]
        used = 0
        forced = False
        seen_ids: set[str] = set()
        usage: Counter[str] = Counter()
        while True:
            if used >= s.max_tool_calls and not forced:
                forced = True
                messages.append(
                    {"role": "user", "content": self.prompt.final_instruction(max_tool_calls=s.max_tool_calls)}
                )
            extra = {**request.extra, **(NO_TOOLS_EXTRA.get(self.provider, {}) if forced else {})}
            step_request = ChatRequest(
                messages=tuple(messages),
                temperature=request.temperature,
                max_tokens=request.max_tokens,
                reasoning_effort=request.reasoning_effort,
                tools=tools,
                extra=extra,
            )
            response = await self._call(step_request, deadline, trace, started)
            for name, value in (response.usage or {}).items():
                if isinstance(value, int):
                    usage[name] += value
            calls = _unique_ids(response.tool_calls, len(trace["steps"]), seen_ids)
            step: dict[str, Any] = {
                "at_s": round(time.monotonic() - started, 3),
                "final_turn": forced,
                "assistant": {
                    "text": response.text,
                    "reasoning": response.reasoning,
                    "tool_calls": [asdict(c) for c in calls],
                    "finish_reason": response.finish_reason,
                    "usage": response.usage,
                },
                "results": [],
            }
            trace["steps"].append(step)
            if not calls or forced:
                stop = "answered" if not calls else "max_tool_calls"
                if forced and not calls:
                    stop = "answered_after_budget"
                self._finish(trace, started, stop, final_text=response.text)
                return HarnessResponse(
                    text=response.text,
                    reasoning=response.reasoning,
                    tool_calls=response.tool_calls,
                    finish_reason=response.finish_reason,
                    usage=dict(usage) or None,
                    model=response.model,
                    trace=trace,
                )
            messages.append(_assistant_message(response.text, calls))
            for call in calls:
                if used >= s.max_tool_calls:
                    outcome = _error(call, "budget", "Error: the tool budget is used up; this call was not run.")
                else:
                    used += 1
                    outcome = await self._execute(call, deadline)
                step["results"].append(outcome.record)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": outcome.content})

    async def _call(self, request: ChatRequest, deadline: float, trace: dict[str, Any], started: float) -> ChatResponse:
        """One model turn, retried per ``step_retry`` within the item's time budget."""
        attempt = 0
        first = time.monotonic()
        while True:
            attempt += 1
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._out_of_time(trace, started)
            limit = min(self.settings.call_timeout, remaining)
            try:
                async with asyncio.timeout(limit + 5):
                    return await self.model.complete(request, timeout=limit)
            except ProviderError as exc:
                error = exc
            except TimeoutError:
                error = ProviderError(f"no answer within {limit:.1f} s", retryable=True, kind="timeout")
            trace["model_errors"].append(
                {"step": len(trace["steps"]), "attempt": attempt, "kind": error.kind, "status": error.status,
                 "message": str(error)}
            )  # fmt: skip
            if time.monotonic() >= deadline:
                raise self._out_of_time(trace, started)
            wait = self.step_retry.delay(attempt, error.retry_after, self._rng)
            give_up = (
                not error.retryable
                or attempt >= self.step_retry.max_attempts
                or time.monotonic() - first + wait > self.step_retry.max_total
                or time.monotonic() + wait >= deadline
            )
            if give_up:
                self._finish(trace, started, "model_error")
                raise HarnessFailure(
                    f"model call failed at step {len(trace['steps']) + 1} after {attempt} attempt(s): {error}",
                    kind=error.kind,
                    status=error.status,
                    detail=trace,
                )
            await asyncio.sleep(wait)

    def _out_of_time(self, trace: dict[str, Any], started: float) -> HarnessFailure:
        self._finish(trace, started, "time_budget")
        return HarnessFailure(
            f"time budget of {self.settings.time_budget:g} s used up after {len(trace['steps'])} model turn(s)",
            kind="time_budget",
            detail=trace,
        )

    async def _execute(self, call: ToolCall, deadline: float) -> _ToolOutcome:
        if call.name not in (SEARCH_TOOL, VISIT_TOOL):
            return _error(
                call,
                "unknown_tool",
                f"Error: there is no tool named {call.name!r}. "
                f"The tools are {SEARCH_TOOL}(query) and {VISIT_TOOL}(url).",
            )
        field_name = "query" if call.name == SEARCH_TOOL else "url"
        example = json.dumps({field_name: "..."})
        try:
            arguments = json.loads(call.arguments or "{}")
        except json.JSONDecodeError as exc:
            return _error(
                call,
                "bad_arguments",
                f"Error: the arguments of {call.name} are not valid JSON ({exc.msg}: {call.arguments[:200]!r}). "
                f"Call it again with a JSON object such as {example}.",
            )
        value = arguments.get(field_name) if isinstance(arguments, dict) else None
        if not isinstance(value, str) or not value.strip():
            return _error(
                call,
                "bad_arguments",
                f"Error: {call.name} needs a non-empty string argument {field_name!r}, e.g. {example}.",
            )
        value = value.strip()
        limit = min(self.settings.tool_timeout, deadline - time.monotonic())
        began = time.monotonic()
        record: dict[str, Any] = {"id": call.id, "name": call.name, "arguments": call.arguments, field_name: value}
        try:
            if limit <= 0:
                raise TimeoutError
            async with asyncio.timeout(limit):
                if call.name == SEARCH_TOOL:
                    hits = await self.backend.search(value, self.settings.max_results)
                else:
                    page = await self.backend.visit(value)
        except TimeoutError:
            return _error(call, "timeout", f"Error: {call.name} got no answer within {max(limit, 0):.1f} s.", record)
        except SearchError as exc:
            return _error(call, exc.kind, f"Error: {exc}", record)
        record["elapsed_s"] = round(time.monotonic() - began, 4)
        if call.name == SEARCH_TOOL:
            content = _format_hits(value, hits)
            record.update(status="ok", hits=[h.as_dict() for h in hits], content=content)
            return _ToolOutcome(content, record)
        text, total, truncated = truncate_tokens(page.text, self.settings.max_page_tokens)
        note = f"\n\n[Page cut to about {self.settings.max_page_tokens} of {total} tokens.]" if truncated else ""
        content = f"URL: {page.url}\nTitle: {page.title}\n\n{text}{note}"
        record.update(
            status="ok",
            page={"url": page.url, "title": page.title, "tokens": total, "truncated": truncated},
            content=content,
        )
        return _ToolOutcome(content, record)

    def _finish(self, trace: dict[str, Any], started: float, stop: str, final_text: str | None = None) -> None:
        """Summaries the report reads: counts, queries, visited and cited sources, stop reason."""
        results = [r for step in trace["steps"] for r in step["results"]]
        visited = list(dict.fromkeys(r["page"]["url"] for r in results if r.get("status") == "ok" and "page" in r))
        requested = [r["url"] for r in results if r.get("name") == VISIT_TOOL and r.get("status") == "ok"]
        cited = citations(final_text or "") if final_text is not None else []
        cited_visited = [u for u in dict.fromkeys(visited + requested) if _mentioned(u, cited, final_text or "")]
        errors = Counter(r["kind"] for r in results if r.get("status") != "ok")
        trace.update(
            stop_reason=stop,
            elapsed_s=round(time.monotonic() - started, 3),
            n_model_calls=len(trace["steps"]) + len(trace["model_errors"]),
            n_tool_calls=sum(r.get("kind") != "budget" for r in results),
            n_searches=sum(r.get("name") == SEARCH_TOOL and r.get("status") == "ok" for r in results),
            n_pages=len(visited),
            queries=[r["query"] for r in results if "query" in r],
            visited=visited,
            cited=cited,
            cited_visited=cited_visited,
            cites_visited_source=bool(cited_visited),
            tool_errors=dict(errors),
        )


def _unique_ids(calls: Sequence[ToolCall], step: int, seen: set[str]) -> list[ToolCall]:
    """The calls with ids that are present and unique in the conversation (some servers reuse or omit them)."""
    out = []
    for index, call in enumerate(calls):
        identifier = call.id or f"call_{step}_{index}"
        if identifier in seen:
            identifier = f"{identifier}_{step}_{index}"
        seen.add(identifier)
        out.append(ToolCall(identifier, call.name, call.arguments, call.extra))
    return out


def _assistant_message(text: str, calls: Sequence[ToolCall]) -> dict[str, Any]:
    """The assistant turn as sent back: malformed arguments are replaced by {} so every adapter and chat
    template can read the history (the model is told about its mistake in the tool result)."""
    tool_calls = []
    for call in calls:
        try:
            valid = isinstance(json.loads(call.arguments or "{}"), dict)
        except json.JSONDecodeError:
            valid = False
        tool_calls.append(
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments if valid and call.arguments else "{}"},
                **(call.extra or {}),
            }
        )
    return {"role": "assistant", "content": text or None, "tool_calls": tool_calls}


def _error(call: ToolCall, kind: str, content: str, record: dict[str, Any] | None = None) -> _ToolOutcome:
    base = record or {"id": call.id, "name": call.name, "arguments": call.arguments}
    return _ToolOutcome(content, {**base, "status": "error", "kind": kind, "error": content, "content": content})


def _format_hits(query: str, hits: Sequence[SearchHit]) -> str:
    if not hits:
        return f"No results for {query!r}."
    lines = [f"Results for {query!r}:"]
    for rank, hit in enumerate(hits, start=1):
        lines += ["", f"[{rank}] {hit.title}", f"URL: {hit.url}", hit.snippet]
    return "\n".join(lines)


def citations(text: str) -> list[str]:
    """The ``citations`` list of the last JSON object in ``text`` that has one (strings only)."""
    decoder = json.JSONDecoder()
    found: list[str] = []
    for start in (i for i, char in enumerate(text) if char == "{"):
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict) and isinstance(value.get("citations"), list):
            found = [str(c).strip() for c in value["citations"] if isinstance(c, str | int) and str(c).strip()]
    return list(dict.fromkeys(found))


def _normal(url: str) -> str:
    return url.strip().removeprefix("https://").removeprefix("http://").removeprefix("www.").rstrip("/").lower()


def _mentioned(url: str, cited: Sequence[str], text: str) -> bool:
    """Whether a visited source is cited: listed in ``citations`` (scheme, www and trailing / ignored) or
    quoted in the answer text."""
    return _normal(url) in {_normal(c) for c in cited} or url in text


def build_harness_jobs(
    prepared: Sequence[PreparedItem],
    conditions: Sequence[Condition],
    harness: ToolHarness,
    template: DeliveryTemplate,
    settings: EvalSettings,
    *,
    label: str | None = None,
) -> list[Job]:
    """The evaluation's jobs (``medmisbench.run.build_jobs``) answered by the harness: the harness
    configuration goes into the config hash and ``meta``, the loop's trace into ``parsed.harness``."""
    return build_jobs(
        prepared,
        conditions,
        harness,
        template,
        settings,
        label=label,
        config=harness_config_hash(settings, harness.settings, harness.evidence),
        meta={"harness": {**harness.settings.as_dict(), "evidence": harness.evidence}},
        annotate=lambda response: {"harness": getattr(response, "trace", None)},
    )
