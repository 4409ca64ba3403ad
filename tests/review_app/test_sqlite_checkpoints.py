"""SQLite checkpoints off the committing connection: ``MEDREV_SQLITE_CHECKPOINTS=background`` (``medrev app``).

By default SQLite copies the write-ahead log into the database file inside the commit that takes the
log past 1,000 pages (a reviewer's submit, in the app). With background checkpoints, commits leave
the log alone up to ``BACKGROUND_AUTOCHECKPOINT_PAGES`` and a thread of the process copies it.
"""

from __future__ import annotations

import time

import pytest

from review_app.config import get_settings
from review_app.db import engine as engines
from review_app.db.engine import checkpoint_now, make_engine

PAGES = 1_500  # more than SQLite's default threshold (1,000 pages), fewer than the background one


def _write_pages(engine, pages: int = PAGES) -> None:
    """Commit about ``pages`` pages of new data, one small transaction at a time (as submits do)."""
    connection = engine.raw_connection()
    try:
        connection.execute("CREATE TABLE IF NOT EXISTS filler (data BLOB)")
        for _ in range(pages // 8):
            connection.execute("BEGIN IMMEDIATE")
            connection.executemany("INSERT INTO filler VALUES (randomblob(4000))", [()] * 8)
            connection.execute("COMMIT")
    finally:
        connection.close()


def _database_pages(path) -> int:
    return path.stat().st_size // 4096


@pytest.fixture
def slow_thread(monkeypatch):
    monkeypatch.setattr(engines, "CHECKPOINT_EVERY_S", 3600.0)  # the thread waits: commits alone


def test_a_commit_past_a_thousand_pages_checkpoints_by_default(tmp_path, slow_thread):
    path = tmp_path / "commit.db"
    engine = make_engine(f"sqlite:///{path}", sqlite_checkpoints="commit")
    try:
        _write_pages(engine)
        assert _database_pages(path) > PAGES // 2  # the commits copied the log into the file
    finally:
        engine.dispose()


def test_background_checkpoints_leave_commits_alone_and_a_checkpoint_copies_the_log(tmp_path, slow_thread):
    path = tmp_path / "background.db"
    engine = make_engine(f"sqlite:///{path}", sqlite_checkpoints="background")
    try:
        with engine.connect() as connection:
            limit = connection.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar()
        assert limit == engines.BACKGROUND_AUTOCHECKPOINT_PAGES
        _write_pages(engine)
        assert _database_pages(path) < 10  # everything is still in the log
        busy, frames, copied = checkpoint_now(engine)
        assert (busy, copied) == (0, frames) and frames > PAGES // 2
        assert _database_pages(path) > PAGES // 2
    finally:
        engine.dispose()


def test_the_background_thread_checkpoints_while_the_engine_lives(tmp_path, monkeypatch):
    monkeypatch.setattr(engines, "CHECKPOINT_EVERY_S", 0.05)
    path = tmp_path / "thread.db"
    engine = make_engine(f"sqlite:///{path}", sqlite_checkpoints="background")
    try:
        _write_pages(engine)
        deadline = time.monotonic() + 10
        while _database_pages(path) <= PAGES // 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _database_pages(path) > PAGES // 2
    finally:
        engine.dispose()


def test_the_setting_is_read_from_the_environment_and_checked(monkeypatch):
    monkeypatch.delenv("MEDREV_SQLITE_CHECKPOINTS", raising=False)
    assert get_settings().sqlite_checkpoints == "commit"
    monkeypatch.setenv("MEDREV_SQLITE_CHECKPOINTS", "Background")
    assert get_settings().sqlite_checkpoints == "background"
    monkeypatch.setenv("MEDREV_SQLITE_CHECKPOINTS", "sometimes")
    with pytest.raises(ValueError, match="MEDREV_SQLITE_CHECKPOINTS must be one of commit, background"):
        get_settings()
