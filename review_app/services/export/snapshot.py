"""The export's one snapshot of a study: every table comes from one read transaction.

REPEATABLE READ on PostgreSQL (a SQLite read transaction is a snapshot under WAL), so the labels, the
raw annotations and the statistics describe the same moment, recorded in the manifest as
``snapshot_utc``. The labels tables (one row per task) are streamed from the database into their files
while the snapshot is open, a chunk of tasks at a time, so a study of a million tasks is never all in
memory; tasks still pending (``PENDING_RULE``, see docs/methods.md) are left out unless the lead
includes them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Engine, exists, func, or_
from sqlmodel import Session, select

from review_app.analysis.layout import DEFAULT_COLUMNS as C
from review_app.analysis.reviewer_quality import QualityThresholds
from review_app.db.models import Annotation, GoldTask, Item, ModelResponse, Study, Task, utcnow
from review_app.rubrics import Rubric, get_rubric
from review_app.services.adjudication import latest_adjudications
from review_app.services.annotations import (
    TASK_TARGETS,
    adjudicator_labels,
    excluded_tasks,
    get_study_row,
    load_annotations,
)
from review_app.services.export import files as export_files
from review_app.services.export.files import ExportedFile, Progress, TableFile, exported_file, write_chunk
from review_app.services.export.labels import LabelsBuilder, labels_width
from review_app.services.export.tables import Table, iso_utc
from review_app.services.reviewer_monitoring import SETTINGS_KEY as QUALITY_SETTINGS
from review_app.services.study_analysis import (
    PENDING_RULE,
    first_model,
    is_pending,
    leave_out_pending,
    rated_counts,
)


@contextmanager
def snapshot_session(engine: Engine) -> Iterator[Session]:
    """A read-only session whose reads all see one moment of the database."""
    bind = engine
    if engine.dialect.name == "postgresql":
        bind = engine.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
    with Session(bind, expire_on_commit=False) as session:
        yield session


def tasks_query(study_id: int, rubric: Rubric, *, rated_only: bool = False):
    """The study's tasks of one rubric in pool order (gold tasks left out: they serve quality only),
    as the columns the labels table needs (no item or response bodies).

    ``rated_only``: only tasks with an annotation (or no planned rater), the ones that can be
    complete: an export that leaves the pending tasks out reads the rated tasks, not every task of
    the pool (in a large pool most tasks are not rated yet).
    """
    query = select(
        Task.id,
        Item.id,
        Item.external_id,
        Task.unit_key,
        Item.subset,
        Item.language,
        Item.content_type,
        Item.provenance,
        Task.target_raters,
    ).join(Item, Item.id == Task.item_id)
    if rubric.needs_response:
        query = query.add_columns(ModelResponse.model, ModelResponse.condition, ModelResponse.auto_label).outerjoin(
            ModelResponse, ModelResponse.id == Task.response_id
        )
    query = query.where(*study_tasks(study_id, rubric))
    if rated_only:
        query = query.where(or_(Task.target_raters <= 0, exists().where(Annotation.task_id == Task.id)))
    return query.order_by(Task.pool_rank, Task.id)


def study_tasks(study_id: int, rubric: Rubric) -> tuple:
    return (
        Task.study_id == study_id,
        Task.rubric == rubric.key,
        Task.id.not_in(select(GoldTask.task_id).where(GoldTask.study_id == study_id)),  # quality only
        Task.id.not_in(excluded_tasks(study_id)),  # a lead excluded them on the Flags page
    )


TASK_KEYS = (C.task, C.item, "external_id", "unit_key", C.subset, "language", C.content_type, C.provenance)


def task_chunks(session: Session, study_id: int, rubric: Rubric, *, rated_only: bool = False) -> Iterator[pd.DataFrame]:
    """The rows of :func:`tasks_query`, ``export_files.CHUNK_ROWS`` at a time, streamed from the database (a server-side
    cursor on PostgreSQL), so the study's tasks are never all in memory. Read through the session's
    connection as plain tuples, straight from the driver's cursor: the columns are plain integers and
    text, which SQLAlchemy's result rows and the ORM's row processing would return unchanged at a cost
    larger than the query's. A chunk is one block of Python objects, filled from the rows in one step
    (cheaper than a Series per column).
    """
    keys = [*TASK_KEYS, "target_raters"]
    if rubric.needs_response:
        keys = [*keys, C.model, "condition", C.auto_label]
    connection = session.connection()
    query = tasks_query(study_id, rubric, rated_only=rated_only)
    if connection.dialect.name == "sqlite":  # no server-side cursor: SQLAlchemy buffers no row ahead
        result = connection.execute(query)
        with result:
            yield from blocks(iter(lambda: result.cursor.fetchmany(export_files.CHUNK_ROWS), []), keys)
        return
    # PostgreSQL: a server-side cursor of the driver's own, in the snapshot's transaction (SQLAlchemy's
    # streamed results cost more, and its buffered cursor reads a row ahead)
    compiled = query.compile(dialect=connection.dialect, compile_kwargs={"render_postcompile": True})
    with connection.connection.driver_connection.cursor(name=f"medrev_export_{rubric.key.lower()}") as cursor:
        cursor.execute(str(compiled), compiled.params)
        yield from blocks(iter(lambda: cursor.fetchmany(export_files.CHUNK_ROWS), []), keys)


def blocks(batches: Iterator[Sequence[Sequence[Any]]], keys: list[str]) -> Iterator[pd.DataFrame]:
    for rows in batches:
        block = np.empty((len(rows), len(keys)), dtype=object)
        block[:] = rows
        yield pd.DataFrame(block, columns=keys, copy=False)


def task_stats(session: Session, study_id: int, rubric: Rubric) -> tuple[int, int, int]:
    """(tasks, highest target rater count, tasks planning a rater) of one rubric, as the labels table
    counts them, in one pass over the rubric's tasks."""
    n, most, planned = session.execute(
        select(
            func.count(),
            func.coalesce(func.max(Task.target_raters), 1),
            func.count().filter(Task.target_raters > 0),
        ).where(*study_tasks(study_id, rubric))
    ).one()
    return int(n), int(most), int(planned)


