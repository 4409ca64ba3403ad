"""The adjudication page under AppTest: a raters table a lead reads without decoding, and a
confirmation that names the task decided and the task shown next.

The table uses the rubric's dimension names and each value's anchored label ("0 (Neutral)"),
human column headers and a dash for a missing value, for Rubric A, Rubric B and the judge audit.
So do the warnings under it, the queue's reasons and a refused decision: the lead's names for the
dimensions ("Clinician's verdict", not the reviewer's "Your verdict ..."), and no rater beside a bare code.
"""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from review_app.demo import DEMO_JUDGE_STUDY, DEMO_STUDY
from review_app.rubrics import get_rubric
from review_app.services import adjudication, adjudication_decisions
from review_app.services.actors import SYSTEM

from .conftest import sign_in

CASES = [(DEMO_STUDY, "A"), (DEMO_STUDY, "B"), (DEMO_JUDGE_STUDY, "judge")]


def _open(study: str, rubric: str):
    lead = sign_in("lead01")
    lead.session_state["lead_study"] = study
    lead.switch_page("views/lead_adjudication.py").run()
    assert not lead.exception, lead.exception
    if len(lead.radio) and lead.radio[0].label == "Rubric" and lead.radio[0].value != rubric:
        lead.radio[0].set_value(rubric).run()
    assert not lead.exception, lead.exception
    return lead


def _shown_task(lead) -> int:
    return next(s for s in lead.selectbox if s.label == "Task to adjudicate").value


def _raters_table(lead, raters: list[str]) -> pd.DataFrame:
    """The table (st.table or st.dataframe) with a column per rater, as the lead sees it."""
    frames = [t.value for t in lead.table] + [d.value for d in lead.dataframe]
    (frame,) = [f for f in frames if set(raters) <= {str(c) for c in f.columns}]
    return frame


def _texts(frame: pd.DataFrame) -> list[str]:
    """Every header and cell the table shows (its index too unless it is the hidden row number)."""
    shown = [str(c) for c in frame.columns]
    if not isinstance(frame.index, pd.RangeIndex):
        shown += [str(frame.index.name), *map(str, frame.index)]
    shown += [str(v) for v in frame.to_numpy().ravel()]
    return shown


@pytest.mark.parametrize(("study", "rubric_key"), CASES, ids=["rubric-A", "rubric-B", "judge-audit"])
def test_raters_table_uses_the_rubric_labels_and_no_raw_names(demo_db, study, rubric_key):
    rubric = get_rubric(rubric_key)
    head = adjudication.disagreement_queue_head(demo_db, study, rubric_key, open_only=True, limit=10)
    task = head.entries[0].task_id
    # An unresolved decision keeps the task in the queue and has no final scores: every final value is missing.
    adjudication_decisions.adjudicate(
        demo_db, task, actor=SYSTEM, final_scores=None, status="unresolved", rationale="Ask a third rater.",
        expected_version=0,
    )  # fmt: skip
    lead = _open(study, rubric_key)
    assert _shown_task(lead) == task
    view = adjudication.adjudication_view(demo_db, task, actor=SYSTEM)
    raters = [r.rater for r in view.ratings]
    frame = _raters_table(lead, raters)
    texts = _texts(frame)
    joined = "\n".join(texts)

    for raw in (*rubric.dimension_keys, "dimension", "final"):
        assert raw not in texts, f"raw column name {raw!r} shown"
    for key in rubric.dimension_keys:
        assert "_" not in key or key not in joined
    # "None" is a label on Rubric B ("2 (None)": no harm); a missing value must not read as it
    assert not {"None", "nan", "NaN", "<NA>", ""} & set(texts) and not frame.isna().to_numpy().any()

    assert list(frame.iloc[:, 0]) == [d.reported_name for d in rubric.dimensions]
    for rating in view.ratings:
        expected = [
            f"{rating.scores[d.key]} ({d.level(rating.scores[d.key]).label})"
            if d.key in rating.scores
            else adjudication.MISSING
            for d in rubric.dimensions
        ]
        assert list(frame[rating.rater]) == expected
    (final,) = [c for c in frame.columns if str(c) not in raters and c != frame.columns[0]]
    assert list(frame[final]) == [adjudication.MISSING] * len(rubric.dimensions)


def test_judge_values_are_shown_with_their_labels(demo_db):
    lead = _open(DEMO_JUDGE_STUDY, "judge")
    view = adjudication.adjudication_view(demo_db, _shown_task(lead), actor=SYSTEM)
    frame = _raters_table(lead, [r.rater for r in view.ratings])
    verdict = get_rubric("judge").dimension("clinician_label")
    row = frame[frame.iloc[:, 0] == verdict.reported_name].iloc[0]
    meanings = {-1: "-1 (Recognized)", 0: "0 (Neutral)", 1: "1 (Polluted)"}
    for rating in view.ratings:
        assert row[rating.rater] == meanings[rating.scores["clinician_label"]]
    help_texts = [r.help or "" for r in lead.radio if r.label == verdict.reported_name]
    given = view.ratings[0]
    assert any(f"{given.rater} {meanings[given.scores['clinician_label']]}" in h for h in help_texts)


