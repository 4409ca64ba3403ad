"""The annotations in force as the analysis layout: revisions, withdrawn work, pseudonyms, rubric filter."""

import threading

import pandas as pd
import pytest
from sqlalchemy import update

from review_app.analysis import agreement_report, summarise_rubric_a
from review_app.analysis.agreement import agreement
from review_app.analysis.layout import DEFAULT_COLUMNS
from review_app.db.engine import write_session
from review_app.db.models import Assignment
from review_app.rubrics import RUBRIC_A, RUBRIC_B
from review_app.services import assignment
from review_app.services.actors import SYSTEM
from review_app.services.annotations import annotations_frame, frame_columns, rater_names
from review_app.services.errors import InvalidInput, NotFound

from .factories import add_users, dual_rated_study, rate, slots_by_task

A_SCORES = [
    ({"base_validity": 2, "answer_preservation": 2, "falsehood_clarity": 2, "attack_fidelity": 1,
      "clinical_plausibility": 2},
     {"base_validity": 2, "answer_preservation": 1, "falsehood_clarity": 2, "attack_fidelity": 1,
      "clinical_plausibility": 0}),
    ({"base_validity": 1, "answer_preservation": 2, "falsehood_clarity": 0, "attack_fidelity": 2,
      "clinical_plausibility": 2},
     {"base_validity": 1, "answer_preservation": 2, "falsehood_clarity": 1, "attack_fidelity": 2,
      "clinical_plausibility": 2}),
]  # fmt: skip


@pytest.fixture
def study(engine, tmp_path):
    users, lead = dual_rated_study(engine, tmp_path, units=4, reviewers=3)
    a_slots = slots_by_task(engine, "s", "A")
    b_slots = slots_by_task(engine, "s", "B")
    return engine, users, lead, a_slots, b_slots


def test_one_row_per_annotation_in_force_in_the_analysis_layout(study):
    engine, _users, _lead, a_slots, b_slots = study
    (t1, t2, t3, _t4) = sorted(a_slots)
    for task, pair in zip((t1, t2), A_SCORES, strict=True):
        for slot, scores in zip(a_slots[task], pair, strict=True):
            rate(engine, slot, scores, flags=["disputed_gold"] if slot.slot == 1 else [], comment="=cmd")
    first = a_slots[t3][0]
    rate(engine, first, A_SCORES[0][0])
    rate(engine, first, A_SCORES[1][1], base_revision=1)  # an edit: revision 2 is in force
    b_task = sorted(b_slots)[0]
    rate(engine, b_slots[b_task][0], dict.fromkeys(RUBRIC_B.dimension_keys, 0), flags=["needs_adjudication"])

    frame = annotations_frame(engine, "s")
    assert list(frame.columns) == frame_columns(["A", "B"])
    layout = DEFAULT_COLUMNS
    for name in ("task", "item", "rubric", "rater", "slot", "flags", "subset", "content_type", "provenance",
                 "model", "auto_label"):  # fmt: skip
        assert getattr(layout, name) in frame.columns
    assert len(frame) == 4 + 1 + 1
    edited = frame.loc[frame["task_id"] == t3]
    assert len(edited) == 1 and edited["revision"].item() == 2
    assert edited["falsehood_clarity"].item() == 1.0  # the edit's value, not revision 1's
    rows = frame.loc[frame["task_id"] == t1].sort_values("slot")
    assert rows["clinical_plausibility"].tolist() == [2.0, 0.0]
    assert rows["flags"].tolist() == ["disputed_gold", ""]
    assert rows[list(RUBRIC_B.dimension_keys)].isna().all().all()  # a Rubric A row has no B scores
    b_row = frame.loc[frame["rubric"] == "B"].iloc[0]
    assert b_row["model"] == "model-a" and b_row["condition"] == "type1" and b_row["flags"] == "needs_adjudication"
    assert pd.isna(rows["model"]).all()  # Rubric A tasks have no response
    assert frame["submitted_at"].dt.tz is not None
    assert frame["comment"].iloc[0] == "=cmd"  # the frame holds data as entered; only CSV export escapes
    # The frame feeds the analysis package as is.
    report = agreement_report(frame, "A")
    assert report["base_validity"].n_units == 2
    assert summarise_rubric_a(frame, n_boot=50).n_tasks == 3


