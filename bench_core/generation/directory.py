"""The files of a generation directory: what is saved, and how each file is read back.

A generation directory holds ``source_items.jsonl`` (the items generated from), ``results.jsonl``
(the runner's store: every call with its raw reply), ``generation_runs.jsonl`` (one line per
invocation; never a key), ``source_report.json`` (each source loader's account of what it kept and
dropped), and the outputs ``bench_core.generation.pipeline.write_outputs`` rewrites after each run:
``outcomes.jsonl``, ``bundles.jsonl`` and ``benchmark/<SUBSET>.jsonl``. The report, the sensitivity
regeneration and the pipeline all read these files, so their names and readers live here, apart
from the pipeline's state machine.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench_core.generation.sources import SourceReport
from bench_core.kernel.rundir import RunFiles, append_jsonl, merge_or_refuse, read_jsonl, write_atomic
from bench_core.medmisbench.items import MCQItem
from bench_core.medmisbench.run import item_key

BENCHMARK = "medmisbench-generation"
SOURCE_ITEMS_FILE = "source_items.jsonl"
MANIFEST_FILE = "generation_runs.jsonl"
OUTCOMES_FILE = "outcomes.jsonl"
BUNDLES_FILE = "bundles.jsonl"
SOURCE_REPORT_FILE = "source_report.json"
BENCHMARK_DIR = "benchmark"


class GenerationDirError(ValueError):
    """A generation directory that cannot be used as asked (another generator, other items)."""


FILES = RunFiles(BENCHMARK, SOURCE_ITEMS_FILE, "generation", GenerationDirError, manifest_file=MANIFEST_FILE)
is_generation_dir = FILES.is_run_dir
read_manifests = FILES.manifests
# Callers pass the names of env vars, never their values.
append_manifest = FILES.append_manifest


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
