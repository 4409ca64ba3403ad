"""A retracted-paper contamination ("Trojan paper") run: two stages, a run directory, and reading it back.

Stage A: the target model answers each record's ``problem`` statement (seed prompt, verbatim).
Stage B: a fixed judge model scores the raw Stage A answer against the retracted study's title,
conclusion and retraction note (seed judge prompt, verbatim): 1 polluted, 0 neutral, -1 recognized.
An answer the parser cannot read (``bench_core.trojan.judging``) is re-asked in the same conversation, up to
``judge_attempts`` calls in all, and stays ``flagged`` if it never yields a score.

Every call is a keyed result in the one store (``results.jsonl``), so a killed run resumes without
repeating a finished call, in either stage:

- Stage A: ``("trojan", record id, "answer", target model, target endpoint, hash(target settings))``;
- judge:   ``("trojan", record id, "judge" | "judge-reask-<k>", judge model, judge endpoint,
  hash(judge settings, the target's key, the SHA-256 of the answer judged))``, with the target named
  in ``meta["target"]``, so several target models can share a run directory and one judge.

The run directory also holds ``records.json`` (the records with their provenance: source URL,
retrieval time, SHA-256, item count) and ``runs.jsonl`` (one line per invocation; never a key).

The run directory's files are named in ``bench_core.trojan.run_files``; reading a directory back as
one trace per (record, target model) is ``bench_core.trojan.traces``. The names callers take from this
module (the records, the manifest, the trace file) are re-exported here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from bench_core.kernel.providers.base import ChatModel, ChatRequest, ChatResponse
from bench_core.kernel.rundir import HashedSettings, config_hash
from bench_core.kernel.runner import Job, Runner, RunSummary
from bench_core.kernel.store import OK, ResultKey, ResultStore
from bench_core.trojan.data import RetractedRecord
from bench_core.trojan.judging import parse_judge_output
from bench_core.trojan.prompts import TrojanPrompts
from bench_core.trojan.run_files import BENCHMARK, STAGE_A, judge_condition
from bench_core.trojan.run_files import RECORDS_FILE as RECORDS_FILE
from bench_core.trojan.run_files import TRACES_FILE as TRACES_FILE
from bench_core.trojan.run_files import RunDirError as RunDirError
from bench_core.trojan.run_files import append_run_manifest as append_run_manifest
from bench_core.trojan.run_files import is_run_dir as is_run_dir
from bench_core.trojan.run_files import load_run_records as load_run_records
from bench_core.trojan.run_files import write_records as write_records
from bench_core.trojan.traces import write_run_traces as write_run_traces

DEFAULT_JUDGE_ATTEMPTS = 3


@dataclass(frozen=True)
class StageSettings(HashedSettings):
    """Decoding settings of one stage and the prompt version; hashed into result keys."""

    prompts: str
    temperature: float | None = 0.0
    max_tokens: int | None = None
    reasoning_effort: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Target:
    """The model under test as it appears in result keys, with its display label."""

    model: ChatModel
    settings: StageSettings
    label: str

    def key(self, record_id: str) -> ResultKey:
        return ResultKey(BENCHMARK, record_id, STAGE_A, self.model.name, self.model.endpoint, self.settings.config_hash)

    def describe(self) -> dict[str, str]:
        return {
            "model": self.model.name,
            "endpoint": self.model.endpoint,
            "config": self.settings.config_hash,
            "label": self.label,
        }


def stage_a_jobs(records: Sequence[RetractedRecord], target: Target, prompts: TrojanPrompts) -> list[Job]:
    """One Stage A call per record."""
    settings = target.settings
    jobs = []
    for record in records:

        def build(record: RetractedRecord = record) -> ChatRequest:
            return ChatRequest(
                messages=({"role": "user", "content": prompts.stage_a_prompt(record.problem)},),
                temperature=settings.temperature,
                max_tokens=settings.max_tokens,
                reasoning_effort=settings.reasoning_effort,
            )

        jobs.append(
            Job(
                key=target.key(record.id),
                model=target.model,
                build=build,
                meta={"record_id": record.id, "stage": "A", "label": target.label, "prompts": prompts.id},
            )
        )
    return jobs


def _judge_parse(response: ChatResponse) -> dict[str, Any]:
    verdict = parse_judge_output(response.text)
    return {
        "score": verdict.score,
        "label": verdict.label,
        "flagged": verdict.flagged,
        "problem": verdict.problem,
        "method": verdict.method,
        "rationale": verdict.rationale,
    }


def _judge_key(
    record_id: str, attempt: int, judge: ChatModel, settings: StageSettings, target: Target, answer: str
) -> ResultKey:
    config = config_hash(
        {
            "judge": settings.as_dict(),
            "target": target.key(record_id).id,
            "answer_sha256": hashlib.sha256(answer.encode()).hexdigest(),
        }
    )
    return ResultKey(BENCHMARK, record_id, judge_condition(attempt), judge.name, judge.endpoint, config)


def judge_jobs(
    records: Sequence[RetractedRecord],
    target: Target,
    judge: ChatModel,
    settings: StageSettings,
    prompts: TrojanPrompts,
    store: ResultStore,
    attempt: int,
) -> list[Job]:
    """Judge calls due in round ``attempt``: records answered in Stage A whose earlier judge calls all came
    back unreadable (round 1: every answered record). Read from the store, so a rerun finds the same jobs."""
    latest = store.latest()
    jobs = []
    for record in records:
        answer_record = latest.get(target.key(record.id).id)
        if answer_record is None or answer_record["status"] != OK:
            continue
        answer = answer_record["response"]["text"]
        earlier: list[str] = []
        for previous in range(1, attempt):
            done = latest.get(_judge_key(record.id, previous, judge, settings, target, answer).id)
            if done is None or done["status"] != OK or not (done.get("parsed") or {}).get("flagged"):
                break
            earlier.append(done["response"]["text"])
        if len(earlier) != attempt - 1:
            continue
        judge_prompt = prompts.judge_prompt(
            title=record.title, conclusion=record.conclusion, note=record.note, model_response_raw=answer
        )

        def build(judge_prompt: str = judge_prompt, earlier: tuple[str, ...] = tuple(earlier)) -> ChatRequest:
            return ChatRequest(
                messages=prompts.judge_messages(judge_prompt, list(earlier)),
                temperature=settings.temperature,
                max_tokens=settings.max_tokens,
                reasoning_effort=settings.reasoning_effort,
            )

        jobs.append(
            Job(
                key=_judge_key(record.id, attempt, judge, settings, target, answer),
                model=judge,
                build=build,
                parse=_judge_parse,
                meta={
                    "record_id": record.id,
                    "stage": "B",
                    "attempt": attempt,
                    "target": target.describe(),
                    "judge_settings": settings.as_dict(),
                    "answer_sha256": hashlib.sha256(answer.encode()).hexdigest(),
                    "prompts": prompts.id,
                },
            )
        )
    return jobs


@dataclass
class TrojanSummary:
    """Counts of both stages of one invocation."""

    stage_a: RunSummary
    judge_rounds: list[RunSummary] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return self.stage_a.failed + sum(r.failed for r in self.judge_rounds)


async def run_two_stages(
    runner: Runner,
    records: Sequence[RetractedRecord],
    target: Target,
    judge: ChatModel,
    judge_settings: StageSettings,
    prompts: TrojanPrompts,
    *,
    judge_attempts: int = DEFAULT_JUDGE_ATTEMPTS,
    retry_failed: bool = False,
) -> TrojanSummary:
    """Stage A for every record, then judge rounds (first ask, then re-asks of unreadable answers)."""
    summary = TrojanSummary(
        await runner.run(
            stage_a_jobs(records, target, prompts), retry_failed=retry_failed, description=f"{target.label}: answers"
        )
    )
    for attempt in range(1, judge_attempts + 1):
        jobs = judge_jobs(records, target, judge, judge_settings, prompts, runner.store, attempt)
        if not jobs:
            break
        description = f"judge {judge.name}" + ("" if attempt == 1 else f" (re-ask {attempt - 1})")
        summary.judge_rounds.append(await runner.run(jobs, retry_failed=retry_failed, description=description))
    return summary
