"""Entry point of the review app: sign-in, then pages built for the signed-in user's role.

Run with ``medrev app`` (which serves this script with the session-cookie routes, see
``medrev_asgi.py``). Every run first re-reads the signed-in account from its session token
(``session.refresh_user``), so a deactivation, a new password or a new role ends the session at
the next action. Reviewers see their queue and the review page; leads and admins also see the
study pages. Pages not built for a role are not registered at all, and every page checks the role
again itself.
"""

from contextlib import nullcontext
from pathlib import Path

import streamlit as st

from review_app.services import accounts
from review_app.services.priority import reviewer_work, yield_to_reviewers
from review_app.ui.components import accessibility
from review_app.ui.components.database import database_faults_shown, require_database
from review_app.ui.components.text import plain
from review_app.ui.session import (
    collect_after_run,
    current_user,
    engine,
    oidc_configured,
    refresh_user,
    sign_in_as,
    sign_out,
    start_compute_workers,
)

EVERYONE = ("reviewer", "lead", "admin")
LEADS = ("lead", "admin")
# (script, title, icon, section, roles): the one list of pages; URL paths are the script names.
PAGES = (
    ("views/queue.py", "My queue", ":material/inbox:", "Review", EVERYONE),
    ("views/review.py", "Review", ":material/rate_review:", "Review", EVERYONE),
    ("views/lead_progress.py", "Progress", ":material/monitoring:", "Study lead", LEADS),
    ("views/lead_agreement.py", "Agreement", ":material/join_inner:", "Study lead", LEADS),
    ("views/lead_flags.py", "Flags", ":material/flag:", "Study lead", LEADS),
    ("views/lead_adjudication.py", "Adjudication", ":material/gavel:", "Study lead", LEADS),
    ("views/lead_analysis.py", "Analysis", ":material/query_stats:", "Study lead", LEADS),
    ("views/lead_export.py", "Export", ":material/download:", "Study lead", LEADS),
    ("views/lead_setup.py", "Study set-up", ":material/tune:", "Study lead", LEADS),
    ("views/lead_import.py", "Import", ":material/upload_file:", "Study lead", LEADS),
    ("views/lead_reviewers.py", "Reviewers", ":material/group:", "Study lead", LEADS),
    ("views/lead_plan.py", "Plan", ":material/calculate:", "Study lead", LEADS),
    ("views/lead_quality.py", "Reviewers' quality", ":material/insights:", "Study lead", LEADS),
)
# A local icon: a ":material/...:" page icon makes every browser fetch it from fonts.gstatic.com.
ICON = Path(__file__).with_name("static") / "favicon.svg"


def main() -> None:
    """One run of the app: sign-in, or the signed-in user's navigation and page."""
    st.set_page_config(page_title="medrev review", page_icon=str(ICON), layout="wide")
    st.html(
        "<style>[data-testid='stMainBlockContainer']{padding-top:2.2rem;padding-bottom:1rem;}"
        # The score buttons' labels are their keys already; Streamlit's extra key badge would repeat them.
        ".stElementContainer[class*='-kb'] kbd{display:none;}</style>"
    )
    accessibility.apply_styles()
    require_database()  # a database fault is one sentence here, never a traceback
    start_compute_workers()  # with the server already (medrev_asgi); else here, whoever the page is for

    user = refresh_user()
    if user is None and oidc_configured() and getattr(st.user, "is_logged_in", False):
        account = accounts.get_user_by_email(engine(), st.user.get("email") or "")
        if account is None:
            st.error(
                f"You signed in as {plain(st.user.get('email'))}, but no active reviewer account has this email. "
                "Ask your study lead to add you."
            )
            st.button("Sign out", on_click=st.logout)
            st.stop()
        sign_in_as(account, via="oidc")  # the browser comes back with the session cookie
        user = current_user()

    if user is None:
        # Every page's address leads to the sign-in form, so a reload or a bookmarked task URL signs in and
        # then lands where it was (instead of Streamlit's "page not found").
        sign_in = [st.Page("views/sign_in.py", title="Sign in", icon=":material/login:", default=True)]
        sign_in += [st.Page("views/sign_in.py", title="Sign in", url_path=Path(p[0]).stem) for p in PAGES]
        with database_faults_shown():
            st.navigation(sign_in, position="hidden").run()
        accessibility.install_script()
        st.stop()

    sections: dict[str, list] = {}
    review_page = None
    for script, title, icon, section, roles in PAGES:
        if user.role in roles:
            listed = st.Page(script, title=title, icon=icon, default=script == "views/queue.py")
            sections.setdefault(section, []).append(listed)
            if script == "views/review.py":
                review_page = listed
    # Streamlit's own sidebar navigation breaks list markup (WCAG 1.3.1): the app draws its own, every
    # page listed, so a lead's pages are all one click away.
    page = st.navigation([p for pages in sections.values() for p in pages], position="hidden")
    reviewing = any(page is listed for listed in sections["Review"])
    with st.sidebar:
        accessibility.navigation(sections)
        st.markdown(f"**{plain(user.display_name)}**  \n{user.role}")
        st.button("Sign out", on_click=sign_out, icon=":material/logout:")
        if page is not review_page:  # there the score panel runs the same script
            accessibility.install_script()
    with database_faults_shown(), reviewer_work() if reviewing else nullcontext():
        if not reviewing:
            yield_to_reviewers()  # a lead page starts after the reviewers' requests in flight (services.priority)
        page.run()


try:
    main()
finally:  # st.stop() and st.rerun() end a run by raising: the run's garbage is collected either way
    collect_after_run()
