"""Disagreement queue and adjudication: both ratings side by side under pseudonyms, a final decision.

Dimensions the raters agree on are pre-filled and marked "agreed", so the lead decides only the
dimensions in dispute (an agreed one can still be overridden, which needs a rationale). A refused
decision is shown next to the control that caused it and again beside the button, so it is in view
where the lead clicked.
"""

import pandas as pd
import streamlit as st

from review_app.rubrics import get_rubric
from review_app.services import adjudication, reviewing, studies
from review_app.services.errors import ServiceError
from review_app.ui.components import material
from review_app.ui.components.pickers import pick_study
from review_app.ui.components.text import plain
from review_app.ui.session import engine, flash, require_role, show_flashes

QUEUE_SHOWN = 500
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
    try:
        st.success(plain(adjudication.auto_unanimous(db, study.name, rubric_key, actor=user)))
    except ServiceError as exc:
        st.error(plain(exc))
try:
    # a panel-scale queue has tens of thousands of tasks; the most urgent come first
    head = adjudication.disagreement_queue_head(db, study.name, rubric_key, open_only=open_only, limit=QUEUE_SHOWN)
except ServiceError as exc:
    st.error(plain(exc))
    st.stop()
if not head.entries:
    st.success("Nothing to adjudicate here.")
    st.stop()
shown = list(head.entries)
if head.total > len(shown):
    st.caption(
        f"The {len(shown):,} most urgent of {head.total:,} tasks in the queue; as you decide them, the next "
        "ones move up."
    )
queue = adjudication.queue_frame(shown)
st.dataframe(
    queue[["task_id", "priority_label", "subset", "raters", "reasons", "status", "version", "stale"]].rename(
        columns={
            "task_id": "Task",
            "priority_label": "Priority",
            "subset": "Subset",
            "raters": "Raters",
            "reasons": "Why it needs a decision",
            "status": "Decision",
            "version": "Version",
            "stale": "Changed since decided",
        }
    ),
    hide_index=True,
    width="stretch",
)
labels = {e.task_id: f"Task {e.task_id} · {adjudication.PRIORITY_LABELS[e.priority]} · {e.subset}" for e in shown}
kept = st.session_state.get("adj_keep_task")
if kept is not None and kept not in labels:
    labels = {kept: f"Task {kept} · decided meanwhile by another lead"} | labels
task_id = st.selectbox("Task to adjudicate", list(labels), format_func=labels.get)
try:
    view = adjudication.adjudication_view(db, task_id, actor=user)
except ServiceError as exc:
    st.error(plain(exc))
    st.stop()
agreed = adjudication.agreed_dimensions(rubric, view.ratings)
ERRORS = f"adj{task_id}:errors"


def _final(task: int, key: str) -> int | None:
    """The final score the form holds for a dimension: the agreed value unless the lead overrides it."""
    if key in agreed and not st.session_state.get(f"adj{task}:{key}:override"):
        return agreed[key]
    return st.session_state.get(f"adj{task}:{key}")


def _record(task: int, expected_version: int) -> None:
    """Record the decision for the task and version the lead was looking at (even if the page moved on)."""
    status = st.session_state[f"adj{task}:status"]
    finals = {d.key: _final(task, d.key) for d in rubric.dimensions}
    scores = None if status in ("unanimous", "unresolved") else finals
    st.session_state.pop(f"adj{task}:errors", None)
    try:
        record = adjudication.adjudicate(
            db,
            task,
            actor=user,
            final_scores=scores,
            status=status,
            rationale=st.session_state.get(f"adj{task}:rationale", ""),
            expected_version=expected_version,
        )
    except adjudication.DecisionError as exc:  # shown next to the fields that caused it
        st.session_state[f"adj{task}:errors"] = (str(exc), exc.fields)
    except ServiceError as exc:
        st.session_state["adj_keep_task"] = task
        flash(str(exc), "error")
    else:
        st.session_state.pop("adj_keep_task", None)
        flash(f"Recorded version {record.version} ({record.status}) for task {task}.", "success")


message, error_fields = st.session_state.get(ERRORS, ("", ()))


def _error_here(field: str) -> None:
    if message and field in error_fields:
        st.error(plain(message), icon=":material/error:")


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
    previous = view.latest.final_scores if view.latest else {}
    n_open = len(rubric.dimensions) - len(agreed)
    st.markdown(
        f"**Decision**: {len(agreed)} dimension{'s' if len(agreed) != 1 else ''} agreed by the raters "
        f"(pre-filled); {n_open} to decide."
    )
    with st.container(border=True, key=f"adj-form-{task_id}"):
        for dimension in rubric.dimensions:
            key = f"adj{task_id}:{dimension.key}"
            values = list(dimension.values)
            given = ", ".join(f"{r.rater} {r.scores[dimension.key]}" for r in view.ratings if dimension.key in r.scores)
            if dimension.key in agreed:
                value = agreed[dimension.key]
                row = st.container(key=f"adj-agreed-{task_id}-{dimension.key}")
                text, toggle = row.columns([2.4, 1.6], vertical_alignment="center")
                text.markdown(
                    f"**{plain(dimension.name)}**: {value} · {plain(dimension.level(value).label)} "
                    f":green-badge[:material/check: agreed] ({plain(given)})"
                )
                override = toggle.toggle("Override", key=f"{key}:override", help="Needs a rationale.")
                if not override:
                    _error_here(dimension.key)
                    continue
                if key not in st.session_state:
                    st.session_state[key] = value
            else:
                current = previous.get(dimension.key)
                if key not in st.session_state and current in values:
                    st.session_state[key] = current
            st.radio(
                dimension.name,
                values,
                horizontal=True,
                index=None,
                help=f"Raters: {given}"
                + (" (they agree; your score overrides them)" if dimension.key in agreed else ""),
                format_func=lambda v, d=dimension: f"{v} · {d.level(v).label}",
                key=key,
            )
            _error_here(dimension.key)
        st.radio("Status", ["adjudicated", "unanimous", "unresolved"], horizontal=True, key=f"adj{task_id}:status")
        _error_here("status")
        st.text_area(
            "Rationale",
            key=f"adj{task_id}:rationale",
            help="Required when the final score overrides every rater (an agreed dimension included), "
            "and for unresolved tasks.",
        )
        _error_here("rationale")
        if message:
            st.error(plain(f"Not recorded: {message}"), icon=":material/error:")
        st.button(
            "Record decision",
            type="primary",
            on_click=_record,
            args=(task_id, view.expected_version),
            key=f"adj{task_id}:record",
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
        try:
            reviewing.set_task_lock(db, task_id, not view.locked, actor_id=user)
        except ServiceError as exc:
            st.error(plain(exc))
        else:
            st.rerun()
