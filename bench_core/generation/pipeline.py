"""Injection generation: Stage 1 / Stage 2 / one-call pipeline over the shared runner and store.

Why a state machine over the store: generation is a chain of dependent calls per item (Stage 1,
then Stage 2 with the content type Stage 1 chose, then corrected retries that quote the previous
reply and its problems). Every call is one runner ``Job`` whose key is (item, ``stage#attempt``),
and an item's state is recomputed from the stored replies alone. The pipeline runs in waves:
compute every item's next due call, run that wave through the runner, reread the store, repeat
until no item has a call due. A killed run therefore resumes exactly where it stopped (finished
calls are never made again), a rerun with more ``--max-attempts`` continues the failed items, and
validation rules apply to stored raw text, so the raw reply is always what the output came from.

Outcomes per item: ``kept`` (a valid bundle), ``rejected`` (Stage 1 said not viable: the
generator's own decision) or ``failed`` (no valid output within the attempts, a refusal, or a
provider error), each with a reason code (``bench_core.generation.checks.PROBLEM_CODES``,
``not_viable``, ``provider_error``).

Provenance is sampled with the seed: ``uniform`` draws each item's frame from a hash of the seed
and item; ``balanced`` ranks the items of each stratum (subset x content type; subset in
one-call mode) by a seeded hash and deals the three frames in turn, so the frames are balanced
within +-1 per stratum. Frames already used by stored Stage 2 calls are kept on resume.

A generation directory holds the items generated from, the runner's store (every call with its raw
reply), one manifest line per invocation, and the outputs rewritten atomically after each completed
run (``write_outputs``): every item's outcome, the kept bundles and the released flattened benchmark.
The files are named and read in ``bench_core.generation.directory``; the settings and an item's state
are ``bench_core.generation.item_state``.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench_core.generation.checks import (
    LENGTH_BOUNDS,
    Checked,
    check_applicability,
    check_bundle,
    check_one_call,
)
from bench_core.generation.directory import BENCHMARK, BENCHMARK_DIR, BUNDLES_FILE, OUTCOMES_FILE, read_manifests
from bench_core.generation.directory import GenerationDirError as GenerationDirError
from bench_core.generation.directory import append_manifest as append_manifest
from bench_core.generation.directory import is_generation_dir as is_generation_dir
from bench_core.generation.directory import register_items as register_items
from bench_core.generation.directory import save_source_report as save_source_report
from bench_core.generation.item_state import (
    FAILED_ITEM,
    KEPT,
    Attempt,
    GenerationSettings,
    ItemState,
    NextCall,
    Plan,
    assign_provenances,
    failure_reason,
)
from bench_core.generation.prompts import STRUCTURED_MODES, GenerationPrompt, get_prompt, response_format
from bench_core.kernel.providers.base import ChatModel, ChatRequest, ChatResponse
from bench_core.kernel.rundir import write_atomic
from bench_core.kernel.runner import Job, Runner, RunSummary
from bench_core.kernel.store import FAILED, OK, ResultKey, ResultStore
from bench_core.medmisbench import taxonomy
from bench_core.medmisbench.items import InjectionBundle, MCQItem
from bench_core.medmisbench.release import write_release
from bench_core.medmisbench.run import item_key

_STRUCTURED_ERROR = re.compile(r"response_format|json_schema|structured|guided|grammar|json mode", re.I)


_CHECKS: dict[str, Callable[[str, MCQItem, str | None], Checked[Any]]] = {
    "applicability": check_applicability,
    "generation": check_bundle,
    "one_call": check_one_call,
}


class GenerationRun:
    """The generation of one set of items by one generator into one directory."""

    def __init__(
        self,
        run_dir: str | Path,
        items: Sequence[MCQItem],
        settings: GenerationSettings,
        model: ChatModel,
        *,
        plans: dict[str, Plan] | None = None,
        structured: str = "auto",
    ) -> None:
        if settings.mode == "fixed" and plans is None:
            raise ValueError("the fixed mode needs a plan (content type and provenance) per item")
        if structured != "auto" and structured not in STRUCTURED_MODES:
            raise ValueError(f"structured must be auto or one of {', '.join(STRUCTURED_MODES)}")
        self.run_dir = Path(run_dir)
        self.items = list(items)
        self.settings = settings
        self.model = model
        self.plans = plans or {}
        missing = [item_key(i) for i in self.items if settings.mode == "fixed" and item_key(i) not in self.plans]
        if missing:
            raise ValueError(f"no plan for item(s) {', '.join(missing[:5])}")
        if structured == "auto":
            structured = "json_schema" if getattr(model, "provider", "") == "openai" else "none"
        self.structured = structured
        self.prompts: dict[str, GenerationPrompt] = {
            stage: get_prompt(pid, stage) for stage, pid in settings.prompt_ids().items()
        }
        self.store = ResultStore(self.run_dir)
        self.downgrades: list[dict[str, str]] = []

    # -- reading state ---------------------------------------------------------------------
    def _records(self) -> dict[tuple[str, str], dict[str, Any]]:
        out = {}
        for record in self.store.latest().values():
            key = record["key"]
            if (
                key["benchmark"] == BENCHMARK
                and key["model"] == self.model.name
                and key["endpoint"] == self.model.endpoint
                and key["config"] == self.settings.config_hash
            ):
                out[(key["item"], key["condition"])] = record
        return out

    def _stage(
        self,
        state: ItemState,
        stage: str,
        records: dict[tuple[str, str], dict[str, Any]],
        retry: set[tuple[str, str]],
    ) -> Any:
        """Walk the stored attempts of one stage; return the valid output, or set the item's next call / failure."""
        previous: Attempt | None = None
        for number in range(1, self.settings.max_attempts + 1):
            condition = f"{stage}#{number}"
            record = records.get((state.key, condition))
            if record is None or (record["status"] == FAILED and (state.key, condition) in retry):
                state.next_call = NextCall(stage, number, previous)
                return None
            meta = record.get("meta") or {}
            if record["status"] != OK:
                error = (record.get("error") or {}).get("message") or "call failed"
                state.attempts.append(Attempt(stage, number, FAILED, None, (), error, meta.get("provenance")))
                state.status, state.reason, state.detail = FAILED_ITEM, "provider_error", error
                return None
            response = record.get("response") or {}
            text = response.get("text") or ""
            checked = _CHECKS[stage](text, state.item, response.get("finish_reason"))
            attempt = Attempt(stage, number, OK, text, tuple(checked.problems), None, meta.get("provenance"))
            state.attempts.append(attempt)
            if checked.ok:
                return checked.value
            previous = attempt
        assert previous is not None
        state.status, state.reason = FAILED_ITEM, failure_reason(previous.problems)
        state.detail = "; ".join(str(p) for p in previous.problems)
        return None

    def states(self, retry: set[tuple[str, str]] | None = None) -> list[ItemState]:
        """Every item's state from the stored replies (no call is made)."""
        retry = retry or set()
        records = self._records()
        states = [ItemState(item) for item in self.items]
        by_key = {s.key: s for s in states}
        pinned = {}
        for (key, condition), record in records.items():
            frame = (record.get("meta") or {}).get("provenance")
            if condition in ("generation#1", "one_call#1") and frame and key in by_key:
                pinned[key] = frame

        if self.settings.mode == "two_stage":
            viable: list[ItemState] = []
            for state in states:
                decision = self._stage(state, "applicability", records, retry)
                if decision is None or not state.decide(decision):
                    continue
                viable.append(state)
            if any(s.next_call is not None for s in states):
                return states  # Stage 2 waits until every Stage 1 decision is in: the deal needs them all
            strata: dict[tuple[str, ...], list[str]] = defaultdict(list)
            for state in viable:
                strata[(state.item.subset, state.content_type or "")].append(state.key)
            frames = assign_provenances(
                strata, seed=self.settings.seed, sampling=self.settings.provenance_sampling, pinned=pinned
            )
            for state in viable:
                state.provenance = frames[state.key]
                self._finish_generation(state, records, retry)
        elif self.settings.mode == "one_call":
            strata = defaultdict(list)
            for state in states:
                strata[(state.item.subset,)].append(state.key)
            frames = assign_provenances(
                strata, seed=self.settings.seed, sampling=self.settings.provenance_sampling, pinned=pinned
            )
            for state in states:
                state.provenance = frames[state.key]
                output = self._stage(state, "one_call", records, retry)
                if output is None or not state.decide(output):
                    continue
                state.sentences = output.sentences
                state.mislead_score = output.mislead_score
                state.status = KEPT
        else:
            for state in states:
                plan = self.plans[state.key]
                state.content_type = taxonomy.canonical_content_type(plan.content_type)
                state.provenance = taxonomy.canonical_provenance(plan.provenance)
                if state.item.injection is not None:
                    state.difficulty = state.item.injection.difficulty
                self._finish_generation(state, records, retry)
        return states

    def _finish_generation(self, state: ItemState, records: dict[tuple[str, str], dict[str, Any]], retry) -> None:
        output = self._stage(state, "generation", records, retry)
        if output is None:
            return
        state.sentences = output.sentences
        state.mislead_score = output.mislead_score
        state.status = KEPT

    def bundle(self, state: ItemState) -> MCQItem:
        """The kept item with its injection bundle."""
        if state.status != KEPT or state.sentences is None:
            raise ValueError(f"item {state.key} has no valid bundle ({state.status})")
        bundle = InjectionBundle(
            sentences=state.sentences,
            content_type=state.content_type or "",
            provenance=state.provenance or "",
            generator_model=self.model.name,
            prompt_version=self.settings.prompt_version,
            difficulty=state.difficulty,
            mislead_score=state.mislead_score,
        )
        return state.item.model_copy(update={"injection": bundle})

    # -- calls -----------------------------------------------------------------------------
    def _job(self, state: ItemState, call: NextCall) -> Job:
        prompt = self.prompts[call.stage]
        item = state.item
        key = ResultKey(
            BENCHMARK,
            state.key,
            f"{call.stage}#{call.attempt}",
            self.model.name,
            self.model.endpoint,
            self.settings.config_hash,
        )
        content = state.content_type if call.stage == "generation" else None
        frame = state.provenance if call.stage in ("generation", "one_call") else None
        max_chars = LENGTH_BOUNDS.get(item.language, LENGTH_BOUNDS["en"])[1]

        def build() -> ChatRequest:
            messages = list(prompt.render(item, content_type=content, provenance=frame, max_chars=max_chars))
            if call.previous is not None:
                messages.append({"role": "assistant", "content": call.previous.raw or ""})
                messages.append(prompt.feedback_message([str(p) for p in call.previous.problems]))
            return ChatRequest(
                messages=tuple(messages),
                temperature=self.settings.temperature,
                max_tokens=self.settings.max_tokens,
                reasoning_effort=self.settings.reasoning_effort,
                response_format=response_format(call.stage, item, self.structured),
            )

        def parse(response: ChatResponse) -> dict[str, Any]:
            checked = _CHECKS[call.stage](response.text, item, response.finish_reason)
            return {"valid": checked.ok, "problems": [p.code for p in checked.problems]}

        return Job(
            key=key,
            model=self.model,
            build=build,
            parse=parse,
            meta={
                "item_id": item.id,
                "subset": item.subset,
                "stage": call.stage,
                "attempt": call.attempt,
                "content_type": content,
                "provenance": frame,
                "prompt": prompt.id,
                "structured": self.structured,
            },
        )

    async def run(self, runner: Runner, *, retry_failed: bool = False) -> RunSummary:
        """Make every due call, wave by wave, until no item has a call due; returns summed counts."""
        total = RunSummary()
        retry: set[tuple[str, str]] = set()
        if retry_failed:
            retry = {key for key, record in self._records().items() if record["status"] == FAILED}
        while True:
            states = self.states(retry)
            due = [(s, s.next_call) for s in states if s.next_call is not None]
            if not due:
                return total
            jobs = [self._job(state, call) for state, call in due]
            stages = sorted({call.stage for _, call in due})
            attempts = sorted({call.attempt for _, call in due})
            description = f"{'+'.join(stages)} (attempt {'/'.join(map(str, attempts))})"
            retry -= {(state.key, f"{call.stage}#{call.attempt}") for state, call in due}
            before = len(self.store)
            summary = await runner.run(jobs, retry_failed=True, description=description)
            for name in ("total", "already_done", "skipped_failed", "succeeded", "failed"):
                setattr(total, name, getattr(total, name) + getattr(summary, name))
            total.elapsed += summary.elapsed
            retry |= self._downgrade_if_unsupported(jobs)
            if not summary.attempted and len(self.store) == before and not retry:
                return total  # nothing could be done (defensive: every due call was already stored)

    def _downgrade_if_unsupported(self, jobs: Sequence[Job]) -> set[tuple[str, str]]:
        """After a wave: when the endpoint refused ``response_format``, fall back one mode and retry those calls."""
        if self.structured == "none":
            return set()
        records = self.store.latest()
        refused = []
        for job in jobs:
            record = records.get(job.key.id)
            error = (record or {}).get("error") or {}
            failed = record is not None and record["status"] == FAILED and error.get("status") == 400
            if failed and _STRUCTURED_ERROR.search(error.get("message") or ""):
                refused.append((job.key.item, job.key.condition))
        if not refused:
            return set()
        old = self.structured
        self.structured = STRUCTURED_MODES[STRUCTURED_MODES.index(old) + 1]
        self.downgrades.append({"from": old, "to": self.structured, "calls": str(len(refused))})
        return set(refused)

    def close(self) -> None:
        self.store.close()


