"""Disagreement queue and adjudication: both ratings side by side under pseudonyms, a final decision."""

import pandas as pd
import streamlit as st

from review_app.rubrics import get_rubric
from review_app.services import adjudication, reviewing, studies
from review_app.services.errors import ServiceError
from review_app.ui.components import material
from review_app.ui.components.pickers import pick_study
from review_app.ui.components.text import plain
from review_app.ui.session import engine, flash, require_role, show_flashes

user = require_role("lead", "admin")
db = engine()
show_flashes()
study = pick_study(db, studies)
if study is None:
    st.stop()
rubric_key = st.radio("Rubric", study.rubric_keys, horizontal=True, format_func=lambda k: get_rubric(k).name)
rubric = get_rubric(rubric_key)
left, right = st.columns([3, 1], vertical_alignment="bottom")
open_only = left.toggle("Only tasks that still need a decision", value=True)
if right.button("Record unanimous decisions", help="Mark every task whose raters fully agree as unanimous."):
    st.success(plain(adjudication.auto_unanimous(db, study.name, rubric_key, lead_id=user.id)))
entries = adjudication.disagreement_queue(db, study.name, rubric_key, open_only=open_only)
if not entries:
    st.success("Nothing to adjudicate here.")
    st.stop()
queue = adjudication.queue_frame(entries)
st.dataframe(
    queue[["task_id", "priority_label", "subset", "raters", "reasons", "status", "version", "stale"]],
    hide_index=True,
    width="stretch",
)
labels = {e.task_id: f"Task {e.task_id} · {adjudication.PRIORITY_LABELS[e.priority]} · {e.subset}" for e in entries}
kept = st.session_state.get("adj_keep_task")
if kept is not None and kept not in labels:
    labels = {kept: f"Task {kept} · decided meanwhile by another lead"} | labels
task_id = st.selectbox("Task to adjudicate", list(labels), format_func=labels.get)
view = adjudication.adjudication_view(db, task_id, lead_id=user.id)


def _record(task: int, expected_version: int) -> None:
    """Record the decision for the task and version the lead was looking at (even if the page moved on)."""
    status = st.session_state[f"adj{task}:status"]
    finals = {d.key: st.session_state.get(f"adj{task}:{d.key}") for d in rubric.dimensions}
    scores = None if status in ("unanimous", "unresolved") else {k: v for k, v in finals.items() if v is not None}
    try:
        record = adjudication.adjudicate(
            db,
            task,
            lead_id=user.id,
            final_scores=scores,
            status=status,
            rationale=st.session_state.get(f"adj{task}:rationale", ""),
            expected_version=expected_version,
        )
    except ServiceError as exc:
        st.session_state["adj_keep_task"] = task
        flash(str(exc), "error")
    else:
        st.session_state.pop("adj_keep_task", None)
        flash(f"Recorded version {record.version} ({record.status}) for task {task}.", "success")


material_col, decision_col = st.columns([3, 2], gap="medium")
with material_col, st.container(height=640, border=False):
    if view.rubric == "judge":
        material.render_judge_audit(view.material)
    else:
        material.render_mcq(view.material)
with decision_col:
    st.markdown("**Ratings** (raters are pseudonymised)")
    st.dataframe(view.ratings_frame(), width="stretch")
    for rating in view.ratings:
        if rating.flags or rating.comment:
            st.caption(plain(f"{rating.rater}: {', '.join(rating.flags) or 'no flags'}"))
            if rating.comment:
                st.text(rating.comment)
    for reason in view.comparison.reasons:
        st.warning(plain(reason))
    if view.stale:
        st.info("A rating changed after the last decision: please review it again.")
    base = (view.latest.final_scores if view.latest else None) or view.comparison.consensus or {}
    with st.form(f"decide{task_id}"):
        for dimension in rubric.dimensions:
            values = list(dimension.values)
            current = base.get(dimension.key)
            st.radio(
                dimension.name,
                values,
                horizontal=True,
                index=values.index(current) if current in values else None,
                format_func=lambda v, d=dimension: f"{v} · {d.level(v).label}",
                key=f"adj{task_id}:{dimension.key}",
            )
        st.radio("Status", ["adjudicated", "unanimous", "unresolved"], horizontal=True, key=f"adj{task_id}:status")
        st.text_area(
            "Rationale",
            key=f"adj{task_id}:rationale",
            help="Required when the final score overrides every rater, and for unresolved tasks.",
        )
        st.form_submit_button(
            "Record decision", type="primary", on_click=_record, args=(task_id, view.expected_version)
        )
    if view.history:
        st.markdown("**History**")
        st.dataframe(
            pd.DataFrame([r.to_dict() for r in view.history])[
                ["version", "status", "final_scores", "rationale", "adjudicator", "created_at"]
            ],
            hide_index=True,
            width="stretch",
        )
    lock_label = "Unlock task" if view.locked else "Lock task (reviewers can no longer edit)"
    if st.button(lock_label):
        reviewing.set_task_lock(db, task_id, not view.locked, actor_id=user)
        st.rerun()
