"""A study's annotations frame as the study cache keeps it: read once per data version, patched while
reviewers work, and relabelled rather than read twice.

:func:`study_frame` is the shared copy every lead computation starts from (in a compute worker, the
worker's own cache holds it). A new data version's frame is the last frame with the rows of the
tasks rated since read again (:func:`read_frame`), unless something changed rows in place (a flag,
a withdrawal, gold or excluded tasks, renumbered pseudonyms); a frame and its version are read in
one snapshot, so a frame is filed under exactly the data it shows. The cache itself (versions,
bounds, one computation per value) is :mod:`review_app.services.study_cache`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from sqlalchemy import Engine
from sqlmodel import Session, select

from review_app.analysis.layout import DEFAULT_COLUMNS as C
from review_app.db.engine import read_session, snapshot_session
from review_app.db.models import Annotation, Assignment, GoldTask, Study
from review_app.services.annotations import get_study_row, load_annotations, rater_labels
from review_app.services.study_cache import CACHE, VersionMoved, uncached_active, version_in

# A new version's frame is patched from the last one when at most this many tasks got new annotations
# (their rows are read again, by task id); beyond it a full read is as cheap.
MAX_PATCHED_TASKS = 5_000


def study_frame(
    engine: Engine,
    study_name: str,
    *,
    pseudonymise: bool = True,
    gold: str = "exclude",
    version: tuple[int, ...] | None = None,
) -> pd.DataFrame:
    """The study's :func:`~annotations.annotations_frame`, one shared copy per data version (do not modify it).

    The rows and their version are read in one snapshot (:func:`read_frame`), so a frame is filed
    under exactly the version it shows even while reviewers submit. While they work, the version
    moves with every submit; the frame of a new version is then patched from the last one (the rows
    of the few tasks rated since are read again) instead of read whole (seconds at 200,000
    annotations), unless rows changed in place. ``gold="only"`` (the reviewer-quality report) reads
    the study's gold tasks by task id (:func:`_read_whole`), not the whole study's in-force rows.
    """
    key = ("frame", pseudonymise, gold)

    def compute(asked: tuple[int, ...]) -> _Frame:
        found = CACHE.latest(engine, study_name, key)
        built = read_frame(engine, study_name, found[1] if found else None, pseudonymise=pseudonymise, gold=gold)
        if built.version != asked or uncached_active():
            # Written since the version was read: file it nowhere, but keep it (its version is exact) as
            # the base of the next patch. Uncached (reviewers write faster than pages rerun): use it as is.
            CACHE.remember_latest(engine, study_name, key, built.version, built)
            if not uncached_active():
                raise VersionMoved
        return built

    return CACHE.get(engine, study_name, key, compute, version=version, keep_latest=True).frame


def warm_frame(engine: Engine, study_name: str) -> None:
    """Read the study's shared frame into the cache (a compute-worker job; the frame stays there).

    A background fill that needs the frame and more (the Progress page's quality alerts) runs this
    first as a job of its own: a lead page opened meanwhile (Agreement) queues behind the frame it
    needs too, not behind the rest of the fill.
    """
    study_frame(engine, study_name)


@dataclass(frozen=True, eq=False)
class _Frame:
    """A frame, the data version it shows and the rater labels it was built with (a patch keeps them)."""

    frame: pd.DataFrame
    labels: dict[int, str]
    version: tuple[int, ...]


# Positions in data_version()'s tuple.
_ANNOTATIONS, _LAST_ANNOTATION, _TASKS = 2, 3, 4
_ASSIGNMENTS = 7
_UNCHANGED_FOR_PATCH = (0, 1, _TASKS, 9, 10, 11, 12, 13, 14, 15)  # study, tasks, flags, withdrawals, gold, excluded


def read_frame(
    engine: Engine, study_name: str, last: _Frame | None = None, *, pseudonymise: bool = True, gold: str = "exclude"
) -> _Frame:
    """The study's frame with its data version, read in one snapshot; patched from ``last`` when it can be.

    A patch is allowed only when the versions differ by new annotations (and new assignments and
    decisions, which the frame does not show) and nothing changed in place: same tasks, flagged
    and withdrawn assignments, gold and excluded tasks, and every rater keeps their pseudonym. Then
    the rows of the tasks with an annotation newer than ``last``'s are read again, exactly as a
    full read reads them (in force, gold and exclusion filters), and the rows of every other task
    are kept: nothing else can have changed them. A deletion is caught by the count (the
    annotations newer than ``last``'s must account for every new one).
    """
    with snapshot_session(engine) as session:
        study = get_study_row(session, study_name)
        version = version_in(session, study)
        labels = rater_labels(session, study.id, pseudonymise=pseudonymise)
        if last is not None and last.version == version:
            return last
        tasks = _patchable_tasks(session, study, last, version, labels) if last is not None else None
        if tasks is None:
            frame = _read_whole(session, study, pseudonymise=pseudonymise, gold=gold, labels=labels)
            return _Frame(frame, labels, version)
        part = load_annotations(session, study, pseudonymise=pseudonymise, task_ids=tasks, gold=gold, labels=labels)
    return _Frame(_patch(last.frame, tasks, part), labels, version)


def _patchable_tasks(
    session: Session, study: Study, last: _Frame, version: tuple[int, ...], labels: dict[int, str]
) -> list[int] | None:
    """The tasks whose rows a patch from ``last`` to ``version`` reads again, or None (read whole)."""
    before = last.version
    if len(before) != len(version) or any(before[i] != version[i] for i in _UNCHANGED_FOR_PATCH):
        return None
    if version[_ANNOTATIONS] < before[_ANNOTATIONS] or version[_ASSIGNMENTS] < before[_ASSIGNMENTS]:
        return None
    if any(labels.get(reviewer) != label for reviewer, label in last.labels.items()):
        return None  # a new reviewer widened the pseudonyms (R99 -> R100) or the order moved
    newer = session.exec(
        select(Annotation.task_id)
        .join(Assignment, Assignment.id == Annotation.assignment_id)
        .where(
            Assignment.study_id == study.id,
            Annotation.id > before[_LAST_ANNOTATION],
            Annotation.id <= version[_LAST_ANNOTATION],
        )
    ).all()
    if len(newer) != version[_ANNOTATIONS] - before[_ANNOTATIONS]:
        return None  # annotations were deleted: read whole
    tasks = sorted(set(newer))
    return tasks if len(tasks) <= MAX_PATCHED_TASKS else None


def _patch(frame: pd.DataFrame, tasks: list[int], part: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with the rows of ``tasks`` replaced by ``part``'s, in the frame's order (task, slot, annotation)."""
    if not tasks:
        return frame
    # One concatenation and one take: 0.1 s at 200,000 rows. No rows to add (a gold task's, read again
    # with the ordinary frame's filter): no concatenation, whose empty part would turn text columns to objects.
    merged = pd.concat([frame, part], ignore_index=True) if len(part) else frame
    keep = np.concatenate([~np.isin(frame[C.task].to_numpy(), tasks), np.ones(len(part), dtype=bool)])
    rows = np.flatnonzero(keep)
    order = rows[
        np.lexsort(
            (merged["annotation_id"].to_numpy()[rows], merged[C.slot].to_numpy()[rows], merged[C.task].to_numpy()[rows])
        )
    ]
    merged = merged.take(order)
    merged.index = pd.RangeIndex(len(merged))
    return merged


GOLD_BY_ID_MAX = 5_000  # gold tasks read by id up to this many (each id is bound twice in the query)


def gold_frame(
    engine: Engine, study_name: str, *, pseudonymise: bool = True, labels: dict[int, str] | None = None
) -> pd.DataFrame:
    """:func:`~annotations.annotations_frame` with ``gold="only"``: the same rows and columns, read by gold task id.

    ``labels``: the study's rater labels as ``pseudonymise`` asks, when the caller has them cached.
    """
    with read_session(engine) as session:
        study = get_study_row(session, study_name)
        return _read_whole(session, study, pseudonymise=pseudonymise, gold="only", labels=labels)


def _read_whole(
    session: Session, study: Study, *, pseudonymise: bool, gold: str, labels: dict[int, str] | None
) -> pd.DataFrame:
    """The whole frame in the caller's session; ``gold="only"`` reads the gold tasks by id.

    The in-force subquery is then narrowed to the gold tasks (as the adjudication view reads a few
    tasks), so the read costs what the study's gold tasks hold, not what the study holds (a second
    on every quality report at 200,000 annotations). Beyond :data:`GOLD_BY_ID_MAX` gold tasks the
    whole-study query is used (bound parameters are limited).
    """
    if gold == "only":
        ids = list(session.exec(select(GoldTask.task_id).where(GoldTask.study_id == study.id)))
        if len(ids) <= GOLD_BY_ID_MAX:
            return load_annotations(session, study, pseudonymise=pseudonymise, gold=gold, task_ids=ids, labels=labels)
    return load_annotations(session, study, pseudonymise=pseudonymise, gold=gold, labels=labels, read_only=True)


def _both_rater_labels(engine: Engine, study_name: str) -> tuple[dict[int, str], dict[int, str]]:
    """(reviewer id -> username, reviewer id -> pseudonym), read in one session.

    Each is :func:`~review_app.services.annotations.rater_labels`: one index probe per reviewer
    account (migration 0008), milliseconds at 1,250,000 assignments.
    """
    with read_session(engine) as session:
        study = get_study_row(session, study_name)
        return rater_labels(session, study.id, pseudonymise=False), rater_labels(session, study.id)


def study_rater_labels(
    engine: Engine, study_name: str, *, pseudonymise: bool = True, version: tuple[int, ...] | None = None
) -> dict[int, str]:
    """The study's :func:`~review_app.services.annotations.rater_names`, once per data version.

    The adjudication view needs them on every rerun and the quality report both kinds (usernames and
    pseudonyms), which one cached read gives. Call it outside a write transaction. ``version``: as
    for :meth:`~study_cache.StudyCache.get`, inside another cached computation only.
    """
    usernames, pseudonyms = CACHE.get(
        engine,
        study_name,
        ("rater_labels",),
        lambda _version: _both_rater_labels(engine, study_name),
        version=version,
        reads_database=True,
    )
    return pseudonyms if pseudonymise else usernames


def relabelled(frame: pd.DataFrame, labels: dict[int, str], wanted: dict[int, str]) -> pd.DataFrame:
    """``frame`` (a study frame whose raters are named by ``labels``) with raters named by ``wanted``.

    The quality report needs the frame under usernames; renaming the shared (pseudonymised) frame's
    rater column gives exactly the frame a second read under usernames would (same rows, order and
    values), without that read (8 s at 200,000 annotations).
    """
    rename = {labels[rid]: wanted[rid] for rid in labels}
    return frame.assign(**{C.rater: frame[C.rater].map(rename).to_numpy(dtype=object)})
