"""Disagreement queue and adjudication: both ratings side by side under pseudonyms, a final decision.

Dimensions the raters agree on are pre-filled and marked "agreed", so the lead decides only the
dimensions in dispute (an agreed one can still be overridden, which needs a rationale). Scores read
as "0 (label)" everywhere, under the rubric's names for the dimensions, so nobody decodes a scale.

The decision form sits below the material, so the lead clicks *Record decision* scrolled down the
page. A refused decision is shown once, next to the control that caused it, and the page scrolls
so that message and the button are both in view. A recorded one moves the form to the next task:
the confirmation (which task was decided, which one is shown now) goes just above the task picker
and the page scrolls there, where the new task starts.
"""

import json

import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from review_app.rubrics import Dimension, get_rubric
from review_app.services import adjudication, adjudication_decisions, rating_comparison, reviewing
from review_app.services.errors import ServiceError
from review_app.ui.components import material
from review_app.ui.components.pickers import pick_study
from review_app.ui.components.text import plain
from review_app.ui.session import engine, require_role, show_flashes

QUEUE_SHOWN = 500
NOTICE = "adj_notice"  # (kind, text, task): the outcome of the last Record decision, shown once
SCROLL = "adj_scroll"  # the task whose refused decision was just shown: scroll it into view once
_SCROLL_JS = """<script>
(() => {
  // Bring `first` (and, when it fits, `last`) into the window: a message drawn far from where the
  // lead clicked is otherwise never seen. `start` puts `first` just below the app's header.
  const [firstSel, lastSel, start] = %s;
  const scroller = (el) => {
    for (let p = el.parentElement; p; p = p.parentElement) {
      const y = getComputedStyle(p).overflowY;
      if ((y === "auto" || y === "scroll") && p.scrollHeight > p.clientHeight) return p;
    }
    return document.scrollingElement;
  };
  const place = () => {
    const first = document.querySelector(firstSel);
    if (!first) return;
    const last = (lastSel && document.querySelector(lastSel)) || first;
    const header = document.querySelector("[data-testid='stHeader']");
    const top = (header ? header.getBoundingClientRect().bottom : 0) + 8;
    const bottom = window.innerHeight - 8;
    const a = first.getBoundingClientRect().top, b = last.getBoundingClientRect().bottom;
    let delta = start ? a - top : Math.max(0, b - bottom);
    if (a - delta < top) delta = a - top;
    if (Math.abs(delta) > 1) scroller(first).scrollBy({ top: delta });
  };
  // The keyboard's focus goes there too (a confirmation, a refusal), shown by its outline.
  const focus = () => {
    const first = document.querySelector(firstSel);
    if (!first || first.contains(document.activeElement)) return;
    first.setAttribute("tabindex", "-1");
    first.setAttribute("data-mr-focus", "");
    first.focus({ preventScroll: true });
  };
  requestAnimationFrame(() => setTimeout(() => { focus(); place(); }, 50));
  setTimeout(place, 400);  // again once the rest of the run has been drawn below
})();
</script>"""


def _scroll_into_view(first: str, last: str | None = None, *, start: bool = False) -> None:
    """Scroll the page to the element with key ``first`` (and ``last`` below it, when both fit) and focus it."""
    selectors = [f".st-key-{first}", f".st-key-{last}" if last else None, start]
    st.html(_SCROLL_JS % json.dumps(selectors), unsafe_allow_javascript=True)


user = require_role("lead", "admin")
db = engine()
show_flashes()
notice = st.session_state.pop(NOTICE, None)
scroll_to_refusal = st.session_state.pop(SCROLL, None)
study = pick_study(db, user)
if study is None:
    st.stop()
rubric_key = st.radio("Rubric", study.rubric_keys, horizontal=True, format_func=lambda k: get_rubric(k).name)
rubric = get_rubric(rubric_key)
left, right = st.columns([3, 1], vertical_alignment="bottom")
open_only = left.toggle("Only tasks that still need a decision", value=True)
if right.button("Record unanimous decisions", help="Mark every task whose raters fully agree as unanimous."):
    try:
        st.success(plain(adjudication_decisions.auto_unanimous(db, study.name, rubric_key, actor=user)))
    except ServiceError as exc:
        st.error(plain(exc))
