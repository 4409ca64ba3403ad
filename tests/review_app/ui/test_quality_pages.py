"""Plan and Reviewers' quality pages under AppTest: leads plan and see quality, reviewers see none of it."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pandas as pd
import pytest
from sqlmodel import select
from streamlit.testing.v1 import AppTest

from review_app.db.engine import read_session
from review_app.db.models import Assignment, Reviewer, Study, Task
from review_app.demo import DEMO_STUDY
from review_app.rubrics import get_rubric
from review_app.services import gold_tasks, planning, reviewer_monitoring
from tests.review_app.test_quality import HeldFills

from .conftest import APP, sign_in, walk_text

LEAD_ONLY = ("views/lead_plan.py", "views/lead_quality.py")


def _lead_page(page: str, study: str = DEMO_STUDY) -> AppTest:
    at = sign_in("lead01")
    at.session_state["lead_study"] = study
    at.switch_page(page).run(timeout=120)
    assert not at.exception, at.exception
    return at


def _user(db, username: str) -> Reviewer:
    with read_session(db) as session:
        return session.exec(select(Reviewer).where(Reviewer.username == username)).one()


@pytest.mark.parametrize("page", LEAD_ONLY)
def test_reviewer_cannot_reach_the_plan_or_quality_pages(demo_db, page):
    at = sign_in("rev03")
    with pytest.raises(ValueError, match="registered"):
        at.switch_page(page)
    assert all(p not in walk_text(at) for p in ("Reviewers' quality", "lead_quality", "lead_plan"))
    # Run directly (as if reached by URL), the page refuses before reading anything.
    direct = AppTest.from_file(str(APP.parent / page), default_timeout=60)
    direct.session_state["medrev_user"] = at.session_state["medrev_user"]
    direct.session_state["lead_study"] = DEMO_STUDY
    direct.run()
    assert "for study leads" in direct.error[0].value
    assert not direct.dataframe and not direct.metric and not direct.get("plotly_chart") and not direct.button
    text = walk_text(direct)
    for word in ("severity", "gold task", "drift", "Plan", "R01"):
        assert word not in text


def test_lead_plans_keeps_the_plan_and_set_up_checks_the_pool_against_it(demo_db):
    at = _lead_page("views/lead_plan.py")
    at.radio[0].set_value("ac2").run()
    inputs = {n.label: n for n in at.number_input}
    inputs["Expected AC2"].set_value(0.6)
    inputs["Target 95% CI width"].set_value(0.3)
    next(b for b in at.button if b.label == "Plan").click()
    at.run(timeout=180)
    assert not at.exception and not at.error
    metrics = {m.label: m.value for m in at.metric}
    plan = planning.Plan.from_dict(at.session_state["plan_result"][1])
    assert metrics["Units"] == f"{plan.n_tasks:,}" and plan.metric == "ac2" and plan.achieved <= 0.3
    next(b for b in at.button if b.label.startswith("Keep this plan")).click()
    at.run()
    assert [p.to_dict() for p in planning.saved_plans(demo_db, DEMO_STUDY)] == [plan.to_dict()]
    assert "Kept as the ac2 plan" in at.success[0].value
    setup = _lead_page("views/lead_setup.py")
    markdown = " ".join(m.value for m in setup.markdown)
    assert f"Needs **{plan.n_tasks}** units" in markdown
    check = planning.plan_check(demo_db, DEMO_STUDY)
    assert [w.value for w in setup.warning] == list(check.warnings)
    if plan.n_tasks > check.units:
        assert f"draw {plan.n_tasks - check.units} more" in setup.warning[0].value


def _with_severity(at: AppTest) -> AppTest:
    """Rerun the page until severity (computed in the background) is shown."""
    deadline = time.monotonic() + 300
    while any("Computing severity" in c.value for c in at.caption):
        assert time.monotonic() < deadline, "severity was never shown"
        time.sleep(0.2)
        at.run(timeout=120)
    assert not at.exception, at.exception
    return at


def test_quality_page_shows_every_reviewer_and_the_gold_tools(demo_db):
    at = _with_severity(_lead_page("views/lead_quality.py"))
    report = reviewer_monitoring.quality_report(demo_db, _user(demo_db, "lead01"), DEMO_STUDY)
    table = at.dataframe[0].value
    assert list(table["rater"]) == list(report.table()["rater"])
    assert {"severity", "agreement", "median_seconds", "drift_p_value"} <= set(table.columns)
    assert len(at.get("plotly_chart")) == 2  # severity forest and one reviewer's CUSUM
    assert at.get("download_button")
    # Usernames off: pseudonyms only, the ones the exports use.
    at.toggle[0].set_value(False).run()
    assert list(at.dataframe[0].value["rater"]) == list(report.table(real_names=False)["rater"])
    assert set(report.table(real_names=False)["rater"]) <= set(report.pseudonyms.values())


def test_gold_marked_on_the_page_changes_nothing_for_the_reviewer(demo_db):
    """The reviewer's task page is the same before and after the lead makes the task gold."""
    rev = _user(demo_db, "rev01")  # untouched queue in the demo
    lead = _user(demo_db, "lead01")
    unrated = {t[0]: t for t in gold_tasks.unrated_tasks(demo_db, lead, DEMO_STUDY)}  # nobody has rated these
    with read_session(demo_db) as session:
        aid, task_id = next(
            (a, t)
            for a, t in session.exec(
                select(Assignment.id, Task.id)
                .join(Task, Task.id == Assignment.task_id)
                .join(Study, Study.id == Task.study_id)
                .where(Assignment.reviewer_id == rev.id, Study.name == DEMO_STUDY, Task.rubric == "B")
                .order_by(Assignment.id)
            )
            if t in unrated
        )

    def review_page() -> str:
        at = sign_in("rev01")
        at.query_params["task"] = str(aid)
        at.switch_page("views/review.py").run()
        assert not at.exception
        # The score panel carries a fresh submission token per browser session: not part of the page's look.
        return re.sub(r'token\\?": ?\\?"[^"\\]*', "token", walk_text(at))

    before = review_page()
    page = _lead_page("views/lead_quality.py")
    next(s for s in page.selectbox if s.label == "Task").set_value(unrated[task_id])
    page.run()
    for dimension in get_rubric("B").dimensions:
        next(s for s in page.selectbox if s.label == dimension.name).set_value(0)
    next(b for b in page.button if b.label == "Mark as gold").click()
    page.run()
    assert f"Task {task_id} is a gold task." in page.success[0].value
    gold = gold_tasks.gold_tasks(demo_db, lead, DEMO_STUDY)
    assert [(g.task_id, g.source) for g in gold] == [(task_id, "consensus")]
    assert review_page() == before


