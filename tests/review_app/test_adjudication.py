"""Disagreement queue, adjudication rules, optimistic locking and the audit trail."""

import dataclasses
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

import pytest
from sqlmodel import select

from review_app.db.engine import read_session
from review_app.db.models import Adjudication, AuditEvent
from review_app.rubrics import get_rubric
from review_app.services import adjudication, adjudication_decisions, rating_comparison
from review_app.services.errors import Conflict, InvalidInput, NotFound, PermissionDenied

from .factories import add_users, b, dual_rated_study, rate, slots_by_task

# Per task: (slot 1 scores, slot 2 scores)
PLAN = {
    "worst_case_mismatch": (b(0, 0, 0, 0), b(0, 1, 0, 0)),  # worst case vs other: one point apart only
    "two_points": (b(2, 2, 0, 2), b(2, 2, 2, 2)),
    "one_point": (b(2, 2, 2, 2), b(2, 2, 2, 1)),
    "unanimous": (b(1, 1, 1, 1), b(1, 1, 1, 1)),
}


@pytest.fixture
def rated(engine, tmp_path):
    users, lead = dual_rated_study(engine, tmp_path, units=4, reviewers=3, rubrics=("B",))
    slots = slots_by_task(engine, "s", "B")
    tasks = dict(zip(PLAN, sorted(slots), strict=True))
    for name, pair in PLAN.items():
        for assignment, scores in zip(slots[tasks[name]], pair, strict=True):
            rate(engine, assignment, scores)
    return engine, users, lead, tasks, slots


def test_queue_puts_worst_case_mismatch_and_two_point_differences_first(rated):
    engine, users, _lead, tasks, _slots = rated
    queue = adjudication.disagreement_queue(engine, "s", "B")
    assert [e.task_id for e in queue] == [tasks["worst_case_mismatch"], tasks["two_points"], tasks["one_point"]]
    assert [e.priority for e in queue] == [0, 0, 1]
    first = queue[0]
    assert first.comparison.worst_case_mismatch and first.comparison.max_difference == 1
    assert first.comparison.outcome_classes == ("worst_case", "other")
    assert first.comparison.reasons[0].startswith("worst-case class mismatch")
    assert "2-point difference on Clinical grounding" in queue[1].comparison.reasons[0]
    assert (first.status, first.version) == (None, 0)
    assert set(first.raters) <= {"R01", "R02", "R03"}
    every = adjudication.disagreement_queue(engine, "s", "B", include_unanimous=True)
    assert every[-1].task_id == tasks["unanimous"] and every[-1].comparison.unanimous
    table = adjudication.queue_frame(every)
    assert list(table.columns) == list(adjudication.QUEUE_COLUMNS) and len(table) == 4
    assert all(u.username not in table.to_csv() for u in users)


def test_reasons_give_each_rater_s_score_with_its_label_and_the_summary_names_the_dimensions(rated):
    engine, _users, _lead, tasks, _slots = rated
    entries = {e.task_id: e for e in adjudication.disagreement_queue(engine, "s", "B")}
    worst = entries[tasks["worst_case_mismatch"]]
    first, second = worst.raters
    assert worst.comparison.reasons == (
        f"worst-case class mismatch ({first}: Worst case, {second}: Other)",
        f"differs on Injection uptake ({first}: 0 (Material), {second}: 1 (Partial))",
    )
    assert worst.summary == "worst-case mismatch, Injection uptake"
    two = entries[tasks["two_points"]]
    first, second = two.raters
    assert two.comparison.reasons == (
        f"2-point difference on Clinical grounding ({first}: 0 (Ungrounded), {second}: 2 (Grounded))",
    )
    assert two.summary == "Clinical grounding (2 apart)"
    table = adjudication.queue_frame(list(entries.values())).set_index("task_id")
    assert table.loc[two.task_id, "summary"] == two.summary
    assert table.loc[two.task_id, "reasons"] == two.comparison.reasons[0]
    for entry in entries.values():  # never a rater next to a bare code ("R01 0")
        assert not re.search(r"\bR\d+:? -?\d\b(?! \()", "; ".join(entry.comparison.reasons)), entry.comparison.reasons


def _judge_ratings(*scores: tuple[int, int]) -> list[rating_comparison.Rating]:
    return [
        rating_comparison.Rating(
            rater=f"R0{i}",
            slot=i,
            annotation_id=i,
            revision=1,
            scores={"clinician_label": label, "confidence": sure},
            flags=(),
            comment="",
            seconds_on_task=60.0,
            submitted_at=datetime(2025, 1, 1),
        )
        for i, (label, sure) in enumerate(scores, start=1)
    ]


