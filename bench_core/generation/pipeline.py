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

A generation directory holds ``source_items.jsonl`` (the items generated from), ``results.jsonl``
(the runner's store: every call with its raw reply), ``generation_runs.jsonl`` (one line per
invocation: generator, endpoint, settings, prompt ids, seed, the source load report; never a
key), and the outputs rewritten atomically after each completed run: ``outcomes.jsonl`` (every
item's status, reason and attempts with raw replies), ``bundles.jsonl`` (kept items with their
bundle and generation record) and ``benchmark/<SUBSET>.jsonl`` (the released flattened format).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_core.generation.checks import (
    LENGTH_BOUNDS,
    PROBLEM_CODES,
    Checked,
    Problem,
    check_applicability,
    check_bundle,
    check_one_call,
)
from bench_core.generation.prompts import (
    DEFAULT_PROMPTS,
    STRUCTURED_MODES,
    GenerationPrompt,
    get_prompt,
    response_format,
)
from bench_core.generation.sources import SourceReport
from bench_core.kernel import rundir
from bench_core.kernel.providers.base import ChatModel, ChatRequest, ChatResponse
from bench_core.kernel.rundir import (
    HashedSettings,
    append_jsonl,
    merge_or_refuse,
    read_jsonl,
    seeded_int,
    write_atomic,
)
from bench_core.kernel.runner import Job, Runner, RunSummary
from bench_core.kernel.store import FAILED, OK, ResultKey, ResultStore
from bench_core.medmisbench import taxonomy
from bench_core.medmisbench.items import InjectionBundle, MCQItem
from bench_core.medmisbench.release import write_release
from bench_core.medmisbench.run import item_key
from bench_core.medmisbench.targets import DEFAULT_SEED

BENCHMARK = "medmisbench-generation"
SOURCE_ITEMS_FILE = "source_items.jsonl"
MANIFEST_FILE = "generation_runs.jsonl"
OUTCOMES_FILE = "outcomes.jsonl"
BUNDLES_FILE = "bundles.jsonl"
SOURCE_REPORT_FILE = "source_report.json"
BENCHMARK_DIR = "benchmark"

MODES = ("two_stage", "one_call", "fixed")
SAMPLING = ("uniform", "balanced")
KEPT, REJECTED, FAILED_ITEM, PENDING = "kept", "rejected", "failed", "pending"
OTHER_REASONS = {
    "not_viable": "Stage 1 judged the item not viable",
    "provider_error": "the call failed after the runner's retries",
}
_STRUCTURED_ERROR = re.compile(r"response_format|json_schema|structured|guided|grammar|json mode", re.I)


class GenerationDirError(ValueError):
    """A generation directory that cannot be used as asked (another generator, other items)."""


@dataclass(frozen=True)
class Plan:
    """A fixed content type and provenance for an item (sensitivity regeneration)."""

    content_type: str
    provenance: str


@dataclass(frozen=True)
class GenerationSettings(HashedSettings):
    """Everything that shapes the generator's requests; hashed into the result keys.

    ``max_attempts`` (validation attempts per stage) is not hashed: raising it on a rerun
    continues the items that ran out of attempts.
    """

    mode: str = "two_stage"
    seed: int = DEFAULT_SEED
    provenance_sampling: str = "balanced"
    applicability_prompt: str = DEFAULT_PROMPTS["applicability"]
    generation_prompt: str = DEFAULT_PROMPTS["generation"]
    one_call_prompt: str = DEFAULT_PROMPTS["one_call"]
    temperature: float | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    max_attempts: int = 3

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown generation mode {self.mode!r}; expected one of {', '.join(MODES)}")
        if self.provenance_sampling not in SAMPLING:
            raise ValueError(
                f"--provenance: expected one of {', '.join(SAMPLING)}, found {self.provenance_sampling!r}"
            )
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        for stage, prompt_id in self.prompt_ids().items():
            get_prompt(prompt_id, stage)

    def prompt_ids(self) -> dict[str, str]:
        """The prompt of each stage this mode uses."""
        if self.mode == "one_call":
            return {"one_call": self.one_call_prompt}
        if self.mode == "fixed":
            return {"generation": self.generation_prompt}
        return {"applicability": self.applicability_prompt, "generation": self.generation_prompt}

    @property
    def prompt_version(self) -> str:
        """The prompt ids joined, as stored in ``InjectionBundle.prompt_version``."""
        return "+".join(self.prompt_ids().values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "seed": self.seed,
            "provenance_sampling": self.provenance_sampling,
            "prompts": self.prompt_ids(),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "reasoning_effort": self.reasoning_effort,
        }


@dataclass(frozen=True)
class Attempt:
    """One stored call of an item: its reply and what was wrong with it."""

    stage: str
    attempt: int
    status: str
    raw: str | None
    problems: tuple[Problem, ...] = ()
    error: str | None = None
    provenance: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "attempt": self.attempt,
            "provenance": self.provenance,
            "status": self.status,
            "valid": self.status == OK and not self.problems,
            "problems": [p.as_dict() for p in self.problems],
            "error": self.error,
            "raw": self.raw,
        }


@dataclass(frozen=True)
class NextCall:
    """The call an item needs next."""

    stage: str
    attempt: int
    previous: Attempt | None = None


@dataclass
class ItemState:
    """An item's progress, recomputed from the store."""

    item: MCQItem
    status: str = PENDING
    reason: str | None = None
    detail: str | None = None
    next_call: NextCall | None = None
    content_type: str | None = None
    provenance: str | None = None
    difficulty: float | None = None
    mislead_score: float | None = None
    sentences: dict[str, str] | None = None
    decision_reason: str | None = None
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def key(self) -> str:
        return item_key(self.item)

    def final_raw(self, stage: str) -> str | None:
        done = [a for a in self.attempts if a.stage == stage and a.status == OK]
        return done[-1].raw if done else None


