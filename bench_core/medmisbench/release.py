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
"""

from __future__ import annotations

import json
import os
import string
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench_core.medmisbench import taxonomy
from bench_core.medmisbench.data import OPTION_LETTERS
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


def write_release(items: Iterable[MCQItem], out_dir: str | Path, *, seed: int = DEFAULT_SEED) -> list[Path]:
    """Write ``<SUBSET>.jsonl`` per subset under ``out_dir``, replacing the folder's earlier subset files.

    Each item's Type 1 target is its stored one, else drawn from ``seed`` (``draw_type1_target``).
    Each file is written to a temporary name and renamed, and subset files of an earlier export
    that this one no longer has are removed, so the folder always holds exactly one export.
    """
    out_dir = Path(out_dir)
    by_subset: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for item in items:
        by_subset[item.subset].append(release_row(item, seed=seed))
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for subset, rows in sorted(by_subset.items()):
        path = out_dir / f"{subset}.jsonl"
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        written.append(path)
    for stale in out_dir.glob("*.jsonl"):
        if stale not in written:
            stale.unlink()
    return written
