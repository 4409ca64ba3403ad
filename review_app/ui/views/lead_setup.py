"""Study set-up: create a study, draw its review pool, assign raters.

The pool is drawn in units (one task of each of the study's rubrics per unit), the unit the Plan page
speaks too; the kept plan is shown as the Plan page shows it (``components.plan_units``) and fills in
the draw and assignment forms.
"""

import streamlit as st

from review_app.rubrics import all_rubrics
from review_app.services import assignment, planning, studies
from review_app.services.errors import ServiceError
from review_app.ui.components.pickers import pick_study
from review_app.ui.components.plan_units import plan_panel, time_per_task
from review_app.ui.components.text import plain
from review_app.ui.session import engine, require_role

user = require_role("lead", "admin")
db = engine()

with (
    st.expander("Create a study", expanded=not studies.list_studies(db, actor=user)),
    st.form("create_study", border=False),
):
    name = st.text_input("Study name")
    rubric_keys = st.multiselect(
        "Rubrics",
        [r.key for r in all_rubrics()],
        default=["A", "B"],
        format_func=lambda k: next(r.name for r in all_rubrics() if r.key == k),
    )
    description = st.text_area("Description (optional)")
    if st.form_submit_button("Create study", type="primary"):
        try:
            study = studies.create_study(db, name, rubrics=rubric_keys, description=description, actor=user)
            st.session_state["lead_study"] = study.name
            st.success(f"Created {plain(repr(study.name))}.")
        except ServiceError as exc:
            st.error(plain(exc))

study = pick_study(db, user)
if study is None:
    st.stop()
st.caption(
    "Rubrics: " + ", ".join(planning.rubric_label(k) for k in study.rubric_keys) + f" · status: {study.status}"
)

st.markdown("#### 1. Draw the review pool")
pool_column, plan_column = st.columns([3, 2])
plan_box = plan_column.container()  # the study's plan, filled at the end (after this run's draw or assignment)
try:
    defaults = planning.setup_defaults(planning.plan_check(db, study.name, actor=user))
except ServiceError as exc:  # not a lead of this study (any more): say so, show nothing of it
    st.error(plain(exc))
    st.stop()
if defaults.from_plan:
    pool_column.caption("Filled in from the plan kept for this study (Plan page); change anything before drawing.")
with pool_column.form("pool"):
    left, right = st.columns(2)
    size = left.number_input("Units to draw", min_value=1, value=defaults.units_to_draw, step=1)
    seed = right.number_input("Seed", min_value=0, value=0, step=1, help="Same seed and data, same pool.")
    subset_q = st.text_input("Subset quota", placeholder="MEDMISQA:35,MEDMISMCQA:35,MEDMISXPERTQA:25,MEDMISHLE:5")
    provenance_q = st.text_input("Provenance quota", placeholder="neutral:34,authority:33,patient:33")
    model_q = st.text_input("Model quota (response rubrics)", placeholder="model-a:33,model-b:34,model-c:33")
    left, right = st.columns(2)
    condition = left.text_input("Response condition", value="type1")
    language = right.text_input("Languages (comma-separated, empty = all)", placeholder="en")
    add = st.checkbox("Add to an existing pool", value=defaults.add)
    if st.form_submit_button("Draw pool", type="primary"):
        try:
            quotas = [
                studies.parse_quota(f"{dim}={spec}")
                for dim, spec in (("subset", subset_q), ("provenance", provenance_q), ("model", model_q))
                if spec.strip()
            ]
            languages = {c.strip().lower() for c in language.split(",") if c.strip()} or None
            result = studies.draw_pool(
                db,
                study.name,
                int(size),
                quotas=quotas,
                seed=int(seed),
                condition=condition or None,
                languages=languages,
                add=add,
                actor=user,
            )
            st.success(plain(str(result).splitlines()[0]))
            st.code(str(result), language=None)
        except ServiceError as exc:
            st.error(plain(exc))

st.markdown("#### 2. Assign raters")
with st.form("assign"):
    left, mid, right = st.columns(3)
    raters = left.number_input("Raters per multi-rated unit", min_value=1, max_value=5, value=defaults.raters)
    share = mid.slider(
        "Share of units multi-rated",
        0.0,
        1.0,
        defaults.dual_share,
        0.01,
        help="Of the units not assigned yet."
        + (" Filled in to bring the multi-rated units up to the kept plan." if defaults.from_plan else ""),
    )
    seed = right.number_input("Seed", min_value=0, value=0, step=1, key="assign_seed")
    if st.form_submit_button("Assign", type="primary"):
        try:
            result = assignment.assign(
                db, study.name, raters=int(raters), dual_share=float(share), seed=int(seed), actor=user
            )
            st.success(plain(str(result).splitlines()[0]))
            st.code(str(result), language=None)
        except ServiceError as exc:
            st.error(plain(exc))

kept = planning.saved_plans(db, study.name, actor=user)
seconds = None
if kept:
    with plan_box:
        seconds = time_per_task(db, user, study.name, page="setup", plans=kept)
plan_panel(plan_box, db, user, study.name, seconds, per_row=2)