# -- the generation directory ------------------------------------------------------------------


def check_generator(run_dir: Path, model: ChatModel, settings: GenerationSettings) -> None:
    """Refuse a directory made by another generator or with other settings (one benchmark, one generator)."""
    for manifest in read_manifests(run_dir):
        same = (
            manifest.get("model") == model.name
            and manifest.get("endpoint") == model.endpoint
            and manifest.get("config_hash") == settings.config_hash
        )
        if not same:
            raise GenerationDirError(
                f"{run_dir} was generated by {manifest.get('model')!r} at {manifest.get('endpoint')} with settings "
                f"{manifest.get('config_hash')} ({json.dumps(manifest.get('settings'))}); this run would use "
                f"{model.name!r} at {model.endpoint} with {settings.config_hash} ({json.dumps(settings.as_dict())}). "
                "Use a new --out directory."
            )


def outcome_row(state: ItemState) -> dict[str, Any]:
    """One line of ``outcomes.jsonl``: status, reason, labels, scores and every attempt with its raw reply."""
    return {
        "item_key": state.key,
        "item_id": state.item.id,
        "subset": state.item.subset,
        "language": state.item.language,
        "status": state.status,
        "reason": state.reason,
        "detail": state.detail,
        "decision_reason": state.decision_reason,
        "content_type": state.content_type,
        "provenance": state.provenance,
        "difficulty": state.difficulty,
        "mislead_score": state.mislead_score,
        "source_file": state.item.source_file,
        "source_line": state.item.source_line,
        "attempts": [a.as_dict() for a in state.attempts],
    }


