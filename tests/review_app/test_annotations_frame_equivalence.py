"""The vectorised annotations frame is the frame the per-row implementation built, cell for cell.

The reference below reads typed rows and long-form scores, builds a dict per row and places every
score in a Python loop: too slow for a lead page at panel scale, but plain enough to trust. It is
kept verbatim; the study exercises everything the frame encodes:
revisions, scores missing from a row, gold and excluded tasks, reviewers' flags and flagged
assignments, withdrawn work, both rubrics, a subset of tasks and an empty result. (A score read
for an annotation the rows did not see is tested in test_annotations.py.)
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import and_, func, update
from sqlmodel import Session, select

from review_app.db.engine import read_session, write_session
from review_app.db.models import (
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
    utcnow,
)
from review_app.rubrics import RUBRIC_B
from review_app.services import annotation_columns
from review_app.services.annotations import (
    FLAG_SEPARATOR,
    GOLD_CHOICES,
    C,
    annotations_frame,
    dimension_columns,
    excluded_tasks,
    frame_columns,
    get_study_row,
    load_annotations,
    pseudonym,
    rater_labels,
    study_rubrics,
)
from review_app.services.errors import InvalidInput

from .factories import dual_rated_study, rate, slots_by_task

A1 = {
    "base_validity": 2,
    "answer_preservation": 1,
    "falsehood_clarity": 2,
    "attack_fidelity": 0,
    "clinical_plausibility": 2,
}
A2 = {
    "base_validity": 0,
    "answer_preservation": 2,
    "falsehood_clarity": 1,
    "attack_fidelity": 2,
    "clinical_plausibility": 1,
}


_INT_COLUMNS = (C.task, C.item, C.slot, "annotation_id", "revision")


def _utc(value: datetime | None) -> datetime | None:
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def reference_rater_labels(session: Session, study_id: int, *, pseudonymise: bool = True) -> dict[int, str]:
    """``rater_labels`` as it grouped every assignment of the study (the reference; do not optimise)."""
    rows = session.exec(
        select(Assignment.reviewer_id, func.min(Assignment.id), Reviewer.username)
        .join(Reviewer, Reviewer.id == Assignment.reviewer_id)
        .where(Assignment.study_id == study_id)
        .group_by(Assignment.reviewer_id, Reviewer.username)
    ).all()
    ordered = sorted(rows, key=lambda r: (r[1], r[0]))
    if not pseudonymise:
        return {r[0]: r[2] for r in ordered}
    return {r[0]: pseudonym("R", n, len(ordered)) for n, r in enumerate(ordered, start=1)}


def reference_fetch(
    session: Session,
    study: Study,
    *,
    rubric: str | None = None,
    pseudonymise: bool = True,
    task_ids: Iterable[int] | None = None,
    gold: str = "exclude",
) -> tuple[list, list, dict[int, str], list[str]]:
    """The rows and long-form scores as ``_fetch`` read them before (the reference; do not optimise)."""
    if gold not in GOLD_CHOICES:
        raise InvalidInput(f"gold must be one of {', '.join(GOLD_CHOICES)} (got {gold!r})")
    rubrics = study_rubrics(study, rubric)
    names = reference_rater_labels(session, study.id, pseudonymise=pseudonymise)
    latest = (
        select(Annotation.assignment_id, func.max(Annotation.revision).label("revision"))
        .join(Assignment, Assignment.id == Annotation.assignment_id)
        .where(Assignment.study_id == study.id, Annotation.rubric.in_(rubrics))
        .group_by(Annotation.assignment_id)
        .subquery()
    )
    in_force = and_(latest.c.assignment_id == Annotation.assignment_id, latest.c.revision == Annotation.revision)
    query = (
        select(
            Annotation.id,
            Annotation.task_id,
            Task.item_id,
            Annotation.rubric,
            Annotation.reviewer_id,
            Assignment.slot,
            Annotation.flags,
            Item.subset,
            Item.content_type,
            Item.provenance,
            ModelResponse.model,
            ModelResponse.auto_label,
            Annotation.revision,
            Annotation.seconds_on_task,
            Annotation.created_at,
            Item.language,
            ModelResponse.condition,
            Annotation.comment,
            Assignment.flagged,
            Assignment.status,
            Item.external_id,
            Task.unit_key,
        )
        .join(latest, in_force)
        .join(Assignment, Assignment.id == Annotation.assignment_id)
        .join(Task, Task.id == Annotation.task_id)
        .join(Item, Item.id == Task.item_id)
        .outerjoin(ModelResponse, ModelResponse.id == Task.response_id)
        .order_by(Annotation.task_id, Assignment.slot, Annotation.id)
    )
    score_query = (
        select(AnnotationScore.annotation_id, AnnotationScore.dimension, AnnotationScore.value)
        .join(Annotation, Annotation.id == AnnotationScore.annotation_id)
        .join(latest, in_force)
    )
    excluded = Annotation.task_id.not_in(excluded_tasks(study.id))
    query = query.where(excluded)
    score_query = score_query.where(excluded)
    if gold != "include":
        gold_tasks = select(GoldTask.task_id).where(GoldTask.study_id == study.id)
        keep = Annotation.task_id.in_(gold_tasks) if gold == "only" else Annotation.task_id.not_in(gold_tasks)
        query = query.where(keep)
        score_query = score_query.where(keep)
    if task_ids is not None:
        wanted = sorted(set(task_ids))
        query = query.where(Annotation.task_id.in_(wanted))
        score_query = score_query.where(Annotation.task_id.in_(wanted))
    # Core rows (no ORM entity processing): a large study's frame is read in a fraction of the time.
    connection = session.connection()
    rows = connection.execute(query).all()
    scores = connection.execute(score_query).all()
    return rows, scores, names, rubrics


def reference_frame(rows, scores, names: dict[int, str], rubrics: list[str]) -> pd.DataFrame:
    """The per-row ``_frame`` as it was before vectorisation (the reference; do not optimise)."""
    dimensions = dimension_columns(rubrics)
    columns = frame_columns(rubrics)
    records = []
    for r in rows:
        records.append(
            {
                "annotation_id": r[0],
                C.task: r[1],
                C.item: r[2],
                C.rubric: r[3],
                C.rater: names[r[4]],
                C.slot: r[5],
                C.flags: FLAG_SEPARATOR.join(sorted(r[6] or [])),
                C.subset: r[7],
                C.content_type: r[8],
                C.provenance: r[9],
                C.model: r[10],
                C.auto_label: r[11],
                "revision": r[12],
                "seconds_on_task": float(r[13]),
                "submitted_at": _utc(r[14]),
                "language": r[15],
                "condition": r[16],
                "comment": r[17],
                "flagged": bool(r[18]),
                "assignment_status": r[19],
                "external_id": r[20],
                "unit_key": r[21],
            }
        )
    frame = pd.DataFrame.from_records(records, columns=[c for c in columns if c not in dimensions])
    position = {annotation_id: i for i, annotation_id in enumerate(frame["annotation_id"])}
    values = np.full((len(frame), len(dimensions)), np.nan)
    index = {key: j for j, key in enumerate(dimensions)}
    for annotation_id, dimension, value in scores:
        row = position.get(annotation_id)
        if row is not None and dimension in index:
            values[row, index[dimension]] = value
    for j, key in enumerate(dimensions):
        frame[key] = values[:, j]
    for column in _INT_COLUMNS:
        frame[column] = frame[column].astype("int64")
    frame["seconds_on_task"] = frame["seconds_on_task"].astype(float)
    frame["flagged"] = frame["flagged"].astype(bool)
    frame["submitted_at"] = pd.to_datetime(frame["submitted_at"], utc=True)
    return frame[columns].reset_index(drop=True)


@pytest.fixture
def busy_study(engine, tmp_path):
    """Units rated by two reviewers, with every case the frame distinguishes."""
    _users, lead = dual_rated_study(engine, tmp_path, units=8, reviewers=4, models=("model-a", "model-b"))
    a_slots = slots_by_task(engine, "s", "A")
    b_slots = slots_by_task(engine, "s", "B")
    a_tasks, b_tasks = sorted(a_slots), sorted(b_slots)
    b_scores = [dict.fromkeys(RUBRIC_B.dimension_keys, v) for v in (0, 1)]
    for n, task in enumerate(a_tasks[:6]):
        for slot in a_slots[task]:
            rate(
                engine,
                slot,
                A1 if (n + slot.slot) % 2 else A2,
                flags=["needs_adjudication", "disputed_gold"][: slot.slot] if n % 3 == 0 else [],
                comment=f"note {n}" if n % 2 else "",
            )
    for task in a_tasks[:2]:  # edits: revision 2 is in force
        rate(engine, a_slots[task][0], A2, base_revision=1)
    for n, task in enumerate(b_tasks[:5]):
        for slot in b_slots[task][: 1 + n % 2]:
            rate(engine, slot, b_scores[n % 2], flags=["needs_adjudication"] if n == 1 else [])
    with write_session(engine) as session:
        study = get_study_row(session, "s")
        withdrawn = a_slots[a_tasks[2]][1]
        session.execute(update(Assignment).where(Assignment.id == withdrawn.id).values(status="withdrawn"))
        flagged = a_slots[a_tasks[3]][0]
        session.execute(update(Assignment).where(Assignment.id == flagged.id).values(flagged=True))
        session.add(GoldTask(task_id=a_tasks[4], study_id=study.id, source="consensus", created_by=lead.id))
        session.add(GoldTask(task_id=b_tasks[0], study_id=study.id, source="consensus", created_by=lead.id))
        # an annotation some of whose dimensions have no score (as rows written before a rubric
        # gained a dimension): its revision 3 is in force, with two of five scores
        partial = a_slots[a_tasks[1]][1]
        row = Annotation(
            assignment_id=partial.id,
            task_id=partial.task_id,
            reviewer_id=partial.reviewer_id,
            rubric="A",
            revision=3,
            flags=["needs_adjudication"],
            comment="partial",
            seconds_on_task=12.5,
            client_token="partial-3",
            created_at=utcnow(),
        )
        session.add(row)
        session.flush()
        for key, value in (("base_validity", 1), ("attack_fidelity", 2)):
            session.add(AnnotationScore(annotation_id=row.id, dimension=key, rubric="A", value=value))
        # text the frame reads through a JSON array (annotation_columns.context_column) must come back as stored
        tricky = session.get(Task, a_tasks[0]).item_id
        session.execute(
            update(Item)
            .where(Item.id == tricky)
            .values(subset='quote " back\\ tab\t é 中 \u2028 [1, null]', content_type=None, language="null")
        )
        excluded = a_slots[a_tasks[5]][0]
        session.add(
            TaskFlag(
                study_id=study.id,
                task_id=excluded.task_id,
                assignment_id=excluded.id,
                reviewer_id=excluded.reviewer_id,
                kind="other",
                status="excluded",
            )
        )
    return engine


def assert_same(ours: pd.DataFrame, reference: pd.DataFrame) -> None:
    assert list(ours.columns) == list(reference.columns)
    assert list(ours.dtypes) == list(reference.dtypes)
    pd.testing.assert_frame_equal(ours, reference, check_exact=True)


@pytest.mark.parametrize("gold", ["exclude", "only", "include"])
@pytest.mark.parametrize("rubric", [None, "A", "B"])
def test_the_frame_is_the_reference_frame(busy_study, gold, rubric):
    engine = busy_study
    for pseudonymise in (True, False):
        with read_session(engine) as session:
            study = get_study_row(session, "s")
            reference = reference_frame(
                *reference_fetch(session, study, rubric=rubric, pseudonymise=pseudonymise, gold=gold)
            )
            in_session = load_annotations(session, study, rubric=rubric, pseudonymise=pseudonymise, gold=gold)
        assert_same(in_session, reference)
        assert_same(annotations_frame(engine, "s", rubric=rubric, pseudonymise=pseudonymise, gold=gold), reference)
    if gold == "exclude" and rubric is None:  # the study really has every case the frame encodes
        assert len(reference) > 10
        assert set(reference["revision"]) == {1, 2, 3}
        partial = reference.loc[reference["revision"] == 3].iloc[0]
        assert partial[["base_validity", "attack_fidelity"]].tolist() == [1.0, 2.0]
        assert partial[["answer_preservation", "falsehood_clarity", "clinical_plausibility"]].isna().all()
        assert (reference["assignment_status"] == "withdrawn").sum() == 1
        assert reference["flagged"].sum() == 1
        assert (reference["flags"] == "disputed_gold;needs_adjudication").any() and (reference["flags"] == "").any()
        assert reference["model"].isna().any() and reference["model"].notna().any()
        assert reference["subset"].str.contains('quote " back', regex=False).any()
        assert reference["content_type"].isna().any() and (reference["language"] == "null").any()
        assert reference[list(RUBRIC_B.dimension_keys)].isna().any().all()


def test_a_subset_of_tasks_and_an_empty_frame(busy_study):
    engine = busy_study
    with read_session(engine) as session:
        study = get_study_row(session, "s")
        tasks = sorted(set(annotations_frame(engine, "s", gold="include")["task_id"]))
        for task_ids in (tasks[::3], [], [tasks[0]]):
            reference = reference_frame(*reference_fetch(session, study, task_ids=task_ids, gold="include"))
            assert_same(load_annotations(session, study, task_ids=task_ids, gold="include"), reference)
        empty = load_annotations(session, study, rubric="B", task_ids=[])
    assert empty.empty and list(empty.columns) == frame_columns(["B"])


@pytest.mark.parametrize("spread", [0, 10**9])
def test_scores_read_by_id_or_as_one_range(busy_study, monkeypatch, spread):
    """Scores of the annotations in force, whether read as the range of their ids or by id (ids far apart)."""
    monkeypatch.setattr(annotation_columns, "_RANGE_SPREAD", spread)
    with read_session(busy_study) as session:
        study = get_study_row(session, "s")
        tasks = sorted(set(load_annotations(session, study, gold="include")["task_id"]))
        for task_ids in (None, [tasks[0], tasks[-1]]):
            reference = reference_frame(*reference_fetch(session, study, task_ids=task_ids, gold="include"))
            assert_same(load_annotations(session, study, task_ids=task_ids, gold="include"), reference)


def test_pseudonyms_follow_first_assignments_not_reviewer_ids(busy_study):
    """The per-reviewer probe gives the grouping's order, also when a later reviewer got work first."""
    engine = busy_study
    with write_session(engine) as session:
        study = get_study_row(session, "s")
        newest = session.exec(select(func.max(Assignment.id))).one()
        last = session.exec(select(Assignment).where(Assignment.id == newest)).one()
        # the reviewer of the study's newest assignment now holds its oldest one
        oldest = session.exec(select(func.min(Assignment.id))).one()
        session.execute(update(Assignment).where(Assignment.id == oldest).values(reviewer_id=last.reviewer_id))
    with read_session(engine) as session:
        study = get_study_row(session, "s")
        assert list(rater_labels(session, study.id)) != sorted(rater_labels(session, study.id))
        for pseudonymise in (True, False):
            labels = rater_labels(session, study.id, pseudonymise=pseudonymise)
            assert labels == reference_rater_labels(session, study.id, pseudonymise=pseudonymise)
            assert list(labels) == list(reference_rater_labels(session, study.id, pseudonymise=pseudonymise))
