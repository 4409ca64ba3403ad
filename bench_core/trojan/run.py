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

``read_run`` gives one ``TrojanTrace`` per (record, target model) with everything the judge-audit
review needs; ``read_traces`` also reads the review app's demo format (``records.json`` +
``traces.jsonl``), and ``write_traces`` writes a run in that format.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench_core.kernel.errors import DatasetError, RowIssue
from bench_core.kernel.json_lines import element_lines
from bench_core.kernel.providers.base import ChatModel, ChatRequest, ChatResponse
from bench_core.kernel.rundir import (
    RUNS_FILE,
    HashedSettings,
    append_manifest,
    config_hash,
    merge_or_refuse,
    read_json,
    read_jsonl,
    write_atomic,
)
from bench_core.kernel.runner import Job, Runner, RunSummary
from bench_core.kernel.store import OK, ResultKey, ResultStore
from bench_core.trojan.data import RetractedDataset, RetractedRecord, validate_records
from bench_core.trojan.judging import SCORE_LABELS, parse_judge_output
from bench_core.trojan.prompts import TrojanPrompts

BENCHMARK = "trojan"
RECORDS_FILE = "records.json"
TRACES_FILE = "traces.jsonl"
STAGE_A = "answer"
JUDGE = "judge"
DEFAULT_JUDGE_ATTEMPTS = 3


class RunDirError(ValueError):
    """A run directory that cannot be used as asked."""


def judge_condition(attempt: int) -> str:
    """The result-key condition of judge attempt ``attempt`` (1 = the first ask, 2.. = re-asks)."""
    return JUDGE if attempt == 1 else f"{JUDGE}-reask-{attempt - 1}"


def _attempt_of(condition: str) -> int | None:
    if condition == JUDGE:
        return 1
    if condition.startswith(f"{JUDGE}-reask-"):
        tail = condition.removeprefix(f"{JUDGE}-reask-")
        return int(tail) + 1 if tail.isdigit() else None
    return None


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


# -- run directory --------------------------------------------------------------------------


def write_records(run_dir: Path, dataset: RetractedDataset) -> None:
    """Save the records with provenance, merging with records already there (same id must mean same record)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / RECORDS_FILE
    if path.exists():
        existing = read_json(path)
        saved = {row["id"]: row for row in existing.get("records", [])}
        added = merge_or_refuse(
            path,
            saved,
            ((r.id, r.canonical(), r.canonical()) for r in dataset.records),
            error=RunDirError,
            noun="record",
            context="already in this run directory",
        )
        if not added:
            return
        existing["records"] = [*existing["records"], *added]
        existing["item_count"] = len(existing["records"])
        existing.setdefault("sources", []).append(dataset.provenance.model_dump())
        payload = existing
    else:
        payload = dataset.to_json()
    write_atomic(path, [json.dumps(payload, indent=2, ensure_ascii=False) + "\n"])


def is_run_dir(path: Path) -> bool:
    return (path / RECORDS_FILE).is_file() and (path / RUNS_FILE).is_file()


def load_run_records(run_dir: str | Path) -> tuple[list[RetractedRecord], dict[str, Any]]:
    """The records saved in a run directory (or a records file) and the file's provenance fields."""
    path = Path(run_dir)
    path = path / RECORDS_FILE if path.is_dir() else path
    if not path.is_file():
        raise RunDirError(f"{path}: no such records file")
    value = read_json(path)
    rows = value.get("records", []) if isinstance(value, dict) else value
    text = path.read_text(encoding="utf-8")  # read_json has checked it is UTF-8 JSON
    lines = element_lines(text, "records") if isinstance(value, dict) else element_lines(text)
    records, issues = validate_records(rows, str(path), lines or None)
    if issues:
        raise DatasetError(issues)
    about = {k: v for k, v in value.items() if k != "records"} if isinstance(value, dict) else {}
    return records, about


