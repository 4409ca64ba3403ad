"""Lead pages with the per-study cache: first load, rerun, a second session, a rerun after a submit.

Seeds ``review_db_speed``'s database (50,000 items, 100 reviewers) with a dual-rated Rubric A study
of ``--tasks`` tasks, every slot rated with random scores (2 x tasks annotations), then runs the real
app script under AppTest as a study lead: the Agreement and Analysis pages (first load, median of
``--runs`` reruns, a second lead session's first load, the rerun right after one reviewer submits),
the Analysis page's bootstrap CIs when the page offers them, and the process's RSS. Baseline in the
same run: an empty page in the same app shell. Run it from another worktree's venv (e.g. main's) to
get the figures before the cache on the same machine.

Then agreement memory with many reviewers: peak traced memory of ``agreement()`` on ``--wide-tasks``
tasks rated by 2 of 1,000 reviewers each, against the dense units x raters path (the pivoted table
counted per category into Gwet's estimate, and krippendorff on the reliability matrix, as before the
count tables; irrCAC, which that path once called, is no longer installed beside medrev).

    .venv/bin/python bench/lead_cache_speed.py [--tasks 25000] [--runs 5]
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
from sqlalchemy import text, update
from streamlit.testing.v1 import AppTest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from review_db_speed import seed
from review_page_speed import app_database, shell_app

import review_app
from review_app.db.connect import get_engine
from review_app.db.engine import read_session, write_session
from review_app.db.models import Assignment, Reviewer
from review_app.rubrics import RUBRIC_A, ScoreSheet
from review_app.services import reviewing, sessions, studies
from review_app.services.actors import SYSTEM
from review_app.ui.session import CurrentUser

APP = Path(review_app.__file__).resolve().parent / "ui" / "app.py"


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(at: AppTest) -> float:
    start = time.perf_counter()
    at.run()
    seconds = time.perf_counter() - start
    assert not at.exception, at.exception
    assert not [t for t in at.text_input if t.label == "Username"], "not signed in"
    return seconds


def lead_session(lead: CurrentUser, page: str | None) -> AppTest:
    """A signed-in lead's browser session (a real session token, as the sign-in form leaves it)."""
    at = AppTest.from_file(str(APP), default_timeout=600)
    token, _nonce = sessions.start(get_engine(os.environ["MEDREV_DATABASE_URL"]), lead.id)
    at.session_state["medrev_token"] = token
    at.session_state["medrev_user"] = lead
    at.session_state["lead_study"] = "bench"
    if page:
        at.switch_page(f"views/{page}.py")
    return at


def submit_one(engine, n: int) -> None:
    """One reviewer submits one more rating (what moves the study's data version)."""
    with read_session(engine) as session:
        row = session.execute(
            text("SELECT id, reviewer_id FROM assignment WHERE status = 'assigned' ORDER BY id LIMIT 1")
        ).first()
    if row is None:
        return
    sheet = ScoreSheet(rubric="A", scores={k: n % 3 for k in RUBRIC_A.dimension_keys})
    reviewing.submit(engine, row.id, row.reviewer_id, sheet, client_token=f"bench-{n}", base_revision=0)


def page_figures(engine, lead: CurrentUser, page: str, runs: int) -> dict[str, float]:
    first = lead_session(lead, page)
    figures = {"first_load_s": run(first)}
    figures["rerun_s"] = statistics.median(run(first) for _ in range(runs))
    figures["second_session_first_load_s"] = run(lead_session(lead, page))
    submit_one(engine, hash(page) % 1000)
    figures["rerun_after_submit_s"] = run(first)
    toggles = [t for t in first.toggle if "Bootstrap" in t.label]
    if toggles:
        toggles[0].set_value(True)
        figures["bootstrap_first_s"] = run(first)
        figures["bootstrap_rerun_s"] = statistics.median(run(first) for _ in range(runs))
    return figures


