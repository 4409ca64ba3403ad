"""Sign-in: local accounts (argon2, throttled) and, when configured, the institution's identity provider.

Messages never say whether an account exists: a wrong username and a wrong password read the
same, and so does the lock-out after too many failures (usernames that do not exist lock too).
"""

import streamlit as st

from review_app.services import authentication
from review_app.services.errors import AccountLocked
from review_app.ui.session import client_address, engine, oidc_configured, pop_notice, sign_in_as

st.markdown("## medrev clinician review")
st.caption("Sign in to see your review queue.")
notice = pop_notice()
left, _ = st.columns([2, 3])
with left:
    if notice:
        st.info(notice)
    with st.form("sign_in", border=True):
        username = st.text_input("Username", autocomplete="username")
        password = st.text_input("Password", type="password", autocomplete="current-password")
        submitted = st.form_submit_button("Sign in", type="primary", width="stretch")
    if submitted:
        try:
            user = authentication.authenticate(engine(), username, password, client=client_address())
        except authentication.SigninBusy as exc:
            st.warning(str(exc).capitalize() + ".")
        except AccountLocked as exc:
            st.error(str(exc).capitalize() + ". Ask your study lead to reset your password if you need access now.")
        else:
            if user is None:
                st.error("Wrong username or password.")
            else:
                # The browser now loads /_medrev/session, which sets the session cookie and comes back
                # signed in; the link is for the rare browser that does not follow.
                url = sign_in_as(user)
                if not url:  # a read-only database: signed in for this browser session, no cookie
                    st.rerun()
                st.info(f"Signing you in… [Continue]({url}) if nothing happens.")
                st.stop()
    if oidc_configured():
        st.divider()
        if st.button("Sign in with your institution", width="stretch"):
            st.login()
