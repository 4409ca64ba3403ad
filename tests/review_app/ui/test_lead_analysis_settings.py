"""The analysis and agreement pages under AppTest: named references, separation, tie rule, penalty, weights.

The settings a lead saves on the analysis page are the study's; the export made afterwards must use
them (CSV and LaTeX), so the tests go from the page to the files.
"""

from __future__ import annotations

import pandas as pd
import pytest
from sqlmodel import select

from review_app.db.engine import read_session
from review_app.db.models import AuditEvent
from review_app.demo import DEMO_STUDY
from review_app.services import export
from review_app.services.analysis_options import analysis_options
from review_app.services.cached_analyses import study_agreement
from review_app.services.study_analysis import study_analysis

from ..factories import make_level_event_free
from .conftest import sign_in, walk_text


def _page(page: str):
    at = sign_in("lead01")
    at.session_state["lead_study"] = DEMO_STUDY
    at.switch_page(f"views/{page}.py").run()
    assert not at.exception, at.exception
    return at


def _harm_table(at) -> pd.DataFrame:
    table = next(d.value for d in at.dataframe if "Odds ratio" in d.value.columns)
    return table.assign(term=[f"{f}[{lv}]" if lv else f for f, lv in zip(table["Factor"], table["Level"], strict=True)])


def _no_worst_case_in(engine, column: str, level: str) -> int:
    return make_level_event_free(engine, DEMO_STUDY, column, level)


def test_analysis_page_names_references_and_separation_by_default(demo_db):
    assert _no_worst_case_in(demo_db, "content_type", "exception_poisoning") > 0
    at = _page("lead_analysis")
    at.toggle(key=f"analysis_pending:{DEMO_STUDY}").set_value(True).run()  # all tasks: the demo's harm model
    analysis = study_analysis(demo_db, DEMO_STUDY)
    first = analysis.first_model
    assert first == "model-gamma (low reasoning)"  # the first model imported into the demo study
    captions = "\n".join(c.value.replace("\\", "") for c in at.caption)
    assert f"Model: {first} (the study's first model)" in captions
    assert "Content type: Cue Remapping (the paper's reference)" in captions
    assert "Provenance: Neutral False Statement (the paper's reference)" in captions
    assert "Falsehood clarity: Clear falsehood" in captions
    table = _harm_table(at)
    row = table.set_index("term").loc["Content type[Exception Poisoning]"]
    assert row["Odds ratio"] == "n/e" and row["Note"] == "not estimable (no events in this level)"
    references = set(table.loc[table["Factor"] != "Intercept", "Reference"])
    assert references == {first, "Cue Remapping", "Neutral False Statement", "Clear falsehood"}
    assert not any("unrated" in t for t in table["term"])  # no phantom level
    warnings = [w.value.replace("\\", "") for w in at.warning]  # shown through plain(): escapes
    assert any("content_type = exception_poisoning (against cue_remapping): not estimable" in w for w in warnings)
    infos = [i.value.replace("\\", "") for i in at.info]
    assert any("4 annotation(s) on items without a Rubric A falsehood-clarity score are excluded" in i for i in infos)
    captions = [c.value for c in at.caption]
    assert any("ties toward the less safe category" in c for c in captions)
    assert all(len(v) < 12 for v in table["Odds ratio"])  # never twenty digits


