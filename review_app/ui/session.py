"""Who is signed in, and the guards every page calls before showing anything.

The signed-in reviewer lives in ``st.session_state`` (per browser session, server-side). Every
page calls ``require_role`` itself, so a page is refused even if someone reaches it by URL or by
``st.switch_page``, not only hidden from the navigation.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from review_app.db.connect import get_engine
from review_app.ui.components.text import plain

_USER_KEY = "medrev_user"


@dataclass(frozen=True)
class CurrentUser:
    id: int
    username: str
    display_name: str
    role: str

    @property
    def is_lead(self) -> bool:
        return self.role in ("lead", "admin")


def engine():
    """The process-wide engine for MEDREV_DATABASE_URL (migrated on first use)."""
    return get_engine()


def current_user() -> CurrentUser | None:
    return st.session_state.get(_USER_KEY)


def sign_in_as(user) -> None:
    st.session_state[_USER_KEY] = CurrentUser(user.id, user.username, user.display_name, user.role)


def sign_out() -> None:
    for key in list(st.session_state.keys()):
        del st.session_state[key]
    if _oidc_configured() and getattr(st.user, "is_logged_in", False):
        st.logout()


def _oidc_configured() -> bool:
    try:
        return "auth" in st.secrets
    except Exception:  # no secrets file at all
        return False


def oidc_configured() -> bool:
    return _oidc_configured()


def require_role(*roles: str) -> CurrentUser:
    """The signed-in user if their role is allowed here; otherwise an error and stop."""
    user = current_user()
    if user is None:
        st.error("Please sign in first.")
        st.stop()
    if roles and user.role not in roles:
        st.error("This page is for study leads. You do not have access to it.")
        st.stop()
    return user


def flash(message: str, kind: str = "success") -> None:
    """Show a message on the next run (after a callback changed the page)."""
    st.session_state.setdefault("_flash", []).append((kind, message))


def show_flashes() -> None:
    """Messages queued by callbacks, in a container that is always there.

    The container keeps every element below it at the same position from one run to the next
    (with or without a message), so Streamlit updates the page in place instead of briefly
    showing old and new copies of the controls.
    """
    box = st.container()
    for kind, message in st.session_state.pop("_flash", []):
        getattr(box, kind)(plain(message))  # messages quote names and service errors: shown as text
