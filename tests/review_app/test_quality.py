"""Gold tasks, reviewer quality and study plans through the services, on SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import pandas as pd
import pytest
from sqlmodel import select

from review_app.analysis.reviewer_quality import QualityThresholds
from review_app.db.engine import read_session
from review_app.db.models import AuditEvent, GoldTask
from review_app.services import (
    adjudication,
    adjudication_decisions,
    assignment,
    gold_tasks,
    planning,
    review_queue,
    reviewer_monitoring,
    reviewing,
    studies,
)
from review_app.services.actors import SYSTEM
from review_app.services.annotations import annotations_frame
from review_app.services.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from review_app.services.export import export_study
from review_app.services.study_analysis import data_version, study_analysis

from .factories import add_users, b, rate, seed_items, seed_responses, slots_by_task

WORST, SAFE = b(0, 0, 0, 0), b(2, 2, 2, 2)
T = TypeVar("T")


@pytest.fixture
def setup(engine, tmp_path):
    """A pilot study (all units decided unanimously) and a main study drawn over the same items."""
    items = seed_items(engine, tmp_path, 8, subsets=("MEDMISQA",))
    seed_responses(engine, tmp_path, items, models=("model-a",))
    reviewers = add_users(engine, 4)
    (lead,) = add_users(engine, 1, prefix="lead", role="lead")
    studies.create_study(engine, "pilot", rubrics=["B"], actor=SYSTEM)
    studies.set_study_lead(engine, "pilot", lead.username, actor=SYSTEM)
    studies.draw_pool(engine, "pilot", 8, seed=1, actor=SYSTEM)
    assignment.assign(engine, "pilot", raters=2, dual_share=1.0, actor=SYSTEM)
    for k, (_task, slots) in enumerate(sorted(slots_by_task(engine, "pilot", "B").items())):
        for slot in slots:
            rate(engine, slot, WORST if k % 2 else SAFE)
    adjudication_decisions.auto_unanimous(engine, "pilot", "B", actor=lead)
    studies.create_study(engine, "main", rubrics=["B"], actor=SYSTEM)
    studies.set_study_lead(engine, "main", lead.username, actor=SYSTEM)
    studies.draw_pool(engine, "main", 8, seed=2, actor=SYSTEM)
    return engine, reviewers, lead


def _main_tasks(engine):
    with read_session(engine) as session:
        from review_app.db.models import Study, Task

        study = session.exec(select(Study).where(Study.name == "main")).one()
        return session.exec(select(Task).where(Task.study_id == study.id).order_by(Task.id)).all()


def test_gold_from_another_studys_decisions_is_left_out_of_every_analysis(setup, tmp_path):
    engine, _reviewers, lead = setup
    candidates = gold_tasks.gold_candidates(engine, lead, "main")
    assert len(candidates) == 8 and {c.source_study for c in candidates} == {"pilot"}
    assert {c.status for c in candidates} == {"unanimous"}
    chosen = candidates[:3]
    for candidate in chosen:
        info = gold_tasks.mark_gold(engine, lead, "main", candidate.task_id)
        assert info.source == "adjudication" and info.expected_scores == candidate.expected_scores
    version = data_version(engine, "main")
    assignment.assign(engine, "main", raters=2, dual_share=1.0, actor=SYSTEM)
    gold_ids = {c.task_id for c in chosen}
    # Served like any task: every gold task gets two reviewers, like the others.
    slots = slots_by_task(engine, "main", "B")
    assert all(len(slots[t]) == 2 for t in gold_ids)
    for task_slots in slots.values():
        for slot in task_slots:
            rate(engine, slot, SAFE)
    frame = annotations_frame(engine, "main")
    assert set(frame["task_id"]).isdisjoint(gold_ids) and len(frame) == 2 * 5
    only = annotations_frame(engine, "main", gold="only", pseudonymise=False)
    assert set(only["task_id"]) == gold_ids and len(only) == 6
    assert len(annotations_frame(engine, "main", gold="include")) == 16
    assert data_version(engine, "main") != version
    analysis = study_analysis(engine, "main", n_boot=0)
    assert analysis.agreement["B"]["harm_potential"].n_units == 5
    assert {e.task_id for e in adjudication.disagreement_queue(engine, "main", "B", include_unanimous=True)} == set(
        frame["task_id"]
    )
    result = export_study(engine, "main", tmp_path / "export", formats="csv")
    exported = (result.out_dir / "adjudicated_labels_B.csv").read_text()
    raw = (result.out_dir / "raw_annotations.csv").read_text()
    for task_id in gold_ids:
        assert f"\n{task_id}," not in exported and f"\n{task_id}," not in raw
    # The reviewer-quality report is where the gold ratings go.
    report = reviewer_monitoring.quality_report(engine, lead, "main")
    table = report.table().set_index("rater")
    rated_gold = only.groupby("rater")["task_id"].nunique()
    for username, count in rated_gold.items():
        assert table.loc[username, "gold_tasks"] == count
    assert report.n_gold_tasks == 3
    # Gold tasks expected WORST half the time (pilot), everyone scored SAFE: accuracy below 1 for those.
    expected = {c.task_id: c.expected_scores for c in chosen}
    for username, part in only.groupby("rater"):
        matches = sum(
            int(row[d] == expected[row["task_id"]][d]) for _, row in part.iterrows() for d in expected[row["task_id"]]
        )
        assert table.loc[username, "gold_accuracy"] == pytest.approx(matches / (4 * len(part)))


def test_gold_is_invisible_on_the_review_path(setup):
    engine, _reviewers, lead = setup
    assignment.assign(engine, "main", raters=1, dual_share=0.0, actor=SYSTEM)
    slots = slots_by_task(engine, "main", "B")
    task_id, (slot,) = next(iter(sorted(slots.items())))
    before = reviewing.open_task(engine, slot.id, slot.reviewer_id)
    gold_tasks.mark_gold(engine, lead, "main", task_id, expected_scores=WORST)
    after = reviewing.open_task(engine, slot.id, slot.reviewer_id)
    assert dataclasses.asdict(before) | {"status": "x"} == dataclasses.asdict(after) | {"status": "x"}
    queue = review_queue.queue(engine, slot.reviewer_id)
    assert sum(row.open for row in queue) == sum(1 for s in slots.values() if s[0].reviewer_id == slot.reviewer_id)


def test_consensus_gold_is_validated_and_audited(setup):
    engine, _reviewers, lead = setup
    task = _main_tasks(engine)[0]
    with pytest.raises(InvalidInput, match="out of range"):
        gold_tasks.mark_gold(engine, lead, "main", task.id, expected_scores=b(3, 0, 0, 0))
    with pytest.raises(InvalidInput, match="missing"):
        gold_tasks.mark_gold(engine, lead, "main", task.id, expected_scores={"final_correctness": 1})
    info = gold_tasks.mark_gold(engine, lead, "main", task.id, expected_scores=b(1, 0, 2, 0))
    assert info.source == "consensus" and info.source_task_id is None
    with pytest.raises(Conflict, match="already a gold task"):
        gold_tasks.mark_gold(engine, lead, "main", task.id, expected_scores=SAFE)
    assert [g.task_id for g in gold_tasks.gold_tasks(engine, lead, "main")] == [task.id]
    assert task.id not in {c.task_id for c in gold_tasks.gold_candidates(engine, lead, "main")}
    assert task.id not in {t[0] for t in gold_tasks.unrated_tasks(engine, lead, "main")}
    gold_tasks.unmark_gold(engine, lead, "main", task.id)
    with read_session(engine) as session:
        actions = [e.action for e in session.exec(select(AuditEvent).order_by(AuditEvent.id)) if e.entity == "task"]
        assert session.get(GoldTask, task.id) is None
    assert actions[-2:] == ["gold.mark", "gold.unmark"]
    with pytest.raises(NotFound):
        gold_tasks.unmark_gold(engine, lead, "main", task.id)


def test_gold_cannot_move_rated_work_in_or_out_of_the_analysis(setup):
    engine, _reviewers, lead = setup
    first, second = _main_tasks(engine)[:2]
    gold_tasks.mark_gold(engine, lead, "main", first.id, expected_scores=SAFE)
    assignment.assign(engine, "main", raters=1, dual_share=0.0, actor=SYSTEM)
    slots = slots_by_task(engine, "main", "B")
    rate(engine, slots[first.id][0], SAFE)
    rate(engine, slots[second.id][0], SAFE)
    with pytest.raises(Conflict, match="stays gold"):
        gold_tasks.unmark_gold(engine, lead, "main", first.id)
    with pytest.raises(Conflict, match="already has 1 submitted rating"):
        gold_tasks.mark_gold(engine, lead, "main", second.id, expected_scores=SAFE)


def test_marking_gold_without_a_decision_elsewhere_is_refused(engine, tmp_path):
    items = seed_items(engine, tmp_path, 3, subsets=("MEDMISQA",))
    seed_responses(engine, tmp_path, items, models=("model-a",))
    (lead,) = add_users(engine, 1, prefix="lead", role="lead")
    studies.create_study(engine, "solo", rubrics=["B"], actor=SYSTEM)
    studies.set_study_lead(engine, "solo", lead.username, actor=SYSTEM)
    studies.draw_pool(engine, "solo", 3, seed=1, actor=SYSTEM)
    unrated = gold_tasks.unrated_tasks(engine, lead, "solo")
    assert len(unrated) == 3 and gold_tasks.unrated_tasks(engine, lead, "solo", limit=2) == unrated[:2]  # pool order
    (task_id, _unit, _rubric), *_ = unrated
    assert gold_tasks.gold_candidates(engine, lead, "solo") == []
    with pytest.raises(InvalidInput, match="enter the consensus scores"):
        gold_tasks.mark_gold(engine, lead, "solo", task_id)


def test_only_active_leads_see_or_change_quality(setup):
    engine, reviewers, lead = setup
    reviewer = reviewers[0]
    task = _main_tasks(engine)[0]
    calls = [
        lambda who: reviewer_monitoring.quality_report(engine, who, "main"),
        lambda who: reviewer_monitoring.check_lead(engine, who),
        lambda who: gold_tasks.gold_tasks(engine, who, "main"),
        lambda who: gold_tasks.gold_candidates(engine, who, "main"),
        lambda who: gold_tasks.unrated_tasks(engine, who, "main"),
        lambda who: gold_tasks.mark_gold(engine, who, "main", task.id, expected_scores=SAFE),
        lambda who: reviewer_monitoring.set_thresholds(engine, who, "main", QualityThresholds()),
        lambda who: planning.save_plan(engine, who, "main", planning.plan_rate(0.3, 0.2, simulations=10)),
    ]
    for call in calls:
        with pytest.raises(PermissionDenied):
            call(reviewer)
        with pytest.raises(PermissionDenied):
            call(None)
    with read_session(engine) as session:
        assert session.exec(select(GoldTask)).first() is None  # nothing was written
    # A lead who was deactivated (or demoted) since signing in is refused at the next call.
    from review_app.services import accounts

    accounts.set_active(engine, lead.username, False, actor=SYSTEM)
    for call in calls:
        with pytest.raises(PermissionDenied, match="active"):
            call(lead)


def test_thresholds_are_kept_with_the_study_and_drive_alerts(setup):
    engine, _reviewers, lead = setup
    assert reviewer_monitoring.thresholds(engine, "main") == QualityThresholds()
    values = QualityThresholds(drift_alpha=0.05, gold_accuracy_min=0.9, min_gold=1)
    reviewer_monitoring.set_thresholds(engine, lead, "main", values)
    assert reviewer_monitoring.thresholds(engine, "main") == values
    # One gold task rated against the expectation by a reviewer: a gold alert at min_gold 1.
    task = _main_tasks(engine)[0]
    gold_tasks.mark_gold(engine, lead, "main", task.id, expected_scores=WORST)
    assignment.assign(engine, "main", raters=1, dual_share=0.0, actor=SYSTEM)
    slot = slots_by_task(engine, "main", "B")[task.id][0]
    assert reviewer_monitoring.quality_alerts(engine, lead, "main") == []  # cached for this data version
    rate(engine, slot, SAFE)
    alerts = reviewer_monitoring.quality_alerts(engine, lead, "main")  # the submit moved the version: not the cached []
    assert [a["kind"] for a in alerts] == ["gold"]
    # The alerts-only report (no harm model) alerts exactly as the full report, cached or not.
    full = reviewer_monitoring.quality_report(engine, lead, "main").quality.alerts
    assert reviewer_monitoring.cached_quality_alerts(engine, lead, "main") == full
    assert reviewer_monitoring.cached_quality_report(engine, lead, "main").quality.alerts == full
    assert reviewer_monitoring.cached_quality_alerts(engine, lead, "main") == full  # read from the full report now
    with read_session(engine) as session:
        from review_app.db.models import Reviewer

        username = session.get(Reviewer, slot.reviewer_id).username
    assert alerts[0]["reviewer"] == username and "0% of gold scores" in alerts[0]["message"]
    csv_text = reviewer_monitoring.quality_csv(reviewer_monitoring.quality_report(engine, lead, "main")).decode()
    assert username not in csv_text and "R0" in csv_text.splitlines()[1]


def test_plans_are_kept_and_the_pool_is_checked_against_them(setup):
    engine, _reviewers, lead = setup
    assert planning.plan_check(engine, "main").plans == ()
    rate_plan = planning.plan_rate(0.3, 0.3, simulations=20)
    ac2_plan = planning.plan_ac2(0.7, 0.9, tasks=8, simulations=20)
    planning.save_plan(engine, lead, "main", rate_plan)
    planning.save_plan(engine, lead, "main", ac2_plan, pilot="pilot")
    kept = planning.saved_plans(engine, "main")
    assert [p.metric for p in kept] == ["rate", "ac2"] and kept[0] == rate_plan
    check = planning.plan_check(engine, "main")
    assert check.units == 8 and check.needed_tasks == max(rate_plan.n_tasks, 8)
    assert any(f"the plan needs {rate_plan.n_tasks}" in w for w in check.warnings)
    assignment.assign(engine, "main", raters=2, dual_share=0.0, actor=SYSTEM)
    check = planning.plan_check(engine, "main")
    assert check.assigned_units == 8 and check.dual_units == 0
    assert any("multi-rated; the plan needs" in w for w in check.warnings)
    with read_session(engine) as session:
        events = [e for e in session.exec(select(AuditEvent)) if e.action == "study.plan"]
    assert len(events) == 2 and json.dumps(events[1].after)


def test_plans_from_a_pilot_study(setup):
    engine, _reviewers, _lead = setup
    rate_plan = planning.make_plan(
        engine, planning.PlanRequest(metric="rate", ci_width=0.3, pilot="pilot", simulations=50, workers=1)
    )
    assert rate_plan.assumptions["expected"] == 0.5  # half the pilot's tasks were worst case
    assert rate_plan.seconds_per_rating is None  # the factory's submissions record no time on task
    ac2_plan = planning.make_plan(
        engine,
        planning.PlanRequest(metric="ac2", ci_width=0.5, pilot="pilot", score="harm_potential", simulations=30),
    )
    assert "resampling the pilot's 8" in ac2_plan.notes[0]
    with pytest.raises(InvalidInput, match="no dimension 'nonsense'"):
        planning.make_plan(engine, planning.PlanRequest(metric="ac2", ci_width=0.5, pilot="pilot", score="nonsense"))
    with pytest.raises(NotFound):
        planning.make_plan(engine, planning.PlanRequest(metric="rate", ci_width=0.3, pilot="nope"))
    with pytest.raises(InvalidInput, match="odds ratio"):
        planning.make_plan(engine, planning.PlanRequest(metric="harm-or"))


def test_severity_and_pilot_plans_use_the_analysis_pages_harm_model_and_options(engine):
    """Reviewer severity and a pilot's harm plan read the study's harm model as the Analysis page fits
    it, under the study's saved options (references, unrated items, penalty) and its Rubric A strata."""
    from review_app.analysis.reviewer_measures import conditional_modes
    from review_app.db.models import Reviewer
    from review_app.demo import DEMO_STUDY, seed_demo_database
    from review_app.services.analysis_options import AnalysisOptions, save_analysis_options

    seed_demo_database(engine)
    with read_session(engine) as session:
        lead = session.exec(select(Reviewer).where(Reviewer.username == "lead01")).one()

    def both():
        analysis = study_analysis(engine, DEMO_STUDY, n_boot=0, pseudonymise=False)
        report = reviewer_monitoring.quality_report(engine, lead, DEMO_STUDY)
        fitted, shown = report.quality.harm_model, analysis.harm_model
        assert fitted is not None and shown is not None
        assert fitted.reference_levels == shown.reference_levels and fitted.penalty == shown.penalty
        assert (fitted.n, fitted.n_groups, fitted.separated_terms) == (shown.n, shown.n_groups, shown.separated_terms)
        for mine, theirs in zip(fitted.terms, shown.terms, strict=True):
            assert mine.name == theirs.name
            assert mine.estimate == pytest.approx(theirs.estimate, abs=1e-6, nan_ok=True)
        modes = conditional_modes(analysis.harm_input, shown)
        table = report.table().set_index("rater")
        assert table["severity"].to_numpy() == pytest.approx(
            modes["severity"].reindex(table.index).to_numpy(), abs=1e-6
        )
        return analysis, report

    paper, _ = both()
    assert paper.harm_model.reference_levels["provenance"] == "neutral"
    excluded = int((~paper.harm_input["in_model"]).sum())
    assert excluded > 0 and paper.harm_model.n == int(paper.harm_input["in_model"].sum())
    chosen = AnalysisOptions(references={"provenance": "authority"}, unrated="level", penalty="normal")
    save_analysis_options(engine, DEMO_STUDY, chosen, actor=lead)
    analysis, _ = both()
    assert analysis.harm_model.reference_levels["provenance"] == "authority"
    assert analysis.harm_model.penalty.key == "normal" and analysis.harm_model.n == paper.harm_model.n + excluded
    # A pilot plan simulates from the same model: its references, penalty and the rows it fitted.
    pilot = planning.harm_pilot(engine, DEMO_STUDY, annotations_frame(engine, DEMO_STUDY), None)
    assert pilot.reference == analysis.harm_model.reference_levels and pilot.penalty == "normal"
    assert len(pilot.tasks) == analysis.harm_input["task_id"].nunique()
    assert set(analysis.harm_model.separated_terms) <= set(pilot.not_estimable) | {pilot.term}


