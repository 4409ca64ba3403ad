"""Agreement dashboard: Gwet's AC2 (ordinal), Krippendorff's alpha and percent agreement per dimension."""

import streamlit as st

from review_app.services import studies
from review_app.services.judge_audit import judge_audit_summary
from review_app.ui.components import charts
from review_app.ui.components.analysis_cache import analysis_for
from review_app.ui.components.pickers import pick_study
from review_app.ui.components.text import plain
from review_app.ui.session import engine, require_role

require_role("lead", "admin")
db = engine()
study = pick_study(db, studies)
if study is None:
    st.stop()
if "judge" in study.rubric_keys:
    audit = judge_audit_summary(db, study.name)
    st.markdown("#### Automatic judge vs clinicians")
    st.caption(
        "Each clinician label paired with the judge's label on the same trace: Gwet's AC1 over recognized / "
        "neutral / polluted, exact agreement, the confusion table and the cases where they differ."
    )
    st.text(audit.summary())
    left, right = st.columns([2, 3])
    left.dataframe(audit.confusion, width="stretch")
    if not audit.disagreements.empty:
        right.dataframe(audit.disagreements, hide_index=True, width="stretch")
    st.markdown("#### Agreement among clinicians")
analysis = analysis_for(db, study.name)
frame = analysis.agreement_frame()
st.caption(
    "Per dimension on tasks with two or more ratings: Gwet's AC2 with ordinal weights over the full "
    "category set (95% CI from Gwet's variance), Krippendorff's ordinal alpha and exact percent agreement. "
    "Binary outcomes (worst-case class, correct answer) use AC1."
)
for note in analysis.notes:
    st.info(plain(note))
if frame.empty:
    st.info("No task has two ratings yet, so agreement cannot be computed.")
    st.stop()
for rubric_key, part in frame.groupby("rubric", sort=True):
    st.markdown(f"#### Rubric {rubric_key}")
    left, right = st.columns([3, 2])
    left.plotly_chart(charts.agreement_forest(part), width="stretch")
    right.plotly_chart(charts.score_usage(part), width="stretch")
    shown = part[
        [
            "score_name",
            "coefficient_name",
            "coefficient",
            "ci_low",
            "ci_high",
            "alpha_ordinal",
            "percent_agreement",
            "n_units",
            "n_ratings",
        ]
    ].rename(
        columns={
            "score_name": "score",
            "coefficient_name": "coef.",
            "coefficient": "value",
            "ci_low": "95% CI low",
            "ci_high": "95% CI high",
            "alpha_ordinal": "Krippendorff α",
            "percent_agreement": "% agreement",
            "n_units": "tasks",
            "n_ratings": "ratings",
        }
    )
    st.dataframe(
        shown,
        hide_index=True,
        width="stretch",
        column_config={
            c: st.column_config.NumberColumn(format="%.3f")
            for c in ("value", "95% CI low", "95% CI high", "Krippendorff α", "% agreement")
        },
    )
