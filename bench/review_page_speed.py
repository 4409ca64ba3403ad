"""Server-side time of the review page script on a large study, against an empty page.

Seeds the same database as ``review_db_speed.py`` (50,000 items, 100 reviewers, 30,000
assignments, 20,000 annotations) on SQLite, then times AppTest runs of the real app script:
the review page as a reviewer sees it (rerun), the rerun after a score key (the panel's event
applied to the draft), and the lead's progress page. The baseline, measured in the same process, is an
empty page in the same app shell (page config, signed-in session, navigation, sidebar) run
through AppTest, so the ratio is what the review page itself adds to a page view; a bare
one-line ``st.write`` script is printed too, for AppTest's own floor. Targets: review page
median under 2x the baseline and under 150 ms.

    .venv/bin/python bench/review_page_speed.py [--items 50000] [--runs 40]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine
from sqlmodel import select
from streamlit.testing.v1 import AppTest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from review_db_speed import seed

from review_app.db.connect import dispose_engines, get_engine
from review_app.db.engine import read_session
from review_app.db.models import Assignment, Reviewer
from review_app.services import accounts, review_queue, sessions
from review_app.services.actors import SYSTEM
from review_app.ui.components.scoring import PANEL_KEY
from review_app.ui.session import CurrentUser

APP = Path(__file__).resolve().parents[1] / "review_app" / "ui" / "app.py"


SHELL = """
import streamlit as st
from review_app.ui.session import current_user, sign_out

st.set_page_config(page_title="medrev review", layout="wide")
STYLE
user = current_user()
page = st.navigation({"Review": [st.Page("empty.py", title="Empty", default=True)]})
with st.sidebar:
    st.markdown(f"**{user.display_name}**  \\n{user.role}")
    st.button("Sign out", on_click=sign_out)
page.run()
"""


# the app's padding rule, which the review page's shell carries
STYLE = """st.html("<style>[data-testid='stMainBlockContainer']{padding-top:2.2rem;padding-bottom:1rem;}</style>")\n"""


def shell_app(folder: Path, *, style: bool = True) -> Path:
    """The review app's shell around an empty page: the baseline a page view cannot go below.

    ``style=False`` leaves the padding rule out.
    """
    (folder / "empty.py").write_text("import streamlit as st\nst.markdown('#### Empty page')\n")
    (folder / "shell.py").write_text(SHELL.replace("STYLE\n", STYLE if style else ""))
    return folder / "shell.py"


@contextmanager
def app_database(name: str) -> Iterator[tuple[Path, str, Engine]]:
    """A scratch folder and a SQLite database ``name`` in it that the app under test uses: ``MEDREV_DATABASE_URL``
    names it for AppTest's scripts and for servers started with this environment. Yields (folder, URL, engine);
    every engine is disposed at the end, before the folder goes."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        url = f"sqlite:///{folder / name}"
        os.environ["MEDREV_DATABASE_URL"] = url
        try:
            yield folder, url, get_engine(url)
        finally:
            dispose_engines()


_script_seconds: list[float] = []


def _time_scripts() -> None:
    """Also record the time the script itself runs (in Streamlit's script thread), without AppTest's
    polling and element-tree parsing around it: the server-side cost of a page view.

    AppTest compiles the page scripts again on every run (a new ``ScriptCache`` per run; the page's
    AST is walked for "magic" each time, tens of ms for the review page), while the server compiles
    each script once for all sessions (the runtime's one ``ScriptCache``). So the runs here share
    one cache, as the server does, and the figures are the page's own work, not AppTest's.
    """
    import streamlit.testing.v1.app_test as app_test
    from streamlit.runtime.scriptrunner import exec_code, script_runner
    from streamlit.runtime.scriptrunner.script_cache import ScriptCache

    shared = ScriptCache()
    app_test.ScriptCache = lambda: shared

    original = exec_code.exec_func_with_error_handling

    def wrapped(func, ctx):
        start = time.perf_counter()
        try:
            return original(func, ctx)
        finally:
            _script_seconds.append(time.perf_counter() - start)

    script_runner.exec_func_with_error_handling = wrapped


def timed(at: AppTest, runs: int, before=None) -> tuple[list[float], list[float]]:
    """(AppTest round trips, script-thread times) of ``runs`` reruns."""
    samples, scripts = [], []
    for n in range(runs):
        if before is not None:
            before(at, n)
        _script_seconds.clear()
        start = time.perf_counter()
        at.run()
        samples.append(time.perf_counter() - start)
        scripts.append(sum(_script_seconds))
        assert not at.exception, at.exception
    return samples, scripts


