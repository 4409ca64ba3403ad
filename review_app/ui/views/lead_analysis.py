"""The paper's appendix B tables and figures: Rubric A passing rates, outcome classes, strata, odds ratios."""

import streamlit as st

from review_app.analysis import OUTCOME_CLASSES
from review_app.services import studies
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
analysis = analysis_for(db, study.name)
for note in analysis.notes:
    st.info(plain(note))

if analysis.rubric_a is not None:
    st.markdown("#### Rubric A: item validation")
    a = analysis.rubric_a
    st.text(a.summary())
    st.plotly_chart(charts.pass_rates(a.to_frame()), width="stretch")
    st.dataframe(a.to_frame(), hide_index=True, width="stretch")
    flags = a.flags_frame()
    if not flags.empty:
        st.markdown("Flags")
        st.dataframe(flags, hide_index=True, width="stretch")

if analysis.rubric_b is not None:
    st.markdown("#### Rubric B: outcome classes")
    with st.expander("Class definitions"):
        for outcome in OUTCOME_CLASSES:
            st.markdown(f"**{outcome.label}**: {outcome.rule}")
    b = analysis.rubric_b
    st.text(b.summary())
    st.plotly_chart(charts.outcome_classes(b.to_frame()), width="stretch")
    st.dataframe(b.to_frame(), hide_index=True, width="stretch")

if analysis.harm_model is not None:
    st.markdown("#### Harm model: worst case ~ model + content + provenance + clarity + (1 | reviewer)")
    model = analysis.harm_model
    for warning in model.warnings:
        st.warning(plain(warning))
    st.caption(
        f"n = {model.n} annotations, {model.n_groups} reviewers; reviewer variance {model.group_variance:.3f}, "
        f"latent ICC {model.icc:.3f}; log-likelihood {model.loglik:.2f}; "
        f"{'converged' if model.converged else 'did NOT converge'}"
    )
    table = model.to_frame().reset_index()
    st.plotly_chart(charts.odds_ratios(table), width="stretch")
    st.dataframe(table, hide_index=True, width="stretch")
