"""The app's database gate: the engine, or one sentence on the page instead of a traceback.

``app.py`` calls ``require_database`` before anything else on every script run. A database that
cannot be used (no server, wrong user, missing folder, a foreign file or schema) shows the same
sentence the command line prints, and the run stops; nothing is cached, so the next run (a
reload) tries again. A read-only SQLite file opens: everyone can sign in and read, and a notice
on every page says why saving will fail.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st
from sqlalchemy import Engine

from review_app.db.connect import get_engine
from review_app.db.engine import read_only_reason
from review_app.db.errors import DatabaseUnavailable, read_only_sentence, sqlite_path
from review_app.ui.components.text import plain


def require_database() -> Engine:
    """The process-wide engine; on a database fault, the fault's sentence and ``st.stop()``."""
    try:
        engine = get_engine()
    except DatabaseUnavailable as exc:
        st.error(plain(exc), icon=":material/database:")
        st.stop()
    reason = read_only_reason(engine)
    if reason is not None:
        st.warning(plain(read_only_sentence(sqlite_path(engine.url) or engine.url, reason)), icon=":material/lock:")
    return engine


@contextmanager
def database_faults_shown() -> Iterator[None]:
    """Show a database fault met while a page runs (a server gone, a save on a read-only file) as its sentence."""
    try:
        yield
    except DatabaseUnavailable as exc:
        st.error(plain(exc), icon=":material/database:")