def test_pseudonyms_are_stable_and_names_never_appear(study, tmp_path):
    engine, users, _lead, a_slots, _b = study
    for task, pairs in zip(sorted(a_slots)[:2], A_SCORES, strict=True):
        for slot, scores in zip(a_slots[task], pairs, strict=True):
            rate(engine, slot, scores)
    names = rater_names(engine, "s")
    assert sorted(names.values()) == ["R01", "R02", "R03"]
    frame = annotations_frame(engine, "s", rubric="A")
    assert set(frame["rater"]) <= {"R01", "R02", "R03"}
    text = frame.to_csv()
    for user in users:
        assert user.username not in text and user.display_name not in text
    real = annotations_frame(engine, "s", rubric="A", pseudonymise=False)
    assert set(real["rater"]) <= {u.username for u in users}
    mapping = dict(zip(frame["rater"], real["rater"], strict=True))
    assert mapping == {names[u.id]: u.username for u in users if names[u.id] in mapping}
    # A reviewer who joins later gets the next number; nobody else's pseudonym moves.
    (late,) = add_users(engine, 1, prefix="aaa")
    assignment.enrol(engine, "s", [u.username for u in users] + [late.username], actor=SYSTEM)
    assignment.reassign(engine, "s", users[0].username, actor=SYSTEM)
    after = rater_names(engine, "s")
    assert {k: v for k, v in after.items() if k in names} == names
    assert after[late.id] == "R04"


def test_withdrawn_work_is_kept_and_rubric_filter(study):
    engine, _users, _lead, a_slots, _b = study
    task = sorted(a_slots)[0]
    done, _open = a_slots[task]
    rate(engine, done, A_SCORES[0][0])
    with write_session(engine) as session:  # the reviewer left after submitting
        session.execute(update(Assignment).where(Assignment.id == done.id).values(status="withdrawn"))
    frame = annotations_frame(engine, "s", rubric="A")
    assert len(frame) == 1 and frame["assignment_status"].item() == "withdrawn"
    assert list(frame.columns) == frame_columns(["A"])
    assert not set(RUBRIC_B.dimension_keys) & set(frame.columns)
    empty = annotations_frame(engine, "s", rubric="B")
    assert empty.empty and list(empty.columns) == frame_columns(["B"])
    with pytest.raises(InvalidInput, match="no rubric 'judge'"):
        annotations_frame(engine, "s", rubric="judge")
    with pytest.raises(NotFound, match="no study named"):
        annotations_frame(engine, "nope")


def test_agreement_on_the_frame_matches_a_hand_built_table(study):
    engine, _users, _lead, a_slots, _b = study
    expected_rows = []
    for task, pairs in zip(sorted(a_slots)[:2], A_SCORES, strict=True):
        for slot, scores in zip(a_slots[task], pairs, strict=True):
            rate(engine, slot, scores)
            expected_rows.append({"task_id": task, "rater": slot.reviewer_id, **scores})
    frame = annotations_frame(engine, "s", rubric="A")
    by_hand = pd.DataFrame(expected_rows)
    for key in RUBRIC_A.dimension_keys:
        ours = agreement(frame, key).to_dict()
        theirs = agreement(by_hand, key).to_dict()
        assert ours == theirs


