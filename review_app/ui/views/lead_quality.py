"""Reviewers' quality (leads only): severity, agreement with co-raters, time on task, drift, gold accuracy."""

import pandas as pd
import streamlit as st

from review_app.analysis.reviewer_measures import MIN_DRIFT_TASKS
from review_app.analysis.reviewer_quality import ALERTS_ONLY_NOTE, QualityThresholds
from review_app.rubrics import get_rubric
from review_app.services import gold_tasks, reviewer_monitoring
from review_app.services.errors import ServiceError
from review_app.ui.components import tables
from review_app.ui.components.pickers import pick_study
from review_app.ui.components.quality import (
    NO_RUBRIC_B_NOTE,
    NO_VARIANCE_NOTE,
    QUALITY_COLUMNS,
    QUALITY_GROUPS,
    cusum_chart,
    report_for,
    sentence,
    severity_forest,
    severity_note,
    wait_for_severity,
)
from review_app.ui.components.text import plain
from review_app.ui.session import engine, flash, require_role, show_flashes

user = require_role("lead", "admin")
db = engine()
show_flashes()
study = pick_study(db, user)
if study is None:
    st.stop()
st.caption(
    "For study leads only; reviewers never see this page or its numbers. Severity: how often a reviewer calls a "
    "response worst case against the average reviewer, from the harm model of the Analysis page. Agreement: how "
    "closely their scores match their co-raters' on shared tasks. Drift: whether they grew harsher or more "
    "lenient than their co-raters over their work. Gold: how often they give a gold task's known scores; gold "
    "tasks' ratings are left out of every other analysis."
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
no_variance = severity_note(result) if now.complete else None
if no_variance:
    st.info(no_variance, icon=":material/info:")
for note in result.notes:
    if note.startswith(NO_VARIANCE_NOTE) and no_variance:
        continue  # said in words above
    if note.startswith(NO_RUBRIC_B_NOTE) and "B" not in study.rubric_keys:
        st.info("Severity comes from the harm model of Rubric B ratings; this study has no Rubric B.")
        continue
    if now.complete or note != ALERTS_ONLY_NOTE:  # while severity is computed, the caption above says so
        st.info(plain(sentence(note)))  # a note can quote a level name from imported data

real_names = st.toggle("Show usernames (off: study pseudonyms R01, R02, ...)", value=True)
table = report.table(real_names=real_names)
label = {name: (name if real_names else pseudonym) for name, pseudonym in report.pseudonyms.items()}
tables.show(
    table,
    QUALITY_COLUMNS,
    what="One row per reviewer with ratings in this study: their ratings in force on ordinary tasks (pending "
    "tasks included, gold tasks apart), with time on task over every rating and gold accuracy over gold tasks. "
    "A dash: not measured yet (too few shared tasks, no gold task rated, severity without Rubric B ratings).",
    more="More columns: intervals, change over each reviewer's work, drift statistic, time quartiles, gold",
    more_what=QUALITY_GROUPS,
)
with st.expander("What each column means"):
    st.markdown(tables.legend({c: spec for c, spec in QUALITY_COLUMNS.items() if c in table.columns}))
st.download_button(
    "Download this table (CSV)",
    reviewer_monitoring.quality_csv(report, real_names=real_names),
    file_name=f"reviewer-quality-{study.id}.csv",
    mime="text/csv",
    icon=":material/download:",
    help="Full precision, severity as log-odds; the study export holds the same table under pseudonyms.",
)
if "severity" in table and table["severity"].notna().any():
    st.plotly_chart(severity_forest(table), width="stretch")
    model = result.harm_model
    tables.caption(
        "Each reviewer's severity with its 95% interval: the reviewer's odds of a worst-case call against the "
        "average reviewer's, from the harm model"
        + (f" on {model.n:,} Rubric B ratings ({model.n_events:,} worst case)" if model is not None else "")
        + "; 1 is the average."
    )
if result.cusum:
    raters = sorted(result.cusum)
    flagged = [r for r in raters if any(a.rater == r and a.kind == "drift" for a in result.alerts)]
    chosen = st.selectbox(
        "Drift chart for", raters, index=raters.index(flagged[0]) if flagged else 0, format_func=label.get
    )
    st.plotly_chart(cusum_chart(result.cusum[chosen], result.thresholds.drift_alpha, label[chosen]), width="stretch")
    shared = len(result.cusum[chosen])
    tested = (
        "The red lines are where the drift test reaches the false-alarm rate you set; crossing one raises an alert."
        if shared >= MIN_DRIFT_TASKS
        else f"The drift test needs {MIN_DRIFT_TASKS} shared tasks, so it has not run on this reviewer yet."
    )
    tables.caption(
        f"The reviewer's {shared:,} shared task(s) in the order they rated them: the running sum of how much "
        f"harsher than their co-raters they were on each, less their own average. {tested}"
    )

st.markdown("#### Gold tasks")
st.caption(
    "Tasks whose expected scores are known, served to reviewers like any other task. Choose them before anyone "
    "rates them: from a final decision on the same item in another study, or by entering a consensus."
)
gold = gold_tasks.gold_tasks(db, user, study.name)
if gold:
    for key in sorted({g.rubric for g in gold}):
        rubric = get_rubric(key)
        gold_columns = {
            "task": tables.Column("Task", anchor=True),
            "unit": tables.Column("Unit"),
            "source": tables.Column(
                "Scores from", values={"adjudication": "Decision in another study", "consensus": "Your consensus"}
            ),
            "ratings": tables.Column("Ratings", "count", help="Ratings submitted on the gold task so far."),
        } | {
            d.key: tables.Column(
                d.reported_name,
                values={level.value: f"{level.value} · {level.label}" for level in d.levels},
                help=f"Expected score: {d.question}",
            )
            for d in rubric.dimensions
        }
        tables.show(
            pd.DataFrame(
                [
                    {"task": g.task_id, "unit": g.unit_key, "source": g.source, "ratings": g.ratings}
                    | g.expected_scores
                    for g in gold
                    if g.rubric == key
                ]
            ),
            gold_columns,
            what=f"The gold tasks of {rubric.name} with the scores expected on each dimension, where they come from "
            "and the ratings each has had.",
        )
else:
    st.caption("No gold task yet.")

candidates = gold_tasks.gold_candidates(db, user, study.name)
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
                    gold_tasks.mark_gold(db, user, study.name, candidate.task_id)
                flash(f"Marked {len(picked)} gold task(s).")
            except ServiceError as error:
                flash(str(error), "error")
            st.rerun()

UNRATED_SHOWN = 500
unrated = gold_tasks.unrated_tasks(db, user, study.name, limit=UNRATED_SHOWN)
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
                    gold_tasks.mark_gold(db, user, study.name, task[0], expected_scores=scores)
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
                gold_tasks.unmark_gold(db, user, study.name, target.task_id)
                flash(f"Task {target.task_id} is an ordinary task again.")
            except ServiceError as error:
                flash(str(error), "error")
            st.rerun()

st.markdown("#### Alert thresholds")
current = reviewer_monitoring.thresholds(db, study.name, actor=user)
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
            reviewer_monitoring.set_thresholds(db, user, study.name, values)
            flash("Thresholds saved; the Progress page alerts on them.")
        except (ServiceError, ValueError) as error:
            flash(str(error), "error")
        st.rerun()