def wide_agreement_memory(n_tasks: int, n_raters: int = 1000) -> dict[str, float]:
    """Peak traced MB and seconds of agreement() vs the dense path, 1,000 reviewers."""
    import krippendorff

    from review_app.analysis.agreement import agreement, gwet_estimate
    from review_app.analysis.agreement_counts import category_counts, ratings_matrix

    rng = np.random.default_rng(3)
    raters = np.array([rng.choice(n_raters, 2, replace=False) for _ in range(n_tasks)]).ravel()
    latent = rng.integers(0, 3, n_tasks).repeat(2)
    noise = (rng.random(2 * n_tasks) < 0.3) * rng.integers(-1, 2, 2 * n_tasks)
    data = pd.DataFrame(
        {
            "task_id": np.arange(n_tasks).repeat(2),
            "rater": [f"R{r:04d}" for r in raters],
            "score": np.clip(latent + noise, 0, 2).astype(float),
        }
    )

    def traced(func) -> tuple[float, float]:
        tracemalloc.start()
        start = time.perf_counter()
        func()
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        return peak, seconds

    def dense() -> None:
        matrix = ratings_matrix(data, "task_id", "rater", "score")
        gwet_estimate(category_counts(matrix, [0, 1, 2]), [0, 1, 2], "ordinal", 0.95)
        reliability = matrix.to_numpy(dtype=float).T
        krippendorff.alpha(reliability_data=reliability, value_domain=[0.0, 1.0, 2.0], level_of_measurement="ordinal")

    counts_mb, counts_s = traced(lambda: agreement(data, "score"))
    dense_mb, dense_s = traced(dense)
    return {"counts_peak_mb": counts_mb, "counts_s": counts_s, "dense_peak_mb": dense_mb, "dense_s": dense_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=25_000)
    parser.add_argument("--items", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--wide-tasks", type=int, default=5_000)
    args = parser.parse_args()
    logging.getLogger("streamlit").setLevel(logging.ERROR)
    print(f"code under test: {APP.parents[2]}")
    with app_database("lead.db") as (folder, _url, engine):
        n_annotations = 2 * args.tasks - 200  # a few slots stay open for the submits below
        print(f"seeding {args.items:,} items, {args.tasks:,} dual-rated tasks, {n_annotations:,} annotations ...")
        seed(engine, folder, args.items, pool=args.tasks, annotations=n_annotations)
        with write_session(engine) as session:
            # The seed rates everything 2; random scores give agreement something to compute. The
            # append-only trigger is lifted for this one bench-time rewrite and put back.
            triggers = session.execute(
                text("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'annotation_score'")
            ).all()
            for name, _sql in triggers:
                session.execute(text(f'DROP TRIGGER "{name}"'))
            session.execute(text("UPDATE annotation_score SET value = abs(random()) % 3"))
            for _name, sql in triggers:
                session.execute(text(sql))
            lead_row = session.execute(
                update(Reviewer).where(Reviewer.username == "bench000").values(role="lead").returning(Reviewer.id)
            ).scalar_one()
            session.execute(update(Assignment).where(Assignment.reviewer_id == lead_row).values(reviewer_id=lead_row))
        studies.set_study_lead(engine, "bench", "bench000", actor=SYSTEM)
        with read_session(engine) as session:
            lead = CurrentUser.of(session.get(Reviewer, lead_row))

        shell = AppTest.from_file(str(shell_app(folder, style=False)), default_timeout=60)
        shell.session_state["medrev_user"] = lead
        run(shell)
        baseline = statistics.median(run(shell) for _ in range(args.runs))
        rss_before = rss_mb()
        results = {"empty_page_s": baseline}
        for page in ("lead_agreement", "lead_analysis"):
            figures = page_figures(engine, lead, page, args.runs)
            results.update({f"{page}_{k}": v for k, v in figures.items()})
        results["rss_mb"] = rss_mb()
        results["rss_growth_mb"] = rss_mb() - rss_before
        try:
            from review_app.services.study_cache import CACHE

            stats = CACHE.stats()
            results["cache_mb"] = stats.nbytes / 2**20
            results["cache_values"] = stats.values
        except ImportError:  # the code before the cache
            pass
    print(f"\n{'figure':<48} {'value':>10}")
    for key, value in results.items():
        unit = "" if key.startswith("cache_values") else (" MB" if key.endswith("_mb") else " s")
        print(f"{key:<48} {value:10.3f}{unit}")
    for page in ("lead_agreement", "lead_analysis"):
        ratio = results[f"{page}_rerun_s"] / baseline
        print(f"{page} rerun / empty page: {ratio:.1f}x")
    wide = wide_agreement_memory(args.wide_tasks)
    print(f"\nagreement, {args.wide_tasks:,} tasks x 2 of 1,000 reviewers:")
    print(f"  count tables: peak {wide['counts_peak_mb']:8.1f} MB, {wide['counts_s']:.2f} s")
    print(f"  dense path  : peak {wide['dense_peak_mb']:8.1f} MB, {wide['dense_s']:.2f} s")
    print(f"  dense / counts memory: {wide['dense_peak_mb'] / max(wide['counts_peak_mb'], 1e-9):.0f}x")


if __name__ == "__main__":
    main()
