"""The paper's appendix B tables and figures: Rubric A passing rates, outcome classes, strata, odds ratios.

Every table comes from ``review_app.services.export.paper`` (labels, captions, CSV and LaTeX downloads);
a judge-audit study shows its own tables (agreement with the judge, confusion, by confidence).

The analysis settings (harm-model reference levels, mean-reviewer tie rule, items without a clarity
score, the opt-in penalised fit) are saved with the study, so the export uses the same ones. Which
tasks enter the numbers (complete tasks only, the export's default, or all tasks with the ratings
they have so far) is the study's task choice, shared with the Export page and computed through the
same service path, so the page and the export agree for either choice.
"""

from dataclasses import replace

import streamlit as st

from review_app.analysis import OUTCOME_CLASSES
from review_app.analysis.formatting import FACTOR_LABELS
from review_app.analysis.priors import DEFAULT_PRIOR_INTERCEPT_SD, DEFAULT_PRIOR_SD
from review_app.analysis.rubric_b import TIE_RULE_LABELS, TIE_RULES
from review_app.analysis.study_harm_model import HARM_MODEL_FIXED
from review_app.services import export
from review_app.services.analysis_options import AnalysisOptions, save_analysis_options
from review_app.services.errors import ServiceError
from review_app.services.export import paper as paper_tables
from review_app.services.judge_audit import judge_audit_summary, verdict_names
from review_app.ui.components import charts, paper_table
from review_app.ui.components.analysis_cache import analysis_for, rubric_a_intervals_for
from review_app.ui.components.pickers import pick_study
from review_app.ui.components.task_choice import task_choice
from review_app.ui.components.text import plain
from review_app.ui.session import engine, flash, require_role, show_flashes

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
study = pick_study(db, user)
if study is None:
    st.stop()
show_flashes()
try:
    pending = export.pending_tasks(db, study.name, actor=user)
except ServiceError as exc:  # not a lead of this study (any more): say so, show nothing of it
    st.error(plain(exc))
    st.stop()
choice = task_choice(study.name, pending, page="analysis")
analysis = analysis_for(db, user, study.name, pending=choice)
if analysis.scope is not None:
    st.caption(plain(analysis.scope.describe()))
options = analysis.options
for note in analysis.notes:
    st.info(plain(note))

if "B" in study.rubric_keys:
    with st.expander("Analysis settings (saved with the study; the export uses them)"):
        settings_form(db, study.name, analysis, options, user)

tables = paper_tables.analysis_tables(analysis)
if analysis.rubric_a is not None:
    st.markdown("#### Rubric A: item validation")
    if st.toggle(
        "Bootstrap CIs for the means (2,000 task resamples)",
        key=f"rubric_a_bootstrap:{study.name}",
        help="Computed once per data version, then reused; the export always includes them.",
    ):
        with_intervals = rubric_a_intervals_for(db, user, study.name, pending=choice)
        if with_intervals is not None:
            tables["rubric_a"] = paper_tables.rubric_a_tables(replace(analysis, rubric_a=with_intervals))
    st.plotly_chart(charts.pass_rates(analysis.rubric_a.to_frame()), width="stretch")
    for table in tables["rubric_a"]:
        paper_table.show(table, study.name)

if analysis.rubric_b is not None:
    st.markdown("#### Rubric B: outcome classes")
    with st.expander("Class definitions"):
        for outcome in OUTCOME_CLASSES:
            st.markdown(f"**{outcome.label}**: {outcome.rule}")
    st.plotly_chart(charts.outcome_classes(analysis.rubric_b.to_frame()), width="stretch")
    for table in tables["rubric_b"]:
        paper_table.show(table, study.name)

if analysis.harm_model is not None:
    st.markdown("#### Harm model: worst case ~ model + content + provenance + clarity + (1 | reviewer)")
    model = analysis.harm_model
    if model.penalty.active:
        st.info(model.penalty.describe())
    for note in model.separation_notes():
        st.warning(plain(note))
    for note in model.notes:
        st.info(plain(note))
    for warning in (w for w in model.warnings if not w.startswith("separation:")):
        st.warning(plain(warning))
    st.plotly_chart(charts.odds_ratios(paper_tables.odds_ratio_figure_frame(analysis)), width="stretch")
    for table in tables["harm_model"]:
        paper_table.show(table, study.name)

if "judge" in study.rubric_keys:
    audit = judge_audit_summary(db, study.name, actor=user)
    st.markdown("#### Judge audit: the automatic judge against clinicians")
    st.caption(
        "The judge audit pairs every clinician annotation in force with the judge's label, pending tasks included."
    )
    left, right = st.columns(2)
    left.plotly_chart(charts.judge_labels(audit.confusion), width="stretch")
    right.plotly_chart(charts.confidence_levels(audit.by_confidence), width="stretch")
    names = verdict_names()
    for table in paper_tables.judge_audit_tables(audit):
        if table.key == "judge_disagreements":  # the reviewer and comment stay in the CSV: the rest fits a laptop
            paper_table.show(table, study.name, secondary=("Reviewer", "Comment"), values={"Judge's label": names})
        else:
            paper_table.show(table, study.name, labels=names, values={"Clinician \\ judge": names})

if analysis.agreement and st.toggle(
    "Agreement on these tasks (the export's agreement table: ordinal AC2, at least 2 ratings)",
    key=f"analysis_agreement:{study.name}",
    help="The Agreement page offers other weights and minimum ratings, on every annotation in force.",
):
    for table in paper_tables.agreement_tables(analysis.agreement_result()):  # built only when asked for
        paper_table.show(table, study.name, secondary=("Set aside", "Ratings"))
