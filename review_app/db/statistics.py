"""Planner statistics after bulk writes.

PostgreSQL plans queries from per-table statistics that only ``ANALYZE`` (or autovacuum, some
time later) refreshes. Right after a bulk import, a pool draw or an assignment run the tables can
hold ten or a thousand times the rows the statistics describe, and the planner then picks nested
loops over "empty" tables: on a 500,000-item study the Progress query took minutes until someone
ran ANALYZE by hand. The services that write many rows at once call :func:`refresh_statistics`
once their transaction has committed, on exactly the tables they touched.

``ANALYZE`` samples a fixed number of rows (30,000 at the default statistics target), so it costs
a fraction of a second whatever the table size, and it takes a lock that neither reads nor writes
wait for: reviewers keep working while it runs. When the server runs without autovacuum
(``autovacuum = off``), it is ``VACUUM (ANALYZE)`` instead: it reads the tables (seconds at panel
scale, under the same lock) and removes the dead row versions bulk updates leave, which nothing
else would. Keep autovacuum on for the rows reviewers update one at a time.

SQLite is left alone: without ``sqlite_stat1`` its planner trusts the indexes, which is what the
review queries need, while a statistics table that went stale after the next import could mislead
it (SQLite never refreshes it on its own).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from review_app.db.models import SQLModel

log = logging.getLogger(__name__)


def refresh_statistics(engine: Engine, tables: Iterable[str]) -> list[str]:
    """``ANALYZE`` the named tables on PostgreSQL (a no-op on SQLite); returns the tables analysed.

    Runs in its own autocommit connection after the caller's write has committed (a failure here
    cannot undo the write; it is logged, and autovacuum will catch up later). Unknown table names
    are refused, so no caller can pass SQL through.
    """
    if engine.dialect.name != "postgresql":
        return []
    known = SQLModel.metadata.tables
    names = list(dict.fromkeys(tables))
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"not medrev tables: {', '.join(unknown)}")
    if not names:
        return []
    preparer = engine.dialect.identifier_preparer
    listed = ", ".join(preparer.quote(name) for name in names)
    try:
        with engine.connect() as connection:
            connection = connection.execution_options(isolation_level="AUTOCOMMIT")
            autovacuum = connection.exec_driver_sql("SHOW autovacuum").scalar() == "on"
            # Without autovacuum nothing ever removes the dead row versions a bulk update leaves (or
            # sets the visibility map index-only scans need): next task then stepped over a
            # reviewer's submitted assignments' dead index entries (14 ms p95 at 500,000 items).
            connection.exec_driver_sql(("ANALYZE " if autovacuum else "VACUUM (ANALYZE) ") + listed)
    except SQLAlchemyError as exc:
        log.warning("ANALYZE %s failed (statistics stay stale until autovacuum): %s", ", ".join(names), exc)
        return []
    return names
