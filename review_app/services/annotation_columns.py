"""How :func:`review_app.services.annotations.annotations_frame` reads a study fast: the database
reads and the column-wise conversions its frame is built with.

A panel-scale study has 200,000 annotations in force and every lead page's first load reads them
all, so the read avoids a Python object per row or per score wherever it can: the driver's raw
rows (:func:`driver_rows`), each annotation's scores packed into one integer per group of ten
dimensions by the database (:func:`score_rows`, :func:`unpack_scores`), a whole study's scores read
on a second connection alongside the rows (:func:`study_score_rows`), text columns converted once
per distinct value (:func:`mapped`) and copied so the frame does not pin the rows' memory
(:func:`fresh`). What the frame holds (which annotations, which columns, the pseudonyms) is decided
in :mod:`review_app.services.annotations`; this module only reads and converts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sqlalchemy import ARRAY, Connection, Engine, Integer, String, any_, cast, func, literal
from sqlmodel import select

from review_app.db.engine import memory_only, read_session
from review_app.db.models import Annotation, AnnotationScore, Assignment, Study

_IN_CHUNK = 10_000  # ids per IN list: PostgreSQL takes at most 65,535 parameters in one statement
# Scores are read as one id range when it holds at most this many ids per annotation wanted.
_RANGE_SPREAD = 4
SCORE_BITS = 3  # bits per dimension in a packed score (1..4 for -1..2, 0 for none)
_PACKED_DIMENSIONS = 10  # dimensions per packed integer: 30 bits, an integer on either database
_SEPARATOR = "\x00"  # joins strings to copy them in one go (copies); checked absent from them


def fixed_snapshot(connection: Connection, study_id: int) -> bool:
    """Whether the connection's transaction sees one snapshot from now on that another connection,
    opened after it, sees all of (see :func:`study_score_rows`).

    SQLite's read transactions are snapshots from their first read, made here; PostgreSQL's are with
    REPEATABLE READ or SERIALIZABLE (``snapshot_session``) only: under READ COMMITTED each statement
    sees a later moment, which could hold annotations the scores' earlier read did not.
    """
    if memory_only(connection.engine):
        return False
    postgresql = connection.dialect.name == "postgresql"
    if postgresql and connection.get_isolation_level().upper() not in ("REPEATABLE READ", "SERIALIZABLE"):
        return False
    connection.execute(select(Study.id).where(Study.id == study_id)).all()
    return True


def study_score_rows(engine: Engine, packed: list, study_id: int, rubrics: list[str]) -> np.ndarray:
    """The packed scores (:func:`score_rows`) of every annotation of the study in these rubrics, read on
    a connection of its own, as an array (a row per annotation: its id, then its packed integers).

    A whole study's frame reads its scores this way, alongside its rows: the database does this read
    without Python's lock (0.35 s of a 1.1 s read at 200,000 annotations on SQLite). The scores come
    as one text, ``id,packed,...`` for every annotation, parsed in one call: a row per annotation
    would hand Python's lock between the two reading threads at every row, which made both reads
    slower than one after the other.

    The caller's transaction has read before this one starts, so this one sees every annotation the
    caller's rows hold; score rows are written with their annotation and never change or go, so they
    are the scores the caller's snapshot holds. The rows of superseded revisions, gold and excluded
    tasks come too and are left out when the frame is built, as with :func:`score_rows`' id range.
    """
    of_study = (
        select(Annotation.id)
        .join(Assignment, Assignment.id == Annotation.assignment_id)
        .where(Assignment.study_id == study_id, Annotation.rubric.in_(rubrics))
    )
    # no score in a group: 0, as unpack_scores reads NULL
    fields = [AnnotationScore.annotation_id, *(func.coalesce(column, 0) for column in packed)]
    per_annotation = (
        select(*(cast(field, String).label(f"f{j}") for j, field in enumerate(fields)))
        .where(AnnotationScore.annotation_id.in_(of_study))
        .group_by(AnnotationScore.annotation_id)
        .subquery()
    )
    entry = per_annotation.c[0]
    for column in list(per_annotation.c)[1:]:
        entry = entry + "," + column
    joined = func.string_agg(entry, ",") if engine.dialect.name == "postgresql" else func.group_concat(entry, ",")
    with read_session(engine) as session:
        text = session.connection().execute(select(joined)).scalar()
    width = len(fields)
    if not text:
        return np.empty((0, width), dtype=np.int64)
    values = np.fromstring(text, dtype=np.int64, sep=",")
    if len(values) != text.count(",") + 1 or len(values) % width:
        raise RuntimeError(f"unreadable score list from the database ({len(values)} numbers for {width} fields)")
    return values.reshape(-1, width)


def score_array(rows: list[tuple]) -> np.ndarray:
    """Score rows (:func:`score_rows`) as an int64 array; NULL (no score in a group) as 0, as the
    unpacking reads it, and a bigint sum's Decimal as its integer."""
    if not rows:
        return np.empty((0, 1), dtype=np.int64)
    table = np.array(rows, dtype=object)
    return np.where(pd.isna(table), 0, table).astype(np.int64)


