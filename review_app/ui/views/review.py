"""Review page: one task per screen, material on the left, the score panel on the right.

Laid out for a 1366x768 laptop: one header row, then two columns that end at the bottom of the
window (the material and the score fields scroll inside them), so the start of the material (the
model response first, for Rubric B) and the Submit button are visible without scrolling the page.

The task region (header, material, score panel) is a fragment: a score key, a flag, the comment,
Skip, Flag and a submit rerun it alone, not the app around it (navigation, sidebar), and a submit
shows the next task in that one run. The panel's events are handled at the top of the region, as
they always were: each names its task and dimension, and a submit carries the vector it showed.

Nothing the page says about an action takes room in the layout, so Submit never moves: the flag
control itself changes (Flag for lead / Unflag) and the message is a toast; the score panel's
own messages appear in its footer, whose height the panel accounts for.
"""

import streamlit as st

from review_app.rubrics import get_rubric
from review_app.services import flags, review_queue, reviewing
from review_app.services.errors import ServiceError
from review_app.services.priority import reviewer_work
from review_app.ui.components import material, scoring
from review_app.ui.components.text import plain
from review_app.ui.session import engine, flash, refresh_user, require_role, show_flashes

_FEEDBACK = "mr_review_feedback"  # [(kind, text)] of the last action, shown as toasts by the next run
_TOAST = {"success": (":material/check_circle:", "short"), "error": (":material/error:", "long")}  # icon, duration

user = require_role()
db = engine()

# Less chrome than the other pages: narrower margins, a tight header, columns filling the window. With the
# material's and the score panel's rules: up once per page run, outside the task's fragment, whose reruns
# (every score click) then send the task's elements alone.
st.html(
    "<style>"
    "[data-testid='stMainBlockContainer']{padding-left:1.5rem;padding-right:1.5rem;padding-top:1.4rem;}"
    ".st-key-mr-head h4{padding:0;margin:0;}"
    # Flag for lead and Unflag take the same room, so the header keeps its layout when one replaces the other.
    ".st-key-mr-flag button{min-width:7.5rem;}"
    ".st-key-mr-material{overflow-y:auto;max-height:calc(100vh - 110px);padding-right:4px;}"
    # At 200% zoom (a window under 760 CSS px wide) the task's header wraps: the progress text gets a line
    # of its own instead of a column one word wide, so the material and Submit stay near the top (WCAG 1.4.10).
    # Streamlit's header (the button that opens the collapsed sidebar) then covers the top 3.75rem.
    "@media (max-width:760px){[data-testid='stMainBlockContainer']{padding-top:3.9rem;}"
    ".st-key-mr-head{flex-wrap:wrap;row-gap:.3rem;}"
    ".st-key-mr-head>div:has([data-testid='stProgress']){flex:1 1 100%;order:3;}}"
    "</style>" + material.STYLES + scoring.STYLE
)


def _tell(text: str, kind: str = "success") -> None:
    """Feedback on an action, for the next run to show as a toast (a callback cannot draw it)."""
    st.session_state.setdefault(_FEEDBACK, []).append((kind, text))


def _show_feedback() -> None:
    """The feedback of the last action, as toasts: they float over the page and move nothing on it."""
    for kind, text in st.session_state.pop(_FEEDBACK, []):
        icon, duration = _TOAST[kind]
        st.toast(plain(text), icon=icon, duration=duration)  # messages quote service errors: shown as text


def _go_next() -> None:
    nxt = review_queue.next_assignment(db, user.id)
    if nxt is None:
        st.query_params.clear()
    else:
        st.query_params["task"] = str(nxt)


def _skip(aid: int) -> None:
    try:
        reviewing.skip(db, aid, user)
    except ServiceError as exc:  # a refusal (or a read-only database) is a message, not an exception page
        _tell(str(exc), "error")
        return
    scoring.forget(aid)
    _go_next()


def _unflag(aid: int) -> None:
    try:
        reviewing.set_flag(db, aid, user, False)
    except ServiceError as exc:
        _tell(str(exc), "error")
    else:
        _tell("Flag withdrawn.")


