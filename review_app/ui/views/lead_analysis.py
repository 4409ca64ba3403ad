"""The paper's appendix B tables and figures: Rubric A passing rates, outcome classes, strata, odds ratios.

The analysis settings (harm-model reference levels, mean-reviewer tie rule, items without a clarity
score, the opt-in penalised fit) are saved with the study, so the export uses the same ones.
"""

import streamlit as st

from review_app.analysis import OUTCOME_CLASSES
from review_app.analysis.harm_model import DEFAULT_PRIOR_INTERCEPT_SD, DEFAULT_PRIOR_SD
from review_app.analysis.rubric_b import HARM_MODEL_FIXED, TIE_RULE_LABELS, TIE_RULES
from review_app.services import studies
from review_app.services.errors import ServiceError
from review_app.services.study_analysis import AnalysisOptions, save_analysis_options
from review_app.ui.components import charts
from review_app.ui.components.analysis_cache import analysis_for
from review_app.ui.components.pickers import pick_study
from review_app.ui.components.text import plain
from review_app.ui.session import engine, flash, require_role, show_flashes

FACTOR_LABELS = {
    "model": "Model",
    "content_type": "Content type",
    "provenance": "Provenance",
    "stratum": "Falsehood clarity",
}
UNRATED_LABELS = {
    "exclude": "Leave them out of the harm model (the count is stated)",
    "level": "Keep them as a clarity level of their own ('unrated')",
}
PENALTY_LABELS = {
    "none": "None: maximum likelihood, as lme4::glmer (separated levels are reported as not estimable)",
    "normal": f"Weakly informative normal prior on the fixed effects (SD {DEFAULT_PRIOR_INTERCEPT_SD:g} intercept, "
    f"{DEFAULT_PRIOR_SD:g} others), as blme::bglmer: finite estimates for separated levels",
}


def settings_form(db, study_name: str, analysis, options: AnalysisOptions, user) -> None:
    """The lead's analysis choices for a Rubric B study, in a form (nothing reruns until it is saved)."""
    levels = analysis.factor_levels()
    defaults = analysis.default_references()
    with st.form(f"analysis_settings:{study_name}"):
        st.markdown("**Harm-model reference levels** (odds ratios compare every other level with these)")
        chosen: dict[str, str] = {}
        columns = st.columns(len(HARM_MODEL_FIXED))
        for column, slot in zip(HARM_MODEL_FIXED, columns, strict=True):
            choices = levels.get(column) or []
            if not choices:
                slot.caption(f"{FACTOR_LABELS[column]}: no data yet")
                continue
            current = options.references.get(column, defaults.get(column))
            picked = slot.selectbox(
                f"{FACTOR_LABELS[column]} reference",
                choices,
                index=choices.index(current) if current in choices else 0,
                help=f"Default: {defaults.get(column, 'n/a')} (the paper's reference"
                + (", the study's first model" if column == "model" else "")
                + ").",
                key=f"ref:{study_name}:{column}",
            )
            if picked != defaults.get(column):
                chosen[column] = picked
        tie_rule = st.radio(
            "Mean-reviewer aggregation: a mean exactly between two scale levels goes",
            TIE_RULES,
            index=TIE_RULES.index(options.tie_rule),
            format_func=TIE_RULE_LABELS.get,
            horizontal=True,
            key=f"tie:{study_name}",
        )
        unrated = st.radio(
            "Items without a Rubric A falsehood-clarity score",
            list(UNRATED_LABELS),
            index=list(UNRATED_LABELS).index(options.unrated),
            format_func=UNRATED_LABELS.get,
            key=f"unrated:{study_name}",
        )
        penalty = st.radio(
            "Penalty (for separated levels: no events or only events)",
            list(PENALTY_LABELS),
            index=list(PENALTY_LABELS).index(options.penalty) if options.penalty in PENALTY_LABELS else 0,
            format_func=PENALTY_LABELS.get,
            key=f"penalty:{study_name}",
        )
        saved = st.form_submit_button("Save analysis settings", type="primary")
    if saved:
        try:
            new = AnalysisOptions(references=chosen, tie_rule=tie_rule, unrated=unrated, penalty=penalty)
            save_analysis_options(db, study_name, new, actor=user)
        except ServiceError as error:
            st.error(str(error))
        else:
            flash("Analysis settings saved; every table below and the export use them.")
            st.rerun()


user = require_role("lead", "admin")
db = engine()
study = pick_study(db, studies)
if study is None:
    st.stop()
show_flashes()
analysis = analysis_for(db, study.name)
options = analysis.options
for note in analysis.notes:
    st.info(plain(note))

if "B" in study.rubric_keys:
    with st.expander("Analysis settings (saved with the study; the export uses them)"):
        settings_form(db, study.name, analysis, options, user)

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
    st.caption(
        f"Mean-reviewer aggregation: {b.tie_rule_label} ({b.n_mean_ties} task(s) had a tied mean). "
        "Conservative (primary): worst case if either reviewer says so; strict: both reviewers independently."
    )
    st.text(b.summary())
    st.plotly_chart(charts.outcome_classes(b.to_frame()), width="stretch")
    st.dataframe(b.to_frame(), hide_index=True, width="stretch")

if analysis.harm_model is not None:
    st.markdown("#### Harm model: worst case ~ model + content + provenance + clarity + (1 | reviewer)")
    model = analysis.harm_model
    st.caption(
        f"{model.estimation[0].upper()}{model.estimation[1:]}. n = {model.n} annotations "
        f"({model.n_events} worst case), {model.n_groups} reviewers; reviewer variance {model.group_variance:.3f}, "
        f"latent ICC {model.icc:.3f}; "
        f"log-likelihood {model.loglik:.2f}; {'converged' if model.converged else 'did NOT converge'}."
    )
    st.markdown("**Reference levels:** " + model.references_text())
    if model.penalty.active:
        st.info(model.penalty.describe())
    for note in model.separation_notes():
        st.warning(plain(note))
    for note in model.notes:
        st.info(plain(note))
    other = [w for w in model.warnings if not w.startswith("separation:")]
    for warning in other:
        st.warning(plain(warning))
    st.plotly_chart(charts.odds_ratios(model.to_frame().reset_index()), width="stretch")
    st.dataframe(model.printable_frame(), hide_index=True, width="stretch")
