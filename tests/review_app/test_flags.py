"""Task flags in the services, on SQLite and PostgreSQL: flags reach the study's lead and are answered,
excluded tasks leave the analyses and exports, only a lead of THIS study (or an admin) adjudicates,
exports, changes the analysis options or answers flags, the export states the pending tasks, and
progress reports throughput, pairs and reviewers far behind.
"""

from __future__ import annotations

import json

import pytest
from sqlalchemy import update
from sqlmodel import select

from review_app.db.engine import read_session, write_session
from review_app.db.models import Assignment, AuditEvent, Task, TaskFlag
from review_app.rubrics import get_rubric
from review_app.services import (
    adjudication,
    adjudication_decisions,
    export,
    flags,
    progress,
    rating_comparison,
    reviewing,
    studies,
)
from review_app.services.actors import SYSTEM
from review_app.services.analysis_options import AnalysisOptions, analysis_options, save_analysis_options
from review_app.services.annotations import annotations_frame
from review_app.services.errors import InvalidInput, NotFound, PermissionDenied
from review_app.services.study_analysis import PENDING_RULE, data_version

from .factories import add_users, dual_rated_study, rate, slots_by_task

B = get_rubric("B").dimension_keys


def b(*values: int) -> dict[str, int]:
    return dict(zip(B, values, strict=True))


@pytest.fixture
def study(engine, tmp_path):
    """Study ``s`` (rubric B, 4 dual-rated units) led by ``lead00``; ``other00`` leads only study ``t``."""
    users, lead = dual_rated_study(engine, tmp_path, units=4, reviewers=3, rubrics=("B",))
    (other,) = add_users(engine, 1, prefix="other", role="lead")
    (admin,) = add_users(engine, 1, prefix="admin", role="admin")
    studies.create_study(engine, "t", rubrics=["B"], actor=other)
    slots = slots_by_task(engine, "s", "B")
    return engine, users, lead, other, admin, slots


def _flag(engine, assignment: Assignment, kind: str = "item", comment: str = "The keyed answer is wrong.") -> int:
    reviewing.set_flag(engine, assignment.id, assignment.reviewer_id, True, comment, kind=kind)
    with read_session(engine) as session:
        return session.exec(select(TaskFlag.id).order_by(TaskFlag.id.desc())).first()


def test_a_flag_reaches_the_study_lead_who_resolves_it_with_an_audit_entry(study):
    engine, users, lead, _other, _admin, slots = study
    first = slots[sorted(slots)[0]][0]
    flag_id = _flag(engine, first)
    (row,) = flags.flag_queue(engine, "s", actor=lead)
    assert (row.flag_id, row.task_id, row.kind, row.comment, row.status) == (
        flag_id, first.task_id, "item", "The keyed answer is wrong.", "open"
    )  # fmt: skip
    assert row.reviewer.startswith("R") and all(u.username not in row.reviewer for u in users)  # pseudonym
    assert row.kind_label == "Problem with the item"
    assert flags.flag_counts(engine, "s")["open"] == 1
    assert progress.study_progress(engine, "s").flags["open"] == 1

    flags.answer_flag(engine, flag_id, "resolve", actor=lead, reply="Gold corrected in the next import.")
    assert flags.flag_queue(engine, "s", actor=lead) == []
    (done,) = flags.flag_queue(engine, "s", actor=lead, statuses=None)
    assert (done.status, done.reply, done.resolved_by) == ("resolved", "Gold corrected in the next import.", "lead00")
    assert flags.latest_answer(engine, first.id) == ("item", "resolved", "Gold corrected in the next import.")
    with read_session(engine) as session:
        event = session.exec(select(AuditEvent).where(AuditEvent.action == "flag.resolve")).one()
    assert event.actor_id == lead.id and event.before["status"] == "open" and event.after["status"] == "resolved"
    with pytest.raises(InvalidInput, match="already resolved"):
        flags.answer_flag(engine, flag_id, "resolve", actor=lead)