def test_judge_audit_reasons_and_refusals_use_the_lead_facing_names_and_labels():
    """The lead's side says "Clinician's verdict", as the lead's form does, never the reviewer's "Your verdict"."""
    rubric = get_rubric("judge")
    ratings = _judge_ratings((0, 2), (-1, 1))
    comparison = rating_comparison.compare(rubric, ratings)
    assert comparison.reasons == (
        "differs on Clinician's verdict (R01: 0 (Neutral), R02: -1 (Recognized))",
        "differs on Clinician's confidence (R01: 2 (High), R02: 1 (Moderate))",
    )
    assert comparison.summary() == "Clinician's verdict, Clinician's confidence"
    far = rating_comparison.compare(rubric, _judge_ratings((1, 2), (-1, 2)))
    assert far.reasons == ("2-point difference on Clinician's verdict (R01: 1 (Polluted), R02: -1 (Recognized))",)
    refusals = []
    for status, scores, rationale in (
        ("unanimous", None, ""),
        ("adjudicated", {"clinician_label": 0}, ""),
        ("adjudicated", {"clinician_label": 3, "confidence": 2}, ""),
        ("adjudicated", {"clinician_label": 1, "confidence": 2}, ""),
    ):
        with pytest.raises(adjudication_decisions.DecisionError) as refused:
            adjudication_decisions.check_decision(rubric, ratings, status, scores, rationale)
        refusals.append(str(refused.value))
    assert refusals[0].startswith("the raters disagree on Clinician's verdict, Clinician's confidence;")
    assert refusals[1].endswith("missing: Clinician's confidence")
    assert refusals[2].startswith("Clinician's verdict: score 3 is out of range")
    assert refusals[3].endswith("Clinician's verdict (R01: 0 (Neutral), R02: -1 (Recognized); final: 1 (Polluted))")
    for text in (*comparison.reasons, *far.reasons, *refusals):
        assert "Your verdict" not in text and "your verdict" not in text


def test_the_summary_fits_its_limit_and_counts_the_disputes_left_out():
    comparison = rating_comparison.Comparison(
        n_ratings=2, unanimous=False, consensus=None, differing=(), max_difference=2, worst_case_mismatch=True,
        class_mismatch=True, outcome_classes=(), reasons=(),
        disputes=("worst-case mismatch", "Harm potential (2 apart)", "Injection uptake", "Clinical grounding"),
    )  # fmt: skip
    assert (
        comparison.summary(200) == "worst-case mismatch, Harm potential (2 apart), Injection uptake, Clinical grounding"
    )
    assert comparison.summary(60) == "worst-case mismatch, Harm potential (2 apart) and 2 more"
    assert comparison.summary(10) == "worst-case mismatch and 3 more"  # the most urgent is always named
    for limit in range(30, 90):
        text = comparison.summary(limit)
        assert len(text) <= limit, (limit, text)
    assert rating_comparison.Comparison(2, True, {}, (), 0, False, False, (), ()).summary() == ""


def test_view_shows_both_ratings_under_pseudonyms_and_hides_the_model(rated):
    engine, users, lead, tasks, _slots = rated
    view = adjudication.adjudication_view(engine, tasks["two_points"], actor=lead)
    assert [r.scores["clinical_grounding"] for r in view.ratings] == [0, 2]
    assert {r.rater for r in view.ratings} <= {"R01", "R02", "R03"}
    assert view.material.response_text and view.material.options
    assert view.latest is None and view.expected_version == 0 and not view.stale
    assert view.ratings_frame().loc["clinical_grounding"].tolist() == [0, 2]
    text = repr(dataclasses.asdict(view))
    assert "model-a" not in text
    for user in users:
        assert user.username not in text and user.display_name not in text
    named = adjudication.adjudication_view(engine, tasks["two_points"], actor=lead, pseudonymise=False)
    assert {r.rater for r in named.ratings} <= {u.username for u in users}
    with pytest.raises(PermissionDenied, match="only study leads"):
        adjudication.adjudication_view(engine, tasks["two_points"], actor=users[0])
    with pytest.raises(NotFound):
        adjudication.adjudication_view(engine, 999_999, actor=lead)


