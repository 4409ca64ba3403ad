"""One cached copy per study of its annotations frame and of what lead pages compute from it.

Lead pages (Agreement, Analysis, Reviewers' quality) used to recompute their numbers on every
Streamlit rerun, or cache them per session and per argument set (up to 16 copies of the same
study's frame in one process, 1.0-1.2 GB at panel scale). This module keeps, per database and
study, one entry shared by every session of the process:

* **Keyed by the study's data version** (:func:`data_version`): counts and highest ids of the
  study's annotations, adjudications and assignments, the flagged and withdrawn assignment counts
  and the gold-task set. Annotations and adjudications are append-only (an edit is a new revision,
  a decision a new row), so a submit, an edit, a decision, a flag, a withdrawal, a gold mark or
  unmark, or a new reviewer (pseudonym numbering) changes it; a deletion lowers a count. When the
  version moves, everything cached for the study is dropped and recomputed on the next read, so a
  page never shows numbers older than the data it was opened on.
* **Patched while reviewers work**: a study being rated gets a new version with every submit. The
  frame of the new version is the last frame with the rows of the tasks rated since read again
  (:func:`read_frame`; 0.1-0.3 s instead of a full read), unless something changed rows in place (a
  flag, a withdrawal, gold or excluded tasks, renumbered pseudonyms). A frame and its version are
  read in one snapshot (:func:`~review_app.db.engine.snapshot_session`), so a frame is filed under
  exactly the data it shows.
* **Bounded**: least-recently-used studies are evicted beyond ``max_studies`` or ``max_bytes``
  (``MEDREV_STUDY_CACHE_MB``, default 512), and each study keeps at most ``max_values`` computed
  values (agreement under several weights, ...). The study just read always stays, even when it
  alone exceeds the byte bound (dropping it would recompute it on every rerun).
* **Thread-safe, one computation at a time per value**: Streamlit runs sessions in threads; two
  leads opening the same page wait for one computation instead of running two. The cache lock is
  never held while the database is read or a statistic is computed.

**Where the work runs.** The services' compute callables send the frame read and the statistics
to a compute worker process (:mod:`review_app.services.compute_workers`, ``MEDREV_COMPUTE_WORKERS``):
this cache, in the app, then holds only their small results, and the frame lives in the worker's
own instance of this module's :data:`CACHE` (keyed by the same data version, so one frame read
serves agreement, analysis and quality there). A computation waited for releases the GIL, so
reviewers' requests in the app are not slowed. With no workers, everything runs here as before.

The frame is read in a short read-only transaction and built after it ends (see
:func:`review_app.services.annotations.annotations_frame`), so lead work never holds a transaction
open while statistics run.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import pandas as pd
from sqlalchemy import Engine, case, func
from sqlmodel import Session, select

from review_app.analysis.layout import DEFAULT_COLUMNS as C
from review_app.db.engine import read_session, snapshot_session
from review_app.db.models import (
    Adjudication,
    Annotation,
    Assignment,
    AssignmentTally,
    GoldTask,
    ProgressCell,
    Study,
    StudyTally,
    Task,
    TaskFlag,
)
from review_app.services.annotations import (
    get_study_row,
    load_annotations,
    rater_labels,
)

T = TypeVar("T")
DEFAULT_MAX_MB = 512
DEFAULT_MAX_STUDIES = 4
DEFAULT_MAX_VALUES = 16
# A new version's frame is patched from the last one when at most this many tasks got new annotations
# (their rows are read again, by task id); beyond it a full read is as cheap.
MAX_PATCHED_TASKS = 5_000
SAMPLED_ABOVE = 200  # nbytes: longer lists and tuples are measured on this many elements


def data_version(engine: Engine, study_name: str) -> tuple[int, ...]:
    """A fingerprint of everything a study's annotations frame is made of (one short read).

    Counts and highest ids of the study's annotations (append-only: a revision is a new row),
    adjudications and assignments (a new reviewer renumbers pseudonyms), the number of tasks (their
    responses give the harm model's first model; medrev adds tasks and never deletes one), the
    number of flagged and of withdrawn assignments (both changed in place), the gold-task set
    (count, sum and highest id) and the tasks a lead excluded (count and sum of ids). Any write that
    changes the frame or a number computed from it changes the fingerprint. The study's id and
    creation time come first, so a study deleted and created again under its name is a new one.

    The annotation, task and assignment figures come from the counters the database keeps
    (``study_tally``, ``progress_cell``, ``assignment_tally``: migration 0007) and one index probe,
    so the read costs the same at any study size (it was 0.4-1.3 s per rerun at 125,000 items).
    """
    with read_session(engine) as session:
        return version_in(session, get_study_row(session, study_name))


def version_in(session: Session, study: Study) -> tuple[int, ...]:
    """:func:`data_version` read in the caller's session (with other reads of one snapshot).

    One statement of scalar subqueries: as seven statements (SQLAlchemy's Python for each, and a round
    trip each on PostgreSQL) the read took 1.8 ms on SQLite and 4.6 ms on PostgreSQL at panel scale, 1.5
    and 3.6 ms as one, on every lead page rerun; the database evaluates each subquery as it did the
    statement.
    """
    sid = study.id

    def scalar(column, where: tuple, *, or_zero: bool = True):
        value = select(column).where(*where).scalar_subquery()
        return func.coalesce(value, 0) if or_zero else value  # no row, or a sum or max of none: 0

    # Counters the database keeps (migration 0007) instead of joins over every annotation and
    # assignment: this runs on every rerun of every lead page.
    tally = (StudyTally.study_id == sid,)
    cells = (ProgressCell.study_id == sid,)
    # Read from the (few) decisions, each probing its task: an IN list of every task id, or a join
    # the planner starts from the task side, cost 0.14-0.5 s at 1,000,000 tasks.
    decided = (select(Task.study_id).where(Task.id == Adjudication.task_id).scalar_subquery() == sid,)
    by_status = (AssignmentTally.study_id == sid,)
    gold = (GoldTask.study_id == sid,)
    # a lead's exclusion (a flag's status, changed in place) leaves every analysis
    excluded = (TaskFlag.study_id == sid, TaskFlag.status == "excluded")
    withdrawn = case((AssignmentTally.status == "withdrawn", AssignmentTally.n), else_=0)
    parts = [
        scalar(StudyTally.annotations, where=tally),
        scalar(StudyTally.last_annotation_id, where=tally),
        scalar(func.sum(ProgressCell.tasks), where=cells),
        scalar(func.count(Adjudication.id), where=decided, or_zero=False),
        scalar(func.max(Adjudication.id), where=decided),
        scalar(func.sum(AssignmentTally.n), where=by_status),
        scalar(func.max(Assignment.id), where=(Assignment.study_id == sid,)),  # one index probe
        scalar(func.sum(AssignmentTally.flagged), where=by_status),
        scalar(func.sum(withdrawn), where=by_status),
        scalar(func.count(GoldTask.task_id), where=gold, or_zero=False),
        scalar(func.sum(GoldTask.task_id), where=gold),
        scalar(func.max(GoldTask.task_id), where=gold),
        scalar(func.count(TaskFlag.id), where=excluded, or_zero=False),
        scalar(func.sum(TaskFlag.task_id), where=excluded),
    ]
    row = session.exec(select(*parts)).one()
    created = int(study.created_at.timestamp() * 1_000_000) if study.created_at else 0
    return tuple(int(v) for v in (study.id, created, *row))


# The last result this thread received from a compute worker and its size as measured there.
_measured = threading.local()


def note_measured(value: Any, size: int) -> None:
    """Record ``size`` (:func:`nbytes`, measured by the compute worker that built ``value``) for the
    cache to file ``value`` under, instead of walking it again in the app: walking the Agreement
    page's numbers and tables cost 4-5 ms of the app's Python, under the cache's lock, on every new
    data version. Kept for this thread's next store only."""
    _measured.last = (value, size)


def _measured_nbytes(value: Any) -> int | None:
    last = getattr(_measured, "last", None)
    _measured.last = None
    return last[1] if last is not None and last[0] is value else None


def nbytes(value: Any, seen: set[int] | None = None, depth: int = 0) -> int:
    """Approximate memory of a cached value: its data frames and arrays (each counted once).

    Object columns are counted shallowly (8 bytes a cell) plus a flat 48 bytes a cell for the
    strings they point at: close enough for a bound, and cheap (a deep count of 200,000 rows of
    text costs more than the rerun it saves).
    Long lists and tuples (a disagreement queue of 20,000 entries, each with its ratings) are
    measured on a sample of :data:`SAMPLED_ABOVE` elements: walking every one cost 0.7-1.8 s per
    stored queue, on the page's first load.
    """
    seen = set() if seen is None else seen
    if id(value) in seen or depth > 6 or value is None:
        return 0
    seen.add(id(value))
    if isinstance(value, pd.DataFrame | pd.Series):
        frame = value.to_frame() if isinstance(value, pd.Series) else value
        shallow = int(frame.memory_usage(index=True, deep=False).sum())
        objects = sum(len(frame) for dtype in frame.dtypes if dtype is object or str(dtype) == "object")
        return shallow + 48 * objects
    if hasattr(value, "nbytes") and isinstance(value.nbytes, int):
        return int(value.nbytes)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return 64 + sum(nbytes(getattr(value, f.name), seen, depth + 1) for f in dataclasses.fields(value))
    if isinstance(value, dict):
        return 64 + sum(nbytes(v, seen, depth + 1) for v in value.values())
    if isinstance(value, list | tuple):
        if len(value) > SAMPLED_ABOVE:  # e.g. a queue of 20,000 entries: the mean size of a spread-out sample
            step = len(value) // SAMPLED_ABOVE
            sample = value[::step][:SAMPLED_ABOVE]
            return 64 + round(sum(nbytes(v, seen, depth + 1) for v in sample) * len(value) / len(sample))
        return 64 + sum(nbytes(v, seen, depth + 1) for v in value)
    return 64


@dataclass
class _Entry:
    version: tuple[int, ...]
    values: OrderedDict[Hashable, Any] = field(default_factory=OrderedDict)
    sizes: dict[Hashable, int] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        return sum(self.sizes.values())


@dataclass(frozen=True)
class CacheStats:
    """What the cache holds (for tests, benchmarks and the admin)."""

    studies: int
    values: int
    nbytes: int
    hits: int
    misses: int


class StudyCache:
    """Per-study values keyed by the study's data version; LRU-bounded; shared by every thread."""

    def __init__(
        self,
        *,
        max_bytes: int | None = None,
        max_studies: int = DEFAULT_MAX_STUDIES,
        max_values: int = DEFAULT_MAX_VALUES,
    ) -> None:
        if max_bytes is None:
            max_bytes = int(float(os.environ.get("MEDREV_STUDY_CACHE_MB", DEFAULT_MAX_MB)) * 1024 * 1024)
        self.max_bytes = max_bytes
        self.max_studies = max_studies
        self.max_values = max_values
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self._computing: dict[tuple, threading.Lock] = {}
        self._background: set[tuple] = set()
        self._background_errors: dict[tuple, Exception] = {}
        # the value last stored under a "keep latest" key, whatever its version (see latest())
        self._latest: dict[tuple[tuple[str, str], Hashable], tuple[tuple[int, ...], Any]] = {}
        self._hits = 0
        self._misses = 0

    @staticmethod
    def study_key(engine: Engine, study_name: str) -> tuple[str, str]:
        """Who a study is in this cache: (database URL without password, study name)."""
        return (engine.url.render_as_string(hide_password=True), study_name)

    def _lookup(self, study_key: tuple[str, str], version: tuple, key: Hashable) -> tuple[bool, Any]:
        with self._lock:
            entry = self._entries.get(study_key)
            if entry is None or entry.version != version or key not in entry.values:
                return False, None
            self._entries.move_to_end(study_key)
            entry.values.move_to_end(key)
            self._hits += 1
            return True, entry.values[key]

    def get(
        self,
        engine: Engine,
        study_name: str,
        key: Hashable,
        compute: Callable[[tuple[int, ...]], T],
        *,
        version: tuple[int, ...] | None = None,
        current_version: tuple[int, ...] | None = None,
        reads_database: bool = False,
        keep_latest: bool = False,
    ) -> T:
        """The value cached under ``key`` for the study's current data version, else ``compute(version)``'s.

        ``compute`` gets the version so that values it reads from the cache (the frame) are of the
        same one: it passes it on as ``version``, which is given only inside another ``compute``.
        ``current_version``: the version as the caller just read it, with what ``compute`` needs (one
        session instead of two); it is used for the first attempt only, like a version read here.
        ``reads_database``: ``compute`` reads the study itself, so the version is read again after
        it; if a write came in between, the value is not filed under the older version (the version
        can come back, after a flag or a gold mark is undone, and would then return newer data) and
        the outermost call starts again on the new version (twice at most; then the value is
        returned uncached: reviewers are writing faster than the page reruns, and no cache can hit).
        ``keep_latest``: the value stays available through :meth:`latest` after the version moves on,
        until a newer one is stored under the key (the frame: a new version is patched from it).
        """
        if getattr(_uncached, "active", False):
            return compute(version if version is not None else data_version(engine, study_name))
        if version is not None:
            return self._get(engine, study_name, key, compute, version, reads_database, keep_latest)
        for _attempt in range(3):
            current = current_version if current_version is not None else data_version(engine, study_name)
            try:
                return self._get(engine, study_name, key, compute, current, reads_database, keep_latest)
            except _Moved:  # written since the version was read: start again on the new one
                current_version = None
                continue
        return compute_uncached(compute, data_version(engine, study_name))

    def peek(self, engine: Engine, study_name: str, key: Hashable) -> Any | None:
        """The value cached under ``key`` for the study's current data version, or None (never computes)."""
        if getattr(_uncached, "active", False):
            return None
        found, value = self._lookup(self.study_key(engine, study_name), data_version(engine, study_name), key)
        return value if found else None

    def latest(self, engine: Engine, study_name: str, key: Hashable) -> tuple[tuple[int, ...], Any] | None:
        """``(version, value)`` last stored under a ``keep_latest`` key of the study, of any version, or None."""
        with self._lock:
            return self._latest.get((self.study_key(engine, study_name), key))

    def remember_latest(self, engine: Engine, study_name: str, key: Hashable, version: tuple, value: Any) -> None:
        """Keep ``value`` as :meth:`latest` under ``key`` without caching it (it is of another version)."""
        with self._lock:
            study_key = self.study_key(engine, study_name)
            if study_key in self._entries:
                self._latest[(study_key, key)] = (version, value)

    def _get(self, engine, study_name, key, compute, version, reads_database, keep_latest=False):
        study_key = self.study_key(engine, study_name)
        found, value = self._lookup(study_key, version, key)
        if found:
            return value
        with self._lock:
            gate = self._computing.setdefault((study_key, version, key), threading.Lock())
        try:
            with gate:  # one computation per value; others wait for it, then read it
                found, value = self._lookup(study_key, version, key)
                if found:
                    return value
                value = compute(version)
                if reads_database and data_version(engine, study_name) != version:
                    raise _Moved
                self._store(study_key, version, key, value, keep_latest)
                return value
        finally:
            with self._lock:
                self._computing.pop((study_key, version, key), None)

    def _store(
        self, study_key: tuple[str, str], version: tuple, key: Hashable, value: Any, keep_latest: bool = False
    ) -> None:
        with self._lock:
            self._misses += 1
            if keep_latest:
                self._latest[(study_key, key)] = (version, value)
            entry = self._entries.get(study_key)
            if entry is None or entry.version != version:
                entry = _Entry(version)
                self._entries[study_key] = entry
            seen = {id(v) for v in entry.values.values()}
            measured = _measured_nbytes(value)  # a compute worker's result comes measured
            entry.values[key] = value
            entry.sizes[key] = measured if measured is not None else nbytes(value, seen)
            self._entries.move_to_end(study_key)
            while len(entry.values) > self.max_values:
                old, _ = entry.values.popitem(last=False)
                entry.sizes.pop(old, None)
            self._evict(keep=study_key)

    def _evict(self, *, keep: tuple[str, str]) -> None:
        while len(self._entries) > 1 and (
            len(self._entries) > self.max_studies or sum(e.nbytes for e in self._entries.values()) > self.max_bytes
        ):
            oldest = next(iter(self._entries))
            if oldest == keep:
                self._entries.move_to_end(oldest)
                oldest = next(iter(self._entries))
            del self._entries[oldest]
            for name in [name for name in self._latest if name[0] == oldest]:
                del self._latest[name]

    def in_background(self, engine: Engine, study_name: str, tag: Hashable, fill: Callable[[], Any]) -> bool:
        """Run ``fill()`` (which fills this cache) in a background thread, unless it already runs.

        For values a page can show later than the rest (the Progress page's quality alerts): the
        page peeks, starts the fill if nothing is there, and shows the value on a later rerun. One
        fill per study and ``tag`` at a time. An error the fill raised is raised by the next call
        for the same study and tag (once), so the page shows it instead of waiting forever. Returns
        whether this call started the fill (False: one was running already).
        """
        name = (self.study_key(engine, study_name), tag)
        with self._lock:
            failed = self._background_errors.pop(name, None)
            if failed is not None:
                raise failed
            if name in self._background:
                return False
            self._background.add(name)

        def run() -> None:
            try:
                fill()
            except Exception as error:  # handed to the page by the next call
                with self._lock:
                    self._background_errors[name] = error
            finally:
                with self._lock:
                    self._background.discard(name)

        threading.Thread(target=run, name=f"medrev-fill-{study_name}", daemon=True).start()
        return True

    def clear(self) -> None:
        """Forget everything (tests; an admin after a restore)."""
        with self._lock:
            self._entries.clear()
            self._latest.clear()
            self._hits = self._misses = 0

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(
                studies=len(self._entries),
                values=sum(len(e.values) for e in self._entries.values()),
                nbytes=sum(e.nbytes for e in self._entries.values()),
                hits=self._hits,
                misses=self._misses,
            )


class _Moved(Exception):
    """The study was written while a value was read from it (see :meth:`StudyCache.get`)."""


_uncached = threading.local()


def uncached_active() -> bool:
    """Whether this thread is inside :func:`compute_uncached` (a worker job must run uncached too)."""
    return bool(getattr(_uncached, "active", False))


def compute_uncached(compute: Callable[[tuple[int, ...]], T], version: tuple[int, ...]) -> T:
    """``compute(version)`` with every nested cache read uncached too (the data is moving under it)."""
    _uncached.active = True
    try:
        return compute(version)
    finally:
        _uncached.active = False


CACHE = StudyCache()


def study_frame(
    engine: Engine,
    study_name: str,
    *,
    pseudonymise: bool = True,
    gold: str = "exclude",
    version: tuple[int, ...] | None = None,
) -> pd.DataFrame:
    """The study's :func:`annotations_frame`, one shared copy per data version (do not modify it).

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
                raise _Moved
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
    """:func:`annotations_frame` with ``gold="only"``: the same rows and columns, read by gold task id.

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
    for :meth:`StudyCache.get`, inside another cached computation only.
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
