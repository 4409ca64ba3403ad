"""Who is signed in, re-read at every script run, and the guards every page calls before showing anything.

A sign-in is a server-side session (``services.sessions``) named by a signed token. The token
lives in an HttpOnly, SameSite=Strict cookie set by the ``/_medrev/session`` route (so a reload or a
second tab stays signed in) and, for the browser session that signed in, in ``st.session_state``.
:func:`refresh_user` runs at the top of every script run (``app.py``) and resolves the token
again: a revoked or expired session, a deactivated account, or a password or role change since the
sign-in ends the session with a message. Widget callbacks run before the script body, so the
services check the acting user themselves too: the pages pass :class:`CurrentUser` (an ``Actor``
that carries the session's version) and a stale session's action is refused there.

Every page calls ``require_role`` itself, so a page is refused even if someone reaches it by URL
or by ``st.switch_page``, not only hidden from the navigation.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass
from urllib.parse import urlencode, urlparse

import streamlit as st

from review_app.config import get_settings
from review_app.db.connect import get_engine
from review_app.db.errors import DatabaseReadOnly
from review_app.services import accounts, authentication, sessions
from review_app.services.actors import Actor
from review_app.services.errors import NotFound
from review_app.ui.components.text import plain

_USER_KEY = "medrev_user"
_TOKEN_KEY = "medrev_token"
_ENDED_KEY = "medrev_ended_tokens"  # tokens this browser session knows are dead (its cookie may still name one)
_NOTICE_KEY = "medrev_notice"
_READ_ONLY_KEY = "medrev_read_only_sign_in"  # signed in on a read-only database: no session row, no cookie
ROUTE_PREFIX = "/_medrev"
# The services whose statistics the lead pages send to the compute worker process (imported there when
# it starts: with the server, see ``medrev_asgi``, or at the first page run).
LEAD_JOB_MODULES = (
    "review_app.services.study_analysis",
    "review_app.services.cached_analyses",
    "review_app.services.export.agreement_page",
    "review_app.services.reviewer_monitoring",
    "review_app.services.adjudication",
)


def start_compute_workers(*, create: bool = True) -> None:
    """Start the compute worker for the configured database now, without waiting (a lock and a check once up).

    A worker's start (a new interpreter importing pandas, SciPy and the services) took 1-2 s, which
    a lead's first statistic waited for when nothing had started it before. With ``create=False`` a
    SQLite file that does not exist is left alone, and a database that cannot be opened starts
    nothing: the first page run reports the fault and starts the worker later.
    """
    from review_app.services import compute_workers

    try:
        engine = get_engine(create=create)
    except Exception:  # reported by the page that needs the database (require_database)
        return
    compute_workers.prestart(engine, LEAD_JOB_MODULES)


def collect_after_run() -> None:
    """Collect the garbage one script run left in reference cycles: the young generations only.

    ``medrev app`` turns off Streamlit's full collection after every run (``runner.postScriptGC``):
    that pass walks every object made since start-up (plotly's and PIL's lazily loaded modules, the
    SQLAlchemy statement cache, every session's state), holding the GIL in the script's thread, so a
    reviewer's submit waited 4-15 ms for it on every run and longer while a lead page ran in another
    session. A run's own cycles are young: collecting generations 0 and 1 frees them as promptly for
    well under a millisecond. Older cycles (a closed session's state) are left to Python's automatic
    full collections, which start-up's ``gc.freeze`` keeps cheap (``medrev_asgi``).
    """
    gc.collect(1)


@dataclass(frozen=True)
class CurrentUser(Actor):
    """The signed-in account as read at the start of this script run; pass it to services as the actor."""

    username: str = ""
    display_name: str = ""
    role: str = "reviewer"

    @classmethod
    def of(cls, account) -> CurrentUser:
        """The actor for ``account`` (a ``Reviewer`` row) as of now: its session version included."""
        return cls(
            id=account.id,
            session_version=account.session_version,
            username=account.username,
            display_name=account.display_name,
            role=account.role,
        )

    @property
    def is_lead(self) -> bool:
        return self.role in ("lead", "admin")


def engine():
    """The process-wide engine for MEDREV_DATABASE_URL (migrated on first use)."""
    return get_engine()


def current_user() -> CurrentUser | None:
    """The user :func:`refresh_user` found for this run (pages call ``require_role`` instead)."""
    return st.session_state.get(_USER_KEY)


def refresh_user() -> CurrentUser | None:
    """Resolve this browser's session token again and return its account, or None when signed out.

    A token that stopped working (revoked, expired, account deactivated or changed) signs the
    browser session out and leaves a notice for the sign-in page.
    """
    token = st.session_state.get(_TOKEN_KEY)
    if token is None:
        cookie = _cookie()
        if cookie and cookie not in st.session_state.get(_ENDED_KEY, ()):
            token = cookie
    if token is None and st.session_state.get(_READ_ONLY_KEY):
        return _refresh_read_only()
    if token is None:
        st.session_state.pop(_USER_KEY, None)
        return None
    found = sessions.resolve(engine(), token)
    if not isinstance(found, sessions.SessionUser):
        _forget(token, found.reason if isinstance(found, sessions.Ended) else None)
        return None
    user = CurrentUser(
        id=found.id,
        session_version=found.session_version,
        username=found.username,
        display_name=found.display_name,
        role=found.role,
    )
    st.session_state[_TOKEN_KEY] = token
    st.session_state[_USER_KEY] = user
    return user


def _refresh_read_only() -> CurrentUser | None:
    """Re-read an account signed in on a read-only database (held in this browser session only).

    Such a database cannot store a session, so a reload signs out; the account is still re-read
    at every run, so a change made elsewhere (the file made writable again) ends the session.
    """
    held: CurrentUser | None = st.session_state.get(_USER_KEY)
    try:
        account = accounts.get_user_by_id(engine(), held.id) if held is not None else None
    except NotFound:  # the account is gone: sign out below
        account = None
    if account is None or not account.active or account.session_version != held.session_version:
        _forget(None, "Your account changed or was deactivated: please sign in again.")
        return None
    user = CurrentUser.of(account)
    st.session_state[_USER_KEY] = user
    return user


def _cookie() -> str | None:
    """The session cookie this connection was opened with (the browser sends it with the websocket)."""
    value = st.context.cookies.get(sessions.COOKIE_NAME)
    return value if isinstance(value, str) and value else None  # AppTest's context hands out mocks


def _forget(token: str | None, notice: str | None) -> None:
    """Drop everything this browser session held for the signed-in user; remember the dead token."""
    ended = set(st.session_state.get(_ENDED_KEY, ()))
    if token:
        ended.add(token)
    cookie = _cookie()
    if cookie:
        ended.add(cookie)  # the cookie this connection started with is dead too, until the browser reloads
    for key in list(st.session_state.keys()):
        del st.session_state[key]
    st.session_state[_ENDED_KEY] = ended
    if notice:
        st.session_state[_NOTICE_KEY] = notice


def pop_notice() -> str | None:
    """Why the last session ended (for the sign-in page), once."""
    return st.session_state.pop(_NOTICE_KEY, None)


def sign_in_as(user, *, via: str = "password") -> str:
    """Start a session for an account that has just proved who it is; signs this browser session in.

    The browser is then sent to ``/_medrev/session``, which sets the session cookie and brings it
    back to the page it was on; the address is returned (for a fallback link).
    """
    try:
        token, nonce = sessions.start(engine(), user.id, via=via, client=client_address() or "")
    except DatabaseReadOnly:
        # Reading still works on a read-only database: sign in for this browser session only.
        st.session_state[_READ_ONLY_KEY] = True
        st.session_state[_USER_KEY] = CurrentUser.of(user)
        return ""
    st.session_state[_TOKEN_KEY] = token
    st.session_state[_USER_KEY] = CurrentUser.of(user)
    url = route_url("session", nonce=nonce, next=current_location())
    navigate(url)
    return url


def sign_out() -> None:
    """Revoke the session server-side, forget it here, and have the browser drop its cookie.

    After an identity-provider sign-in the cookie route then hands over to Streamlit's own
    ``/auth/logout`` (which ends the ``st.user`` identity and, when offered, the provider's session).
    """
    token = st.session_state.get(_TOKEN_KEY) or _cookie()
    if token:
        sessions.revoke(engine(), token)
    _forget(token, None)
    if _oidc_configured() and getattr(st.user, "is_logged_in", False):
        navigate(route_url("signout", next=f"{_base_path()}/auth/logout"))
    else:
        navigate(route_url("signout"))


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


# ---------------------------------------------------------------- the browser side


def _base_path() -> str:
    base = (st.get_option("server.baseUrlPath") or "").strip("/")
    return f"/{base}" if base else ""


def route_url(name: str, **params: str) -> str:
    """The address of one of the app's own HTTP routes (``review_app.ui.routes``)."""
    query = f"?{urlencode(params)}" if params else ""
    return f"{_base_path()}{ROUTE_PREFIX}/{name}{query}"


def current_location() -> str:
    """This page's path and query string, to come back to after the cookie is set."""
    url = st.context.url
    path = urlparse(url if isinstance(url, str) else "").path or "/"
    query = st.query_params.to_dict()
    return path + (f"?{urlencode(query)}" if query else "")


def navigate(url: str) -> None:
    """Send the browser to ``url`` (a full page load).

    Streamlit has no public command for this; ``st.login`` and ``st.logout`` use the same
    ``auth_redirect`` message, which the frontend answers with ``window.location.href = url``.
    """
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    if ctx is None:
        return
    message = ForwardMsg()
    message.auth_redirect.url = url
    ctx.enqueue(message)


def client_address() -> str:
    """The client's network address, for per-address sign-in limits (``authentication.client_key``).

    Streamlit reports the websocket peer (None for loopback); ``X-Forwarded-For`` counts only when
    that peer is a proxy listed in ``MEDREV_TRUSTED_PROXIES``.
    """
    peer = st.context.ip_address
    header = st.context.headers.get("X-Forwarded-For")
    return authentication.client_key(
        peer if isinstance(peer, str) else None,  # AppTest's context hands out mocks
        header if isinstance(header, str) else None,
        get_settings().trusted_proxies,
    )


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