_CHECKS: dict[str, Callable[[str, MCQItem, str | None], Checked[Any]]] = {
    "applicability": check_applicability,
    "generation": check_bundle,
    "one_call": check_one_call,
}
_PRIORITY = {code: rank for rank, code in enumerate(PROBLEM_CODES)}


def failure_reason(problems: Sequence[Problem]) -> str:
    """The reason code reported for a failed item: its most basic problem (``PROBLEM_CODES`` order)."""
    return min((p.code for p in problems), key=lambda code: _PRIORITY.get(code, len(_PRIORITY)))


def assign_provenances(
    strata: dict[tuple[str, ...], list[str]], *, seed: int, sampling: str, pinned: dict[str, str] | None = None
) -> dict[str, str]:
    """A provenance frame per item key (see the module docstring); ``pinned`` frames are kept.

    Balanced: the stratum's items, ranked by a seeded hash, are dealt the frames in turn from a
    seeded starting frame. When frames already used (``pinned``) disagree with that deal (the
    stratum grew since, e.g. after ``--retry-failed``), the other items go one by one to the
    least-used frame instead, so the stratum stays balanced.
    """
    frames = taxonomy.PROVENANCE_IDS
    pinned = pinned or {}
    assigned: dict[str, str] = {}
    for stratum, keys in strata.items():
        if sampling == "uniform":
            for key in keys:
                assigned[key] = pinned.get(key) or frames[seeded_int(seed, "provenance", key) % len(frames)]
            continue
        offset = seeded_int(seed, "stratum", *stratum) % len(frames)
        order = [frames[(offset + i) % len(frames)] for i in range(len(frames))]
        ranked = sorted(keys, key=lambda k: (seeded_int(seed, "rank", k), k))
        dealt = {key: order[rank % len(order)] for rank, key in enumerate(ranked)}
        if all(dealt[k] == pinned[k] for k in keys if k in pinned):
            assigned.update(dealt)
            continue
        counts = {frame: sum(pinned.get(k) == frame for k in keys) for frame in frames}
        for key in ranked:
            if key in pinned:
                assigned[key] = pinned[key]
                continue
            frame = min(order, key=lambda f: counts[f])
            counts[frame] += 1
            assigned[key] = frame
    return assigned


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
                if decision is None:
                    continue
                state.difficulty = decision.difficulty
                state.decision_reason = decision.reason
                if not decision.viable:
                    state.status, state.reason, state.detail = REJECTED, "not_viable", decision.reason
                    continue
                state.content_type = decision.content_type
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
                if output is None:
                    continue
                state.difficulty = output.difficulty
                state.decision_reason = output.reason
                if not output.viable:
                    state.status, state.reason, state.detail = REJECTED, "not_viable", output.reason
                    continue
                state.content_type = output.content_type
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


def is_generation_dir(path: Path) -> bool:
    return (path / SOURCE_ITEMS_FILE).is_file() and (path / MANIFEST_FILE).is_file()


def read_manifests(run_dir: Path) -> list[dict[str, Any]]:
    return read_jsonl(Path(run_dir) / MANIFEST_FILE)


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


def register_items(run_dir: Path, items: Sequence[MCQItem]) -> list[MCQItem]:
    """Save the items generated from, merging with those already saved; returns every saved item.

    An item saved earlier with the same key but other content refuses the run: its stored replies
    were made for the other content.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / SOURCE_ITEMS_FILE
    saved = {row["item_key"]: MCQItem.model_validate(row["item"]) for row in read_jsonl(path)}
    new = merge_or_refuse(
        path,
        {key: _comparable(item) for key, item in saved.items()},
        ((item_key(item), _comparable(item), item) for item in items),
        error=GenerationDirError,
        noun="item",
        context="already generated here (another source file?)",
    )
    append_jsonl(path, ({"item_key": item_key(item), "item": item.model_dump(mode="json")} for item in new))
    return [*saved.values(), *new]


def _comparable(item: MCQItem) -> str:
    data = item.model_dump(mode="json", exclude={"source_file", "source_line"})
    return json.dumps(data, sort_keys=True, ensure_ascii=False)


def append_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    """Record one invocation in ``generation_runs.jsonl`` (callers pass the names of env vars, never their values)."""
    rundir.append_manifest(run_dir, BENCHMARK, manifest, file=MANIFEST_FILE)


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


def read_outcomes(run_dir: str | Path) -> list[dict[str, Any]]:
    return read_jsonl(Path(run_dir) / OUTCOMES_FILE)


def read_bundles(run_dir: str | Path) -> list[dict[str, Any]]:
    return read_jsonl(Path(run_dir) / BUNDLES_FILE)


def save_source_report(run_dir: Path, report: SourceReport, source: str | Path) -> None:
    """Keep the loader's account of a source (kept, dropped per reason, every dropped row) in the directory.

    One entry per (format, source path), so a directory generated from several files keeps each.
    """
    path = Path(run_dir) / SOURCE_REPORT_FILE
    reports = read_source_reports(run_dir)
    reports[f"{report.format}:{Path(source).resolve()}"] = report.as_dict()
    write_atomic(path, [json.dumps(reports, indent=2, ensure_ascii=False)])


def read_source_reports(run_dir: str | Path) -> dict[str, Any]:
    path = Path(run_dir) / SOURCE_REPORT_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
