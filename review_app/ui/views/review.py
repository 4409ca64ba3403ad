"""Review page: one task per screen, material on the left, score controls on the right."""

import streamlit as st

from review_app.rubrics import get_rubric
from review_app.services import reviewing
from review_app.services.errors import ServiceError
from review_app.ui.components import material, scoring
from review_app.ui.session import engine, require_role, show_flashes

user = require_role()
db = engine()


def _go_next() -> None:
    nxt = reviewing.next_assignment(db, user.id)
    if nxt is None:
        st.query_params.clear()
    else:
        st.query_params["task"] = str(nxt)


def _skip(aid: int) -> None:
    reviewing.skip(db, aid, user)
    scoring.forget(aid)
    _go_next()


def _toggle_flag(aid: int, flagged: bool) -> None:
    reviewing.set_flag(db, aid, user, not flagged)


requested = st.query_params.get("task")
aid = int(requested) if requested and requested.isdigit() else reviewing.next_assignment(db, user.id)
show_flashes()
if aid is None:
    st.success("Your queue is empty: every task assigned to you is done. Thank you!")
    st.page_link("views/queue.py", label="Back to my queue", icon=":material/inbox:")
    st.stop()
try:
    view = reviewing.open_task(db, aid, user.id)
except ServiceError as exc:
    st.error(str(exc))
    st.page_link("views/queue.py", label="Back to my queue", icon=":material/inbox:")
    st.stop()
st.query_params["task"] = str(aid)

rubric = get_rubric(view.rubric)
done, todo = reviewing.work_counts(db, user.id)
head, left, right = st.columns([4, 1, 1], vertical_alignment="center")
head.markdown(f"#### {rubric.name}")
head.progress(
    done / max(1, done + todo),
    text=f"{view.study} · {done} of {done + todo} done, {todo} left · this task: {view.status.replace('_', ' ')}",
)
left.button("Skip for now", on_click=_skip, args=(aid,), disabled=view.status == "submitted", width="stretch")
right.button(
    "Unflag" if view.flagged else "Flag for lead",
    on_click=_toggle_flag,
    args=(aid, view.flagged),
    width="stretch",
    help="Ask the study lead to look at this task.",
)

material_col, score_col = st.columns([3, 2], gap="medium")
with material_col, st.container(height=690, border=False):
    if view.rubric == "judge":
        material.render_judge_audit(view.material)
    else:
        material.render_mcq(view.material)
with score_col:
    with st.container(height=520, border=True):
        scoring.score_fields(db, view, user, rubric)
    scoring.action_bar(db, view, user, rubric, on_done=_go_next)