def _small_database_page(folder: Path, runs: int) -> tuple[list[float], list[float]]:
    """The same review page on a 1,000-item database: shows how much the database size costs."""
    url = f"sqlite:///{folder / 'small.db'}"
    engine = get_engine(url)
    small_dir = folder / "small"
    small_dir.mkdir()
    seed(engine, small_dir, 1_000, pool=500, annotations=400)
    reviewer = reviewer_with_work(engine)
    aid = review_queue.next_assignment(engine, reviewer.id)
    previous = os.environ["MEDREV_DATABASE_URL"]
    os.environ["MEDREV_DATABASE_URL"] = url
    try:
        page = signed_in(AppTest.from_file(str(APP), default_timeout=60), engine, reviewer)
        page.query_params["task"] = str(aid)
        page.switch_page("views/review.py").run()
        return timed(page, runs)
    finally:
        os.environ["MEDREV_DATABASE_URL"] = previous


def reviewer_with_work(engine) -> Reviewer:
    """A reviewer with an assigned task, so the review page opens on a task rather than an empty queue."""
    with read_session(engine) as session:
        return session.exec(
            select(Reviewer)
            .join(Assignment, Assignment.reviewer_id == Reviewer.id)
            .where(Assignment.status == "assigned")
        ).first()


def signed_in(at: AppTest, engine, account: Reviewer) -> AppTest:
    """Sign ``at`` in as ``account`` the way a browser with the session cookie is: a real session token
    that the app resolves at every run (a user put in session state alone is signed out)."""
    token, _nonce = sessions.start(engine, account.id)
    at.session_state["medrev_token"] = token
    return at


def stats(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1000, ordered[int(0.95 * (len(ordered) - 1))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    logging.getLogger("streamlit").setLevel(logging.ERROR)
    _time_scripts()
    with app_database("page.db") as (folder, _url, engine):
        print(f"seeding {args.items:,} items, 100 reviewers, 20,000 annotations ...")
        seed(engine, folder, args.items)
        reviewer = reviewer_with_work(engine)
        aid = review_queue.next_assignment(engine, reviewer.id)
        lead = accounts.create_user(
            engine, accounts.UserProfile(username="bench-lead", display_name="Bench lead", role="lead"), actor=SYSTEM
        )

        bare = AppTest.from_string("import streamlit as st\nst.write('ok')", default_timeout=60)
        bare.run()
        floor = timed(bare, args.runs)
        shell = AppTest.from_file(str(shell_app(folder)), default_timeout=60)
        shell.session_state["medrev_user"] = CurrentUser.of(reviewer)
        shell.run()
        baseline = timed(shell, args.runs)

        page = signed_in(AppTest.from_file(str(APP), default_timeout=60), engine, reviewer)
        page.query_params["task"] = str(aid)
        page.switch_page("views/review.py").run()  # warm-up: imports, first open
        review = timed(page, args.runs)

        dims = ("base_validity", "answer_preservation", "falsehood_clarity")
        panel = json.loads(page.get("bidi_component")[0].proto.json)

        def key(at: AppTest, n: int) -> None:
            """One key as the score panel sends it: an event naming task and dimension (applied + saved)."""
            event = {"t": "score", "src": "bench", "seq": n + 1, "aid": aid, "token": panel["token"], "base": 0}
            at.session_state[PANEL_KEY] = {"events": [event | {"dim": dims[n % 3], "value": n % 3}]}

        scoring = timed(page, args.runs, key)

        small = _small_database_page(folder, args.runs)

        progress = signed_in(AppTest.from_file(str(APP), default_timeout=60), engine, lead)
        progress.switch_page("views/lead_progress.py").run()
        lead_page = timed(progress, max(10, args.runs // 4))

    rows = (
        ("bare st.write script (AppTest floor)", floor),
        ("empty page in the app shell (baseline)", baseline),
        ("review page, rerun", review),
        ("review page, score key + draft save", scoring),
        ("review page, 1,000-item database", small),
        ("lead progress page (15,000 units)", lead_page),
    )
    for title, index in (("AppTest round trip (run() wall time)", 0), ("script thread only (page script)", 1)):
        base = stats(baseline[index])[0]
        print(f"\n{title:<40} {'median ms':>10} {'p95 ms':>10} {'median/baseline':>16}")
        for label, measured in rows:
            median, p95 = stats(measured[index])
            print(f"{label:<40} {median:10.1f} {p95:10.1f} {median / base:16.2f}")
        median = stats(review[index])[0]
        print(
            f"target: review page median < 2x baseline ({median / base:.2f}x: "
            f"{'met' if median < 2 * base else 'MISSED'}) and < 150 ms ({median:.1f} ms: "
            f"{'met' if median < 150 else 'MISSED'})"
        )


if __name__ == "__main__":
    main()
