"""Lead pages under AppTest: agreement dashboard, adjudication with optimistic locking, analysis, export."""

from __future__ import annotations

import io
import zipfile

from sqlmodel import select

from review_app.db.engine import read_session
from review_app.db.models import Adjudication, Annotation
from review_app.demo import DEMO_STUDY
from review_app.rubrics import get_rubric
from review_app.services.study_analysis import study_analysis

from .conftest import sign_in
from .panel_support import Panel, judge_assignment, open_review


def _lead_page(page: str, user: str = "lead01", study: str = DEMO_STUDY):
    at = sign_in(user)
    at.session_state["lead_study"] = study
    at.switch_page(f"views/{page}.py").run()
    assert not at.exception, at.exception
    return at


def test_agreement_dashboard_shows_the_analysis_numbers(demo_db):
    at = _lead_page("lead_agreement")
    expected = study_analysis(demo_db, DEMO_STUDY).agreement_frame()
    shown = at.dataframe[0].value  # Rubric A
    a_rows = expected[expected["rubric"] == "A"]
    assert list(shown["Dimension"]) == list(a_rows["score_name"])
    assert list(shown["Estimate"]) == [f"{v:.2f}" for v in a_rows["coefficient"].astype(float)]
    assert list(shown["95% CI"]) == [
        f"[{lo:.2f}, {hi:.2f}]" for lo, hi in zip(a_rows["ci_low"], a_rows["ci_high"], strict=True)
    ]
    assert list(shown["Tasks (N)"]) == list(a_rows["n_units"])
    assert len(at.get("plotly_chart")) == 4  # forest plot and score usage per rubric


def _decide(at, rationale: str) -> None:
    """Fill the decision form: every dimension at 2 (a value some rater gave or not), status adjudicated."""
    dimensions = {d.name for d in get_rubric("A").dimensions}
    for radio in at.radio:
        if radio.label in dimensions:
            radio.set_value(2)
    at.text_area[0].input(rationale)
    next(b for b in at.button if b.label == "Record decision").click()
    at.run()


def test_two_leads_adjudicating_the_same_task_one_wins_one_gets_a_clear_conflict(demo_db):
    first = _lead_page("lead_adjudication", "lead01")
    second = _lead_page("lead_adjudication", "lead02")
    assert first.selectbox[1].value == second.selectbox[1].value  # both opened the top of the queue
    _decide(first, "Clear falsehood on reflection.")
    _decide(second, "Defensible in some settings.")
    assert next(s.value for s in first.success).startswith("Recorded version 1 (adjudicated)"), first.error
    (conflict,) = [e.value for e in second.error]
    assert "lead01" in conflict and "reload" in conflict.lower()
    with read_session(demo_db) as session:
        rows = session.exec(select(Adjudication)).all()
    assert len(rows) == 1 and rows[0].version == 1 and rows[0].rationale == "Clear falsehood on reflection."


def test_analysis_page_shows_rubric_a_b_and_the_harm_model(demo_db):
    at = _lead_page("lead_analysis")
    at.toggle(key=f"analysis_pending:{DEMO_STUDY}").set_value(True).run()  # all tasks: the demo's harm model
    titles = [m.value for m in at.markdown]
    assert "#### Rubric A: item validation" in titles and "#### Rubric B: outcome classes" in titles
    cells = "\n".join(frame.value.astype(str).to_csv() for frame in at.dataframe)
    assert "Worst case" in cells and "Composite" in cells and "Odds ratio" in cells


def test_export_page_offers_a_zip_with_manifest(demo_db):
    at = _lead_page("lead_export")
    next(b for b in at.button if b.label == "Build export").click().run()
    assert not at.exception
    archive = at.session_state[f"export_archive:{DEMO_STUDY}"]
    with zipfile.ZipFile(io.BytesIO(archive.data)) as zipped:
        names = zipped.namelist()
        raw = zipped.read(next(n for n in names if n.endswith("raw_annotations.csv"))).decode()
    assert any(n.endswith("manifest.json") for n in names) and any(n.endswith("codebook.md") for n in names)
    assert "rev0" not in raw  # pseudonymised by default


def test_judge_audit_flow(demo_db):
    from review_app.demo import DEMO_JUDGE_STUDY

    aid = judge_assignment(demo_db)
    at = open_review("rev01", aid)
    assert at.markdown[0].value == "#### Judge audit: retracted-paper contamination"
    assert any("AUTOMATIC JUDGE" in c.value for c in at.caption)
    assert any("Retracted study" in h.proto.body for h in at.get("html"))
    keys = Panel(at)
    (label, confidence) = keys.data["dims"]
    assert [(lv["label"], lv["value"], lv["key"]) for lv in label["levels"]] == [
        ("Recognized", -1, "1"),
        ("Neutral", 0, "2"),
        ("Polluted", 1, "3"),
    ]  # a -1/0/1 scale is typed with keys 1/2/3
    assert [lv["key"] for lv in confidence["levels"]] == ["0", "1", "2"]
    keys.score("clinician_label", 1)
    keys.score("confidence", 2)
    keys.submit()
    assert keys.notice().startswith("success: Submitted")
    with read_session(demo_db) as session:
        (annotation,) = session.exec(select(Annotation).where(Annotation.assignment_id == aid)).all()
    assert annotation.rubric == "judge"

    lead = sign_in("lead01")
    lead.session_state["lead_study"] = DEMO_JUDGE_STUDY
    lead.switch_page("views/lead_agreement.py").run()
    assert not lead.exception, lead.exception
    assert "#### Automatic judge vs clinicians" in [m.value for m in lead.markdown]
    overview = lead.dataframe[0].value
    assert any("AC1" in m for m in overview["Measure"])
    confusion = lead.dataframe[1].value
    assert list(confusion.columns) == ["Clinician \\ judge", "recognized", "neutral", "polluted"]
