"""The files of a retracted-paper run directory and the result-key conditions of its two stages.

``records.json`` holds the records with their provenance (source URL, retrieval time, SHA-256, item
count), ``runs.jsonl`` one line per invocation (never a key), ``traces.jsonl`` the per-item traces.
Both the stages (``bench_core.trojan.run``) and the reading back (``bench_core.trojan.traces``) need
these names, so they live here and neither of those modules imports the other.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench_core.kernel.errors import DatasetError
from bench_core.kernel.json_lines import element_lines
from bench_core.kernel.rundir import RunFiles, merge_or_refuse, read_json, write_atomic
from bench_core.trojan.data import RetractedDataset, RetractedRecord, validate_records

BENCHMARK = "trojan"
RECORDS_FILE = "records.json"
TRACES_FILE = "traces.jsonl"
STAGE_A = "answer"
JUDGE = "judge"


class RunDirError(ValueError):
    """A run directory that cannot be used as asked."""


FILES = RunFiles(BENCHMARK, RECORDS_FILE, "retracted-paper", RunDirError)
is_run_dir = FILES.is_run_dir
append_run_manifest = FILES.append_manifest


def judge_condition(attempt: int) -> str:
    """The result-key condition of judge attempt ``attempt`` (1 = the first ask, 2.. = re-asks)."""
    return JUDGE if attempt == 1 else f"{JUDGE}-reask-{attempt - 1}"


def judge_attempt_of(condition: str) -> int | None:
    """The judge attempt a result-key condition names (1 = the first ask), or None for another stage."""
    if condition == JUDGE:
        return 1
    if condition.startswith(f"{JUDGE}-reask-"):
        tail = condition.removeprefix(f"{JUDGE}-reask-")
        return int(tail) + 1 if tail.isdigit() else None
    return None


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