def test_saved_settings_reach_the_page_the_csv_and_the_latex(demo_db, tmp_path):
    _no_worst_case_in(demo_db, "content_type", "exception_poisoning")
    at = _page("lead_analysis")
    at.toggle(key=f"analysis_pending:{DEMO_STUDY}").set_value(True).run()  # all tasks: the demo's harm model
    at.selectbox(key=f"ref:{DEMO_STUDY}:provenance").set_value("patient")
    at.radio(key=f"tie:{DEMO_STUDY}").set_value("safer")
    at.radio(key=f"penalty:{DEMO_STUDY}").set_value("normal")
    next(b for b in at.button if b.label == "Save analysis settings").click().run()
    assert not at.exception, at.exception
    assert any("Analysis settings saved" in s.value for s in at.success)

    saved = analysis_options(demo_db, DEMO_STUDY)
    assert (saved.references, saved.tie_rule, saved.penalty) == ({"provenance": "patient"}, "safer", "normal")
    with read_session(demo_db) as session:
        event = session.exec(select(AuditEvent).where(AuditEvent.action == "study.analysis_options")).one()
    assert event.after["tie_rule"] == "safer" and event.before["tie_rule"] == "less_safe"

    captions = "\n".join(c.value.replace("\\", "") for c in at.caption)
    assert "Provenance: Patient Self-Diagnosis / Belief / Claim" in captions
    table = _harm_table(at).set_index("term")
    neutral = "Provenance[Neutral False Statement]"
    assert neutral in table.index and table.loc[neutral, "Reference"] == "Patient Self-Diagnosis / Belief / Claim"
    separated = table.loc["Content type[Exception Poisoning]"]
    assert separated["Odds ratio"] != "n/e" and "finite only through the prior" in separated["Note"]
    assert any("blme::bglmer" in i.value for i in at.info)
    assert any("ties toward the safer category" in c.value for c in at.caption)

    out = tmp_path / "export"
    export.export_study(demo_db, DEMO_STUDY, out, formats="csv", n_boot=50)
    harm = pd.read_csv(out / "harm_model.csv", keep_default_na=False)
    assert set(harm.loc[harm["column"] == "provenance", "reference"]) == {"patient"}
    assert set(harm["penalty"]) == {"normal"}
    assert harm.set_index("term").loc["content_type[exception_poisoning]", "separated"] in (True, "True")
    outcomes = pd.read_csv(out / "rubric_b_outcomes.csv", keep_default_na=False)
    assert set(outcomes.loc[outcomes["aggregation"] == "mean", "tie_rule"]) == {"safer"}
    assert set(outcomes.loc[outcomes["aggregation"] != "mean", "tie_rule"]) == {""}
    latex = (out / "latex" / "harm_model.tex").read_text()
    assert "provenance (reference: patient)" in latex and "penalised likelihood" in latex
    assert "ties toward the safer category" in (out / "latex" / "rubric_b_outcomes.tex").read_text()
    codebook = (out / "codebook.md").read_text()
    assert 'relevel(factor(d$provenance), ref = "patient")' in codebook
    assert "bglmer(" in codebook and "fixef.prior = normal(sd = c(10, 2.5)), cov.prior = NULL" in codebook


def test_reviewers_cannot_save_analysis_settings(demo_db):
    from review_app.db.models import Reviewer
    from review_app.services.analysis_options import AnalysisOptions, save_analysis_options
    from review_app.services.errors import PermissionDenied

    with read_session(demo_db) as session:
        reviewer = session.exec(select(Reviewer).where(Reviewer.username == "rev01")).one()
    with pytest.raises(PermissionDenied):
        save_analysis_options(demo_db, DEMO_STUDY, AnalysisOptions(tie_rule="safer"), actor=reviewer)
    assert analysis_options(demo_db, DEMO_STUDY).tie_rule == "less_safe"


def test_agreement_page_offers_weights_and_minimum_ratings(demo_db):
    at = _page("lead_agreement")
    assert at.selectbox(key="agreement_weights").value == "ordinal"
    assert at.number_input(key="agreement_min_ratings").value == 2
    first = at.dataframe[0].value
    assert {"Tasks (N)", "Set aside", "Coefficient"} <= set(first.columns)
    at.selectbox(key="agreement_weights").set_value("quadratic").run()
    at.number_input(key="agreement_min_ratings").set_value(1).run()
    assert not at.exception, at.exception
    expected = study_agreement(demo_db, DEMO_STUDY, weights="quadratic", min_ratings=1).frame()
    rubric_a = expected[expected["rubric"] == "A"]
    shown = at.dataframe[0].value
    assert list(shown["Estimate"]) == [f"{v:.2f}" for v in rubric_a["coefficient"].astype(float)]
    assert set(shown.loc[~shown["Coefficient"].eq("AC1"), "Coefficient"]) == {"AC2 (quadratic)"}
    assert list(shown["Set aside"]) == [0] * len(shown)
    default = study_agreement(demo_db, DEMO_STUDY).frame()
    assert (default["n_units_dropped"] > 0).any()  # the demo has singly rated tasks, set aside by default
    assert any("at least 1 rating(s)" in c.value for c in at.caption)
    assert "Traceback" not in walk_text(at)