def context_column(dialect: str, *columns):
    """``columns`` as one JSON array text per row (the frame's context columns, in order; null for NULL).

    Exact for any text (JSON escapes every character it must) and both databases build it in C.
    """
    if dialect == "postgresql":
        return cast(func.json_build_array(*columns), String)
    return func.json_array(*columns)


def driver_rows(connection: Connection, statement) -> list[tuple]:
    """Every row of ``statement`` as the database driver returns them (tuples of raw values).

    SQLAlchemy's ``Row`` per row cost 0.6 s of a 200,000-row read; the frame's columns need no type
    processing here (JSON and timestamps are selected as text and converted per column).
    """
    result = connection.execute(statement)
    try:
        return result.cursor.fetchall()
    finally:
        result.close()


def score_rows(connection: Connection, packed: list, annotation_ids: list[int]) -> list[tuple]:
    """The scores of these annotations, one row per annotation: its id, then its packed scores.

    Score rows are append-only and keyed by annotation, so the database gathers an annotation's
    scores into one integer per group of dimensions (:func:`dimension_groups`, unpacked by
    :func:`unpack_scores`): one aggregate per score row, where a column per dimension (``max(CASE
    ...)``) took nine per row and twice the time at 1,000,000 scores.

    A study's annotations in force are most of the ids between their lowest and highest (the rest:
    superseded revisions, other studies' work), so they are read as that one id range, without a
    parameter per id (200,000 bound ids cost 0.5 s to compile and send) and without running the
    in-force subquery and filters a second time; the rows may hold annotations the frame does not,
    which are left out when the frame is built. Ids spread much wider than that (a few tasks of a
    long study) are read by id, in lists a statement can take.
    """
    statement = select(AnnotationScore.annotation_id, *packed).group_by(AnnotationScore.annotation_id)
    lowest, highest = min(annotation_ids), max(annotation_ids)
    if highest - lowest < _RANGE_SPREAD * len(annotation_ids):
        return driver_rows(connection, statement.where(AnnotationScore.annotation_id.between(lowest, highest)))
    ids = sorted(annotation_ids)
    # PostgreSQL takes the ids as one array parameter (an IN list of 10,000 binds costs more to
    # compile and send than the scores to read); SQLite has no arrays and takes IN lists in chunks.
    array = connection.dialect.name == "postgresql"
    chunk = len(ids) if array else _IN_CHUNK
    scores: list[tuple] = []
    for start in range(0, len(ids), chunk):
        part = ids[start : start + chunk]
        wanted = (
            AnnotationScore.annotation_id == any_(literal(part, ARRAY(Integer)))
            if array
            else AnnotationScore.annotation_id.in_(part)
        )
        scores += driver_rows(connection, statement.where(wanted))
    return scores