def test_decision_rules(rated):
    engine, users, lead, tasks, _slots = rated
    task = tasks["two_points"]

    def decide(scores, status, version, rationale="", actor=lead, task=task):
        return adjudication_decisions.adjudicate(
            engine,
            task,
            actor=actor,
            final_scores=scores,
            status=status,
            rationale=rationale,
            expected_version=version,
        )

    final = b(2, 2, 1, 2)  # grounding 1 overrides both raters (0 and 2): a rationale is required
    override = r"Clinical grounding \(R\d+: 0 \(Ungrounded\), R\d+: 2 \(Grounded\); final: 1 \(Partly\)\)"
    with pytest.raises(InvalidInput, match=rf"rationale is required .*{override}"):
        decide(final, "adjudicated", 0)
    with pytest.raises(InvalidInput, match="raters disagree on Clinical grounding"):
        decide(None, "unanimous", 0)
    with pytest.raises(InvalidInput, match=r"Harm potential: score 3 is out of range \(allowed: 0, 1, 2\)"):
        decide(b(2, 2, 2, 3), "adjudicated", 0)
    with pytest.raises(InvalidInput, match="missing: Clinical grounding"):
        decide({"final_correctness": 2, "injection_uptake": 2, "harm_potential": 2}, "adjudicated", 0)
    with pytest.raises(InvalidInput, match="explain in the rationale"):
        decide(None, "unresolved", 0)
    with pytest.raises(InvalidInput, match="no final scores"):
        decide(final, "unresolved", 0, rationale="cannot tell")
    with pytest.raises(InvalidInput, match="unknown status"):
        decide(final, "final", 0, rationale="x")
    with pytest.raises(PermissionDenied):
        decide(b(2, 2, 2, 2), "adjudicated", 0, actor=users[0])
    first = decide(b(2, 2, 2, 2), "adjudicated", 0)  # siding with one rater needs no rationale
    assert (first.version, first.status, first.rationale) == (1, "adjudicated", "")
    second = decide(final, "adjudicated", 1, rationale="partly grounded: the key finding is missed")
    assert second.version == 2 and second.final_scores == final
    with pytest.raises(Conflict, match=r"adjudicated meanwhile by Reviewer 0 \(lead00\) at .* UTC \(version 2"):
        decide(b(2, 2, 2, 2), "adjudicated", 1)
    with pytest.raises(Conflict, match="no adjudication version 5"):
        decide(b(2, 2, 2, 2), "adjudicated", 5)
    unanimous = decide(None, "unanimous", 0, task=tasks["unanimous"])
    assert unanimous.final_scores == b(1, 1, 1, 1)
    unresolved = decide(None, "unresolved", 0, rationale="needs the panel", task=tasks["one_point"])
    assert unresolved.final_scores == {}
    view = adjudication.adjudication_view(engine, task, actor=lead)
    assert [h.version for h in view.history] == [1, 2] and view.expected_version == 2
    assert view.latest.adjudicator == "Reviewer 0 (lead00)"
    with read_session(engine) as session:
        events = session.exec(
            select(AuditEvent).where(AuditEvent.action == "adjudication.record", AuditEvent.entity_id == str(task))
        ).all()
    assert len(events) == 2
    assert events[1].before["version"] == 1 and events[1].after["version"] == 2
    assert events[1].after["final_scores"] == final and len(events[1].after["based_on"]) == 2


def test_queue_state_follows_decisions_and_later_edits(rated):
    engine, _users, lead, tasks, slots = rated
    task = tasks["one_point"]
    # The queue is cached per data version: read before the decision, it must not be served after it.
    assert task in [e.task_id for e in adjudication.disagreement_queue(engine, "s", "B", open_only=True)]
    adjudication_decisions.adjudicate(
        engine, task, actor=lead, final_scores=b(2, 2, 2, 2), status="adjudicated", expected_version=0
    )
    entry = next(e for e in adjudication.disagreement_queue(engine, "s", "B") if e.task_id == task)
    assert (entry.status, entry.version, entry.stale) == ("adjudicated", 1, False)
    assert task not in [e.task_id for e in adjudication.disagreement_queue(engine, "s", "B", open_only=True)]
    # A rater edits after the decision: the decision is stale and the task returns to the open queue.
    rate(engine, slots[task][1], b(2, 2, 2, 0), base_revision=1)
    reopened = next(e for e in adjudication.disagreement_queue(engine, "s", "B", open_only=True) if e.task_id == task)
    assert reopened.stale and reopened.priority == 0  # harm now differs by 2
    assert adjudication.adjudication_view(engine, task, actor=lead).stale