@pytest.fixture
def held_fills(monkeypatch) -> Iterator[HeldFills]:
    held = HeldFills(monkeypatch)
    yield held
    held.release()


def test_progress_page_raises_the_gold_alert_the_lead_set(demo_db, held_fills):
    from tests.review_app.factories import rate

    lead = _user(demo_db, "lead01")
    task_id, *_ = next(t for t in gold_tasks.unrated_tasks(demo_db, lead, DEMO_STUDY) if t[2] == "B")
    worst = dict.fromkeys(get_rubric("B").dimension_keys, 0)
    gold_tasks.mark_gold(demo_db, lead, DEMO_STUDY, task_id, expected_scores=worst)
    reviewer_monitoring.set_thresholds(
        demo_db, lead, DEMO_STUDY, reviewer_monitoring.QualityThresholds(gold_accuracy_min=0.9, min_gold=1)
    )
    with read_session(demo_db) as session:
        slot = session.exec(select(Assignment).where(Assignment.task_id == task_id)).first()
    rate(demo_db, slot, dict.fromkeys(get_rubric("B").dimension_keys, 2))
    at = _lead_page("views/lead_progress.py")
    # The counts show at once; the alerts are computed in the background (held here until the test has
    # seen the page without them) and shown on a later rerun (the page's polling fragment reruns it in a
    # browser; here the test reruns it).
    assert at.metric[0].label.startswith("Tasks complete, of ")
    assert any("Checking reviewer quality" in c.value for c in at.caption)
    assert not any(w.value.startswith("Reviewer quality:") for w in at.warning)
    held_fills.release()
    deadline = time.monotonic() + 300
    while not any(w.value.startswith("Reviewer quality:") for w in at.warning):
        assert time.monotonic() < deadline, "the alerts were never shown"
        time.sleep(0.2)
        at.run()
    warnings = [w.value for w in at.warning]
    assert any(w.startswith("Reviewer quality:") and "gold scores matched" in w for w in warnings), warnings
    assert not any("Checking reviewer quality" in c.value for c in at.caption)


def test_quality_page_shows_the_rest_at_once_and_severity_when_ready(demo_db, monkeypatch, held_fills):
    """Severity (two harm-model fits) is computed in the background: the page shows every other column
    at once, the same numbers as the full report, then severity on a rerun once it is ready."""
    from review_app.services.study_cache import CACHE
    from review_app.ui.components import quality as component

    CACHE.clear()
    monkeypatch.setattr(component, "REPORT_WAIT_SECONDS", 0.0)
    report = reviewer_monitoring.quality_report(demo_db, _user(demo_db, "lead01"), DEMO_STUDY)
    full = report.table()
    at = _lead_page("views/lead_quality.py")  # severity's fill is held until the test releases it
    first = at.dataframe[0].value
    assert "severity" not in first.columns
    assert any("Computing severity" in c.value for c in at.caption)
    assert len(at.get("plotly_chart")) == 1  # the CUSUM; no severity forest yet
    pd.testing.assert_frame_equal(first.reset_index(drop=True), full[list(first.columns)], check_exact=True)
    held_fills.release()
    at = _with_severity(at)
    pd.testing.assert_frame_equal(at.dataframe[0].value.reset_index(drop=True), full, check_exact=True)
    assert len(at.get("plotly_chart")) == 2