def test_reply_keeps_the_flag_open_and_unflagging_withdraws_it(study):
    engine, _users, lead, _other, _admin, slots = study
    assignment = slots[sorted(slots)[1]][1]
    flag_id = _flag(engine, assignment, kind="rubric", comment="")
    with pytest.raises(InvalidInput, match="write the reply"):
        flags.answer_flag(engine, flag_id, "reply", actor=lead)
    flags.answer_flag(engine, flag_id, "reply", actor=lead, reply="Score it as written, please.")
    (row,) = flags.flag_queue(engine, "s", actor=lead)
    assert (row.status, row.reply) == ("open", "Score it as written, please.")
    reviewing.set_flag(engine, assignment.id, assignment.reviewer_id, False)
    assert flags.flag_queue(engine, "s", actor=lead) == []
    assert flags.flag_counts(engine, "s")["withdrawn"] == 1
    with pytest.raises(InvalidInput, match="unknown flag kind"):
        reviewing.set_flag(engine, assignment.id, assignment.reviewer_id, True, kind="weather")


def test_excluding_a_task_takes_it_out_of_analyses_and_exports_and_locks_it(study, tmp_path):
    engine, _users, lead, _other, _admin, slots = study
    tasks = sorted(slots)
    for task in tasks:
        for assignment, harm in zip(slots[task], (0, 2), strict=True):
            rate(engine, assignment, b(2, 2, 2, harm))
    flag_id = _flag(engine, slots[tasks[0]][0], kind="response", comment="The response is cut off.")
    assert set(annotations_frame(engine, "s")["task_id"]) == set(tasks)
    version = data_version(engine, "s")
    flags.answer_flag(engine, flag_id, "exclude", actor=lead, reply="Excluded: truncated response.")
    assert data_version(engine, "s") != version  # cached analyses are recomputed without the task
    assert set(annotations_frame(engine, "s")["task_id"]) == set(tasks[1:])
    assert tasks[0] not in {e.task_id for e in adjudication.disagreement_queue(engine, "s", "B")}
    with read_session(engine) as session:
        assert session.get(Task, tasks[0]).locked
    result = export.export_study(engine, "s", tmp_path / "out", formats="csv", n_boot=20, actor=lead)
    manifest = json.loads((result.out_dir / "manifest.json").read_text())
    assert manifest["counts"]["excluded_tasks"] == 1 and manifest["counts"]["tasks"] == len(tasks) - 1
    labels = (result.out_dir / "adjudicated_labels_B.csv").read_text()
    assert f"\n{tasks[0]}," not in labels
    flags.answer_flag(engine, flag_id, "reopen", actor=lead)
    assert set(annotations_frame(engine, "s")["task_id"]) == set(tasks)  # back in the analyses


@pytest.mark.parametrize("who", ["other_lead", "reviewer"])
def test_only_a_lead_of_this_study_or_an_admin_touches_its_flags_decisions_exports_and_options(study, tmp_path, who):
    engine, users, lead, other, admin, slots = study
    task = sorted(slots)[0]
    for assignment, harm in zip(slots[task], (0, 2), strict=True):
        rate(engine, assignment, b(2, 2, 2, harm))
    flag_id = _flag(engine, slots[task][0])
    actor = other if who == "other_lead" else users[0]
    refused = {
        "flag queue": lambda: flags.flag_queue(engine, "s", actor=actor),
        "answer flag": lambda: flags.answer_flag(engine, flag_id, "exclude", actor=actor),
        "adjudication view": lambda: adjudication.adjudication_view(engine, task, actor=actor),
        "adjudicate": lambda: adjudication_decisions.adjudicate(
            engine, task, actor=actor, final_scores=b(2, 2, 2, 1), status="adjudicated", expected_version=0
        ),
        "auto unanimous": lambda: adjudication_decisions.auto_unanimous(engine, "s", "B", actor=actor),
        "export": lambda: export.export_study(engine, "s", tmp_path / f"x-{who}", formats="csv", actor=actor),
        "archive": lambda: export.export_archive(engine, "s", formats="csv", actor=actor),
        "pending count": lambda: export.pending_tasks(engine, "s", actor=actor),
        "analysis options": lambda: save_analysis_options(engine, "s", AnalysisOptions(tie_rule="safer"), actor=actor),
    }
    for name, call in refused.items():
        with pytest.raises(PermissionDenied):
            call()
        assert name  # every cell tried
    assert not (tmp_path / f"x-{who}").exists()
    with read_session(engine) as session:
        assert session.get(TaskFlag, flag_id).status == "open"
        assert not session.exec(select(AuditEvent).where(AuditEvent.action.in_(
            ("flag.exclude", "adjudication.record", "study.export", "study.analysis_options")))).all()  # fmt: skip
    assert analysis_options(engine, "s").tie_rule != "safer"
    # The study's own lead and an admin are allowed (the admin leads every study).
    for allowed in (lead, admin):
        assert len(flags.flag_queue(engine, "s", actor=allowed)) == 1
        assert adjudication.adjudication_view(engine, task, actor=allowed).task_id == task
        assert export.pending_tasks(engine, "s", actor=allowed) >= 0
    record = adjudication_decisions.adjudicate(
        engine, task, actor=admin, final_scores=b(2, 2, 2, 2), status="adjudicated", expected_version=0
    )
    assert record.adjudicator_id == admin.id
    save_analysis_options(engine, "s", AnalysisOptions(tie_rule="safer"), actor=lead)
    assert analysis_options(engine, "s").tie_rule == "safer"
    with pytest.raises(NotFound):
        flags.answer_flag(engine, 999_999, "resolve", actor=lead)


