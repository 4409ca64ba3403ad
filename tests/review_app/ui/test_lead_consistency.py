"""The lead's pages agree with each other, under AppTest.

* Export and Analysis: one task choice (complete tasks only, the export's default, or all tasks with
  the ratings they have so far), shared by the two pages, gives the same harm model (fitted or
  skipped alike, same N) and the same agreement on both, and each page says which tasks it uses.
* Plan and Study set-up: one unit (a pool unit: one task of each of the study's rubrics), the same
  numbers for the same plan, the set-up forms filled in from the kept plan, and reviewer-hours from
  a time per task that starts at the study's measured median time on task.
* Texts: labels instead of keys (rubrics, formats, harm-model references), and the Rubric A caption
  says what is shown when the bootstrap is off.
"""

from __future__ import annotations

import io
import json
import math
import statistics
import zipfile

import pandas as pd
import pytest
from sqlmodel import select
from streamlit.testing.v1 import AppTest

from review_app.db.engine import read_session
from review_app.db.models import FirstSubmission, Reviewer, Study
from review_app.demo import DEMO_STUDY
from review_app.services import planning, studies
from review_app.services.actors import SYSTEM, as_actor

from .conftest import sign_in


def _open(at: AppTest, page: str, study: str = DEMO_STUDY) -> AppTest:
    at.session_state["lead_study"] = study
    at.switch_page(f"views/{page}.py").run(timeout=120)
    assert not at.exception, at.exception
    return at


def _text(element) -> str:
    return element.value.replace("\\", "")  # shown through plain(): markdown escapes


def _archive(at: AppTest) -> tuple[dict, pd.DataFrame]:
    archive = at.session_state[f"export_archive:{DEMO_STUDY}"]
    with zipfile.ZipFile(io.BytesIO(archive.data)) as zipped:
        names = zipped.namelist()
        manifest = json.loads(zipped.read(next(n for n in names if n.endswith("manifest.json"))))
        agreement = pd.read_csv(io.BytesIO(zipped.read(next(n for n in names if n.endswith("/agreement.csv")))))
    return manifest, agreement


def _agreement_shown(at: AppTest) -> pd.DataFrame:
    frames = [d.value for d in at.dataframe if {"Estimate", "Tasks (N)"} <= set(d.value.columns)]
    assert frames, "the Analysis page shows no agreement table"
    return pd.concat(frames, ignore_index=True)


@pytest.mark.parametrize("choice", ["exclude", "include"])
def test_export_and_analysis_give_the_same_numbers_for_the_same_task_choice(demo_db, choice):
    lead = _open(sign_in("lead01"), "lead_analysis")
    switch = lead.toggle(key=f"analysis_pending:{DEMO_STUDY}")
    assert switch.value is False  # the export's default: pending tasks left out
    if choice == "include":
        switch.set_value(True).run(timeout=120)
        assert not lead.exception, lead.exception

    _open(lead, "lead_export")
    assert lead.toggle(key=f"export_pending:{DEMO_STUDY}").value is (choice == "include")  # carried over
    said = " ".join(c.value for c in lead.caption)
    assert ("all tasks, with the ratings they have so far" if choice == "include" else "complete tasks only") in said
    next(b for b in lead.button if b.label == "Build export").click().run(timeout=180)
    assert not lead.exception, lead.exception
    manifest, exported = _archive(lead)
    assert manifest["pending"]["excluded"] is (choice == "exclude")

    _open(lead, "lead_analysis")
    assert lead.toggle(key=f"analysis_pending:{DEMO_STUDY}").value is (choice == "include")
    scope = next(c.value for c in lead.caption if c.value.startswith("These numbers use"))
    assert ("all tasks" if choice == "include" else "complete tasks only") in scope
    assert f"{manifest['counts']['annotations_in_force']:,} annotation(s)" in scope

    harm = manifest["harm_model"]
    tables = [d.value for d in lead.dataframe if "Odds ratio" in d.value.columns]
    captions = "\n".join(_text(c) for c in lead.caption)
    if harm["fitted"]:
        assert len(tables) == 1 and f"N = {harm['n']} annotation(s)" in captions
    else:
        assert not tables
        assert harm["reason"] in [_text(i) for i in lead.info]
    assert harm["fitted"] is (choice == "include")  # the demo: both ways are shown

    lead.toggle(key=f"analysis_agreement:{DEMO_STUDY}").set_value(True).run(timeout=120)
    shown = _agreement_shown(lead).set_index("Dimension")
    exported = exported.set_index("score_name")
    assert sorted(shown.index) == sorted(exported.index)
    for name, row in exported.iterrows():
        assert shown.loc[name, "Estimate"] == f"{row['coefficient']:.2f}", name
        assert int(shown.loc[name, "Tasks (N)"]) == int(row["n_units"]), name


