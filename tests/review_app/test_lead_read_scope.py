"""A lead reads only the studies they lead: every read service a lead page calls checks the acting user.

Two panels, A and B, each with its own lead, on SQLite and PostgreSQL: the lead of A is refused every
read of B (``PermissionDenied``, cached results included: the check runs before the cache is read), an
admin and the operator read both, a lead demoted or deactivated since signing in is refused
(``SessionEnded``), and each role lists only the studies it may open (docs/security.md, "Roles and
permissions").
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from review_app.services import (
    accounts,
    adjudication,
    adjudication_decisions,
    analysis_options,
    assignment,
    cached_analyses,
    compute_workers,
    export,
    flags,
    gold_tasks,
    planning,
    progress,
    reviewer_monitoring,
    studies,
)
from review_app.services.actors import SYSTEM, Actor
from review_app.services.errors import InvalidInput, PermissionDenied, SessionEnded
from review_app.services.study_cache import CACHE, data_version

from .factories import add_users, b, rate, seed_items, seed_responses, slots_by_task

SAFE, WORST = b(2, 2, 2, 2), b(0, 0, 0, 0)
UNITS = 6

Read = Callable[[object, str, Actor], object]


def _first_task(engine, study: str) -> int:
    return min(slots_by_task(engine, study, "B"))


def _rate_all(engine, study: str, *, unanimous: bool) -> None:
    for k, (_task, slots) in enumerate(sorted(slots_by_task(engine, study, "B").items())):
        for n, slot in enumerate(slots):
            worst = k % 2 == 0 if unanimous else (k + n) % 2 == 0
            rate(engine, slot, WORST if worst else SAFE)


def _name(read: Callable) -> str:
    return f"{read.__module__.rpartition('.')[2]}.{read.__name__}"


def _by_keyword(*reads: Callable) -> dict[str, Read]:
    """Reads called ``read(engine, study, actor=who)``."""
    return {_name(read): (lambda db, s, who, read=read: read(db, s, actor=who)) for read in reads}


def _by_position(*reads: Callable) -> dict[str, Read]:
    """Reads called ``read(engine, who, study)``."""
    return {_name(read): (lambda db, s, who, read=read: read(db, who, s)) for read in reads}


# Every read a lead page makes for one study's data, by the service that serves it.
READS: dict[str, Read] = {
    **_by_keyword(
        studies.get_study,
        studies.study_leads,
        studies.check_lead_of,
        progress.study_progress,
        cached_analyses.cached_analysis,
        cached_analyses.study_agreement,
        cached_analyses.rubrics_and_version,
        reviewer_monitoring.thresholds,
        flags.flag_counts,
        analysis_options.analysis_options,
        planning.saved_plans,
        planning.plan_check,
        planning.study_rubrics,
        planning.kept_in_units,
        planning.measured_time_per_task,
        planning.default_time_per_task,
        export.pending_tasks,
    ),
    **_by_position(
        reviewer_monitoring.quality_report,
        reviewer_monitoring.cached_quality_report,
        reviewer_monitoring.cached_quality_alerts,
        reviewer_monitoring.quality_alerts,
        gold_tasks.gold_tasks,
        gold_tasks.gold_candidates,
        gold_tasks.unrated_tasks,
    ),
    "cached_analysis, complete tasks": lambda db, s, who: cached_analyses.cached_analysis(
        db, s, pending="exclude", actor=who
    ),
    "cached_rubric_a_intervals": lambda db, s, who: cached_analyses.cached_rubric_a_intervals(
        db, s, n_boot=20, actor=who
    ),
    "agreement_of_version": lambda db, s, who: cached_analyses.agreement_of_version(
        db, s, data_version(db, s), ["B"], "ordinal", 2, actor=who
    ),
    "flag_queue": lambda db, s, who: flags.flag_queue(db, s, actor=who, statuses=None),
    "disagreement_queue_head": lambda db, s, who: adjudication.disagreement_queue_head(
        db, s, "B", include_unanimous=True, actor=who
    ),
    "disagreement_queue": lambda db, s, who: adjudication.disagreement_queue(db, s, "B", actor=who),
    "adjudication_view": lambda db, s, who: adjudication.adjudication_view(db, _first_task(db, s), actor=who),
    "make_plan with a pilot": lambda db, s, who: planning.make_plan(
        db, planning.PlanRequest(metric="rate", ci_width=0.5, pilot=s, simulations=20, workers=1), actor=who
    ),
}
# These start a computation in the background when nothing is cached: called only where they refuse.
REFUSED_ONLY: dict[str, Read] = _by_position(
    reviewer_monitoring.quality_alerts_if_ready, reviewer_monitoring.quality_report_now
)


@pytest.fixture(autouse=True)
def in_process(monkeypatch):
    """The statistics computed in this process (no worker to start), from an empty cache."""
    monkeypatch.setenv(compute_workers.WORKERS_SETTING, "0")
    CACHE.clear()


@pytest.fixture
def panels(engine, tmp_path):
    """Studies A and B over the same units, each rated by its own panel and led by its own lead.

    B's raters agree on every task and its lead recorded the unanimous decisions; study C, also led
    by the lead of A, is drawn over the same units and not rated yet (gold candidates).
    """
    items = seed_items(engine, tmp_path, UNITS, subsets=("MEDMISQA",))
    seed_responses(engine, tmp_path, items, models=("model-a",))
    add_users(engine, 3)
    lead_a, lead_b = add_users(engine, 2, prefix="lead", role="lead")
    (admin,) = add_users(engine, 1, prefix="admin", role="admin")
    for name, lead in (("A", lead_a), ("B", lead_b), ("C", lead_a)):
        studies.create_study(engine, name, rubrics=["B"], actor=Actor(lead.id))
        studies.draw_pool(engine, name, UNITS, seed=1, actor=SYSTEM)
    for name in ("A", "B"):
        assignment.assign(engine, name, raters=2, dual_share=1.0, actor=SYSTEM)
    _rate_all(engine, "A", unanimous=False)
    _rate_all(engine, "B", unanimous=True)
    adjudication_decisions.auto_unanimous(engine, "B", "B", actor=Actor(lead_b.id))
    return engine, Actor(lead_a.id), Actor(lead_b.id), Actor(admin.id)


def test_a_lead_reads_only_the_studies_they_lead(panels):
    engine, lead_a, lead_b, _admin = panels
    for name, read in READS.items():
        read(engine, "B", lead_b)  # B's own lead: whatever can be cached for B is cached now
        with pytest.raises(PermissionDenied, match="not a lead of the study 'B'") as refused:
            read(engine, "B", lead_a)
        assert not isinstance(refused.value, SessionEnded), name
        read(engine, "A", lead_a)
        with pytest.raises(PermissionDenied, match="not a lead of the study 'A'"):
            read(engine, "A", lead_b)
    for read in REFUSED_ONLY.values():
        with pytest.raises(PermissionDenied, match="not a lead of the study 'B'"):
            read(engine, "B", lead_a)


def test_an_admin_and_the_operator_read_every_study(panels):
    engine, _lead_a, _lead_b, admin = panels
    for read in READS.values():
        for study in ("A", "B"):
            read(engine, study, admin)
            read(engine, study, SYSTEM)
    assert progress.study_progress(engine, "B", actor=admin) == progress.study_progress(engine, "B")


def test_a_demoted_or_deactivated_lead_is_refused(panels):
    engine, lead_a, _lead_b, _admin = panels
    account = accounts.get_user_by_id(engine, lead_a.id)
    signed_in = Actor(account.id, account.session_version)  # as a browser session holds it
    for read in READS.values():
        read(engine, "A", signed_in)
    accounts.set_role(engine, account.username, "reviewer", actor=SYSTEM)
    for read in {**READS, **REFUSED_ONLY}.values():
        with pytest.raises(SessionEnded):
            read(engine, "A", signed_in)
        with pytest.raises(PermissionDenied):  # the account itself, without a session: a reviewer now
            read(engine, "A", Actor(account.id))
    (other,) = add_users(engine, 1, prefix="lead-c", role="lead")
    studies.set_study_lead(engine, "A", other.username, actor=SYSTEM)
    READS["progress.study_progress"](engine, "A", Actor(other.id))
    accounts.set_active(engine, other.username, False, actor=SYSTEM)
    for read in {**READS, **REFUSED_ONLY}.values():
        with pytest.raises(SessionEnded):
            read(engine, "A", Actor(other.id))


def _names(engine, actor) -> list[str]:
    return [s.name for s in studies.list_studies(engine, actor=actor)]


def test_each_role_lists_only_the_studies_it_may_open(panels):
    engine, lead_a, lead_b, admin = panels
    (reviewer,) = add_users(engine, 1, prefix="solo")
    (idle,) = add_users(engine, 1, prefix="idle", role="lead")
    assert _names(engine, lead_a) == ["A", "C"]
    assert _names(engine, lead_b) == ["B"]
    assert _names(engine, admin) == _names(engine, SYSTEM) == _names(engine, Actor(None)) == ["A", "B", "C"]
    assert _names(engine, Actor(idle.id)) == []  # a lead of no study
    assert _names(engine, Actor(reviewer.id)) == []
    studies.set_study_lead(engine, "A", "lead01", actor=lead_a)
    assert _names(engine, lead_b) == ["A", "B"]
    studies.set_study_lead(engine, "A", "lead01", actor=admin, lead=False)
    assert _names(engine, lead_b) == ["B"]
    accounts.set_active(engine, "lead01", False, actor=SYSTEM)
    with pytest.raises(SessionEnded):
        studies.list_studies(engine, actor=lead_b)


def test_gold_scores_come_only_from_decisions_in_studies_the_lead_leads(panels):
    """B's unanimous decisions are another panel's results: the lead of C is not offered them until they lead B."""
    engine, lead_a, _lead_b, admin = panels
    assert gold_tasks.gold_candidates(engine, lead_a, "C") == []
    task = min(t for t, _unit, _rubric in gold_tasks.unrated_tasks(engine, lead_a, "C"))
    with pytest.raises(InvalidInput, match="no other study you lead"):
        gold_tasks.mark_gold(engine, lead_a, "C", task)
    offered = gold_tasks.gold_candidates(engine, admin, "C")
    assert len(offered) == UNITS and {c.source_study for c in offered} == {"B"}
    studies.set_study_lead(engine, "B", "lead00", actor=admin)
    assert gold_tasks.gold_candidates(engine, lead_a, "C") == offered
    assert gold_tasks.mark_gold(engine, lead_a, "C", task).source == "adjudication"
