"""The annotations in force of a study, as the analysis package's long layout.

One function, :func:`annotations_frame`, turns the database into the table every number is
computed from: the agreement dashboard, the disagreement queue, the analysis page and the export
all read it, so what a lead sees on screen and what a paper reports cannot drift apart.

Rules, made once here:

* **In force** means the highest revision of each assignment. A withdrawn assignment's submitted
  work counts (a reviewer who leaves keeps their submitted annotations); an assignment that was
  never submitted has no annotation and no row.
* **Pseudonyms** R01, R02, ... are numbered in the order reviewers first received work in the
  study (their first assignment), so a reviewer keeps their pseudonym when others join later and
  every page and export of the study uses the same one. Adjudicators get L01, L02, ... in the order
  of their first adjudication in the study. ``pseudonymise=False`` gives usernames instead.
  Nothing else about a reviewer (display name, email, profile) is ever put in the frame.
* **Gold tasks** (``gold_task``: tasks with known expected scores, used to measure reviewers) are
  left out by default, so agreement, analyses, the disagreement queue and exports never include
  them; the lead's reviewer-quality page asks for them with ``gold="only"``.
* **Excluded tasks** (a lead answered a reviewer's flag by excluding the task, ``task_flag``
  status ``excluded``) are left out always: they leave the study's agreement, analyses, queue and
  exports, as the lead decided (:func:`excluded_tasks`).
* **Scores** are one float column per rubric dimension (0/1/2, or -1/0/1 for the judge label),
  NaN where the row's rubric lacks the dimension; **flags** are joined with ``;``.

The frame's columns are docs/data-formats.md's ``raw_annotations``; the fast reads and column-wise
conversions it is built with are :mod:`review_app.services.annotation_columns`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypedDict, Unpack

import numpy as np
import pandas as pd
from sqlalchemy import BigInteger, Engine, String, and_, case, cast, exists, extract, func, type_coerce
from sqlmodel import Session, select

from review_app.analysis.layout import DEFAULT_COLUMNS
from review_app.db.engine import read_session, snapshot_session
from review_app.db.models import (
    Adjudication,
    Annotation,
    AnnotationScore,
    Assignment,
    GoldTask,
    Item,
    ModelResponse,
    Reviewer,
    Study,
    Task,
    TaskFlag,
)
from review_app.rubrics import get_rubric
from review_app.services.annotation_columns import (
    SCORE_BITS,
    context_column,
    copies,
    dimension_groups,
    driver_rows,
    fixed_snapshot,
    fresh,
    mapped,
    objects,
    score_array,
    score_rows,
    study_score_rows,
    timestamps,
    unpack_scores,
)
from review_app.services.errors import InvalidInput, NotFound

C = DEFAULT_COLUMNS
LEADING_COLUMNS: tuple[str, ...] = (C.task, C.item, C.rubric, C.rater, C.slot)
CONTEXT_COLUMNS: tuple[str, ...] = (C.flags, C.subset, C.content_type, C.provenance, C.model, C.auto_label)
EXTRA_COLUMNS: tuple[str, ...] = (
    "annotation_id",
    "revision",
    "seconds_on_task",
    "submitted_at",
    "language",
    "condition",
    "comment",
    "flagged",
    "assignment_status",
    "external_id",
    "unit_key",
)
FLAG_SEPARATOR = ";"
GOLD_CHOICES = ("exclude", "only", "include")
# The columns of _fetch's rows, in order; "context" holds the _CONTEXT columns as one JSON array.
_ROW = (
    "id",
    "task",
    "item",
    "reviewer",
    "slot",
    "revision",
    "seconds",
    "created",
    "comment",
    "flagged",
    "external_id",
    "unit_key",
    "context",
)
# Whole-number columns a caller may ask for after the frame's own (``load_annotations``)
TASK_TARGETS = "task_target_raters"
_EXTRA_FIELDS = {TASK_TARGETS: Task.target_raters}
# Text columns with few distinct combinations per study (180 at panel scale), read as one JSON array per
# row (:func:`~annotation_columns.context_column`) and decoded once per distinct array: ten Python strings per row cost
# more to make and to factorise than the database takes to join them.
_CONTEXT = (
    "rubric",
    "flags",
    "subset",
    "content_type",
    "provenance",
    "model",
    "auto_label",
    "language",
    "condition",
    "status",
)


def excluded_tasks(study_id: int):
    """Ids of the study's tasks a lead excluded on the Flags page, as a subquery (to count them, or for
    ``not_in`` in the export's scans of a rubric's tasks: there SQLite's list subquery beat an EXISTS
    probe per task, 10.0 against 10.4 s for the full-scale export; the annotations read uses
    :func:`is_excluded`)."""
    return select(TaskFlag.task_id).where(TaskFlag.study_id == study_id, TaskFlag.status == "excluded")


def is_excluded(task_id, study_id: int):
    """Whether the task in ``task_id`` (a column) was excluded by a lead on the Flags page, as an EXISTS.

    Filter with ``~is_excluded(...)``, not ``NOT IN``: PostgreSQL estimates a ``NOT IN`` subquery to
    keep half the rows, which sent a 200,000-row read through nested loops planned for a few hundred
    (1.2 s; 0.7-0.9 s as an anti-join).
    """
    return exists().where(TaskFlag.task_id == task_id, TaskFlag.study_id == study_id, TaskFlag.status == "excluded")


def is_gold(task_id, study_id: int):
    """Whether the task in ``task_id`` (a column) is a gold task of the study, as an EXISTS (:func:`is_excluded`)."""
    return exists().where(GoldTask.task_id == task_id, GoldTask.study_id == study_id)


def pseudonym(prefix: str, number: int, total: int) -> str:
    """``R01`` ... ``R99``, widening to ``R001`` when a study has 100 or more people."""
    return f"{prefix}{number:0{max(2, len(str(total)))}d}"


def get_study_row(session: Session, study_name: str) -> Study:
    study = session.exec(select(Study).where(Study.name == study_name)).first()
    if study is None:
        raise NotFound(f"no study named {study_name!r}")
    return study


def rater_labels(session: Session, study_id: int, *, pseudonymise: bool = True) -> dict[int, str]:
    """Reviewer id -> pseudonym (or username) for everyone who ever had work in the study.

    Each reviewer account's first assignment in the study is one probe of ``ix_assignment_first``
    (migration 0008; none: the reviewer never had work here), instead of grouping every assignment
    of the study (0.7 s at 1,250,000 assignments, on every lead page's first load). Accounts are
    few (hundreds), and asking each of them, rather than the counters of ``assignment_tally``,
    keeps the labels exact whatever wrote the assignments: a frame row whose reviewer had no label
    would fail the page.
    """
    first = (
        select(func.min(Assignment.id))
        .where(Assignment.study_id == study_id, Assignment.reviewer_id == Reviewer.id)
        .scalar_subquery()
    )
    rows = session.exec(select(Reviewer.id, first, Reviewer.username)).all()
    ordered = sorted((r for r in rows if r[1] is not None), key=lambda r: (r[1], r[0]))
    if not pseudonymise:
        return {r[0]: r[2] for r in ordered}
    return {r[0]: pseudonym("R", n, len(ordered)) for n, r in enumerate(ordered, start=1)}


def adjudicator_labels(session: Session, study_id: int, *, pseudonymise: bool = True) -> dict[int, str]:
    """Adjudicator id -> pseudonym (L01, ...) or username, in the order of first adjudication."""
    rows = session.exec(
        select(Adjudication.adjudicator_id, func.min(Adjudication.id), Reviewer.username)
        .join(Task, Task.id == Adjudication.task_id)
        .join(Reviewer, Reviewer.id == Adjudication.adjudicator_id)
        .where(Task.study_id == study_id)
        .group_by(Adjudication.adjudicator_id, Reviewer.username)
    ).all()
    ordered = sorted(rows, key=lambda r: (r[1], r[0]))
    if not pseudonymise:
        return {r[0]: r[2] for r in ordered}
    return {r[0]: pseudonym("L", n, len(ordered)) for n, r in enumerate(ordered, start=1)}


def rater_names(engine: Engine, study_name: str, *, pseudonymise: bool = True) -> dict[int, str]:
    """Reviewer id -> the name pages show for them in this study (pseudonym by default)."""
    with read_session(engine) as session:
        study = get_study_row(session, study_name)
        return rater_labels(session, study.id, pseudonymise=pseudonymise)


def study_rubrics(study: Study, rubric: str | None) -> list[str]:
    """The study's rubric keys, or ``[rubric]`` after checking the study uses it."""
    keys = study.rubric_keys
    if rubric is None:
        return keys
    if rubric not in keys:
        raise InvalidInput(f"study {study.name!r} uses rubric(s) {', '.join(keys)}; it has no rubric {rubric!r}")
    return [rubric]


def dimension_columns(rubric_keys: Iterable[str]) -> list[str]:
    """Score columns for these rubrics, in rubric then dimension order, without repeats."""
    return list(dict.fromkeys(key for r in rubric_keys for key in get_rubric(r).dimension_keys))


def frame_columns(rubric_keys: Iterable[str]) -> list[str]:
    """Every column of :func:`annotations_frame` for these rubrics, in order."""
    return [*LEADING_COLUMNS, *dimension_columns(rubric_keys), *CONTEXT_COLUMNS, *EXTRA_COLUMNS]


class AnnotationQuery(TypedDict, total=False):
    """Which annotations of a study to read and how to name their raters (defaults in :func:`_fetch`).

    ``rubric``: one of the study's rubrics (all when None); ``pseudonymise``: R01, R02, ... rather than
    usernames; ``task_ids``: these tasks only; ``gold``: ``exclude``, ``only`` or ``include`` the gold tasks;
    ``labels`` and ``read_only``: see :func:`load_annotations`.
    """

    rubric: str | None
    pseudonymise: bool
    task_ids: Iterable[int] | None
    gold: str
    labels: dict[int, str] | None
    read_only: bool


def load_annotations(
    session: Session, study: Study, *, task_targets: bool = False, **query: Unpack[AnnotationQuery]
) -> pd.DataFrame:
    """:func:`annotations_frame` inside the caller's session (one snapshot with other reads).

    ``labels``: the study's :func:`rater_labels` (as ``pseudonymise`` asks) when the caller has
    them cached; reading them groups every assignment of the study. ``read_only``: the session has
    written nothing, so a whole study's scores can be read on a second connection meanwhile
    (:func:`~annotation_columns.study_score_rows`; it would not see the session's own writes), when the session's
    reads see one snapshot (:func:`~annotation_columns.fixed_snapshot`). ``task_targets``: the frame ends with one more
    column, ``TASK_TARGETS`` (each row's task's planned raters), read with the rows: an export tells
    pending tasks from it without reading the study's tasks a second time.
    """
    extra = (TASK_TARGETS,) if task_targets else ()
    return _frame(*_fetch(session, study, extra=extra, **query), extra=extra)


def _fetch(
    session: Session,
    study: Study,
    *,
    rubric: str | None = None,
    pseudonymise: bool = True,
    task_ids: Iterable[int] | None = None,
    gold: str = "exclude",
    labels: dict[int, str] | None = None,
    read_only: bool = False,
    extra: tuple[str, ...] = (),
) -> tuple[list, np.ndarray, dict[int, str], list[str]]:
    """The rows and packed scores (int64 array) :func:`_frame` turns into the frame (database work only);
    ``extra`` names the ``_EXTRA_FIELDS`` each row ends with."""
    if gold not in GOLD_CHOICES:
        raise InvalidInput(f"gold must be one of {', '.join(GOLD_CHOICES)} (got {gold!r})")
    rubrics = study_rubrics(study, rubric)
    wanted_tasks = sorted(set(task_ids)) if task_ids is not None else None
    latest = (
        select(Annotation.assignment_id, func.max(Annotation.revision).label("revision"))
        .join(Assignment, Assignment.id == Annotation.assignment_id)
        .where(Assignment.study_id == study.id, Annotation.rubric.in_(rubrics))
        .group_by(Annotation.assignment_id)
    )
    names = labels if labels is not None else rater_labels(session, study.id, pseudonymise=pseudonymise)
    if wanted_tasks is not None:
        # A few tasks (the adjudication view, on every rerun): the in-force revisions of those tasks
        # only, not of the whole study (a scan of 200,000 annotations at 500,000 items).
        latest = latest.where(Annotation.task_id.in_(wanted_tasks))
    latest = latest.subquery()
    # PostgreSQL's timestamps as whole microseconds since the epoch (an integer per row, where a
    # timezone-aware datetime per row cost 0.4 s of conversion at 200,000 annotations), built from whole
    # seconds and microseconds apart so that it is exact whatever EXTRACT returns (numeric since
    # PostgreSQL 14, double precision before); SQLite's ISO text
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        seconds = cast(extract("epoch", func.date_trunc("second", Annotation.created_at)), BigInteger)
        micros = cast(extract("microseconds", Annotation.created_at), BigInteger) % 1_000_000
        created = seconds * 1_000_000 + micros
    else:
        created = type_coerce(Annotation.created_at, String)
    in_force = and_(latest.c.assignment_id == Annotation.assignment_id, latest.c.revision == Annotation.revision)
    query = (
        select(
            Annotation.id,
            Annotation.task_id,
            Task.item_id,
            Annotation.reviewer_id,
            Assignment.slot,
            Annotation.revision,
            Annotation.seconds_on_task,
            created,
            Annotation.comment,
            Assignment.flagged,
            Item.external_id,
            Task.unit_key,
            context_column(
                dialect,
                Annotation.rubric,
                # JSON as text: _frame converts each distinct value instead of a type processor per cell
                cast(Annotation.flags, String),
                Item.subset,
                Item.content_type,
                Item.provenance,
                ModelResponse.model,
                ModelResponse.auto_label,
                Item.language,
                ModelResponse.condition,
                Assignment.status,
            ),
            *(_EXTRA_FIELDS[name] for name in extra),
        )
        .join(latest, in_force)
        .join(Assignment, Assignment.id == Annotation.assignment_id)
        .join(Task, Task.id == Annotation.task_id)
        .join(Item, Item.id == Task.item_id)
        .outerjoin(ModelResponse, ModelResponse.id == Task.response_id)
    )  # no ORDER BY: _frame sorts the rows' ids (SQLite's sort of 200,000 whole rows took longer)
    query = query.where(~is_excluded(Annotation.task_id, study.id))
    if gold != "include":
        gold_task = is_gold(Annotation.task_id, study.id)
        query = query.where(gold_task if gold == "only" else ~gold_task)
    if wanted_tasks is not None:
        query = query.where(Annotation.task_id.in_(wanted_tasks))
    connection = session.connection()
    dimensions = dimension_columns(rubrics)
    packed = [
        func.sum(
            (AnnotationScore.value + 2)
            * case({key: 1 << (SCORE_BITS * j) for j, key in enumerate(group)}, value=AnnotationScore.dimension)
        )
        for group in dimension_groups(dimensions)
    ]
    if read_only and wanted_tasks is None and packed and fixed_snapshot(connection, study.id):
        engine = session.get_bind()
        # The whole study: its scores are read on a second connection while this one reads the rows
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="medrev-scores") as reader:
            study_scores = reader.submit(study_score_rows, engine, packed, study.id, rubrics)
            rows = driver_rows(connection, query)  # should it fail, leaving the block waits for the reader
            scores = study_scores.result()
        return rows, scores, names, rubrics
    rows = driver_rows(connection, query)
    scores = score_array(score_rows(connection, packed, [r[0] for r in rows]) if packed and rows else [])
    return rows, scores, names, rubrics