@dataclass(frozen=True)
class TrojanTrace:
    """One (record, target model) pair as the judge audit sees it.

    ``judge_label`` is the judge's score (1, 0, -1) or None when flagged or not judged; ``status`` is
    ``scored``, ``flagged``, ``judge_failed``, ``answer_failed`` or ``not_judged``. ``judge_outputs``
    are the raw judge answers in order (the first ask, then re-asks).
    """

    record_id: str
    title: str
    conclusion: str
    problem: str
    note: str
    isimpact: bool
    model: str
    model_name: str | None
    endpoint: str | None
    prompt: str | None
    model_response: str | None
    judge_model: str | None
    judge_prompt: str | None
    judge_label: int | None
    judge_rationale: str | None
    status: str
    flag_reason: str | None = None
    judge_outputs: tuple[str, ...] = ()
    judge_attempts: int = 0

    @property
    def score(self) -> int | None:
        return self.judge_label

    @property
    def judge_label_name(self) -> str | None:
        return SCORE_LABELS.get(self.judge_label) if self.judge_label is not None else None

    @property
    def flagged(self) -> bool:
        return self.status == "flagged"

    def record(self) -> RetractedRecord:
        return RetractedRecord(
            id=self.record_id,
            title=self.title,
            isimpact=self.isimpact,
            conclusion=self.conclusion,
            problem=self.problem,
            note=self.note,
        )

    @property
    def judge_verdict(self) -> str | None:
        """The judge's last answer, as it wrote it (the one the label was read from, or the last unreadable one)."""
        return self.judge_outputs[-1] if self.judge_outputs else None

    def to_json(self) -> dict[str, Any]:
        """The review app's ``traces.jsonl`` line (demo format keys first, then the extra ones).

        ``question`` (the Stage A prompt), ``target_answer``, ``judge_verdict`` (the judge's text) and
        ``parsed_label`` (polluted / neutral / recognized, or null) name each step of the item;
        ``unparseable`` marks a verdict no score could be read from (ambiguous ones included), which
        is counted apart and never scored.
        """
        return {
            "id": self.record_id,
            "model": self.model,
            "prompt": self.prompt,
            "model_response": self.model_response,
            "judge_model": self.judge_model,
            "judge_label": self.judge_label,
            "judge_rationale": self.judge_rationale,
            "judge_prompt": self.judge_prompt,
            "score": self.judge_label,
            "status": self.status,
            "flag_reason": self.flag_reason,
            "model_name": self.model_name,
            "endpoint": self.endpoint,
            "judge_outputs": list(self.judge_outputs),
            "question": self.prompt,
            "target_answer": self.model_response,
            "judge_verdict": self.judge_verdict,
            "parsed_label": self.judge_label_name,
            "unparseable": self.flagged,
        }


@dataclass
class TrojanRunData:
    records: list[RetractedRecord]
    traces: list[TrojanTrace]
    about: dict[str, Any]
    corrupt_lines: int = 0
    manifests: list[dict[str, Any]] = field(default_factory=list)


def read_run_data(run_dir: str | Path) -> TrojanRunData:
    """Every (record, target) trace of a run directory, with the final judge verdict of each."""
    run_dir = Path(run_dir)
    records, about = load_run_records(run_dir)
    by_id = {r.id: r for r in records}
    store = ResultStore(run_dir)
    latest = [r for r in store.latest().values() if r["key"]["benchmark"] == BENCHMARK]
    answers: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    judged: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
    labels: dict[tuple[str, str, str], str] = {}
    for record in latest:
        key = record["key"]
        meta = record.get("meta") or {}
        if key["condition"] == STAGE_A:
            target = (key["model"], key["endpoint"], key["config"])
            answers[(key["item"], *target)] = record
            labels[target] = meta.get("label") or key["model"]
        elif _attempt_of(key["condition"]) is not None:
            target_meta = meta.get("target") or {}
            target = (target_meta.get("model"), target_meta.get("endpoint"), target_meta.get("config"))
            judged.setdefault((key["item"], *target), []).append(record)
    order = {r.id: index for index, r in enumerate(records)}
    traces = []
    for (record_id, *target), answer in sorted(
        answers.items(), key=lambda kv: (labels[tuple(kv[0][1:])], order.get(kv[0][0], len(order)), kv[0][0])
    ):
        entry = by_id.get(record_id)
        if entry is None:
            raise RunDirError(
                f"{store.path}:{store.line_of(answer['key'])}: field 'key.item': result for record {record_id!r} "
                f"which is not in {RECORDS_FILE}"
            )
        label = labels[tuple(target)]
        base = {
            "record_id": entry.id,
            "title": entry.title,
            "conclusion": entry.conclusion,
            "problem": entry.problem,
            "note": entry.note,
            "isimpact": entry.isimpact,
            "model": label,
            "model_name": target[0],
            "endpoint": target[1],
        }
        if answer["status"] != OK:
            traces.append(
                TrojanTrace(
                    **base,
                    prompt=_user_text(answer),
                    model_response=None,
                    judge_model=None,
                    judge_prompt=None,
                    judge_label=None,
                    judge_rationale=None,
                    status="answer_failed",
                    flag_reason=(answer.get("error") or {}).get("message"),
                )
            )
            continue
        text = answer["response"]["text"]
        sha = hashlib.sha256(text.encode()).hexdigest()
        attempts = sorted(
            (r for r in judged.get((record_id, *target), []) if (r.get("meta") or {}).get("answer_sha256") == sha),
            key=lambda r: _attempt_of(r["key"]["condition"]) or 0,
        )
        traces.append(TrojanTrace(**base, prompt=_user_text(answer), model_response=text, **_verdict(attempts)))
    return TrojanRunData(records, traces, about, store.corrupt_lines, read_jsonl(run_dir / RUNS_FILE))


def _user_text(record: dict[str, Any]) -> str | None:
    messages = record.get("messages") or []
    return messages[0].get("content") if messages else None


