"""The app marks reviewers' page runs as reviewers' requests, and lead pages yield to them (``services.priority``)."""

from __future__ import annotations

from review_app.demo import DEMO_STUDY
from review_app.rubrics import get_rubric
from review_app.services import priority, review_queue, reviewing
from review_app.ui.components import analysis_cache

from .conftest import sign_in
from .panel_support import Panel


def _in_flight_when_called(monkeypatch, module, name: str) -> list[int]:
    """Record how many reviewers' requests are in flight whenever ``module.name`` is called."""
    seen: list[int] = []
    real = getattr(module, name)

    def recorded(*args, **kwargs):
        seen.append(priority.reviewers_in_flight())
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, recorded)
    return seen


def test_the_review_page_and_its_submit_run_as_a_reviewer_s_request(demo_db, monkeypatch):
    at = sign_in("rev01")
    nexts = _in_flight_when_called(monkeypatch, review_queue, "next_assignment")
    submits = _in_flight_when_called(monkeypatch, reviewing, "submit")
    at.switch_page("views/review.py").run()
    assert not at.exception, at.exception
    panel = Panel(at)
    panel.score_all(dict.fromkeys(get_rubric(panel.data["rubric"]).dimension_keys, 1))
    panel.submit()
    assert not at.exception, at.exception
    assert nexts and submits and min(nexts + submits) >= 1
    assert priority.reviewers_in_flight() == 0  # every request's count ended with its run


def test_a_lead_page_is_not_a_reviewer_s_request_and_yields_before_each_figure_and_table(demo_db, monkeypatch):
    at = sign_in("lead01")
    at.session_state["lead_study"] = DEMO_STUDY
    pages = _in_flight_when_called(monkeypatch, analysis_cache, "cached_agreement_page")  # the name the page calls
    yields: list[float] = []
    real = priority.yield_to_reviewers

    def counted(max_wait: float = priority.MAX_WAIT_S) -> float:
        yields.append(max_wait)
        return real(max_wait)

    monkeypatch.setattr(priority, "yield_to_reviewers", counted)
    at.switch_page("views/lead_agreement.py").run()
    assert not at.exception, at.exception
    assert pages == [0]
    figures, tables = len(at.get("plotly_chart")), len(at.dataframe)
    assert figures >= 2 and tables >= 1
    assert len(yields) >= 1 + figures + tables  # the page's start, then every figure and table
