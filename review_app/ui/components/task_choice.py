"""Which tasks the Analysis and Export pages use: one choice per study, carried between the two pages.

A task is pending while it has fewer annotations in force than planned raters
(:data:`review_app.services.study_analysis.PENDING_RULE`). The export leaves pending tasks out unless
the lead includes them; the Analysis page offers the same switch with the same default, and both
compute through the same service path, so one choice gives the same numbers on both pages.
"""

from __future__ import annotations

import streamlit as st

from review_app.services.study_analysis import DEFAULT_PENDING, PENDING_RULE, TASK_CHOICE_LABELS

CHOICE_KEY = "task_choice:{study}"  # "include" or "exclude", for both pages
WHAT = {"export": "the export", "analysis": "these numbers (and the export)"}


def _switched(study: str, widget_key: str) -> None:
    st.session_state[CHOICE_KEY.format(study=study)] = "include" if st.session_state[widget_key] else "exclude"


def chosen(study: str) -> str:
    """The study's task choice in this browser session (the export's default until the lead switches)."""
    return st.session_state.get(CHOICE_KEY.format(study=study), DEFAULT_PENDING)


def task_choice(study: str, pending: int | None, *, page: str) -> str:
    """The switch to include pending tasks, with a sentence saying which tasks the page uses.

    ``pending``: how many tasks are pending (None when unknown); with none pending there is nothing
    to choose and the page says so. The switch of each page is keyed (``export_pending:<study>`` on
    the Export page) and seeded from the shared choice before it is made, so a choice made on one
    page is the one the other shows. Returns ``include`` or ``exclude``.
    """
    choice = chosen(study)
    if pending == 0:
        st.caption("No task is pending: every task has all its planned ratings, so every task is complete.")
        return choice
    if pending:
        are = "task is" if pending == 1 else "tasks are"
        how = (
            f"included in {WHAT[page]} with the ratings they have so far"
            if choice == "include"
            else f"left out of {WHAT[page]} unless you include them with the ratings they have so far"
        )
        st.warning(
            f"{pending:,} {are} still pending (fewer ratings than planned) and {how}"
            + ("; the manifest records which." if page == "export" else ".")
        )
    widget_key = f"{page}_pending:{study}"
    include = choice == "include"
    if st.session_state.get(widget_key) != include:
        st.session_state[widget_key] = include
    st.toggle(
        "Include pending tasks, with the ratings they have so far",
        key=widget_key,
        on_change=_switched,
        args=(study, widget_key),
        help=f"Pending: {PENDING_RULE.split(';')[0]}. The Analysis and Export pages share this choice.",
    )
    choice = "include" if st.session_state[widget_key] else "exclude"
    if page == "export":
        st.caption(f"The export uses {TASK_CHOICE_LABELS[choice]}; the Analysis page shows the same numbers.")
    return choice
