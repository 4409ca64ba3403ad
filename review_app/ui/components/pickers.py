"""Small selectors shared by the lead pages."""

from __future__ import annotations

import contextlib

import streamlit as st
from sqlalchemy import Engine
from streamlit.runtime.scriptrunner import get_script_run_ctx

from review_app.db.models import Study
from review_app.services import preferences, studies
from review_app.services.errors import NotFound, PermissionDenied, ServiceError
from review_app.ui.components.text import plain
from review_app.ui.session import CurrentUser

STUDY_KEY = "lead_study"
"""The study the lead works on, by name: kept for the whole browser session, whichever page runs.

Set it (e.g. to a study just created) before :func:`pick_study` runs and the selector shows it.
"""
_WIDGET_KEY = "lead_study_selector"
_PAGE_KEY = "lead_study_selector_page"  # the page whose selector ran last
_SAVED_KEY = "lead_study_saved"  # the choice the database holds for the signed-in account, as last known


def _page() -> str:
    """The running page's id (the widget of each page is its own widget, whatever its key)."""
    ctx = get_script_run_ctx()
    return ctx.page_script_hash if ctx is not None else ""


def _chosen() -> None:
    st.session_state[STUDY_KEY] = st.session_state[_WIDGET_KEY]


def _refusal(db: Engine, user: CurrentUser, name: object) -> PermissionDenied | None:
    """Why ``user`` may not open the study ``name`` that the session holds (None: it is gone, or was never one)."""
    if not isinstance(name, str):
        return None
    try:
        studies.get_study(db, name, actor=user)
    except PermissionDenied as refused:
        return refused
    except NotFound:
        return None
    return None


def pick_study(db: Engine, user: CurrentUser) -> Study | None:
    """The one study selector of every lead page, offering the studies ``user`` leads (an admin: every study).

    None (with a hint) when there is none, or when the session holds a study the user does not lead
    (chosen before they stopped leading it, or set by hand): the page shows the service's refusal
    and a selector of the user's own studies, and none of that study's data.

    The widget's index must not come from session state on each run: an unkeyed selectbox whose
    index changes becomes a new widget, and the browser snapped back to the previous study. The
    widget is keyed, its change callback copies the choice into ``lead_study`` (Streamlit drops a
    widget's own state on any page run without it, e.g. Import), and before the widget is made its
    state is seeded from ``lead_study`` when it may differ, so a study chosen on another page, or
    created on Study set-up, is the one shown. A new browser session starts from the study the
    account chose last (``services.preferences``); the database is written only when the choice
    changes, so a rerun costs no write.
    """
    all_studies = studies.list_studies(db, actor=user)
    if not all_studies:
        if user.role == "admin":
            st.info("No study yet. Create one on the Study set-up page.")
        else:
            st.info(
                "You lead no study yet: create one on the Study set-up page, or ask an admin (or a lead of a "
                "study) to make you one of its leads."
            )
        return None
    names = [s.name for s in all_studies]
    if STUDY_KEY not in st.session_state:
        remembered = preferences.last_study(db, user)
        st.session_state[STUDY_KEY] = remembered if remembered in names else names[-1]
        st.session_state[_SAVED_KEY] = st.session_state[STUDY_KEY]
    chosen = st.session_state[STUDY_KEY]
    if chosen not in names:
        refused = _refusal(db, user, chosen)
        if refused is not None:  # another panel's study: its refusal, and a choice among the user's own
            st.error(plain(refused), icon=":material/block:")
            st.session_state[_WIDGET_KEY] = None
            st.selectbox("Study", names, index=None, key=_WIDGET_KEY, on_change=_chosen, placeholder="Your studies")
            st.session_state[_PAGE_KEY] = _page()
            return None
        chosen = st.session_state[STUDY_KEY] = names[-1]  # a study that is gone, or a name that never was one
    # Seeded only when the widget may not hold the choice: a value written to ``lead_study`` by other
    # code, or the first run on another page (there the key still reads the previous page's widget,
    # whose state the new page's widget does not get). Seeding on every run would push the value to
    # the browser each time, over a choice the user is making while the run is under way.
    page = _page()
    if st.session_state.get(_WIDGET_KEY) != chosen or st.session_state.get(_PAGE_KEY) != page:
        st.session_state[_WIDGET_KEY] = chosen
    st.selectbox("Study", names, key=_WIDGET_KEY, on_change=_chosen)
    st.session_state[_PAGE_KEY] = page  # once the widget exists: a run stopped before it seeds again
    if st.session_state.get(_SAVED_KEY) != chosen:
        st.session_state[_SAVED_KEY] = chosen  # also on failure: a read-only database is not retried each rerun
        # On failure the choice still holds for this session; the page's own actions report a real fault.
        with contextlib.suppress(ServiceError):
            preferences.remember_study(db, user.username, chosen, actor=user)
    return next(s for s in all_studies if s.name == chosen)