def test_adjudication_names_the_field_a_refusal_is_about(study):
    engine, _users, lead, _other, _admin, slots = study
    task = sorted(slots)[0]
    for assignment, harm in zip(slots[task], (0, 2), strict=True):
        rate(engine, assignment, b(2, 2, 2, harm))
    view = adjudication.adjudication_view(engine, task, actor=lead)
    assert rating_comparison.agreed_dimensions("B", view.ratings) == {k: 2 for k in B[:3]}
    cases = [
        ({**b(2, 2, 2, 0), "harm_potential": None}, "adjudicated", "", ("harm_potential",), "missing: Harm"),
        (b(2, 2, 1, 2), "adjudicated", "", ("rationale", "clinical_grounding"), "overrides every rater"),
        (None, "unanimous", "", ("status",), "disagree"),
        (None, "unresolved", "", ("rationale",), "why the task stays unresolved"),
    ]
    for scores, status, rationale, fields, text in cases:
        with pytest.raises(adjudication_decisions.DecisionError, match=text) as error:
            adjudication_decisions.adjudicate(
                engine, task, actor=lead, final_scores=scores, status=status, rationale=rationale, expected_version=0
            )
        assert error.value.fields == fields
    # Agreed dimensions as the raters gave them, the disputed one decided for a rater: no rationale needed.
    record = adjudication_decisions.adjudicate(
        engine, task, actor=lead, final_scores=b(2, 2, 2, 0), status="adjudicated", expected_version=0
    )
    assert record.final_scores == b(2, 2, 2, 0)


def test_export_states_pending_tasks_and_can_leave_them_out(study, tmp_path):
    engine, _users, lead, _other, _admin, slots = study
    tasks = sorted(slots)
    for assignment in slots[tasks[0]]:
        rate(engine, assignment, b(2, 2, 2, 2))
    rate(engine, slots[tasks[1]][0], b(1, 1, 1, 1))  # one of two raters: pending
    assert export.pending_tasks(engine, "s", actor=lead) == 3
    kept = export.export_study(engine, "s", tmp_path / "kept", formats="csv", n_boot=20, actor=lead, pending="include")
    manifest = json.loads((kept.out_dir / "manifest.json").read_text())
    assert manifest["pending"]["tasks"] == 3 and manifest["pending"]["excluded"] is False
    assert manifest["counts"]["pending_tasks"] == 3 and manifest["counts"]["tasks"] == 4
    assert "3 tasks are still pending" in manifest["notes"][0] and "included" in manifest["notes"][0]
    left = export.export_study(engine, "s", tmp_path / "left", formats="csv", n_boot=20, actor=lead)  # the default
    manifest = json.loads((left.out_dir / "manifest.json").read_text())
    assert manifest["pending"] == {"tasks": 3, "excluded": True, "rule": PENDING_RULE}
    assert manifest["counts"]["tasks"] == 1 and manifest["counts"]["annotations_in_force"] == 2
    raw = (left.out_dir / "raw_annotations.csv").read_text()
    assert all(f"\n{t}," not in raw for t in tasks[1:])
    with pytest.raises(InvalidInput, match="pending must be one of"):
        export.export_study(engine, "s", tmp_path / "bad", formats="csv", actor=lead, pending="maybe")
    assert export.export_study(engine, "s", tmp_path / "cli", formats="csv", n_boot=20, actor=SYSTEM).files
    # a third rater planned for the complete task: it is pending again, in the export as on the Export page
    with write_session(engine) as session:
        session.execute(update(Task).where(Task.id == tasks[0]).values(target_raters=3))
    again = export.export_study(engine, "s", tmp_path / "again", formats="csv", n_boot=20, actor=lead)
    manifest = json.loads((again.out_dir / "manifest.json").read_text())
    assert manifest["pending"]["tasks"] == 4 and manifest["counts"]["tasks"] == 0
    assert manifest["counts"]["annotations_in_force"] == 0


