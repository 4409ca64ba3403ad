"""Flags reviewers raised for the study lead: the queue, and for each flag resolve, reply or exclude the task.

Every answer goes through ``services.flags`` (which checks that the user leads this study and
records an audit entry); this page only lists and forwards.
"""

import pandas as pd
import streamlit as st

from review_app.services import flags
from review_app.services.errors import ServiceError
from review_app.ui.components import tables
from review_app.ui.components.pickers import pick_study
from review_app.ui.components.text import plain
from review_app.ui.session import engine, flash, require_role, show_flashes

user = require_role("lead", "admin")
db = engine()
show_flashes()
study = pick_study(db, user)
if study is None:
    st.stop()
show_all = st.toggle("Show answered flags too", key="flags_show_all")
try:
    rows = flags.flag_queue(db, study.name, actor=user, statuses=None if show_all else ("open",))
except ServiceError as exc:
    st.error(plain(exc))
    st.stop()
counts = flags.flag_counts(db, study.name, actor=user)
a, b, c = st.columns(3)
a.metric("Open flags", f"{counts['open']:,}")
b.metric("Resolved", f"{counts['resolved']:,}")
c.metric("Tasks excluded", f"{counts['excluded']:,}")
if not rows:
    st.success("No open flags: reviewers have raised nothing that waits for you." if not show_all else "No flags yet.")
    st.stop()
FLAG_COLUMNS = {
    "Flag": tables.Column("Flag", anchor=True, help="The flag's number (answer it below)."),
    "Task": tables.Column("Task"),
    "Rubric": tables.Column("Rubric"),
    "Reviewer": tables.Column("Reviewer", help="The study's pseudonym of the reviewer who raised it."),
    "Problem": tables.Column("Problem"),
    "Comment": tables.Column("Comment", width="medium"),
    "Raised (UTC)": tables.Column("Raised (UTC)"),
    "Status": tables.Column("Status", values={s: s.capitalize() for s in flags.STATUS_LABELS.values()}),
    "Reply": tables.Column("Reply"),
}
tables.show(
    pd.DataFrame(
        {
            "Flag": [r.flag_id for r in rows],
            "Task": [r.task_id for r in rows],
            "Rubric": [r.rubric for r in rows],
            "Reviewer": [r.reviewer for r in rows],
            "Problem": [r.kind_label for r in rows],
            "Comment": [r.comment for r in rows],
            "Raised (UTC)": [r.created_at.strftime("%Y-%m-%d %H:%M") for r in rows],
            "Status": [flags.STATUS_LABELS[r.status] for r in rows],
            "Reply": [r.reply for r in rows],
        }
    ),
    FLAG_COLUMNS,
    what=("Every flag reviewers raised in this study" if show_all else "The flags that wait for an answer")
    + ", newest first; the whole comment and reply are in the answer box below.",
)


def _answer(flag_id: int, action: str) -> None:
    reply = st.session_state.get(f"flag{flag_id}:reply", "")
    try:
        flags.answer_flag(db, flag_id, action, actor=user, reply=reply)
    except ServiceError as exc:
        st.session_state[f"flag{flag_id}:error"] = str(exc)
    else:
        st.session_state.pop(f"flag{flag_id}:error", None)
        st.session_state.pop(f"flag{flag_id}:reply", None)
        done = {
            "resolve": "resolved",
            "reply": "answered",
            "exclude": "answered: the task is excluded from the study",
            "reopen": "reopened",
        }[action]
        flash(f"Flag {flag_id} {done}.", "success")


by_id = {r.flag_id: r for r in rows}
chosen = st.selectbox(
    "Flag to answer",
    list(by_id),
    format_func=lambda i: f"Flag {i} · task {by_id[i].task_id} · {by_id[i].reviewer} · {by_id[i].kind_label}",
)
flag = by_id[chosen]
with st.container(border=True, key=f"flag-answer-{chosen}"):
    st.markdown(f"**Task {flag.task_id}** ({plain(flag.rubric)}, {plain(flag.subset)}): {plain(flag.question)}")
    st.markdown(f"**{plain(flag.reviewer)}** · {plain(flag.kind_label)} · {flags.STATUS_LABELS[flag.status]}")
    st.text(flag.comment or "(no comment)")
    if flag.reply:
        st.caption(plain(f"Your reply so far: {flag.reply}"))
    st.text_area("Reply to the reviewer", key=f"flag{chosen}:reply", max_chars=flags.MAX_TEXT)
    error = st.session_state.get(f"flag{chosen}:error")
    if error:
        st.error(plain(error))
    cols = st.columns(4)
    is_open = flag.status == "open"
    cols[0].button("Resolve", type="primary", on_click=_answer, args=(chosen, "resolve"), disabled=not is_open)
    cols[1].button("Reply only", on_click=_answer, args=(chosen, "reply"), disabled=flag.status == "withdrawn")
    cols[2].button(
        "Exclude the task",
        on_click=_answer,
        args=(chosen, "exclude"),
        disabled=not is_open,
        help="The task leaves every analysis and export, and reviewers can no longer change it.",
    )
    cols[3].button("Reopen", on_click=_answer, args=(chosen, "reopen"), disabled=flag.status in ("open", "withdrawn"))
