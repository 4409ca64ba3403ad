"""Reads without a transaction on PostgreSQL (``statement_session``), used by a reviewer's next task."""

from __future__ import annotations

from sqlalchemy import text

from review_app.db.engine import read_session, statement_session, write_session


def _in_transaction(session) -> bool:
    """Whether the database connection under ``session`` is inside a transaction now (the driver's view)."""
    driver = session.connection().connection.driver_connection
    if session.get_bind().dialect.name == "postgresql":
        from psycopg.pq import TransactionStatus

        return driver.info.transaction_status != TransactionStatus.IDLE
    return driver.in_transaction


def test_statement_reads_hold_no_transaction_on_postgresql_and_the_pool_goes_back_to_transactions(engine):
    postgres = engine.dialect.name == "postgresql"
    for _ in range(3):  # the pooled connections come back from autocommit as they were
        with statement_session(engine) as session:
            assert session.execute(text("SELECT 1")).scalar_one() == 1
            assert _in_transaction(session) is not postgres  # SQLite: a read session as before
        with read_session(engine) as session:
            session.execute(text("SELECT 1"))
            assert _in_transaction(session)


def test_a_statement_read_sees_what_was_committed_after_its_session_began(engine):
    with write_session(engine) as session:
        session.execute(text("CREATE TABLE probe (n INTEGER)"))
    with statement_session(engine) as reader:
        assert reader.execute(text("SELECT count(*) FROM probe")).scalar_one() == 0
        with write_session(engine) as writer:
            writer.execute(text("INSERT INTO probe VALUES (1)"))
        seen = reader.execute(text("SELECT count(*) FROM probe")).scalar_one()
    # PostgreSQL: each statement its own snapshot; SQLite: one read transaction (its snapshot)
    assert seen == (1 if engine.dialect.name == "postgresql" else 0)
