"""Reading a retracted-paper run directory back as traces, and the review app's trace files.

``read_run`` gives one ``TrojanTrace`` per (record, target model) with everything the judge-audit
review needs: the Stage A prompt and answer, every judge answer and the final verdict. ``read_traces``
also reads the review app's demo format (``records.json`` + ``traces.jsonl``), and ``write_traces``
writes a run in that format; ``write_run_traces`` keeps a run directory's own ``traces.jsonl``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_core.kernel.errors import DatasetError, RowIssue
from bench_core.kernel.rundir import RUNS_FILE, read_jsonl, write_atomic
from bench_core.kernel.store import OK, ResultStore
from bench_core.trojan.data import RetractedRecord
from bench_core.trojan.judging import SCORE_LABELS
from bench_core.trojan.run_files import (
    BENCHMARK,
    RECORDS_FILE,
    STAGE_A,
    TRACES_FILE,
    RunDirError,
    is_run_dir,
    judge_attempt_of,
    load_run_records,
)


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
        elif judge_attempt_of(key["condition"]) is not None:
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
            **_record_fields(entry),
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
            key=lambda r: judge_attempt_of(r["key"]["condition"]) or 0,
        )
        traces.append(TrojanTrace(**base, prompt=_user_text(answer), model_response=text, **_verdict(attempts)))
    return TrojanRunData(records, traces, about, store.corrupt_lines, read_jsonl(run_dir / RUNS_FILE))


def _record_fields(record: RetractedRecord) -> dict[str, Any]:
    """The fields a trace copies from its record (both the run directory and the demo format need them)."""
    return {
        "record_id": record.id,
        "title": record.title,
        "conclusion": record.conclusion,
        "problem": record.problem,
        "note": record.note,
        "isimpact": record.isimpact,
    }


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
                **_record_fields(record),
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
