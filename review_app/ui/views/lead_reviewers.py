"""Reviewers: accounts, enrolment in a study, deactivation, and reassignment of a leaver's slots."""

import pandas as pd
import streamlit as st

from review_app.services import accounts, assignment, progress, studies
from review_app.services.errors import ServiceError
from review_app.ui.components.pickers import pick_study
from review_app.ui.components.text import plain
from review_app.ui.session import engine, require_role

user = require_role("lead", "admin")
db = engine()
users = accounts.list_users(db)
st.markdown("### Reviewers")
table = pd.DataFrame(
    [
        {
            "username": u.username,
            "name": u.display_name,
            "role": u.role,
            "languages": u.languages,
            "profession": u.profession,
            "country": u.country,
            "years": u.years_experience,
            "active": u.active,
        }
        for u in users
    ]
)
st.dataframe(table, hide_index=True, width="stretch")

study = pick_study(db, studies)
if study is not None:
    report = progress.study_progress(db, study.name)
    on_study = {r["username"] for r in report.by_reviewer}
    st.markdown(f"#### Enrolment in {plain(study.name)}")
    names = [u.username for u in users if u.active and u.role == "reviewer"]
    chosen = st.multiselect("Reviewers to enrol", names, default=[n for n in names if n in on_study])
    if st.button("Enrol selected"):
        try:
            assignment.enrol(db, study.name, chosen, actor_id=user.id)
            st.success(f"Enrolled {len(chosen)} reviewer(s).")
        except ServiceError as exc:
            st.error(plain(exc))
    st.markdown("#### A reviewer leaves")
    st.caption("Their unfinished tasks go to other enrolled reviewers; everything they submitted is kept.")
    leaver = st.selectbox("Reviewer", sorted(on_study), index=None, placeholder="Choose a reviewer")
    if leaver and st.button(f"Reassign {plain(leaver)}'s unfinished tasks", type="primary"):
        try:
            st.success(plain(assignment.reassign(db, study.name, leaver, actor_id=user.id)))
        except ServiceError as exc:
            st.error(plain(exc))

st.markdown("#### Accounts")
with st.form("new_user"):
    left, right = st.columns(2)
    username = left.text_input("Username")
    display = right.text_input("Display name")
    role = left.selectbox("Role", ["reviewer", "lead", "admin"] if user.role == "admin" else ["reviewer"])
    languages = right.text_input("Languages", value="en", help="Comma-separated ISO codes, e.g. en,zh")
    password = st.text_input("Initial password", type="password", help="At least 10 characters.")
    if st.form_submit_button("Create account"):
        try:
            profile = accounts.UserProfile(
                username=username, display_name=display or username, role=role, languages=languages
            )
            accounts.create_user(db, profile, password=password, actor_id=user.id)
            st.success(f"Created {plain(profile.username)}.")
        except (ServiceError, ValueError) as exc:
            st.error(plain(exc))
active_names = [u.username for u in users if u.username != user.username]
left, right = st.columns(2)
with left.form("reset"):
    who = st.selectbox("Reset the password of", active_names, index=None)
    new_password = st.text_input("New password", type="password")
    if st.form_submit_button("Set password") and who:
        try:
            accounts.set_password(db, who, new_password, actor_id=user.id)
            st.success(f"Password set for {plain(who)}; any lock-out is cleared.")
        except ServiceError as exc:
            st.error(plain(exc))
with right.form("deactivate"):
    who = st.selectbox("Deactivate or reactivate", active_names, index=None)
    active = st.toggle("Active", value=True)
    if st.form_submit_button("Apply") and who:
        accounts.set_active(db, who, active, actor_id=user.id)
        st.success(f"{plain(who)} is now {'active' if active else 'deactivated'}.")