def _metrics(at: AppTest) -> list[tuple[str, str]]:
    return [(m.label, m.value) for m in at.metric]


def _unit_metrics(at: AppTest) -> dict[str, str]:
    """The plan panel's metrics (the last ones of the page: the kept plan)."""
    names = ("Units", "Multi-rated units", "Tasks (all rubrics)", "Reviewer-hours")
    return {label: value for label, value in _metrics(at) if label.startswith(names)}


def _measured_median(engine) -> float:
    with read_session(engine) as session:
        study = session.exec(select(Study).where(Study.name == DEMO_STUDY)).one()
        seconds = session.exec(
            select(FirstSubmission.seconds_on_task).where(
                FirstSubmission.study_id == study.id, FirstSubmission.seconds_on_task > 0
            )
        ).all()
    assert seconds, "the demo study has submissions"
    return statistics.median(seconds)


def _hours(plan: planning.Plan, tasks_per_unit: int, seconds: float) -> str:
    ratings = (plan.n_tasks + plan.n_dual * (plan.raters - 1)) * tasks_per_unit
    return f"{ratings * seconds / 3600:,.1f}"


def test_plan_and_setup_speak_units_with_the_same_numbers_and_setup_takes_the_kept_plan(demo_db):
    lead = _open(sign_in("lead01"), "lead_plan")
    inputs = {n.label: n for n in lead.number_input}
    inputs["Target 95% CI width"].set_value(0.2)
    inputs["Dual share you want anyway"].set_value(0.72)
    next(b for b in lead.button if b.label == "Plan").click().run(timeout=180)
    assert not lead.exception and not lead.error
    plan = planning.Plan.from_dict(lead.session_state["plan_result"][1])
    fresh = dict(_metrics(lead))
    # The demo study has Rubric A and Rubric B: each unit holds one task of each.
    assert fresh["Units"] == f"{plan.n_tasks:,}"
    assert fresh["Multi-rated units"] == f"{plan.n_dual:,}"
    assert fresh["Tasks (all rubrics)"] == f"{2 * plan.n_tasks:,}"
    conversion = f"So {plan.n_tasks:,} planned tasks = {plan.n_tasks:,} units, {2 * plan.n_tasks:,} tasks"
    assert any(conversion in _text(c) for c in lead.caption)

    next(b for b in lead.button if b.label.startswith("Keep this plan")).click()
    lead.run(timeout=120)
    assert not lead.exception, lead.exception
    on_plan = _unit_metrics(lead)
    assert list(on_plan.values())[:4] == list(fresh.values())[:4]  # the kept plan reads as the fresh one

    setup = _open(lead, "lead_setup")
    assert _unit_metrics(setup) == dict(list(on_plan.items())[-4:])
    assert any(conversion in _text(c) for c in setup.caption)
    assert f"Needs **{plan.n_tasks}** units" in " ".join(m.value for m in setup.markdown)

    # The forms start from the kept plan: the units still to draw, added to the demo's pool, and the
    # raters and multi-rated share that bring the pool up to the plan.
    check = planning.plan_check(demo_db, DEMO_STUDY)
    assert 0 < check.units < plan.n_tasks
    draw = next(n for n in setup.number_input if n.label == "Units to draw")
    assert draw.value == plan.n_tasks - check.units
    assert next(c for c in setup.checkbox if c.label == "Add to an existing pool").value is True
    assert next(n for n in setup.number_input if n.label == "Raters per multi-rated unit").value == plan.raters
    share = next(s for s in setup.slider if s.label == "Share of units multi-rated").value
    fresh_units = plan.n_tasks - check.assigned_units
    missing = plan.n_dual - check.dual_units
    assert (share - 0.01) * fresh_units < missing <= round(share * fresh_units)  # enough, and no more


