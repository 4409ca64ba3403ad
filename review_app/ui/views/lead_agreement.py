"""Agreement dashboard: Gwet's AC2 (weights selectable, ordinal by default), Krippendorff's alpha, percent agreement."""

import streamlit as st

from review_app.services import studies
from review_app.services.errors import ServiceError
from review_app.services.export import paper as paper_tables
from review_app.services.judge_audit import judge_audit_summary, verdict_names
from review_app.ui.components import charts, tables
from review_app.ui.components.analysis_cache import agreement_page_for
from review_app.ui.components.pickers import pick_study
from review_app.ui.components.text import plain
from review_app.ui.session import engine, require_role

user = require_role("lead", "admin")
db = engine()
study = pick_study(db, user)
if study is None:
    st.stop()
try:  # refused before any control is drawn; the reads below check the user again
    studies.check_lead_of(db, study.name, actor=user)
except ServiceError as exc:
    st.error(plain(exc))
    st.stop()
if "judge" in study.rubric_keys:
    audit = judge_audit_summary(db, study.name, actor=user)
    st.markdown("#### Automatic judge vs clinicians")
    names = verdict_names()
    for table in paper_tables.judge_audit_tables(audit)[:2]:
        tables.show_paper(table, study.name, labels=names, values={"Clinician \\ judge": names})
    st.caption("Agreement by reviewer confidence and every disagreement are on the Analysis page.")
    st.markdown("#### Agreement among clinicians")
WEIGHT_LABELS = {
    "ordinal": "Ordinal (default; Gwet's ordinal weights)",
    "linear": "Linear",
    "quadratic": "Quadratic",
    "identity": "Identity (unweighted: AC1)",
}
left, right = st.columns([3, 2])
weights = left.selectbox(
    "Weights for the rubric dimensions",
    list(WEIGHT_LABELS),
    format_func=WEIGHT_LABELS.get,
    key="agreement_weights",
    help="How much credit partial agreement (0 vs 1, 1 vs 2) gets. Binary outcomes always use AC1.",
)
min_ratings = right.number_input(
    "Minimum ratings per task",
    min_value=1,
    max_value=10,
    value=2,
    step=1,
    key="agreement_min_ratings",
    help="Tasks with fewer ratings are set aside and counted. 2 = dual-rated tasks (the protocol); 1 keeps every "
    "task, as Gwet's handbook and irrCAC do.",
)
page = agreement_page_for(db, user, study.name, weights=weights, min_ratings=int(min_ratings))
result = page.result
for note in result.notes:
    st.info(plain(note))
frame = result.frame()
if frame.empty:
    st.info(f"No task has {max(int(min_ratings), 2)} ratings yet, so agreement cannot be computed.")
    st.stop()
for table in page.tables:
    part = frame[frame["rubric"] == table.key.removeprefix("agreement_")]
    st.markdown(f"#### Rubric {part['rubric'].iloc[0]}")
    left, right = st.columns([3, 2])
    tasks = f"the {int(part['n_units'].max()):,} task(s) with at least {int(min_ratings)} rating(s)"
    with left:
        st.plotly_chart(charts.agreement_forest(part), width="stretch")
        tables.caption(
            f"Each dimension's agreement coefficient with its 95% CI ({paper_tables.column_weights(weights)}; AC1 "
            f"for binary outcomes), over {tasks}."
        )
    with right:
        st.plotly_chart(charts.score_usage(part), width="stretch")
        tables.caption(f"How often each score was given on {tasks}, per dimension.")
    tables.show_paper(table, study.name, secondary=("Set aside", "Ratings"))