def dimension_groups(dimensions: list[str]) -> list[list[str]]:
    """The dimensions in groups whose scores pack into one 32-bit integer (see :func:`unpack_scores`)."""
    size = _PACKED_DIMENSIONS
    return [dimensions[start : start + size] for start in range(0, len(dimensions), size)]


def unpack_scores(packed: np.ndarray, n_dimensions: int) -> np.ndarray:
    """Annotations x dimensions scores (NaN where there is none) from their packed integers.

    The database sums ``(value + 2) << (3 * j)`` over an annotation's scores, dimension ``j`` of
    a group: a score is -1..2 (a check constraint), so each dimension holds 1..4 in its own 3 bits
    and 0 where the annotation has no score for it; an annotation has at most one score per
    dimension (the primary key), so the sum never carries into the next dimension. 0 (NULL in the
    database): no score in the group at all.
    """
    values = np.full((len(packed), n_dimensions), np.nan)
    mask = (1 << SCORE_BITS) - 1
    for g in range(packed.shape[1]):
        column = packed[:, g]
        for j in range(min(_PACKED_DIMENSIONS, n_dimensions - g * _PACKED_DIMENSIONS)):
            code = (column >> (SCORE_BITS * j)) & mask
            values[:, g * _PACKED_DIMENSIONS + j] = np.where(code > 0, code - 2, np.nan)
    return values


def objects(values: np.ndarray) -> np.ndarray:
    """A text column (strings, None) as the frame holds it: equal values are one object, a fresh copy.

    The database driver makes a new string per row, so a 200,000-row frame held 200,000 copies of
    "MEDMISQA", "submitted", a rater's label...; the compute worker keeps every cached frame. Each
    distinct value is copied once (:func:`fresh`). Values, dtypes and equality are unchanged.
    """
    return mapped(values, fresh)


def mapped(values: np.ndarray, convert) -> np.ndarray:
    """``convert`` of each value as an object array, called once per distinct value (and once for None)."""
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    converted = np.empty(len(uniques) + 1, dtype=object)
    converted[: len(uniques)] = [convert(u) for u in uniques]
    # code -1: a missing value (None)
    converted[-1] = convert(None) if len(codes) and codes.min() < 0 else None
    return converted[codes]


def copies(values: np.ndarray) -> np.ndarray:
    """A fresh copy of each string (columns of distinct values: item ids, unit keys), see :func:`fresh`.

    The strings are joined and split again (two calls in C, not one per value), unless one of them
    holds the separator or a value is not a string.
    """
    array = np.empty(len(values), dtype=object)
    if len(values) and pd.api.types.infer_dtype(values, skipna=False) == "string":
        joined = _SEPARATOR.join(values.tolist())
        if joined.count(_SEPARATOR) == len(values) - 1:
            array[:] = joined.split(_SEPARATOR)
            return array
    array[:] = [fresh(v) for v in values]
    return array


def fresh(value):
    """A new copy of a string (anything else as is), so the frame does not pin the fetched rows' memory.

    The rows' strings sit among the rows' tuples in the allocator's arenas; a frame that kept them
    kept those arenas (about 220 MB after a 200,000-row read, against the frame's own 60 MB) long
    after the rows were gone.
    """
    return value.encode("utf-8", "surrogatepass").decode("utf-8", "surrogatepass") if type(value) is str else value


def timestamps(raw) -> pd.Series:
    """Submission times as UTC: ISO text without a zone on SQLite (stored as UTC), microseconds since the
    epoch on PostgreSQL (as ``load_annotations`` selects them)."""
    values = pd.Series(raw, dtype=object)
    if len(values) and isinstance(values.iloc[0], str):
        return pd.to_datetime(values, utc=True, format="ISO8601")
    if len(values) and isinstance(values.iloc[0], int | np.integer):
        return pd.Series(pd.to_datetime(values.to_numpy(dtype=np.int64), unit="us", utc=True))
    return pd.to_datetime(values, utc=True)