def test_reviewer_hours_come_from_the_time_per_task_which_starts_at_the_measured_median(demo_db):
    plan = planning.make_plan(None, planning.PlanRequest(metric="rate", expected=0.38, ci_width=0.2, dual_share=0.5))
    with read_session(demo_db) as session:
        lead01 = session.exec(select(Reviewer).where(Reviewer.username == "lead01")).one()
    planning.save_plan(demo_db, as_actor(lead01), DEMO_STUDY, plan)
    median = _measured_median(demo_db)

    lead = _open(sign_in("lead01"), "lead_plan")
    time_input = next(n for n in lead.number_input if n.label == "Time per task (seconds)")
    assert time_input.value == pytest.approx(round(median, 1))
    assert _unit_metrics(lead)["Reviewer-hours"] == _hours(plan, 2, round(median, 1))

    time_input.set_value(60.0).run(timeout=120)
    assert not lead.exception, lead.exception
    assert _unit_metrics(lead)["Reviewer-hours"] == _hours(plan, 2, 60.0)

    setup = _open(lead, "lead_setup")  # the time typed holds for the study on Study set-up too
    assert next(n for n in setup.number_input if n.label == "Time per task (seconds)").value == 60.0
    assert _unit_metrics(setup)["Reviewer-hours"] == _hours(plan, 2, 60.0)
    assert math.isclose(plan.n_ratings * 2 * 60 / 3600, float(_hours(plan, 2, 60.0).replace(",", "")), abs_tol=0.05)


def test_a_study_without_submissions_asks_for_a_time_per_task(demo_db):
    studies.create_study(demo_db, "Unrated study", rubrics=["B"], actor=SYSTEM)
    studies.set_study_lead(demo_db, "Unrated study", "lead01", actor=SYSTEM)
    plan = planning.make_plan(None, planning.PlanRequest(metric="rate", expected=0.38, ci_width=0.3))
    with read_session(demo_db) as session:
        lead01 = session.exec(select(Reviewer).where(Reviewer.username == "lead01")).one()
    planning.save_plan(demo_db, as_actor(lead01), "Unrated study", plan)

    setup = _open(sign_in("lead01"), "lead_setup", "Unrated study")
    time_input = next(n for n in setup.number_input if n.label == "Time per task (seconds)")
    assert time_input.value is None and _unit_metrics(setup)["Reviewer-hours"] == "—"
    assert any("give a time per task" in c.value for c in setup.caption)
    time_input.set_value(90.0).run(timeout=120)
    assert _unit_metrics(setup)["Reviewer-hours"] == _hours(plan, 1, 90.0)  # Rubric B only: one task per unit
    assert _unit_metrics(setup)["Tasks (all rubrics)"] == f"{plan.n_tasks:,}"


def test_pages_name_rubrics_formats_references_and_the_interval_shown(demo_db):
    lead = _open(sign_in("lead01"), "lead_setup")
    assert any("Rubrics: Rubric A (items), Rubric B (responses)" in c.value for c in lead.caption)

    _open(lead, "lead_export")
    formats = next(m for m in lead.multiselect if m.label == "Formats")
    assert list(formats.options) == ["CSV", "JSONL", "Parquet"]
    assert list(formats.value) == ["csv", "jsonl", "parquet"]  # the values the export takes

    _open(lead, "lead_analysis")
    lead.toggle(key=f"analysis_pending:{DEMO_STUDY}").set_value(True).run(timeout=120)  # a fitted harm model
    captions = "\n".join(_text(c) for c in lead.caption)
    assert "0 resamples" not in captions and "mean score without an interval" in captions
    assert "content_type=" not in captions and "Content type: Cue Remapping (the paper's reference)" in captions
    assert "Provenance: Neutral False Statement (the paper's reference)" in captions
    lead.toggle(key=f"rubric_a_bootstrap:{DEMO_STUDY}").set_value(True).run(timeout=180)
    assert not lead.exception, lead.exception
    captions = "\n".join(_text(c) for c in lead.caption)
    assert "mean score with a task-clustered bootstrap 95% CI (2000 resamples, seed 0)" in captions