@dataclass(frozen=True, eq=False)
class Snapshot:
    study: Study
    frame: pd.DataFrame
    labels: list[Table]  # the first chunk of each labels table (its columns and types) with its row count
    files: list[ExportedFile]
    counts: dict[str, int]
    database: dict[str, Any]
    snapshot_utc: str
    first_model: str | None = None
    pending: dict[str, Any] | None = None
    analysis: Future[Any] | None = None  # the statistics of ``frame``, computed alongside the labels


def rated_tasks_of(frame: pd.DataFrame, targets: np.ndarray, rated: pd.Series) -> pd.DataFrame:
    """One row per task with annotations in force (the frame's tasks): its rubric, whether it planned a
    rater and whether it is pending (``PENDING_RULE``), from ``targets`` (each frame row's task's
    planned raters, read with the frame's rows)."""
    first = ~frame[C.task].duplicated().to_numpy()  # a task's rows share its rubric and planned raters
    ids = frame[C.task].to_numpy()[first]
    planned = targets[first]
    return pd.DataFrame(
        {
            C.task: ids,
            C.rubric: frame[C.rubric].to_numpy()[first],
            "planned": planned > 0,
            "pending": is_pending(ids, planned, rated),
        }
    )


def pending_among(
    session: Session,
    study_id: int,
    rubric_keys: list[str],
    planned: dict[str, int],
    rated_tasks: pd.DataFrame,
    among: set[int],
) -> tuple[dict[str, int], set[int]]:
    """Per rubric, how many tasks are pending (``PENDING_RULE``), and which of the tasks in ``among`` are.

    ``planned``: per rubric, the tasks planning a rater (``task_stats``). A task without any annotation
    is pending when it plans a rater, so the database counts those without returning them (most of a
    large pool): the tasks planning a rater less those of them with
    annotations. The tasks with annotations are the frame's (``rated_tasks``), compared as arrays.
    Adjudicated tasks without annotations (rare) are looked up by id.
    """
    counts: dict[str, int] = {}
    found = set(rated_tasks.loc[rated_tasks["pending"], C.task].tolist())
    unrated_wanted = sorted(among - set(rated_tasks[C.task].tolist()))
    for key in rubric_keys:
        mine = rated_tasks.loc[rated_tasks[C.rubric] == key]
        counts[key] = planned[key] - int(mine["planned"].sum()) + int(mine["pending"].sum())
        tasks = study_tasks(study_id, get_rubric(key))
        for part in range(0, len(unrated_wanted), 10_000):
            ids = unrated_wanted[part : part + 10_000]
            found.update(
                session.execute(select(Task.id).where(*tasks, Task.id.in_(ids), Task.target_raters > 0)).scalars()
            )
    return counts, found


