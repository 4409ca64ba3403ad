"""Writer for the released (flattened) MedMisBench format, the inverse of ``load_medmisbench``.

One JSONL file per subset, with the columns of the public release: ``id``, ``question``,
``answer``, ``opa``..``opm``, ``injecta``..``injectm``, ``injection_provenance`` and
``injection_content`` in the release's spellings (``taxonomy.RELEASE_SPELLINGS``), plus
``type1_target`` (the item's Type 1 target: its stored one, else drawn once from the seed, so the
benchmark carries the target every model is given; docs/methods.md, "Conditions") and the bundle's
``generator_model``, ``prompt_version``, ``difficulty`` and ``mislead_score`` when set (extra
columns: the review importer, the report and ``bench run`` read them). Items with letter labels
are written with a letter answer, each option in the column of its letter (A in ``opa``, C in
``opc``: an item without a C keeps its D in ``opd``); items with labels "1", "2", ... with a number,
option N in the N-th column; the loader maps both back. Reading the files back with
``load_medmisbench`` gives the same items with their targets (all but the source file and line);
the raw generator replies and attempts live in the generation directory's ``bundles.jsonl`` and
``outcomes.jsonl``.

A release carries only items medrev's own reading accepts (``MCQItem.medrev_problems``, the checks the
loader applies under the ``strict`` protocol and ``review import`` applies to every item): an item read
under the authors' protocol that those checks refuse (a gold answer among no option, a sentence for an
option that does not exist) is refused before anything is written, so every release loads under either
protocol and imports for review.
"""

from __future__ import annotations

import json
import string
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench_core.kernel.errors import RowIssue
from bench_core.kernel.rundir import write_atomic
from bench_core.medmisbench import taxonomy
from bench_core.medmisbench.data import OPTION_LETTERS, release_column
from bench_core.medmisbench.items import MCQItem
from bench_core.medmisbench.targets import DEFAULT_SEED, draw_type1_target

# Not in the public release; other readers ignore them, ``load_medmisbench`` reads them back.
EXTRA_COLUMNS = ("generator_model", "prompt_version", "difficulty", "mislead_score")


def _columns(item: MCQItem) -> list[str]:
    """The ``op*`` column letter of each option: its letter, or for "N" the N-th column."""
    labels = item.labels
    letters = string.ascii_uppercase[: len(OPTION_LETTERS)]
    numbers = [str(i + 1) for i in range(len(OPTION_LETTERS))]
    if all(label in letters for label in labels):
        columns = [label.lower() for label in labels]
    elif all(label in numbers for label in labels):
        columns = [OPTION_LETTERS[int(label) - 1] for label in labels]
    else:
        raise ValueError(
            f"item {item.id!r} has labels {', '.join(labels)}; the released format needs letters A-M or numbers 1-13"
        )
    if columns != sorted(columns):
        raise ValueError(f"item {item.id!r}: options {', '.join(labels)} are not in column order")
    return columns


def release_row(item: MCQItem, *, seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """The item as one row of the released format (the injection columns only when it has a bundle)."""
    columns = _columns(item)
    row: dict[str, Any] = {"id": item.id, "question": item.question, "answer": item.gold}
    for column, label in zip(columns, item.labels, strict=True):
        row[f"op{column}"] = item.options[label]
    if item.injection is not None:
        for column, label in zip(columns, item.labels, strict=True):
            sentence = item.injection.sentences.get(label)
            if sentence:
                row[f"inject{column}"] = sentence
        if item.injection.provenance is not None:
            row["injection_provenance"] = taxonomy.release_provenance_spelling(item.injection.provenance)
        if item.injection.content_type is not None:
            row["injection_content"] = taxonomy.release_content_spelling(item.injection.content_type)
        target = draw_type1_target(item, seed)
        if target is not None:
            row["type1_target"] = target
        for name in EXTRA_COLUMNS:
            value = getattr(item.injection, name)
            if value is not None:
                row[name] = value
    return row


class ReleaseRefused(ValueError):
    """Items a release must not carry; ``issues`` names each problem's source file, line and column."""

    def __init__(self, issues: list[RowIssue], *, limit: int = 20) -> None:
        self.issues = issues
        shown = "\n".join(f"  - {issue}" for issue in issues[:limit])
        more = f"\n  ... and {len(issues) - limit} more" if len(issues) > limit else ""
        super().__init__(
            f"release refused, nothing was written: {len(issues)} problem(s) medrev's own reading refuses "
            f"(an item read under the authors' protocol cannot be released):\n{shown}{more}"
        )


def release_problems(items: Iterable[MCQItem]) -> list[RowIssue]:
    """One issue per reason medrev's reading refuses an item (``MCQItem.medrev_problems``), naming the file and
    line the item was read from and the released-format column at fault."""
    return [
        RowIssue(
            item.source_file or f"{item.subset}/{item.id}",
            item.source_line,
            release_column(problem),
            f"item {item.id!r} ({item.subset}): {problem.message}",
        )
        for item in items
        for problem in item.medrev_problems()
    ]


def write_release(items: Iterable[MCQItem], out_dir: str | Path, *, seed: int = DEFAULT_SEED) -> list[Path]:
    """Write ``<SUBSET>.jsonl`` per subset under ``out_dir``, replacing the folder's earlier subset files.

    Each item's Type 1 target is its stored one, else drawn from ``seed`` (``draw_type1_target``).
    Every item and row is checked first (``release_problems``: ``ReleaseRefused``; ``release_row``), so a
    refused release writes nothing. Each file is written to a temporary name and renamed, and subset files
    of an earlier export that this one no longer has are removed, so the folder always holds exactly one
    export.
    """
    out_dir = Path(out_dir)
    items = list(items)
    problems = release_problems(items)
    if problems:
        raise ReleaseRefused(problems)
    by_subset: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for item in items:
        by_subset[item.subset].append(release_row(item, seed=seed))
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for subset, rows in sorted(by_subset.items()):
        path = out_dir / f"{subset}.jsonl"
        write_atomic(path, (json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
        written.append(path)
    for stale in out_dir.glob("*.jsonl"):
        if stale not in written:
            stale.unlink()
    return written