def bundle_row(run: GenerationRun, state: ItemState) -> dict[str, Any]:
    """One line of ``bundles.jsonl``: the item with its bundle, and how the bundle was made."""
    stages = sorted({a.stage for a in state.attempts})
    return {
        "item_key": state.key,
        "item": run.bundle(state).model_dump(mode="json"),
        "generation": {
            "generator_model": run.model.name,
            "endpoint": run.model.endpoint,
            "provider": run.model.provider,
            "mode": run.settings.mode,
            "prompts": run.settings.prompt_ids(),
            "prompt_version": run.settings.prompt_version,
            "seed": run.settings.seed,
            "provenance_sampling": run.settings.provenance_sampling,
            "config_hash": run.settings.config_hash,
            "settings": run.settings.as_dict(),
            "decision_reason": state.decision_reason,
            "attempts": {stage: sum(a.stage == stage for a in state.attempts) for stage in stages},
            "raw": {stage: state.final_raw(stage) for stage in stages},
        },
    }


def write_outputs(run: GenerationRun, states: Sequence[ItemState]) -> dict[str, Any]:
    """Rewrite outcomes, bundles and the flattened benchmark from the item states; returns counts.

    Only kept items (valid bundles) reach ``bundles.jsonl`` and ``benchmark/``; each file is
    replaced whole, so a reader never sees a half-written output.
    """
    run.run_dir.mkdir(parents=True, exist_ok=True)
    kept = [s for s in states if s.status == KEPT]
    write_atomic(run.run_dir / OUTCOMES_FILE, (json.dumps(outcome_row(s), ensure_ascii=False) + "\n" for s in states))
    write_atomic(run.run_dir / BUNDLES_FILE, (json.dumps(bundle_row(run, s), ensure_ascii=False) + "\n" for s in kept))
    # the Type 1 target of each item is drawn here, with the run's seed, and travels with the benchmark
    written = write_release([run.bundle(s) for s in kept], run.run_dir / BENCHMARK_DIR, seed=run.settings.seed)
    counts: dict[str, int] = defaultdict(int)
    for state in states:
        counts[state.status] += 1
    return {"counts": dict(counts), "benchmark_files": [str(p) for p in written]}
