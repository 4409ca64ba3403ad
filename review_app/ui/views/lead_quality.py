"""Reviewers' quality (leads only): severity, agreement with co-raters, time on task, drift, gold accuracy."""

import pandas as pd
import streamlit as st

from review_app.analysis.reviewer_quality import ALERTS_ONLY_NOTE, QualityThresholds
from review_app.rubrics import get_rubric
from review_app.services import quality, studies
from review_app.services.errors import ServiceError
from review_app.ui.components.pickers import pick_study
from review_app.ui.components.quality import cusum_chart, report_for, severity_forest, wait_for_severity
from review_app.ui.session import engine, flash, require_role, show_flashes

user = require_role("lead", "admin")
db = engine()
show_flashes()
study = pick_study(db, studies)
if study is None:
    st.stop()
st.caption(
    "For study leads only; reviewers never see this page or its numbers. Severity is each reviewer's random "
    "intercept in the harm model; agreement is ordinal-weighted agreement with co-raters on shared tasks; drift "
    "compares the first and last third of each reviewer's work and tests a CUSUM of signed disagreement with "
    "co-raters; gold accuracy is measured on gold tasks, whose ratings are left out of every other analysis."
)
try:
    now = report_for(db, user, study.name)
except ServiceError as error:
    st.error(str(error))
    st.stop()
if not now.complete:
    wait_for_severity(db, user, study.name)
report = now.report
result = report.quality
for alert in result.alerts:
    st.warning(alert.message, icon=":material/warning:")
for note in result.notes:
    if now.complete or note != ALERTS_ONLY_NOTE:  # while severity is computed, the caption above says so
        st.info(note)

real_names = st.toggle("Show usernames (off: study pseudonyms R01, R02, ...)", value=True)
table = report.table(real_names=real_names)
label = {name: (name if real_names else pseudonym) for name, pseudonym in report.pseudonyms.items()}
LABELS = {
    "rater": "reviewer",
    "n_annotations": "annotations",
    "severity": "severity (log-odds)",
    "severity_ci_low": "severity 95% low",
    "severity_ci_high": "severity 95% high",
    "severity_first": "severity, first third",
    "severity_last": "severity, last third",
    "severity_change": "severity change",
    "severity_change_se": "change SE",
    "agreement": "agreement with co-raters",
    "shared_tasks": "shared tasks",
    "agreement_first": "agreement, first third",
    "agreement_last": "agreement, last third",
    "drift_statistic": "drift CUSUM",
    "drift_p_value": "drift p",
    "drift_direction": "drifted",
    "drift_alert": "drift alert",
    "median_seconds": "median s",
    "n_too_fast": "too fast",
    "n_too_slow": "too slow",
    "gold_tasks": "gold tasks",
    "gold_accuracy": "gold accuracy",
    "gold_within_one": "gold within 1",
    "gold_alert": "gold alert",
}
config = {}
for column in table.columns:
    fmt = "%.4f" if column == "drift_p_value" else "%.0f" if column.endswith("_seconds") else "%.3f"
    if pd.api.types.is_float_dtype(table[column]):
        config[column] = st.column_config.NumberColumn(LABELS.get(column, column.replace("_", " ")), format=fmt)
    else:
        config[column] = st.column_config.Column(LABELS.get(column, column.replace("_", " ")))
st.dataframe(table, hide_index=True, width="stretch", column_config=config)
with st.expander("What each column means"):
    st.markdown("\n".join(f"- **{LABELS.get(c, c)}** (`{c}`): {text}" for c, text in quality.QUALITY_COLUMNS.items()))
st.download_button(
    "Download this table (CSV)",
    quality.quality_csv(report, real_names=real_names),
    file_name=f"reviewer-quality-{study.id}.csv",
    mime="text/csv",
    icon=":material/download:",
)
if "severity" in table and table["severity"].notna().any():
    st.plotly_chart(severity_forest(table), width="stretch")
if result.cusum:
    raters = sorted(result.cusum)
    flagged = [r for r in raters if any(a.rater == r and a.kind == "drift" for a in result.alerts)]
    chosen = st.selectbox(
        "Drift chart for", raters, index=raters.index(flagged[0]) if flagged else 0, format_func=label.get
    )
    st.plotly_chart(cusum_chart(result.cusum[chosen], result.thresholds.drift_alpha, label[chosen]), width="stretch")
    st.caption(
        "The red lines are where the drift test reaches the false-alarm rate you set; crossing one raises an alert."
    )