def _verdict(attempts: list[dict[str, Any]]) -> dict[str, Any]:
    """The final judge fields from the judge calls of one answer, in attempt order."""
    if not attempts:
        return {
            "judge_model": None,
            "judge_prompt": None,
            "judge_label": None,
            "judge_rationale": None,
            "status": "not_judged",
        }
    first = attempts[0]
    common = {
        "judge_model": first["key"]["model"],
        "judge_prompt": _user_text(first),
        "judge_outputs": tuple(r["response"]["text"] for r in attempts if r["status"] == OK),
        "judge_attempts": len(attempts),
    }
    for record in attempts:
        parsed = record.get("parsed") or {}
        if record["status"] == OK and parsed.get("score") is not None:
            return {
                **common,
                "judge_label": int(parsed["score"]),
                "judge_rationale": parsed.get("rationale"),
                "status": "scored",
            }
    last = attempts[-1]
    if last["status"] != OK:
        reason = (last.get("error") or {}).get("message")
        return {**common, "judge_label": None, "judge_rationale": None, "status": "judge_failed", "flag_reason": reason}
    parsed = last.get("parsed") or {}
    return {
        **common,
        "judge_label": None,
        "judge_rationale": parsed.get("rationale"),
        "status": "flagged",
        "flag_reason": parsed.get("problem"),
    }


def read_run(run_dir: str | Path) -> list[TrojanTrace]:
    """The traces of a Trojan run directory: one per (record, target model); see ``TrojanTrace``."""
    return read_run_data(run_dir).traces


def read_demo_traces(records_path: str | Path, traces_path: str | Path) -> list[TrojanTrace]:
    """The review app's demo format: ``records.json`` (canonical records) and ``traces.jsonl`` lines
    ``{id, model, prompt, model_response, judge_model, judge_label, judge_rationale}`` (plus optional
    ``judge_prompt``, ``status``, ``flag_reason``, ``model_name``, ``endpoint``, ``judge_outputs``)."""
    records, _ = load_run_records(records_path)
    by_id = {r.id: r for r in records}
    traces, issues = [], []
    path = Path(traces_path)
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            issues.append(RowIssue(str(path), number, None, f"malformed JSON ({exc.msg})"))
            continue
        record = by_id.get(str(row.get("id")))
        if record is None:
            issues.append(RowIssue(str(path), number, "id", f"{row.get('id')!r} is not a record in {records_path}"))
            continue
        label = row.get("judge_label", row.get("score"))
        if label is not None and label not in (-1, 0, 1):
            issues.append(RowIssue(str(path), number, "judge_label", f"expected 1, 0, -1 or null, got {label!r}"))
            continue
        if not row.get("model"):
            issues.append(RowIssue(str(path), number, "model", "missing"))
            continue
        status = row.get("status") or ("scored" if label is not None else "flagged")
        traces.append(
            TrojanTrace(
                record_id=record.id,
                title=record.title,
                conclusion=record.conclusion,
                problem=record.problem,
                note=record.note,
                isimpact=record.isimpact,
                model=row["model"],
                model_name=row.get("model_name"),
                endpoint=row.get("endpoint"),
                prompt=row.get("prompt"),
                model_response=row.get("model_response"),
                judge_model=row.get("judge_model"),
                judge_prompt=row.get("judge_prompt"),
                judge_label=label,
                judge_rationale=row.get("judge_rationale"),
                status=status,
                flag_reason=row.get("flag_reason"),
                judge_outputs=tuple(row.get("judge_outputs") or ()),
                judge_attempts=len(row.get("judge_outputs") or ()),
            )
        )
    if issues:
        raise DatasetError(issues)
    return traces


def read_traces(path: str | Path) -> list[TrojanTrace]:
    """Traces from a Trojan run directory, or from a folder with ``records.json`` + ``traces.jsonl``."""
    path = Path(path)
    if is_run_dir(path):
        return read_run(path)
    if (path / RECORDS_FILE).is_file() and (path / TRACES_FILE).is_file():
        return read_demo_traces(path / RECORDS_FILE, path / TRACES_FILE)
    raise RunDirError(f"{path}: neither a Trojan run directory nor a folder with {RECORDS_FILE} and {TRACES_FILE}")


def write_traces(traces: Sequence[TrojanTrace], out_dir: str | Path) -> list[Path]:
    """Write ``records.json`` and ``traces.jsonl`` in the demo format (readable by ``read_demo_traces``)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    records: dict[str, dict[str, Any]] = {}
    for trace in traces:
        records.setdefault(trace.record_id, trace.record().canonical())
    (out / RECORDS_FILE).write_text(json.dumps(list(records.values()), indent=2, ensure_ascii=False) + "\n")
    with (out / TRACES_FILE).open("w", encoding="utf-8") as handle:
        for trace in traces:
            handle.write(json.dumps(trace.to_json(), ensure_ascii=False) + "\n")
    return [out / RECORDS_FILE, out / TRACES_FILE]


def write_run_traces(run_dir: str | Path) -> Path:
    """Write the run directory's per-item trace file ``traces.jsonl`` (replaced whole), one line per
    (record, target model): question, target answer, judge prompt, judge verdict, parsed label."""
    run_dir = Path(run_dir)
    traces = read_run(run_dir)
    path = run_dir / TRACES_FILE
    write_atomic(path, (json.dumps(trace.to_json(), ensure_ascii=False) + "\n" for trace in traces))
    return path


def append_run_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    """Record one invocation of this benchmark in the run directory's ``runs.jsonl``."""
    append_manifest(run_dir, BENCHMARK, manifest)