def _send_flag(aid: int) -> None:
    """Send the flag (what the problem is with, and the comment) to the study lead's Flags page."""
    kind = st.session_state.get(f"flag{aid}:kind") or "other"
    comment = st.session_state.get(f"flag{aid}:comment", "")
    try:
        reviewing.set_flag(db, aid, user, True, comment, kind=kind)
    except ServiceError as exc:
        _tell(str(exc), "error")
    else:
        _tell("Flag sent to the study lead.")


def _flag_control(aid: int, flagged: bool) -> None:
    """Flag for lead (what the problem is with, and a comment), or Unflag once the task is flagged."""
    answer = flags.latest_answer(db, aid)
    reply = f" The lead replied: {answer[2]}" if answer and answer[2] else ""
    if flagged:
        st.button(
            "Unflag",
            on_click=_unflag,
            args=(aid,),
            help=f"You flagged this task for the study lead ({answer[1] if answer else 'open'}).{reply}",
        )
        return
    tip = "Tell the study lead about a problem with this task."
    with st.popover("Flag for lead", help=tip):
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


_PAGE_RUN = "mr_page_run"
_TASK_RUN = "mr_task_region_run"


@st.fragment
@reviewer_work()  # its reruns alone are a reviewer's requests too (services.priority)
def _task_region(page_run: int) -> None:
    """Everything about the task: its events, header, material and score panel.

    A score, a flag, the comment, Skip, Flag and a submit rerun this region alone; a submit shows
    the next task in that same run (no second run of the whole page). A rerun of the region alone
    first resolves the browser's session again, as the app does on every full run, so a revoked
    session or a changed role still ends at the next action.
    """
    if st.session_state.get(_TASK_RUN) == page_run and refresh_user() is None:
        st.rerun()  # signed out meanwhile: the whole app shows the sign-in form
    st.session_state[_TASK_RUN] = page_run
    # The panel's events first: they name their own task, whatever this run is about to show.
    requested = st.query_params.get("task")
    aid = int(requested) if requested and requested.isdigit() else None
    just_submitted = scoring.handle_events(db, user, aid)
    if aid is None or aid == just_submitted:
        aid = review_queue.next_assignment(db, user.id)
    if aid is None:
        notice = scoring.take_pending_notice()
        if notice is not None:
            flash(notice["text"], notice["kind"])
        st.query_params.clear()
    _show_feedback()
    if aid is None:
        show_flashes()
        st.success("Your queue is empty: every task assigned to you is done. Thank you!")
        st.page_link("views/queue.py", label="Back to my queue", icon=":material/inbox:")
        return
    try:
        view = reviewing.open_task(db, aid, user.id)
    except ServiceError as exc:
        st.error(plain(exc))
        st.page_link("views/queue.py", label="Back to my queue", icon=":material/inbox:")
        return
    if requested != str(aid):  # each change of the address is one more message to the browser
        st.query_params["task"] = str(aid)

    rubric = get_rubric(view.rubric)
    done, todo = review_queue.work_counts(db, user.id)
    # One row whose buttons take the width of their labels (never cut) and the progress bar the rest.
    with st.container(key="mr-head", horizontal=True, vertical_alignment="center", wrap=False, gap="medium"):
        st.markdown(f"#### {rubric.name}", width="content")
        st.progress(
            done / max(1, done + todo),
            text=f"{plain(view.study)} · {done} of {done + todo} done, {todo} left · "
            f"this task: {view.status.replace('_', ' ')}",
        )
        st.button("Skip for now", on_click=_skip, args=(aid,), disabled=view.status == "submitted")
        with st.container(key="mr-flag", width="content"):
            _flag_control(aid, view.flagged)

    material_col, score_col = st.columns([11, 9], gap="small")
    with material_col, st.container(key="mr-material"):
        if view.rubric == "judge":
            material.render_judge_audit(view.material, styled=False)
        else:
            material.render_mcq(view.material, styled=False)
    with score_col:
        scoring.score_panel(view, rubric)


page_run = st.session_state.get(_PAGE_RUN, 0) + 1
st.session_state[_PAGE_RUN] = page_run
_task_region(page_run)