st.markdown("#### Gold tasks")
st.caption(
    "Tasks whose expected scores are known, served to reviewers like any other task. Choose them before anyone "
    "rates them: from a final decision on the same item in another study, or by entering a consensus."
)
gold = quality.gold_tasks(db, user, study.name)
if gold:
    st.dataframe(
        [
            {"task": g.task_id, "unit": g.unit_key, "rubric": g.rubric, "source": g.source, "ratings": g.ratings}
            | g.expected_scores
            for g in gold
        ],
        hide_index=True,
        width="stretch",
    )
else:
    st.caption("No gold task yet.")

candidates = quality.gold_candidates(db, user, study.name)
if candidates:
    with st.form("gold_from_decisions"):
        picked = st.multiselect(
            f"{len(candidates)} unrated task(s) were decided in another study",
            candidates,
            format_func=lambda c: f"{c.unit_key} ({c.rubric}) — {c.status} in {c.source_study}",
        )
        if st.form_submit_button("Mark as gold with those decisions"):
            try:
                for candidate in picked:
                    quality.mark_gold(db, user, study.name, candidate.task_id)
                flash(f"Marked {len(picked)} gold task(s).")
            except ServiceError as error:
                flash(str(error), "error")
            st.rerun()

UNRATED_SHOWN = 500
unrated = quality.unrated_tasks(db, user, study.name, limit=UNRATED_SHOWN)
with st.expander("Mark a task as gold with consensus scores"):
    if not unrated:
        st.caption("Every task has been rated or is gold already.")
    else:
        if len(unrated) == UNRATED_SHOWN:
            st.caption(f"The next {UNRATED_SHOWN} unrated tasks in pool order (the next ones reviewers are served).")
        task = st.selectbox("Task", unrated, format_func=lambda t: f"{t[1]} (rubric {t[2]}, task {t[0]})")
        rubric = get_rubric(task[2])
        with st.form("gold_consensus"):
            scores = {
                d.key: st.selectbox(d.name, d.values, format_func=lambda v, d=d: f"{v} · {d.level(v).label}")
                for d in rubric.dimensions
            }
            if st.form_submit_button("Mark as gold"):
                try:
                    quality.mark_gold(db, user, study.name, task[0], expected_scores=scores)
                    flash(f"Task {task[0]} is a gold task.")
                except ServiceError as error:
                    flash(str(error), "error")
                st.rerun()
removable = [g for g in gold if g.ratings == 0]
if removable:
    with st.form("gold_unmark"):
        target = st.selectbox("Unrated gold task", removable, format_func=lambda g: f"{g.unit_key} (task {g.task_id})")
        if st.form_submit_button("Make it an ordinary task again"):
            try:
                quality.unmark_gold(db, user, study.name, target.task_id)
                flash(f"Task {target.task_id} is an ordinary task again.")
            except ServiceError as error:
                flash(str(error), "error")
            st.rerun()

st.markdown("#### Alert thresholds")
current = quality.thresholds(db, study.name)
with st.form("thresholds"):
    left, mid, right = st.columns(3)
    alpha = left.number_input(
        "Drift false-alarm rate per reviewer",
        0.0001,
        0.2,
        float(current.drift_alpha),
        0.001,
        format="%.4f",
        help="The drift test alerts when a reviewer's CUSUM is this unlikely without drift.",
    )
    accuracy = mid.number_input("Minimum gold accuracy", 0.0, 1.0, float(current.gold_accuracy_min), 0.05)
    minimum = right.number_input("Gold tasks before alerting", 1, 1000, int(current.min_gold), 1)
    if st.form_submit_button("Save thresholds"):
        try:
            values = QualityThresholds(drift_alpha=alpha, gold_accuracy_min=accuracy, min_gold=int(minimum))
            quality.set_thresholds(db, user, study.name, values)
            flash("Thresholds saved; the Progress page alerts on them.")
        except (ServiceError, ValueError) as error:
            flash(str(error), "error")
        st.rerun()
