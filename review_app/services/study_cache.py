"""One cached copy per study of its annotations frame and of what lead pages compute from it.

Lead pages (Agreement, Analysis, Reviewers' quality) rerun on every click, and a study's frame is
hundreds of megabytes at panel scale: computed per session or per argument set, one process would
hold many copies of it and redo the same statistics. This module keeps, per database and study,
one entry shared by every session of the process:

* **Keyed by the study's data version** (:func:`data_version`): counts and highest ids of the
  study's annotations, adjudications and assignments, the flagged and withdrawn assignment counts
  and the gold-task set. Annotations and adjudications are append-only (an edit is a new revision,
  a decision a new row), so a submit, an edit, a decision, a flag, a withdrawal, a gold mark or
  unmark, or a new reviewer (pseudonym numbering) changes it; a deletion lowers a count. When the
  version moves, everything cached for the study is dropped and recomputed on the next read, so a
  page never shows numbers older than the data it was opened on.
* **Patched while reviewers work**: a study being rated gets a new version with every submit. The
  frame of the new version is the last frame with the rows of the tasks rated since read again
  (:mod:`review_app.services.study_frames`), unless something changed rows in place (a flag, a
  withdrawal, gold or excluded tasks, renumbered pseudonyms). A frame and its version are read in
  one snapshot (:func:`~review_app.db.engine.snapshot_session`), so a frame is filed under exactly
  the data it shows.
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
reviewers' requests in the app are not slowed. With no workers, everything runs in the app's process.

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

import pandas as pd
from sqlalchemy import Engine, case, func
from sqlmodel import Session, select

from review_app.db.engine import read_session
from review_app.db.models import (
    Adjudication,
    Assignment,
    AssignmentTally,
    GoldTask,
    ProgressCell,
    Study,
    StudyTally,
    Task,
    TaskFlag,
)
from review_app.services.annotations import get_study_row

T = TypeVar("T")
DEFAULT_MAX_MB = 512
DEFAULT_MAX_STUDIES = 4
DEFAULT_MAX_VALUES = 16
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

    One statement of scalar subqueries, not one statement per figure: every lead page rerun reads it, and
    each statement costs SQLAlchemy's Python and, on PostgreSQL, a round trip.
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
            except VersionMoved:  # written since the version was read: start again on the new one
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
                    raise VersionMoved
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


class VersionMoved(Exception):
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