try:
    # a panel-scale queue has tens of thousands of tasks; the most urgent come first
    head = adjudication.disagreement_queue_head(
        db, study.name, rubric_key, open_only=open_only, limit=QUEUE_SHOWN, actor=user
    )
except ServiceError as exc:
    st.error(plain(exc))
    st.stop()


def _show_notice(slot: DeltaGenerator, shown: int | None, label: str = "") -> None:
    """The outcome of the last Record decision in view, with the task the page moved on to."""
    if notice is None:
        return
    kind, text, task = notice
    if kind == "success":
        if shown is None:
            text += " Nothing else to adjudicate here."
        elif shown != task:
            text += f" Next: task {shown} ({label}), below."
        else:
            text += " The task stays in the queue; its new version is below."
    box = slot.container(key="adj-notice")
    getattr(box, kind)(plain(text))
    with box:
        _scroll_into_view("adj-notice", start=True)


if not head.entries:
    _show_notice(st.empty(), None)
    st.success("Nothing to adjudicate here.")
    st.stop()
shown = list(head.entries)
if head.total > len(shown):
    st.caption(
        f"The {len(shown):,} most urgent of {head.total:,} tasks in the queue; as you decide them, the next "
        "ones move up."
    )
queue = adjudication.queue_frame(shown)
queue["status"] = queue["status"].fillna(adjudication.MISSING)  # not decided yet
queue["priority"] = queue["priority"].map(adjudication.PRIORITY_SHORT_LABELS)
queue["raters"] = [", ".join(e.raters) for e in shown]
# One line per task, every column in view at 1366 px (the widths add up to the 904 px main column there):
# the reason column holds a summary (rating_comparison.SUMMARY_CHARS), and the reasons in full, each rater's
# score with its label, are in the expander below and under the task's ratings.
st.dataframe(
    queue[["task_id", "priority", "subset", "raters", "summary", "status", "version", "stale"]],
    column_config={
        "task_id": st.column_config.NumberColumn("Task", width=56),
        "priority": st.column_config.TextColumn(
            "Priority",
            width=80,
            help=f"high: {adjudication.PRIORITY_LABELS[0]}, the disagreements that change a paper's headline "
            f"numbers; normal: {adjudication.PRIORITY_LABELS[1]}.",
        ),
        "subset": st.column_config.TextColumn("Subset", width=118),
        "raters": st.column_config.TextColumn("Raters", width=96),
        "summary": st.column_config.TextColumn(
            "Why it needs a decision",
            width=336,
            help="What the raters differ on, most urgent first (2 apart: two points apart). Each rater's score "
            "is under the task's ratings, and every task's in full below the table.",
        ),
        "status": st.column_config.TextColumn("Decision", width=86),
        "version": st.column_config.NumberColumn("Version", width=60),
        "stale": st.column_config.CheckboxColumn("Changed", width=70, help="A rating changed since the decision."),
    },
    hide_index=True,
    width="stretch",
)
with st.expander("Why each task needs a decision, in full"):
    st.table(
        pd.DataFrame({"Task": queue["task_id"], "Why it needs a decision": queue["reasons"]}),
        hide_index=True,
    )
labels = {e.task_id: f"Task {e.task_id} · {adjudication.PRIORITY_LABELS[e.priority]} · {e.subset}" for e in shown}
kept = st.session_state.get("adj_keep_task")
if kept is not None and kept not in labels:
    labels = {kept: f"Task {kept} · decided meanwhile by another lead"} | labels
notice_slot = st.empty()  # always there, so the elements below keep their place from run to run
task_id = st.selectbox("Task to adjudicate", list(labels), format_func=labels.get)
_show_notice(
    notice_slot, task_id, next((adjudication.PRIORITY_LABELS[e.priority] for e in shown if e.task_id == task_id), "")
)
try:
    view = adjudication.adjudication_view(db, task_id, actor=user)