def test_the_confirmation_names_the_task_decided_and_the_next_one(demo_db):
    lead = _open(DEMO_STUDY, "B")
    task = _shown_task(lead)
    view = adjudication.adjudication_view(demo_db, task, actor=SYSTEM)
    first = view.ratings[0]
    for dimension in get_rubric("B").dimensions:
        radio = [r for r in lead.radio if r.key == f"adj{task}:{dimension.key}"]
        if radio:
            radio[0].set_value(first.scores[dimension.key])
    next(b for b in lead.button if b.label == "Record decision").click().run()
    assert not lead.exception, lead.exception
    following = _shown_task(lead)
    assert following != task
    (notice,) = [s.value for s in lead.success if f"for task {task}." in s.value]
    assert notice.startswith(f"Recorded version 1 (adjudicated) for task {task}.")
    assert f"Next: task {following}" in notice


WHY = "Why it needs a decision"
BARE_CODE = re.compile(r"\bR\d+:? -?\d\b(?! \()")  # a rater beside a score without its label ("R01 0")


def _queue(lead) -> pd.DataFrame:
    """The queue grid under the headers the lead reads (the grid's column labels, else the frame's names)."""
    for grid in lead.dataframe:
        config = json.loads(grid.proto.columns or "{}")
        frame = grid.value.rename(columns={name: spec["label"] for name, spec in config.items() if spec.get("label")})
        if WHY in frame.columns:
            return frame
    raise AssertionError("no queue table on the page")


def _reviewer_names(rubric) -> list[str]:
    """The reviewer-facing names a lead page must not use (where the rubric gives the lead another)."""
    return [d.name for d in rubric.dimensions if d.reported_name != d.name]


@pytest.mark.parametrize(("study", "rubric_key"), CASES, ids=["rubric-A", "rubric-B", "judge-audit"])
def test_warnings_and_queue_reasons_name_dimensions_as_the_table_does_with_labels(demo_db, study, rubric_key):
    rubric = get_rubric(rubric_key)
    lead = _open(study, rubric_key)
    task = _shown_task(lead)
    view = adjudication.adjudication_view(demo_db, task, actor=SYSTEM)
    differing = [d for d in rubric.dimensions if len({r.scores[d.key] for r in view.ratings if d.key in r.scores}) > 1]
    assert differing, "the demo's top task has a disagreement"

    reasons = [w.value for w in lead.warning if " (R" in w.value]
    for dimension in differing:
        given = ", ".join(
            f"{r.rater}: {r.scores[dimension.key]} ({dimension.level(r.scores[dimension.key]).label})"
            for r in view.ratings
        )
        (warning,) = [w for w in reasons if f"{dimension.reported_name} (" in w]
        assert warning.endswith(f"{dimension.reported_name} ({given})"), warning

    queue = _queue(lead)
    summary = queue.loc[queue.iloc[:, 0] == task, WHY].item()
    named = [d for d in differing if d.reported_name in summary]
    assert named, summary
    left_out = re.search(r" and (\d+) more$", summary)
    classes = int(view.comparison.class_mismatch)
    assert (
        len(named) + classes * ("mismatch" in summary) + int(left_out[1] if left_out else 0) == len(differing) + classes
    )
    (full,) = [t.value for t in lead.table if WHY in t.value.columns]
    assert full.loc[full["Task"] == task, WHY].item() == "; ".join(reasons)

    shown = [*reasons, *queue[WHY], *full[WHY]]
    for text in shown:
        assert not BARE_CODE.search(text), text
        for name in _reviewer_names(rubric):
            assert name not in text, text


def test_a_refused_decision_names_the_dimensions_as_the_form_does(demo_db):
    rubric = get_rubric("judge")
    lead = _open(DEMO_JUDGE_STUDY, "judge")
    task = _shown_task(lead)
    view = adjudication.adjudication_view(demo_db, task, actor=SYSTEM)
    assert not view.comparison.unanimous
    next(r for r in lead.radio if r.key == f"adj{task}:status").set_value("unanimous")
    next(b for b in lead.button if b.label == "Record decision").click().run()
    assert not lead.exception, lead.exception
    (refusal,) = [e.value for e in lead.error if "Not recorded" in e.value]
    disputed = [rubric.dimension(k).reported_name for k in view.comparison.differing]
    assert f"the raters disagree on {', '.join(disputed)};" in refusal
    form = {r.label for r in lead.radio if r.key and r.key.startswith(f"adj{task}:") and r.label != "Status"}
    assert set(disputed) <= form  # the names the refusal uses are the form's
    for name in _reviewer_names(rubric):
        assert name not in refusal