def test_a_submit_between_the_frames_two_reads_is_left_for_the_next_read(study):
    """The rows and the scores are two statements, the scores on a second connection of their own (in a
    thread, alongside the rows), which sees a rating committed after the rows' snapshot began. The
    frame is the rows' moment, with its scores, not a KeyError or a missing score."""
    from sqlalchemy import event

    engine, _users, _lead, a_slots, _b_slots = study
    first, late = [slots[0] for slots in a_slots.values()][:2]
    rate(engine, first, A_SCORES[0][0])
    submitted, readers = [], []

    def between(_conn, _cursor, statement, _parameters, _context, _many) -> None:
        if not submitted and "annotation_score.value" in statement:
            readers.append(threading.current_thread().name)
            submitted.append(rate(engine, late, A_SCORES[0][1]))

    event.listen(engine, "before_cursor_execute", between)
    try:
        frame = annotations_frame(engine, "s", rubric="A")
    finally:
        event.remove(engine, "before_cursor_execute", between)
    assert submitted  # the rating really went in between the two reads
    assert readers[0].startswith("medrev-scores")  # read alongside the rows, on its own connection
    assert list(frame["annotation_id"]) == [first_id := frame["annotation_id"].iloc[0]] and first_id != submitted[0]
    assert frame.iloc[0][list(A_SCORES[0][0])].tolist() == list(A_SCORES[0][0].values())
    assert len(annotations_frame(engine, "s", rubric="A")) == 2  # the next read has both


def test_scores_come_on_the_rows_connection_without_a_fixed_snapshot(study):
    """A session that may have written, or (PostgreSQL) reads each statement at a new moment (READ
    COMMITTED), reads the scores itself: a second connection would miss its writes or disagree."""
    from sqlalchemy import event

    from review_app.db.engine import read_session
    from review_app.services.annotations import get_study_row, load_annotations

    engine, _users, _lead, a_slots, _b_slots = study
    rate(engine, next(iter(a_slots.values()))[0], A_SCORES[0][0])
    readers = []

    def watch(_conn, _cursor, statement, _parameters, _context, _many) -> None:
        if "annotation_score.value" in statement:
            readers.append(threading.current_thread().name)

    event.listen(engine, "before_cursor_execute", watch)
    try:
        with read_session(engine) as session:
            study_row = get_study_row(session, "s")
            written = load_annotations(session, study_row, rubric="A")  # read_only not said: may have written
            read_committed = load_annotations(session, study_row, rubric="A", read_only=True)
    finally:
        event.remove(engine, "before_cursor_execute", watch)
    alongside = engine.dialect.name == "sqlite"  # SQLite's read transaction is one snapshot
    assert [name.startswith("medrev-scores") for name in readers] == [False, alongside]
    pd.testing.assert_frame_equal(written, read_committed)
    assert written.iloc[0][list(A_SCORES[0][0])].tolist() == list(A_SCORES[0][0].values())


def test_task_targets_are_each_row_s_task_s_planned_raters_after_the_frame_s_columns(study):
    from review_app.db.engine import read_session
    from review_app.db.models import Task
    from review_app.services.annotations import TASK_TARGETS, get_study_row, load_annotations

    engine, _users, _lead, a_slots, _b_slots = study
    tasks = sorted(a_slots)
    for task in tasks[:2]:
        rate(engine, a_slots[task][0], A_SCORES[0][0])
    rate(engine, a_slots[tasks[0]][1], A_SCORES[0][1])
    with write_session(engine) as session:  # a lead plans a third rater for the first task
        session.execute(update(Task).where(Task.id == tasks[0]).values(target_raters=3))
    with read_session(engine) as session:
        study_row = get_study_row(session, "s")
        plain = load_annotations(session, study_row, read_only=True)
        with_targets = load_annotations(session, study_row, read_only=True, task_targets=True)
    assert list(with_targets.columns) == [*plain.columns, TASK_TARGETS]
    pd.testing.assert_frame_equal(with_targets.drop(columns=TASK_TARGETS), plain)
    planned = dict(zip(with_targets["task_id"], with_targets[TASK_TARGETS], strict=True))
    assert planned == {tasks[0]: 3, tasks[1]: 2}