def test_progress_reports_throughput_pairs_and_who_is_far_behind(study):
    engine, users, _lead, _other, _admin, slots = study
    tasks = sorted(slots)
    for task in tasks[:3]:
        for assignment in slots[task]:
            if assignment.reviewer_id != users[2].id:
                rate(engine, assignment, b(2, 2, 2, 2))
    report = progress.study_progress(engine, "s")
    by_name = {r["username"]: r for r in report.by_reviewer}
    assert report.pairs["planned"] == 4
    assert report.pairs["complete"] + report.pairs["waiting_for_a_rater"] + report.pairs["not_started"] == 4
    assert report.pairs["not_started"] >= 1
    busy = [r for r in report.by_reviewer if r["submitted"]]
    assert all(r["median_seconds"] is not None and r["per_active_day"] == r["submitted"] for r in busy)
    assert all(r["last_7_days"] == r["submitted"] for r in report.by_reviewer)
    laggard = by_name[users[2].username]
    assert laggard["submitted"] == 0 and laggard["median_seconds"] is None
    assert any(w.startswith(f"{users[2].username} is far behind: 0 of ") for w in report.warnings)
    assert not any(w.startswith(users[0].username) for w in report.warnings)


def test_problem_flags_ticked_when_scoring_reach_the_lead_once(study):
    engine, _users, lead, _other, _admin, slots = study
    assignment = slots[sorted(slots)[0]][0]
    rate(engine, assignment, b(1, 1, 1, 1), flags=["response_incomplete", "needs_adjudication"], comment="Cut off.")
    (row,) = flags.flag_queue(engine, "s", actor=lead)
    assert (row.kind, row.comment) == ("response", "Response incomplete or refused (ticked when scoring): Cut off.")
    # An edit that keeps the flag does not raise it again; one that adds another does.
    rate(engine, assignment, b(1, 1, 1, 2), flags=["response_incomplete"], base_revision=1)
    assert len(flags.flag_queue(engine, "s", actor=lead)) == 1
    rate(engine, assignment, b(1, 1, 1, 2), flags=["response_incomplete", "disputed_gold"], base_revision=2)
    assert [r.kind for r in flags.flag_queue(engine, "s", actor=lead)] == ["item", "response"]


def test_median_time_on_task_counts_first_submissions_only(engine, tmp_path):
    from review_app.rubrics import ScoreSheet

    users, _lead = dual_rated_study(engine, tmp_path, units=5, reviewers=2, rubrics=("B",))
    slots = slots_by_task(engine, "s", "B")
    mine = [a for task in sorted(slots) for a in slots[task] if a.reviewer_id == users[0].id]
    assert len(mine) == 5
    sheet = ScoreSheet(rubric="B", scores=b(2, 2, 2, 2))
    for assignment, seconds in zip(mine[:4], (100.0, 10.0, 30.0, 20.0), strict=True):
        reviewing.submit(engine, assignment.id, users[0].id, sheet, client_token=f"t{assignment.id}",
                         base_revision=0, seconds_on_task=seconds)  # fmt: skip
    report = {r["username"]: r for r in progress.study_progress(engine, "s").by_reviewer}
    assert report[users[0].username]["median_seconds"] == 25.0  # mean of the two middle values
    reviewing.submit(engine, mine[4].id, users[0].id, sheet, client_token="t5", base_revision=0, seconds_on_task=5.0)
    reviewing.submit(
        engine, mine[0].id, users[0].id, sheet, client_token="edit", base_revision=1, seconds_on_task=1.0
    )  # fmt: skip  (an edit: not a first submission)
    row = {r["username"]: r for r in progress.study_progress(engine, "s").by_reviewer}[users[0].username]
    assert row["median_seconds"] == 20.0 and row["per_active_day"] == 5.0 and row["last_7_days"] == 5