def read_snapshot(
    engine: Engine,
    study_name: str,
    pseudonymise: bool,
    work: Path,
    formats: tuple[str, ...],
    progress: Progress,
    pending: str = "exclude",
    start_analysis: Callable[[pd.DataFrame, Study, str | None, QualityInputs], Future[Any]] | None = None,
) -> Snapshot:
    """Read the study in one snapshot, streaming its labels tables into ``work`` while the snapshot is open.

    With ``pending="exclude"`` the tasks still pending (``PENDING_RULE``) leave the annotations, the
    decisions and the labels tables. ``start_analysis`` is called with the final annotations frame
    before the labels are streamed, so the statistics can run meanwhile (see :func:`export_study`).
    """
    from review_app.db.migrate import current_revision

    with snapshot_session(engine) as session:
        snapshot_utc = iso_utc(utcnow())
        study = get_study_row(session, study_name)
        frame = load_annotations(session, study, pseudonymise=pseudonymise, read_only=True, task_targets=True)
        rated = rated_counts(frame)
        targets = frame.pop(TASK_TARGETS).to_numpy()
        rated_tasks = rated_tasks_of(frame, targets, rated)
        if pending == "exclude":
            # the frame's pending tasks are known now: the statistics start before the rest is read (the
            # Analysis page leaves the same tasks out with the same function)
            frame = leave_out_pending(frame, targets, rated)
        model = first_model(session, study.id)
        quality = quality_inputs(session, study, pseudonymise)
        analysis = start_analysis(frame, study, model, quality) if start_analysis is not None else None
        decisions = latest_adjudications(session, study.id)
        adjudicators = adjudicator_labels(session, study.id, pseudonymise=pseudonymise)
        n_excluded = len(set(session.exec(excluded_tasks(study.id)).all()))
        stats = {key: task_stats(session, study.id, get_rubric(key)) for key in study.rubric_keys}
        planned = {key: tasks_planning for key, (_n, _most, tasks_planning) in stats.items()}
        among = set(rated.index.tolist()) | set(decisions)
        pending_by_rubric, pending_ids = pending_among(
            session, study.id, study.rubric_keys, planned, rated_tasks, among
        )
        n_pending = sum(pending_by_rubric.values())
        leave_out = pending == "exclude" and n_pending > 0
        if leave_out:
            decisions = {t: d for t, d in decisions.items() if t not in pending_ids}
        stats = {key: (n - pending_by_rubric[key] if leave_out else n, most) for key, (n, most, _) in stats.items()}
        n_tasks = sum(n for n, _most in stats.values())
        progress(0.1, "Reading the study")
        labels: list[Table] = []
        files: list[ExportedFile] = []
        written = 0
        for key in study.rubric_keys:
            rubric = get_rubric(key)
            rows = frame.loc[frame[C.rubric] == key]
            builder = LabelsBuilder(key, rows, decisions, adjudicators, labels_width(rows, stats[key][1]))
            outputs = [TableFile(work, f"adjudicated_labels_{key}", fmt) for fmt in formats]
            first: Table | None = None
            for chunk in task_chunks(session, study.id, rubric, rated_only=leave_out):
                if leave_out:
                    ids, targets = chunk[C.task].to_numpy(np.int64), chunk["target_raters"].to_numpy(np.int64)
                    chunk = chunk.loc[~is_pending(ids, targets, rated)]
                written += len(chunk)
                table = builder.table(chunk, n_rows=stats[key][0])
                first = first or table
                write_chunk(outputs, table.frame)
                progress(0.1 + 0.9 * written / max(n_tasks, 1), f"Writing labels: {written:,} of {n_tasks:,} tasks")
            first = first or builder.table([], n_rows=0)
            for out in outputs:
                path = out.close(empty=first.frame.iloc[:0])
                files.append(exported_file(work, path, table=first.name, format=out.fmt, rows=out.rows))
            labels.append(first)
    return Snapshot(
        study=study,
        frame=frame,
        labels=labels,
        files=files,
        counts={
            "tasks": n_tasks,
            "annotations_in_force": len(frame),
            "raters_with_annotations": int(frame[C.rater].nunique()),
            "adjudicated_tasks": len(decisions),
            "pending_tasks": n_pending,
            "excluded_tasks": n_excluded,
        },
        database={
            "backend": engine.dialect.name,
            "driver": engine.dialect.driver,
            "schema_revision": current_revision(engine),
        },
        snapshot_utc=snapshot_utc,
        first_model=model,
        pending={"tasks": n_pending, "excluded": pending == "exclude", "rule": PENDING_RULE},
        analysis=analysis,
    )


@dataclass(frozen=True, eq=False)
class QualityInputs:
    """What the reviewer-quality table needs besides the export's frame, read in the export's snapshot:
    the gold tasks' annotations (in no file of the export), their expected scores and the study's
    alert thresholds."""

    gold: pd.DataFrame
    expected: dict[int, dict[str, Any]]
    thresholds: QualityThresholds


def quality_inputs(session: Session, study: Study, pseudonymise: bool) -> QualityInputs:
    gold = load_annotations(session, study, pseudonymise=pseudonymise, gold="only")
    expected = {
        int(g.task_id): dict(g.expected_scores)
        for g in session.exec(select(GoldTask).where(GoldTask.study_id == study.id))
    }
    return QualityInputs(gold, expected, QualityThresholds.from_dict(study.settings.get(QUALITY_SETTINGS)))