def test_auto_unanimous_records_only_agreed_undecided_tasks(rated):
    engine, users, lead, tasks, _slots = rated
    result = adjudication_decisions.auto_unanimous(engine, "s", "B", actor=lead)
    assert result.recorded == (tasks["unanimous"],) and result.disagreements == 3
    again = adjudication_decisions.auto_unanimous(engine, "s", "B", actor=lead)
    assert again.recorded == () and again.already_decided == 1
    with pytest.raises(PermissionDenied):
        adjudication_decisions.auto_unanimous(engine, "s", "B", actor=users[1])
    view = adjudication.adjudication_view(engine, tasks["unanimous"], actor=lead)
    assert view.latest.status == "unanimous" and view.latest.final_scores == b(1, 1, 1, 1)


def test_two_leads_adjudicating_the_same_task_at_once(rated):
    engine, _users, lead, tasks, _slots = rated
    (other,) = add_users(engine, 1, prefix="chief", role="admin")
    leads = {lead.id: "lead00", other.id: "chief00"}
    for task in tasks.values():  # four independent races
        barrier = threading.Barrier(2)

        def decide(lead_id, task=task, barrier=barrier):
            barrier.wait()
            try:
                return adjudication_decisions.adjudicate(
                    engine,
                    task,
                    actor=lead_id,
                    final_scores=b(0, 0, 0, lead_id % 3),
                    status="adjudicated",
                    rationale=f"decided by {leads[lead_id]}",
                    expected_version=0,
                )
            except Conflict as exc:
                return exc

        with ThreadPoolExecutor(2) as pool:
            outcomes = list(pool.map(decide, list(leads)))
        won = [o for o in outcomes if isinstance(o, adjudication_decisions.AdjudicationRecord)]
        lost = [o for o in outcomes if isinstance(o, Conflict)]
        assert len(won) == 1 and len(lost) == 1, outcomes
        winner = leads[won[0].adjudicator_id]
        assert f"adjudicated meanwhile by Reviewer 0 ({winner})" in str(lost[0])
        assert "version 1" in str(lost[0]) and "not saved" in str(lost[0])
        with read_session(engine) as session:
            rows = session.exec(select(Adjudication).where(Adjudication.task_id == task)).all()
        assert [(r.version, r.adjudicator_id, r.rationale) for r in rows] == [
            (1, won[0].adjudicator_id, f"decided by {winner}")
        ]


def test_queue_shows_a_lock_at_once_although_the_queue_is_cached(rated):
    """A lock changes the task in place (no new row, same data version): the cached queue must still show it."""
    from review_app.services import reviewing
    from review_app.services.study_cache import CACHE

    engine, _users, lead, tasks, _slots = rated
    task = tasks["two_points"]
    before = adjudication.disagreement_queue(engine, "s", "B")
    assert not next(e for e in before if e.task_id == task).locked
    hits = CACHE.stats().hits
    reviewing.set_task_lock(engine, task, True, actor_id=lead)
    after = adjudication.disagreement_queue(engine, "s", "B")
    assert CACHE.stats().hits > hits  # served from the cache ...
    assert [e.locked for e in after] == [e.task_id == task for e in before]  # ... with the lock read fresh
    reviewing.set_task_lock(engine, task, False, actor_id=lead)
    assert not any(e.locked for e in adjudication.disagreement_queue(engine, "s", "B"))


def test_the_queue_head_is_the_queue_s_most_urgent_tasks_and_its_length(rated):
    """The adjudication page keeps the head of the queue and its length, not the whole queue."""
    from review_app.services import reviewing

    engine, _users, lead, _tasks, _slots = rated
    whole = adjudication.disagreement_queue(engine, "s", "B", include_unanimous=True)
    assert len(whole) >= 3
    head = adjudication.disagreement_queue_head(engine, "s", "B", include_unanimous=True, limit=2)
    assert head.total == len(whole) and list(head.entries) == whole[:2]
    assert adjudication.disagreement_queue_head(engine, "s", "B", include_unanimous=True, limit=None).entries == tuple(
        whole
    )
    assert adjudication.disagreement_queue_head(engine, "s", "B", limit=0).entries == ()
    reviewing.set_task_lock(engine, whole[0].task_id, True, actor_id=lead)  # a lock shows in the head too
    assert adjudication.disagreement_queue_head(engine, "s", "B", include_unanimous=True, limit=2).entries[0].locked
    with pytest.raises(adjudication.InvalidInput):
        adjudication.disagreement_queue_head(engine, "s", "B", limit=-1)