def test_rated_counts_are_asked_in_chunks_whatever_the_number_of_tasks(setup, monkeypatch):
    """A 100,000-task study once sent one IN list of every task id (PostgreSQL takes 65,535 parameters)."""
    engine, _reviewers, lead = setup
    pilot = [slot for slots in slots_by_task(engine, "pilot", "B").values() for slot in slots]
    ids = sorted({slot.task_id for slot in pilot})
    with read_session(engine) as session:
        whole = gold_tasks._submitted(session, ids)
        many = gold_tasks._submitted(session, [*ids, *range(10**7, 10**7 + 70_000)])
    assert whole == dict.fromkeys(ids, 2) and many == whole
    expected = gold_tasks.gold_candidates(engine, lead, "main")
    monkeypatch.setattr(gold_tasks, "_IN_CHUNK", 3)
    assert gold_tasks.gold_candidates(engine, lead, "main") == expected and expected


class HeldFills:
    """Background fills of quality values (``reviewer_monitoring._fill_starts``) held back until the test releases them.

    What a page shows while a fill runs must not depend on whether the machine finished it first.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.gate = threading.Event()
        monkeypatch.setattr(reviewer_monitoring, "_fill_starts", self._wait)

    def _wait(self, tag: str) -> None:
        where = threading.current_thread().name
        assert where.startswith("medrev-fill-"), f"the {tag} fill ran on the caller's thread ({where})"
        assert self.gate.wait(600), "a held background fill was never released"

    def hold(self) -> None:
        self.gate.clear()

    def release(self) -> None:
        self.gate.set()


@pytest.fixture
def held_fills(monkeypatch) -> Iterator[HeldFills]:
    held = HeldFills(monkeypatch)
    yield held
    held.release()  # a test that failed holding leaves no thread waiting


def _until_ready(read: Callable[[], T | None], ready: Callable[[T], bool], what: str) -> T:
    """Ask again until a background fill has delivered (the deadline only ends a test that would hang)."""
    deadline = time.monotonic() + 300
    while (value := read()) is None or not ready(value):
        assert time.monotonic() < deadline, f"{what} never came"
        time.sleep(0.05)
    return value


def test_progress_alerts_are_computed_in_the_background_and_the_last_ones_shown_meanwhile(setup, held_fills):
    """``quality_alerts_if_ready`` never computes on the caller's thread: None the first time, the
    current alerts once the background fill is done, and the last ones (``current=False``) while the
    alerts of newer data are on their way."""
    from review_app.services.study_cache import CACHE

    engine, _reviewers, lead = setup
    CACHE.clear()
    reviewer_monitoring.set_thresholds(engine, lead, "main", QualityThresholds(gold_accuracy_min=0.9, min_gold=1))
    task = _main_tasks(engine)[0]
    gold_tasks.mark_gold(engine, lead, "main", task.id, expected_scores=WORST)
    assignment.assign(engine, "main", raters=1, dual_share=0.0, actor=SYSTEM)
    slot = slots_by_task(engine, "main", "B")[task.id][0]

    def settle() -> reviewer_monitoring.AlertsNow:
        return _until_ready(
            lambda: reviewer_monitoring.quality_alerts_if_ready(engine, lead, "main"),
            lambda now: now.current,
            "the alerts",
        )

    # nothing computed yet; the fill waits
    assert reviewer_monitoring.quality_alerts_if_ready(engine, lead, "main") is None
    held_fills.release()
    assert not settle().alerts
    rate(engine, slot, SAFE)  # a gold task scored against the expectation: a gold alert, on newer data
    held_fills.hold()
    meanwhile = reviewer_monitoring.quality_alerts_if_ready(engine, lead, "main")
    assert meanwhile == reviewer_monitoring.AlertsNow(alerts=(), current=False)  # the last alerts computed, not current
    held_fills.release()
    now = settle()
    assert [a.kind for a in now.alerts] == ["gold"]
    assert now.alerts == reviewer_monitoring.cached_quality_alerts(engine, lead, "main")


def test_the_report_without_severity_comes_at_once_and_the_full_one_in_the_background(engine, held_fills):
    """``quality_report_now`` never fits the harm model on the caller's thread unless asked to wait: the
    report without severity (the same numbers otherwise) at once, the full one once its fill is done."""
    from review_app.db.models import Reviewer
    from review_app.demo import DEMO_STUDY, seed_demo_database
    from review_app.services.study_cache import CACHE

    seed_demo_database(engine)
    with read_session(engine) as session:
        lead = session.exec(select(Reviewer).where(Reviewer.username == "lead01")).one()
    CACHE.clear()
    full = reviewer_monitoring.quality_report(engine, lead, DEMO_STUDY)
    now = reviewer_monitoring.quality_report_now(engine, lead, DEMO_STUDY)  # its severity fill waits
    assert not now.complete
    assert "severity" not in now.report.quality.table and now.report.quality.alerts == full.quality.alerts
    shared = [c for c in now.report.table().columns if c in full.table().columns]
    assert len(shared) == len(now.report.table().columns) > 10
    pd.testing.assert_frame_equal(now.report.table(), full.table()[shared], check_exact=True)
    # asked again: still on its way
    assert not reviewer_monitoring.quality_report_now(engine, lead, DEMO_STUDY).complete
    held_fills.release()
    now = _until_ready(
        lambda: reviewer_monitoring.quality_report_now(engine, lead, DEMO_STUDY),
        lambda now: now.complete,
        "the full report",
    )
    pd.testing.assert_frame_equal(now.report.table(), full.table(), check_exact=True)
    assert now.report is reviewer_monitoring.cached_quality_report(engine, lead, DEMO_STUDY)
