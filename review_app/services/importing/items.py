"""Import benchmark items in the released MedMisBench format (a file or a folder of subset files).

The format's own reader (``load_medmisbench``) checks each row as ``bench run`` does; an item is keyed
by (subset, id) and stored with its Type 1 target and content hash, so a changed item under a known id
is refused rather than silently replacing what reviewers scored.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any, Unpack

from sqlalchemy import Engine
from sqlmodel import Session

from bench_core.kernel.errors import DatasetError, RowIssue
from bench_core.medmisbench import DEFAULT_SEED, MCQItem, draw_type1_target, load_medmisbench
from review_app.db.models import Item
from review_app.services.actors import Actor
from review_app.services.importing.common import (
    Body,
    Importer,
    ImportOptions,
    ImportRefused,
    ImportSummary,
    admit,
    content_hash,
    existing_hashes,
    importer,
    read_rows,
    refuse_faults,
    run_import,
    write_batch,
)

# item column -> the file's column, for the messages about values the database cannot store
ITEM_FIELDS = {"external_id": "id", "gold_label": "answer", "content_type": "injection_content"}
ITEM_FIELDS |= {"provenance": "injection_provenance", "target_label": "type1_target", "injections": "inject"}


def item_row(item: MCQItem, *, target_seed: int = DEFAULT_SEED, target: str | None = None) -> dict[str, Any]:
    """The ``item`` table row for a benchmark item, with its Type 1 target and content hash.

    The target is ``target`` when given (a bench run's stored target), else drawn from ``target_seed``.
    """
    row: dict[str, Any] = {
        "subset": item.subset,
        "external_id": item.id,
        "kind": "mcq",
        "language": item.language,
        "question": item.question,
        "options": [[label, text] for label, text in item.options.items()],
        "gold_label": item.gold,
        "content_type": item.content_type,
        "provenance": item.provenance,
        "injections": dict(item.injection.sentences) if item.injection else None,
        "target_label": target if target is not None else draw_type1_target(item, target_seed),
        "payload": {
            k: v
            for k, v in {
                "generator_model": item.injection.generator_model if item.injection else None,
                "prompt_version": item.injection.prompt_version if item.injection else None,
                "unusable_bundle": item.usable_bundle_problem(),
            }.items()
            if v is not None
        },
    }
    row["content_hash"] = content_hash(row)
    return row


def import_items(
    engine: Engine, path: str | Path, *, target_seed: int = DEFAULT_SEED, **options: Unpack[ImportOptions]
) -> ImportSummary:
    """Import items in the released MedMisBench format (a file or a folder of subset files).

    With ``dry_run`` everything is validated and counted in a transaction that is rolled back;
    with ``skip_bad_rows`` the good rows are imported and the bad ones reported in the summary.
    """
    (summary,) = run_import(engine, partial(plan_items, target_seed=target_seed), path, ("item",), **options)
    return summary


def plan_items(path: Path, actor: Actor, via: str, skip: bool, *, target_seed: int = DEFAULT_SEED) -> Body:
    rows, issues = prepare_items(path, target_seed=target_seed)

    def body(session: Session) -> list[ImportSummary]:
        who = importer(session, actor, via)
        new, kept, skipped = write_items(session, rows, path, who=who, issues=issues, skip=skip)
        return [ImportSummary("items", str(path), kept, new, kept - new, skipped=skipped)]

    return body


def prepare_items(
    path: Path, *, target_seed: int = DEFAULT_SEED
) -> tuple[list[tuple[MCQItem | None, dict[str, Any]]], list[RowIssue]]:
    """The item rows of a file (checked against the database's limits) and its bad rows; file faults refuse.

    Rows are checked by the format's own reader (``load_medmisbench``: cells, labels and items, the same checks
    as ``bench run``); ``read_rows`` only finds the faults of the file itself.
    """
    read = read_rows(path, columns=())
    refuse_faults(read)
    try:
        report = load_medmisbench(path, strict=False)
    except DatasetError as exc:
        raise ImportRefused(exc.issues) from exc
    issues = list(read.issues)
    bad = {(Path(i.file).name, i.line) for i in issues}
    issues += [i for i in report.issues if (Path(i.file).name, i.line) not in bad]
    rows: list[tuple[MCQItem | None, dict[str, Any]]] = []
    for item in report.items:
        if (item.source_file, item.source_line) in bad:
            continue
        row = item_row(item, target_seed=target_seed)
        where = str(path / item.source_file) if path.is_dir() and item.source_file else str(path)
        if admit(row, Item, where, item.source_line, ITEM_FIELDS, issues):
            rows.append((item, row))
    return rows, issues


def write_items(
    session: Session,
    rows: list[tuple[MCQItem | None, dict[str, Any]]],
    path: Path,
    *,
    who: Importer,
    issues: list[RowIssue] | None = None,
    skip: bool = False,
) -> tuple[int, int, tuple[RowIssue, ...]]:
    """Insert the new items (refusing changed ones) in the caller's transaction.

    Returns (new items, rows kept, rows skipped); without ``skip`` any issue refuses the file.
    """
    issues = list(issues or [])
    existing = existing_hashes(
        session, Item, (Item.subset, Item.external_id), [(r["subset"], r["external_id"]) for _i, r in rows]
    )
    new_rows: list[dict[str, Any]] = []
    kept = 0
    for item, row in rows:
        found = existing.get((row["subset"], row["external_id"]))
        if found is None:
            new_rows.append(row)
        elif found != row["content_hash"]:
            where = str(path / item.source_file) if item and item.source_file and path.is_dir() else str(path)
            issues.append(
                RowIssue(
                    where,
                    item.source_line if item else None,
                    "id",
                    f"item {row['external_id']!r} ({row['subset']}) is already in the database with different "
                    "content (question, options, bundle or Type 1 target); give the changed item a new id",
                )
            )
            continue
        kept += 1
    new = len(new_rows)
    skipped = write_batch(
        session, "items", path, who=who, issues=issues, skip=skip, kept=kept, new=new, model=Item, new_rows=new_rows
    )
    return new, kept, skipped
