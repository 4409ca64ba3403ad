"""Agreement dashboard: Gwet's AC2 (weights selectable, ordinal by default), Krippendorff's alpha, percent agreement."""

import streamlit as st

from review_app.services import studies
from review_app.services.judge_audit import judge_audit_summary
from review_app.ui.components import charts
from review_app.ui.components.analysis_cache import agreement_for
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
result = agreement_for(db, study.name, weights=weights, min_ratings=int(min_ratings))
frame = result.frame()
coefficient = "AC1 (unweighted)" if weights == "identity" else f"Gwet's AC2 with {weights} weights"
st.caption(
    f"Per dimension on tasks with at least {int(min_ratings)} rating(s) (N below; tasks with fewer are set aside "
    f"and counted): {coefficient} over the full category set (95% CI from Gwet's variance, clipped to [-1, 1]), "
    "Krippendorff's ordinal alpha and exact percent agreement. Binary outcomes (worst-case class, correct answer) "
    "use AC1."
)
for note in result.notes:
    st.info(plain(note))
if frame.empty:
    st.info(f"No task has {max(int(min_ratings), 2)} ratings yet, so agreement cannot be computed.")
    st.stop()
for rubric_key, part in frame.groupby("rubric", sort=True):
    st.markdown(f"#### Rubric {rubric_key}")
    set_aside = int(part["n_units_dropped"].max())
    st.caption(
        f"N = {int(part['n_units'].max())} task(s) with at least {int(min_ratings)} rating(s); "
        f"{set_aside} task(s) with fewer set aside."
    )
    left, right = st.columns([3, 2])
    left.plotly_chart(charts.agreement_forest(part), width="stretch")
    right.plotly_chart(charts.score_usage(part), width="stretch")
    shown = part[
        [
            "score_name",
            "coefficient_name",
            "weights",
            "coefficient",
            "ci_low",
            "ci_high",
            "alpha_ordinal",
            "percent_agreement",
            "n_units",
            "n_units_dropped",
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
            "n_units_dropped": "set aside",
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