except ServiceError as exc:
    st.error(plain(exc))
    st.stop()
agreed = rating_comparison.agreed_dimensions(rubric, view.ratings)
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
    st.session_state.pop(NOTICE, None)
    try:
        record = adjudication_decisions.adjudicate(
            db,
            task,
            actor=user,
            final_scores=scores,
            status=status,
            rationale=st.session_state.get(f"adj{task}:rationale", ""),
            expected_version=expected_version,
        )
    except adjudication_decisions.DecisionError as exc:  # shown next to the control that caused it
        st.session_state[f"adj{task}:errors"] = (str(exc), exc.fields)
        st.session_state[SCROLL] = task
    except ServiceError as exc:
        st.session_state["adj_keep_task"] = task
        st.session_state[NOTICE] = ("error", str(exc), task)
    else:
        st.session_state.pop("adj_keep_task", None)
        st.session_state[NOTICE] = (
            "success",
            f"Recorded version {record.version} ({record.status}) for task {task}.",
            task,
        )


message, error_fields = st.session_state.get(ERRORS, ("", ()))
# The one place the refusal is shown: the first control it names (the service lists the control to
# change first, e.g. the rationale of an override), or beside the button when it names none.
error_at = error_fields[0] if error_fields else "button"


def _error_here(field: str) -> None:
    if message and field == error_at:
        st.container(key=f"adj-refusal-{task_id}").error(plain(f"Not recorded: {message}"), icon=":material/error:")


def _given(dimension: Dimension) -> str:
    """What each rater gave on a dimension, with the labels: "R01 0 (Neutral), R02 -1 (Recognized)"."""
    return ", ".join(
        f"{r.rater} {rating_comparison.score_text(dimension, r.scores[dimension.key])}"
        for r in view.ratings
        if dimension.key in r.scores
    )


material_col, decision_col = st.columns([3, 2], gap="medium")
with material_col, st.container(height=640, border=False, key="adj-material"):  # a named tab stop (a11y.js)
    if view.rubric == "judge":
        material.render_judge_audit(view.material)
    else:
        material.render_mcq(view.material)
with decision_col:
    st.markdown("**Ratings** (raters are pseudonymised)")
    st.table(view.ratings_table(), hide_index=True)  # cells wrap in the narrow column instead of being cut
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
            name = dimension.reported_name
            if dimension.key in agreed:
                value = agreed[dimension.key]
                raters = ", ".join(r.rater for r in view.ratings if dimension.key in r.scores)
                row = st.container(key=f"adj-agreed-{task_id}-{dimension.key}")
                text, toggle = row.columns([2.4, 1.6], vertical_alignment="center")
                text.markdown(
                    f"**{plain(name)}**: {value} · {plain(dimension.level(value).label)} "
                    f":green-badge[:material/check: agreed] ({plain(raters)})"
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
                name,
                values,
                horizontal=True,
                index=None,
                help=f"Raters: {_given(dimension)}"
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
        _error_here("button")
        st.button(
            "Record decision",
            type="primary",
            on_click=_record,
            args=(task_id, view.expected_version),
            key=f"adj{task_id}:record",
        )
        if message and scroll_to_refusal == task_id:
            _scroll_into_view(f"adj-refusal-{task_id}", f"adj{task_id}-record")
    if view.history:
        st.markdown("**History**")
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "Version": r.version,
                        "Decision": r.status,
                        "Final scores": "; ".join(
                            f"{d.reported_name}: {rating_comparison.score_text(d, r.final_scores.get(d.key))}"
                            for d in rubric.dimensions
                        )
                        if r.final_scores
                        else adjudication.MISSING,
                        "Rationale": r.rationale or adjudication.MISSING,
                        "Adjudicator": r.adjudicator,
                        "Recorded (UTC)": r.created_at.strftime("%Y-%m-%d %H:%M"),
                    }
                    for r in view.history
                ]
            ),
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
