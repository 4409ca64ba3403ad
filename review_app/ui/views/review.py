"""Review page: one task per screen, material on the left, the score panel on the right.

Laid out for a 1366x768 laptop: one header row, then two columns that end at the bottom of the
window (the material and the score fields scroll inside them), so the start of the material (the
model response first, for Rubric B) and the Submit button are visible without scrolling the page.
"""

import streamlit as st

from review_app.rubrics import get_rubric
from review_app.services import flags, reviewing
from review_app.services.errors import ServiceError
from review_app.ui.components import material, scoring
from review_app.ui.components.text import plain
from review_app.ui.session import engine, flash, require_role, show_flashes

user = require_role()
db = engine()

# Less chrome than the other pages: narrower margins, a tight header, columns filling the window.
st.html(
    "<style>"
    "[data-testid='stMainBlockContainer']{padding-left:1.5rem;padding-right:1.5rem;padding-top:1.4rem;}"
    ".st-key-mr-head h4{padding:0;margin:0;}"
    ".st-key-mr-material{overflow-y:auto;max-height:calc(100vh - 110px);padding-right:4px;}"
    "</style>"
)


def _go_next() -> None:
    nxt = reviewing.next_assignment(db, user.id)
    if nxt is None:
        st.query_params.clear()
    else:
        st.query_params["task"] = str(nxt)


def _skip(aid: int) -> None:
    try:
        reviewing.skip(db, aid, user)
    except ServiceError as exc:  # a refusal (or a read-only database) is a message, not an exception page
        flash(str(exc), "error")
        return
    scoring.forget(aid)
    _go_next()


def _unflag(aid: int) -> None:
    try:
        reviewing.set_flag(db, aid, user, False)
    except ServiceError as exc:
        flash(str(exc), "error")


def _send_flag(aid: int) -> None:
    """Send the flag (what the problem is with, and the comment) to the study lead's Flags page."""
    kind = st.session_state.get(f"flag{aid}:kind") or "other"
    comment = st.session_state.get(f"flag{aid}:comment", "")
    try:
        reviewing.set_flag(db, aid, user, True, comment, kind=kind)
    except ServiceError as exc:
        flash(str(exc), "error")
    else:
        flash("Flag sent to the study lead.", "success")


# The panel's events first: they name their own task, whatever this run is about to show.
just_submitted = scoring.handle_events(db, user)
requested = st.query_params.get("task")
aid = int(requested) if requested and requested.isdigit() else None
if aid is None or aid == just_submitted:
    aid = reviewing.next_assignment(db, user.id)
if aid is None:
    notice = scoring.take_pending_notice()
    if notice is not None:
        flash(notice["text"], notice["kind"])
    st.query_params.clear()
show_flashes()
if aid is None:
    st.success("Your queue is empty: every task assigned to you is done. Thank you!")
    st.page_link("views/queue.py", label="Back to my queue", icon=":material/inbox:")
    st.stop()
try:
    view = reviewing.open_task(db, aid, user.id)
except ServiceError as exc:
    st.error(plain(exc))
    st.page_link("views/queue.py", label="Back to my queue", icon=":material/inbox:")
    st.stop()
st.query_params["task"] = str(aid)

rubric = get_rubric(view.rubric)
done, todo = reviewing.work_counts(db, user.id)
with st.container(key="mr-head"):
    head, progress, left, right = st.columns([2.8, 4.2, 1.1, 1.1], vertical_alignment="center")
head.markdown(f"#### {rubric.name}")
progress.progress(
    done / max(1, done + todo),
    text=f"{plain(view.study)} · {done} of {done + todo} done, {todo} left · "
    f"this task: {view.status.replace('_', ' ')}",
)
left.button("Skip for now", on_click=_skip, args=(aid,), disabled=view.status == "submitted", width="stretch")
answer = flags.latest_answer(db, aid)
reply = f" The lead replied: {answer[2]}" if answer and answer[2] else ""
if view.flagged:
    right.button(
        "Unflag",
        on_click=_unflag,
        args=(aid,),
        width="stretch",
        help=f"You flagged this task for the study lead ({answer[1] if answer else 'open'}).{reply}",
    )
else:
    with right.popover("Flag for lead", width="stretch", help="Tell the study lead about a problem with this task."):
        st.radio(
            "The problem is with",
            list(flags.KIND_LABELS),
            format_func=lambda k: flags.KIND_LABELS[k].removeprefix("Problem with "),
            key=f"flag{aid}:kind",
        )
        st.text_area("Comment for the lead", key=f"flag{aid}:comment", max_chars=flags.MAX_TEXT)
        if reply:
            st.caption(plain(reply.strip()))
        st.button("Send to lead", type="primary", on_click=_send_flag, args=(aid,))

material_col, score_col = st.columns([11, 9], gap="small")
with material_col, st.container(key="mr-material"):
    if view.rubric == "judge":
        material.render_judge_audit(view.material)
    else:
        material.render_mcq(view.material)
with score_col:
    scoring.score_panel(view, rubric)
