"""What a row must respect to be stored the same way on SQLite and on PostgreSQL.

SQLite stores a 300-character string in a ``VARCHAR(200)`` column, a NUL character in text and
an integer of any size; PostgreSQL refuses all three, mid-transaction, with a driver error. So
the same file imported fine on one and crashed on the other. Services check rows here, before
writing, against the table's own column definitions (``models.py`` is the one place the limits
are written), and report the problem as input to fix, the same on both databases.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Integer, String, TypeDecorator
from sqlalchemy.types import TypeEngine

PG_INT = (-(2**31), 2**31 - 1)
PG_BIGINT = (-(2**63), 2**63 - 1)


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_has_nul(v) for v in value)
    return False


def _base(kind: TypeEngine) -> TypeEngine:
    """The database type under a decorator (SQLModel's ``AutoString`` is a ``TypeDecorator`` over ``String``)."""
    return kind.impl_instance if isinstance(kind, TypeDecorator) else kind


def row_problems(model: Any, row: dict[str, Any]) -> list[tuple[str, str]]:
    """(column, problem) for every value of ``row`` that ``model``'s table cannot store on both databases.

    Checked: text longer than its column's length, NUL characters (in text and inside JSON
    values), integers outside the column's range on PostgreSQL.
    """
    problems: list[tuple[str, str]] = []
    for column in model.__table__.columns:
        if column.name not in row:
            continue
        value = row[column.name]
        if value is None:
            continue
        if _has_nul(value):
            problems.append((column.name, "holds a NUL character (\\u0000), which the database cannot store"))
            continue
        kind = _base(column.type)
        if isinstance(value, str) and isinstance(kind, String):
            length = getattr(column.type, "length", None) or kind.length
            if length is not None and len(value) > length:
                problems.append(
                    (column.name, f"is {len(value)} characters long; at most {length} fit (found {_clip(value)})")
                )
        elif isinstance(value, int) and not isinstance(value, bool) and isinstance(kind, Integer):
            low, high = PG_BIGINT if isinstance(kind, BigInteger) else PG_INT
            if not low <= value <= high:
                problems.append((column.name, f"{value} is outside the range the database can store"))
    return problems


def text_problem(model: Any, column: str, value: str) -> str | None:
    """The problem of one text value for ``model.column`` (e.g. a study name given on the command line), or None."""
    found = row_problems(model, {column: value})
    return found[0][1] if found else None


def _clip(value: str) -> str:
    return repr(value if len(value) <= 40 else value[:37] + "...")