def _frame(rows, scores, names: dict[int, str], rubrics: list[str], *, extra: tuple[str, ...] = ()) -> pd.DataFrame:
    """The frame from :func:`_fetch`'s rows and packed scores, built column by column.

    At panel scale (200,000 annotations) a dict per row and a Python loop over a million scores
    took most of a lead page's first load; here each column is converted as a whole: text columns
    are factorised (one conversion and one copy per distinct value), timestamps are parsed per
    column, and the score matrix is unpacked and placed with index arrays (``np.searchsorted`` on
    the sorted annotation ids).
    """
    dimensions = dimension_columns(rubrics)
    columns = frame_columns(rubrics)
    n = len(rows)
    # one 2-d object array, then a view per column (a tenth of the time zip(*rows) takes)
    table = np.array(rows, dtype=object).reshape(n, len(_ROW) + len(extra))
    # rows in frame order: by task, then rater slot, then annotation id
    keys = [table[:, _ROW.index(name)].astype(np.int64) for name in ("id", "slot", "task")]
    order = np.lexsort(keys)
    table = table[order]
    raw = {name: table[:, j] for j, name in enumerate(_ROW)}
    ids = keys[0][order]
    context = _context(raw["context"])
    data: dict[str, object] = {
        C.task: keys[2][order],
        C.item: raw["item"].astype(np.int64),
        C.rubric: context["rubric"],
        C.rater: mapped(raw["reviewer"].astype(np.int64), names.__getitem__),
        C.slot: keys[1][order],
    }
    values = np.full((n, len(dimensions)), np.nan)
    if n and len(scores) and dimensions:
        packed = scores
        wanted = packed[:, 0]
        by_id = np.argsort(ids, kind="stable")
        sorted_ids = ids[by_id]
        # the score rows may hold other annotations (an id range, or the whole study): keep the frame's
        at = np.minimum(np.searchsorted(sorted_ids, wanted), n - 1)
        found = sorted_ids[at] == wanted
        values[by_id[at[found]]] = unpack_scores(packed[found, 1:], len(dimensions))
    for j, key in enumerate(dimensions):
        data[key] = values[:, j]
    data |= {
        C.flags: context["flags"],
        C.subset: context["subset"],
        C.content_type: context["content_type"],
        C.provenance: context["provenance"],
        C.model: context["model"],
        C.auto_label: context["auto_label"],
        "annotation_id": ids,
        "revision": raw["revision"].astype(np.int64),
        "seconds_on_task": raw["seconds"].astype(float),
        "submitted_at": timestamps(raw["created"]),
        "language": context["language"],
        "condition": context["condition"],
        "comment": objects(raw["comment"]),
        "flagged": raw["flagged"].astype(bool),
        "assignment_status": context["status"],
        "external_id": copies(raw["external_id"]),
        "unit_key": copies(raw["unit_key"]),
    }
    data |= {name: table[:, len(_ROW) + j].astype(np.int64) for j, name in enumerate(extra)}
    return pd.DataFrame({column: data[column] for column in [*columns, *extra]})


