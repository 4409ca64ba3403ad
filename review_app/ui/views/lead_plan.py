"""Plan a study: units, multi-rated units and reviewer-hours for a target CI width or power.

A plan counts tasks of the rubric it measures; the page shows it in the study's units (one task of
each rubric per unit) exactly as Study set-up does (``components.plan_units``), with reviewer-hours
at a time per task the lead can set (the study's measured median by default).
"""

import streamlit as st

from review_app.analysis.sample_size import Plan
from review_app.services import planning, studies
from review_app.services.errors import ServiceError
from review_app.ui.components.pickers import pick_study
from review_app.ui.components.plan_units import plan_metrics, plan_panel, time_per_task
from review_app.ui.components.quality import METRIC_NAMES
from review_app.ui.components.text import plain
from review_app.ui.session import engine, flash, require_role, show_flashes

user = require_role("lead", "admin")
db = engine()
show_flashes()
st.caption(
    "How many units (pool draws, each one task of every rubric of the study), how many of them rated by two or "
    "more reviewers, and how many reviewer-hours a study needs for the precision you want. Every number comes "
    "from a seeded simulation of the analysis the study will run (same seed, same plan); a pilot study's ratings "
    "replace the assumptions."
)
study = pick_study(db, user)
if study is None:
    st.stop()
try:
    kept = planning.saved_plans(db, study.name, actor=user)
except ServiceError as exc:  # not a lead of this study (any more): say so, show nothing of it
    st.error(plain(exc))
    st.stop()
names = [s.name for s in studies.list_studies(db, actor=user)]  # a pilot is one of the user's studies

metric = st.radio("What must the study estimate?", list(METRIC_NAMES), format_func=METRIC_NAMES.get, horizontal=True)
with st.form("plan"):
    pilot = st.selectbox(
        "Pilot study (optional)",
        [None, *names],
        format_func=lambda n: "No pilot: use the assumptions below" if n is None else n,
        help="Its annotations are resampled; its median time on task gives the reviewer-hours.",
    )
    left, mid, right = st.columns(3)
    request: dict = {"metric": metric, "pilot": pilot}
    if metric == "rate":
        request["expected"] = left.number_input("Expected rate", 0.0, 1.0, 0.38, 0.01, help="Ignored with a pilot.")
        request["ci_width"] = mid.number_input("Target 95% CI width", 0.01, 0.99, 0.20, 0.01)
        request["dual_share"] = right.number_input("Dual share you want anyway", 0.0, 1.0, 0.0, 0.05)
        use_expected = st.checkbox("With a pilot, still use the expected rate above", value=False)
    elif metric == "ac2":
        request["expected"] = left.number_input("Expected AC2", -0.5, 0.99, 0.70, 0.01)
        request["ci_width"] = mid.number_input("Target 95% CI width", 0.02, 1.5, 0.20, 0.01)
        request["categories"] = int(right.number_input("Rating categories", 2, 10, 3, 1))
        request["raters"] = int(left.number_input("Raters per multi-rated unit", 2, 5, 2, 1))
        tasks = mid.number_input("Units the study has anyway (0 = none)", 0, 100_000, 0, 10)
        request["tasks"] = int(tasks) or None
        request["score"] = right.text_input("Pilot dimension", "harm_potential")
        use_expected = st.checkbox(
            "With a pilot, use the expected AC2 above (the pilot gives only the category shares)", value=False
        )
    else:
        request["odds_ratio"] = left.number_input("Odds ratio to detect", 1.05, 20.0, 2.0, 0.05)
        request["power"] = mid.number_input("Power", 0.5, 0.99, 0.8, 0.01)
        request["reviewers"] = int(right.number_input("Reviewers in the panel", 2, 500, 10, 1))
        request["icc"] = left.number_input("Reviewer ICC (latent)", 0.0, 0.9, 0.10, 0.01)
        request["expected"] = mid.number_input("Event rate at the reference level", 0.01, 0.99, 0.38, 0.01)
        request["dual_share"] = right.number_input("Dual share", 0.0, 1.0, 0.72, 0.01)
        request["term"] = left.text_input("Pilot term (e.g. model[model-b])", "") or None
        use_pilot_icc = st.checkbox("With a pilot, take the ICC and panel size from it", value=True)
    seed = st.number_input("Seed", 0, 2**31 - 1, 0, 1)
    if st.form_submit_button("Plan", type="primary"):
        if pilot and metric in ("rate", "ac2") and not use_expected:
            request["expected"] = None
        if pilot and metric == "harm-or" and use_pilot_icc:
            request["icc"] = request["reviewers"] = None
        bar = st.progress(0.0, text="Simulating...")

        def progress(done: int, budget: int) -> None:
            bar.progress(min(done / max(budget, 1), 1.0), text=f"Simulating... {done} simulations")

        try:
            plan = planning.make_plan(
                db, planning.PlanRequest(**request, seed=int(seed)), progress=progress, actor=user
            )
            st.session_state["plan_result"] = (study.name, plan.to_dict(), pilot)
        except ServiceError as error:
            st.error(str(error))
        bar.empty()

result = st.session_state.get("plan_result")
fresh = Plan.from_dict(result[1]) if result and result[0] == study.name else None
seconds = None
if fresh is not None:
    _name, _stored, pilot_name = result
    st.markdown(f"#### Plan: {METRIC_NAMES[fresh.metric]}")
    with st.columns([1, 2])[0]:
        seconds = time_per_task(db, user, study.name, page="plan", plans=[fresh, *kept])
    plan_metrics(planning.PlanInUnits.of([fresh], planning.study_rubrics(db, study.name, actor=user)), seconds, fresh)
    st.caption("The simulation's report, in tasks of the rubric the plan measures (one per unit):")
    st.text(planning.simulation_summary(fresh))

    def keep() -> None:
        try:
            planning.save_plan(db, user, study.name, fresh, pilot=pilot_name)
            flash(f"Kept as the {fresh.metric} plan of {study.name!r}; Study set-up checks the pool against it.")
        except ServiceError as error:
            flash(str(error), "error")

    st.button(f"Keep this plan for {study.name!r}", on_click=keep, type="primary")

st.markdown("#### Plans kept for this study")
if fresh is None and kept:
    with st.columns([1, 2])[0]:
        seconds = time_per_task(db, user, study.name, page="plan", plans=kept)
plan_panel(st.container(), db, user, study.name, seconds)