def _context(arrays: np.ndarray) -> dict[str, np.ndarray]:
    """The ``_CONTEXT`` columns from their JSON arrays (:func:`~annotation_columns.context_column`), each distinct array
    decoded once; as :func:`~annotation_columns.objects` makes them (flags sorted and joined, :func:`_flags`)."""
    codes, distinct = pd.factorize(arrays)
    decoded = [json.loads(text) for text in distinct]
    columns = {}
    for j, name in enumerate(_CONTEXT):
        values = np.empty(len(decoded), dtype=object)
        values[:] = [row[j] for row in decoded]
        columns[name] = mapped(values, _flags if name == "flags" else fresh)[codes]
    return columns


def _flags(raw: str | None) -> str:
    """A reviewer's flags (JSON text; almost always ``[]``), sorted and joined."""
    if not raw or raw == "[]":
        return ""
    return FLAG_SEPARATOR.join(sorted(json.loads(raw) or []))


def annotations_frame(
    engine: Engine, study_name: str, *, rubric: str | None = None, pseudonymise: bool = True, gold: str = "exclude"
) -> pd.DataFrame:
    """One row per annotation in force in the study, in the analysis package's long layout.

    Columns (in order): ``task_id, item_id, rubric, rater, slot``, one float column per dimension
    of the selected rubric(s) (all of the study's rubrics when ``rubric`` is None), ``flags,
    subset, content_type, provenance, model, auto_label``, then ``annotation_id, revision,
    seconds_on_task, submitted_at`` (UTC), ``language, condition, comment, flagged`` (the reviewer
    flagged the task for the lead), ``assignment_status`` (``submitted``, or ``withdrawn`` for work
    kept from a reviewer who left), ``external_id`` (the item's id in its benchmark file) and
    ``unit_key``. Rows are ordered by task, then rater slot. Gold tasks are left out unless
    ``gold`` is ``"only"`` or ``"include"``.

    The rows are read in one short read transaction (one snapshot, also on PostgreSQL); the frame is
    built after it has ended, so a large study's frame never keeps a transaction open (lead pages
    run while reviewers submit).
    """
    with snapshot_session(engine) as session:
        study = get_study_row(session, study_name)
        fetched = _fetch(session, study, rubric=rubric, pseudonymise=pseudonymise, gold=gold, read_only=True)
    return _frame(*fetched)
